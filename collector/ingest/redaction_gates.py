"""Necessary-condition gates for the redaction patterns: can a pattern match this text at all?

Each gate is a cheap scan (substring tests; a regex only to count digits in non-ASCII text)
that is true whenever the corresponding step of :mod:`collector.ingest.redaction` could
replace something; a false gate skips that step. The gates change speed only, never the
result (tests/collector/test_redaction_gates.py checks them against their definitions, and
the redaction against every detector run ungated, on generated text).

Digits are counted in every script (:func:`digits_at_least`): ``\\d`` and libphonenumber read
Arabic-Indic or fullwidth digits as digits too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: fewest digits a number libphonenumber calls valid can have: the shortest national number
#: of any region in its metadata (4 digits, e.g. Niue, Saint Helena, Tokelau, Austria). Every
#: digit of a match comes from the text (the matcher's candidates are digits and punctuation),
#: so text with fewer digits holds no phone number to find. Checked against the installed
#: metadata by tests/collector/test_redaction_gates.py.
MIN_PHONE_DIGITS = 4


_DIGIT = re.compile(r"\d")


def digits_at_least(text: str, n: int) -> bool:
    """At least ``n`` decimal digits in ``text``, of any script (Unicode category Nd: what
    ``\\d`` matches and what libphonenumber reads, e.g. ``(٤١٥) ٥٥٥-٠١٣٢``). ASCII text (the
    usual case; ``str.isascii`` is O(1)) is counted with ten C-level ``str.count`` scans."""
    if not text.isascii():
        return any(i + 1 >= n for i, _ in enumerate(_DIGIT.finditer(text)))
    found = 0
    for d in "0123456789":
        if d in text:
            found += text.count(d)
            if found >= n:
                return True
    return False


def phone_possible(text: str) -> bool:
    """At least :data:`MIN_PHONE_DIGITS` digits in ``text`` (necessary for a phone)."""
    return digits_at_least(text, MIN_PHONE_DIGITS)


#: fewest digits the card pattern matches (``\d(?:[ -]?\d){12,18}``: 13 to 19 digits)
MIN_CARD_DIGITS = 13
#: fewest digits the IPv4 pattern matches (four ``\d{1,3}`` octets)
MIN_IPV4_DIGITS = 4


#: the prefixes of ``_PREFIXED_SECRET``'s alternatives (PEM blocks and JWTs have steps and
#: gates of their own: :func:`gates`)
SECRET_MARKERS = (
    "sk-",
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xox",
    "_live_",
    "AIza",
)
# The markers grouped by a character they share: text without "-", "_" or "A" (most prose)
# skips the group's scans. Same answer as ``any(m in text for m in SECRET_MARKERS)``.
_SECRET_MARKER_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("-", ("sk-",)),
    ("_", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "_live_")),
    ("A", ("AKIA", "ASIA", "ABIA", "ACCA", "AIza")),
    ("", ("xox",)),
)
assert sorted(m for _, ms in _SECRET_MARKER_GROUPS for m in ms) == sorted(SECRET_MARKERS)
assert all(c in m for c, ms in _SECRET_MARKER_GROUPS for m in ms)


def secret_possible(text: str) -> bool:
    """Some marker of ``SECRET_MARKERS`` occurs in ``text``."""
    for common, markers in _SECRET_MARKER_GROUPS:
        if common in text:
            for marker in markers:
                if marker in text:
                    return True
    return False


KEY_WORDS = ("key", "secret", "token", "pass", "pw", "auth", "credential", "session")


_IPV6_AT = re.compile(r"[0-9A-Fa-f]{0,4}:")
_HEXCHARS = frozenset("0123456789abcdefABCDEF:")


def ipv6_possible(text: str) -> bool:
    """Some ``:`` is preceded by a hex digit or ``:`` and followed by hex groups and ``:``."""
    i = text.find(":")
    while i != -1:
        if i > 0 and text[i - 1] in _HEXCHARS and _IPV6_AT.match(text, i + 1):
            return True
        i = text.find(":", i + 1)
    return False


_KV_TAIL = re.compile(r"[a-z0-9_.-]{0,40}[\"']?\s*[:=]")
_KV_TAIL_CHARS = 45  # a separator must lie in the 45 characters after the keyword
#: a keyword that counts starts at most this far before the first separator after it
_KV_REACH = _KV_TAIL_CHARS - 1 + max(len(w) for w in KEY_WORDS)
#: above this many separators, scanning each keyword occurrence is the cheaper way
_KV_MAX_WINDOWS = 32


def _key_value_scan(low: str, words: Sequence[str], lo: int, hi: int) -> bool:
    """A keyword of ``words`` lying in ``low[lo:hi]`` is followed closely by ``:`` or ``=``."""
    for word in words:
        i = low.find(word, lo, hi)
        while i != -1:
            end = i + len(word)
            tail = low[end : end + _KV_TAIL_CHARS]
            if ("=" in tail or ":" in tail) and _KV_TAIL.match(low, end):
                return True
            i = low.find(word, end, hi)
    return False


def _separators(low: str) -> list[int]:
    out = []
    for sep in ":=":
        i = low.find(sep)
        while i != -1:
            out.append(i)
            i = low.find(sep, i + 1)
    out.sort()
    return out


def key_value_possible(low: str) -> bool:
    """A secret keyword followed closely by ``:`` or ``=`` (str.find is far cheaper than a
    case-insensitive alternation scan over the whole text).

    A keyword that counts ends at most 44 characters before the first separator after it, so
    only the windows ``[q - _KV_REACH, q]`` around separators ``q`` are searched (few in
    prose); text dense with separators (JSON) is scanned keyword by keyword instead.
    """
    if low.count(":") + low.count("=") > _KV_MAX_WINDOWS:
        words = [w for w in KEY_WORDS if w in low]
        return bool(words) and _key_value_scan(low, words, 0, len(low))
    lo = hi = -1
    for q in _separators(low):
        if hi >= 0 and q - _KV_REACH <= hi:  # overlaps the current window: extend it
            hi = q
            continue
        if hi >= 0 and _key_value_scan(low, KEY_WORDS, lo, hi + 1):
            return True
        lo, hi = max(0, q - _KV_REACH), q
    return hi >= 0 and _key_value_scan(low, KEY_WORDS, lo, hi + 1)


def gates(text: str) -> tuple[bool, ...]:
    """For each step of ``redaction_detectors.STEPS``: can its pattern match at all?
    (necessary conditions only; one boolean per step, in their order)"""
    low = text.lower()
    ipv4 = text.count(".") >= 3 and digits_at_least(text, MIN_IPV4_DIGITS)
    return (
        "-----BEGIN" in text and "-----END" in text,  # a PEM block
        "eyJ" in text,  # a JWT (base64url of '{"')
        secret_possible(text),
        "sk-" in low or "akia" in low or "asia" in low,  # SK-, a lower-case AWS key id
        "authorization" in low,
        "basic" in low,
        "://" in text and "@" in text,  # a URL's user:password@
        "bearer" in low,
        ("=" in text or ":" in text) and key_value_possible(low),
        "@" in text or "\uff20" in text or "\ufe6b" in text,  # "@", "＠", "﹫"
        ipv6_possible(text),
        ipv4,
        digits_at_least(text, MIN_CARD_DIGITS),
    )
