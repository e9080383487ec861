"""Egress judges IPv6 by the IANA special-purpose registry, and embedded IPv4 by itself.

Attack report item 11: the NAT64 local-use prefix 64:ff9b:1::/48 (RFC 8215) was public, so
``http://[64:ff9b:1::7f00:1]/`` (127.0.0.1 behind a local NAT64) was accepted as a receiver.
"""

from __future__ import annotations

import ipaddress

import pytest

from collector.egress import EgressDenied, EgressPolicy, is_public

NOT_PUBLIC = [
    "64:ff9b:1::7f00:1",  # NAT64 local use of 127.0.0.1
    "64:ff9b:1::808:808",  # NAT64 local use: not global whatever it embeds
    "64:ff9b:1:ffff::a9fe:a9fe",
    "64:ff9b::7f00:1",  # NAT64 well-known prefix of 127.0.0.1
    "64:ff9b::a00:1",  # ... of 10.0.0.1
    "::ffff:169.254.169.254",
    "2002:a9fe:a9fe::1",  # 6to4 of the metadata address
    "100::1",  # discard-only
    "2001:db8::1",
    "3fff::1",  # documentation (RFC 9637)
    "5f00::1",  # SRv6 SIDs
    "fec0::1",  # site-local
    "2001:2::1",  # benchmarking
    "fd12::1",
    "fe80::1",
    "ff02::1",
    "::1",
    "::",
]
PUBLIC = ["8.8.8.8", "2606:4700:4700::1111", "64:ff9b::808:808", "::ffff:8.8.8.8"]


@pytest.mark.parametrize("addr", NOT_PUBLIC)
def test_special_purpose_ranges_are_not_public(addr: str) -> None:
    assert not is_public(ipaddress.ip_address(addr))


@pytest.mark.parametrize("addr", PUBLIC)
def test_global_addresses_stay_public(addr: str) -> None:
    assert is_public(ipaddress.ip_address(addr))


@pytest.mark.parametrize("addr", NOT_PUBLIC[:4])
def test_a_receiver_url_on_a_nat64_prefix_is_refused(addr: str) -> None:
    with pytest.raises(EgressDenied, match="not a public address"):
        EgressPolicy().check_url(f"http://[{addr}]:8000/hook")
