"""The spool processor: decode, normalise and write what the receivers spooled.

One thread reads records from the spool's committed offset, has them decoded and prepared
(:mod:`collector.spool.prepared`, in a worker process when there is one), writes them
(:func:`~collector.spool.batch.process`: spans through the writer, logs through the joiner),
waits for the store commit, and only then commits the offset: a crash in between re-processes
records, which upsert. A store outage (:func:`~collector.store.failures.is_transient`) is
retried; any other failure is narrowed down to its record(s), quarantined
(:mod:`collector.spool.quarantine`), and processing goes on. Every wait honours the stop event.

The spool is the appender itself (:class:`~collector.spool.log.Spool`, thread mode) or a
:class:`~collector.spool.reader.SpoolReader` (:mod:`collector.spool.worker`). Either way the
thread first takes the directory's ``processor.lock`` and keeps the status file current.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Protocol

from collector.ingest.log_join import LogJoiner
from collector.ingest.redaction_budget import DEFAULT_RECORD_CPU_S
from collector.ingest.writer import BatchWriter
from collector.spool import status as status_file
from collector.spool.batch import OnBad, process
from collector.spool.log import Record
from collector.spool.prepared import (
    GC_GEN0_THRESHOLD,
    PARENT_POLL_S,
    CompactItem,
    CompactPrepared,
    Prepared,
    PreparePool,
    compact,
    expand,
    media_of,
    prepare_traces,
    prepare_traces_compact,
    tune_gc,
)
from collector.spool.quarantine import JournalFollower, Quarantine
from collector.spool.reader import acquire_processor_lock
from collector.spool.stall import StallWatch, spool_problems
from collector.store.failures import is_transient, reason_of

#: the prepare-side names are :mod:`collector.spool.prepared`'s, re-exported (their home before)
__all__ = [
    "GC_GEN0_THRESHOLD",
    "PARENT_POLL_S",
    "CompactItem",
    "CompactPrepared",
    "OnBad",
    "Prepared",
    "SpoolProcessor",
    "SpoolSource",
    "compact",
    "expand",
    "media_of",
    "prepare_traces",
    "prepare_traces_compact",
    "process",
    "tune_gc",
]
log = logging.getLogger(__name__)
RETRY_S = 1.0
#: how often a wait for a prepared batch or a store commit looks at the stop event, seconds
AWAIT_SLICE_S = 0.2
PRUNE_EVERY_S = 60.0


class SpoolSource(Protocol):
    """What the processor needs of a spool (:class:`~collector.spool.log.Spool` or
    :class:`~collector.spool.reader.SpoolReader`)."""

    dir: Path
    committed: int

    @property
    def unprocessed_bytes(self) -> int: ...

    def read(self, offset: int, max_bytes: int = ...) -> list[Record]: ...

    def wait(self, offset: int, timeout_s: float) -> bool: ...

    def commit(self, offset: int) -> None: ...

    def prune(self, keep_s: float) -> int: ...


class _Stopped(Exception):
    """The processor's stop event was set while it waited."""


