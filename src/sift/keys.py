"""Caller keys: issue (a random bearer key, printed once, stored only as its SHA-256), list
and remove them in the config file.

The file is rewritten atomically (a new file renamed over the old), so a running
``sift serve`` — which watches the file it reads its callers from and reloads when it
changes — never reads half a file. ``notify_server`` also sends SIGHUP to the server that
owns the config's data directory when that server reads this very file (it reloads at
once), and says so when it reads another one.
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
    _replace(path, original + sep + entry.encode())
    try:
        load_settings(path, env={})
    except ConfigError:
        if existed:
            _replace(path, original)
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
    _replace(path, tomlkit.dumps(doc).encode("utf-8"))
    try:
        load_settings(path, env={})
    except ConfigError:
        _replace(path, original.encode("utf-8"))
        raise


def _replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file beside the real one (a
    symlink's target), with the old file's mode, renamed over it."""
    target = Path(os.path.realpath(path))
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def notify_server(config_path: str | os.PathLike[str]) -> tuple[Owner, bool] | None:
    """The ``sift serve`` that owns this config's data directory, and whether it reads its
    keys from this very file — then it is sent SIGHUP and reloads now (it would within a
    second anyway). None: no server owns that directory."""
    settings = load_settings(config_path, env={})
    owner = owner_of(settings.data_dir)
    if owner is None or owner.command != "serve":
        return None
    if owner.config != str(Path(config_path).resolve()):
        return owner, False
    try:
        os.kill(owner.pid, signal.SIGHUP)
    except OSError:
        return None
    return owner, True
