"""The detectors of :mod:`collector.ingest.redaction`: one compiled pattern and one decision per
step, each in time linear in the length of the text for any text.

Python's ``re`` backtracks, and ``sub`` retries a failed pattern at every later position, so a
pattern is linear only if the work started at each position is bounded or is never repeated
from a later position. How each step keeps that (issue 35 found ``_KEY_VALUE`` cubic on
``"token=abc " + ".token" * n`` and ``_EMAIL`` quadratic on ``"a!" * n + "@"``;
tests/collector/test_redaction_linear.py times every family below over growing sizes):

* runs are consumed possessively (``*+``, ``{n,}+``, Python >= 3.11) wherever what follows a
  run cannot start with a character of the run, so giving characters back could never match:
  the same matches as the greedy form, without the backtracking;
* a pattern that could start at many positions of one run (``_KEY_VALUE``'s key, an e-mail's
  local part after ``!``, a JWT after ``-``) would scan the same run once per start. All those
  starts end where the run ends and then need the same continuation, so the leftmost one
  decides: ``_KEY_VALUE`` starts only at the start of a run (the leftmost start the old
  lookbehind allowed), and ``_EMAIL`` / ``_JWT`` consume the run as a "kept" match when the
  continuation fails, so that ``sub`` goes on after it instead of retrying inside it;
* a PEM block is searched only up to the end of the last ``-----END ... PRIVATE KEY-----``: a
  ``BEGIN`` after it cannot match and no longer scans to the end of the text once per header;
* ``_URL_USERINFO``'s scheme starts only at the start of a run and is bounded (``{0,30}``);
* every other quantifier is bounded (``{0,61}``, ``{12,18}``, ``{36,255}``), or its run ends at
  a character the next element needs (linear: each position is visited a bounded number of
  times).

A linear-time engine (``google-re2``) was the other way: it has no lookaround, which every
pattern here uses for its boundaries (``(?<![A-Za-z0-9._%+-])``, ``(?![0-9A-Za-z-])``), so
the same results would have needed a rewrite of each boundary plus checks in Python; the
patterns above keep ``re`` and its results (tests/collector/test_redaction_bounds.py).

The phone step is libphonenumber's matcher: linear but slow (~0.4 ms per number found, ~15-35
us per rejected candidate). :func:`phones` gives it the text a few thousand characters of whole
lines at a time, each with :data:`PHONE_MAX_TRIES` tries; on a line where it gives up,
:func:`phones` reports where, so that the caller drops the text it did not scan.
"""

from __future__ import annotations

import base64
import ipaddress
import math
import re
from collections import Counter
from collections.abc import Callable
from enum import StrEnum
from typing import Protocol

import phonenumbers

__all__ = ["PLACEHOLDERS", "STEPS", "PiiKind", "Replace", "luhn_valid", "phones"]


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

#: a step's decision for one match: (replacement text, whether it counts as a finding)
Keep = Callable[[re.Match[str]], tuple[str, bool]]


class Replace(Protocol):
    """What a step needs of its pattern: ``re.Pattern.sub`` with a function."""

    def sub(self, repl: Callable[[re.Match[str]], str], string: str) -> str: ...


# --- secrets ---------------------------------------------------------------------------------

_PEM_END = r"-----END[ A-Z]*PRIVATE\ KEY(?:\ BLOCK)?-----"  # PGP's ends with BLOCK


class _UpToLastPemEnd:
    """``-----BEGIN ... PRIVATE KEY----- ... -----END ... PRIVATE KEY-----`` (lazy body), run only
    on the text up to the end of the last END line: the same matches as on the whole text,
    since every match ends with an END line, but a BEGIN line with no END after it (which the
    lazy body would scan to the end of the text, once per such line) is never tried."""

    _block = re.compile(rf"-----BEGIN[ A-Z]*PRIVATE\ KEY(?:\ BLOCK)?-----[\s\S]*?{_PEM_END}")
    #: every END line, overlapping ones too (a lookahead match is empty)
    _ends = re.compile(rf"(?=({_PEM_END}))")

    def sub(self, repl: Callable[[re.Match[str]], str], string: str) -> str:
        end = -1
        for m in self._ends.finditer(string):
            end = max(end, m.end(1))
        if end < 0:
            return string
        return self._block.sub(repl, string[:end]) + string[end:]


