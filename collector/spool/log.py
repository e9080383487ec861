"""Append-only spool of OTLP requests with group-commit fsync.

Records are appended to segment files ``<base offset>.seg`` in one directory; an offset is a
byte position in the concatenation of all segments. :meth:`Spool.append` returns a future
that resolves once the record is on disk (``os.fsync`` of the segment, one per group of
concurrent appends), so an acknowledgement sent after it survives ``kill -9`` and power loss.
The processor's position is the ``offset`` file (written to a temporary file, fsynced and
renamed: atomic). On open, a torn record at the end (a crash mid-append, never acknowledged)
is cut off. One :class:`Spool` appends to a directory at a time (``writer.lock``, an
``fcntl.flock`` the kernel releases when its process dies); a processor in another process
reads the same files through :class:`collector.spool.reader.SpoolReader`.

Record layout (big-endian): ``u32 length of the rest | u32 crc32 of the rest |`` rest =
``i64 receive time (unix ns) | u8 kind | u16 tenant length | tenant (utf-8) | body``.
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from collector.errors import ConfigError, QueueFullError

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">II")
_META = struct.Struct(">qBH")
#: record kinds: what the body is
TRACES_PROTOBUF, TRACES_JSON, LOGS_PROTOBUF, LOGS_JSON = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class Record:
    """One spooled request; ``end`` is the offset just after it (commit it when done)."""

    end: int
    received_unix_nano: int
    kind: int
    tenant: str
    body: bytes


class SpoolFullError(QueueFullError):
    """The spool holds ``max_bytes`` not yet processed (HTTP 503 / gRPC RESOURCE_EXHAUSTED)."""


def encode(received_unix_nano: int, kind: int, tenant: str, body: bytes) -> bytes:
    t = tenant.encode()
    rest = _META.pack(received_unix_nano, kind, len(t)) + t + body
    return _HEAD.pack(len(rest), zlib.crc32(rest)) + rest


def _records(data: bytes, base: int) -> Iterator[tuple[int, Record]]:
    """(start offset, record) of the valid records of one segment's bytes, stopping at the
    first torn or corrupt one."""
    pos = 0
    while pos + _HEAD.size <= len(data):
        length, crc = _HEAD.unpack_from(data, pos)
        rest = data[pos + _HEAD.size : pos + _HEAD.size + length]
        if len(rest) < length or zlib.crc32(rest) != crc or length < _META.size:
            return
        received, kind, tlen = _META.unpack_from(rest)
        tenant = rest[_META.size : _META.size + tlen].decode()
        end = pos + _HEAD.size + length
        yield base + pos, Record(base + end, received, kind, tenant, rest[_META.size + tlen :])
        pos = end


def segments_of(directory: Path) -> list[tuple[int, Path]]:
    """(base offset, path) of every segment file in ``directory``, oldest first."""
    out = [(int(p.stem), p) for p in Path(directory).glob("*.seg") if p.stem.isdigit()]
    return sorted(out)


def read_offset(directory: Path) -> int:
    """The processor's committed offset in ``directory`` (the first segment's base, or 0, when
    nothing was ever committed)."""
    try:
        return int((Path(directory) / "offset").read_text().strip() or 0)
    except FileNotFoundError:
        segs = segments_of(directory)
        return segs[0][0] if segs else 0


def write_offset(directory: Path, offset: int) -> None:
    """Record ``offset`` as committed: temporary file, fsync, rename (atomic and durable)."""
    tmp = Path(directory) / "offset.tmp"
    with open(tmp, "w") as f:
        f.write(str(offset))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, Path(directory) / "offset")


def read_records(
    segs: list[tuple[int, Path]], offset: int, end: int, max_bytes: int
) -> list[Record]:
    """Complete records of ``segs`` from ``offset`` (a record boundary) up to ``end``: those
    that start within the next ``max_bytes`` bytes of its segment, at least one when there is
    one. A torn or half-written record ends the list.

    When the first record is larger than ``max_bytes``, only that record is read (its length
    is in its header): ``max_bytes=1`` reads the head record, not every byte up to ``end``.
    """
    if offset >= end:
        return []
    for i, (base, path) in enumerate(segs):
        nxt = segs[i + 1][0] if i + 1 < len(segs) else end
        if not base <= offset < nxt:
            continue
        limit = min(nxt, end) - offset
        with open(path, "rb") as f:
            f.seek(offset - base)
            data = f.read(min(limit, max(max_bytes, _HEAD.size)))
            out = [rec for _s, rec in _records(data, offset)]
            if not out and _HEAD.size <= len(data) < limit:  # one record larger than max_bytes
                whole = _HEAD.size + _HEAD.unpack_from(data)[0]
                data += f.read(min(whole, limit) - len(data))
                out = [rec for _s, rec in _records(data, offset)]
        return out
    return []


def prune_segments(segs: list[tuple[int, Path]], committed: int, keep_s: float) -> int:
    """Delete the segments of ``segs`` wholly before ``committed`` and older than ``keep_s``
    seconds (the last segment never); returns how many."""
    n = 0
    cutoff = time.time() - keep_s
    for (_base, path), (next_base, _) in itertools.pairwise(segs):
        if next_base <= committed and path.stat().st_mtime < cutoff:
            path.unlink()
            n += 1
    return n


def lock_file(path: Path) -> int | None:
    """Take an exclusive ``fcntl.flock`` on ``path`` (created) without waiting; returns its
    file descriptor (close it to release), or None when another open file holds it. The
    holder's pid is written into the file for messages."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def lock_holder(path: Path) -> str:
    """The pid written in lock file ``path`` ("unknown" if none)."""
    try:
        return Path(path).read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def head_lag_seconds(segs: list[tuple[int, Path]], committed: int, end: int) -> float:
    """Age in seconds of the record at ``committed`` (the oldest not yet in the store); 0 when
    there is none."""
    head = read_records(segs, committed, end, 1)
    if not head:
        return 0.0
    return max(time.time_ns() - head[0].received_unix_nano, 0) / 1e9


