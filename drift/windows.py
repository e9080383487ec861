"""Reference and current windows of a drift run, and the CLI's textual forms of them.

All bounds are unix nanoseconds on the call's ``start_unix_nano``, half-open ``[start, end)``.

* rolling: current = the last ``current_hours`` before ``now``; reference = the
  ``reference_hours`` just before it (NannyML / alibi-detect "rolling reference", notes §1.2–1.3).
* range: a pinned reference date range (e.g. a known-good week) vs the current window.
* deploy: the ``reference_hours`` before a deploy marker — the first call whose ``variant``,
  ``response_model``, ``model``, ``rollout`` or ``service_name`` equals a given value — vs the
  calls since the marker (capped by the current window's end).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from collector.timeparse import parse_time_ns

NS = 1_000_000_000
DEPLOY_COLUMNS = ("variant", "response_model", "model", "rollout", "service_name")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True, slots=True)
class Windows:
    """The two windows of a run (unix ns, ``[start, end)``).

    Attributes:
        reference_kind: ``rolling`` | ``range`` | ``deploy``.
        reference_label: human form of the reference (``deploy:variant=v2``, the range), or
            ``None`` for rolling.
    """

    reference_start_ns: int
    reference_end_ns: int
    current_start_ns: int
    current_end_ns: int
    reference_kind: Literal["rolling", "range", "deploy"]
    reference_label: str | None = None

    def __post_init__(self) -> None:
        if self.reference_end_ns <= self.reference_start_ns:
            raise ValueError("reference window: end must be after start")
        if self.current_end_ns <= self.current_start_ns:
            raise ValueError("current window: end must be after start")


@dataclass(frozen=True, slots=True)
class DeployMarker:
    """``deploy:<column>=<value>``: the first call with ``column == value`` marks the deploy."""

    column: str
    value: str


def parse_time(value: str, *, now_ns: int, name: str) -> int:
    """Unix ns from ISO 8601 (naive = UTC), unix seconds, or a duration ago (``2h``, ``30m``):
    :func:`collector.timeparse.parse_time_ns`.

    Raises:
        ValueError: none of these forms; the message names ``name``.
    """
    return parse_time_ns(value, name=name, now_ns=now_ns)


def parse_reference(value: str, *, now_ns: int) -> tuple[int, int] | DeployMarker | float:
    """The CLI's ``--reference``: ``START..END`` (a range), ``deploy:COLUMN=VALUE`` or a
    duration (``24h``: rolling, that many hours before the current window).

    Returns:
        ``(start_ns, end_ns)``, a :class:`DeployMarker`, or the rolling length in hours.

    Raises:
        ValueError: malformed; the message names ``--reference``.
    """
    text = value.strip()
    if text.startswith("deploy:"):
        column, sep, val = text[len("deploy:") :].partition("=")
        if not sep or column not in DEPLOY_COLUMNS or not val:
            raise ValueError(
                f"--reference deploy:COLUMN=VALUE with COLUMN in {DEPLOY_COLUMNS}, got {value!r}"
            )
        return DeployMarker(column, val)
    if ".." in text:
        a, b = text.split("..", 1)
        start = parse_time(a, now_ns=now_ns, name="--reference start")
        end = parse_time(b, now_ns=now_ns, name="--reference end")
        if end <= start:
            raise ValueError(f"--reference: end must be after start, got {value!r}")
        return (start, end)
    m = _DURATION.match(text)
    if m:
        return float(m.group(1)) * _UNIT_S[m.group(2)] / 3600
    raise ValueError(f"--reference must be START..END, deploy:COLUMN=VALUE or 24h, got {value!r}")


def rolling_windows(
    now_ns: int,
    *,
    current_hours: float,
    reference_hours: float,
    current_start_ns: int | None = None,
) -> Windows:
    """Current = ``[current_start_ns or now − current_hours, now)``; reference = the
    ``reference_hours`` before it.

    Raises ValueError for non-positive lengths (naming the parameter).
    """
    if current_hours <= 0:
        raise ValueError(f"current_hours must be > 0, got {current_hours!r}")
    if reference_hours <= 0:
        raise ValueError(f"reference_hours must be > 0, got {reference_hours!r}")
    cur_start = (
        now_ns - int(current_hours * 3600 * NS) if current_start_ns is None else current_start_ns
    )
    ref_start = cur_start - int(reference_hours * 3600 * NS)
    return Windows(ref_start, cur_start, cur_start, now_ns, "rolling")


def deploy_windows(
    marker_ns: int, marker: DeployMarker, *, now_ns: int, reference_hours: float
) -> Windows:
    """Reference = the ``reference_hours`` before the deploy marker; current = since it.

    Raises ValueError when ``reference_hours`` ≤ 0 or the marker is not before ``now_ns``.
    """
    if reference_hours <= 0:
        raise ValueError(f"reference_hours must be > 0, got {reference_hours!r}")
    return Windows(
        marker_ns - int(reference_hours * 3600 * NS),
        marker_ns,
        marker_ns,
        now_ns,
        "deploy",
        f"deploy:{marker.column}={marker.value}",
    )
