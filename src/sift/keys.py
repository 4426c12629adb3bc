"""Issuing caller keys: a random bearer key, printed once, stored only as its SHA-256."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path

from sift.config import CALLER_CLASSES, CallerClass, load_settings
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
