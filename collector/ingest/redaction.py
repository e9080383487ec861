"""PII and secret redaction of captured prompt / completion text, per tenant ``capture_content``.

Modes (``CaptureContent``): ``none`` stores no text, ``redacted`` stores the text with each finding
replaced by a placeholder, ``full`` stores it unchanged.

Kinds and how each is found:

* ``[SECRET]``: API keys and tokens by their documented prefixes (OpenAI ``sk-``, AWS access key
  ids ``AKIA``/``ASIA``, GitHub ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``,
  Slack ``xox?-``, Stripe ``sk_live_``/``rk_live_``, Google ``AIza``; ``SK-`` and lower-case
  AWS ids only with a random-looking part), JWTs, PEM and PGP private keys, the credentials of
  an ``Authorization: <scheme> ...`` header, ``Basic <base64 of user:password>``, ``Bearer``
  tokens, URL passwords (``scheme://user:[SECRET]@host``), and ``key=value`` pairs whose key
  names a secret and whose value looks generated: Shannon entropy >= 3 bits per character with
  a digit (after detect-secrets' high-entropy-string idea); password-like keys (``password``,
  ``passwd``, ``pwd``, ``pass``, ``pw``) redact any value of any length, except a plain word
  after ``pass: `` (prose).
* ``[EMAIL]``: the RFC 5322 dot-atom shape (letters of any script, RFC 6531) with ``@``, the
  full-width ``＠`` or ``﹫``, a dotted domain (IDN labels in any script or ``xn--``) and an
  alphabetic or ``xn--`` TLD.
* ``[IP]``: IPv4 / IPv6 candidates, each confirmed by the standard library ``ipaddress``.
* ``[CARD]``: 13-19 digits (optionally grouped by one kind of separator: space, ``-``, ``.``
  or ``_``) passing the Luhn
  checksum (ISO/IEC 7812-1 Annex B); a number failing it is kept.
* ``[PHONE]``: Google's libphonenumber through ``phonenumbers`` with leniency
  ``STRICT_GROUPING`` (a valid number whose digit groups match the national format), so dates,
  versions, times and long order ids are not phones; numbers glued to an identifier (``#``,
  ``ORD-``) are kept.

Library choice: presidio-analyzer needs spaCy language models that cannot be downloaded here and
costs a model load per process; scrubadub (last release 2023) wraps the same regexes plus
optional models. ``phonenumberslite`` (the maintained libphonenumber port without the geocoder /
carrier data we do not need) ships its metadata in the wheel and is the one detector where a
regex is clearly worse. Everything else is a precompiled pattern plus ``ipaddress`` or the
five-line Luhn check; no model, no I/O, deterministic.

Invisible characters that could split a key word or a number (zero-width space, soft hyphen,
word joiner...; :data:`_INVISIBLE`) are removed from the text before it is scanned and stored.

Detectors run in the order above on the progressively redacted text, so a later detector never
sees (or double-counts) what an earlier one replaced (PEM blocks and JWTs first among secrets).

Bounded for any input (issue 35): every detector runs in time linear in the length of the text
(:mod:`collector.ingest.redaction_detectors` says how, pattern by pattern), each text is
truncated to the stored limit before it is scanned, and a record has a CPU budget
(:mod:`collector.ingest.redaction_budget`); text past a bound is replaced by a marker, never
stored unscanned.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import phonenumbers

from collector.ingest import redaction_budget as budgets
from collector.ingest.redaction_detectors import (
    PLACEHOLDERS,
    STEPS,
    Keep,
    PiiKind,
    Replace,
    luhn_valid,
    phones,
)
from collector.ingest.redaction_gates import gates, phone_possible

__all__ = [
    "PLACEHOLDERS",
    "CaptureContent",
    "PiiKind",
    "RedactionCounts",
    "RedactionResult",
    "apply_capture_policy",
    "luhn_valid",
    "redact",
    "redact_count",
]


class CaptureContent(StrEnum):
    """Per-tenant content capture setting."""

    NONE = "none"
    REDACTED = "redacted"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class RedactionCounts:
    """Number of replacements per kind in one text."""

    secret: int = 0
    email: int = 0
    ip: int = 0
    card: int = 0
    phone: int = 0

    @property
    def total(self) -> int:
        """All replacements."""
        return self.secret + self.email + self.ip + self.card + self.phone

    def as_dict(self) -> dict[str, int]:
        """``{"secret": n, "email": n, "ip": n, "card": n, "phone": n}`` for JSON columns."""
        return {kind.value: getattr(self, kind.value) for kind in PiiKind}


@dataclass(frozen=True, slots=True)
class RedactionResult:
    """What to store for one text under one capture mode.

    ``text`` is ``None`` when nothing is stored (mode ``none``, or no text given). ``counts`` is
    ``None`` when the text was not scanned (modes ``none`` and ``full``): unknown, not zero.
    """

    mode: CaptureContent
    text: str | None
    counts: RedactionCounts | None


# --- driver ----------------------------------------------------------------------------------


#: matches of one step between two budget checks (a step's decisions run in Python)
_CHECK_EVERY_MATCHES = 256


def _sub(
    pattern: Replace, text: str, keep: Keep, check: Callable[[], None] | None = None
) -> tuple[str, int]:
    count = 0
    seen = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count, seen
        replacement, hit = keep(match)
        count += hit
        seen += 1
        if check is not None and seen % _CHECK_EVERY_MATCHES == 0:
            check()
        return replacement

    return pattern.sub(replace, text), count


def _phones(
    text: str, region: str | None, check: Callable[[], None] | None = None
) -> tuple[str, int]:
    """Phones replaced; where the matcher gave up, the text after it is replaced by
    :data:`~collector.ingest.redaction_budget.UNSCANNED`."""
    redacted, count, cut = phones(text, region, check)
    if cut is not None:
        redacted = redacted[:cut] + budgets.UNSCANNED.format(n=len(redacted) - cut)
    return redacted, count


def _check_region(phone_region: str | None) -> None:
    if phone_region is not None and phone_region not in phonenumbers.SUPPORTED_REGIONS:
        raise ValueError(
            f"phone_region must be an ISO 3166-1 alpha-2 region known to libphonenumber "
            f"or None, got {phone_region!r}"
        )


def redact(text: str, *, phone_region: str | None = "US") -> RedactionResult:
    """Replace secrets, e-mail addresses, IP addresses, card numbers and phone numbers.

    Args:
        text: any text (prompt, completion, tool output).
        phone_region: ISO 3166-1 alpha-2 region used to read phone numbers written without a
            ``+country`` prefix; ``None`` finds only international-format numbers.

    Returns:
        ``RedactionResult(mode=redacted, text=<redacted>, counts=<per kind>)``. Within the
        bounds of :mod:`collector.ingest.redaction_budget` (of the record open with
        ``record_budget``, else the defaults): text past ``max_chars`` is replaced by a
        truncation marker, and the whole text by a marker (counts 0) once the record's CPU
        budget is spent.

    Raises:
        ValueError: ``phone_region`` is not a region libphonenumber knows.
    """
    _check_region(phone_region)
    text, counts = _redact_bounded(text, phone_region)
    return RedactionResult(mode=CaptureContent.REDACTED, text=text, counts=RedactionCounts(*counts))


def redact_count(text: str, *, phone_region: str | None = "US") -> tuple[str, int]:
    """:func:`redact` for the ingest hot path: ``(redacted text, number of replacements)``
    without building the result objects. Same text and the same total as :func:`redact`.

    Raises:
        ValueError: ``phone_region`` is not a region libphonenumber knows.
    """
    _check_region(phone_region)
    text, counts = _redact_bounded(text, phone_region)
    return text, sum(counts)


#: position of each kind in ``RedactionCounts`` (its fields follow ``PiiKind``)
_SLOT = {kind: i for i, kind in enumerate(PiiKind)}
assert tuple(RedactionCounts.__dataclass_fields__) == tuple(k.value for k in PiiKind)
_SLOTTED_STEPS = tuple((_SLOT[kind], pattern, keep) for kind, pattern, keep in STEPS)
_PHONE = _SLOT[PiiKind.PHONE]


def _redact(
    text: str, phone_region: str | None, check: Callable[[], None] | None = None
) -> tuple[str, list[int]]:
    """The redacted text and the counts in ``RedactionCounts`` field order; ``check()`` runs
    between the steps (it may raise :class:`~collector.ingest.redaction_budget.OverBudget`)."""
    counts = [0, 0, 0, 0, 0]
    for (slot, pattern, keep), gate in zip(_SLOTTED_STEPS, gates(text), strict=True):
        if gate:  # cheap literal pre-checks skip patterns that cannot match (measured 10x)
            text, n = _sub(pattern, text, keep, check)
            counts[slot] += n
            if check is not None:
                check()
    if phone_possible(text):  # fewer digits than any valid number: no phone to find
        text, n = _phones(text, phone_region, check)
        counts[_PHONE] += n
    return text, counts


#: invisible characters that can split a key word or a number without showing (zero-width
#: space, soft hyphen, word joiner, BOM, Mongolian vowel separator, invisible operators):
#: removed before the scan. Zero-width (non-)joiners and direction marks are removed only
#: between two ASCII characters: elsewhere they shape scripts and emoji.
_INVISIBLE = re.compile(
    "[\u00ad\u180e\u200b\u2060-\u2064\ufeff]++"
    "|(?<=[!-~])[\u200c-\u200f\u202a-\u202e\u2066-\u2069]++(?=[!-~])"
)


def _redact_bounded(text: str, phone_region: str | None) -> tuple[str, list[int]]:
    """:func:`_redact` within the open record's budget: invisible characters removed
    (:data:`_INVISIBLE`), the text truncated before the scan, and replaced by a marker when
    the budget is spent."""
    if not text.isascii():
        text = _INVISIBLE.sub("", text)
    budget = budgets.current()
    head, marker = text, ""
    if len(text) > budget.max_chars:
        head, marker = budgets.truncate(text, budget.max_chars)
    try:
        check = budget.charge(len(head))
        redacted, counts = _redact(head, phone_region, check)
    except budgets.OverBudget:
        return budgets.OVER_BUDGET.format(n=len(text)), [0, 0, 0, 0, 0]
    return redacted + marker, counts


def apply_capture_policy(
    text: str | None, mode: CaptureContent | str, *, phone_region: str | None = "US"
) -> RedactionResult:
    """What to store for ``text`` under a tenant's ``capture_content`` mode.

    Args:
        text: captured content, or ``None`` when the span carried none.
        mode: ``none`` | ``redacted`` | ``full`` (enum or its string value).
        phone_region: as for ``redact``.

    Returns:
        ``none`` -> text ``None``, counts ``None``; ``full`` -> the text unchanged, counts
        ``None`` (not scanned); ``redacted`` -> ``redact(text)`` (text and counts ``None`` when
        ``text`` is ``None``).

    Raises:
        ValueError: ``mode`` is not one of the three values, or ``phone_region`` is unknown.
    """
    try:
        capture = CaptureContent(mode)
    except ValueError as exc:
        allowed = ", ".join(m.value for m in CaptureContent)
        raise ValueError(f"mode must be one of {allowed}, got {mode!r}") from exc
    _check_region(phone_region)
    if capture is CaptureContent.NONE:
        return RedactionResult(mode=capture, text=None, counts=None)
    if capture is CaptureContent.FULL or text is None:
        return RedactionResult(mode=capture, text=text, counts=None)
    return redact(text, phone_region=phone_region)
