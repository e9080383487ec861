"""The processor's status file, ``processor.json`` in the spool directory.

The processor rewrites it (temporary file + rename, no fsync: it is advisory) after its
commits, at most every :data:`WRITE_EVERY_S`, and once a second when idle; the receiving
process reads it for ``/metrics`` and ``/healthz`` when the processor runs elsewhere. Fields:
``pid``, ``started_unix`` (s), ``spans_processed`` (since that start), ``committed`` (offset),
``updated_unix`` (s).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

STATUS_FILE = "processor.json"
WRITE_EVERY_S = 0.2
IDLE_WRITE_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class ProcessorStatus:
    """One processor run's progress (see the module docstring for the fields)."""

    pid: int
    started_unix: float
    spans_processed: int
    committed: int
    updated_unix: float


def write_status(directory: Path, status: ProcessorStatus) -> None:
    """Replace ``processor.json`` in ``directory`` atomically."""
    path = Path(directory) / STATUS_FILE
    tmp = path.with_name(f"{STATUS_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(status)))
    os.replace(tmp, path)


def read_status(directory: Path) -> ProcessorStatus | None:
    """The status in ``directory``; None when there is none or it cannot be parsed."""
    try:
        raw: Any = json.loads((Path(directory) / STATUS_FILE).read_text())
        return ProcessorStatus(
            pid=int(raw["pid"]),
            started_unix=float(raw["started_unix"]),
            spans_processed=int(raw["spans_processed"]),
            committed=int(raw["committed"]),
            updated_unix=float(raw["updated_unix"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ProcessedCounter:
    """Turns the status file's per-run ``spans_processed`` into increments of a counter that
    survives processor restarts (a new run counts from its own start)."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self._run: tuple[int, float] | None = None
        self._seen = 0
        self._lock = threading.Lock()
        self._since = time.time()
        self.last: ProcessorStatus | None = None

    def poll(self) -> int:
        """Spans processed since the previous poll (0 when the file is unchanged or absent)."""
        status = read_status(self.dir)
        with self._lock:
            if status is None:
                return 0
            self.last = status
            run = (status.pid, status.started_unix)
            if run != self._run:  # a run from before this counter counts from now on
                before = status.started_unix < self._since and self._run is None
                self._run, self._seen = run, status.spans_processed if before else 0
            delta = max(status.spans_processed - self._seen, 0)
            self._seen = max(status.spans_processed, self._seen)
            return delta

    def age_s(self) -> float | None:
        """Seconds since the processor last wrote its status; None if it never did."""
        return None if self.last is None else max(time.time() - self.last.updated_unix, 0.0)
