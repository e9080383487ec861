"""Gateway config sections of the serving tier: replicas, routing, traffic classes, limits, cache.

Example (YAML, next to ``rollouts`` and ``api_keys`` of :mod:`serving.config`)::

    replicas:                      # omitted: one replica at DRIFTLINE_ENGINE_URL serving all
      - url: http://10.0.0.1:8100
        models: [smollm2-135m-instruct]      # base models
        adapters: [candidate-good]           # LoRA adapters loaded there
        weight: 1.0                          # relative capacity
    routing:
      policy: prefix               # prefix | least_outstanding | round_robin
      models: {other-model: least_outstanding}
      prefix_chars: 2048           # shared prefix hashed: system prompt + first ~512 tokens
      load_factor: 1.25            # bounded load c of Mirrokni et al. (2018)
    traffic:
      batch_share: 0.25            # batch never holds more than 25 % of the slots
      batch_max_wait_s: 30         # starvation bound of a batch request in the queue
      api_keys: {sk-etl: batch}    # default class per API key
      rollouts: {nightly-eval: batch}
    limits:
      default: {requests_per_s: 20, burst: 40, tokens_per_min: 200000}
      tenants: {acme: {requests_per_s: 5, tokens_per_min: 20000}}
    cache: {enabled: false, ttl_s: 300, max_entries: 10000, max_bytes: 67108864}
    autoscale: {ttft_p95_slo_s: 1.0, queue_p95_slo_s: 0.5, target_in_flight: 16, warm_buffer: 1}

Durations are seconds, sizes bytes, token rates tokens per minute.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from serving.errors import ServingError

Policy = Literal["prefix", "least_outstanding", "round_robin"]
TrafficClass = Literal["interactive", "batch"]
POLICIES: tuple[str, ...] = ("prefix", "least_outstanding", "round_robin")
CLASSES: tuple[str, ...] = ("interactive", "batch")


class FleetConfigError(ServingError, ValueError):
    """A serving-tier config section is invalid; the message names the key."""


@dataclass(frozen=True)
class ReplicaSpec:
    """One engine replica.

    Attributes:
        url: base URL (``http://host:port``), no trailing slash.
        models: base models served; empty means "whatever the engine serves" (legacy
            ``engine_url`` mode: the replica is eligible for every request).
        adapters: LoRA adapter names loaded on this replica.
        weight: relative capacity (> 0), scales its share under bounded-load hashing.
    """

    url: str
    models: frozenset[str] = frozenset()
    adapters: frozenset[str] = frozenset()
    weight: float = 1.0

    def serves(self, model: str) -> bool:
        """True when a request for ``model`` (base or adapter) may be sent here."""
        if not self.models and not self.adapters:
            return True
        return model in self.models or model in self.adapters

    def base_model(self) -> str:
        """Label for scaling metrics: the first base model (sorted), else ``"*"``."""
        return min(self.models) if self.models else "*"


@dataclass(frozen=True)
class RoutingConfig:
    """Replica choice per model; see :mod:`serving.balance` for the policies."""

    policy: Policy = "prefix"
    models: Mapping[str, Policy] = field(default_factory=dict)
    prefix_chars: int = 2048
    load_factor: float = 1.25

    def policy_for(self, model: str) -> Policy:
        """The policy for ``model`` (per-model override, else the default)."""
        return self.models.get(model, self.policy)


@dataclass(frozen=True)
class TrafficConfig:
    """Traffic classes (:mod:`serving.classes`)."""

    batch_share: float = 0.25
    interactive_queue: int | None = None  # None: the gateway's max_queue setting
    batch_queue: int = 1024
    batch_max_wait_s: float = 30.0
    api_keys: Mapping[str, TrafficClass] = field(default_factory=dict)
    rollouts: Mapping[str, TrafficClass] = field(default_factory=dict)


@dataclass(frozen=True)
class TenantLimit:
    """Token-bucket limits of one tenant; None means unlimited on that axis."""

    requests_per_s: float | None = None
    burst: float | None = None
    tokens_per_min: float | None = None


@dataclass(frozen=True)
class LimitsConfig:
    """``default`` applies to tenants without their own entry (and to unauthenticated traffic)."""

    default: TenantLimit | None = None
    tenants: Mapping[str, TenantLimit] = field(default_factory=dict)

    def for_tenant(self, tenant: str | None) -> TenantLimit | None:
        """Limits of ``tenant`` (None: no limit)."""
        if tenant is not None and tenant in self.tenants:
            return self.tenants[tenant]
        return self.default


@dataclass(frozen=True)
class CacheConfig:
    """Response cache (:mod:`serving.cache`); off by default."""

    enabled: bool = False
    ttl_s: float = 300.0
    max_entries: int = 10_000
    max_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class AutoscaleConfig:
    """Desired-replica signal (:mod:`serving.autoscale`)."""

    ttft_p95_slo_s: float = 1.0
    queue_p95_slo_s: float = 0.5
    target_in_flight: int = 16
    warm_buffer: int = 1
    min_replicas: int = 1
    max_replicas: int = 64
    scale_down_window_s: float = 300.0
    window_s: float = 60.0


@dataclass(frozen=True)
class FleetConfig:
    """All serving-tier sections together (defaults: one replica, no limits, no cache)."""

    replicas: tuple[ReplicaSpec, ...] = ()
    routing: RoutingConfig = field(default_factory=RoutingConfig)
    traffic: TrafficConfig = field(default_factory=TrafficConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    autoscale: AutoscaleConfig = field(default_factory=AutoscaleConfig)


SECTIONS: frozenset[str] = frozenset(
    {"replicas", "routing", "traffic", "limits", "cache", "autoscale"}
)


def _num(where: str, v: Any, *, lo: float = 0.0, strict: bool = True) -> float:
    bad = isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
    if bad or (v <= lo if strict else v < lo):
        op = ">" if strict else ">="
        raise FleetConfigError(f"{where}: must be a number {op} {lo}, got {v!r}")
    return float(v)


def _map(where: str, v: Any) -> Mapping[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise FleetConfigError(f"{where}: a mapping is required")
    return v


def _only(where: str, data: Mapping[str, Any], keys: set[str]) -> None:
    unknown = set(data) - keys
    if unknown:
        raise FleetConfigError(f"{where}: unknown keys {sorted(unknown)}")


def _names(where: str, v: Any) -> frozenset[str]:
    if v is None:
        return frozenset()
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise FleetConfigError(f"{where}: a list of names is required")
    return frozenset(v)


def _replicas(raw: Any) -> tuple[ReplicaSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise FleetConfigError("replicas: a list is required")
    out = []
    for i, r in enumerate(raw):
        where = f"replicas[{i}]"
        r = _map(where, r)
        _only(where, r, {"url", "models", "adapters", "weight"})
        url = r.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise FleetConfigError(f"{where}.url: must start with http:// or https://")
        models = _names(f"{where}.models", r.get("models"))
        if not models:
            raise FleetConfigError(f"{where}.models: at least one base model is required")
        out.append(
            ReplicaSpec(
                url=url.rstrip("/"),
                models=models,
                adapters=_names(f"{where}.adapters", r.get("adapters")),
                weight=_num(f"{where}.weight", r.get("weight", 1.0)),
            )
        )
    if len({r.url for r in out}) != len(out):
        raise FleetConfigError("replicas: two replicas have the same url")
    return tuple(out)


def _choice(where: str, v: Any, allowed: tuple[str, ...]) -> Any:
    if v not in allowed:
        raise FleetConfigError(f"{where}: must be one of {list(allowed)}, got {v!r}")
    return v


def _routing(raw: Any) -> RoutingConfig:
    r = _map("routing", raw)
    _only("routing", r, {"policy", "models", "prefix_chars", "load_factor"})
    models = {
        str(m): _choice(f"routing.models.{m}", p, POLICIES)
        for m, p in _map("routing.models", r.get("models")).items()
    }
    chars = r.get("prefix_chars", 2048)
    if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
        raise FleetConfigError(f"routing.prefix_chars: must be an integer >= 1, got {chars!r}")
    return RoutingConfig(
        policy=_choice("routing.policy", r.get("policy", "prefix"), POLICIES),
        models=models,
        prefix_chars=chars,
        load_factor=_num("routing.load_factor", r.get("load_factor", 1.25), lo=1.0),
    )


def _int(where: str, v: Any, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise FleetConfigError(f"{where}: must be an integer >= {lo}, got {v!r}")
    return v


def _traffic(raw: Any) -> TrafficConfig:
    t = _map("traffic", raw)
    keys = {"batch_share", "interactive_queue", "batch_queue", "batch_max_wait_s"}
    _only("traffic", t, keys | {"api_keys", "rollouts"})
    share = _num("traffic.batch_share", t.get("batch_share", 0.25))
    if share > 1:
        raise FleetConfigError(f"traffic.batch_share: must be in (0, 1], got {share}")
    by_key = {
        str(k): _choice(f"traffic.api_keys.{k}", c, CLASSES)
        for k, c in _map("traffic.api_keys", t.get("api_keys")).items()
    }
    by_rollout = {
        str(k): _choice(f"traffic.rollouts.{k}", c, CLASSES)
        for k, c in _map("traffic.rollouts", t.get("rollouts")).items()
    }
    return TrafficConfig(
        batch_share=share,
        interactive_queue=None
        if t.get("interactive_queue") is None
        else _int("traffic.interactive_queue", t["interactive_queue"], 0),
        batch_queue=_int("traffic.batch_queue", t.get("batch_queue", 1024), 0),
        batch_max_wait_s=_num("traffic.batch_max_wait_s", t.get("batch_max_wait_s", 30.0)),
        api_keys=by_key,
        rollouts=by_rollout,
    )


def _limit(where: str, raw: Any) -> TenantLimit:
    m = _map(where, raw)
    _only(where, m, {"requests_per_s", "burst", "tokens_per_min"})

    def opt(key: str) -> float | None:
        return None if m.get(key) is None else _num(f"{where}.{key}", m[key])

    return TenantLimit(opt("requests_per_s"), opt("burst"), opt("tokens_per_min"))


def _limits(raw: Any) -> LimitsConfig:
    m = _map("limits", raw)
    _only("limits", m, {"default", "tenants"})
    default = _limit("limits.default", m["default"]) if m.get("default") is not None else None
    tenants = {
        str(t): _limit(f"limits.tenants.{t}", v)
        for t, v in _map("limits.tenants", m.get("tenants")).items()
    }
    return LimitsConfig(default=default, tenants=tenants)


def _cache(raw: Any) -> CacheConfig:
    c = _map("cache", raw)
    _only("cache", c, {"enabled", "ttl_s", "max_entries", "max_bytes"})
    if not isinstance(c.get("enabled", False), bool):
        raise FleetConfigError("cache.enabled: must be true or false")
    return CacheConfig(
        enabled=c.get("enabled", False),
        ttl_s=_num("cache.ttl_s", c.get("ttl_s", 300.0)),
        max_entries=_int("cache.max_entries", c.get("max_entries", 10_000), 1),
        max_bytes=_int("cache.max_bytes", c.get("max_bytes", 64 * 1024 * 1024), 1),
    )


def _autoscale(raw: Any) -> AutoscaleConfig:
    a = _map("autoscale", raw)
    d = AutoscaleConfig()
    _only("autoscale", a, set(d.__dataclass_fields__))
    lo = _int("autoscale.min_replicas", a.get("min_replicas", d.min_replicas), 0)
    hi = _int("autoscale.max_replicas", a.get("max_replicas", d.max_replicas), max(lo, 1))
    return AutoscaleConfig(
        ttft_p95_slo_s=_num("autoscale.ttft_p95_slo_s", a.get("ttft_p95_slo_s", d.ttft_p95_slo_s)),
        queue_p95_slo_s=_num(
            "autoscale.queue_p95_slo_s", a.get("queue_p95_slo_s", d.queue_p95_slo_s)
        ),
        target_in_flight=_int(
            "autoscale.target_in_flight", a.get("target_in_flight", d.target_in_flight), 1
        ),
        warm_buffer=_int("autoscale.warm_buffer", a.get("warm_buffer", d.warm_buffer), 0),
        min_replicas=lo,
        max_replicas=hi,
        scale_down_window_s=_num(
            "autoscale.scale_down_window_s",
            a.get("scale_down_window_s", d.scale_down_window_s),
            strict=False,
        ),
        window_s=_num("autoscale.window_s", a.get("window_s", d.window_s)),
    )


def parse_fleet(data: Mapping[str, Any]) -> FleetConfig:
    """Validate the serving-tier sections of a decoded gateway config (other keys ignored).

    Raises:
        FleetConfigError: a bad value; the message names the key (e.g. ``replicas[1].url``).
    """
    return FleetConfig(
        replicas=_replicas(data.get("replicas")),
        routing=_routing(data.get("routing")),
        traffic=_traffic(data.get("traffic")),
        limits=_limits(data.get("limits")),
        cache=_cache(data.get("cache")),
        autoscale=_autoscale(data.get("autoscale")),
    )
