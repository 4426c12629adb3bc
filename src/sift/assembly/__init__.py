"""Assembly: turns ``Settings`` into a running sift, below every front end.

``sift serve`` (through ``server.app.create_app``), ``sift batch``, ``sift crawl``, ``sift map``,
``sift fetch``, ``sift mcp``, the tests' fixtures and the benchmarks all build their parts
here, so a new part (or a new way to close one) is wired once:

- ``settings_for(args)``: a command's settings (``--config``, ``SIFT_*``, ``--set``, flags);
- ``own_or_delegate(settings, command, args)``: the data directory's lock, or the server
  that owns it;
- ``build_fetcher``, ``build_render_pool``, ``build_browser``: the single parts, unstarted;
- ``assemble(settings, ...)``: an async context manager yielding ``Parts`` (database, render
  pool, fetcher, browser, service and, when asked, the batch store, runner and jobs),
  started in order and closed in reverse.

Importing this package is cheap (``sift --help`` and ``sift keys`` go through it): the
heavy modules (the service, the renderer, the batch store, the browser) are imported by the
functions that build them.
"""

from __future__ import annotations

from sift.assembly.builders import build_browser, build_fetcher, build_render_pool
from sift.assembly.commands import config_arg, own_or_delegate, settings_for
from sift.assembly.parts import Parts, assemble

__all__ = [
    "Parts",
    "assemble",
    "build_browser",
    "build_fetcher",
    "build_render_pool",
    "config_arg",
    "own_or_delegate",
    "settings_for",
]
