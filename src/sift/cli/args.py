"""Argument groups shared by the `sift` commands (settings, remote server)."""

from __future__ import annotations

import argparse
import os

from sift.config import DEFAULT_CONFIG_FILE


def add_settings_args(p: argparse.ArgumentParser) -> None:
    """``--config``, ``--data-dir`` and ``--set KEY=VALUE`` (see config.load_settings)."""
    p.add_argument(
        "--config", metavar="FILE", help=f"TOML settings (default ./{DEFAULT_CONFIG_FILE})"
    )
    p.add_argument("--data-dir", metavar="DIR", help="directory of the database")
    p.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override any setting by its dotted key, e.g. cache.max_bytes=2GiB",
    )


def add_server_args(p: argparse.ArgumentParser, server_help: str) -> None:
    """``--server URL`` and ``--key KEY`` (default ``$SIFT_KEY``) for talking to a running sift."""
    p.add_argument("--server", metavar="URL", help=server_help)
    p.add_argument(
        "--key",
        metavar="KEY",
        default=os.environ.get("SIFT_KEY"),
        help="bearer key for --server (default $SIFT_KEY)",
    )
