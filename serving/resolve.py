"""Per-request decisions of the gateway that need no I/O: tenant, target, token budget.

* tenant: from the API key (``Authorization: Bearer <key>``) through the config's static map;
* target: which rollout (if any) a request belongs to, or the served model it pins;
* budget: the server-side cap on generated tokens.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from serving.config import GatewayConfig
from serving.errors import ServingError

ROLLOUT_HEADER = "x-driftline-rollout"
#: a rollout name, as the collector's rollout API accepts it (``driftline.api.rollouts``)
ROLLOUT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,255}")
SESSION_HEADERS: tuple[str, ...] = ("x-driftline-session", "x-session-id")
USER_HEADER = "x-driftline-user"


class GatewayRequestError(ServingError):
    """A client request the gateway refuses; ``status`` and ``code`` go into the HTTP reply."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Target:
    """Where a request goes before weights are applied.

    Attributes:
        rollout: rollout name when the request belongs to one (weights pick the variant).
        pinned: the served model named directly by the request when it is not a rollout.
    """

    rollout: str | None
    pinned: str | None


def tenant_for(config: GatewayConfig, authorization: str | None) -> str | None:
    """Tenant of a request from its ``Authorization`` header.

    Returns None when the config has no API keys (authentication off).

    Raises:
        GatewayRequestError: 401 when keys are configured and the key is missing or unknown.
    """
    if not config.api_keys:
        return None
    key = None
    if authorization and authorization.lower().startswith("bearer "):
        key = authorization[7:].strip()
    if not key or key not in config.api_keys:
        raise GatewayRequestError(401, "invalid_api_key", "a valid API key is required")
    return config.api_keys[key]


def resolve_target(config: GatewayConfig, model: Any, rollout_header: str | None) -> Target:
    """Decide the rollout or pinned model of a request.

    Order: header ``X-Driftline-Rollout`` (any valid name; its weights may come from the
    collector only)
    → ``model`` naming a configured rollout → ``model`` naming anything else (pinned, passed to
    the engine as is) → ``default_rollout``.

    Raises:
        GatewayRequestError: 400 when the header is not a rollout name (:data:`ROLLOUT_NAME`),
            when ``model`` is not a string, or when nothing is named and no default rollout
            exists.
    """
    if rollout_header:
        if not ROLLOUT_NAME.fullmatch(rollout_header):
            raise GatewayRequestError(
                400,
                "invalid_rollout",
                f"{ROLLOUT_HEADER}: a rollout name is 1-256 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit",
            )
        return Target(rollout=rollout_header, pinned=None)
    if model is not None and not isinstance(model, str):
        raise GatewayRequestError(400, "invalid_model", "model must be a string")
    if model and model in config.rollouts:
        return Target(rollout=model, pinned=None)
    if model and model != "default":
        return Target(rollout=None, pinned=model)
    if config.default_rollout:
        return Target(rollout=config.default_rollout, pinned=None)
    raise GatewayRequestError(400, "model_required", "model is required (no default rollout)")


def apply_token_budget(body: Mapping[str, Any], budget: int) -> tuple[dict[str, Any], int]:
    """Cap the request's output tokens at ``budget``.

    The cap is applied to whichever of ``max_tokens`` / ``max_completion_tokens`` the client
    sent (both when both); when neither is sent, ``max_tokens = budget`` is added.

    Returns:
        ``(new_body, effective_max_tokens)``.

    Raises:
        ValueError: ``budget`` < 1.
        GatewayRequestError: 400 when a client limit is not a positive integer.
    """
    if budget < 1:
        raise ValueError(f"budget: must be >= 1, got {budget}")
    out = dict(body)
    present = [k for k in ("max_tokens", "max_completion_tokens") if out.get(k) is not None]
    for key in present:
        val = out[key]
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise GatewayRequestError(400, "invalid_max_tokens", f"{key} must be an integer >= 1")
        out[key] = min(val, budget)
    if not present:
        out["max_tokens"] = budget
    effective = min(int(out[k]) for k in ("max_tokens", "max_completion_tokens") if k in out)
    return out, effective


def session_of(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """Session id: ``X-Driftline-Session`` / ``X-Session-Id``, else ``metadata.session_id``."""
    for h in SESSION_HEADERS:
        if headers.get(h):
            return headers[h]
    meta = body.get("metadata")
    if isinstance(meta, Mapping) and isinstance(meta.get("session_id"), str):
        return str(meta["session_id"])
    return None


def user_of(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """User id: the OpenAI ``user`` field, else the ``X-Driftline-User`` header."""
    user = body.get("user")
    if isinstance(user, str) and user:
        return user
    return headers.get(USER_HEADER) or None
