"""Rollout weights: static config, overridden by the collector's rollout API with a short TTL.

``GET {collector}/api/v1/rollouts/{name}/weights`` answers
``{"rollout": name, "weights": {"<variant>": <float 0..1>, ...}, "version": <int>}``.
On 404, a connection error, a timeout or a malformed body the last good weights are kept (the
static ones at first), so the gateway keeps serving while the collector is away.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from serving.config import GatewayConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WeightsSnapshot:
    """Weights of one rollout at some moment.

    Attributes:
        rollout: rollout name.
        weights: variant -> weight >= 0 (at least one > 0).
        version: the collector's version number, None for static config weights.
        source: ``static`` or ``collector``.
        fetched_at: ``time.monotonic()`` of the last refresh attempt (seconds).
    """

    rollout: str
    weights: Mapping[str, float]
    version: int | None
    source: str
    fetched_at: float


def parse_weights_body(body: object, rollout: str) -> tuple[dict[str, float], int | None]:
    """Validate a rollout-weights response body.

    Returns:
        ``(weights, version)``.

    Raises:
        ValueError: wrong shape, another rollout's name, a weight outside [0, 1], or all zero.
    """
    if not isinstance(body, dict):
        raise ValueError("body: a JSON object is required")
    if body.get("rollout") not in (None, rollout):
        raise ValueError(f"body.rollout: expected {rollout!r}, got {body.get('rollout')!r}")
    raw = body.get("weights")
    if not isinstance(raw, dict) or not raw:
        raise ValueError("body.weights: a non-empty object is required")
    weights: dict[str, float] = {}
    for name, w in raw.items():
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w):
            raise ValueError(f"body.weights.{name}: a number is required, got {w!r}")
        if not 0.0 <= w <= 1.0:
            raise ValueError(f"body.weights.{name}: must be in [0, 1], got {w}")
        weights[str(name)] = float(w)
    if not any(w > 0 for w in weights.values()):
        raise ValueError("body.weights: at least one weight must be > 0")
    version = body.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise ValueError(f"body.version: an integer is required, got {version!r}")
    return weights, version


class WeightsCache:
    """Per-rollout weights with a TTL, refreshed from the collector when it is configured.

    One refresh per rollout at a time (an ``asyncio.Lock``, kept only while in use, so names
    that clients invent do not accumulate); callers in the meantime get the current snapshot.
    The name is percent-quoted into the collector URL's path. Counters ``fetch_ok`` /
    ``fetch_failed`` are public for ``/metrics``-style inspection and tests.
    """

    def __init__(
        self,
        config: GatewayConfig,
        *,
        client: httpx.AsyncClient | None,
        collector_url: str | None,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args: ``client`` and ``collector_url`` None disable remote refresh; ``ttl_s`` > 0.

        Raises:
            ValueError: ``ttl_s`` <= 0.
        """
        if ttl_s <= 0:
            raise ValueError(f"ttl_s: must be > 0, got {ttl_s}")
        self._client = client
        self._url = collector_url.rstrip("/") if collector_url else None
        self._ttl = ttl_s
        self._clock = clock
        # a lock lives while a refresh holds it: names the clients make up leave nothing behind
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._snap: dict[str, WeightsSnapshot] = {
            name: WeightsSnapshot(name, dict(r.weights), None, "static", -math.inf)
            for name, r in config.rollouts.items()
        }
        self.fetch_ok = 0
        self.fetch_failed = 0

    def snapshot(self, rollout: str) -> WeightsSnapshot | None:
        """Current weights without refreshing; None for an unknown rollout."""
        return self._snap.get(rollout)

    async def get(self, rollout: str) -> WeightsSnapshot | None:
        """Weights of ``rollout``, refreshed from the collector if older than the TTL.

        Returns None when the rollout is neither configured nor known to the collector.
        """
        snap = self._snap.get(rollout)
        if self._client is None or self._url is None:
            return snap
        if snap is not None and self._clock() - snap.fetched_at < self._ttl:
            return snap
        lock = self._locks.get(rollout)
        if lock is None:
            lock = self._locks[rollout] = asyncio.Lock()
        if lock.locked() and snap is not None:
            return snap
        async with lock:
            snap = self._snap.get(rollout)
            if snap is not None and self._clock() - snap.fetched_at < self._ttl:
                return snap
            return await self._refresh(rollout, snap)

    async def _refresh(self, rollout: str, snap: WeightsSnapshot | None) -> WeightsSnapshot | None:
        assert self._client is not None
        now = self._clock()
        url = f"{self._url}/api/v1/rollouts/{quote(rollout, safe='')}/weights"
        try:
            resp = await self._client.get(url, timeout=2.0)
            if resp.status_code != 200:
                raise ValueError(f"HTTP {resp.status_code}")
            weights, version = parse_weights_body(resp.json(), rollout)
        except (httpx.HTTPError, ValueError) as exc:
            self.fetch_failed += 1
            log.debug("rollout %s: keeping %s weights (%s)", rollout, snap and snap.source, exc)
            if snap is None:
                return None
            kept = WeightsSnapshot(snap.rollout, snap.weights, snap.version, snap.source, now)
            self._snap[rollout] = kept
            return kept
        self.fetch_ok += 1
        fresh = WeightsSnapshot(rollout, weights, version, "collector", now)
        self._snap[rollout] = fresh
        return fresh
