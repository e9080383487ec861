"""The spool processor as a process of its own (``DRIFTLINE_SPOOL_PROCESSOR=process``, the
default, or ``driftline spool process``): its own store engine, span writer and log joiner,
one :class:`~collector.spool.processor.SpoolProcessor` thread per spool directory.

After-commit work the in-process writer does is done here too: pending feedback is linked to
calls just stored (the tenants with pending feedback are read from the store after each
commit, so feedback stored while the batch was written is not missed), and the LLM KPIs are
observed into a registry of this process whose exposition is written to
``processor-kpis.prom`` in each spool directory (:data:`KPI_FILE`) once a second for the
receiving process to serve.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from prometheus_client import CollectorRegistry, generate_latest

from collector.cost.prices import PriceTable
from collector.ingest import feedback
from collector.ingest.capture import CapturePolicies
from collector.ingest.log_join import joined_writer
from collector.ingest.normalize import CallRecord
from collector.settings import Settings
from collector.spool.processor import SpoolProcessor, tune_gc
from collector.spool.reader import SpoolReader
from collector.store import engine as store_engine
from collector.telemetry.kpis import LLMKpis

log = logging.getLogger(__name__)
KPI_FILE = "processor-kpis.prom"
KPI_WRITE_EVERY_S = 1.0


def write_kpis(directories: list[Path], registry: CollectorRegistry) -> None:
    """Write the text exposition of ``registry`` to :data:`KPI_FILE` in each directory."""
    body = generate_latest(registry)
    for d in directories:
        tmp = d / f"{KPI_FILE}.{os.getpid()}.tmp"
        try:
            tmp.write_bytes(body)
            os.replace(tmp, d / KPI_FILE)
        except OSError as exc:
            log.warning("spool KPI file not written in %s: %s", d, exc)


#: seconds an orphaned processor process (its collector gone) takes at most to exit
ORPHAN_EXIT_S = 5.0


def exit_soon(after_s: float) -> None:
    """End this process with ``os._exit(0)`` after ``after_s`` seconds, from a daemon thread,
    unless it ended before: the bound on an orphaned processor's shutdown (no exit handler
    runs; the spool's offset and the store's transactions are safe against that, as against
    ``kill -9``)."""

    def end() -> None:
        time.sleep(after_s)
        os._exit(0)

    threading.Thread(target=end, name="driftline-orphan-exit", daemon=True).start()


def run_processor(
    settings: Settings,
    directories: list[Path],
    should_stop: Callable[[], bool],
    *,
    parent_pid: int | None = None,
    io: IdleIo | None = None,
) -> None:
    """Drain ``directories`` into ``settings.database_url`` until ``should_stop()`` (polled
    every 0.2 s) or, with ``parent_pid``, until that process is gone. Each batch in hand is
    finished; what is left stays spooled. ``io`` is told the backlog at each poll.

    Once the parent is gone (the collector was killed), the process ends within
    :data:`ORPHAN_EXIT_S` whatever its threads are blocked on (a store that does not answer, a
    prepare worker busy): what was not committed stays spooled for the next processor, which
    waits for this one's ``processor.lock``."""
    engine = store_engine.make_engine(settings.database_url)
    prices = PriceTable.load(settings.prices)
    writer, joiner = joined_writer(engine, prices, settings)
    capture = CapturePolicies(engine, settings.capture_content)
    registry = CollectorRegistry(auto_describe=True)
    kpis = LLMKpis.create(registry)

    def link_feedback(tenant: str, records: list[CallRecord]) -> None:
        if tenant in feedback.has_pending(engine):  # read after the commit: none missed
            feedback.link_pending(
                engine,
                tenant,
                (r.trace_id for r in records),
                (x for r in records for x in (r.response_id, r.call_id) if x),
            )

    def observe_kpis(_tenant: str, records: list[CallRecord]) -> None:
        kpis.observe(records)

    writer.add_after_commit(link_feedback)
    writer.add_after_commit(observe_kpis)
    writer.start()
    processors = [
        SpoolProcessor(
            SpoolReader(d),
            writer,
            joiner=joiner,
            capture_mode=capture.mode,
            max_text_chars=settings.max_text_chars,
            redaction_cpu_s_per_record=settings.redaction_cpu_s_per_record,
            keep_s=settings.spool_keep_s,
            prepare_workers=settings.spool_prepare_workers,
            batch_bytes=settings.spool_batch_bytes,
        )
        for d in directories
    ]
    for p in processors:
        p.quarantine.max_bytes = settings.spool_quarantine_max_bytes
        p.start()
    log.info("spool processor (pid %d) draining %s", os.getpid(), ", ".join(map(str, directories)))
    kpis_at = 0.0
    close_s = 30.0
    try:
        while not should_stop():
            if parent_pid is not None and os.getppid() != parent_pid:
                log.warning("spool processor: the collector (pid %d) is gone; stopping", parent_pid)
                exit_soon(ORPHAN_EXIT_S)
                close_s = ORPHAN_EXIT_S / 2
                break
            if io is not None:
                io.update(sum(p.spool.unprocessed_bytes for p in processors))
            if time.monotonic() - kpis_at >= KPI_WRITE_EVERY_S:
                kpis_at = time.monotonic()
                write_kpis(directories, registry)
            time.sleep(0.2)
    finally:
        for p in processors:
            p.close(close_s)
        writer.close(close_s)
        write_kpis(directories, registry)
        engine.dispose()


