"""The spool's quarantine: records the processor could not store, set aside so that it goes on.

A record whose processing fails for a reason that is not a store outage
(:func:`collector.store.failures.is_transient` false: the store refuses its data, it cannot be
decoded, a bug) is copied here, with why, and the processor moves past it. Nothing is lost:
``driftline spool quarantine list | show | replay`` lists them, shows one, and re-processes
them after a fix (those that store are removed, the others stay with their new reason).

Layout, under ``<spool dir>/quarantine/``:

* ``<end offset, 20 digits>.rec``: the record exactly as spooled (:func:`~collector.spool.log.
  encode`: receive time, kind, tenant, body), so that a replay processes the same bytes;
* ``<id>.json``: :class:`Entry` (offset, kind, tenant, reason, error, time);
* ``journal.jsonl``: one line per record ever quarantined (``id``, ``reason``, ``unix``),
  append-only, never rewritten: the source of ``driftline_spool_quarantined_records_total`` and
  of ``/healthz``'s recent count (:class:`JournalFollower`), also after a replay emptied the
  directory.

Each file is written to a temporary name, fsynced and renamed before the processor commits the
offset past the record, so a crash in between quarantines it again (same id: one entry, one
journal line).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from collector.spool.log import (
    LOGS_JSON,
    LOGS_PROTOBUF,
    TRACES_JSON,
    TRACES_PROTOBUF,
    Record,
    encode,
)
from collector.spool.log import _records as decode_records

QUARANTINE_DIR = "quarantine"
JOURNAL = "journal.jsonl"
KIND_NAMES = {
    TRACES_PROTOBUF: "traces/protobuf",
    TRACES_JSON: "traces/json",
    LOGS_PROTOBUF: "logs/protobuf",
    LOGS_JSON: "logs/json",
}
#: the error message kept per entry, characters at most
MAX_ERROR_CHARS = 2_000


@dataclass(frozen=True, slots=True)
class Entry:
    """One quarantined record. ``offset`` / ``end``: its byte range in the spool;
    ``received_unix_nano``: when the receiver spooled it; ``reason``: one of
    :data:`collector.store.failures.REASONS`; ``error``: the error's text (truncated to
    :data:`MAX_ERROR_CHARS`); ``quarantined_unix``: when, unix seconds; ``size``: body bytes."""

    id: str
    offset: int
    end: int
    kind: str
    tenant: str
    received_unix_nano: int
    reason: str
    error: str
    quarantined_unix: float
    size: int


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _check_id(rid: str, where: Path) -> None:
    if not (rid.isascii() and rid.isdigit() and len(rid) <= 20):
        raise KeyError(f"no quarantined record {rid!r} in {where}: an id is the record's digits")


class Quarantine:
    """The quarantine of the spool in ``spool_dir`` (created on first use)."""

    def __init__(self, spool_dir: Path) -> None:
        self.dir = Path(spool_dir) / QUARANTINE_DIR

    @staticmethod
    def id_of(record: Record) -> str:
        return f"{record.end:020d}"

    def add(self, record: Record, reason: str, error: str) -> tuple[Entry, bool]:
        """Set ``record`` aside (durably: fsynced before this returns) with its ``reason`` and
        ``error``; returns its entry and whether it is new (quarantining the same record again
        only updates its reason and error).

        Raises:
            OSError: the files could not be written (the caller must not move past it).
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        rid = self.id_of(record)
        data = encode(record.received_unix_nano, record.kind, record.tenant, record.body)
        entry = Entry(
            id=rid,
            offset=record.end - len(data),
            end=record.end,
            kind=KIND_NAMES.get(record.kind, str(record.kind)),
            tenant=record.tenant,
            received_unix_nano=record.received_unix_nano,
            reason=reason,
            error=error[:MAX_ERROR_CHARS],
            quarantined_unix=time.time(),
            size=len(record.body),
        )
        again = (self.dir / f"{rid}.json").exists()
        _write_atomic(self.dir / f"{rid}.rec", data)
        _write_atomic(self.dir / f"{rid}.json", json.dumps(asdict(entry)).encode())
        if not again:
            line = json.dumps({"id": rid, "reason": reason, "unix": entry.quarantined_unix})
            with open(self.dir / JOURNAL, "a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())
        return entry, not again

    def entries(self) -> list[Entry]:
        """Every record in quarantine now, oldest (lowest offset) first."""
        if not self.dir.is_dir():
            return []
        out = []
        for path in sorted(self.dir.glob("*.json")):
            try:
                out.append(Entry(**json.loads(path.read_text())))
            except (OSError, ValueError, TypeError):
                continue  # removed meanwhile, or not ours
        return out

    def get(self, rid: str) -> tuple[Entry, Record]:
        """The entry ``rid`` and its record.

        Raises:
            KeyError: no such entry (the message names it), or ``rid`` is not an id (20 digits
                at most: never a path).
        """
        _check_id(rid, self.dir)
        try:
            entry = Entry(**json.loads((self.dir / f"{rid}.json").read_text()))
            data = (self.dir / f"{rid}.rec").read_bytes()
        except (FileNotFoundError, ValueError, TypeError):
            raise KeyError(f"no quarantined record {rid!r} in {self.dir}") from None
        recs = [r for _start, r in decode_records(data, entry.end - len(data))]
        if len(recs) != 1:
            raise KeyError(f"quarantined record {rid!r} in {self.dir} is damaged")
        return entry, recs[0]

    def remove(self, rid: str) -> None:
        """Forget ``rid`` (its journal line stays: the counter never goes down).

        Raises:
            KeyError: ``rid`` is not an id.
        """
        _check_id(rid, self.dir)
        for suffix in (".rec", ".json"):
            (self.dir / f"{rid}{suffix}").unlink(missing_ok=True)


class JournalFollower:
    """Reads the lines appended to a quarantine's journal since the last call (cheap to call
    every poll: one ``stat`` when nothing changed). The lines already there when it is made are
    read at once: their times count in :meth:`count_since`, their reasons are not returned by
    :meth:`poll` (a counter of this process counts what happens while it runs)."""

    def __init__(self, spool_dir: Path) -> None:
        self.path = Path(spool_dir) / QUARANTINE_DIR / JOURNAL
        self._pos = 0
        self.times: list[float] = []
        self.poll()

    def poll(self) -> list[str]:
        """The reasons of the records quarantined since the last call, in order."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self._pos:  # replaced: read it again
            self._pos = 0
        if size == self._pos:
            return []
        with open(self.path, "rb") as f:
            f.seek(self._pos)
            chunk = f.read(size - self._pos)
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._pos += len(complete)
        reasons = []
        for line in complete.splitlines():
            try:
                doc = json.loads(line)
                reasons.append(str(doc["reason"]))
                self.times.append(float(doc["unix"]))
            except (ValueError, KeyError, TypeError):
                continue
        return reasons

    def count_since(self, unix: float) -> int:
        """Records quarantined at or after ``unix`` (seconds), as read by :meth:`poll`."""
        self.times = [t for t in self.times if t >= unix - 86_400]  # bounded memory
        return sum(1 for t in self.times if t >= unix)
