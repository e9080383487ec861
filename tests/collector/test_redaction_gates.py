"""The redaction pre-checks ("gates") decide which detectors run: their fast forms must give
exactly the answer of their plain definitions, or a finding could be skipped."""

from __future__ import annotations

import re

import phonenumbers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from phonenumbers import PhoneMetadata

from collector.ingest import redaction as r
from collector.ingest import redaction_gates as g

FRAGMENTS = [
    "key",
    "KEY",
    "secret",
    "token",
    "passw",
    "pwd",
    "auth",
    "credential",
    "session",
    ":",
    "=",
    " ",
    " " * 50,
    '"',
    "'",
    "_",
    "-",
    ".",
    "\n",
    "sk-",
    "AKIA",
    "ghp_",
    "github_pat_",
    "xox",
    "_live_",
    "AIza",
    "eyJ",
    "-----BEGIN",
    "Bearer ",
    "@",
    "example.com",
    "10.0.0.1",
    "fe80::",
    "4111 1111 1111 1111",
    "(415) 555-0132",
    "Zx81Kq0Lm2Np3Qr4",
    "x" * 30,
    "[SECRET]",
    "api_key",
    "(٤١٥) ٥٥٥-٠١٣٢",
    "(４１５) ５５５-０１３２",
    "٤١١١ ١١١١ ١١١١ ١١١١",
    "١٠.٠.٠.١",
    "1234",
    "’",
    '{"role": "user", "content": "',
]
TEXTS = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=80).map("".join),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=30).map("".join),
)
KV_TAIL = re.compile(r"[a-z0-9_.-]{0,40}[\"']?\s*[:=]")


def key_value_possible_reference(low: str) -> bool:
    """The plain definition: some keyword occurrence has ``:``/``=`` in the 45 characters
    after it and the key tail pattern matches there."""
    for word in g.KEY_WORDS:
        i = low.find(word)
        while i != -1:
            end = i + len(word)
            tail = low[end : end + 45]
            if ("=" in tail or ":" in tail) and KV_TAIL.match(low, end):
                return True
            i = low.find(word, end)
    return False


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(TEXTS)
def test_gates_equal_their_definitions(text: str) -> None:
    low = text.lower()
    assert g.key_value_possible(low) == key_value_possible_reference(low)
    assert g.secret_possible(text) == any(m in text for m in g.SECRET_MARKERS)
    digits = len(re.findall(r"\d", text))
    assert g.phone_possible(text) == (digits >= g.MIN_PHONE_DIGITS)
    for n in (1, g.MIN_IPV4_DIGITS, g.MIN_CARD_DIGITS):
        assert g.digits_at_least(text, n) == (digits >= n)


def test_min_phone_digits_is_the_shortest_national_number_in_the_metadata() -> None:
    """The phone gate's bound is libphonenumber's own: the shortest possible national number
    of any region or non-geographic entity in the installed metadata."""
    shortest = min(
        min(md.general_desc.possible_length)
        for md in [
            *(PhoneMetadata.metadata_for_region(r) for r in phonenumbers.SUPPORTED_REGIONS),
            *(
                PhoneMetadata.metadata_for_nongeo_region(c)
                for c in phonenumbers.COUNTRY_CODES_FOR_NON_GEO_REGIONS
            ),
        ]
        if md is not None and md.general_desc.possible_length
    )
    assert shortest == g.MIN_PHONE_DIGITS


def _shortest_examples() -> list[tuple[str, str]]:
    """(region, example number) of libphonenumber's own examples with a national number of at
    most 5 digits, in international and national format."""
    out = []
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        for kind in phonenumbers.PhoneNumberType.values():
            n = phonenumbers.example_number_for_type(region, kind)
            if n is not None and len(phonenumbers.national_significant_number(n)) <= 5:
                for fmt in (
                    phonenumbers.PhoneNumberFormat.INTERNATIONAL,
                    phonenumbers.PhoneNumberFormat.NATIONAL,
                ):
                    out.append((region, phonenumbers.format_number(n, fmt)))
    return sorted(set(out))


