"""Per-tenant rate limits: token buckets on requests per second and on tokens per minute.

A bucket of capacity ``b`` refilled at ``r`` per second admits a request of cost ``n`` when it
holds ``n``; over any interval ``t`` it admits at most ``b + r*t`` (the token-bucket arrival
curve, RFC 2697 / Turner 1986). Requests: cost 1, ``r = requests_per_s``, ``b = burst``
(default ``max(1, requests_per_s)``). Tokens: cost ``input + max_tokens`` reserved before the
call (the most the call can use), ``r = tokens_per_min / 60``, ``b = tokens_per_min``; after
the call the reservation is settled with the actual usage (unused tokens go back, a larger use
is charged, the bucket may then go negative and the next request waits).

A refused request gets 429 with ``Retry-After`` (whole seconds, rounded up) and the
OpenAI-style headers ``x-ratelimit-limit-requests``, ``x-ratelimit-remaining-requests``,
``x-ratelimit-reset-requests`` and the same for ``-tokens`` (resets as ``"1.5s"``). Buckets are
per gateway process; N gateway replicas admit up to N times the limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from serving.fleet_config import LimitsConfig, TenantLimit


class TokenBucket:
    """Capacity ``capacity``, refill ``rate`` per second; starts full."""

    def __init__(self, rate: float, capacity: float, clock: Callable[[], float]) -> None:
        """Raises: ValueError when ``rate`` or ``capacity`` is not > 0."""
        if rate <= 0 or capacity <= 0:
            raise ValueError(f"rate, capacity: must be > 0, got {rate}, {capacity}")
        self.rate = rate
        self.capacity = capacity
        self.clock = clock
        self.level = capacity
        self.t = clock()

    def _refill(self) -> None:
        now = self.clock()
        self.level = min(self.capacity, self.level + (now - self.t) * self.rate)
        self.t = now

    def wait_s(self, cost: float) -> float:
        """Seconds until ``cost`` fits (0: it fits now); ``inf`` when it never can."""
        self._refill()
        if cost <= self.level:
            return 0.0
        if cost > self.capacity:
            return math.inf
        return (cost - self.level) / self.rate

    def take(self, cost: float) -> None:
        """Remove ``cost`` (may go negative when settling a larger actual use)."""
        self._refill()
        self.level -= cost

    def reset_s(self) -> float:
        """Seconds until the bucket is full again."""
        self._refill()
        return max(0.0, (self.capacity - self.level) / self.rate)


@dataclass
class Reservation:
    """Tokens held for one admitted request, to settle with :meth:`TenantLimiter.settle`."""

    tenant: str | None
    reserved_tokens: int
    headers: dict[str, str]


class RateLimitedError(Exception):
    """Over the tenant's limit: answer 429 with ``headers`` (incl. ``Retry-After``)."""

    def __init__(self, message: str, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.headers = headers


def _fmt(seconds: float) -> str:
    return f"{seconds:.3g}s"


class TenantLimiter:
    """Buckets per tenant from :class:`LimitsConfig` (created on first use)."""

    def __init__(self, config: LimitsConfig, clock: Callable[[], float] = time.monotonic) -> None:
        """No validation needed beyond :mod:`serving.fleet_config`."""
        self.config = config
        self.clock = clock
        self._buckets: dict[str | None, tuple[TokenBucket | None, TokenBucket | None]] = {}
        self.limited = 0

    def _for(self, tenant: str | None) -> tuple[TokenBucket | None, TokenBucket | None]:
        if tenant not in self._buckets:
            lim = self.config.for_tenant(tenant) or TenantLimit()
            req = tok = None
            if lim.requests_per_s is not None:
                burst = lim.burst if lim.burst is not None else max(1.0, lim.requests_per_s)
                req = TokenBucket(lim.requests_per_s, burst, self.clock)
            if lim.tokens_per_min is not None:
                tok = TokenBucket(lim.tokens_per_min / 60.0, lim.tokens_per_min, self.clock)
            self._buckets[tenant] = (req, tok)
        return self._buckets[tenant]

    def _headers(self, req: TokenBucket | None, tok: TokenBucket | None) -> dict[str, str]:
        h: dict[str, str] = {}
        for name, b in (("requests", req), ("tokens", tok)):
            if b is None:
                continue
            h[f"x-ratelimit-limit-{name}"] = str(int(b.capacity))
            h[f"x-ratelimit-remaining-{name}"] = str(max(0, int(b.level)))
            h[f"x-ratelimit-reset-{name}"] = _fmt(b.reset_s())
        return h

    def reserve(self, tenant: str | None, tokens: int) -> Reservation:
        """Admit one request of ``tokens`` (input estimate + max_tokens) or refuse it.

        Raises:
            RateLimitedError: a bucket cannot cover it now; headers carry ``Retry-After``.
        """
        req, tok = self._for(tenant)
        if req is None and tok is None:
            return Reservation(tenant, 0, {})
        wait = max(req.wait_s(1) if req else 0.0, tok.wait_s(tokens) if tok else 0.0)
        if wait > 0:
            self.limited += 1
            h = self._headers(req, tok)
            retry = 60 if math.isinf(wait) else max(1, math.ceil(wait))
            h["retry-after"] = str(retry)
            what = "tokens per minute" if tok and tok.wait_s(tokens) > 0 else "requests per second"
            raise RateLimitedError(f"tenant {tenant!r} is over its {what} limit", h)
        if req:
            req.take(1)
        if tok:
            tok.take(tokens)
        return Reservation(tenant, tokens if tok else 0, self._headers(req, tok))

    def settle(self, r: Reservation, used_tokens: int | None) -> None:
        """Replace the reservation by the actual use (None: unknown, keep the reservation)."""
        if used_tokens is None or not r.reserved_tokens:
            return
        _, tok = self._for(r.tenant)
        if tok is not None:
            tok.take(used_tokens - r.reserved_tokens)


def estimate_input_tokens(raw_body_len: int) -> int:
    """Input tokens reserved before the engine counts them: ``ceil(bytes / 4)``.

    About four bytes of English text per BPE token (OpenAI's rule of thumb); the JSON framing
    makes it an over-estimate, and :meth:`TenantLimiter.settle` corrects it with the usage.
    """
    return max(1, math.ceil(raw_body_len / 4))
