"""Standard Webhooks signatures (https://www.standardwebhooks.com, ``spec/standard-webhooks.md``).

Signed content is ``"{webhook-id}.{webhook-timestamp}.{raw body}"``; the signature is
HMAC-SHA256 under the secret's key, base64-encoded, sent as ``webhook-signature: v1,<b64>``.
Secrets are ``whsec_<base64 of 24..64 random bytes>``; the HMAC key is the decoded bytes.
Several space-separated signatures allow key rotation. The timestamp is the attempt time
(receivers reject timestamps more than 5 minutes off), the id is the same on every attempt.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets as _secrets
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"
MIN_KEY_BYTES = 24
MAX_KEY_BYTES = 64
DEFAULT_TOLERANCE_S = 300.0


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_`` secret (base64-decoded bytes after the prefix).

    Raises:
        ValueError: ``secret`` lacks the prefix, is not base64, or decodes to a key outside
            24..64 bytes.
    """
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("secret must start with 'whsec_'")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("secret must be 'whsec_' followed by base64") from None
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise ValueError(f"secret key must be 24..64 bytes, got {len(key)}")
    return key


def generate_secret(nbytes: int = 32) -> str:
    """A new random ``whsec_`` secret of ``nbytes`` key bytes (24..64)."""
    if not MIN_KEY_BYTES <= nbytes <= MAX_KEY_BYTES:
        raise ValueError(f"nbytes must be 24..64, got {nbytes}")
    return SECRET_PREFIX + base64.b64encode(_secrets.token_bytes(nbytes)).decode()


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256(key, id.timestamp.body)>`` for one secret.

    Raises ValueError for an invalid secret (see :func:`secret_key`).
    """
    to_sign = f"{msg_id}.{timestamp}.".encode() + body
    mac = hmac.new(secret_key(secret), to_sign, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def signature_headers(
    secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers; one ``v1`` signature per secret (rotation)."""
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(timestamp)}
    if secrets:
        headers["webhook-signature"] = " ".join(sign(s, msg_id, timestamp, body) for s in secrets)
    return headers


def verify(
    secret: str,
    headers: dict[str, str],
    body: bytes,
    *,
    now: float,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> bool:
    """Check a delivery's signature the way a receiver would (constant-time compare).

    Returns False on missing headers, a timestamp more than ``tolerance_s`` seconds from
    ``now`` (unix seconds) or no matching ``v1`` signature.
    """
    h = {k.lower(): v for k, v in headers.items()}
    msg_id, ts, sigs = h.get("webhook-id"), h.get("webhook-timestamp"), h.get("webhook-signature")
    if not (msg_id and ts and sigs):
        return False
    try:
        t = int(ts)
    except ValueError:
        return False
    if abs(now - t) > tolerance_s:
        return False
    expected = sign(secret, msg_id, t, body).split(",", 1)[1].encode()
    for item in sigs.split(" "):
        version, _, value = item.partition(",")
        if version == "v1" and hmac.compare_digest(expected, value.encode()):
            return True
    return False