SHORT = _shortest_examples()
SHORT_NUMBERS = [number for _, number in SHORT] + [
    "(415) 555-0132",
    "+49 30 901820",
    "(٤١٥) ٥٥٥-٠١٣٢",  # Arabic-Indic digits: libphonenumber reads them
    "+1 (４１５) ５５５-０１３２",  # fullwidth
]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.one_of(st.sampled_from(SHORT_NUMBERS), st.sampled_from(FRAGMENTS), st.text(max_size=8)),
        max_size=12,
    ).map("".join),
    st.sampled_from(["US", None, *sorted({region for region, _ in SHORT})]),
)
def test_phone_gate_never_skips_a_phone(text: str, region: str | None) -> None:
    """Wherever the matcher finds a phone number (any default region), the gate is open."""
    found = any(
        True
        for _ in phonenumbers.PhoneNumberMatcher(
            text, region, leniency=phonenumbers.Leniency.STRICT_GROUPING
        )
    )
    if found:
        assert g.phone_possible(text), text


def test_phone_gate_keeps_the_shortest_numbers() -> None:
    """libphonenumber's shortest example numbers (4-5 digits: Niue, Tokelau, Iran, ...) are
    still found and redacted, in international form and, read in their own region, national."""
    assert any(len([c for c in number if c.isdigit()]) == g.MIN_PHONE_DIGITS for _, number in SHORT)
    for region, number in SHORT:
        text = f"call {number} now"
        want = sum(
            1
            for _ in phonenumbers.PhoneNumberMatcher(
                text, region, leniency=phonenumbers.Leniency.STRICT_GROUPING
            )
        )
        got = r.redact(text, phone_region=region).counts
        assert got is not None and got.phone == want, (region, number)
        if number.startswith("+"):
            assert want == 1, number
    assert r.redact("gpt-4o at 0.2").text == "gpt-4o at 0.2"


def test_key_value_gate_on_separator_dense_text() -> None:
    """More separators than windows: the keyword-by-keyword scan is used."""
    dense = '{"a": 1, "b": 2, ' * 20
    assert g.key_value_possible((dense + '"api_key": "x"}').lower())
    assert not g.key_value_possible((dense + '"other": "token x"}').lower())
    far = "token" + " " * 60 + "= 12345678abc"  # separator beyond 45 characters
    assert not g.key_value_possible(far) and not key_value_possible_reference(far)


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(TEXTS)
def test_redact_count_matches_redact(text: str) -> None:
    full = r.redact(text)
    assert full.counts is not None
    assert r.redact_count(text) == (full.text, full.counts.total)


def test_phones_in_other_scripts_digits_are_redacted() -> None:
    """libphonenumber reads Arabic-Indic and fullwidth digits: the gate counts them too."""
    for number in ("(٤١٥) ٥٥٥-٠١٣٢", "+1 ٤١٥ ٥٥٥ ٠١٣٢", "(４１５) ５５５-０１３２"):
        out = r.redact(f"call {number} now")
        assert out.counts is not None and out.counts.phone == 1, number
        assert number not in (out.text or "")


def redact_ungated(text: str) -> tuple[str, list[int]]:
    """The plain definition of :func:`collector.ingest.redaction._redact`: every step's
    pattern and the phone matcher run on every text."""
    counts = [0] * 5
    for slot, pattern, keep in r._SLOTTED_STEPS:
        text, n = r._sub(pattern, text, keep)
        counts[slot] += n
    text, n = r._phones(text, "US")
    counts[r._PHONE] += n
    return text, counts


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(TEXTS)
def test_gates_change_nothing_but_speed(text: str) -> None:
    """Redaction with the gates gives the text and counts of every detector run on the text."""
    assert r._redact(text, "US") == redact_ungated(text)
