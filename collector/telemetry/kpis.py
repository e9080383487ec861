"""LLM KPIs as Prometheus metrics, fed from committed call records.

Histograms (seconds) labelled by ``tenant``, ``model`` and ``variant``:

* ``driftline_ttft_seconds`` — buckets of vLLM ``vllm:time_to_first_token_seconds`` (a superset
  of the semconv ``gen_ai.server.time_to_first_token`` boundaries; reference §5 and §2.8);
* ``driftline_tpot_seconds`` — buckets of semconv ``gen_ai.server.time_per_output_token``
  extended with vLLM's ``inter_token_latency_seconds`` tail (§2.8, §5);
* ``driftline_e2e_seconds`` — buckets of semconv ``gen_ai.client.operation.duration``
  (§2.8: 0.01 … 81.92 s, doubling) extended with vLLM's request-latency tail (§5).

Counters: ``driftline_tokens_total{model,variant,direction}`` (``direction`` ``input`` or
``output``, the semconv ``gen_ai.token.type`` values) and ``driftline_cost_usd_total``.
Unknown values (None) are skipped, never observed as 0; an unknown model or variant is
labelled ``unknown``.

These series name a tenant's models and its spend: register them in a registry of their own and
expose them only through :func:`collector.telemetry.exposition.scoped` (a read key sees its own
tenant's series without the ``tenant`` label, an admin every tenant's with it, an anonymous
scrape none).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram

if TYPE_CHECKING:  # the records are observed after commit; only their type is needed
    from collector.ingest.normalize import CallRecord


#: vllm:time_to_first_token_seconds (reference §5)
TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
#: gen_ai.server.time_per_output_token (§2.8) + vllm:inter_token_latency_seconds tail (§5)
TPOT_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
#: gen_ai.client.operation.duration (§2.8) + vllm request-latency tail (§5)
E2E_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24,
    20.48, 40.96, 81.92, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
UNKNOWN = "unknown"


@dataclass(frozen=True)
class LLMKpis:
    """The KPI instruments, registered in one registry (build with :meth:`create`)."""

    ttft_seconds: Histogram
    tpot_seconds: Histogram
    e2e_seconds: Histogram
    tokens: Counter
    cost_usd: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> LLMKpis:
        """Register the KPI metrics in ``registry``.

        Raises:
            ValueError: they are already registered there (prometheus_client duplicate check).
        """
        labels = ["tenant", "model", "variant"]
        return cls(
            ttft_seconds=Histogram(
                "driftline_ttft_seconds",
                "Time to first token of LLM calls, in seconds.",
                labels,
                buckets=TTFT_BUCKETS_S,
                registry=registry,
            ),
            tpot_seconds=Histogram(
                "driftline_tpot_seconds",
                "Mean time per output token after the first, per LLM call, in seconds.",
                labels,
                buckets=TPOT_BUCKETS_S,
                registry=registry,
            ),
            e2e_seconds=Histogram(
                "driftline_e2e_seconds",
                "End-to-end latency of LLM calls, in seconds.",
                labels,
                buckets=E2E_BUCKETS_S,
                registry=registry,
            ),
            tokens=Counter(
                "driftline_tokens",
                "Tokens of LLM calls by direction (input = prompt, output = completion).",
                [*labels, "direction"],
                registry=registry,
            ),
            cost_usd=Counter(
                "driftline_cost_usd",
                "Token cost of priced LLM calls, in US dollars.",
                labels,
                registry=registry,
            ),
        )

    def observe(self, records: Iterable[CallRecord]) -> int:
        """Record committed calls; returns how many were seen. Nulls are skipped per metric.

        Call once per record after its transaction committed: a record rewritten later (e.g.
        merged with its engine span) must not be passed twice for the same request.
        """
        n = 0
        # labelled children looked up once per (tenant, model, variant) and call, not per
        # record (a batch shares a handful of models; ``labels()`` costs more than the
        # observation); created only when a value is observed (no empty series)
        children: dict[tuple[str, str, str], list[Any]] = {}
        for r in records:
            n += 1
            key = (r.tenant or UNKNOWN, r.model or UNKNOWN, r.variant or UNKNOWN)
            c = children.get(key)
            if c is None:
                c = children[key] = [None] * 6
            if r.ttft_s is not None and r.ttft_s >= 0:
                if c[0] is None:
                    c[0] = self.ttft_seconds.labels(*key)
                c[0].observe(r.ttft_s)
            if r.tpot_s is not None and r.tpot_s >= 0:
                if c[1] is None:
                    c[1] = self.tpot_seconds.labels(*key)
                c[1].observe(r.tpot_s)
            if r.e2e_s is not None and r.e2e_s >= 0:
                if c[2] is None:
                    c[2] = self.e2e_seconds.labels(*key)
                c[2].observe(r.e2e_s)
            if r.input_tokens is not None and r.input_tokens >= 0:
                if c[3] is None:
                    c[3] = self.tokens.labels(*key, "input")
                c[3].inc(r.input_tokens)
            if r.output_tokens is not None and r.output_tokens >= 0:
                if c[4] is None:
                    c[4] = self.tokens.labels(*key, "output")
                c[4].inc(r.output_tokens)
            if r.cost_usd is not None and r.cost_usd >= 0:
                if c[5] is None:
                    c[5] = self.cost_usd.labels(*key)
                c[5].inc(r.cost_usd)
        return n
