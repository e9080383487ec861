"""Bounded admission: at most ``max_concurrency`` requests at the engine, ``max_queue`` waiting.

A request that finds the queue full is rejected at once (the gateway answers 429 with
``Retry-After``) instead of waiting without bound: load shedding at the edge keeps latency of
admitted requests bounded (Little's law: waiting time = queue length / throughput).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from serving.errors import ServingError


class OverloadedError(ServingError):
    """The in-flight queue is full; retry after ``retry_after_s`` seconds."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Admission:
    """Counting gate in front of the engine. Single event loop; not thread-safe."""

    def __init__(self, max_concurrency: int, max_queue: int, retry_after_s: int = 1) -> None:
        """Raises: ValueError naming the parameter when a limit is out of range."""
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency: must be >= 1, got {max_concurrency}")
        if max_queue < 0:
            raise ValueError(f"max_queue: must be >= 0, got {max_queue}")
        if retry_after_s < 1:
            raise ValueError(f"retry_after_s: must be >= 1, got {retry_after_s}")
        self.max_concurrency = max_concurrency
        self.max_queue = max_queue
        self.retry_after_s = retry_after_s
        self._sem = asyncio.Semaphore(max_concurrency)
        self.in_flight = 0
        self.waiting = 0
        self.rejected = 0

    def _full(self) -> bool:
        return self.in_flight >= self.max_concurrency and self.waiting >= self.max_queue

    async def acquire(self) -> float:
        """Take a slot; return the seconds spent waiting for it.

        Raises:
            OverloadedError: every slot is busy and ``max_queue`` requests already wait.
        """
        if self._full():
            self.rejected += 1
            raise OverloadedError(
                f"{self.in_flight} requests in flight and {self.waiting} queued",
                self.retry_after_s,
            )
        t0 = time.perf_counter()
        self.waiting += 1
        try:
            await self._sem.acquire()
        finally:
            self.waiting -= 1
        self.in_flight += 1
        return time.perf_counter() - t0

    def release(self) -> None:
        """Give a slot back (exactly once per successful :meth:`acquire`)."""
        self.in_flight -= 1
        self._sem.release()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """``async with admission.slot() as queued_s:`` — acquire and always release."""
        queued = await self.acquire()
        try:
            yield queued
        finally:
            self.release()
