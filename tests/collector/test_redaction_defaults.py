"""What default redaction must catch beyond the documented key prefixes (attack report on issue
35, item 12): credentials in headers and URLs, short passwords, key words split by invisible
characters, PGP private keys, cards with dots or underscores, IDN / full-width e-mail, other
cases of key prefixes; ordinary prose stays; every new pattern stays linear in time."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from collector.ingest.redaction import redact
from tests.collector.test_redaction_linear import assert_linear

PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGVx0p8BCADKq3b1\n=Xy9Q\n"
    "-----END PGP PRIVATE KEY BLOCK-----"
)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpw"),
        ("curl -H 'Authorization: Bearer abcdefghij'", "abcdefghij"),
        ('{"authorization": "Token abc.def"}', "abc.def"),
        ("send basic dXNlcjpwYXNzd29yZA== as the header", "dXNlcjpw"),
        ("https://user:s3cretpass@host/", "s3cretpass"),
        ("postgres://admin:x@db.internal:5432/app", ":x@"),
        ("pass=abc", "abc"),
        ("pw=1", "=1"),
        ("passwd:abc", "abc"),
        ("password: x", ": x"),
        ("DB_PASS=ab", "ab"),
        ("pass: hunter2", "hunter2"),
        ("token\u200b=Zx9fQ2mLp7Rt4Kw8", "Zx9fQ2mLp7Rt4Kw8"),
        ("pass\u00adword=ab", "=ab"),
        ("api\u2060key = Zx9fQ2mLp7Rt4Kw8", "Zx9fQ2mLp7Rt4Kw8"),
        ("key:\n" + PGP, "lQOYBGVx0p8"),
        ("card 4111.1111.1111.1111.", "4111"),
        ("card 4111_1111_1111_1111", "4111"),
        ("mail jane@bücher.de", "jane"),
        ("mail jane＠example.com", "jane"),
        ("mail 用户@例子.广告", "用户"),
        ("mail a@xn--80ak6aa92e.xn--p1ai", "a@"),
        ("SK-proj-Ab3dEf6hIj9kLm2nOp5qRs8t", "Ab3dEf6h"),
        ("SK-ABCDEFGH1234567890ABCDXYZ", "1234567890"),
        ("akiaiosfodnn7example", "iosfodnn7"),
    ],
)
def test_default_redaction_catches(text: str, secret: str) -> None:
    out = redact(text)
    assert out.text is not None and secret not in out.text, out.text
    assert out.counts is not None and out.counts.total >= 1


@pytest.mark.parametrize(
    "text",
    [
        "The basic idea is simple; I have a basic understanding of it.",
        "Authorization: pending review by the admin.",
        "bypass=true and compass: north",
        "A pass: the ball goes left.",
        "SK-TELECOM-ANNUAL-REPORT-2024 covers the asia pacific region.",
        "Use the user:password@host form in the URL.",
        "see http://example.com/a@b for details",
        "invoice 4111.1111.1111.1112 failed the checksum",
        "emoji 👨\u200d👩\u200d👧 and persian می\u200cخواهم stay as they are",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert redact(text).text == text


FAMILIES: dict[str, Callable[[int], str]] = {
    "auth_header_spaces": lambda n: "authorization:" + " " * n,
    "auth_header_repeats": lambda n: "authorization: bearer " * (n // 22),
    "auth_header_no_scheme": lambda n: "authorization: " * (n // 15),
    "basic_long_token": lambda n: "basic " + "A" * n + "!",
    "basic_repeats": lambda n: "basic " * (n // 6),
    "url_scheme_run": lambda n: "a" * n + "://",
    "url_long_user": lambda n: "http://" + "u" * n + ":",
    "url_no_at": lambda n: ("http://u:" + "p" * 200 + " ") * (n // 210),
    "url_colons": lambda n: "http://u:" * (n // 9),
    "cased_sk_runs": lambda n: "SK-" * (n // 3),
    "cased_sk_dashes": lambda n: "SK-a" + "b-" * (n // 2),
    "aws_lower_runs": lambda n: "akia" * (n // 4),
    "short_password_keys": lambda n: "pass=" * (n // 5),
    "pw_dots": lambda n: "pw=a " + ".pw" * (n // 3),
    "email_idn_labels": lambda n: "x@" + "ü1." * (n // 3),
    "email_fullwidth_at": lambda n: "a!" * (n // 2) + "＠",
    "email_cjk_local": lambda n: "用" * n + "@",
    "invisible_joiner_run": lambda n: "a" + "\u200d" * n + "é",
    "invisible_spaces": lambda n: "a\u200b" * (n // 2),
    "pgp_begin_lines": lambda n: "-----BEGIN PGP PRIVATE KEY BLOCK-----" * (n // 37),
    "card_underscores": lambda n: "1_" * (n // 2),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_new_patterns_take_linear_time(family: str) -> None:
    assert_linear(FAMILIES[family], 2_000)
