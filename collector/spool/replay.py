"""Re-deriving call records from kept spool segments (e.g. after a normaliser upgrade), and
re-processing quarantined records after a fix (:func:`replay_quarantine`).

Reads the segment files without opening the spool for writing (a running collector may be
appending), and writes through the same path as the processor; spans and call records upsert
on (tenant, trace_id, span_id), so a replay is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from sqlalchemy import Engine

from collector.cost.prices import PriceTable
from collector.ingest.capture import CapturePolicies
from collector.ingest.log_join import LogJoiner
from collector.ingest.writer import BatchWriter
from collector.spool.log import Record, _records
from collector.spool.processor import process
from collector.spool.quarantine import Quarantine
from collector.store.failures import is_transient, reason_of

CHUNK_RECORDS = 200


def kept_records(directory: Path, since_unix_nano: int) -> Iterator[Record]:
    """Every complete record in ``directory`` received at or after ``since_unix_nano``."""
    segs = sorted((int(p.stem), p) for p in Path(directory).glob("*.seg") if p.stem.isdigit())
    for base, path in segs:
        for _start, rec in _records(path.read_bytes(), base):
            if rec.received_unix_nano >= since_unix_nano:
                yield rec


def replay(
    directory: Path,
    engine: Engine,
    prices: PriceTable,
    since_unix_nano: int,
    *,
    capture_default: str = "redacted",
    max_text_chars: int = 1_000_000,
) -> tuple[int, int]:
    """Re-write the records kept since ``since_unix_nano``; returns (records, spans).

    Raises:
        BadRequestError / StoreUnavailableError: the store refused or is down (re-run it).
    """
    writer = BatchWriter(engine, prices, max_text_chars=max_text_chars)
    joiner = LogJoiner(engine, max_text_chars)
    writer.before_write.append(joiner.before_write)
    capture = CapturePolicies(engine, capture_default)
    writer.start()
    n_records = n_spans = 0
    try:
        chunk: list[Record] = []
        for rec in kept_records(directory, since_unix_nano):
            chunk.append(rec)
            if len(chunk) >= CHUNK_RECORDS:
                n_spans += _write(chunk, writer, joiner, capture, max_text_chars)
                n_records += len(chunk)
                chunk = []
        if chunk:
            n_spans += _write(chunk, writer, joiner, capture, max_text_chars)
            n_records += len(chunk)
    finally:
        writer.close()
    return n_records, n_spans


def _write(
    chunk: list[Record],
    writer: BatchWriter,
    joiner: LogJoiner,
    capture: CapturePolicies,
    max_text_chars: int,
) -> int:
    futures, spans = process(
        chunk,
        writer=writer,
        joiner=joiner,
        capture_mode=capture.mode,
        max_text_chars=max_text_chars,
    )
    for fut in futures:
        fut.result()
    return spans


def replay_quarantine(
    directory: Path,
    engine: Engine,
    prices: PriceTable,
    *,
    ids: Sequence[str] = (),
    capture_default: str = "redacted",
    max_text_chars: int = 1_000_000,
) -> tuple[list[str], dict[str, str]]:
    """Re-process the records quarantined in the spool ``directory`` (all, or ``ids``), each
    on its own, through the processor's path; a record that now stores is removed from the
    quarantine, one that fails again stays with its new reason. Idempotent (upserts).

    Returns:
        (ids stored and removed, {id: error} of those that failed again).

    Raises:
        KeyError: an id in ``ids`` is not in the quarantine.
        StoreUnavailableError / QueueFullError: the store is down (nothing more is tried).
    """
    quarantine = Quarantine(directory)
    wanted = list(ids) or [e.id for e in quarantine.entries()]
    records = [(rid, quarantine.get(rid)[1]) for rid in wanted]  # KeyError up front
    writer = BatchWriter(engine, prices, max_text_chars=max_text_chars)
    joiner = LogJoiner(engine, max_text_chars)
    writer.before_write.append(joiner.before_write)
    capture = CapturePolicies(engine, capture_default)
    writer.start()
    stored: list[str] = []
    failed: dict[str, str] = {}
    bad: list[tuple[str, str]] = []  # (reason, error) of the record in hand
    try:
        for rid, rec in records:
            bad.clear()
            try:
                futures, _spans = process(
                    [rec],
                    writer=writer,
                    joiner=joiner,
                    capture_mode=capture.mode,
                    max_text_chars=max_text_chars,
                    on_bad=lambda _r, reason, error: bad.append((reason, error)),
                )
                for fut in futures:
                    fut.result()
            except Exception as exc:
                if is_transient(exc):
                    raise
                bad.append((reason_of(exc), f"{type(exc).__name__}: {exc}"))
            if bad:
                quarantine.add(rec, *bad[0])
                failed[rid] = bad[0][1]
            else:
                quarantine.remove(rid)
                stored.append(rid)
    finally:
        writer.close()
    return stored, failed
