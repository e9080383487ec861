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
* ``journal.jsonl``: one line per record ever quarantined (``id``, ``reason``, ``unix``) and
  one per record dropped for the size bound (``id``, ``event: "dropped"``, ``unix``),
  append-only, never rewritten: the source of ``driftline_spool_quarantined_records_total``,
  ``driftline_spool_quarantine_dropped_records`` and of ``/healthz``'s recent count
  (:class:`JournalFollower`), also after a replay emptied the directory.

Size bound (``DRIFTLINE_SPOOL_QUARANTINE_MAX_BYTES``): when the records' files (body and entry)
pass it, the oldest records (lowest offset) are dropped whole until they fit, each logged and
journalled; a record larger than the bound on its own is dropped at once. An id is
the record's end offset: ``list`` shows it zero-padded to 20 digits, and every command takes
it with or without the zeros. ``driftline spool quarantine remove ID... | --all`` forgets
records (an operator who looked at them).

Each file is written to a temporary name, fsynced and renamed before the processor commits the
offset past the record, so a crash in between quarantines it again (same id: one entry, one
journal line).
"""

from __future__ import annotations

import json
import logging
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
#: an id's digits at most (the end offset, zero-padded)
ID_DIGITS = 20

log = logging.getLogger(__name__)


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


def normalize_id(rid: str, where: Path) -> str:
    """``rid`` as the quarantine names it: its digits zero-padded to :data:`ID_DIGITS`
    (``16333442`` -> ``00000000000016333442``).

    Raises:
        KeyError: ``rid`` is not at most 20 ASCII digits (never a path); the message shows the
            expected form.
    """
    rid = rid.strip()
    if not (rid.isascii() and rid.isdigit() and len(rid) <= ID_DIGITS):
        raise KeyError(
            f"no quarantined record {rid[:40]!r} in {where}: an id is the record's digits (its "
            f"end offset, up to {ID_DIGITS}) as `list` shows them, zero padding optional "
            "(e.g. 00000000000016333442 or 16333442)"
        )
    return f"{int(rid):0{ID_DIGITS}d}"


def _journal(directory: Path, doc: dict[str, object]) -> None:
    with open(directory / JOURNAL, "a") as f:
        f.write(json.dumps(doc) + "\n")
        f.flush()
        os.fsync(f.fileno())


class Quarantine:
    """The quarantine of the spool in ``spool_dir`` (created on first use)."""

    def __init__(self, spool_dir: Path, max_bytes: int | None = None) -> None:
        """``max_bytes``: the records' files at most, bytes (None: unbounded; the collector
        sets ``DRIFTLINE_SPOOL_QUARANTINE_MAX_BYTES`` on its processor's quarantine)."""
        self.dir = Path(spool_dir) / QUARANTINE_DIR
        self.max_bytes = max_bytes

    @staticmethod
    def id_of(record: Record) -> str:
        return f"{record.end:0{ID_DIGITS}d}"

    def add(self, record: Record, reason: str, error: str) -> tuple[Entry, bool]:
        """Set ``record`` aside (durably: fsynced before this returns) with its ``reason`` and
        ``error``; returns its entry and whether it is new (quarantining the same record again
        only updates its reason and error). The oldest records are then dropped while the
        quarantine is over its ``max_bytes`` (this one too, should it alone be over).

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
            _journal(self.dir, {"id": rid, "reason": reason, "unix": entry.quarantined_unix})
        self.drop_oldest()
        return entry, not again

    def _record_sizes(self) -> list[tuple[str, int]]:
        """(id, bytes of its ``.rec`` and ``.json`` files) of every record here, oldest first
        (the entry counts too: ~2 KB of error text beside a tiny body would otherwise escape
        the bound)."""
        sizes: dict[str, int] = {}
        with os.scandir(self.dir) as it:
            for d in it:
                rid, dot, suffix = d.name.partition(".")
                if dot and suffix in ("rec", "json") and rid.isdigit():
                    try:
                        sizes[rid] = sizes.get(rid, 0) + d.stat().st_size
                    except FileNotFoundError:
                        continue
        return sorted(sizes.items())

    def size_bytes(self) -> int:
        """Bytes of the quarantined records on disk (their ``.rec`` and ``.json`` files)."""
        return sum(n for _rid, n in self._record_sizes()) if self.dir.is_dir() else 0

    def drop_oldest(self) -> list[str]:
        """Drop the oldest records while their files pass ``max_bytes``; returns their ids
        (each logged and journalled as dropped)."""
        if self.max_bytes is None or not self.dir.is_dir():
            return []
        sizes = self._record_sizes()
        total = sum(n for _rid, n in sizes)
        dropped = []
        for rid, n in sizes:
            if total <= self.max_bytes:
                break
            self._unlink(rid)
            total -= n
            dropped.append(rid)
            _journal(self.dir, {"id": rid, "event": "dropped", "unix": time.time()})
            log.warning(
                "quarantined spool record %s (%d bytes) dropped: the quarantine is over "
                "DRIFTLINE_SPOOL_QUARANTINE_MAX_BYTES=%d",
                rid,
                n,
                self.max_bytes,
            )
        return dropped

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
                at most, zero padding optional: never a path).
        """
        given, rid = rid, normalize_id(rid, self.dir)
        try:
            entry = Entry(**json.loads((self.dir / f"{rid}.json").read_text()))
            data = (self.dir / f"{rid}.rec").read_bytes()
        except (FileNotFoundError, ValueError, TypeError):
            raise KeyError(f"no quarantined record {given!r} in {self.dir}") from None
        recs = [r for _start, r in decode_records(data, entry.end - len(data))]
        if len(recs) != 1:
            raise KeyError(f"quarantined record {rid!r} in {self.dir} is damaged")
        return entry, recs[0]

    def remove(self, rid: str) -> bool:
        """Forget ``rid`` (zero padding optional); whether it was here. Its journal line stays
        (the counter never goes down), but ``/healthz`` no longer counts it.

        Raises:
            KeyError: ``rid`` is not an id.
        """
        rid = normalize_id(rid, self.dir)
        here = (self.dir / f"{rid}.json").exists()
        self._unlink(rid)
        return here

    def _unlink(self, rid: str) -> None:
        for suffix in (".rec", ".json"):
            (self.dir / f"{rid}{suffix}").unlink(missing_ok=True)


