"""A threaded upstream on 127.0.0.1 that sync tests and `sift` subprocesses can both reach.

``serve_pages(pages)`` serves ``{path: (body, content_type)}`` (404 for anything else),
counts requests per path in ``hits``, and holds requests to the paths in ``hang`` until
``release`` is set (set at exit, so teardown never waits).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class SyncUpstream:
    base_url: str
    hits: Counter[str] = field(default_factory=Counter)
    release: threading.Event = field(default_factory=threading.Event)


@contextmanager
def serve_pages(
    pages: Mapping[str, tuple[str, str]], *, hang: frozenset[str] = frozenset()
) -> Iterator[SyncUpstream]:
    state = SyncUpstream("")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.hits[self.path] += 1
            if self.path in hang:
                state.release.wait(30)
            body, ctype = pages.get(self.path, ("missing", "text/plain"))
            data = body.encode()
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
