"""The Standard Webhooks signature (sift.webhooks.signing), checked against two independent
implementations: the ``standardwebhooks`` package (the scheme's own Python library) and the
published algorithm written out here with hmac and base64 — in both directions."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

import sift.client
from sift.webhooks import signing
from sift.webhooks.signing import InvalidSignature, headers, new_secret, sign, verify

KEY = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
MSG = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
TS = 1674087231
BODY = b'{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z"}'


def published(key: bytes, msg_id: str, ts: int, body: bytes) -> str:
    """The spec's algorithm, written out: v1,base64(HMAC-SHA256(key, "{id}.{ts}.{body}"))."""
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def test_sign_matches_the_published_algorithm_and_the_reference_library() -> None:
    ours = sign(SECRET, MSG, TS, BODY)
    assert ours == published(KEY, MSG, TS, BODY)
    assert ours == Webhook(SECRET).sign(MSG, datetime.fromtimestamp(TS, tz=UTC), BODY)
    assert sign(KEY, MSG, TS, BODY) == ours  # the raw key bytes sign the same


def test_the_reference_library_verifies_our_headers_and_we_verify_its_signature() -> None:
    now = 1_700_000_000
    secret = new_secret()
    sent = headers(secret, MSG, now, BODY)
    assert set(sent) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert sent["webhook-timestamp"] == str(now)
    theirs = Webhook(secret).sign(MSG, datetime.fromtimestamp(now, tz=UTC), BODY)
    assert sent["webhook-signature"] == theirs
    verify(secret, {**sent, "webhook-signature": theirs}, BODY, now=now)
    # The library checks against the real clock: sign for now to let it verify ours.
    live = headers(secret, MSG, int(datetime.now(tz=UTC).timestamp()), BODY)
    assert Webhook(secret).verify(BODY, live) == {
        "type": "contact.created",
        "timestamp": "2022-11-03T20:26:10.344522Z",
    }
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(BODY, live)


def test_several_signatures_one_match_is_enough_none_is_refused() -> None:
    good = sign(SECRET, MSG, TS, BODY)
    other = sign(new_secret(), MSG, TS, BODY)
    h = {"webhook-id": MSG, "webhook-timestamp": str(TS)}
    verify(SECRET, {**h, "webhook-signature": f"{other} v1a,AAAA {good}"}, BODY, now=TS)
    with pytest.raises(InvalidSignature, match="no webhook-signature matches"):
        verify(SECRET, {**h, "webhook-signature": f"{other} v1a,AAAA"}, BODY, now=TS)


def test_tampering_a_wrong_secret_and_missing_headers_are_refused() -> None:
    sent = headers(SECRET, MSG, TS, BODY)
    verify(SECRET, {k.upper(): v for k, v in sent.items()}, BODY, now=TS)  # any case
    with pytest.raises(InvalidSignature, match="no webhook-signature matches"):
        verify(SECRET, sent, BODY + b" ", now=TS)
    with pytest.raises(InvalidSignature, match="no webhook-signature matches"):
        verify(SECRET, {**sent, "webhook-id": MSG + "x"}, BODY, now=TS)
    with pytest.raises(InvalidSignature, match="no webhook-signature matches"):
        verify(new_secret(), sent, BODY, now=TS)
    for name in sent:
        with pytest.raises(InvalidSignature, match="missing"):
            verify(SECRET, {k: v for k, v in sent.items() if k != name}, BODY, now=TS)
    with pytest.raises(InvalidSignature, match="integer unix seconds"):
        verify(SECRET, {**sent, "webhook-timestamp": "1674087231.5"}, BODY, now=TS)


def test_the_timestamp_tolerance_refuses_replays_both_ways() -> None:
    sent = headers(SECRET, MSG, TS, BODY)
    verify(SECRET, sent, BODY, now=TS + 300)
    verify(SECRET, sent, BODY, now=TS - 300)
    for now in (TS + 301, TS - 301):
        with pytest.raises(InvalidSignature, match="tolerance"):
            verify(SECRET, sent, BODY, now=now)
    verify(SECRET, sent, BODY, now=TS + 3600, tolerance_s=3600)


def test_secrets_are_whsec_base64_of_32_random_bytes_and_ids_may_not_hold_a_dot() -> None:
    a, b = new_secret(), new_secret()
    assert a != b and a.startswith("whsec_")
    assert len(base64.b64decode(a.removeprefix("whsec_"))) == 32
    with pytest.raises(ValueError, match="may not contain"):
        sign(SECRET, "msg.1", TS, BODY)
    with pytest.raises(ValueError, match="base64"):
        sign("whsec_%%%", MSG, TS, BODY)


def test_the_client_re_exports_verify() -> None:
    assert sift.client.verify_webhook is signing.verify
    assert sift.client.verify is signing.verify
    assert sift.client.InvalidSignature is signing.InvalidSignature
