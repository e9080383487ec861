"""Delivery retry policy: which responses are retried and how long to wait. Pure functions.

Classification follows the webhook practice in reference §4.1–4.2 (Alertmanager, Standard
Webhooks, PagerDuty): 2xx is delivered; 408, 429, 5xx, timeouts and connection errors are
transient and retried; every other status (3xx — redirects are not followed — and other 4xx)
is permanent and never retried.

Backoff is exponential with multiplicative jitter, ``delay_n = min(max_delay, base * m^(n-1)) * U``
with ``U ~ Uniform(1, 1 + jitter)`` (AWS Architecture Blog, "Exponential Backoff and Jitter",
2015, with jitter on top of the exponential term), raised to at least ``Retry-After`` (RFC 9110
§10.2.3) and to at least the previous delay, so delays never decrease.
"""

from __future__ import annotations

import email.utils
import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np


class Outcome(StrEnum):
    """What one delivery attempt means for the notification."""

    DELIVERED = "delivered"
    RETRY = "retry"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class RetryPolicy:
    """Limits of one notification's delivery (seconds).

    ``max_attempts`` attempts at most; no attempt is scheduled later than ``max_age_s`` after
    the notification was enqueued. ``request_timeout_s`` bounds each HTTP attempt.
    """

    max_attempts: int = 8
    max_age_s: float = 900.0
    base_delay_s: float = 1.0
    multiplier: float = 2.0
    max_delay_s: float = 300.0
    jitter: float = 0.25
    request_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("max_age_s", "base_delay_s", "max_delay_s", "request_timeout_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {v}")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be in [0, 1], got {self.jitter}")


def classify(status_code: int | None) -> Outcome:
    """Outcome of an attempt from its HTTP status; None = timeout or connection error."""
    if status_code is None:
        return Outcome.RETRY
    if 200 <= status_code < 300:
        return Outcome.DELIVERED
    if status_code in (408, 429) or 500 <= status_code < 600:
        return Outcome.RETRY
    return Outcome.PERMANENT


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delay-seconds or HTTP-date, RFC 9110
    §10.2.3); None when absent or unparsable; never negative."""
    if value is None:
        return None
    v = value.strip()
    if v.isdigit():
        return float(int(v))
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def backoff_delay(
    policy: RetryPolicy,
    attempts_made: int,
    *,
    rng: np.random.Generator,
    previous_delay_s: float | None = None,
    retry_after_s: float | None = None,
) -> float:
    """Seconds to wait before attempt ``attempts_made + 1`` (see module docstring).

    Raises:
        ValueError: ``attempts_made`` < 1.
    """
    if attempts_made < 1:
        raise ValueError(f"attempts_made must be >= 1, got {attempts_made}")
    raw = min(policy.max_delay_s, policy.base_delay_s * policy.multiplier ** (attempts_made - 1))
    delay = raw * float(rng.uniform(1.0, 1.0 + policy.jitter))
    return max(delay, previous_delay_s or 0.0, retry_after_s or 0.0)


@dataclass(frozen=True)
class Schedule:
    """Next step after a failed attempt: retry at ``retry_at`` or give up with ``reason``."""

    retry_at: float | None
    delay_s: float | None
    failure_reason: str | None


def schedule_retry(
    policy: RetryPolicy, *, created_at: float, attempts_made: int, now: float, delay_s: float
) -> Schedule:
    """Retry at ``now + delay_s`` unless that breaks ``max_attempts`` or ``max_age_s``.

    Times are unix seconds. Failure reasons: ``max_attempts``, ``max_age``.
    """
    if attempts_made >= policy.max_attempts:
        return Schedule(None, None, "max_attempts")
    at = now + delay_s
    if at - created_at > policy.max_age_s:
        return Schedule(None, None, "max_age")
    return Schedule(at, delay_s, None)
