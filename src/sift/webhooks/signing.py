"""The Standard Webhooks signature scheme (symmetric, ``v1``), exactly as the spec gives it.

- The secret is ``whsec_`` + the base64 of the key bytes (the spec: at least 24 bytes).
- The signed content is ``{webhook-id}.{webhook-timestamp}.{body}``: the id, the integer
  unix timestamp of the attempt, and the body bytes exactly as sent.
- The signature is ``v1,`` + the base64 of HMAC-SHA256(key, content); the
  ``webhook-signature`` header holds one or more of them, space-separated (secret rotation),
  and one match is enough.
- A receiver compares in constant time and refuses a timestamp further than a tolerance
  (5 minutes by default) from its own clock, either way: a replayed request is refused.

Pure and stdlib only (the Python client re-exports ``verify``): it imports nothing of sift.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from typing import Final

SECRET_PREFIX: Final = "whsec_"
SECRET_BYTES: Final = 32  # the spec asks for 24 to 64
DEFAULT_TOLERANCE_S: Final = 300
_VERSION: Final = "v1"


class InvalidSignature(ValueError):
    """The request is not one the secret's owner signed (or it is too old, or too new)."""


def new_secret() -> str:
    """A fresh secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def _key(secret: str | bytes) -> bytes:
    """The HMAC key of ``secret``: the raw bytes, or a ``whsec_<base64>`` string decoded."""
    if isinstance(secret, bytes):
        key = secret
    else:
        text = secret.removeprefix(SECRET_PREFIX)
        try:
            key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("a webhook secret is whsec_ followed by base64") from exc
    if not key:
        raise ValueError("a webhook secret may not be empty")
    return key


def sign(secret: str | bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value for one attempt: ``v1,<base64 HMAC-SHA256>`` over
    ``{msg_id}.{timestamp}.{body}``. ``msg_id`` may not contain a full stop (the spec: it
    would let one signed content pass for another)."""
    if "." in msg_id:
        raise ValueError("a webhook id may not contain '.'")
    content = f"{msg_id}.{int(timestamp)}.".encode() + body
    digest = hmac.new(_key(secret), content, hashlib.sha256).digest()
    return f"{_VERSION},{base64.b64encode(digest).decode('ascii')}"


def headers(secret: str | bytes, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers of one attempt: ``webhook-id``, ``webhook-timestamp``,
    ``webhook-signature``."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(timestamp)),
        "webhook-signature": sign(secret, msg_id, timestamp, body),
    }


def verify(
    secret: str | bytes,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> None:
    """Check a received webhook: ``headers`` as received (any case), ``body`` the raw bytes
    before any JSON parsing. Returns None when one of the ``v1`` signatures matches and the
    timestamp is within ``tolerance_s`` of ``now`` (default: this machine's clock); raises
    ``InvalidSignature`` otherwise. Compares in constant time."""
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    msg_id = lower.get("webhook-id", "")
    stamp = lower.get("webhook-timestamp", "")
    given = lower.get("webhook-signature", "")
    if not (msg_id and stamp and given):
        raise InvalidSignature("missing webhook-id, webhook-timestamp or webhook-signature")
    if not stamp.isascii() or not stamp.isdigit():
        raise InvalidSignature("webhook-timestamp is not integer unix seconds")
    timestamp = int(stamp)
    clock = time.time() if now is None else now
    if abs(clock - timestamp) > tolerance_s:
        raise InvalidSignature("webhook-timestamp is outside the tolerance (a replay?)")
    try:
        expected = sign(secret, msg_id, timestamp, body).encode()
    except ValueError as exc:
        raise InvalidSignature(str(exc)) from exc
    matched = False
    for candidate in given.split(" "):
        # Every candidate is compared (no early exit): the time taken says nothing.
        matched |= hmac.compare_digest(expected, candidate.encode())
    if not matched:
        raise InvalidSignature("no webhook-signature matches this secret")
