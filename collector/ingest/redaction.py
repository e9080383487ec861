"""PII and secret redaction of captured prompt / completion text, per tenant ``capture_content``.

Modes (``CaptureContent``): ``none`` stores no text, ``redacted`` stores the text with each finding
replaced by a placeholder, ``full`` stores it unchanged.

Kinds and how each is found:

* ``[SECRET]``: API keys and tokens by their documented prefixes (OpenAI ``sk-``, AWS access key
  ids ``AKIA``/``ASIA``, GitHub ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``,
  Slack ``xox?-``, Stripe ``sk_live_``/``rk_live_``, Google ``AIza``), JWTs, PEM private keys,
  ``Bearer`` tokens, and ``key=value`` pairs whose key names a secret and whose value looks
  generated: Shannon entropy >= 3 bits per character with a digit (after detect-secrets'
  high-entropy-string idea); password-like keys redact any value.
* ``[EMAIL]``: the RFC 5322 dot-atom shape with a dotted domain and an alphabetic TLD.
* ``[IP]``: IPv4 / IPv6 candidates, each confirmed by the standard library ``ipaddress``.
* ``[CARD]``: 13-19 digits (optionally grouped by one kind of separator) passing the Luhn
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

Detectors run in the order above on the progressively redacted text, so a later detector never
sees (or double-counts) what an earlier one replaced.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import phonenumbers

from collector.ingest.redaction_gates import gates, phone_possible

__all__ = [
    "PLACEHOLDERS",
    "CaptureContent",
    "PiiKind",
    "RedactionCounts",
    "RedactionResult",
    "apply_capture_policy",
    "redact",
    "redact_count",
]


class CaptureContent(StrEnum):
    """Per-tenant content capture setting."""

    NONE = "none"
    REDACTED = "redacted"
    FULL = "full"


class PiiKind(StrEnum):
    """What a redaction replaced."""

    SECRET = "secret"
    EMAIL = "email"
    IP = "ip"
    CARD = "card"
    PHONE = "phone"


PLACEHOLDERS: dict[PiiKind, str] = {
    PiiKind.SECRET: "[SECRET]",
    PiiKind.EMAIL: "[EMAIL]",
    PiiKind.IP: "[IP]",
    PiiKind.CARD: "[CARD]",
    PiiKind.PHONE: "[PHONE]",
}


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


# --- secrets ---------------------------------------------------------------------------------

_PREFIXED_SECRET = re.compile(
    r"""
    -----BEGIN[ A-Z]*PRIVATE\ KEY-----[\s\S]*?-----END[ A-Z]*PRIVATE\ KEY-----
    | \bsk-[A-Za-z0-9][A-Za-z0-9_-]{19,}                    # OpenAI / Anthropic (sk-proj-, sk-ant-)
    | \b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b               # AWS access key id
    | \b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b       # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{22,255}\b                   # GitHub fine-grained PAT
    | \bxox[abposr]-[A-Za-z0-9-]{10,}                       # Slack
    | \b(?:sk|rk)_live_[A-Za-z0-9]{16,}\b                   # Stripe live keys
    | \bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])              # Google API key
    | \beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}  # JWT
    """,
    re.VERBOSE,
)
# "Bearer <token>": the token needs a digit so that English ("bearer of bad news") is kept.
_BEARER = re.compile(r"(?i)\b(bearer\s+)(?=[A-Za-z0-9._~+/=-]*\d)([A-Za-z0-9._~+/=-]{16,})")
_KEY_VALUE = re.compile(
    r"""(?ix)
    (?<![A-Za-z0-9])
    ([A-Za-z0-9_.-]*?
      (?:api[_-]?key|apikey|secrets?|tokens?|passw(?:or)?d|pwd|access[_-]?key|private[_-]?key
        |client[_-]?secret|authorization|auth|credentials?|session[_-]?id)(?![a-z])
     [A-Za-z0-9_.-]*)
    (["']?\s*[:=]\s*["']?)
    ([^\s"'&,;<>]{4,})
    """
)
_PASSWORD_KEY = re.compile(r"(?i)passw(?:or)?d|pwd")
_MIN_ENTROPY_BITS = 3.0
_MIN_GENERATED_LEN = 8


def _shannon_bits_per_char(value: str) -> float:
    """Shannon entropy H = -sum p_i log2 p_i of the character distribution (Shannon 1948)."""
    n = len(value)
    return -sum((c / n) * math.log2(c / n) for c in Counter(value).values())


def _looks_generated(value: str) -> bool:
    return (
        len(value) >= _MIN_GENERATED_LEN
        and any(ch.isdigit() for ch in value)
        and any(ch.isalpha() for ch in value)
        and _shannon_bits_per_char(value) >= _MIN_ENTROPY_BITS
    )


def _key_value(match: re.Match[str]) -> tuple[str, bool]:
    key, sep, value = match.group(1), match.group(2), match.group(3)
    if value.startswith("["):  # already a placeholder
        return match.group(0), False
    if _PASSWORD_KEY.search(key) or _looks_generated(value):
        return f"{key}{sep}{PLACEHOLDERS[PiiKind.SECRET]}", True
    return match.group(0), False


# --- e-mail, IP, card ------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}(?![A-Za-z0-9-])"
)
_IPV6 = re.compile(
    r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f]{1,4})?"
    r"(?:%[0-9A-Za-z]+)?(?![0-9A-Za-z:]|\.\d)"
)
_IPV4 = re.compile(r"(?<![0-9A-Za-z.])\d{1,3}(?:\.\d{1,3}){3}(?![0-9A-Za-z]|\.\d)")
_CARD = re.compile(r"(?<![0-9A-Za-z-])\d(?:[ -]?\d){12,18}(?![0-9A-Za-z]|-\d)")


def _is_ipv6(candidate: str) -> bool:
    address = candidate.split("%", 1)[0]
    groups = [g for g in re.split(r"[:.]", address) if g]
    if len(groups) < 2 or not any(ch.isdigit() for ch in address):
        return False  # "::", "::1"-like fragments and hex words are not worth a placeholder
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


def _is_ipv4(candidate: str) -> bool:
    try:
        ipaddress.IPv4Address(candidate)
    except ValueError:
        return False  # octet > 255, leading zeros
    return True


def luhn_valid(digits: str) -> bool:
    """Luhn mod-10 checksum (ISO/IEC 7812-1 Annex B) of a string of decimal digits of any
    script (``_CARD``'s ``\\d`` matches Arabic-Indic and fullwidth digits too: each counts
    its value, ``int('٤') == 4``, not its code point)."""
    total = 0
    for index, ch in enumerate(reversed(digits)):
        d = int(ch)
        if index % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _is_card(candidate: str) -> bool:
    separators = {ch for ch in candidate if not ch.isdecimal()}
    if len(separators) > 1:
        return False  # "1234 5678-..." mixes separators: not a card as written
    if separators and len(re.split(r"[ -]", candidate)[0]) != 4:
        return False  # printed cards start with a 4-digit group; phones (3-3-4) do not
    digits = "".join(ch for ch in candidate if ch.isdecimal())
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


# --- phone -----------------------------------------------------------------------------------

_ID_GLUE = frozenset("#-_/\\@")


def _phones(text: str, region: str | None) -> tuple[str, int]:
    out: list[str] = []
    last = 0
    count = 0
    for match in phonenumbers.PhoneNumberMatcher(
        text, region, leniency=phonenumbers.Leniency.STRICT_GROUPING
    ):
        before = text[match.start - 1] if match.start > 0 else " "
        if before in _ID_GLUE or before.isalnum():
            continue  # part of an identifier such as ORD-4155550132 or #4155550132
        out.append(text[last : match.start])
        out.append(PLACEHOLDERS[PiiKind.PHONE])
        last = match.end
        count += 1
    out.append(text[last:])
    return "".join(out), count


# --- driver ----------------------------------------------------------------------------------


def _sub(
    pattern: re.Pattern[str], text: str, keep: Callable[[re.Match[str]], tuple[str, bool]]
) -> tuple[str, int]:
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        replacement, hit = keep(match)
        count += hit
        return replacement

    return pattern.sub(replace, text), count


def _placeholder_if(
    kind: PiiKind, check: Callable[[str], bool]
) -> Callable[[re.Match[str]], tuple[str, bool]]:
    def keep(match: re.Match[str]) -> tuple[str, bool]:
        if check(match.group(0)):
            return PLACEHOLDERS[kind], True
        return match.group(0), False

    return keep


def _bearer(match: re.Match[str]) -> tuple[str, bool]:
    return f"{match.group(1)}{PLACEHOLDERS[PiiKind.SECRET]}", True


_ALWAYS: Callable[[str], bool] = lambda _: True  # noqa: E731
_STEPS: tuple[tuple[PiiKind, re.Pattern[str], Callable[[re.Match[str]], tuple[str, bool]]], ...] = (
    (PiiKind.SECRET, _PREFIXED_SECRET, _placeholder_if(PiiKind.SECRET, _ALWAYS)),
    (PiiKind.SECRET, _BEARER, _bearer),
    (PiiKind.SECRET, _KEY_VALUE, _key_value),
    (PiiKind.EMAIL, _EMAIL, _placeholder_if(PiiKind.EMAIL, _ALWAYS)),
    (PiiKind.IP, _IPV6, _placeholder_if(PiiKind.IP, _is_ipv6)),
    (PiiKind.IP, _IPV4, _placeholder_if(PiiKind.IP, _is_ipv4)),
    (PiiKind.CARD, _CARD, _placeholder_if(PiiKind.CARD, _is_card)),
)


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
        ``RedactionResult(mode=redacted, text=<redacted>, counts=<per kind>)``.

    Raises:
        ValueError: ``phone_region`` is not a region libphonenumber knows.
    """
    _check_region(phone_region)
    text, counts = _redact(text, phone_region)
    return RedactionResult(mode=CaptureContent.REDACTED, text=text, counts=RedactionCounts(*counts))


def redact_count(text: str, *, phone_region: str | None = "US") -> tuple[str, int]:
    """:func:`redact` for the ingest hot path: ``(redacted text, number of replacements)``
    without building the result objects. Same text and the same total as :func:`redact`.

    Raises:
        ValueError: ``phone_region`` is not a region libphonenumber knows.
    """
    _check_region(phone_region)
    text, counts = _redact(text, phone_region)
    return text, sum(counts)


#: position of each kind in ``RedactionCounts`` (its fields follow ``PiiKind``)
_SLOT = {kind: i for i, kind in enumerate(PiiKind)}
assert tuple(RedactionCounts.__dataclass_fields__) == tuple(k.value for k in PiiKind)
_SLOTTED_STEPS = tuple((_SLOT[kind], pattern, keep) for kind, pattern, keep in _STEPS)
_PHONE = _SLOT[PiiKind.PHONE]


def _redact(text: str, phone_region: str | None) -> tuple[str, list[int]]:
    """The redacted text and the counts in ``RedactionCounts`` field order."""
    counts = [0, 0, 0, 0, 0]
    for (slot, pattern, keep), gate in zip(_SLOTTED_STEPS, gates(text), strict=True):
        if gate:  # cheap literal pre-checks skip patterns that cannot match (measured 10x)
            text, n = _sub(pattern, text, keep)
            counts[slot] += n
    if phone_possible(text):  # fewer digits than any valid number: no phone to find
        text, n = _phones(text, phone_region)
        counts[_PHONE] += n
    return text, counts


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