_JWT = re.compile(
    r"(?P<jwt>\beyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+)"
    r"|\beyJ[A-Za-z0-9_-]*+"  # not a JWT: the rest of the run, where no JWT can start either
)
_PREFIXED_SECRET = re.compile(
    r"""
      \bsk-[A-Za-z0-9][A-Za-z0-9_-]{19,}+                   # OpenAI / Anthropic (sk-proj-, sk-ant-)
    | \b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b               # AWS access key id
    | \b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}+\b      # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{22,255}+\b                  # GitHub fine-grained PAT
    | \bxox[abposr]-[A-Za-z0-9-]{10,}+                      # Slack
    | \b(?:sk|rk)_live_[A-Za-z0-9]{16,}+\b                  # Stripe live keys
    | \bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])              # Google API key
    """,
    re.VERBOSE,
)
# Other cases of the prefixes above (``SK-``, a lower-case AWS key id): a finding only when the
# rest looks generated, since the prefix alone is no longer specific.
_CASED_SECRET = re.compile(
    r"(?ai)\b(?:sk-[A-Za-z0-9][A-Za-z0-9_-]{19,}+|(?:akia|asia)[A-Za-z0-9]{16}\b)"
)
# "Authorization: <scheme> <credentials>" as a header in text: the credentials whatever they
# look like (a scheme is required, so prose such as "authorization: pending" is kept).
_AUTH_HEADER = re.compile(
    r"(?ai)\b(authorization[\"']?+[ \t]*+[:=][ \t]*+[\"']?+"
    r"(?:bearer|basic|token|digest|negotiate|apikey)[ \t]++)([^\s\"'&,;<>]++)"
)
# "Basic <base64 of user:password>" outside a header: a finding when it decodes to "x:y".
_BASIC = re.compile(r"(?ai)\b(basic[ \t]++)([A-Za-z0-9+/]{4,}+={0,2}+)(?![A-Za-z0-9+/=])")
# "scheme://user:password@host": the password.
_URL_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{0,30}+://[^\s:/?#@\[\]]{0,256}+:)"
    r"([^\s/?#@\[\]]{1,256}+)(?=@)"
)
# "Bearer <token>": the token needs a digit so that English ("bearer of bad news") is kept.
_BEARER = re.compile(r"(?i)\b(bearer\s++)(?=[A-Za-z0-9._~+/=-]*\d)([A-Za-z0-9._~+/=-]{16,}+)")
_KEY_WORD = (
    r"(?:api[_-]?key|apikey|secrets?|tokens?|pass(?:w(?:or)?d)?|pwd?|access[_-]?key|private[_-]?key"
    r"|client[_-]?secret|authorization|auth|credentials?|session[_-]?id)(?![a-z])"
)
# The key is a whole run of [A-Za-z0-9_.-] holding a key word: the old pattern's lazy prefix
# could start after any "_", "." or "-" of the run, but every such start ends at the run's end
# with the same separator and value after it, so the run's first character is the leftmost
# start that matches whenever any does.
_KEY_VALUE = re.compile(
    rf"""(?ix)
    (?<![A-Za-z0-9_.-])
    (?=[A-Za-z0-9_.-]*?{_KEY_WORD})
    ([A-Za-z0-9_.-]++)
    (["']?+\s*+[:=]\s*+["']?+)
    ([^\s"'&,;<>]++)
    """
)
_PASSWORD_KEY = re.compile(r"(?i)passw(?:or)?d|pwd|passphrase")
# "pass" / "pw" as a word of the key: password-like unless in prose (below)
_SHORT_PASSWORD_KEY = re.compile(r"(?i)(?<![a-z])(?:pass|pw)(?![a-z])")
_PLAIN_WORD = re.compile(r"[a-z]++")
_PROSE_COLON = re.compile(r":\s++")
_MIN_VALUE_LEN = 4  # a shorter value of a key that is not password-like is kept
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
    prose = _PROSE_COLON.fullmatch(sep) and _PLAIN_WORD.fullmatch(value)  # "pass: the ball"
    password = _PASSWORD_KEY.search(key) or (_SHORT_PASSWORD_KEY.search(key) and not prose)
    if password or (len(value) >= _MIN_VALUE_LEN and _looks_generated(value)):
        return f"{key}{sep}{PLACEHOLDERS[PiiKind.SECRET]}", True
    return match.group(0), False


