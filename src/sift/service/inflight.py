"""Per-caller fairness on interactive fetches: a cap on each caller's fetches in flight.

The fetch connection pools are shared per class (``restricted``, ``fleet``). Without a cap,
one caller opening hundreds of slow fetches holds every connection of its class's pool and
everyone else waits behind it. ``InflightLimiter`` counts each caller's requests in flight
on every interactive route that fetches or renders (``/v1/fetch``, both methods and the fast
lane, the MCP ``fetch`` tool, ``/v1/map``, and the console's ``POST /console/render``) and
refuses the one over ``classes.<class>.max_inflight`` at once, with ``429 rate_limited`` and
``Retry-After``, instead of queueing it: the caller decides whether to wait, and nothing it
sends can occupy the server beyond its share. A request whose client hangs up gives its
slot back at once (``api/disconnect.py``), not when its work would have ended.

Counting is in-process and synchronous (no await between the check and the increment), so
it is exact on the event loop without a lock. Batch targets are not counted here: the batch
runner has its own fairness (a round robin over callers, ``batch.concurrency``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Final

from sift.config import CallerClass
from sift.errors import RateLimited
from sift.principal import Principal

RETRY_AFTER_S: Final = 1


class InflightLimiter:
    """``with limiter.hold(principal): ...`` around one fetch; raises ``RateLimited`` when the
    caller already has ``limits[its class]`` fetches in flight.

    Callers are told apart by name (names are unique; every anonymous caller is one).
    """

    def __init__(self, limits: Mapping[CallerClass, int]) -> None:
        self._limits = dict(limits)
        self._counts: dict[str, int] = {}  # a str key: hashed once, unlike a dataclass

    def in_flight(self, principal: Principal) -> int:
        return self._counts.get(principal.name, 0)

    def hold(self, principal: Principal) -> _Held:
        name = principal.name
        limit = self._limits[principal.caller_class]
        count = self._counts.get(name, 0)
        if count >= limit:
            err = RateLimited(
                f"caller {principal.name!r} already has {count} fetches in flight, "
                f"the most its class ({principal.caller_class}) allows",
                hint=f"Wait for one of your {count} fetches to finish, then retry "
                f"(Retry-After: {RETRY_AFTER_S} s); the limit is "
                f"classes.{principal.caller_class}.max_inflight.",
            )
            err.headers["Retry-After"] = str(RETRY_AFTER_S)
            raise err
        self._counts[name] = count + 1
        return _Held(self._counts, name)


class _Held:
    """The context manager ``hold`` returns; the slot is taken before ``__enter__``."""

    __slots__ = ("_counts", "_name")

    def __init__(self, counts: dict[str, int], name: str) -> None:
        self._counts = counts
        self._name = name

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        count = self._counts[self._name] - 1
        if count:
            self._counts[self._name] = count
        else:
            del self._counts[self._name]  # bounded: only callers with fetches in flight
