"""Gateway routing configuration: rollouts with variant weights, and API key -> tenant.

A static file (YAML or TOML, chosen by suffix) works on its own; the collector's rollout API can
later override the weights at run time (:mod:`serving.weights`). Example (YAML)::

    default_rollout: support-bot
    rollouts:
      support-bot:
        variants:
          smollm2-135m-instruct: 0.9   # base model = baseline
          candidate-good: 0.1          # LoRA adapter names as served by vLLM
    api_keys:                          # optional; when present every request needs one
      sk-acme-123: acme
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from serving.errors import ServingError
from serving.fleet_config import SECTIONS, FleetConfig, FleetConfigError, parse_fleet


class GatewayConfigError(ServingError, ValueError):
    """The routing configuration is invalid; the message names the key."""


@dataclass(frozen=True)
class Rollout:
    """One rollout: the variants that may answer a request for it and their static weights.

    Attributes:
        name: rollout name; clients send it as the OpenAI ``model`` (or header
            ``X-Driftline-Rollout``).
        weights: variant (engine model / LoRA adapter name) -> weight >= 0, at least one > 0.
    """

    name: str
    weights: Mapping[str, float]


@dataclass(frozen=True)
class GatewayConfig:
    """Everything the gateway routes by.

    Attributes:
        rollouts: rollout name -> :class:`Rollout`.
        default_rollout: used when the request names neither a rollout nor a served model.
        api_keys: API key -> tenant; empty means no authentication (tenant None).
        fleet: replicas, routing, traffic classes, tenant limits, cache, autoscaling
            (:mod:`serving.fleet_config`).
    """

    rollouts: Mapping[str, Rollout] = field(default_factory=dict)
    default_rollout: str | None = None
    api_keys: Mapping[str, str] = field(default_factory=dict)
    fleet: FleetConfig = field(default_factory=FleetConfig)

    @property
    def variants(self) -> frozenset[str]:
        """Every variant named by any rollout."""
        return frozenset(v for r in self.rollouts.values() for v in r.weights)


def _weights(name: str, raw: Any) -> dict[str, float]:
    if not isinstance(raw, Mapping) or not raw:
        raise GatewayConfigError(f"rollouts.{name}.variants: a non-empty mapping is required")
    out: dict[str, float] = {}
    for variant, w in raw.items():
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
            raise GatewayConfigError(
                f"rollouts.{name}.variants.{variant}: weight must be a number >= 0, got {w!r}"
            )
        out[str(variant)] = float(w)
    if not any(v > 0 for v in out.values()):
        raise GatewayConfigError(f"rollouts.{name}.variants: at least one weight must be > 0")
    return out


def parse_config(data: Mapping[str, Any]) -> GatewayConfig:
    """Validate a decoded config mapping.

    Raises:
        GatewayConfigError: an unknown top-level key, a bad weight, or a ``default_rollout`` that
            is not defined; a bad serving-tier section (message naming the key).
    """
    unknown = set(data) - {"rollouts", "default_rollout", "api_keys"} - SECTIONS
    if unknown:
        raise GatewayConfigError(f"unknown keys: {sorted(unknown)}")
    rollouts: dict[str, Rollout] = {}
    raw_rollouts = data.get("rollouts") or {}
    if not isinstance(raw_rollouts, Mapping):
        raise GatewayConfigError("rollouts: a mapping is required")
    for name, body in raw_rollouts.items():
        variants = body.get("variants") if isinstance(body, Mapping) else None
        rollouts[str(name)] = Rollout(name=str(name), weights=_weights(str(name), variants))
    default = data.get("default_rollout")
    if default is not None and default not in rollouts:
        raise GatewayConfigError(f"default_rollout: {default!r} is not a defined rollout")
    keys = data.get("api_keys") or {}
    if not isinstance(keys, Mapping) or not all(isinstance(t, str) and t for t in keys.values()):
        raise GatewayConfigError("api_keys: a mapping of key -> tenant name is required")
    try:
        fleet = parse_fleet(data)
    except FleetConfigError as exc:
        raise GatewayConfigError(str(exc)) from None
    return GatewayConfig(
        rollouts=rollouts,
        default_rollout=default,
        api_keys={str(k): str(v) for k, v in keys.items()},
        fleet=fleet,
    )


def load_config(path: Path) -> GatewayConfig:
    """Read a ``.yaml``/``.yml`` or ``.toml`` config file.

    Raises:
        GatewayConfigError: unreadable, unknown suffix, or invalid content.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise GatewayConfigError(f"gateway_config: cannot read {path}: {exc}") from None
    if path.suffix in (".yaml", ".yml"):
        data = yaml.safe_load(text) or {}
    elif path.suffix == ".toml":
        data = tomllib.loads(text)
    else:
        raise GatewayConfigError(f"gateway_config: {path} must end in .yaml, .yml or .toml")
    if not isinstance(data, Mapping):
        raise GatewayConfigError(f"gateway_config: {path} must contain a mapping")
    return parse_config(data)


def demo_config(
    base_model: str, candidate: str = "candidate-good", share: float = 0.1
) -> GatewayConfig:
    """One rollout ``support-bot``: ``base_model`` at ``1 - share``, ``candidate`` at ``share``.

    Raises:
        ValueError: ``share`` is outside [0, 1].
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share: must be in [0, 1], got {share}")
    weights = {base_model: 1.0 - share, candidate: share}
    return GatewayConfig(
        rollouts={"support-bot": Rollout(name="support-bot", weights=weights)},
        default_rollout="support-bot",
    )
