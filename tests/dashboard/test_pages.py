"""Every page of the dashboard under Streamlit's AppTest against a seeded store.

The store is filled through the collector's OTLP/HTTP and feedback endpoints (see
tests/dashboard/conftest.py); assertions compare what the pages show with what was sent.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from sqlalchemy import select
from streamlit.testing.v1 import AppTest

from collector.background import HOUR_NS
from collector.store.engine import make_engine
from collector.store.models.judges import HumanLabel, ReviewItem
from driftline.demo.seed import SELF_HOSTED_SERVICE
from driftline.demo.seed_demo import GPU_USD_PER_HOUR, DemoSeed
from judges.agreement import cohen_kappa
from tests.dashboard.conftest import APP, N_CALLS

PAGES = ("overview", "latency", "cost", "quality", "review", "drift", "canary", "alerts", "calls")


def open_page(monkeypatch: pytest.MonkeyPatch, url: str, page: str) -> AppTest:
    monkeypatch.setenv("DRIFTLINE_DATABASE_URL", url)
    monkeypatch.setenv("DRIFTLINE_DASHBOARD_DEV", "true")
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    if page != "overview":
        at.switch_page(f"views/{page}.py")
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metric(at: AppTest, label: str) -> str:
    values = [m.value for m in at.metric if m.label == label]
    assert values, f"no metric {label!r} in {[m.label for m in at.metric]}"
    return str(values[0])


def charts(at: AppTest) -> int:
    return len(at.get("vega_lite_chart"))


def expected_gpu_usd(seed: DemoSeed) -> float:
    """USD the amortisation spreads: each clock hour with a stored self-hosted call costs
    GPU_USD_PER_HOUR times the share of the hour elapsed at seeding time."""
    now_ns = int(seed.now_s * 1e9)
    hours = {
        c.start_unix_nano // HOUR_NS * HOUR_NS
        for c in seed.calls.calls
        if c.service == SELF_HOSTED_SERVICE and not c.failed
    }
    return sum(GPU_USD_PER_HOUR * min(1.0, (now_ns - h) / HOUR_NS) for h in hours)


def page_text(at: AppTest) -> str:
    """Every markdown, caption, text and alert string of the page."""
    kinds = ("markdown", "caption", "text", "success", "info", "warning", "error")
    return "\n".join(str(getattr(e, "value", "")) for kind in kinds for e in at.get(kind))


def check_page(at: AppTest, page: str, seed: DemoSeed) -> None:
    """Page-specific checks that real numbers from the seed appear."""
    sent = seed.calls.calls
    if page == "overview":
        failed = sum(c.failed for c in sent)
        assert metric(at, "Error rate") == f"{failed / N_CALLS * 100:.1f} %"
        assert metric(at, "Firing alerts") == str(seed.firing_alerts)
        assert metric(at, "Running rollouts") == "1"
        assert metric(at, "TTFT p95").endswith(" ms")
        assert float(metric(at, "TTFT p95").split()[0].replace(",", "")) > 0
        # per second of the span the calls were observed over (first call to now), not of the
        # selected range
        span_s = (time.time_ns() - min(c.start_unix_nano for c in sent)) / 1e9
        assert float(metric(at, "Requests / s")) == pytest.approx(N_CALLS / span_s, rel=0.05)
    elif page == "latency":
        assert charts(at) >= 4  # percentiles, breakdown bar, 3 engine charts
        assert any("output tokens" in c.value for c in at.caption)
        assert not at.info
        # the caller's and the engine's latencies side by side (self-hosted calls merge both)
        side = next(d.value for d in at.dataframe if "latency" in d.value.columns)
        engine_rows = side[side["latency"] == "TTFT, engine"]
        assert not side[side["latency"] == "TTFT, caller (gateway / SDK)"].empty
        assert not engine_rows.empty and (engine_rows["calls"] > 0).all()
    elif page == "cost":
        gateway = sum(c.service == "support-gateway" for c in sent)
        assert metric(at, "Unpriced calls") == str(gateway)
        assert metric(at, "Priced").startswith("$")
        assert float(metric(at, "Priced")[1:]) > 0
        assert seed.gpu_costed_calls == sum(
            c.service == SELF_HOSTED_SERVICE and not c.failed for c in sent
        )
        gpu = float(metric(at, "GPU-amortised").lstrip("$").replace(",", ""))
        assert gpu == pytest.approx(expected_gpu_usd(seed), abs=1e-4)
    elif page == "quality":
        assert seed.judges is not None
        frames = [d.value for d in at.dataframe]
        rates = next(f for f in frames if "thumbs_up_per_100_calls" in f.columns)
        assert set(rates["variant"]) >= {"base", "lora-v2"}
        assert (rates["thumbs_up_per_100_calls"] > 0).all()
        est = next(f for f in frames if "ppi_estimate" in f.columns).set_index("variant")
        assert est["judged"].sum() == seed.judges.report.judged
        labels = seed.judges.audit_labels
        assert est["audit_labels"].sum() == len(labels)
        for variant in ("base", "lora-v2"):
            row = est.loc[variant]
            assert row["ppi_low"] <= row["ppi_estimate"] <= row["ppi_high"]
            assert 1.0 <= row["ppi_estimate"] <= 5.0
        kappa = cohen_kappa(
            [h.human_score for h in labels],
            [round(h.judge_score) for h in labels],
            weights="quadratic",
            labels=(1, 2, 3, 4, 5),
        ).statistic
        assert kappa is not None
        assert metric(at, "Judge vs human κ (quadratic)") == f"{kappa:.3f}"
        assert 0.0 < kappa < 1.0  # the reviewers disagree with the judge now and then
        assert charts(at) >= 4  # scores over time, PPI intervals, confusion matrix, feedback
    elif page == "canary":
        assert metric(at, "Status") == "running"
        assert metric(at, "Weights") == "80 % / 20 %"
        assert charts(at) == 1
        audit = at.dataframe[-1].value
        assert "create" in set(audit["action"])
    elif page == "alerts":
        assert metric(at, "Firing") == str(seed.firing_alerts)
        assert int(metric(at, "Resolved (history)")) >= 1  # the drift episode, maybe TTFT
        assert any("sil_" in str(d.value["id"].tolist()) for d in at.dataframe if "id" in d.value)
    elif page == "calls":
        table = at.dataframe[0].value
        assert len(table) == 50
        assert metric(at, "TTFT").endswith("ms")
        assert at.tabs
    elif page == "review":
        assert seed.judges is not None and seed.judges.open_items > 0
        text = page_text(at)
        assert "rubric **helpfulness**" in text
        progress = [str(getattr(p, "text", "")) for p in at.get("progress")]
        assert any(t.startswith("Today: 0 labelled") for t in progress), progress
        assert "reviewer grade" not in text  # the judge's verdict stays hidden until labelled
        assert not at.dataframe
        buttons = [b.label for b in at.button if str(b.key).startswith("review_")]
        assert buttons == [
            "1 · unhelpful",
            "2 · barely helpful",
            "3 · partly helpful",
            "4 · helpful",
            "5 · very helpful",
            "Skip",
        ]
    elif page == "drift":
        run = seed.drift
        assert run is not None and run.status == "ok" and run.n_drifted >= 1
        assert metric(at, "Signals drifted") == f"{run.n_drifted} / {run.n_evaluated}"
        table = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
        flagged = table[table["verdict"] == "DRIFTED"]
        assert len(flagged) == run.n_drifted
        assert (table["verdict"].iloc[: len(flagged)] == "DRIFTED").all()  # flagged first
        assert set(zip(flagged["signal"], flagged["segment"], strict=True)) == {
            (signal, segment or "all traffic") for signal, segment in run.drifted
        }
        assert "input_tokens" in set(flagged["signal"])  # the pasted-log prompts
        assert (flagged["effect size"].astype(float) > 0).all()
        untested = table[table["verdict"] == "insufficient data"]
        assert (untested["effect size"] == "–").all() and (untested["p-value"] == "–").all()
        # effect sizes: one chart per effect kind (own axis), plus the reference/current bars
        kinds = table.loc[table["verdict"] != "insufficient data", "effect kind"].nunique()
        assert charts(at) == kinds + 1
        assert str(at.selectbox(key="drift_pick").value).startswith("DRIFTED · ")
        segments = next(d.value for d in at.dataframe if "drifted_signals" in d.value.columns)
        assert segments["drifted"].sum() == run.n_drifted


@pytest.mark.parametrize("page", PAGES)
def test_page_sqlite(
    page: str, seeded_sqlite: tuple[str, DemoSeed], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seed = seeded_sqlite
    check_page(open_page(monkeypatch, url, page), page, seed)


@pytest.mark.postgres
@pytest.mark.parametrize("page", PAGES)
def test_page_postgres(
    page: str, seeded_pg: tuple[str, DemoSeed], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seed = seeded_pg
    check_page(open_page(monkeypatch, url, page), page, seed)


def test_latency_percentiles_match_numpy(
    seeded_sqlite: tuple[str, DemoSeed], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overview's TTFT p50 is numpy's percentile of the stored TTFTs (type 7)."""
    from collector.store.engine import make_engine
    from collector.store.queries import CallFilter, list_calls

    url, _ = seeded_sqlite
    with make_engine(url).connect() as conn:
        items, _ = list_calls(conn, "default", CallFilter(), limit=1000)
    ttft = [c["ttft_s"] for c in items if c["ttft_s"] is not None]
    at = open_page(monkeypatch, url, "overview")
    assert metric(at, "TTFT p50") == f"{np.percentile(ttft, 50) * 1000:,.0f} ms"


