"""The egress policy as a table: what ``DRIFTLINE_EGRESS_ALLOW`` entries open, and what stays
closed (no network needed: literal addresses and the policy's own rules)."""

from __future__ import annotations

import ipaddress

import pytest

from collector.egress import EgressDenied, EgressPolicy, is_public

IP = ipaddress.ip_address


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("::ffff:10.0.0.1", False),
        ("::127.0.0.1", False),
        ("64:ff9b::a9fe:a9fe", False),
        ("64:ff9b::808:808", True),
        ("2002:7f00:1::", False),
    ],
)
def test_public_means_globally_routable_unicast(address: str, public: bool) -> None:
    assert is_public(IP(address)) is public


def test_entries_open_exactly_what_they_name() -> None:
    p = EgressPolicy.parse("10.1.0.0/16, 127.0.0.1:9099, [::1]:8000, hooks.internal:8443, relay")
    assert p.allows("x", IP("10.1.200.3"), 1)
    assert not p.allows("x", IP("10.2.0.1"), 1)
    assert p.allows("127.0.0.1", IP("127.0.0.1"), 9099)
    assert p.allows("x", IP("::ffff:127.0.0.1"), 9099)
    assert not p.allows("127.0.0.1", IP("127.0.0.1"), 9100)
    assert p.allows("::1", IP("::1"), 8000) and not p.allows("::1", IP("::1"), 8001)
    assert p.allows("hooks.internal", IP("10.9.9.9"), 8443)
    assert not p.allows("hooks.internal", IP("10.9.9.9"), 443)
    assert p.allows("RELAY.", IP("192.168.0.7"), 1234)  # any port, case and root dot ignored
    assert not p.allows("other", IP("192.168.0.7"), 1234)


@pytest.mark.parametrize(
    "entry", ["10.0.0.0/33", "http://hooks/", "hooks:0", "hooks:70000", "a b", "[::1]x", "-"]
)
def test_bad_entries_are_named(entry: str) -> None:
    with pytest.raises(ValueError, match=r"port|network|not a"):
        EgressPolicy.parse(entry)


def test_check_url_names_the_rule() -> None:
    p = EgressPolicy()
    for url, why in [
        ("http://169.254.169.254/", "DRIFTLINE_EGRESS_ALLOW"),
        ("http://localhost/", "loopback"),
        ("ftp://93.184.215.14/", "http:// or https://"),
        ("http://a:b@93.184.215.14/", "user:password"),
        ("http:///nohost", "no host"),
        ("http://93.184.215.14:99999/", "valid URL"),
    ]:
        with pytest.raises(EgressDenied, match=why):
            p.check_url(url)
    p.check_url("https://93.184.215.14/hook")
    EgressPolicy.parse("localhost:9099").check_url("http://localhost:9099/")