#: spool fill (unprocessed bytes / ``DRIFTLINE_SPOOL_MAX_BYTES``) at which an idle-I/O
#: processor takes the best-effort class, and the fill under which it goes back to idle
IO_ESCALATE_FILL = 0.5
IO_RELAX_FILL = 0.25


def set_io_class(idle: bool) -> bool:
    """Put every thread of this process, and of the processes it started (the prepare
    worker), in the idle I/O scheduling class, or back in the default (best-effort) one
    (``ioprio_set``, through psutil; threads and processes started later inherit it). False
    where the platform has no I/O classes or refuses (logged; the process runs on as it is).
    """
    cls = psutil.IOPRIO_CLASS_IDLE if idle else psutil.IOPRIO_CLASS_NONE
    try:
        me = psutil.Process()
        for proc in [me, *me.children(recursive=True)]:
            for thread in proc.threads():
                with contextlib.suppress(psutil.NoSuchProcess):  # ended meanwhile
                    psutil.Process(thread.id).ionice(cls)
    except psutil.NoSuchProcess:
        pass  # a child ended meanwhile: its replacement inherits from this process
    except (AttributeError, OSError, psutil.Error) as exc:  # no I/O classes here (not Linux)
        log.info("spool processor: I/O classes are not available here (%s)", exc)
        return False
    return True


class IdleIo:
    """The spawned processor's I/O class (``DRIFTLINE_SPOOL_PROCESSOR_IO_CLASS=idle``): idle
    while the spool's backlog is small, best-effort once it fills.

    Why idle: the receiver acknowledges a request after the spool's fsync, and on one disk
    that fsync queued behind the processor's SQLite commits and checkpoints (tens of MB each).
    On this project's 2-core machine (mq-deadline), ``benchmarks/ingest.py`` back to back, 5
    pairs: ack p99 at half the accepted rate 19.3 / 26.6 / 17.8 / 17.7 / 14.7 ms against
    24.7 / 31.6 / 45.5 / 26.2 / 21.6 ms, the longest spool fsync of the paced phase 12-36 ms
    against 32-70 ms, stored spans/s the same (4,808-6,616 against 4,792-5,539).

    Why not always: an idle-class request waits while any other process's request is queued
    (mq-deadline serves it after ``prio_aging_expire``, 10 s by default), so on a disk another
    program keeps busy the drain would slow to a crawl and the spool fill up (503s). From
    :data:`IO_ESCALATE_FILL` of ``max_bytes`` unprocessed the processor competes as every
    process does, and goes back to idle under :data:`IO_RELAX_FILL`.

    Args:
        max_bytes: the spool's bound (``DRIFTLINE_SPOOL_MAX_BYTES``), bytes.

    Raises:
        ValueError: ``max_bytes`` < 1.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.max_bytes = max_bytes
        self.idle = set_io_class(True)
        self.available = self.idle

    def update(self, unprocessed_bytes: int) -> None:
        """Re-decide the class from the spool's ``unprocessed_bytes`` (call it periodically)."""
        if not self.available:
            return
        fill = unprocessed_bytes / self.max_bytes
        if self.idle and fill >= IO_ESCALATE_FILL:
            log.warning(
                "spool processor: the spool is %.0f%% full; its I/O competes as best-effort "
                "until it is under %.0f%%",
                fill * 100,
                IO_RELAX_FILL * 100,
            )
            self._switch(idle=False)
        elif not self.idle and fill < IO_RELAX_FILL:
            log.info("spool processor: the spool is %.0f%% full; back to idle I/O", fill * 100)
            self._switch(idle=True)

    def _switch(self, *, idle: bool) -> None:
        if set_io_class(idle):
            self.idle = idle
        else:  # refused (logged): stop trying rather than log it at every poll
            self.available = False


def child_main(
    settings: Settings, directory: Path, stop: Any, log_queue: Any, log_level: int, parent: int
) -> None:
    """Entry point of the supervised processor process (``multiprocessing`` spawn): logs go
    through ``log_queue`` to the collector's handlers; ``stop`` is a multiprocessing Event.
    The process lowers its CPU priority by ``settings.spool_processor_nice`` and takes the I/O
    class ``settings.spool_processor_io_class`` first (its prepare worker inherits both)."""
    if settings.spool_processor_nice:
        os.nice(settings.spool_processor_nice)
    tune_gc()
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(logging.handlers.QueueHandler(log_queue))
    root.setLevel(log_level)
    io = IdleIo(settings.spool_max_bytes) if settings.spool_processor_io_class == "idle" else None
    try:
        run_processor(settings, [directory], stop.is_set, parent_pid=parent, io=io)
    finally:
        if os.getppid() != parent:  # nobody reads the queue any more: do not wait on it
            log_queue.cancel_join_thread()
            os._exit(0)  # nor on exit handlers (the prepare workers' pool): it is all closed
