"""The collector's own periodic jobs: engine ``/metrics`` scrapes and GPU-cost amortisation.

* Engine scrapes (``DRIFTLINE_ENGINE_METRICS_URLS``): every ``engine_scrape_interval_s`` the
  configured vLLM / TGI / SGLang / llama.cpp ``/metrics`` URLs are scraped, normalised by
  :mod:`collector.engines.scrape` and stored in ``engine_samples`` with rates derived from the
  previous sample (:func:`collector.engines.rates.engine_rates`). Each sample belongs to the
  tenant its scrape target is dedicated to (``DRIFTLINE_ENGINE_TENANTS``, URL -> tenant), else
  to ``DRIFTLINE_ENGINE_METRICS_TENANT``.
* Replica cost (``DRIFTLINE_ENGINE_GPU_COST_PER_HOUR``, URL -> USD/hour): each scrape of a
  replica records ``gpu_cost_usd = usd_per_hour * (t - t_previous) / 3600 s`` for the wall time
  since its previous successful scrape, split equally over the samples (engines / models) that
  URL exposed; the first scrape of a process has no interval and records NULL. Summed over a
  window this is the replica's cost in it, in the replica's tenant.
* GPU cost (``DRIFTLINE_GPU_COST_PER_HOUR``): a self-hosted replica's $/hour is spread over the
  tokens its service served in each clock hour: ``gpu_cost_usd = usd_per_hour * elapsed_h *
  tokens(call) / tokens(service, hour)``, with ``elapsed_h`` = 1 for a closed hour and the elapsed
  fraction for the current one. Calls with unknown token counts keep ``gpu_cost_usd = NULL``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx
from prometheus_client import Counter
from sqlalchemy import Engine, func, insert, select, update

from collector.engines.rates import engine_rates
from collector.engines.scrape import EngineSample, ScrapeError, scrape
from collector.scheduler import Job, JobContext
from collector.store.models import LLMCall
from collector.store.models.api import EngineSample as EngineSampleRow

log = logging.getLogger(__name__)
HOUR_NS = 3600 * 10**9


class EngineScraper:
    """Scrapes the configured URLs and stores one row per engine sample.

    Args:
        urls: scrape targets (one per engine replica).
        tenant: owner of the samples of a URL not in ``tenants``.
        tenants: URL -> tenant the replica is dedicated to.
        usd_per_hour: URL -> the replica's cost in USD per hour.
    """

    def __init__(
        self,
        urls: list[str],
        tenant: str,
        timeout_s: float = 5.0,
        *,
        tenants: dict[str, str] | None = None,
        usd_per_hour: dict[str, float] | None = None,
    ) -> None:
        self.urls = urls
        self.tenant = tenant
        self.tenants = dict(tenants or {})
        self.usd_per_hour = dict(usd_per_hour or {})
        self.timeout_s = timeout_s
        self._previous: dict[tuple[str, Any], EngineSample] = {}
        self._last_scrape_s: dict[str, float] = {}
        self._failures: Counter | None = None

    def replica_cost(self, url: str, scraped_at_s: float) -> float | None:
        """USD of replica ``url`` since its previous scrape (None: no rate, or first scrape);
        remembers ``scraped_at_s`` as that URL's latest scrape."""
        last = self._last_scrape_s.get(url)
        self._last_scrape_s[url] = scraped_at_s
        rate = self.usd_per_hour.get(url)
        if rate is None or last is None or scraped_at_s <= last:
            return None
        return rate * (scraped_at_s - last) / 3600.0

    def _rows(self, url: str, samples: list[EngineSample]) -> list[dict[str, Any]]:
        rows = []
        tenant = self.tenants.get(url, self.tenant)
        cost = (
            self.replica_cost(url, max(s.scraped_at_unix_s for s in samples)) if samples else None
        )
        share = None if cost is None else cost / len(samples)
        for s in samples:
            prev = self._previous.get((url, s.key))
            rates = engine_rates(prev, s) if prev is not None else None
            self._previous[(url, s.key)] = s
            rows.append(
                {
                    "tenant": tenant,
                    "url": url,
                    "engine_kind": str(s.engine_kind),
                    "model_name": s.model_name,
                    "engine_index": s.engine_index,
                    "scraped_unix_nano": int(s.scraped_at_unix_s * 1e9),
                    "kv_cache_usage": s.kv_cache_usage,
                    "requests_running": s.requests_running,
                    "requests_waiting": s.requests_waiting,
                    "prefix_cache_queries_total": s.prefix_cache_queries_total,
                    "prefix_cache_hits_total": s.prefix_cache_hits_total,
                    "spec_decode_draft_tokens_total": s.spec_decode_draft_tokens_total,
                    "spec_decode_accepted_tokens_total": s.spec_decode_accepted_tokens_total,
                    "preemptions_total": s.preemptions_total,
                    "prompt_tokens_total": s.prompt_tokens_total,
                    "generation_tokens_total": s.generation_tokens_total,
                    "prefix_cache_hit_rate": rates.prefix_cache_hit_rate
                    if rates
                    else s.reported_prefix_cache_hit_rate,
                    "spec_decode_acceptance_rate": rates.spec_decode_acceptance_rate
                    if rates
                    else s.reported_spec_accept_rate,
                    "ttft_p95_s": rates.ttft_p95_s if rates else None,
                    "itl_p95_s": rates.itl_p95_s if rates else None,
                    "gpu_cost_usd": share,
                }
            )
        return rows

    def run(self, ctx: JobContext) -> None:
        if self._failures is None:
            self._failures = Counter(
                "driftline_engine_scrape_failures",
                "Failed engine /metrics scrapes.",
                ["url"],
                registry=ctx.registry,
            )

        async def all_urls() -> list[tuple[str, list[EngineSample] | ScrapeError]]:
            async with httpx.AsyncClient() as client:
                out: list[tuple[str, list[EngineSample] | ScrapeError]] = []
                for url in self.urls:
                    try:
                        out.append((url, await scrape(client, url, self.timeout_s)))
                    except ScrapeError as exc:
                        out.append((url, exc))
                return out

        rows: list[dict[str, Any]] = []
        for url, result in asyncio.run(all_urls()):
            if isinstance(result, ScrapeError):
                self._failures.labels(url).inc()
                log.warning("engine scrape of %s failed: %s", url, result)
                continue
            rows.extend(self._rows(url, result))
        if rows:
            with ctx.engine.begin() as conn:
                conn.execute(insert(EngineSampleRow), rows)


