"""The gateway's view of its engine replicas: eligibility, load, health, ejection with backoff.

* Eligibility: a request goes only to replicas that serve its model or adapter
  (:meth:`ReplicaSpec.serves`), are healthy, and are not ejected.
* Load: ``outstanding`` counts the gateway's own requests in flight at a replica (used by the
  bounded-load and least-outstanding policies of :mod:`serving.balance`).
* Ejection: a failed request (connection error or 5xx) ejects the replica for
  ``base_backoff_s * 2**(failures-1)`` seconds, capped at ``max_backoff_s`` (exponential
  backoff, as Envoy's outlier detection); when the time is up the replica is tried again
  (half-open), a success resets the failure count, another failure doubles the ejection.
* Health: :meth:`Fleet.check_all` polls ``GET /health`` (not 200: ejected like a failure)
  and ``GET /metrics`` (vLLM Prometheus text) for queue depth, requests running, KV-cache use
  and prefix-cache counters.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from serving.fleet_config import ReplicaSpec

#: vLLM metric -> :class:`ReplicaState` field (``vllm:`` prefix; counters without ``_total``).
_SCRAPED: dict[str, str] = {
    "vllm:num_requests_waiting": "queue_depth",
    "vllm:num_requests_running": "running",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "vllm:prefix_cache_queries": "prefix_queries",
    "vllm:prefix_cache_hits": "prefix_hits",
}


@dataclass
class ReplicaState:
    """Mutable state of one replica (single event loop).

    Attributes:
        spec: its configuration.
        outstanding: gateway requests in flight there.
        failures: consecutive failures (requests or health checks).
        ejected_until: ``clock()`` time before which it gets no request (0: not ejected).
        queue_depth, running, kv_cache_usage: last scraped values (None: unknown);
            KV-cache use is a fraction in [0, 1].
        prefix_queries, prefix_hits: engine prefix-cache counters (tokens), None if unknown.
        served: requests sent there since start.
    """

    spec: ReplicaSpec
    outstanding: int = 0
    failures: int = 0
    ejected_until: float = 0.0
    queue_depth: float | None = None
    running: float | None = None
    kv_cache_usage: float | None = None
    prefix_queries: float | None = None
    prefix_hits: float | None = None
    served: int = 0

    def __post_init__(self) -> None:
        parts = urlsplit(self.spec.url)
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def url(self) -> str:
        """The replica's base URL."""
        return self.spec.url

    @property
    def host(self) -> str:
        """Host part of the URL (span attribute ``server.address``)."""
        return self._host

    @property
    def port(self) -> int:
        """Port of the URL, scheme default when absent (``server.port``)."""
        return self._port


class NoReplicaError(LookupError):
    """No replica may serve the request; ``reason`` is ``unserved`` or ``unavailable``."""

    def __init__(self, model: str, reason: str) -> None:
        what = "serves" if reason == "unserved" else "is available for"
        super().__init__(f"no replica {what} model {model!r}")
        self.model = model
        self.reason = reason


class Fleet:
    """Replica states with the eligibility and ejection rules above."""

    def __init__(
        self,
        specs: Sequence[ReplicaSpec],
        *,
        base_backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Raises: ValueError when ``specs`` is empty or a backoff is not > 0."""
        if not specs:
            raise ValueError("specs: at least one replica is required")
        if base_backoff_s <= 0 or max_backoff_s < base_backoff_s:
            raise ValueError("base_backoff_s: must be > 0 and <= max_backoff_s")
        self.replicas = [ReplicaState(s) for s in specs]
        self.base_backoff_s = base_backoff_s
        self.max_backoff_s = max_backoff_s
        self.clock = clock

    def eligible(self, model: str, exclude: Iterable[str] = ()) -> list[ReplicaState]:
        """Replicas that serve ``model``, are not ejected and not in ``exclude`` (URLs).

        When every replica that serves ``model`` is ejected, all of them (less ``exclude``) are
        eligible again: Envoy's "panic" routing, since sending to a possibly-recovered replica
        beats refusing everything.

        Raises:
            NoReplicaError: none serves ``model`` (``unserved``), or all that do were tried
                already (``unavailable``).
        """
        serving = [r for r in self.replicas if r.spec.serves(model)]
        if not serving:
            raise NoReplicaError(model, "unserved")
        now = self.clock()
        skip = set(exclude)
        out = [r for r in serving if r.ejected_until <= now and r.url not in skip]
        if not out and all(r.ejected_until > now for r in serving):
            out = [r for r in serving if r.url not in skip]
        if not out:
            raise NoReplicaError(model, "unavailable")
        return out

    def failed(self, replica: ReplicaState) -> float:
        """Record a failure; eject the replica; return the ejection time (seconds)."""
        replica.failures += 1
        backoff = min(self.max_backoff_s, self.base_backoff_s * 2 ** (replica.failures - 1))
        replica.ejected_until = self.clock() + backoff
        return backoff

    def succeeded(self, replica: ReplicaState) -> None:
        """A request succeeded: the failure streak ends."""
        replica.failures = 0
        replica.ejected_until = 0.0

    def healthy_count(self, base_model: str | None = None) -> int:
        """Replicas not ejected now (of ``base_model`` when given)."""
        now = self.clock()
        return sum(
            1
            for r in self.replicas
            if r.ejected_until <= now and (base_model is None or r.spec.base_model() == base_model)
        )

    async def check(self, session: aiohttp.ClientSession, replica: ReplicaState) -> bool:
        """Probe ``/health`` then scrape ``/metrics``; eject on failure. True when healthy."""
        timeout = aiohttp.ClientTimeout(total=2.0)
        try:
            async with session.get(f"{replica.url}/health", timeout=timeout) as resp:
                ok = resp.status == 200
            if ok:
                async with session.get(f"{replica.url}/metrics", timeout=timeout) as resp:
                    if resp.status == 200:
                        apply_metrics(replica, await resp.text())
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        if not ok and replica.ejected_until <= self.clock():
            self.failed(replica)
        return ok

    async def check_all(self, session: aiohttp.ClientSession) -> None:
        """Probe every replica concurrently."""
        await asyncio.gather(*(self.check(session, r) for r in self.replicas))


def apply_metrics(replica: ReplicaState, text: str) -> None:
    """Read the :data:`_SCRAPED` values from a Prometheus text page into ``replica``.

    Values are summed over label sets (e.g. several ``model_name``); unparsable pages are
    ignored (values stay as they were).
    """
    sums: dict[str, float] = {}
    try:
        for fam in text_string_to_metric_families(text):
            fld = _SCRAPED.get(fam.name)
            if fld is None:
                continue
            for s in fam.samples:
                if s.name in (fam.name, fam.name + "_total"):
                    sums[fld] = sums.get(fld, 0.0) + float(s.value)
    except ValueError:
        return
    for fld, v in sums.items():
        setattr(replica, fld, v)