class SpoolProcessor:
    """Drains ``spool`` into the store on a thread of its own (:meth:`start`, :meth:`close`),
    once it holds the directory's ``processor.lock``.

    ``batch_bytes``: spooled bytes read, prepared and written as one store transaction
    (``DRIFTLINE_SPOOL_BATCH_BYTES``; a record larger than that is a batch of its own).
    """

    def __init__(
        self,
        spool: SpoolSource,
        writer: BatchWriter,
        *,
        joiner: LogJoiner | None,
        capture_mode: Callable[[str], str],
        max_text_chars: int = 1_000_000,
        redaction_cpu_s_per_record: float = DEFAULT_RECORD_CPU_S,
        batch_bytes: int = 4 << 20,
        keep_s: float | None = None,
        prepare_workers: int = 0,
    ) -> None:
        self.spool = spool
        self._prep = PreparePool(prepare_workers, max_text_chars, redaction_cpu_s_per_record)
        self._writer = writer
        self._joiner = joiner
        self._capture_mode = capture_mode
        self._max_text_chars = max_text_chars
        self._batch_bytes = batch_bytes
        self._keep_s = keep_s
        self._pruned_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="driftline-spool-proc", daemon=True)
        self.spans_processed = 0
        #: called with the number of spans of each committed batch (metrics)
        self.on_processed: Callable[[int], None] | None = None
        #: receive time of the oldest record not yet committed (None: caught up)
        self.oldest_pending_ns: int | None = None
        self._lock_fd: int | None = None
        self._started_unix = time.time()
        self._status_at = 0.0
        self.quarantine = Quarantine(spool.dir)
        #: records quarantined by this processor
        self.quarantined = 0
        #: called with the reason of each record quarantined (metrics)
        self.on_quarantined: Callable[[str], None] | None = None
        self._stall = StallWatch(spool)
        self._journal = JournalFollower(spool.dir)

    def lag_seconds(self) -> float:
        """Age of the oldest spooled record not yet in the store; 0 when caught up."""
        if self.spool.unprocessed_bytes <= 0:
            return 0.0
        oldest = self.oldest_pending_ns
        if oldest is None:
            head = self.spool.read(self.spool.committed, 1)
            if not head:
                return 0.0
            oldest = head[0].received_unix_nano
        return max(time.time_ns() - oldest, 0) / 1e9

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def describe(self) -> dict[str, object]:
        """For ``/healthz`` (the shape of :meth:`ProcessorSupervisor.describe`): mode, pid
        (None when the thread has stopped), restarts (never), status age (not applicable)."""
        pid = os.getpid() if self._thread.is_alive() else None
        return {"mode": "thread", "pid": pid, "restarts": 0, "status_age_s": None}

    def problems(self, *, stall_s: float, window_s: float) -> list[str]:
        """Why processing is degraded (:func:`~collector.spool.stall.spool_problems`)."""
        return spool_problems(self._stall, self._journal, stall_s=stall_s, window_s=window_s)

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop after the batch in hand (what is left stays spooled for the next start)."""
        self._stop.set()
        self._thread.join(timeout_s)

    def _write_status(self, *, idle: bool) -> None:
        now = time.monotonic()
        every = status_file.IDLE_WRITE_EVERY_S if idle else status_file.WRITE_EVERY_S
        if now - self._status_at < every:
            return
        self._status_at = now
        try:
            status_file.write_status(
                self.spool.dir,
                status_file.ProcessorStatus(
                    os.getpid(),
                    self._started_unix,
                    self.spans_processed,
                    self.spool.committed,
                    time.time(),
                ),
            )
        except OSError as exc:
            log.warning("spool status file not written: %s", exc)

    def _run(self) -> None:
        self._lock_fd = acquire_processor_lock(
            self.spool.dir, wait=True, stop=self._stop.is_set, on_wait=log.warning
        )
        if self._lock_fd is None:
            return
        try:
            while not self._stop.is_set():
                try:
                    self._drain()
                except Exception:  # the spool's files (disk full, a pruned segment...), a bug
                    log.exception("spool processor failed; starting again in %.0f s", RETRY_S)
                    self._stop.wait(RETRY_S)
        finally:
            self._status_at = 0.0
            self._write_status(idle=False)
            os.close(self._lock_fd)  # releases processor.lock

    def _await(self, fut: Future[Any]) -> Any:
        """``fut.result()``, waiting in slices so that the stop event is honoured.

        Raises:
            _Stopped: the stop event was set first. Whatever ``fut`` raises.
        """
        while True:
            if self._stop.is_set():
                raise _Stopped
            try:
                return fut.result(timeout=AWAIT_SLICE_S)
            except TimeoutError:
                continue

    def _drain(self) -> None:
        """Batches of up to ``batch_bytes`` of records, pipelined: while the writer writes
        batch N (one transaction per tenant), batch N+1 is read and decoded and prepared (in the
        prepare worker process when there is one, so that it runs on another core). The spool
        offset still moves only past batches whose store transaction committed, in order.

        A failure drops the batch read ahead. A store outage (:func:`is_transient`) retries the
        batch from the committed offset every :data:`RETRY_S`; any other failure is narrowed
        down to its record(s) (:meth:`_one_by_one`), which are quarantined, and the processor
        goes on. Every wait honours the stop event."""
        try:
            try:
                self._prep.start()
            except Exception as exc:  # cannot spawn: prepared here, retried on each batch
                log.warning("spool prepare worker not started: %r", exc)
            ahead: tuple[int, list[Record], Future[Prepared]] | None = None
            while not self._stop.is_set():
                offset = self.spool.committed
                if ahead is not None and ahead[0] == offset:
                    _, records, prep = ahead
                else:
                    records = self.spool.read(offset, self._batch_bytes)
                    if not records:
                        self.oldest_pending_ns = None
                        self._write_status(idle=True)
                        self._prune()
                        self.spool.wait(offset, 0.5)
                        continue
                    prep = self._prep.submit(records, self._capture_mode)
                ahead = None
                self.oldest_pending_ns = records[0].received_unix_nano
                end = records[-1].end
                try:
                    futures, spans = process(
                        records,
                        writer=self._writer,
                        joiner=self._joiner,
                        capture_mode=self._capture_mode,
                        max_text_chars=self._max_text_chars,
                        redaction_cpu_s_per_record=self._prep.redaction_cpu_s,
                        prepared=self._await(prep),
                        on_bad=self._set_aside,
                    )
                    following = self.spool.read(end, self._batch_bytes)
                    if following:
                        ahead = (end, following, self._prep.submit(following, self._capture_mode))
                    for fut in futures:
                        self._await(fut)
                except _Stopped:
                    return
                except Exception as exc:
                    ahead = None
                    if isinstance(exc, BrokenProcessPool):  # the worker died: a new one
                        self._prep.close()
                    if is_transient(exc):  # store down, queue full: the offset stays, retry
                        log.warning("spool processing at %d failed, retrying: %r", offset, exc)
                        self._stop.wait(RETRY_S)
                        continue
                    log.warning(
                        "spool batch at offset %d failed (%r): processing its %d records one "
                        "by one",
                        offset,
                        exc,
                        len(records),
                    )
                    try:
                        spans = self._one_by_one(records)
                    except _Stopped:
                        return
                self._committed(end, spans)
        finally:
            self._prep.close()

    def _committed(self, end: int, spans: int) -> None:
        self.spool.commit(end)
        self.spans_processed += spans
        if self.on_processed is not None:
            self.on_processed(spans)
        self._write_status(idle=False)

    def _one_by_one(self, records: list[Record]) -> int:
        """Process ``records`` one at a time (prepared in this thread), each committed on its
        own: a store outage retries the record in hand (every :data:`RETRY_S`), any other
        failure quarantines it (:meth:`_set_aside`). Only runs after a batch failed for its
        data, so the hot path keeps its batches. Returns the spans of the records before the
        last, whose offset is left for the caller to commit.

        Raises:
            _Stopped: the stop event was set (what was committed stays committed).
        """
        spans = 0
        for i, rec in enumerate(records):
            while True:
                try:
                    futures, n = process(
                        [rec],
                        writer=self._writer,
                        joiner=self._joiner,
                        capture_mode=self._capture_mode,
                        max_text_chars=self._max_text_chars,
                        redaction_cpu_s_per_record=self._prep.redaction_cpu_s,
                        on_bad=self._set_aside,
                    )
                    for fut in futures:
                        self._await(fut)
                except _Stopped:
                    raise
                except Exception as exc:
                    if is_transient(exc):
                        log.warning("spool record at %d failed, retrying: %r", rec.end, exc)
                        if self._stop.wait(RETRY_S):
                            raise _Stopped from None
                        continue
                    self._set_aside(rec, reason_of(exc), f"{type(exc).__name__}: {exc}")
                    n = 0
                break
            if i < len(records) - 1:
                self._committed(rec.end, n)
            else:
                spans = n
        return spans

    def _set_aside(self, rec: Record, reason: str, error: str) -> None:
        """Quarantine ``rec`` (:class:`~collector.spool.quarantine.Quarantine`), logged and
        counted (:attr:`on_quarantined`). Should the quarantine not be writable (disk full),
        waits and tries again: the record is never skipped unrecorded.

        Raises:
            _Stopped: the stop event was set while waiting.
        """
        while True:
            try:
                entry, new = self.quarantine.add(rec, reason, error)
                break
            except OSError as exc:
                log.error("spool record at %d not quarantined, retrying: %s", rec.end, exc)
                if self._stop.wait(RETRY_S):
                    raise _Stopped from None
        if not new:  # set aside already (the batch, then the record on its own)
            return
        self.quarantined += 1
        log.error(
            "spool record at %d (tenant %s, %s) quarantined as %s (%s): %s",
            rec.end,
            rec.tenant,
            entry.kind,
            entry.id,
            reason,
            error[:500],
        )
        if self.on_quarantined is not None:
            self.on_quarantined(reason)

    def _prune(self) -> None:
        """Delete processed segments past their keep time, at most once a minute."""
        now = time.monotonic()
        if self._keep_s is None or now - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = now
        try:
            n = self.spool.prune(self._keep_s)
        except OSError as exc:
            log.warning("spool prune failed: %s", exc)
            return
        if n:
            log.info("spool: %d processed segments older than %.0f s deleted", n, self._keep_s)