def test_review_page_labels_a_sample(
    seeded_sqlite: tuple[str, DemoSeed], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clicking a rubric button stores the human label of the shown item, then reveals the
    judge's verdict on it."""
    url, _ = seeded_sqlite
    at = open_page(monkeypatch, url, "review")
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            held = conn.execute(
                select(ReviewItem.id, ReviewItem.status).where(
                    ReviewItem.lease_owner == "dashboard-dev", ReviewItem.status == "claimed"
                )
            ).all()
        assert len(held) == 1
        item_id = held[0].id
        assert f"Item {item_id} · rubric" in page_text(at)
        at.button(key=f"review_score_{item_id}_4").click()
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        with engine.connect() as conn:
            item = conn.execute(select(ReviewItem).where(ReviewItem.id == item_id)).one()
            labels = conn.execute(
                select(HumanLabel).where(HumanLabel.review_item_id == item_id)
            ).all()
    finally:
        engine.dispose()
    assert item.status == "labelled"
    assert [(h.reviewer, h.score, h.label, h.skipped) for h in labels] == [
        ("dashboard-dev", 4.0, "helpful", False)
    ]
    assert f"Item {item_id}: labelled 4 (helpful)" in [s.value for s in at.success]
    verdict = at.dataframe[0].value
    assert list(verdict["rubric_name"]) == ["helpfulness"]
    assert verdict["explanation"].iloc[0].startswith("reviewer grade")
    assert f"Item {item_id} · rubric" not in page_text(at)  # the next item is shown


def _charts(at: AppTest) -> list[dict]:
    """The Vega-Lite specs of the page's charts (layers and facets flattened)."""
    import json

    specs = []
    for el in at.get("arrow_vega_lite_chart"):
        spec = json.loads(el.proto.spec)
        stack = [spec]
        while stack:
            s = stack.pop()
            stack.extend(s.get("layer", []))
            if "spec" in s:
                stack.append(s["spec"])
            if "encoding" in s:
                specs.append(s)
    return specs


def _shown_text(at: AppTest) -> list[str]:
    texts = [str(m.value) for m in at.metric] + [str(m.label) for m in at.metric]
    for kind in ("markdown", "caption", "info", "success", "warning", "error", "subheader"):
        texts += [str(e.value) for e in at.get(kind)]
    for df in at.dataframe:
        frame = df.value
        texts += [str(c) for c in frame.columns]
        texts += [str(v) for v in frame.astype(object).to_numpy().ravel()]
    return texts


@pytest.mark.parametrize("page", PAGES)
def test_every_chart_axis_is_titled_and_nothing_reads_none(
    monkeypatch: pytest.MonkeyPatch, seeded_sqlite: tuple[str, DemoSeed], page: str
) -> None:
    """Every quantitative / time axis carries a title (with its unit); no metric, text or
    table cell shows Python's None or a NaN."""
    at = open_page(monkeypatch, seeded_sqlite[0], page)
    for spec in _charts(at):
        for channel in ("x", "y"):
            enc = spec["encoding"].get(channel)
            if not enc or enc.get("type") not in ("quantitative", "temporal"):
                continue
            title = enc.get("title") or (enc.get("axis") or {}).get("title")
            assert title, f"{page}: {channel} axis without a title: {enc}"
            assert enc.get("axis", {}) is not None, f"{page}: {channel} axis hidden: {enc}"
    bad = [t for t in _shown_text(at) if t.strip() in ("None", "nan", "NaN", "<NA>", "NaT")]
    assert not bad, f"{page} shows {bad[:5]}"
