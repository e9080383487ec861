"""LLM KPI metrics: the text exposition parsed back with prometheus-client's parser and checked
against numpy counts of the observed values."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from collector.ingest.normalize import CallRecord
from collector.store.schema import CALL_COLUMNS
from collector.telemetry.kpis import E2E_BUCKETS_S, TPOT_BUCKETS_S, TTFT_BUCKETS_S, LLMKpis

BASE = CallRecord(**{name: None for name in CALL_COLUMNS} | {"flags": [], "status": "ok"})  # type: ignore[arg-type]


def records(rng: np.random.Generator, n: int) -> list[CallRecord]:
    out = []
    for i in range(n):
        out.append(
            replace(
                BASE,
                tenant="default",
                trace_id=f"{i:032x}",
                span_id=f"{i:016x}",
                call_id=str(i),
                dialect="semconv",
                model="gpt-4o" if i % 2 else "llama",
                variant="candidate" if i % 3 == 0 else "baseline",
                ttft_s=None if i % 5 == 0 else float(rng.lognormal(-1.5, 1.0)),
                tpot_s=None if i % 7 == 0 else float(rng.uniform(0.005, 0.3)),
                e2e_s=float(rng.lognormal(0.5, 1.2)),
                input_tokens=int(rng.integers(1, 4000)),
                output_tokens=None if i % 4 == 0 else int(rng.integers(1, 800)),
                cost_usd=float(rng.uniform(0, 0.01)) if i % 2 else None,
            )
        )
    return out


def families(registry: CollectorRegistry) -> dict[str, Any]:
    text = generate_latest(registry).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(family: Any, suffix: str, **labels: str) -> list[Any]:
    name = family.name + suffix
    return [
        s
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def test_histograms_and_counters_match_numpy() -> None:
    rng = np.random.default_rng(3)
    recs = records(rng, 300)
    registry = CollectorRegistry()
    kpis = LLMKpis.create(registry)
    assert kpis.observe(recs[:150]) == 150
    assert kpis.observe(iter(recs[150:])) == 150
    fam = families(registry)
    groups = {(r.model, r.variant) for r in recs}
    for name, field, buckets in (
        ("driftline_ttft_seconds", "ttft_s", TTFT_BUCKETS_S),
        ("driftline_tpot_seconds", "tpot_s", TPOT_BUCKETS_S),
        ("driftline_e2e_seconds", "e2e_s", E2E_BUCKETS_S),
    ):
        family = fam[name]
        assert family.type == "histogram"
        for model, variant in groups:
            assert model is not None and variant is not None
            values = np.array(
                [
                    getattr(r, field)
                    for r in recs
                    if (r.model, r.variant) == (model, variant) and getattr(r, field) is not None
                ]
            )
            lab = {"tenant": "default", "model": model, "variant": variant}
            (count,) = samples(family, "_count", **lab)
            assert count.value == len(values)  # nulls skipped, not observed as 0
            (total,) = samples(family, "_sum", **lab)
            assert total.value == pytest.approx(values.sum())
            for le in buckets:
                (b,) = samples(family, "_bucket", le=str(float(le)), **lab)
                assert b.value == np.count_nonzero(values <= le)
            (inf,) = samples(family, "_bucket", le="+Inf", **lab)
            assert inf.value == len(values)
    tokens = fam["driftline_tokens"]
    assert tokens.type == "counter"
    for model, variant in groups:
        mine = [r for r in recs if (r.model, r.variant) == (model, variant)]
        for direction, field in (("input", "input_tokens"), ("output", "output_tokens")):
            (s,) = samples(
                tokens, "_total", model=str(model), variant=str(variant), direction=direction
            )
            assert s.value == sum(getattr(r, field) or 0 for r in mine)
        cost = samples(fam["driftline_cost_usd"], "_total", model=str(model), variant=str(variant))
        priced = [r.cost_usd for r in mine if r.cost_usd is not None]
        if priced:
            assert cost[0].value == pytest.approx(sum(priced))
        else:
            assert cost == []  # never priced: no series rather than a 0


def test_unknown_labels_and_all_null_record() -> None:
    registry = CollectorRegistry()
    kpis = LLMKpis.create(registry)
    kpis.observe([replace(BASE, ttft_s=0.25)])  # no model, no variant, nothing else known
    fam = families(registry)
    (count,) = samples(fam["driftline_ttft_seconds"], "_count")
    assert count.labels == {"tenant": "unknown", "model": "unknown", "variant": "unknown"}
    assert count.value == 1
    assert samples(fam["driftline_e2e_seconds"], "_count") == []
    assert samples(fam["driftline_tokens"], "_total") == []


def test_registering_twice_in_one_registry_fails() -> None:
    registry = CollectorRegistry()
    LLMKpis.create(registry)
    with pytest.raises(ValueError, match="Duplicated"):
        LLMKpis.create(registry)


def test_bucket_boundaries_follow_the_references() -> None:
    semconv_ttft = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0)
    assert TTFT_BUCKETS_S[: len(semconv_ttft)] == semconv_ttft
    assert E2E_BUCKETS_S[:14] == tuple(0.01 * 2**k for k in range(14))
    assert all(a < b for a, b in itertools.pairwise(TPOT_BUCKETS_S))


def test_kpis_of_another_process_file_merge_with_the_local_registry(tmp_path: Any) -> None:
    """The spool processor's KPI file and the collector's own registry: one family per name,
    counters and histogram buckets summed, each tenant's view scoped as before."""
    from collector.telemetry.exposition import ExpositionFile, scoped

    rng = np.random.default_rng(7)
    local, remote = CollectorRegistry(), CollectorRegistry()
    recs = records(rng, 40)
    LLMKpis.create(local).observe(recs[:15])
    LLMKpis.create(remote).observe(recs[15:])
    path = tmp_path / "kpis.prom"
    path.write_bytes(generate_latest(remote))
    both = CollectorRegistry()
    LLMKpis.create(both).observe(recs)
    health = CollectorRegistry()

    def families(body: bytes) -> dict[str, dict[tuple[str, tuple[Any, ...]], float]]:
        out: dict[str, dict[tuple[str, tuple[Any, ...]], float]] = {}
        for m in text_string_to_metric_families(body.decode()):
            for s in m.samples:
                if not s.name.endswith("_created"):
                    key = (s.name, tuple(sorted(s.labels.items())))
                    out.setdefault(m.name, {})[key] = s.value
        return out

    merged = scoped(health, [local, ExpositionFile(path)], tenant="default")
    expected = scoped(health, [both], tenant="default")
    got, want = families(merged), families(expected)
    assert got.keys() == want.keys() and got
    for name in want:
        assert got[name].keys() == want[name].keys()
        for key, value in want[name].items():
            assert got[name][key] == pytest.approx(value), (name, key)
    assert merged.count(b"# TYPE driftline_tokens_total counter") == 1


