"""Stop the work of a request whose client hung up.

The HTTP server does not cancel a handler when its client goes away: it only answers the
handler's next ``receive()`` with ``http.disconnect``. A fetch whose client is gone would
otherwise go on holding the caller's in-flight slot, a place in the render queue or a
render worker until it ends on its own. ``cancel_on_disconnect`` watches ``receive()`` for
the disconnect while the work runs and cancels the work when it comes; the work's own
cleanup (the in-flight slot, the render queue, a running render's worker) follows from the
cancellation, and the handler ends with ``ClientGone`` — an answer nobody reads, but the
access log says what happened.

Only once the request body has been read whole: the watcher consumes what ``receive()``
returns, and after the body that is only the disconnect.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.types import Receive

from sift.errors import ClientGone


async def _until_disconnect(receive: Receive) -> None:
    """Return when the client has gone (an empty GET body is read and dropped on the way)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


@asynccontextmanager
async def cancel_on_disconnect(receive: Receive) -> AsyncIterator[None]:
    """Run the body of the ``async with`` as work cancelled when the client hangs up; it
    then raises ``ClientGone``. Any other error or cancellation passes through unchanged."""
    task = asyncio.current_task()
    assert task is not None
    gone = False

    def on_disconnect(watcher: asyncio.Task[None]) -> None:
        nonlocal gone
        if not watcher.cancelled() and watcher.exception() is None:
            gone = True
            task.cancel()

    watcher = asyncio.ensure_future(_until_disconnect(receive))
    watcher.add_done_callback(on_disconnect)
    try:
        yield
    except asyncio.CancelledError:
        if gone and task.uncancel() == 0:
            raise ClientGone("the client closed the connection before the answer") from None
        raise
    except Exception:
        if gone:
            task.uncancel()  # the work failed on its own first; our cancel is moot
        raise
    finally:
        watcher.remove_done_callback(on_disconnect)
        watcher.cancel()
