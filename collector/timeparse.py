"""One parser for the times users type: ISO 8601, unix seconds, or a duration ago.

Used by the REST API (``since``/``until``), the CLIs (``--since``), drift windows and the
feedback API, so that ``2026-01-31T12:00:00Z``, ``1769860800`` and ``2h`` mean the same
everywhere.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time

NS = 1_000_000_000
#: the latest time a stored ``*_unix_nano`` (int64) holds: 2262-04-11T23:47:16.854775807Z;
#: times before 1970-01-01 are refused too (no telemetry is that old)
MAX_UNIX_NANO = 2**63 - 1
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration_s(value: str) -> float | None:
    """Seconds of a duration like ``30s``, ``15m``, ``2h``, ``7d``; None if ``value`` is not one."""
    m = _DURATION.match(value.strip())
    return float(m.group(1)) * _UNIT_S[m.group(2)] if m else None


def unix_nano(seconds: float, *, name: str) -> int:
    """Unix nanoseconds of ``seconds`` (unix seconds, finite, 0 .. :data:`MAX_UNIX_NANO` ns).

    Raises:
        ValueError: NaN, infinite or out of that range; the message names ``name``.
    """
    if not math.isfinite(seconds):
        raise ValueError(f"{name} must be a finite time, got {seconds!r}")
    if not 0 <= seconds <= MAX_UNIX_NANO / NS:  # checked before int(): 1e308 * NS is inf
        raise _out_of_range(name, seconds)
    return _checked(int(seconds * NS), name=name, shown=seconds)


def _out_of_range(name: str, shown: object) -> ValueError:
    return ValueError(
        f"{name} must be a time from 1970-01-01 to 2262-04-11 (unix seconds 0 .. "
        f"{MAX_UNIX_NANO // NS}), got {shown!r}"
    )


def _checked(ns: int, *, name: str, shown: object) -> int:
    if not 0 <= ns <= MAX_UNIX_NANO:
        raise _out_of_range(name, shown)
    return ns


def parse_time_ns(
    value: str, *, name: str, now_ns: int | None = None, durations: bool = True
) -> int:
    """Unix nanoseconds from ISO 8601 (naive = UTC), unix seconds, or a duration before
    ``now_ns`` (``2h``, ``30m``; only when ``durations``).

    Args:
        value: the text as typed.
        name: the parameter's name, used in the error message.
        now_ns: "now" for durations, unix ns (default: the wall clock).
        durations: accept ``<number><s|m|h|d>`` as "that long ago".

    Raises:
        ValueError: none of the accepted forms, or a time outside 1970-01-01 .. 2262-04-11
            (:func:`unix_nano`); the message names ``name``.
    """
    text = value.strip()
    if durations:
        ago_s = parse_duration_s(text)
        if ago_s is not None:
            now = time.time_ns() if now_ns is None else now_ns
            if not ago_s * NS <= MAX_UNIX_NANO:  # 1e400d is inf seconds
                raise ValueError(f"{name}: a duration of at most 292 years, got {value!r}")
            return _checked(now - int(ago_s * NS), name=name, shown=value)
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return unix_nano(seconds, name=name)
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        forms = "ISO 8601 (e.g. 2026-01-31T12:00:00Z), unix seconds"
        forms += " or a duration like 2h" if durations else ""
        raise ValueError(f"{name} must be {forms}, got {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return _checked(int(parsed.timestamp() * 1_000_000) * 1000, name=name, shown=value)
