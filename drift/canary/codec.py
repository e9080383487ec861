"""Rollout policy and evidence <-> JSON (what ``drift.canary.store`` writes to the database)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from drift.canary.policy import Direction, Evidence, MetricKind, MetricPolicy, RolloutPolicy


def policy_to_json(policy: RolloutPolicy) -> dict[str, Any]:
    """``RolloutPolicy`` -> plain JSON (enums as their string values)."""
    out = dataclasses.asdict(policy)
    out["steps_pct"] = list(policy.steps_pct)
    out["metrics"] = [
        {**dataclasses.asdict(m), "kind": m.kind.value, "direction": m.direction.value}
        for m in policy.metrics
    ]
    return out


def policy_from_json(data: Mapping[str, Any]) -> RolloutPolicy:
    """Inverse of :func:`policy_to_json`.

    Raises:
        ValueError: a missing/unknown field or a value ``RolloutPolicy`` / ``MetricPolicy``
            reject (the message names it).
    """
    try:
        metrics = tuple(
            MetricPolicy(
                **{
                    **m,
                    "kind": MetricKind(m["kind"]),
                    "direction": Direction(m["direction"]),
                }
            )
            for m in data["metrics"]
        )
        fields = {k: v for k, v in data.items() if k != "metrics"}
        fields["steps_pct"] = tuple(float(s) for s in fields.get("steps_pct", ()))
        return RolloutPolicy(**fields, metrics=metrics)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"policy: invalid or missing field ({exc})") from exc


def _finite(value: Any) -> Any:
    """JSON-safe copy: NaN and +-inf floats -> None (log e-values stay in ``log_e_value``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def evidence_to_json(evidence: Evidence) -> dict[str, Any]:
    """``Evidence`` as JSON (dataclass fields; non-finite floats -> None)."""
    out: dict[str, Any] = _finite(dataclasses.asdict(evidence))
    return out
