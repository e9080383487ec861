"""Client input to the alert API is a 4xx naming the field, never a 500 (attack report 4, 8)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.alerts.test_ssrf import keyed  # noqa: F401  (fixture)


@pytest.mark.parametrize("cursor", ["9" * 5000, "9" * 13, "1" * 4301])
def test_a_huge_deliveries_cursor_is_a_client_error(
    keyed: tuple[TestClient, Any],  # noqa: F811
    cursor: str,
) -> None:
    """Before: a digits-only pattern without a length; int() of 5,000 digits raised (500)."""
    client, keys = keyed
    r = client.get("/api/v1/alerts/deliveries", params={"cursor": cursor}, headers=keys["read"])
    assert r.status_code in (400, 422), r.text
    assert "cursor" in r.text


def test_a_normal_deliveries_cursor_still_pages(keyed: tuple[TestClient, Any]) -> None:  # noqa: F811
    client, keys = keyed
    r = client.get("/api/v1/alerts/deliveries", params={"cursor": "0"}, headers=keys["read"])
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("timeout_s", [1e300, 61, 0, -1])
def test_receiver_timeout_out_of_bounds_is_refused_naming_it(
    keyed: tuple[TestClient, Any],  # noqa: F811
    timeout_s: float,
) -> None:
    """Before: 1e300 was stored (201) and every attempt raised OverflowError."""
    client, keys = keyed
    body = {"name": "x", "url": "https://hooks.example.com/x", "timeout_s": timeout_s}
    r = client.post("/api/v1/alerts/receivers", json=body, headers=keys["admin"])
    assert r.status_code in (400, 422), r.text
    assert "timeout_s" in r.text