_KEY_PARTS = re.compile(r"[-_]")
_MIN_KEY_PART = 16  # a key's random part; "SK-TELECOM-ANNUAL-REPORT-2024" has none


def _cased_secret(match: re.Match[str]) -> tuple[str, bool]:
    value = match.group(0)  # the documented case was replaced by _PREFIXED_SECRET before
    longest = max(_KEY_PARTS.split(value[3:] if value[2] == "-" else value[4:]), key=len)
    if len(longest) >= _MIN_KEY_PART and _looks_generated(longest):
        return PLACEHOLDERS[PiiKind.SECRET], True
    return value, False


def _second_group_secret(match: re.Match[str]) -> tuple[str, bool]:
    if match.group(2).startswith("["):  # already a placeholder
        return match.group(0), False
    return f"{match.group(1)}{PLACEHOLDERS[PiiKind.SECRET]}", True


def _basic(match: re.Match[str]) -> tuple[str, bool]:
    token = match.group(2)
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return match.group(0), False
    if ":" in decoded and decoded.isprintable():
        return f"{match.group(1)}{PLACEHOLDERS[PiiKind.SECRET]}", True
    return match.group(0), False


# --- e-mail, IP, card ------------------------------------------------------------------------

_LOCAL = r"[\w!#$%&'*+/=?^`{|}~-]"  # \w: any script's letters and digits (RFC 6531)
_AT = "[@\uff20\ufe6b]"  # "@", the full-width "＠" and the small "﹫"
# After a failed address the local part's run is consumed as a kept match when a start inside
# it was possible (a character of _LOCAL outside the lookbehind's class, e.g. "!", before the
# run's end): every such start ends at the same "@" (or none) and fails the same way.
_EMAIL = re.compile(
    rf"(?<![\w.%+-])(?:"
    rf"(?P<email>{_LOCAL}++(?:\.{_LOCAL}++)*+"
    rf"{_AT}(?>[^\W_](?:(?:[^\W_]|-){{0,61}}[^\W_])?\.)+"  # IDN labels: any script
    r"(?:[^\W\d_]{2,63}|xn--[A-Za-z0-9-]{1,59})(?![\w-]))"
    rf"|(?=[\w.%+-]*+[!#$&'*/=?^`{{|}}~]){_LOCAL}++(?:\.{_LOCAL}++)*+)"
)
_IPV6 = re.compile(
    r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f]{1,4})?"
    r"(?:%[0-9A-Za-z]++)?(?![0-9A-Za-z:]|\.\d)"
)
_IPV4 = re.compile(r"(?<![0-9A-Za-z.])\d{1,3}(?:\.\d{1,3}){3}(?![0-9A-Za-z]|\.\d)")
_CARD = re.compile(r"(?<![0-9A-Za-z._-])\d(?:[ ._-]?\d){12,18}(?![0-9A-Za-z]|[._-]\d)")


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
    if separators and len(re.split(r"[ ._-]", candidate)[0]) != 4:
        return False  # printed cards start with a 4-digit group; phones (3-3-4) do not
    digits = "".join(ch for ch in candidate if ch.isdecimal())
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


# --- phone -----------------------------------------------------------------------------------

_ID_GLUE = frozenset("#-_/\\@")
#: rejected candidates after which libphonenumber's matcher stops (its default is 65,535:
#: ~2 s of CPU on a dense line of digits, which could not be interrupted)
PHONE_MAX_TRIES = 8192
#: characters of whole lines given to one matcher (a phone number never spans a line break:
#: libphonenumber's candidate pattern has no newline), each with its own tries
PHONE_CHUNK_CHARS = 4096


