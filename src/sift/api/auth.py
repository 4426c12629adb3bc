"""Bearer-key authentication: a key maps to a caller name and class, or the request is refused.

A running ``sift serve`` picks up keys added or removed with ``sift keys`` by itself: its
``KeyRing`` watches the config file it reads its callers from (``watch``: polled, the file
may not exist yet) and reloads on any change, and ``sift keys`` also sends it SIGHUP. So a
new key works within ``KEYS_POLL_S`` (plus one reload), whether or not the server was
started with a config file.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from sift.config import Caller, Settings
from sift.errors import ConfigError, Unauthorized
from sift.principal import ANONYMOUS, OPERATOR, Principal

log = logging.getLogger("sift.api")

# How often a server looks at its config file for changed keys.
KEYS_POLL_S: Final = 0.25


class KeyRing:
    """The keys a server accepts: the configured callers — replaced at run time by
    ``reload()`` (``sift serve`` calls it on SIGHUP) — and, when the server owns a data
    directory, that run's local operator key (see ``sift.datadir``).

    ``anonymous_allowed`` says whether an empty caller list may mean "anonymous restricted
    callers" (a loopback bind, or ``allow_anonymous_public``); when it may not, a reload
    that removes every caller refuses every request instead of opening the server.

    ``watch`` is the config file ``load_callers`` reads (it may not exist yet): ``watch()``
    reloads whenever that file changes (``sift serve`` runs it for its whole life)."""

    def __init__(
        self,
        callers: tuple[Caller, ...],
        *,
        operator_key: str | None = None,
        anonymous_allowed: bool = True,
        load_callers: Callable[[], tuple[Caller, ...]] | None = None,
        watch: Path | None = None,
    ) -> None:
        self.callers = callers
        self._operator_sha256 = None if operator_key is None else _sha256(operator_key)
        self._anonymous_allowed = anonymous_allowed
        self._load_callers = load_callers
        self._watch = watch
        self._seen = _file_state(watch)

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
        self._seen = _file_state(self._watch)  # this version is read now: the watch skips it
        try:
            callers = self._load_callers()
        except ConfigError as exc:
            log.error("keys not reloaded, the old ones stay in force: %s", exc.message)
            return False
        self.callers = callers
        log.warning("reloaded keys: %d callers", len(callers))
        return True

    def reload_if_changed(self) -> bool:
        """``reload()`` if the watched file changed (written, replaced, created or deleted)
        since the last look; returns whether the keys were replaced."""
        if _file_state(self._watch) == self._seen:
            return False
        return self.reload()

    async def watch(self, poll_s: float = KEYS_POLL_S) -> None:
        """Look at the watched file every ``poll_s`` and reload on a change, until
        cancelled. Returns at once without a file to watch or a way to reload."""
        if self._watch is None or self._load_callers is None:
            return
        while True:
            await asyncio.sleep(poll_s)
            self.reload_if_changed()


def _file_state(path: Path | None) -> tuple[int, ...] | None:
    """What tells one version of a file from the next: inode, size and both times (a
    rewrite in place and an atomic replace both change it); None when it is missing."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _sha256(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def authenticate(keys: KeyRing, authorization: str | None) -> Principal:
    """The caller behind an ``Authorization`` header value.

    With no callers configured a request without a key is the anonymous restricted caller.
    Otherwise the key must be ``Bearer <key>`` whose SHA-256 matches a configured caller
    or the local operator key (compared in constant time); anything else is
    ``Unauthorized``. A key the server does not know is refused even in anonymous mode:
    silently serving its holder as the anonymous caller would tell a fleet caller whose
    key is not loaded (yet) to "ask the operator for a fleet key".
    """
    if keys.anonymous and not authorization:
        return ANONYMOUS
    scheme, _, key = (authorization or "").partition(" ")
    principal = keys.find(key.strip()) if scheme.lower() == "bearer" and key.strip() else None
    if principal is not None:
        return principal
    if not authorization:
        raise Unauthorized("missing Authorization header")
    if scheme.lower() != "bearer" or not key.strip():
        raise Unauthorized("Authorization must be 'Bearer <key>'")
    raise Unauthorized("unknown key", hint=UNKNOWN_KEY_HINT)


UNKNOWN_KEY_HINT: Final = (
    "Send 'Authorization: Bearer <key>' with a key this server's config file lists (sift keys "
    "list); a key added with sift keys add works within a second on the server reading that file."
)
