"""``sift mcp``: the MCP server over stdio, in this process, on the local data directory.

By default it runs as an unnamed ``restricted`` caller (public addresses only): an agent
is untrusted input, and the command an agent's config starts must not hand it the operator's
reach into private networks. ``--class fleet`` gives it the fleet class's limits and
egress, ``--key`` makes it the configured caller that key names, and only ``--operator``
runs it as the operator (fleet, every private address allowed — like ``sift fetch``). Like
in-process ``sift batch``, it owns the data directory while it runs (``sift.datadir``: it
reconciles batch jobs a previous run left in flight and runs the batch runner): give each
``sift mcp`` its own ``--data-dir``, or let agents share a running ``sift serve`` through
``/mcp``. Jobs a session leaves unfinished when its input closes are finished in the
background, or by the next ``sift mcp`` (``sift.mcp.handover``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from sift.assembly import assemble
from sift.config import Settings
from sift.errors import Unauthorized
from sift.mcp.core import Core
from sift.mcp.handover import Successor, live_jobs, requeue, say
from sift.mcp.server import build_server
from sift.mcp.tools import SiftTools
from sift.principal import Principal

if TYPE_CHECKING:
    from sift.batch.runner import Runner
    from sift.store import BatchStore

# The name jobs of a keyless stdio session are stored under (a caller class, no key).
STDIO_CALLER: Final = "stdio"
# The tools whose success creates a job (its id in the structured result).
JOB_TOOLS: Final = frozenset({"batch_submit", "crawl"})


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


async def serve_stdio(
    settings: Settings,
    principal: Principal,
    *,
    successor: Successor | None = None,
    resumed: list[str] | None = None,
) -> None:
    """Serve MCP on standard input/output until the client closes it, then shut down.

    ``resumed``: jobs a finisher handed over (``sift.mcp.handover``): they are run, and no
    job is failed at start (None: the restart reconciliation as usual). At end of input,
    the session's jobs still live — submitted here or resumed — go to a finisher started
    through ``successor`` (one line on standard error) and the runner stops at once;
    without a ``successor`` (or live jobs) the runner gets ``batch.shutdown_grace_s``.
    """
    from sift.principal import OPERATOR

    principals = {principal.name: principal}
    if resumed is not None:
        principals.setdefault(OPERATOR.name, OPERATOR)  # a handed-over job may be the operator's
    async with assemble(
        settings, principals=principals, reconcile=resumed is None, watches=True, start_pool=False
    ) as parts:
        assert parts.runner is not None and parts.jobs is not None and parts.store is not None
        jobs = set(await requeue(parts.store, resumed or (), int(time.time())))
        core = Core(parts.service, parts.jobs, parts.watches)
        parts.runner.start()
        server = build_server(SessionTools(lambda: core, jobs), _fixed(principal))
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        if successor is not None:
            await _hand_over(parts.store, parts.runner, settings, sorted(jobs), successor)


class SessionTools(SiftTools):
    """The tools, noting every job this session creates (``batch_submit``, ``crawl``) in
    ``jobs``: what is still live of them at end of input is handed to a finisher."""

    def __init__(self, core: Callable[[], Core], jobs: set[str]) -> None:
        super().__init__(core)
        self.jobs = jobs

    async def call(
        self, principal: Principal, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult:
        result = await super().call(principal, name, arguments)
        made = result.structured_content
        if name in JOB_TOOLS and not result.is_error and made is not None:
            self.jobs.add(str(made["id"]))
        return result


async def _hand_over(
    store: BatchStore, runner: Runner, settings: Settings, jobs: list[str], successor: Successor
) -> None:
    """End of input: the session's live jobs to a finisher (see ``sift.mcp.handover``)."""
    live = await live_jobs(store, jobs)
    if not live:
        return
    finish_s = settings.batch.mcp_finish_s
    if store.shared:
        say(f"sift mcp: input closed; {len(live)} unfinished job(s) stay in the shared store")
        return
    if finish_s <= 0:
        say(
            f"sift mcp: input closed; {len(live)} unfinished job(s) end interrupted "
            "(batch.mcp_finish_s = 0)"
        )
        return
    pid, log = successor.spawn(live)
    say(
        f"sift mcp: input closed with {len(live)} unfinished job(s); sift (pid {pid}) "
        f"finishes them in the background for at most {finish_s:g} s (batch.mcp_finish_s); "
        f"log: {log}"
    )
    await runner.stop(0.0)  # what was running is fetched again by the finisher


def _fixed(principal: Principal) -> Any:
    def principal_for(ctx: ServerRequestContext[Any, Any]) -> Principal:
        return principal

    return principal_for
