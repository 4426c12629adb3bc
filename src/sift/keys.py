"""Caller keys: issue (a random bearer key, printed once, stored only as its SHA-256), list
and remove them in the config file.

A running ``sift serve`` reloads its keys on SIGHUP; ``notify_server`` sends it when the
server that owns the config's data directory was started with this very config file.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
from pathlib import Path

import tomlkit
import tomlkit.items

from sift.config import CALLER_CLASSES, CallerClass, load_settings
from sift.datadir import Owner, owner_of
from sift.errors import ConfigError

KEY_PREFIX = "sift_"


def new_key() -> str:
    """A fresh bearer key: 32 random bytes, URL-safe, with a recognisable prefix."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def add_caller(config_path: str | os.PathLike[str], name: str, caller_class: CallerClass) -> str:
    """Append ``[[callers]]`` for ``name`` to the config file and return the new key.

    The file is created if missing. It is validated before and after the append, so a
    duplicate name or a file that would no longer load is refused and left untouched.
    """
    if caller_class not in CALLER_CLASSES:
        raise ConfigError(f"{config_path}: callers: unknown class {caller_class!r}")
    path = Path(config_path)
    existed = path.exists()
    original = path.read_bytes() if existed else b""
    if existed:
        settings = load_settings(path, env={})
        if any(c.name == name for c in settings.callers):
            raise ConfigError(f"{path}: callers: a caller named {name!r} already exists")
    key = new_key()
    # json.dumps writes a valid TOML basic string for any name that passed validation.
    entry = (
        f"\n[[callers]]\nname = {json.dumps(name)}\nclass = {json.dumps(caller_class)}\n"
        f"key_sha256 = {json.dumps(key_digest(key))}\n"
    )
    sep = b"" if not original or original.endswith(b"\n") else b"\n"
    path.write_bytes(original + sep + entry.encode())
    try:
        load_settings(path, env={})
    except ConfigError:
        if existed:
            path.write_bytes(original)
        else:
            path.unlink()
        raise
    return key


def list_callers(config_path: str | os.PathLike[str]) -> list[tuple[str, CallerClass]]:
    """The configured callers, ``(name, class)``, in file order."""
    return [(c.name, c.caller_class) for c in load_settings(config_path, env={}).callers]


def remove_caller(config_path: str | os.PathLike[str], name: str) -> None:
    """Delete the ``[[callers]]`` entry named ``name``; the rest of the file (comments and
    layout included) is kept as it was. Unknown names raise ``ConfigError``."""
    path = Path(config_path)
    if not any(n == name for n, _ in list_callers(path)):
        raise ConfigError(f"{path}: callers: no caller named {name!r}")
    original = path.read_text(encoding="utf-8")
    doc = tomlkit.parse(original)
    callers = doc["callers"]
    assert isinstance(callers, tomlkit.items.AoT)
    index = next(i for i, entry in enumerate(callers) if entry.get("name") == name)
    callers.remove(callers[index])
    if not callers:
        del doc["callers"]
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    try:
        load_settings(path, env={})
    except ConfigError:
        path.write_text(original, encoding="utf-8")
        raise


def notify_server(config_path: str | os.PathLike[str]) -> Owner | None:
    """Send SIGHUP to the ``sift serve`` that owns this config's data directory if it was
    started with this config file; return it (None: no such server is running)."""
    settings = load_settings(config_path, env={})
    owner = owner_of(settings.data_dir)
    if (
        owner is None
        or owner.command != "serve"
        or owner.config != str(Path(config_path).resolve())
    ):
        return None
    try:
        os.kill(owner.pid, signal.SIGHUP)
    except OSError:
        return None
    return owner