class Spool:
    """The appending side of the spool in ``directory``.

    Args:
        max_bytes: unprocessed bytes at most; beyond, :meth:`append` raises SpoolFullError.
        segment_bytes: a new segment file is started past this size.
        external_commits: the processor runs in another process and commits the ``offset``
            file there; :attr:`committed` is re-read from it (at most every 50 ms) when needed.

    Raises:
        ConfigError: another process appends to ``directory`` (names DRIFTLINE_SPOOL_DIR).
    """

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = 1 << 30,
        segment_bytes: int = 64 << 20,
        external_commits: bool = False,
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        lock = lock_file(self.dir / "writer.lock")
        if lock is None:
            raise ConfigError(
                f"DRIFTLINE_SPOOL_DIR: {self.dir} is in use by another collector (pid "
                f"{lock_holder(self.dir / 'writer.lock')}); give each collector its own spool"
            )
        self._lock_fd = lock
        self.external_commits = external_commits
        self._synced_at = 0.0
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._cond = threading.Condition()
        self._pending: list[tuple[bytes, Future[int]]] = []
        self._closing = False
        self.committed = self._read_offset()
        self._open_tail()
        self.durable_end = self._end
        self.oldest_unprocessed_ns: int | None = None
        self._thread = threading.Thread(target=self._run, name="driftline-spool", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ files
    def segments(self) -> list[tuple[int, Path]]:
        """(base offset, path) of every segment, oldest first."""
        return segments_of(self.dir)

    def _open_tail(self) -> None:
        segs = self.segments()
        if not segs:
            base = self.committed
            path = self.dir / f"{base:020d}.seg"
            path.touch()
            segs = [(base, path)]
        base, path = segs[-1]
        data = path.read_bytes()
        valid = 0
        for _start, rec in _records(data, base):
            valid = rec.end - base
        if valid < len(data):  # a torn append: never acknowledged
            log.warning("spool: cutting %d torn bytes off %s", len(data) - valid, path.name)
            with open(path, "r+b") as f:
                f.truncate(valid)
                os.fsync(f.fileno())
        self._base = base
        self._file = open(path, "ab")  # noqa: SIM115 - kept open for appends
        self._end = base + valid

    def _read_offset(self) -> int:
        return read_offset(self.dir)

    def commit(self, offset: int) -> None:
        """Record that everything before ``offset`` is in the store (atomic, durable)."""
        write_offset(self.dir, offset)
        with self._cond:
            self.committed = offset

    def sync_committed(self, max_age_s: float = 0.05) -> int:
        """With ``external_commits``, re-read the ``offset`` file if the last read is older
        than ``max_age_s``; returns :attr:`committed`."""
        now = time.monotonic()
        if self.external_commits and now - self._synced_at >= max_age_s:
            self._synced_at = now
            offset = self._read_offset()
            with self._cond:
                self.committed = max(self.committed, offset)
        return self.committed

    # ------------------------------------------------------------------ appends
    @property
    def unprocessed_bytes(self) -> int:
        """Durable bytes not yet committed to the store."""
        return self.durable_end - self.sync_committed()

    def lag_seconds(self) -> float:
        """Age of the oldest spooled request not yet in the store, in seconds; 0 when none."""
        committed = self.sync_committed()
        if self.durable_end <= committed:
            return 0.0
        try:
            return head_lag_seconds(self.segments(), committed, self.durable_end)
        except FileNotFoundError:  # pruned by the processor past a stale offset: re-read it
            committed = self.sync_committed(0.0)
            return head_lag_seconds(self.segments(), committed, self.durable_end)

    def append(self, kind: int, tenant: str, body: bytes, received_unix_nano: int) -> Future[int]:
        """Queue a record; the future resolves (to its end offset) once it is fsynced.

        Raises:
            SpoolFullError: ``max_bytes`` unprocessed already (retry after a second).
        """
        data = encode(received_unix_nano, kind, tenant, body)
        fut: Future[int] = Future()
        with self._cond:
            if self._closing:
                raise SpoolFullError("the collector is shutting down", retry_after_s=5)
            queued = sum(len(d) for d, _ in self._pending)
            over = self._end + queued + len(data) - self.max_bytes
            if over > self.committed:  # the processor may have moved on since (RLock)
                self.sync_committed(0.0)
            if over > self.committed:
                raise SpoolFullError(
                    f"spool full ({self._end - self.committed} bytes not yet processed)",
                    retry_after_s=1,
                )
            self._pending.append((data, fut))
            self._cond.notify_all()
        return fut

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending:
                    return
                group, self._pending = self._pending, []
            try:
                ends = []
                for data, _ in group:
                    if self._end - self._base > self.segment_bytes:
                        self._roll()
                    self._file.write(data)
                    self._end += len(data)
                    ends.append(self._end)
                self._file.flush()
                os.fsync(self._file.fileno())
            except OSError as exc:
                log.error("spool write failed: %s", exc)
                for _, fut in group:
                    fut.set_exception(SpoolFullError(f"spool write failed: {exc}", retry_after_s=5))
                continue
            with self._cond:
                self.durable_end = self._end
                self._cond.notify_all()
            for (_, fut), end in zip(group, ends, strict=True):
                fut.set_result(end)

    def _roll(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._base = self._end
        self._file = open(self.dir / f"{self._base:020d}.seg", "ab")  # noqa: SIM115
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)  # the new file's directory entry
        finally:
            os.close(dfd)

    # ------------------------------------------------------------------ reads
    def read(self, offset: int, max_bytes: int = 8 << 20) -> list[Record]:
        """Durable records from ``offset`` (a record boundary) on: those that start within the
        next ``max_bytes`` bytes of its segment, at least one when there is one."""
        end = self.durable_end
        if offset >= end:
            return []
        return read_records(self.segments(), offset, end, max_bytes)

    def wait(self, offset: int, timeout_s: float) -> bool:
        """Wait until data past ``offset`` is durable; True if there is some."""
        with self._cond:
            return self._cond.wait_for(lambda: self.durable_end > offset, timeout_s)

    def replay(self, since_unix_nano: int) -> Iterator[Record]:
        """Every record kept, received at or after ``since_unix_nano``, oldest first."""
        for base, path in self.segments():
            for _start, rec in _records(path.read_bytes(), base):
                if rec.end <= self.durable_end and rec.received_unix_nano >= since_unix_nano:
                    yield rec

    def prune(self, keep_s: float) -> int:
        """Delete processed segments older than ``keep_s`` seconds; returns how many."""
        return prune_segments(self.segments(), self.committed, keep_s)

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(10)
        self._file.close()
        os.close(self._lock_fd)  # releases writer.lock
