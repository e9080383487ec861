"""The spool processor: decode, normalise and write what the receivers spooled.

One thread reads records from the spool's committed offset, decodes them (the receivers have
validated them already; invalid spans are dropped again, deterministically), applies each
tenant's capture policy, writes spans through the :class:`~collector.ingest.writer.BatchWriter`
(group commit, joins, after-commit hooks) and log records through the
:class:`~collector.ingest.log_join.LogJoiner`, waits for the store commit, and only then
commits the spool offset. A crash in between re-processes the records: spans and call records
upsert on (tenant, trace_id, span_id), so nothing is duplicated. A store outage stops the
offset; the records are retried until the store is back.

The spool is the appender itself (:class:`~collector.spool.log.Spool`, thread mode) or a
:class:`~collector.spool.reader.SpoolReader` (the processor in a process of its own,
:mod:`collector.spool.worker`). Either way the thread first takes the directory's
``processor.lock`` (waiting while another processor holds it) and keeps the status file
(:mod:`collector.spool.status`) current.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import operator
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import fields
from pathlib import Path
from typing import Any, Protocol

from collector.errors import BadRequestError
from collector.ingest import decode as codec
from collector.ingest.log_join import LogJoiner
from collector.ingest.logs import decode_logs
from collector.ingest.normalize import Extract
from collector.ingest.prepare import Item, prepare
from collector.ingest.writer import BatchWriter
from collector.spool import status as status_file
from collector.spool.log import LOGS_JSON, LOGS_PROTOBUF, TRACES_JSON, Record
from collector.spool.reader import acquire_processor_lock
from collector.store.schema import SpanData

log = logging.getLogger(__name__)
RETRY_S = 1.0
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


def media_of(kind: int) -> str:
    return codec.JSON if kind in (TRACES_JSON, LOGS_JSON) else codec.PROTOBUF


#: what :func:`prepare_traces` returns
Prepared = list[tuple[list[Item], list[str]] | str]


def prepare_traces(records: Sequence[tuple[int, int, bytes, str]], max_text_chars: int) -> Prepared:
    """Decode and prepare the trace records ``(kind, end offset, body, capture mode)``: per
    record its items and normalisation errors (:func:`~collector.ingest.prepare.prepare`), or
    the decode error of a record that cannot be decoded (validated on receipt: only a corrupt
    disk gets here). Pure CPU work without the store, so that it can run in a process of its
    own (``prepare_workers`` of :class:`SpoolProcessor`); the result comes back pickled."""
    out: list[tuple[list[Item], list[str]] | str] = []
    for kind, end, body, mode in records:
        try:
            decoded = codec.decode(body, media_of(kind))
        except codec.DecodeError as exc:
            out.append(f"spool record at {end} could not be decoded, skipped: {exc}")
            continue
        out.append(prepare(decoded.spans, max_text_chars, mode))
    return out


#: an :class:`Item` as plain tuples: (the :class:`SpanData` fields, the :class:`Extract` fields or
#: None, tenant, rewrite), fields in declaration order
CompactItem = tuple[tuple[Any, ...], tuple[Any, ...] | None, str | None, bool]
#: what :func:`prepare_traces_compact` returns
CompactPrepared = list[tuple[list[CompactItem], list[str]] | str]

_span_fields: Callable[[SpanData], tuple[Any, ...]] = operator.attrgetter(
    *(f.name for f in fields(SpanData))
)
_extract_fields: Callable[[Extract], tuple[Any, ...]] = operator.attrgetter(
    *(f.name for f in fields(Extract))
)


def compact(prepared: Prepared) -> CompactPrepared:
    """``prepared`` with every item as a :data:`CompactItem` (:func:`expand` rebuilds it)."""
    return [
        p
        if isinstance(p, str)
        else (
            [
                (
                    _span_fields(it.span),
                    None if it.extract is None else _extract_fields(it.extract),
                    it.tenant,
                    it.rewrite,
                )
                for it in p[0]
            ],
            p[1],
        )
        for p in prepared
    ]


def prepare_traces_compact(
    records: Sequence[tuple[int, int, bytes, str]], max_text_chars: int
) -> CompactPrepared:
    """:func:`prepare_traces` in :func:`compact` form: what the prepare worker returns, rebuilt
    by :func:`expand` in the processor.

    Slotted dataclasses pickle through Python-level ``__getstate__`` / ``__setstate__`` (a
    ``fields()`` call and a loop of ``object.__setattr__`` per object, three objects per span);
    tuples of their fields pickle in C and the processor rebuilds the objects through their
    generated ``__init__``. Measured on ``benchmarks/ingest.py``'s spans (thread CPU, 4,000
    spans): worker 30 -> 21 us per span (tuples 5 + pickle 16), processor 35 -> 25 us (unpickle
    14 + rebuild 11); the same pickle size (~3 KB per span).
    """
    return compact(prepare_traces(records, max_text_chars))


def expand(sent: CompactPrepared) -> Prepared:
    """The :data:`Prepared` that :func:`prepare_traces_compact` returned in compact form (equal
    to :func:`prepare_traces` of the same records)."""
    return [
        p
        if isinstance(p, str)
        else (
            [
                Item(SpanData(*s), None if e is None else Extract(*e), tenant, rewrite)
                for s, e, tenant, rewrite in p[0]
            ],
            p[1],
        )
        for p in sent
    ]


#: generation-0 threshold of the processor process and its prepare workers (CPython: 700)
GC_GEN0_THRESHOLD = 50_000


def tune_gc() -> None:
    """Garbage-collector settings of the processor process and of its prepare workers, as the
    collector process's (``driftline.commands.tune_gc``): start-up objects frozen, young collections
    every 50k allocations instead of 700.

    A 4 MiB batch is ~1,300 spans of a dozen containers each, unpickled from the prepare worker
    and alive until its transaction commits: with the default thresholds every young collection
    traversed them again and every full one walked the imported libraries too. Measured on
    ``benchmarks/ingest.py``'s spans (thread CPU, 4,000 spans): unpickling a prepared batch
    58 -> 38 us per span, building its span rows 17 -> 1.4 us, ``write_batch`` 117 -> 99 us.
    Reference counting still frees everything not in a cycle, as before.
    """
    gc.collect()  # start-up garbage is freed, not frozen
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


#: how often a prepare worker checks that its processor is alive, seconds
PARENT_POLL_S = 0.5


def _init_prepare_worker(parent: int) -> None:
    """Initializer of a prepare worker process.

    :func:`prepare`'s per-span warnings come back with its result and are logged by the
    processor, not on the worker's stderr. The worker exits once ``parent`` (the processor) is
    gone: a processor killed by a signal (``kill -9``, the supervisor's SIGTERM) runs no exit
    handler, and the worker, which holds both ends of its task pipe, would otherwise wait on it
    for ever.
    """
    logging.getLogger("collector.ingest.prepare").disabled = True
    tune_gc()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="driftline-prepare-watch", daemon=True).start()


def _expand_into(done: Future[CompactPrepared], fut: Future[Prepared]) -> None:
    """Resolve ``fut`` with :func:`expand` of the prepare worker's result ``done`` (or its
    error, e.g. BrokenProcessPool)."""
    try:
        fut.set_result(expand(done.result()))
    except BaseException as exc:
        fut.set_exception(exc)


def _is_logs(rec: Record) -> bool:
    return rec.kind in (LOGS_PROTOBUF, LOGS_JSON)


def _trace_jobs(
    records: Sequence[Record], capture_mode: Callable[[str], str]
) -> list[tuple[int, int, bytes, str]]:
    """The arguments of :func:`prepare_traces` for the trace records of ``records``."""
    return [(r.kind, r.end, r.body, capture_mode(r.tenant)) for r in records if not _is_logs(r)]


def _submit_records(writer: BatchWriter, tenant: str, parts: list[list[Item]]) -> Future[int]:
    """Write the items of several records (``parts``) as one job; should the store refuse it
    (BadRequestError), each record again as a job of its own, so that only the refused
    records' spans are lost, as when every record was a job. The future resolves once all is
    committed, to the number of spans; BadRequestError when some record was refused (the
    others are stored), any other error as is (nothing may be committed: retry).

    Raises:
        QueueFullError: the writer's queue is full (nothing was queued).
    """
    whole = writer.submit(tenant, [it for part in parts for it in part])
    if len(parts) < 2:
        return whole
    out: Future[int] = Future()

    def on_whole(f: Future[int]) -> None:
        exc = f.exception()
        if exc is None:
            out.set_result(f.result())
            return
        if not isinstance(exc, BadRequestError):
            out.set_exception(exc)
            return
        try:
            singles = [writer.submit(tenant, part) for part in parts]
        except Exception as e:  # queue full, shutting down: retry the batch
            out.set_exception(e)
            return
        results: list[Future[int]] = []
        lock = threading.Lock()

        def on_single(g: Future[int]) -> None:
            with lock:
                results.append(g)
                if len(results) < len(singles):
                    return
            errors = [e for e in (r.exception() for r in results) if e is not None]
            other = [e for e in errors if not isinstance(e, BadRequestError)]
            if other:
                out.set_exception(other[0])
            elif errors:
                out.set_exception(
                    BadRequestError(f"{len(errors)} of {len(parts)} records refused: {errors[0]}")
                )
            else:
                out.set_result(sum(r.result() for r in results))

        for g in singles:
            g.add_done_callback(on_single)

    whole.add_done_callback(on_whole)
    return out


def process(
    records: Sequence[Record],
    *,
    writer: BatchWriter,
    joiner: LogJoiner | None,
    capture_mode: Callable[[str], str],
    max_text_chars: int,
    prepared: Prepared | None = None,
) -> tuple[list[Future[int]], int]:
    """Queue the writes of ``records``; returns their futures and the number of spans.

    The spans of consecutive trace records go to the writer as ONE job per tenant (one
    transaction, group commit), flushed before each log record so that spans and logs are
    written in the spool's order. ``prepared``: :func:`prepare_traces` of the trace records,
    in order, when already done (e.g. in another process); else it is done here.

    Raises:
        QueueFullError / StoreUnavailableError: retry later (nothing is committed).
    """
    if prepared is None:
        prepared = prepare_traces(_trace_jobs(records, capture_mode), max_text_chars)
    else:  # prepared in another process: its normalisation warnings are logged here
        for p in prepared:
            for msg in () if isinstance(p, str) else p[1]:
                log.warning("%s", msg)
    futures: list[Future[int]] = []
    spans = 0
    pending: dict[str, list[list[Item]]] = {}  # by tenant: the items of each record

    def flush() -> None:
        for tenant, items in pending.items():
            futures.append(_submit_records(writer, tenant, items))
        pending.clear()

    traces = iter(prepared)
    for rec in records:
        if not _is_logs(rec):
            done = next(traces)
            if isinstance(done, str):
                log.error("%s", done)
                continue
            spans += len(done[0])
            if done[0]:
                pending.setdefault(rec.tenant, []).append(done[0])
            continue
        if joiner is None:
            continue
        try:
            batch = decode_logs(rec.body, media_of(rec.kind))
        except codec.DecodeError as exc:  # validated on receipt: only a corrupt disk gets here
            log.error("spool record at %d could not be decoded, skipped: %s", rec.end, exc)
            continue
        flush()
        futures.append(joiner.ingest(rec.tenant, batch, capture_mode(rec.tenant), writer))
    flush()
    return futures, spans


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
        batch_bytes: int = 4 << 20,
        keep_s: float | None = None,
        prepare_workers: int = 0,
    ) -> None:
        self.spool = spool
        self._prepare_workers = prepare_workers
        self._pool: ProcessPoolExecutor | None = None
        self._pool_up: Future[int] | None = None  # done once the worker runs
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
        alive = self._thread.is_alive()
        return {
            "mode": "thread",
            "pid": os.getpid() if alive else None,
            "restarts": 0,
            "status_age_s": None,
        }

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
            self._drain()
        finally:
            self._status_at = 0.0
            self._write_status(idle=False)
            os.close(self._lock_fd)  # releases processor.lock

    def _start_prepare(self, records: list[Record]) -> Future[Prepared]:
        """Decode and prepare the trace records of ``records``: in the prepare worker process
        once it has started (the result is a future of it), else here and now (also while the
        worker is still starting, so that the first batches do not wait for it). Never raises:
        an error (e.g. the store is down when the tenants' capture modes are read) is the
        future's."""
        fut: Future[Prepared] = Future()
        try:
            jobs = _trace_jobs(records, self._capture_mode)
            self._start_pool()
            if self._pool is not None and self._pool_up is not None and self._pool_up.done():
                done = self._pool.submit(prepare_traces_compact, jobs, self._max_text_chars)
                done.add_done_callback(lambda f: _expand_into(f, fut))
                return fut
            fut.set_result(prepare_traces(jobs, self._max_text_chars))
        except Exception as exc:
            fut.set_exception(exc)
        return fut

    def _start_pool(self) -> None:
        """Start the prepare worker processes (``prepare_workers``) unless they run; returns
        at once (they import their modules meanwhile; :attr:`_pool_up` is done once one
        answers). Spawning takes a second or two of a core: started when the processor starts,
        not on the first batch, so that the first burst after a start is not prepared here
        while the worker imports."""
        if self._prepare_workers > 0 and self._pool is None:
            self._pool = ProcessPoolExecutor(
                self._prepare_workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_prepare_worker,
                initargs=(os.getpid(),),
            )
            self._pool_up = self._pool.submit(os.getpid)

    def _close_pool(self) -> None:
        pool, self._pool, self._pool_up = self._pool, None, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _drain(self) -> None:
        """Batches of up to ``batch_bytes`` of records, pipelined: while the writer writes
        batch N (one transaction per tenant), batch N+1 is read and decoded and prepared (in the
        prepare worker process when there is one, so that it runs on another core). The spool
        offset still moves only past batches whose store transaction committed, in order; a
        failure drops the batch read ahead and retries from the committed offset."""
        try:
            try:
                self._start_pool()
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
                    prep = self._start_prepare(records)
                ahead = None
                self.oldest_pending_ns = records[0].received_unix_nano
                try:
                    futures, spans = process(
                        records,
                        writer=self._writer,
                        joiner=self._joiner,
                        capture_mode=self._capture_mode,
                        max_text_chars=self._max_text_chars,
                        prepared=prep.result(),
                    )
                    end = records[-1].end
                    following = self.spool.read(end, self._batch_bytes)
                    if following:
                        ahead = (end, following, self._start_prepare(following))
                    for fut in futures:
                        try:
                            fut.result()
                        except BadRequestError as exc:  # the store refuses this data: never will
                            log.error("spooled spans refused by the store, skipped: %s", exc)
                except Exception as exc:  # store down, queue full: the offset stays, retry
                    log.warning("spool processing at offset %d failed, retrying: %r", offset, exc)
                    ahead = None
                    if isinstance(exc, BrokenProcessPool):  # the worker died: a new one
                        self._close_pool()
                    self._stop.wait(RETRY_S)
                    continue
                self.spool.commit(end)
                self.spans_processed += spans
                if self.on_processed is not None:
                    self.on_processed(spans)
                self._write_status(idle=False)
        finally:
            self._close_pool()

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
