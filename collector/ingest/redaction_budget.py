"""Bounds on the redaction of one record: text truncated before it is scanned, and CPU time.

Every detector is linear in the length of its text (:mod:`collector.ingest.redaction_detectors`),
so truncating each text to ``max_chars`` (the stored limit, ``DRIFTLINE_MAX_TEXT_CHARS``) bounds
the work per text. A record (a span: its content attributes and content events) may hold many
texts, and libphonenumber costs ~0.4 ms per number found, so the record also has a CPU budget:
``cpu_s`` seconds of this thread's CPU time (``time.thread_time``, so another process's load
does not count) for all of its texts together.

What is stored when a bound is reached, never anything unscanned:

* a text longer than ``max_chars``: its first ``max_chars`` characters, cut back to the last
  whitespace (a finding cut in two, such as half a key, would no longer match) and to before a
  ``BEGIN ... PRIVATE KEY`` line whose ``END`` line was cut off, are redacted; the rest is
  replaced by :data:`TRUNCATED` (``…[truncated by driftline before redaction: original length
  N chars]``);
* the budget spent: the text being redacted and every later text of the record are replaced by
  :data:`OVER_BUDGET` (``[not stored by driftline: redaction CPU budget exceeded, N chars]``).
  The clock is read only once ``CLOCK_EVERY_CHARS`` characters were scanned (counted across
  the spans of a batch, and between the steps of a longer text), so ordinary spans rarely
  read it.

A batch (every span of one spooled record, or of one direct request) also has a budget of its
own, ``total_cpu_s`` (``DRIFTLINE_REDACTION_CPU_S_PER_RECORD``, default
:data:`DEFAULT_RECORD_CPU_S`): the per-span budget alone let one 9.6 MiB request of 40
adversarial spans hold the spool processor (and every tenant behind it) for ~26 s. Once it is
spent, every remaining text of the batch is replaced by :data:`OVER_BUDGET` whole.

A record's budget is opened by :func:`record_budget` around its redaction (``prepare`` opens
one per batch and restarts it for each span); a text redacted outside one gets a budget of its
own with the defaults.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from contextvars import ContextVar, Token

__all__ = [
    "CLOCK_EVERY_CHARS",
    "DEFAULT_CPU_S",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_RECORD_CPU_S",
    "OVER_BUDGET",
    "TRUNCATED",
    "UNSCANNED",
    "OverBudget",
    "RecordBudget",
    "current",
    "record_budget",
    "truncate",
]

#: ``Settings.max_text_chars``' default: the longest text kept (and scanned)
DEFAULT_MAX_CHARS = 1_000_000
#: CPU seconds of redaction per record. Ordinary spans take ~50 us; 1,000,000 characters of
#: dense adversarial text take ~1 s, so one record cannot hold a worker for long.
DEFAULT_CPU_S = 0.5
#: CPU seconds of redaction for all spans of one spooled record or direct request (~4 spans of
#: dense adversarial text; ordinary 4 MiB batches take ~0.1 s)
DEFAULT_RECORD_CPU_S = 2.0
#: characters scanned in a record between two reads of the CPU clock
CLOCK_EVERY_CHARS = 16_384

TRUNCATED = "…[truncated by driftline before redaction: original length {n} chars]"
OVER_BUDGET = "[not stored by driftline: redaction CPU budget exceeded, {n} chars]"
UNSCANNED = "…[not stored by driftline: {n} chars past the phone matcher's limit]"


class OverBudget(Exception):
    """The record's CPU budget is spent (internal: the redaction stores :data:`OVER_BUDGET`)."""


