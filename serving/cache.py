"""Response cache of the gateway (off by default): exact match on the full effective request.

Key: BLAKE2b of (tenant, path, the request body as forwarded to the engine with sorted keys)
— that is the variant (base model or adapter), every message (system prompt, retrieved
context, tool results), ``tools``, ``tool_choice``, ``response_format``, every sampling
parameter, ``max_tokens`` after the budget and ``stream``. Only ``user``/``metadata`` (which do
not change the output) are left out. A request is cacheable only when its output is a
function of its input: ``temperature == 0`` or an explicit ``seed``. Per tenant by
construction (the tenant is in the key): one tenant never sees another's answer.

Stored: only complete, successful answers — HTTP 200, every choice finished with ``stop`` or
``tool_calls`` (never ``length``: a truncated answer), no error event, a stream that reached
``[DONE]``. Entries expire after ``ttl_s``; the least recently used go first when either
``max_entries`` or ``max_bytes`` would be exceeded.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from serving.fleet_config import CacheConfig
from serving.telemetry import CallOutcome

_IGNORED = ("user", "metadata")
_GOOD_REASONS = frozenset({"stop", "tool_calls"})


@dataclass(frozen=True)
class CachedAnswer:
    """What is replayed on a hit: the engine's bytes, its media type and the span outcome."""

    body: bytes
    media_type: str
    outcome: CallOutcome
    replica: str | None
    expires_at: float


def cache_key(tenant: str | None, path: str, fwd: Mapping[str, Any]) -> str | None:
    """The cache key of a forwarded request body, None when it is not cacheable."""
    temp = fwd.get("temperature")
    seeded = isinstance(fwd.get("seed"), int) and not isinstance(fwd.get("seed"), bool)
    greedy = isinstance(temp, int | float) and not isinstance(temp, bool) and temp == 0
    if not (seeded or greedy):
        return None
    body = {k: v for k, v in fwd.items() if k not in _IGNORED}
    try:
        blob = orjson.dumps([tenant, path, body], option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def storable(status: int, outcome: CallOutcome, *, error: bool) -> bool:
    """True for a complete successful answer (see the module doc)."""
    reasons = outcome.finish_reasons or {}
    return (
        status == 200
        and not error
        and bool(reasons)
        and all(r in _GOOD_REASONS for r in reasons.values())
    )


class ResponseCache:
    """TTL + LRU cache bounded in entries and bytes."""

    def __init__(self, config: CacheConfig, clock: Callable[[], float] = time.monotonic) -> None:
        """``config.enabled`` False makes :meth:`get` always miss and :meth:`put` a no-op."""
        self.config = config
        self.clock = clock
        self._data: OrderedDict[str, CachedAnswer] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: str | None) -> CachedAnswer | None:
        """The fresh entry under ``key`` (and mark it recently used), else None."""
        if key is None or not self.config.enabled:
            return None
        entry = self._data.get(key)
        if entry is None or entry.expires_at <= self.clock():
            if entry is not None:
                self._drop(key)
            self.misses += 1
            return None
        self._data.move_to_end(key)
        self.hits += 1
        return entry

    def put(
        self, key: str | None, body: bytes, media_type: str, outcome: CallOutcome, replica: str
    ) -> None:
        """Store an answer already checked with :func:`storable`; too big ones are skipped."""
        if key is None or not self.config.enabled or len(body) > self.config.max_bytes:
            return
        if key in self._data:
            self._drop(key)
        expires = self.clock() + self.config.ttl_s
        self._data[key] = CachedAnswer(body, media_type, outcome, replica, expires)
        self.bytes += len(body)
        while len(self._data) > self.config.max_entries or self.bytes > self.config.max_bytes:
            self._drop(next(iter(self._data)))

    def _drop(self, key: str) -> None:
        self.bytes -= len(self._data.pop(key).body)

    def __len__(self) -> int:
        return len(self._data)
