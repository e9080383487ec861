"""Is the spool's processor getting anywhere? What ``/healthz`` reports as ``degraded``.

Two signs, each with its setting:

* **stalled**: records are pending and the committed offset has not moved for
  ``DRIFTLINE_SPOOL_STALL_S`` seconds (a store outage, a processor that is gone or stuck).
  Measured by :class:`StallWatch` from the offset the spool reports, so it works the same
  whether the processor is a thread of this process or another process.
* **quarantining**: records were quarantined (:mod:`collector.spool.quarantine`) within the
  last ``DRIFTLINE_SPOOL_QUARANTINE_WINDOW_S`` seconds and are still there: some client sends
  what the store refuses, or an upgrade broke something; an operator should look (``driftline
  spool quarantine list``), then ``replay`` or ``remove`` them, which clears it. Read from the
  quarantine's append-only journal, so a restart within the window still reports it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from collector.spool.quarantine import JournalFollower


class _Spool(Protocol):
    committed: int

    @property
    def unprocessed_bytes(self) -> int: ...


class StallWatch:
    """Seconds the spool's committed offset has stayed where it is while records were pending.

    The clock starts at the first call that sees records pending at the current offset: after
    a call that saw nothing pending (an idle spool), or one that saw the offset elsewhere. So
    one probe after a long idle period, a request just arrived, reads 0, not the idle time
    (the old clock ran from the previous call). A real stall is reported at most one probe
    interval late.

    Args:
        clock: monotonic seconds (``time.monotonic``; a test passes its own).
    """

    def __init__(self, spool: _Spool, clock: Callable[[], float] = time.monotonic) -> None:
        self.spool = spool
        self.clock = clock
        self._offset: int | None = None
        self._pending = False
        self._since = clock()

    def stalled_s(self) -> float:
        """0 when nothing is pending, or when the offset moved or nothing was pending at the
        last call; else the seconds since the first call that saw records pending here."""
        pending = self.spool.unprocessed_bytes  # re-reads the committed offset when external
        committed = self.spool.committed
        now = self.clock()
        if pending <= 0 or committed != self._offset or not self._pending:
            self._offset, self._since, self._pending = committed, now, pending > 0
            return 0.0
        return now - self._since


def spool_problems(
    stall: StallWatch, journal: JournalFollower, *, stall_s: float, window_s: float
) -> list[str]:
    """Why the spool's processing is degraded, in English (empty: it is not).

    Args:
        stall_s: seconds without progress, records pending, that count as stalled.
        window_s: quarantined records within this many seconds count, while they are still
            in the quarantine.
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