class RecordBudget:
    """The bounds of one record's redaction.

    Args:
        max_chars: characters of each text scanned and kept (> 0).
        cpu_s: CPU seconds for all texts of the record (> 0).
        total_cpu_s: CPU seconds for all records until the budget is dropped, over every
            :meth:`restart` (> 0; None: no such bound).

    Raises:
        ValueError: a bound is not positive.
    """

    __slots__ = (
        "_deadline",
        "_total_deadline",
        "_unclocked",
        "cpu_s",
        "exhausted",
        "max_chars",
        "spent",
        "total_cpu_s",
    )

    def __init__(
        self,
        max_chars: int = DEFAULT_MAX_CHARS,
        cpu_s: float = DEFAULT_CPU_S,
        total_cpu_s: float | None = None,
    ) -> None:
        if max_chars <= 0:
            raise ValueError(f"max_chars must be > 0, got {max_chars!r}")
        if not cpu_s > 0:
            raise ValueError(f"cpu_s must be > 0, got {cpu_s!r}")
        if total_cpu_s is not None and not total_cpu_s > 0:
            raise ValueError(f"total_cpu_s must be > 0, got {total_cpu_s!r}")
        self.max_chars = max_chars
        self.cpu_s = cpu_s
        self.total_cpu_s = total_cpu_s
        self.exhausted = False
        #: ``total_cpu_s`` is spent: every later record is exhausted from its start
        self.spent = False
        self._deadline: float | None = None
        self._total_deadline: float | None = None
        self._unclocked = 0

    def restart(self) -> None:
        """Start a new record under the same bounds (cheaper than a new budget per span); the
        characters not yet clocked and ``total_cpu_s`` carry over."""
        self.exhausted = self.spent
        self._deadline = None

    def check(self) -> None:
        """Read the CPU clock (the first read starts the budget).

        Raises:
            OverBudget: the budget is spent (and stays spent for the record).
        """
        now = time.thread_time()
        if self._total_deadline is None:
            if self.total_cpu_s is not None:
                self._total_deadline = now + self.total_cpu_s
        elif now > self._total_deadline:
            self.spent = self.exhausted = True
            raise OverBudget
        if self._deadline is None:
            self._deadline = now + self.cpu_s
        elif now > self._deadline:
            self.exhausted = True
            raise OverBudget

    def charge(self, chars: int) -> Callable[[], None] | None:
        """Before scanning a text of ``chars`` characters: the check to run between its steps
        (None for a short text, which is checked with the record's next ones).

        Raises:
            OverBudget: the budget is spent.
        """
        if self.exhausted:
            raise OverBudget
        self._unclocked += chars
        if self._unclocked >= CLOCK_EVERY_CHARS:
            self._unclocked = 0
            self.check()
            return self.check if chars >= CLOCK_EVERY_CHARS else None
        return None


_RECORD: ContextVar[RecordBudget | None] = ContextVar("driftline_redaction_budget", default=None)


def current() -> RecordBudget:
    """The open record's budget, or a new one with the defaults outside :func:`record_budget`."""
    return _RECORD.get() or RecordBudget()


class record_budget:  # a function to its callers: ``with record_budget(...):``
    """Open one record's budget for the redactions made inside the ``with`` block (this thread
    or task); the block gets the :class:`RecordBudget`. A class rather than a generator
    context manager: it runs once per span on the ingest hot path.

    Raises:
        ValueError: a bound is not positive.
    """

    __slots__ = ("_budget", "_token")

    def __init__(
        self,
        max_chars: int = DEFAULT_MAX_CHARS,
        cpu_s: float = DEFAULT_CPU_S,
        total_cpu_s: float | None = None,
    ) -> None:
        self._budget = RecordBudget(max_chars, cpu_s, total_cpu_s)
        self._token: Token[RecordBudget | None] | None = None

    def __enter__(self) -> RecordBudget:
        self._token = _RECORD.set(self._budget)
        return self._budget

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _RECORD.reset(self._token)


_PEM_BEGIN = re.compile(r"-----BEGIN[ A-Z]*PRIVATE\ KEY(?:\ BLOCK)?-----")  # PGP: BLOCK
_PEM_END = re.compile(r"-----END[ A-Z]*PRIVATE\ KEY(?:\ BLOCK)?-----")
_TOKEN_TAIL = re.compile(r"\S*")


def truncate(text: str, max_chars: int) -> tuple[str, str]:
    """``(head, marker)``: the part of ``text`` to scan and keep, and what replaces the rest
    (``""`` when ``text`` fits in ``max_chars``). See the module docstring for the cut."""
    if len(text) <= max_chars:
        return text, ""
    head = text[:max_chars]
    if not text[max_chars].isspace():  # the cut is inside a token: drop the token's head
        tail = _TOKEN_TAIL.match(head[::-1])
        head = head[: len(head) - (tail.end() if tail else 0)]
    begin = None
    for m in _PEM_BEGIN.finditer(head):
        begin = m
    if begin is not None and _PEM_END.search(head, begin.end()) is None:
        head = head[: begin.start()]  # a private key whose END line was cut off
    return head, TRUNCATED.format(n=len(text))
