"""``sift batch --server``: the same job flow against a running sift, over HTTP."""

from __future__ import annotations

import sys
import time
from typing import IO, Any

import httpx
from rich.console import Console

from sift.batch.command import (
    EXIT_INTERRUPTED,
    LIVE,
    BatchProgress,
    exit_code,
    summary,
)
from sift.client import error_from_response
from sift.errors import UpstreamError

TIMEOUT_S = 60.0


def _json(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400:
        raise error_from_response(response.status_code, body)
    if not isinstance(body, dict):
        raise UpstreamError(f"sift answered HTTP {response.status_code} without a JSON object")
    return body


def run_remote(
    server: str,
    key: str | None,
    urls: list[str],
    idem: str,
    out: IO[bytes],
    console: Console,
    poll_s: float,
) -> int:
    """Submit, show progress until the job ends (Ctrl-C cancels it), write the NDJSON."""
    started = time.monotonic()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    interrupted = False
    with httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=TIMEOUT_S) as http:
        view = _json(
            http.post("/v1/batch", json={"targets": urls}, headers={"Idempotency-Key": idem})
        )
        path = f"/v1/batch/{view['id']}"
        try:
            with BatchProgress(view["targets_total"], console) as bar:
                bar.update(view)
                while view["status"] in LIVE:
                    time.sleep(poll_s)
                    view = _json(http.get(path))
                    bar.update(view)
        except KeyboardInterrupt:
            interrupted = True
            view = _json(http.delete(path))
        with http.stream("GET", f"{path}/results.ndjson") as response:
            if response.status_code >= 400:
                response.read()
                _json(response)
            for chunk in response.iter_bytes():
                out.write(chunk)
    if interrupted:
        print(f"sift: interrupted; cancelled job {view['id']}", file=sys.stderr)
    print(summary(view, time.monotonic() - started), file=sys.stderr)
    return EXIT_INTERRUPTED if interrupted else exit_code(view)