def _observe_one_by_one(kpis: LLMKpis, recs: list[CallRecord]) -> None:
    """The per-record reference: ``prometheus_client``'s own ``observe`` / ``inc`` per value."""
    for r in recs:
        key = (r.tenant or "unknown", r.model or "unknown", r.variant or "unknown")
        for hist, v in (
            (kpis.ttft_seconds, r.ttft_s),
            (kpis.tpot_seconds, r.tpot_s),
            (kpis.e2e_seconds, r.e2e_s),
        ):
            if v is not None and v >= 0:
                hist.labels(*key).observe(v)
        for direction, t in (("input", r.input_tokens), ("output", r.output_tokens)):
            if t is not None and t >= 0:
                kpis.tokens.labels(*key, direction).inc(t)
        if r.cost_usd is not None and r.cost_usd >= 0:
            kpis.cost_usd.labels(*key).inc(r.cost_usd)


def _exposition(registry: CollectorRegistry) -> list[str]:
    """The text exposition without the ``_created`` timestamps."""
    return [
        line for line in generate_latest(registry).decode().splitlines() if "_created" not in line
    ]


def test_batched_observation_equals_observing_each_value() -> None:
    """Per-series batches give the exposition of one ``observe`` / ``inc`` per value, to the
    last digit of every sum: edge values (bucket bounds, 0, +Inf, NaN, negatives), nulls,
    unknown labels, several batches into the same series."""
    rng = np.random.default_rng(11)
    recs = records(rng, 3000)
    edges = [*TTFT_BUCKETS_S, *TPOT_BUCKETS_S, *E2E_BUCKETS_S, 0.0, float("inf"), float("nan")]
    recs += [
        replace(
            BASE,
            tenant=("default", "t2", "")[i % 3],  # "" is labelled unknown
            model=(None, "gpt-4o")[i % 2],
            ttft_s=edges[i % len(edges)],
            tpot_s=-0.5 if i % 4 == 0 else edges[(i * 7) % len(edges)],
            e2e_s=edges[(i * 3) % len(edges)],
            input_tokens=-1 if i % 9 == 0 else i,
            output_tokens=0,
            cost_usd=float("nan") if i % 5 == 0 else i * 1.1e-7,
        )
        for i in range(400)
    ]
    rng.shuffle(recs)
    batched, reference = CollectorRegistry(), CollectorRegistry()
    kb, kr = LLMKpis.create(batched), LLMKpis.create(reference)
    for i in range(0, len(recs), 700):
        assert kb.observe(recs[i : i + 700]) == len(recs[i : i + 700])
    _observe_one_by_one(kr, recs)
    assert _exposition(batched) == _exposition(reference)
    assert len(_exposition(reference)) > 500