class JournalFollower:
    """Reads the lines appended to a quarantine's journal since the last call (cheap to call
    every poll: one ``stat`` when nothing changed). The lines already there when it is made are
    read at once: their times count in :meth:`count_since` and in :attr:`dropped`, their
    reasons are not returned by :meth:`poll` (a counter of this process counts what happens
    while it runs)."""

    def __init__(self, spool_dir: Path) -> None:
        self.dir = Path(spool_dir) / QUARANTINE_DIR
        self.path = self.dir / JOURNAL
        self._pos = 0
        #: (unix seconds, id) of the records quarantined within the last day, as read
        self.recent: list[tuple[float, str]] = []
        #: records dropped for the size bound since the journal began
        self.dropped = 0
        self.poll()

    def poll(self) -> list[str]:
        """The reasons of the records quarantined since the last call, in order."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self._pos:  # replaced: read it again
            self._pos, self.dropped, self.recent = 0, 0, []
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
                if doc.get("event") == "dropped":
                    self.dropped += 1
                    continue
                reasons.append(str(doc["reason"]))
                self.recent.append((float(doc["unix"]), str(doc["id"])))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
        return reasons

    def dropped_total(self) -> int:
        """:attr:`dropped` after a :meth:`poll` (``driftline_spool_quarantine_dropped_records``)."""
        self.poll()
        return self.dropped

    def count_since(self, unix: float) -> int:
        """Records quarantined at or after ``unix`` (seconds), as read by :meth:`poll`, that are
        still in the quarantine (``remove``, a replay that stored them or the size bound
        took them out: they no longer count)."""
        self.recent = [(t, rid) for t, rid in self.recent if t >= unix - 86_400]  # bounded
        ids = {rid for t, rid in self.recent if t >= unix}
        if not ids:
            return 0
        try:
            with os.scandir(self.dir) as it:
                here = {d.name[:-5] for d in it if d.name.endswith(".json")}
        except FileNotFoundError:
            return 0
        return len(ids & here)
