"""Is the spool's processor getting anywhere? What ``/healthz`` reports as ``degraded``.

Two signs, each with its setting:

* **stalled**: records are pending and the committed offset has not moved for
  ``DRIFTLINE_SPOOL_STALL_S`` seconds (a store outage, a processor that is gone or stuck).
  Measured by :class:`StallWatch` from the offset the spool reports, so it works the same
  whether the processor is a thread of this process or another process.
* **quarantining**: records were quarantined (:mod:`collector.spool.quarantine`) within the
  last ``DRIFTLINE_SPOOL_QUARANTINE_WINDOW_S`` seconds: some client sends what the store
  refuses, or an upgrade broke something; an operator should look (``driftline spool
  quarantine list``). Read from the quarantine's append-only journal, so a restart within the
  window still reports it.
"""

from __future__ import annotations

import time
from typing import Protocol

from collector.spool.quarantine import JournalFollower


class _Spool(Protocol):
    committed: int

    @property
    def unprocessed_bytes(self) -> int: ...


class StallWatch:
    """Seconds since the spool's committed offset last moved while records were pending."""

    def __init__(self, spool: _Spool) -> None:
        self.spool = spool
        self._offset: int | None = None
        self._since = time.monotonic()

    def stalled_s(self) -> float:
        """0 when nothing is pending or the offset moved since the last call; else the seconds
        since it was first seen where it is (the first call after a start counts from then)."""
        pending = self.spool.unprocessed_bytes  # re-reads the committed offset when external
        committed = self.spool.committed
        now = time.monotonic()
        if pending <= 0 or committed != self._offset:
            self._offset, self._since = committed, now
            return 0.0
        return now - self._since


def spool_problems(
    stall: StallWatch, journal: JournalFollower, *, stall_s: float, window_s: float
) -> list[str]:
    """Why the spool's processing is degraded, in English (empty: it is not).

    Args:
        stall_s: seconds without progress, records pending, that count as stalled.
        window_s: quarantined records within this many seconds count.
    """
    problems = []
    stalled = stall.stalled_s()
    if stalled >= stall_s:
        problems.append(
            f"spool processor has not advanced for {stalled:.0f} s with records pending "
            f"(DRIFTLINE_SPOOL_STALL_S={stall_s:g})"
        )
    journal.poll()
    recent = journal.count_since(time.time() - window_s)
    if recent:
        problems.append(
            f"{recent} spool records quarantined in the last {window_s:g} s "
            "(driftline spool quarantine list)"
        )
    return problems
