"""Choose the replica of one request among the eligible ones (:meth:`Fleet.eligible`).

Policies (per model, :class:`serving.fleet_config.RoutingConfig`):

* ``prefix`` — prefix-aware: requests sharing a prompt prefix (the system prompt, at most
  ``prefix_chars`` characters, roughly 4 characters per token) go to the same replica, whose
  prefix (KV) cache then already holds that prefix. The replica is the first in the weighted
  rendezvous order of the prefix hash (Schindelhauer & Schomaker 2005, as in
  :mod:`serving.routing`) whose load stays within the bound
  ``ceil(c * (L + 1) * w_i / Σw)``, where ``L`` is the outstanding requests over the eligible
  replicas and ``c`` the load factor: consistent hashing with bounded loads (Mirrokni, Thorup &
  Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA 2018), so one hot prefix cannot
  overload a replica — with ``c = 1.25`` no replica holds more than 25 % above its fair share,
  and only keys of full replicas move. Reason ``prefix`` (first choice) or ``prefix_overflow``.
* ``least_outstanding`` — fewest gateway requests in flight per unit of weight (ties by URL).
  Also the fallback when a request has no prompt to hash (reason ``least_outstanding``).
* ``round_robin`` — rotation over the eligible replicas (the baseline of the benchmark).

Adapter affinity comes first, from eligibility: a request for a LoRA adapter only ever sees
replicas where that adapter is loaded.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from itertools import count
from typing import Any

from serving.fleet import ReplicaState
from serving.fleet_config import Policy

_TWO_64 = float(2**64)
_rr = count()


def prefix_key(body: Mapping[str, Any], prefix_chars: int) -> bytes | None:
    """The shared-prefix bytes of a chat or completions request, None when it has no prompt.

    Chat: the leading ``system``/``developer`` messages joined (the part many requests share),
    else the first message; completions: the prompt. Cut at ``prefix_chars`` in both cases. The
    model is not part of the key (the eligible replicas already all serve it).
    """
    msgs = body.get("messages")
    if isinstance(msgs, list):
        texts: list[str] = []
        for i, m in enumerate(msgs):
            if not isinstance(m, dict):
                break
            if i and m.get("role") not in ("system", "developer"):
                break
            c = m.get("content")
            if isinstance(c, list):
                c = " ".join(str(p.get("text", "")) for p in c if isinstance(p, dict))
            texts.append(c if isinstance(c, str) else "")
            if m.get("role") not in ("system", "developer"):
                break
        text = "\n".join(texts)
    else:
        prompt = body.get("prompt")
        text = prompt if isinstance(prompt, str) else ""
    return text[:prefix_chars].encode() if text else None


def _score(key: bytes, r: ReplicaState) -> float:
    h = hashlib.blake2b(key + b"\x1f" + r.url.encode(), digest_size=8).digest()
    u = (int.from_bytes(h, "big") + 0.5) / _TWO_64
    return -r.spec.weight / math.log(u)


def bounded_prefix(
    candidates: Sequence[ReplicaState], key: bytes, load_factor: float
) -> tuple[ReplicaState, str]:
    """Bounded-load rendezvous choice for ``key`` (see the module doc); ``(replica, reason)``."""
    ranked = sorted(candidates, key=lambda r: _score(key, r), reverse=True)
    total = sum(r.outstanding for r in candidates) + 1
    wsum = sum(r.spec.weight for r in candidates)
    for i, r in enumerate(ranked):
        cap = math.ceil(load_factor * total * r.spec.weight / wsum)
        if r.outstanding + 1 <= cap:
            return r, "prefix" if i == 0 else "prefix_overflow"
    return least_outstanding(candidates), "prefix_overflow"


def least_outstanding(candidates: Sequence[ReplicaState]) -> ReplicaState:
    """The replica with the fewest outstanding requests per unit weight (ties: lowest URL)."""
    return min(candidates, key=lambda r: (r.outstanding / r.spec.weight, r.url))


def choose_replica(
    candidates: Sequence[ReplicaState],
    policy: Policy,
    key: bytes | None,
    load_factor: float,
) -> tuple[ReplicaState, str]:
    """Pick one of ``candidates`` (non-empty) under ``policy``; ``(replica, reason)``.

    Reasons: ``only_replica``, ``prefix``, ``prefix_overflow``, ``least_outstanding``,
    ``round_robin``.

    Raises:
        ValueError: ``candidates`` is empty.
    """
    if not candidates:
        raise ValueError("candidates: at least one replica is required")
    if len(candidates) == 1:
        return candidates[0], "only_replica"
    if policy == "round_robin":
        return candidates[next(_rr) % len(candidates)], "round_robin"
    if policy == "prefix" and key is not None:
        return bounded_prefix(candidates, key, load_factor)
    return least_outstanding(candidates), "least_outstanding"
