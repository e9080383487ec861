"""The collector's side of a spool processor that runs in another process.

:class:`ProcessorSupervisor` starts :func:`collector.spool.worker.child_main` in a process of
its own (``multiprocessing`` spawn: the collector has threads, so no fork), relays the child's
log records to the collector's handlers, restarts it with exponential back-off (0.5 s doubling
to 30 s; reset after a minute of life) when it dies, and stops it on :meth:`close` (a stop event,
then SIGTERM, then SIGKILL). With ``spawn=False`` (``DRIFTLINE_SPOOL_PROCESSOR=external``) it
starts nothing and only follows the status file of a ``driftline spool process`` elsewhere.

Either way it feeds the receiving process's metrics from files, not from the child's memory:
spans/s from the status file (:mod:`collector.spool.status`), bytes and lag from the committed
``offset`` file (:meth:`collector.spool.log.Spool.lag_seconds`).
"""

from __future__ import annotations

import logging
import logging.handlers
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any

from collector.settings import Settings
from collector.spool.log import Spool
from collector.spool.quarantine import JournalFollower
from collector.spool.stall import StallWatch, spool_problems
from collector.spool.status import ProcessedCounter
from collector.spool.worker import child_main

log = logging.getLogger(__name__)
BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 30.0
HEALTHY_AFTER_S = 60.0
POLL_S = 0.25


class _Relay(logging.Handler):
    """Hands a record from the child to the logger of the same name here (its handlers)."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(record.name).handle(record)


class ProcessorSupervisor:
    """Runs (``spawn``) or follows the processor of ``spool``.

    Args:
        on_processed: called from the supervisor's thread with the spans processed since the
            last call (feeds ``driftline_spool_spans_processed``).

    :attr:`on_quarantined` is called from the same thread with the reason of each record the
    processor quarantined since (read from the quarantine's journal).
    """

    def __init__(
        self,
        settings: Settings,
        spool: Spool,
        *,
        spawn: bool = True,
        on_processed: Callable[[int], None] | None = None,
    ) -> None:
        self.settings = settings
        self.spool = spool
        self.spawn = spawn
        self.on_processed = on_processed
        self.restarts = 0
        self._ctx = multiprocessing.get_context("spawn")
        self._stop = threading.Event()
        self._child_stop: Any = None
        self._child: BaseProcess | None = None
        self._started_at = 0.0
        self._counter = ProcessedCounter(spool.dir)
        self._journal = JournalFollower(spool.dir)
        self._quarantine_reasons = JournalFollower(spool.dir)
        self._stall = StallWatch(spool)
        #: called with the reason of each record quarantined (metrics)
        self.on_quarantined: Callable[[str], None] | None = None
        self._queue: Any = None
        self._listener: logging.handlers.QueueListener | None = None
        self._thread = threading.Thread(target=self._watch, name="driftline-spool-sup", daemon=True)

    @property
    def pid(self) -> int | None:
        """The processor child's pid (None when not running or not spawned here)."""
        child = self._child
        return child.pid if child is not None and child.is_alive() else None

    def lag_seconds(self) -> float:
        """Age of the oldest spooled request not yet committed by the processor, in seconds."""
        return self.spool.lag_seconds()

    def describe(self) -> dict[str, Any]:
        """For ``/healthz``: ``mode`` (process | external), ``pid`` of the processor (the
        child's; external: the one that last wrote the status file), ``restarts`` of the child,
        ``status_age_s``: seconds since the processor last wrote its status (None: never)."""
        age = self._counter.age_s()
        return {
            "mode": "process" if self.spawn else "external",
            "pid": self.pid if self.spawn else (self._counter.last and self._counter.last.pid),
            "restarts": self.restarts,
            "status_age_s": None if age is None else round(age, 3),
        }

    def problems(self, *, stall_s: float, window_s: float) -> list[str]:
        """Why processing is degraded (:func:`~collector.spool.stall.spool_problems`)."""
        return spool_problems(self._stall, self._journal, stall_s=stall_s, window_s=window_s)

    def start(self) -> None:
        if self.spawn:
            self._queue = self._ctx.Queue()
            self._listener = logging.handlers.QueueListener(self._queue, _Relay())
            self._listener.start()
            self._child_stop = self._ctx.Event()
            self._launch()
        self._thread.start()

    def _launch(self) -> None:
        child = self._ctx.Process(
            target=child_main,
            args=(
                self.settings,
                self.spool.dir,
                self._child_stop,
                self._queue,
                logging.getLogger().getEffectiveLevel(),
                os.getpid(),
            ),
            name="driftline-spool-processor",
            daemon=False,
        )
        child.start()
        self._child = child
        self._started_at = time.monotonic()
        log.info("spool processor started (pid %s) for %s", child.pid, self.spool.dir)

    def _watch(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._stop.wait(POLL_S):
            self._count()
            child = self._child
            if not self.spawn or child is None or child.is_alive():
                continue
            lived = time.monotonic() - self._started_at
            backoff = BACKOFF_MIN_S if lived >= HEALTHY_AFTER_S else backoff
            log.error(
                "spool processor (pid %s) exited with code %s after %.1f s; restarting in %.1f s",
                child.pid,
                child.exitcode,
                lived,
                backoff,
            )
            child.close()
            self._child = None
            if self._stop.wait(backoff):
                return
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            self.restarts += 1
            self._launch()

    def _count(self) -> None:
        delta = self._counter.poll()
        if delta and self.on_processed is not None:
            self.on_processed(delta)
        for reason in self._quarantine_reasons.poll():
            if self.on_quarantined is not None:
                self.on_quarantined(reason)

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the child after the batch in hand (then SIGTERM, then SIGKILL)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        child = self._child
        if child is not None:
            self._child_stop.set()
            child.join(timeout_s)
            if child.is_alive():
                log.warning("spool processor (pid %s) did not stop; terminating", child.pid)
                child.terminate()
                child.join(5)
            if child.is_alive():
                child.kill()
                child.join(5)
            self._child = None
        self._count()
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        if self._queue is not None:  # free the queue's and the event's semaphores now
            self._queue.close()
            self._queue.join_thread()
            self._queue = self._child_stop = None
