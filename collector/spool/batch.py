"""One batch of spooled records handed to the store's writers: :func:`process`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from collector.ingest import decode as codec
from collector.ingest.log_join import LogJoiner
from collector.ingest.logs import decode_logs
from collector.ingest.prepare import Item
from collector.ingest.redaction_budget import DEFAULT_RECORD_CPU_S
from collector.ingest.writer import BatchWriter
from collector.spool.log import Record
from collector.spool.prepared import Prepared, _is_logs, _trace_jobs, media_of, prepare_traces

log = logging.getLogger(__name__)


#: ``on_bad(record, reason, error)``: a record that cannot be processed (default: logged)
OnBad = Callable[[Record, str, str], None]


def _log_bad(rec: Record, reason: str, error: str) -> None:
    log.error("spool record at %d (%s) skipped: %s", rec.end, reason, error)


def process(
    records: Sequence[Record],
    *,
    writer: BatchWriter,
    joiner: LogJoiner | None,
    capture_mode: Callable[[str], str],
    max_text_chars: int,
    prepared: Prepared | None = None,
    redaction_cpu_s_per_record: float = DEFAULT_RECORD_CPU_S,
    on_bad: OnBad = _log_bad,
) -> tuple[list[Future[int]], int]:
    """Queue the writes of ``records``; returns their futures and the number of spans.

    The spans of consecutive trace records go to the writer as ONE job per tenant (one
    transaction, group commit), flushed before each log record so that spans and logs are
    written in the spool's order. ``prepared``: :func:`prepare_traces` of the trace records,
    in order, when already done (e.g. in another process); else it is done here. A record that
    cannot be decoded (validated on receipt: only a corrupt disk or an older receiver gets
    here) is handed to ``on_bad`` with the reason ``decode`` and skipped.

    Raises:
        QueueFullError / StoreUnavailableError: retry later (nothing is committed).
        Any other error of the log joiner (BadRequestError, OverflowError...): the data of one
        of ``records`` fails (:class:`SpoolProcessor` narrows it down record by record). The
        futures fail the same ways.
    """
    if prepared is None:
        jobs = _trace_jobs(records, capture_mode)
        prepared = prepare_traces(jobs, max_text_chars, redaction_cpu_s_per_record)
    else:  # prepared in another process: its normalisation warnings are logged here
        for p in prepared:
            for msg in () if isinstance(p, str) else p[1]:
                log.warning("%s", msg)
    futures: list[Future[int]] = []
    spans = 0
    pending: dict[str, list[Item]] = {}  # by tenant: the items of its records

    def flush() -> None:
        for tenant, items in pending.items():
            futures.append(writer.submit(tenant, items))
        pending.clear()

    traces = iter(prepared)
    for rec in records:
        if not _is_logs(rec):
            done = next(traces)
            if isinstance(done, str):
                on_bad(rec, "decode", done)
                continue
            spans += len(done[0])
            if done[0]:
                pending.setdefault(rec.tenant, []).extend(done[0])
            continue
        if joiner is None:
            continue
        try:
            batch = decode_logs(rec.body, media_of(rec.kind))
        except codec.DecodeError as exc:
            on_bad(rec, "decode", f"spool record at {rec.end} could not be decoded: {exc}")
            continue
        flush()
        futures.append(joiner.ingest(rec.tenant, batch, capture_mode(rec.tenant), writer))
        if batch.rejected:
            log.warning(
                "spool record at %d: %d log records rejected: %s",
                rec.end,
                batch.rejected,
                batch.error_message,
            )
    flush()
    return futures, spans
