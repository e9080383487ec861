"""The processor's view of a spool that another process appends to.

:class:`SpoolReader` reads the segment files a :class:`~collector.spool.log.Spool` in the
receiving process writes, and commits the ``offset`` file the receiver reads back. Without the
appender's in-memory durable end, the end is the size of the files: a record the receiver has
written but not yet fsynced may be processed before it is acknowledged (harmless: if the
receiver dies first, the client is never acknowledged and retries, and writes upsert). A record
still being written fails its length or CRC check and ends the read, as a torn tail does. Before
an offset is committed the segments it covers are fsynced from here (the same page cache), so a
committed offset never points past data a power loss could take back.

Only one processor may consume a directory: :func:`acquire_processor_lock` takes
``processor.lock`` (``fcntl.flock``, released by the kernel when the holder dies).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from collector.spool.log import (
    Record,
    head_lag_seconds,
    lock_file,
    lock_holder,
    prune_segments,
    read_offset,
    read_records,
    segments_of,
    write_offset,
)

PROCESSOR_LOCK = "processor.lock"
#: how often :meth:`SpoolReader.wait` looks at the files for new data, in seconds
POLL_S = 0.01


class SpoolLockedError(Exception):
    """Another processor consumes this spool directory."""


def acquire_processor_lock(
    directory: Path,
    *,
    wait: bool,
    stop: Callable[[], bool] = lambda: False,
    on_wait: Callable[[str], None] | None = None,
) -> int | None:
    """Take ``processor.lock`` of ``directory``; returns the lock's file descriptor (close it
    to release), or None when ``stop()`` turned true while waiting.

    Args:
        wait: poll every 0.5 s until the holder is gone (``on_wait`` is called once with a
            message naming it); else refuse at once.

    Raises:
        SpoolLockedError: ``wait`` is false and another processor holds the lock (the message
            names its pid).
    """
    path = Path(directory) / PROCESSOR_LOCK
    Path(directory).mkdir(parents=True, exist_ok=True)
    told = False
    while True:
        fd = lock_file(path)
        if fd is not None:
            return fd
        msg = (
            f"spool {directory} is consumed by another processor (pid {lock_holder(path)}, "
            f"lock {path})"
        )
        if not wait:
            raise SpoolLockedError(msg)
        if not told and on_wait is not None:
            on_wait(msg + "; waiting for it to stop")
            told = True
        if stop():
            return None
        time.sleep(0.5)


class SpoolReader:
    """Reads and commits the spool in ``directory`` (the interface
    :class:`~collector.spool.processor.SpoolProcessor` uses: ``committed``, ``read``, ``wait``,
    ``commit``, ``prune``, ``unprocessed_bytes``)."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.committed = read_offset(self.dir)
        self._closed = threading.Event()

    def segments(self) -> list[tuple[int, Path]]:
        """(base offset, path) of every segment, oldest first."""
        return segments_of(self.dir)

    @property
    def durable_end(self) -> int:
        """The offset just past the last byte written (the receiver may not have fsynced it)."""
        segs = self.segments()
        if not segs:
            return self.committed
        base, path = segs[-1]
        try:
            return base + path.stat().st_size
        except FileNotFoundError:  # pruned or rolled between the listing and the stat
            return base

    @property
    def unprocessed_bytes(self) -> int:
        return self.durable_end - self.committed

    def lag_seconds(self) -> float:
        """Age of the oldest record not yet committed, in seconds; 0 when none."""
        end = self.durable_end
        if end <= self.committed:
            return 0.0
        return head_lag_seconds(self.segments(), self.committed, end)

    def read(self, offset: int, max_bytes: int = 8 << 20) -> list[Record]:
        """Complete records from ``offset`` on (see :func:`collector.spool.log.read_records`)."""
        return read_records(self.segments(), offset, self.durable_end, max_bytes)

    def wait(self, offset: int, timeout_s: float) -> bool:
        """Poll (every :data:`POLL_S`) until bytes past ``offset`` are written; True if so."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.durable_end > offset:
                return True
            left = deadline - time.monotonic()
            if left <= 0 or self._closed.wait(min(POLL_S, left)):
                return False

    def commit(self, offset: int) -> None:
        """fsync the segments holding ``[committed, offset)``, then record ``offset``."""
        segs = self.segments()
        for i, (base, path) in enumerate(segs):
            nxt = segs[i + 1][0] if i + 1 < len(segs) else None
            if base >= offset or (nxt is not None and nxt <= self.committed):
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        write_offset(self.dir, offset)
        self.committed = offset

    def prune(self, keep_s: float) -> int:
        """Delete processed segments older than ``keep_s`` seconds; returns how many."""
        return prune_segments(self.segments(), self.committed, keep_s)

    def close(self) -> None:
        self._closed.set()
