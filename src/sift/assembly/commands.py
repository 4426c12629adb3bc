"""What every command of the ``sift`` CLI needs before it builds anything: its settings
and the data directory (owned here, or delegated to the server that owns it)."""

from __future__ import annotations

import argparse
import os
import sys

from sift import datadir
from sift.config import Settings, load_settings
from sift.datadir import DataDirLock
from sift.errors import ConfigError


def settings_for(args: argparse.Namespace) -> Settings:
    """The command's settings: ``--config`` (else ``$SIFT_CONFIG``, else ./sift.toml), the
    ``SIFT_*`` environment, then ``--set KEY=VALUE``, ``--listen`` and ``--data-dir``."""
    overrides: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"flag --set {item}: expected KEY=VALUE")
        overrides[key.strip()] = value
    if getattr(args, "listen", None):
        overrides["listen"] = args.listen
    if args.data_dir:
        overrides["data_dir"] = args.data_dir
    return load_settings(args.config, overrides=overrides)


def config_arg(args: argparse.Namespace) -> str | None:
    """The config file this command reads, as given (``--config`` or ``$SIFT_CONFIG``)."""
    from sift.config import config_path

    path = config_path(getattr(args, "config", None))
    return None if path is None else os.fspath(path)


def own_or_delegate(
    settings: Settings, command: str, args: argparse.Namespace
) -> DataDirLock | tuple[str, str]:
    """``datadir.own_or_delegate`` for a CLI command: the lock, or ``(url, key)`` of the
    server that owns the directory (said on standard error)."""
    got = datadir.own_or_delegate(settings.data_dir, command, config=config_arg(args))
    if isinstance(got, DataDirLock):
        return got
    owner, url, key = got
    note = f"sift: {settings.data_dir} belongs to {owner.describe()}; going through it"
    print(note, file=sys.stderr)
    return url, key
