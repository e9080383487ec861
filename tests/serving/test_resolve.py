"""Tenant from API key, rollout/pinned target, token budget, user and session extraction."""

from __future__ import annotations

import pytest

from serving.config import GatewayConfig, Rollout
from serving.resolve import (
    GatewayRequestError,
    apply_token_budget,
    resolve_target,
    session_of,
    tenant_for,
    user_of,
)

CFG = GatewayConfig(
    rollouts={"bot": Rollout("bot", {"base": 1.0})},
    default_rollout="bot",
    api_keys={"sk-acme": "acme", "sk-globex": "globex"},
)


def test_token_budget_caps_and_fills_max_tokens() -> None:
    assert apply_token_budget({"max_tokens": 5000}, 256) == ({"max_tokens": 256}, 256)
    assert apply_token_budget({"max_tokens": 10}, 256) == ({"max_tokens": 10}, 10)
    assert apply_token_budget({}, 256) == ({"max_tokens": 256}, 256)
    body, eff = apply_token_budget({"max_completion_tokens": 999, "max_tokens": 100}, 300)
    assert body == {"max_completion_tokens": 300, "max_tokens": 100} and eff == 100
    with pytest.raises(GatewayRequestError) as err:
        apply_token_budget({"max_tokens": 0}, 10)
    assert err.value.status == 400
    with pytest.raises(ValueError, match="budget"):
        apply_token_budget({}, 0)


def test_tenant_comes_from_the_api_key() -> None:
    assert tenant_for(CFG, "Bearer sk-acme") == "acme"
    assert tenant_for(CFG, "bearer sk-globex") == "globex"
    for bad in (None, "Bearer nope", "Basic sk-acme"):
        with pytest.raises(GatewayRequestError) as err:
            tenant_for(CFG, bad)
        assert err.value.status == 401
    assert tenant_for(GatewayConfig(), None) is None  # no keys configured: auth off


def test_target_resolution_order() -> None:
    assert resolve_target(CFG, "bot", None).rollout == "bot"
    assert resolve_target(CFG, "base", None).pinned == "base"
    assert resolve_target(CFG, None, None).rollout == "bot"
    assert resolve_target(CFG, "default", None).rollout == "bot"
    assert resolve_target(CFG, "base", "remote-rollout").rollout == "remote-rollout"
    with pytest.raises(GatewayRequestError):
        resolve_target(GatewayConfig(), None, None)
    with pytest.raises(GatewayRequestError):
        resolve_target(CFG, 12, None)


def test_user_and_session_sources() -> None:
    assert user_of({}, {"user": "u1"}) == "u1"
    assert user_of({"x-driftline-user": "u2"}, {}) == "u2"
    assert user_of({}, {}) is None
    assert session_of({"x-driftline-session": "s1"}, {}) == "s1"
    assert session_of({"x-session-id": "s2"}, {}) == "s2"
    assert session_of({}, {"metadata": {"session_id": "s3"}}) == "s3"
    assert session_of({}, {}) is None
