"""``sift serve``: the HTTP service (API, web console, ``/mcp``) on one port.

Start-up order matters: 1. own the data directory, 2. bind the port — only then 3. touch
the store: a second server (on any port, or one that cannot bind) must never reconcile a
live server's jobs. The app itself is ``server.app.create_app``, which builds its parts
through ``sift.assembly``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sift import datadir
from sift.assembly import build_fetcher, build_render_pool, config_arg, settings_for
from sift.cli.args import add_settings_args
from sift.config import DEFAULT_CONFIG_FILE
from sift.errors import ConfigError

if TYPE_CHECKING:
    from sift.api.fastlane import SiftApp
    from sift.config import Settings
    from sift.datadir import DataDirLock


def add_serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the HTTP service")
    add_settings_args(p)
    p.add_argument("--listen", metavar="HOST:PORT", help="bind address (default 127.0.0.1:8080)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from sift.api.hostguard import is_loopback_host

    settings = settings_for(args)
    host, port = settings.listen_host_port
    anonymous_allowed = is_loopback_host(host) or settings.allow_anonymous_public
    if not settings.callers and not anonymous_allowed:
        raise ConfigError(
            f"listen: {settings.listen}: no callers are configured, so every request would be "
            "anonymous; bind a loopback address, add a caller with `sift keys add`, or set "
            "allow_anonymous_public = true"
        )
    # Until the try below, a failure exits the process, and the kernel drops the lock.
    lock = datadir.own(
        settings.data_dir,
        "serve",
        config=os.fspath(_keys_file(args)),  # `sift keys` finds us by it
        advice="stop it first, or give this one another --data-dir",
    )
    try:
        sock = _bind(host, port, settings.listen)
    except ConfigError:
        lock.release()
        raise
    bound_port = sock.getsockname()[1]  # the real one, also for port 0
    lock.announce(f"[{host}]:{bound_port}" if ":" in host else f"{host}:{bound_port}")
    if settings.store.url:
        from sift.store.postgres.schema import prepare

        prepare(settings.store.url)  # a wrong or unreachable URL: exit 2 now, not at a request
    app = _build_app(args, settings, lock, anonymous_allowed)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal with the
    # handler it found: make that handler a clean exit rather than death by signal.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        _run(app, settings, sock, lock)
    finally:
        lock.release()  # removes operator.json: local commands stop going through us
    return 0


def _build_app(
    args: argparse.Namespace, settings: Settings, lock: DataDirLock, anonymous_allowed: bool
) -> SiftApp:
    """The app over the database, with one render worker per core (started with the app)
    and keys that know the operator key and reload when their config file changes (or on
    SIGHUP)."""
    from sift.api.auth import KeyRing
    from sift.dcache import DB
    from sift.server.app import create_app

    db = DB.open(
        settings.db_path,
        max_bytes=settings.cache.max_bytes,
        robots_max_bytes=settings.cache.robots_max_bytes,
    )
    keys = KeyRing(
        settings.callers,
        operator_key=lock.write_operator_key(),
        anonymous_allowed=anonymous_allowed,
        load_callers=lambda: settings_for(args).callers,
        watch=_keys_file(args),
    )
    return create_app(
        settings, db, build_fetcher(settings), render_pool=build_render_pool(settings), keys=keys
    )


def _run(app: SiftApp, settings: Settings, sock: socket.socket, lock: DataDirLock) -> None:
    """Serve ``app`` on the bound ``sock`` until SIGTERM or Ctrl-C (``server.serving``: one
    line says what the stop waits for; a second Ctrl-C stops now; the exit status is 0)."""
    from sift.api.listener import (
        ListenerLimits,
        effective_max_connections,
        guarded_protocol,
        raise_open_files_limit,
    )
    from sift.server.serving import serve

    host, port = settings.listen_host_port
    # uvicorn's httptools protocol plus a head deadline, a head size cap and a connection
    # limit (api/listener.py says why uvicorn's own settings do not suffice).
    listener = settings.listener
    max_connections = effective_max_connections(listener.max_connections, raise_open_files_limit())
    # uvicorn only announces addresses it bound itself; this socket was bound above.
    logging.getLogger("sift").info(
        "listening on http://%s (web console at /, API docs at /docs)", lock.owner.listen
    )
    serve(
        app,
        sock,
        grace_s=settings.batch.shutdown_grace_s,
        host=host,
        port=port,
        loop="uvloop",
        http=guarded_protocol(
            ListenerLimits.from_settings(listener, max_connections=max_connections)
        ),
        timeout_keep_alive=listener.keep_alive_s,
        access_log=False,
        lifespan="on",
        log_level="info",
    )


def _keys_file(args: argparse.Namespace) -> Path:
    """The config file this server reads its callers from — ``--config``, else
    ``$SIFT_CONFIG``, else ./sift.toml — as an absolute path; it may not exist yet (a first
    `sift keys add` creates it, and the server picks it up)."""
    return Path(config_arg(args) or DEFAULT_CONFIG_FILE).resolve()


def _bind(host: str, port: int, listen: str) -> socket.socket:
    """The listening socket, bound before anything else starts (as uvicorn binds it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"listen: {listen}: cannot bind: {exc.strerror or exc}") from exc
    return sock
