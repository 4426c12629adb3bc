"""``[[callers]]``: who may call sift, by name, class and the SHA-256 of their key."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sift.config.classes import CALLER_CLASSES, CallerClass
from sift.errors import ConfigError

# The name of the local operator principal (sift.principal.OPERATOR); no caller may take it.
RESERVED_CALLER = "operator"


@dataclass(frozen=True)
class Caller:
    name: str
    caller_class: CallerClass
    key_sha256: str


def parse_callers(value: Any) -> tuple[Caller, ...]:
    if not isinstance(value, list):
        raise ValueError("expected [[callers]] tables")
    callers = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise ValueError(f"entry {i}: expected a table")
        unknown = set(entry) - {"name", "class", "key_sha256"}
        if unknown:
            raise ValueError(f"entry {i}: unknown key {sorted(unknown)[0]!r}")
        name, cls, digest = entry.get("name"), entry.get("class"), entry.get("key_sha256")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.@-]{1,64}", name):
            raise ValueError(f"entry {i}: name must be 1-64 of A-Z a-z 0-9 _ . @ -")
        if cls not in CALLER_CLASSES:
            raise ValueError(f"entry {i} ({name}): unknown class {cls!r}; use fleet or restricted")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ValueError(f"entry {i} ({name}): key_sha256 must be 64 lowercase hex digits")
        callers.append(Caller(name=name, caller_class=cls, key_sha256=digest))
    return tuple(callers)


def check_callers(callers: tuple[Caller, ...], where: str) -> None:
    """Names unique and not the operator's; no two callers share a key."""
    names: set[str] = set()
    digests: set[str] = set()
    for caller in callers:
        if caller.name == RESERVED_CALLER:
            raise ConfigError(
                f"{where}: callers: the name {RESERVED_CALLER!r} is reserved for the local "
                "operator (the in-process CLI); rename that caller"
            )
        if caller.name in names:
            raise ConfigError(f"{where}: callers: duplicate caller name {caller.name!r}")
        if caller.key_sha256 in digests:
            raise ConfigError(f"{where}: callers: {caller.name!r} reuses another caller's key")
        names.add(caller.name)
        digests.add(caller.key_sha256)
