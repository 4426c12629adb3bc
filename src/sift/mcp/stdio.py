"""``sift mcp``: the MCP server over stdio, in this process, on the local data directory.

By default it runs as an unnamed ``restricted`` caller (public addresses only): an agent
is untrusted input, and the command an agent's config starts must not hand it the operator's
reach into private networks. ``--class fleet`` gives it the fleet class's limits and
egress, ``--key`` makes it the configured caller that key names, and only ``--operator``
runs it as the operator (fleet, every private address allowed — like ``sift fetch``). Like
in-process ``sift batch``, it owns the data directory while it runs (``sift.datadir``: it
reconciles batch jobs a previous run left in flight and runs the batch runner): give each
``sift mcp`` its own ``--data-dir``, or let agents share a running ``sift serve`` through
``/mcp``.
"""

from __future__ import annotations

import time
from typing import Any, Final

from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from sift.config import Settings
from sift.errors import Unauthorized
from sift.mcp.server import build_server
from sift.mcp.tools import Core, SiftTools
from sift.principal import Principal

# The name jobs of a keyless stdio session are stored under (a caller class, no key).
STDIO_CALLER: Final = "stdio"


def principal_for_key(settings: Settings, key: str | None) -> Principal:
    """An unnamed restricted caller without a key; otherwise the configured caller the key
    names. (The operator is never the default: see ``--operator``.)"""
    if key is None:
        return Principal(STDIO_CALLER, "restricted")
    caller = settings.find_caller(key.strip())
    if caller is None:
        raise Unauthorized(
            "--key: no caller with this key is configured",
            hint="Pass a key issued with `sift keys add` for this config, or use --class "
            "instead of --key.",
        )
    return Principal(caller.name, caller.caller_class)


async def serve_stdio(settings: Settings, principal: Principal) -> None:
    """Serve MCP on standard input/output until the client closes it, then shut down:
    the batch runner gets ``batch.shutdown_grace_s``, then the fetcher and database close."""
    from sift.assembly.runner import make_runner
    from sift.batch.jobs import BatchJobs
    from sift.batch.openstore import open_store
    from sift.batch.runner import reconcile
    from sift.browser import Browser
    from sift.cli import build_fetcher, render_pool
    from sift.dcache import AsyncDB
    from sift.service import Service

    adb = await AsyncDB.open(settings.db_path, max_bytes=settings.cache.max_bytes)
    pool = render_pool(settings)
    pool.start()
    try:
        store = await open_store(settings, adb)
    except BaseException:
        pool.close()
        await adb.close()
        raise
    try:
        if not store.shared:
            await reconcile(store, int(time.time()))
        async with build_fetcher(settings) as fetcher:
            browser = Browser(settings.browser, fetcher)  # launched on first use
            service = Service(settings, adb, fetcher, render_pool=pool, browser=browser)
            runner = make_runner(settings, store, service, principals={principal.name: principal})
            core = Core(service, BatchJobs(settings, store, runner))
            runner.start()
            try:
                server = build_server(SiftTools(lambda: core), _fixed(principal))
                async with stdio_server() as (read_stream, write_stream):
                    await server.run(
                        read_stream, write_stream, server.create_initialization_options()
                    )
            finally:
                await runner.stop(settings.batch.shutdown_grace_s)
                await browser.close()
    finally:
        pool.close()
        await store.close()
        await adb.close()


def _fixed(principal: Principal) -> Any:
    def principal_for(ctx: ServerRequestContext[Any, Any]) -> Principal:
        return principal

    return principal_for
