"""Loading: defaults ← TOML file ← ``SIFT_*`` environment ← ``--set`` flags, then validated.

Loading never half-succeeds: any problem raises ``ConfigError`` with one line naming the
file (or the variable, or the flag), the key and the reason.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_type_hints

from sift.config.callers import parse_callers
from sift.config.classes import ClassesSettings
from sift.config.egress import parse_resolve
from sift.config.settings import Settings, validate
from sift.config.table import is_section, iter_fields
from sift.config.values import coerce, parse_listen
from sift.errors import ConfigError

DEFAULT_CONFIG_FILE = "sift.toml"
# The environment variable naming the config file when no --config is given.
CONFIG_ENV = "SIFT_CONFIG"


def _build(cls: type, base: Any, table: Mapping[str, Any], where: str, prefix: str) -> Any:
    """A copy of ``base`` (an instance of dataclass ``cls``) with ``table``'s keys applied."""
    hints = get_type_hints(cls)
    names = {f.name: f for f in dataclasses.fields(cls)}
    changes: dict[str, Any] = {}
    for name, value in table.items():
        key = f"{prefix}{name}"
        if name not in names:
            what = (
                "unknown class; use fleet or restricted"
                if cls is ClassesSettings
                else ("unknown setting")
            )
            raise ConfigError(f"{where}: {key}: {what}")
        f, tp = names[name], hints[name]
        try:
            if is_section(tp):
                if not isinstance(value, dict):
                    raise ValueError("expected a table")
                changes[name] = _build(tp, getattr(base, name), value, where, key + ".")
            elif name == "callers":
                changes[name] = parse_callers(value)
            elif name == "resolve":
                changes[name] = parse_resolve(value)
            else:
                changes[name] = coerce(value, tp, f.metadata.get("size", False), False)
        except ConfigError:
            raise
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{where}: {key}: {exc}") from exc
    return dataclasses.replace(base, **changes)


def _set_dotted(table: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    for part in parts[:-1]:
        table = table.setdefault(part, {})
    table[parts[-1]] = value


def _apply_text(settings: Settings, pairs: Mapping[str, tuple[str, str]]) -> Settings:
    """``pairs``: dotted key → (where, text). Each is coerced by its field's type."""
    known = {f.key: f for f in iter_fields()}
    table: dict[str, Any] = {}
    for key, (where, text) in pairs.items():
        info = known.get(key)
        if info is None:
            raise ConfigError(f"{where}: {key}: unknown setting")
        try:
            tp = _field_type(key)
            value = coerce(text, tp, info.size, True)
            if key == "listen":
                parse_listen(value)
            _set_dotted(table, key, value)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{where}: {key}: {exc}") from exc
    built: Settings = _build_typed(settings, table)
    return built


def _field_type(key: str) -> Any:
    cls: Any = Settings
    parts = key.split(".")
    for part in parts[:-1]:
        cls = get_type_hints(cls)[part]
    return get_type_hints(cls)[parts[-1]]


def _build_typed(base: Any, table: Mapping[str, Any]) -> Any:
    """Like ``_build`` but the leaf values are already typed."""
    changes: dict[str, Any] = {}
    for name, value in table.items():
        current = getattr(base, name)
        changes[name] = _build_typed(current, value) if isinstance(value, dict) else value
    return dataclasses.replace(base, **changes)


def load_settings(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> Settings:
    """Defaults ← TOML file ← ``SIFT_*`` env ← ``overrides`` (dotted key → text), validated.

    ``path=None`` reads the file ``$SIFT_CONFIG`` names, else ``./sift.toml`` when it
    exists. ``env`` defaults to ``os.environ``.
    """
    settings = Settings()
    env = os.environ if env is None else env
    path = config_path(path, env)
    where = str(path) if path is not None else "defaults"
    if path is not None:
        settings = _build(Settings, settings, _read_toml(path), str(path), "")
    pairs: dict[str, tuple[str, str]] = {}
    by_env = {f.env: f.key for f in iter_fields()}
    for name, text in env.items():
        if name.startswith("SIFT_") and name in by_env:
            pairs[by_env[name]] = (f"environment {name}", text)
    for key, text in (overrides or {}).items():
        pairs[key] = (f"flag --set {key}", text)
    if pairs:
        settings = _apply_text(settings, pairs)
    validate(settings, where)
    return settings


def _read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    # Imported here: only a run that has a config file pays for the TOML parser.
    import tomllib

    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def config_path(
    path: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None
) -> str | os.PathLike[str] | None:
    """The config file to read: ``path``, else ``$SIFT_CONFIG``, else ``./sift.toml`` if it
    exists, else None (defaults only)."""
    if path is not None:
        return path
    named = (os.environ if env is None else env).get(CONFIG_ENV)
    if named:
        return named
    return DEFAULT_CONFIG_FILE if Path(DEFAULT_CONFIG_FILE).is_file() else None
