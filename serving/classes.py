"""Admission by traffic class: ``interactive`` and ``batch`` share the gateway's engine slots.

* ``max_concurrency`` slots in all; batch never holds more than ``ceil(batch_share *
  max_concurrency)`` of them, so at least the rest is always reserved for interactive
  traffic (a batch flood cannot fill the engines' queues ahead of a user).
* Separate bounded FIFO queues; a request that finds its class's queue full is rejected at
  once (429 + ``Retry-After``, load shedding at the edge as in :mod:`serving.admission`).
* When a slot frees, the oldest batch request that has waited ``batch_max_wait_s`` or more
  goes first (the starvation bound), then interactive, then batch within its share. So batch
  yields to interactive under pressure, and a batch request waits at most about
  ``batch_max_wait_s`` plus one request's service time while batch holds fewer slots than its
  share.

Single event loop; not thread-safe. Queue times are seconds of ``clock()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from serving.admission import OverloadedError
from serving.fleet_config import TrafficClass


@dataclass
class _ClassState:
    cap: int
    max_queue: int
    in_flight: int = 0
    rejected: int = 0
    waiters: deque[tuple[asyncio.Future[None], float]] = field(default_factory=deque)


class TrafficGate:
    """Two-class counting gate in front of the replicas (see the module doc)."""

    def __init__(
        self,
        max_concurrency: int,
        *,
        batch_share: float = 0.25,
        interactive_queue: int = 256,
        batch_queue: int = 1024,
        batch_max_wait_s: float = 30.0,
        retry_after_s: int = 1,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """Raises: ValueError naming the parameter when a limit is out of range."""
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency: must be >= 1, got {max_concurrency}")
        if not 0 < batch_share <= 1:
            raise ValueError(f"batch_share: must be in (0, 1], got {batch_share}")
        if interactive_queue < 0 or batch_queue < 0:
            raise ValueError("interactive_queue, batch_queue: must be >= 0")
        if batch_max_wait_s <= 0:
            raise ValueError(f"batch_max_wait_s: must be > 0, got {batch_max_wait_s}")
        self.max_concurrency = max_concurrency
        self.batch_max_wait_s = batch_max_wait_s
        self.retry_after_s = retry_after_s
        self.clock = clock
        self.classes: dict[str, _ClassState] = {
            "interactive": _ClassState(max_concurrency, interactive_queue),
            "batch": _ClassState(max(1, math.ceil(batch_share * max_concurrency)), batch_queue),
        }

    @property
    def in_flight(self) -> int:
        """Slots taken, all classes."""
        return sum(c.in_flight for c in self.classes.values())

    @property
    def waiting(self) -> int:
        """Requests queued, all classes."""
        return sum(len(c.waiters) for c in self.classes.values())

    @property
    def rejected(self) -> int:
        """Requests rejected because their queue was full, all classes."""
        return sum(c.rejected for c in self.classes.values())

    def _can_run(self, name: str) -> bool:
        c = self.classes[name]
        return self.in_flight < self.max_concurrency and c.in_flight < c.cap

    async def acquire(self, cls: TrafficClass) -> float:
        """Take a slot for class ``cls``; return the seconds spent queued.

        Raises:
            OverloadedError: the class's queue is full.
            KeyError: ``cls`` is not a traffic class.
        """
        c = self.classes[cls]
        ahead = cls == "batch" and bool(self.classes["interactive"].waiters)
        if not c.waiters and not ahead and self._can_run(cls):
            c.in_flight += 1
            return 0.0
        if len(c.waiters) >= c.max_queue:
            c.rejected += 1
            raise OverloadedError(
                f"{cls}: {c.in_flight} requests in flight and {len(c.waiters)} queued",
                self.retry_after_s,
            )
        t0 = self.clock()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (fut, t0)
        c.waiters.append(entry)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release(cls)  # granted while we were being cancelled
            else:
                with contextlib.suppress(ValueError):
                    c.waiters.remove(entry)
            raise
        return self.clock() - t0

    def release(self, cls: TrafficClass) -> None:
        """Give back a slot of ``cls`` (once per successful :meth:`acquire`); wake waiters."""
        self.classes[cls].in_flight -= 1
        self._dispatch()

    def _grant(self, name: str) -> bool:
        c = self.classes[name]
        while c.waiters:
            fut, _ = c.waiters.popleft()
            if not fut.done():
                c.in_flight += 1
                fut.set_result(None)
                return True
        return False

    def _dispatch(self) -> None:
        inter, batch = self.classes["interactive"], self.classes["batch"]
        while self.in_flight < self.max_concurrency:
            starving = (
                bool(batch.waiters)
                and self.clock() - batch.waiters[0][1] >= self.batch_max_wait_s
                and batch.in_flight < batch.cap
            )
            if starving and self._grant("batch"):
                continue
            if inter.waiters and self._grant("interactive"):
                continue
            if batch.waiters and batch.in_flight < batch.cap and self._grant("batch"):
                continue
            return

    def oldest_wait_s(self, cls: TrafficClass) -> float:
        """How long the head of ``cls``'s queue has waited (0 when empty), seconds."""
        w = self.classes[cls].waiters
        return self.clock() - w[0][1] if w else 0.0