def _line_chunks(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of consecutive pieces of ``text`` that end after a line break, each
    holding whole lines and about :data:`PHONE_CHUNK_CHARS` characters (one longer line
    stays whole)."""
    out = []
    start = 0
    while start < len(text):
        nl = text.find("\n", start + PHONE_CHUNK_CHARS - 1)
        end = len(text) if nl < 0 else nl + 1
        out.append((start, end))
        start = end
    return out


def phones(
    text: str, region: str | None, check: Callable[[], None] | None = None
) -> tuple[str, int, int | None]:
    """Phone numbers replaced: ``(text, count, cut)``. ``cut`` is None when the whole text was
    scanned, else the offset in the returned text up to which it was: on a line with more
    than :data:`PHONE_MAX_TRIES` rejected candidates the matcher gives up, so a number after
    ``cut`` may be left. ``check()`` runs between chunks of lines and after each number found
    (a budget: it may raise)."""
    out: list[str] = []
    last = 0
    count = 0
    for start, end in _line_chunks(text):
        if check is not None:
            check()
        chunk = text[start:end] if start or end < len(text) else text
        matcher = phonenumbers.PhoneNumberMatcher(
            chunk, region, leniency=phonenumbers.Leniency.STRICT_GROUPING, max_tries=PHONE_MAX_TRIES
        )
        for match in matcher:
            if check is not None:
                check()
            at = start + match.start
            before = text[at - 1] if at > 0 else " "
            if before in _ID_GLUE or before.isalnum():
                continue  # part of an identifier such as ORD-4155550132 or #4155550132
            out.append(text[last:at])
            out.append(PLACEHOLDERS[PiiKind.PHONE])
            last = start + match.end
            count += 1
        # the matcher's own counter (phonenumbers 8.x); 0: it stopped before the chunk's end
        if getattr(matcher, "_max_tries", 1) <= 0:
            scanned = max(last, start)  # the chunks before, and this one to its last number
            out.append(text[last:scanned])
            head = "".join(out)
            return head + text[scanned:], count, len(head)
    out.append(text[last:])
    return "".join(out), count, None


# --- steps -----------------------------------------------------------------------------------


def _placeholder_if(kind: PiiKind, check: Callable[[str], bool]) -> Keep:
    def keep(match: re.Match[str]) -> tuple[str, bool]:
        if check(match.group(0)):
            return PLACEHOLDERS[kind], True
        return match.group(0), False

    return keep


def _placeholder_if_group(kind: PiiKind, group: str) -> Keep:
    """A finding when ``group`` took part in the match; else a run kept as it is."""

    def keep(match: re.Match[str]) -> tuple[str, bool]:
        if match.group(group) is not None:
            return PLACEHOLDERS[kind], True
        return match.group(0), False

    return keep


def _bearer(match: re.Match[str]) -> tuple[str, bool]:
    return f"{match.group(1)}{PLACEHOLDERS[PiiKind.SECRET]}", True


_ALWAYS: Callable[[str], bool] = lambda _: True  # noqa: E731
#: (kind, pattern, decision) in the order they run on the progressively redacted text; PEM
#: blocks and JWTs first (a JWT inside a PEM body cannot match: base64 has no ".")
STEPS: tuple[tuple[PiiKind, Replace, Keep], ...] = (
    (PiiKind.SECRET, _UpToLastPemEnd(), _placeholder_if(PiiKind.SECRET, _ALWAYS)),
    (PiiKind.SECRET, _JWT, _placeholder_if_group(PiiKind.SECRET, "jwt")),
    (PiiKind.SECRET, _PREFIXED_SECRET, _placeholder_if(PiiKind.SECRET, _ALWAYS)),
    (PiiKind.SECRET, _CASED_SECRET, _cased_secret),
    (PiiKind.SECRET, _AUTH_HEADER, _second_group_secret),
    (PiiKind.SECRET, _BASIC, _basic),
    (PiiKind.SECRET, _URL_USERINFO, _second_group_secret),
    (PiiKind.SECRET, _BEARER, _bearer),
    (PiiKind.SECRET, _KEY_VALUE, _key_value),
    (PiiKind.EMAIL, _EMAIL, _placeholder_if_group(PiiKind.EMAIL, "email")),
    (PiiKind.IP, _IPV6, _placeholder_if(PiiKind.IP, _is_ipv6)),
    (PiiKind.IP, _IPV4, _placeholder_if(PiiKind.IP, _is_ipv4)),
    (PiiKind.CARD, _CARD, _placeholder_if(PiiKind.CARD, _is_card)),
)
