"""Redaction: true positives and near misses per kind, and the three capture modes."""

from __future__ import annotations

import dataclasses

import pytest

from collector.ingest.redaction import (
    PLACEHOLDERS,
    CaptureContent,
    PiiKind,
    RedactionCounts,
    RedactionResult,
    apply_capture_policy,
    luhn_valid,
    redact,
)

# (text, expected redacted text, kind expected to be counted once per placeholder)
TRUE_POSITIVES: list[tuple[str, str, PiiKind]] = [
    # e-mail
    ("write to john.doe+tag@example.co.uk today", "write to [EMAIL] today", PiiKind.EMAIL),
    ("<ops-team@mail.driftline.dev>", "<[EMAIL]>", PiiKind.EMAIL),
    ("From: A_B@sub.example.org,", "From: [EMAIL],", PiiKind.EMAIL),
    # phone
    ("call me at (415) 555-0132 tomorrow", "call me at [PHONE] tomorrow", PiiKind.PHONE),
    ("UK office +44 20 7946 0958.", "UK office [PHONE].", PiiKind.PHONE),
    ("tel:+33 1 42 68 53 00", "tel:[PHONE]", PiiKind.PHONE),
    ("dial 415.555.0132 now", "dial [PHONE] now", PiiKind.PHONE),
    ("+1-415-555-0132", "[PHONE]", PiiKind.PHONE),
    # card (Luhn-valid test numbers of the card networks)
    ("visa 4111 1111 1111 1111 exp 12/29", "visa [CARD] exp 12/29", PiiKind.CARD),
    ("mc 5555-5555-5555-4444", "mc [CARD]", PiiKind.CARD),
    ("amex 3782 822463 10005", "amex [CARD]", PiiKind.CARD),
    ("discover:6011111111111117", "discover:[CARD]", PiiKind.CARD),
    # IP
    ("server 10.0.0.1.", "server [IP].", PiiKind.IP),
    ("from 203.0.113.254:8080", "from [IP]:8080", PiiKind.IP),
    ("v6 2001:db8::1 up", "v6 [IP] up", PiiKind.IP),
    ("link fe80::1ff:fe23:4567:890a%eth0 down", "link [IP] down", PiiKind.IP),
    ("mapped ::ffff:192.0.2.1", "mapped [IP]", PiiKind.IP),
    # secrets with documented prefixes
    ("OPENAI_API_KEY sk-proj-abcDEF1234567890abcdEFGH", "OPENAI_API_KEY [SECRET]", PiiKind.SECRET),
    ("aws AKIAIOSFODNN7EXAMPLE here", "aws [SECRET] here", PiiKind.SECRET),
    ("gh ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "gh [SECRET]", PiiKind.SECRET),
    ("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "pat [SECRET]", PiiKind.SECRET),
    ("slack xoxb-1234567890-abcdefghij", "slack [SECRET]", PiiKind.SECRET),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe [SECRET]", PiiKind.SECRET),
    (
        "Authorization: Bearer abc123DEF456ghi789JKL",
        "Authorization: Bearer [SECRET]",
        PiiKind.SECRET,
    ),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3",
        "jwt [SECRET]",
        PiiKind.SECRET,
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK==\n-----END RSA PRIVATE KEY-----",
        "[SECRET]",
        PiiKind.SECRET,
    ),
    # key=value with a generated-looking value
    ("api_key=Zx81Kq0Lm2Np3Qr4", "api_key=[SECRET]", PiiKind.SECRET),
    ('{"client_secret": "9fK2mQ7xLp4Rt8Vz"}', '{"client_secret": "[SECRET]"}', PiiKind.SECRET),
    ("X-Api-Key: a8f5f167f44f4964e6c998dee827110c", "X-Api-Key: [SECRET]", PiiKind.SECRET),
    ("password: hunter2", "password: [SECRET]", PiiKind.SECRET),  # any password value
]

NEAR_MISSES: list[str] = [
    # not e-mail
    "ssh root@localhost",
    "npm i left-pad@1.3.0",
    "@driftline please review",
    "a@b.c",
    # not phones: dates, times, versions, order ids, plain counts
    "released 2024-03-15, reviewed 15/03/2024 at 12:30:45",
    "build 2024.03.15 version 10.0.19045.2965 and v1.2.3",
    "order ORD-4155550132 and ticket #4155550132",
    "order 2024-000123 shipped",
    "issue 123456789 has 1,234,567 views",
    "timestamp 1700000000",
    # not cards: Luhn fails, wrong length, phone-like grouping
    "card 4111 1111 1111 1112",
    "ref 1234567812345678",
    "id 4111111111111111111111",
    # not IPs
    "version 1.2.3.4.5 and v1.2.3.4",
    "octets 999.1.1.1 and 256.0.0.1",
    "mac 00:1a:2b:3c:4d:5e at 10:30",
    "c++ std::vector and a::b",
    # not secrets
    "max_tokens=256 tokenizer=Qwen/Qwen2.5-7B",
    "token=abcabcabcabc",
    "the bearer of bad news internationalization",
    "Authorization: Bearer [SECRET]",
    "task-manager-deployment-config",
    "secret=true",
]


@pytest.mark.parametrize(("text", "expected", "kind"), TRUE_POSITIVES)
def test_true_positives(text: str, expected: str, kind: PiiKind) -> None:
    result = redact(text)
    assert result.text == expected
    assert result.counts is not None
    assert getattr(result.counts, kind.value) == expected.count(PLACEHOLDERS[kind])
    assert result.counts.total == getattr(result.counts, kind.value)


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_kept(text: str) -> None:
    result = redact(text)
    assert result.text == text
    assert result.counts == RedactionCounts()


def test_luhn() -> None:
    assert luhn_valid("4111111111111111")
    assert luhn_valid("79927398713")  # the worked example of the Luhn algorithm
    assert not luhn_valid("4111111111111112")
    assert not luhn_valid("79927398710")
    # a single changed digit always breaks the checksum
    base = "5555555555554444"
    for i in range(len(base)):
        changed = base[:i] + str((int(base[i]) + 1) % 10) + base[i + 1 :]
        assert not luhn_valid(changed)


def test_cards_in_other_scripts_digits_are_checked_by_their_values() -> None:
    """``\\d`` matches Arabic-Indic and fullwidth digits: the Luhn check reads each digit's
    value (it read ``ord(ch) - 48``: the Arabic-Indic 4111... card was left in the text, and
    whether a fullwidth number passed was chance)."""
    arabic, fullwidth = (
        str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"),
        str.maketrans("0123456789", "０１２３４５６７８９"),
    )
    for card in ("4111 1111 1111 1111", "5555-5555-5555-4444", "6011111111111117"):
        for table in (arabic, fullwidth):
            number = card.translate(table)
            assert luhn_valid(number.replace(" ", "").replace("-", ""))
            result = redact(f"card {number} end")
            assert result.text == "card [CARD] end", number
            assert result.counts is not None and result.counts.card == 1
    for bad in ("4111 1111 1111 1112", "4111111111111113"):
        for table in (arabic, fullwidth):
            number = bad.translate(table)
            assert not luhn_valid(number.replace(" ", ""))
            result = redact(f"number {number} end")
            assert result.counts is not None and result.counts.card == 0, number


def test_sixteen_digit_non_luhn_number_is_not_redacted_by_any_detector() -> None:
    for number in ("4111111111111112", "4111 1111 1111 1112", "4111-1111-1111-1112"):
        assert not luhn_valid(number.replace(" ", "").replace("-", ""))
        result = redact(f"number {number} end")
        assert result.text == f"number {number} end"
        assert result.counts is not None and result.counts.total == 0


def test_mixed_text_counts_each_kind() -> None:
    text = (
        "User jane@example.com (phone +1 415-555-0132, alt (212) 555-0188) paid with "
        "4111 1111 1111 1111 from 198.51.100.7; key sk-abcdefghij0123456789XYZ, "
        "order ORD-2024-000123 on 2024-03-15."
    )
    result = redact(text)
    assert result.counts == RedactionCounts(secret=1, email=1, ip=1, card=1, phone=2)
    assert result.text == (
        "User [EMAIL] (phone [PHONE], alt [PHONE]) paid with "
        "[CARD] from [IP]; key [SECRET], "
        "order ORD-2024-000123 on 2024-03-15."
    )
    assert result.counts.as_dict() == {"secret": 1, "email": 1, "ip": 1, "card": 1, "phone": 2}
    assert result.counts.total == 6


def test_redaction_is_idempotent() -> None:
    once = redact("mail a.b@example.com, ip 192.0.2.10, api_key=Zx81Kq0Lm2Np3Qr4")
    assert once.text is not None
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.counts == RedactionCounts()


def test_phone_region_changes_national_numbers() -> None:
    uk_national = "ring 020 7946 0958 today"
    assert redact(uk_national, phone_region="US").text == uk_national
    assert redact(uk_national, phone_region="GB").text == "ring [PHONE] today"
    # without a region only international-format numbers are phones
    assert redact("(415) 555-0132", phone_region=None).text == "(415) 555-0132"
    assert redact("+1 415 555 0132", phone_region=None).text == "[PHONE]"


def test_unknown_phone_region_raises() -> None:
    with pytest.raises(ValueError, match="phone_region"):
        redact("x", phone_region="XX")


# --- capture modes ---------------------------------------------------------------------------

SENSITIVE = "contact jane@example.com or (415) 555-0132"


def test_mode_none_stores_nothing() -> None:
    result = apply_capture_policy(SENSITIVE, "none")
    assert result == RedactionResult(mode=CaptureContent.NONE, text=None, counts=None)


def test_mode_full_is_unchanged_and_unscanned() -> None:
    result = apply_capture_policy(SENSITIVE, CaptureContent.FULL)
    assert result.text == SENSITIVE
    assert result.counts is None  # not scanned: unknown, not zero
    assert result.mode is CaptureContent.FULL


def test_mode_redacted_counts() -> None:
    result = apply_capture_policy(SENSITIVE, "redacted")
    assert result.mode is CaptureContent.REDACTED
    assert result.text == "contact [EMAIL] or [PHONE]"
    assert result.counts == RedactionCounts(email=1, phone=1)


def test_redacted_clean_text_counts_zero() -> None:
    result = apply_capture_policy("What is the capital of France?", "redacted")
    assert result.text == "What is the capital of France?"
    assert result.counts == RedactionCounts()  # scanned, nothing found: a real zero


@pytest.mark.parametrize("mode", ["none", "redacted", "full"])
def test_missing_text_stays_missing(mode: str) -> None:
    result = apply_capture_policy(None, mode)
    assert result.text is None and result.counts is None


@pytest.mark.parametrize("mode", ["", "partial", "FULL ", "redact"])
def test_bad_mode_raises(mode: str) -> None:
    with pytest.raises(ValueError, match="mode must be one of none, redacted, full"):
        apply_capture_policy("x", mode)


def test_results_are_frozen() -> None:
    result = redact("a.b@example.com")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.text = "x"  # type: ignore[misc]
    assert result.counts is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.counts.email = 0  # type: ignore[misc]