def amortize_gpu_cost(
    engine: Engine, service: str, usd_per_hour: float, hour_start_ns: int, now_ns: int
) -> int:
    """Spread one hour of a replica's cost over its service's calls; returns calls updated."""
    hour_end = hour_start_ns + HOUR_NS
    elapsed_h = min(1.0, max(0.0, (now_ns - hour_start_ns) / HOUR_NS))
    c = LLMCall.__table__.c
    conds = [
        c.service_name == service,
        c.start_unix_nano >= hour_start_ns,
        c.start_unix_nano < hour_end,
        c.input_tokens.is_not(None),
        c.output_tokens.is_not(None),
    ]
    with engine.begin() as conn:
        total = conn.execute(
            select(func.sum(c.input_tokens + c.output_tokens)).where(*conds)
        ).scalar()
        if not total or elapsed_h == 0:
            return 0
        res = conn.execute(
            update(LLMCall)
            .where(*conds)
            .values(
                gpu_cost_usd=(c.input_tokens + c.output_tokens)
                * (usd_per_hour * elapsed_h)
                / float(total)
            )
        )
        return int(res.rowcount or 0)


def gpu_cost_job(ctx: JobContext) -> None:
    now = time.time_ns()
    current = now - now % HOUR_NS
    for service, rate in ctx.settings.gpu_cost_per_hour.items():
        for hour in (current - HOUR_NS, current):
            amortize_gpu_cost(ctx.engine, service, rate, hour, now)


def jobs(settings: Any) -> list[Job]:
    """Scrapes when engine URLs are configured; GPU amortisation when replica costs are."""
    out: list[Job] = []
    if settings.engine_metrics_urls:
        scraper = EngineScraper(
            list(settings.engine_metrics_urls),
            settings.engine_metrics_tenant,
            tenants=dict(getattr(settings, "engine_tenants", {}) or {}),
            usd_per_hour=dict(getattr(settings, "engine_gpu_cost_per_hour", {}) or {}),
        )
        out.append(Job("engine-scrape", settings.engine_scrape_interval_s, scraper.run))
    if settings.gpu_cost_per_hour:
        out.append(Job("gpu-cost", 60.0, gpu_cost_job, initial_delay_s=5.0))
    return out
