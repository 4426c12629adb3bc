"""Bearer-key authentication: a key maps to a caller name and class, or the request is refused."""

from __future__ import annotations

from sift.config import Settings
from sift.errors import Unauthorized
from sift.principal import ANONYMOUS, Principal


def authenticate(settings: Settings, authorization: str | None) -> Principal:
    """The caller behind an ``Authorization`` header value.

    With no callers configured every request is the anonymous restricted caller. Otherwise
    the key must be ``Bearer <key>`` whose SHA-256 matches a configured caller (compared in
    constant time); anything else is ``Unauthorized``.
    """
    if not settings.callers:
        return ANONYMOUS
    if not authorization:
        raise Unauthorized("missing Authorization header")
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("Authorization must be 'Bearer <key>'")
    caller = settings.find_caller(key.strip())
    if caller is None:
        raise Unauthorized("unknown key")
    return Principal(caller.name, caller.caller_class)
