"""Decoding and preparing spooled trace records, in the processor or in its prepare worker
process (:class:`~collector.spool.processor.SpoolProcessor`'s ``prepare_workers``): pure CPU
work without the store, whose result crosses the process boundary in a compact pickled form.
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
from dataclasses import fields
from typing import Any

from collector.ingest import decode as codec
from collector.ingest.normalize import Extract
from collector.ingest.prepare import Item, prepare
from collector.ingest.redaction_budget import DEFAULT_RECORD_CPU_S
from collector.spool.log import LOGS_JSON, LOGS_PROTOBUF, TRACES_JSON, Record
from collector.store.schema import SpanData


def media_of(kind: int) -> str:
    return codec.JSON if kind in (TRACES_JSON, LOGS_JSON) else codec.PROTOBUF


#: what :func:`prepare_traces` returns
Prepared = list[tuple[list[Item], list[str]] | str]


def prepare_traces(
    records: Sequence[tuple[int, int, bytes, str]],
    max_text_chars: int,
    redaction_cpu_s_per_record: float = DEFAULT_RECORD_CPU_S,
) -> Prepared:
    """Decode and prepare the trace records ``(kind, end offset, body, capture mode)``: per
    record its items and normalisation errors (:func:`~collector.ingest.prepare.prepare`, the
    record's spans sharing ``redaction_cpu_s_per_record`` CPU seconds of redaction), or
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
        out.append(
            prepare(
                decoded.spans,
                max_text_chars,
                mode,
                redaction_cpu_s_per_record=redaction_cpu_s_per_record,
            )
        )
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
    records: Sequence[tuple[int, int, bytes, str]],
    max_text_chars: int,
    redaction_cpu_s_per_record: float = DEFAULT_RECORD_CPU_S,
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
    return compact(prepare_traces(records, max_text_chars, redaction_cpu_s_per_record))


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


#: how long a stopping processor waits for a busy prepare worker before terminating it, s
POOL_STOP_S = 2.0


class PreparePool:
    """The processor's prepare worker processes (``workers``; 0: everything is prepared in the
    calling thread), started on :meth:`start` and stopped on :meth:`close`."""

    def __init__(
        self,
        workers: int,
        max_text_chars: int,
        redaction_cpu_s_per_record: float = DEFAULT_RECORD_CPU_S,
    ) -> None:
        self.workers = workers
        self.max_text_chars = max_text_chars
        self.redaction_cpu_s = redaction_cpu_s_per_record
        self._pool: ProcessPoolExecutor | None = None
        self._up: Future[int] | None = None  # done once a worker runs

    def start(self) -> None:
        """Start the worker processes unless they run; returns at once (they import their
        modules meanwhile; :meth:`submit` prepares in the caller until one answers). Spawning
        takes a second or two of a core: started when the processor starts, not on the first
        batch, so that the first burst after a start is not prepared here while it imports.

        Raises:
            OSError: the processes cannot be spawned.
        """
        if self.workers > 0 and self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_prepare_worker,
                initargs=(os.getpid(),),
            )
            self._up = self._pool.submit(os.getpid)

    def submit(self, records: list[Record], capture_mode: Callable[[str], str]) -> Future[Prepared]:
        """Decode and prepare the trace records of ``records``: in a worker process once one
        has started (the result is a future of it), else here and now. Never raises: an error
        (e.g. the store is down when the tenants' capture modes are read, BrokenProcessPool)
        is the future's."""
        fut: Future[Prepared] = Future()
        try:
            jobs = _trace_jobs(records, capture_mode)
            self.start()
            if self._pool is not None and self._up is not None and self._up.done():
                done = self._pool.submit(
                    prepare_traces_compact, jobs, self.max_text_chars, self.redaction_cpu_s
                )
                done.add_done_callback(lambda f: _expand_into(f, fut))
                return fut
            fut.set_result(prepare_traces(jobs, self.max_text_chars, self.redaction_cpu_s))
        except Exception as exc:
            fut.set_exception(exc)
        return fut

    def close(self) -> None:
        """Stop the workers: idle ones at once, one still busy (a long prepare) terminated
        after :data:`POOL_STOP_S` (its batch is prepared again next time); the next
        :meth:`start` spawns new ones."""
        pool, self._pool, self._up = self._pool, None, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + POOL_STOP_S
        for proc in procs:
            proc.join(max(deadline - time.monotonic(), 0.0))
            if proc.is_alive():
                proc.terminate()
                proc.join(1.0)
