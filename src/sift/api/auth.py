"""Bearer-key authentication: a key maps to a caller name and class, or the request is refused."""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable

from sift.config import Caller, Settings
from sift.errors import ConfigError, Unauthorized
from sift.principal import ANONYMOUS, OPERATOR, Principal

log = logging.getLogger("sift.api")


class KeyRing:
    """The keys a server accepts: the configured callers — replaced at run time by
    ``reload()`` (``sift serve`` calls it on SIGHUP) — and, when the server owns a data
    directory, that run's local operator key (see ``sift.datadir``).

    ``anonymous_allowed`` says whether an empty caller list may mean "anonymous restricted
    callers" (a loopback bind, or ``allow_anonymous_public``); when it may not, a reload
    that removes every caller refuses every request instead of opening the server."""

    def __init__(
        self,
        callers: tuple[Caller, ...],
        *,
        operator_key: str | None = None,
        anonymous_allowed: bool = True,
        load_callers: Callable[[], tuple[Caller, ...]] | None = None,
    ) -> None:
        self.callers = callers
        self._operator_sha256 = None if operator_key is None else _sha256(operator_key)
        self._anonymous_allowed = anonymous_allowed
        self._load_callers = load_callers

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyRing:
        return cls(settings.callers)

    @property
    def reloadable(self) -> bool:
        return self._load_callers is not None

    @property
    def anonymous(self) -> bool:
        """True when requests without a key are the anonymous restricted caller."""
        return not self.callers and self._anonymous_allowed

    def find(self, key: str) -> Principal | None:
        """The principal whose key hashes to ``sha256(key)``; constant-time over every key."""
        digest = _sha256(key)
        found: Principal | None = None
        for caller in self.callers:
            if hmac.compare_digest(caller.key_sha256, digest):
                found = Principal(caller.name, caller.caller_class)
        if self._operator_sha256 is not None and hmac.compare_digest(self._operator_sha256, digest):
            found = OPERATOR
        return found

    def reload(self) -> bool:
        """Load the callers again from the config file. On a config that does not load, keep
        the current keys and log why. Returns whether the keys were replaced."""
        if self._load_callers is None:
            return False
        try:
            callers = self._load_callers()
        except ConfigError as exc:
            log.error("keys not reloaded, the old ones stay in force: %s", exc.message)
            return False
        self.callers = callers
        log.warning("reloaded keys: %d callers", len(callers))
        return True


def _sha256(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def authenticate(keys: KeyRing, authorization: str | None) -> Principal:
    """The caller behind an ``Authorization`` header value.

    With no callers configured every request is the anonymous restricted caller (unless it
    carries the local operator key). Otherwise the key must be ``Bearer <key>`` whose
    SHA-256 matches a configured caller (compared in constant time); anything else is
    ``Unauthorized``.
    """
    if keys.anonymous and not authorization:
        return ANONYMOUS
    scheme, _, key = (authorization or "").partition(" ")
    principal = keys.find(key.strip()) if scheme.lower() == "bearer" and key.strip() else None
    if principal is not None:
        return principal
    if keys.anonymous:
        return ANONYMOUS
    if not authorization:
        raise Unauthorized("missing Authorization header")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("Authorization must be 'Bearer <key>'")
    raise Unauthorized("unknown key")
