"""Per-host politeness for the batch runner: a concurrency limit, Crawl-delay and backoff.

``HostGate`` is pure bookkeeping over a clock reading passed in (``now``, unix seconds as a
float): it never sleeps and never does I/O, so the scheduler asks it "may a target for this
host start now?" and "when is the earliest a blocked host opens again?", and tests drive it
with exact times.

A host (``host:port``, see ``store.hosts.host_key``) is open when

- fewer than ``per_host`` of its targets are running,
- ``now`` has reached its ``not_before`` time, which moves forward on a Retry-After or
  backoff (``back_off``) and, when robots.txt sets a ``Crawl-delay``, by that delay after
  every start (``started``), and
- its Crawl-delay is known, or none of its targets is running: until the first target has
  read robots.txt (``learn_crawl_delay``), a host gets one target at a time, so a site
  that asks for a delay never sees a burst of ``per_host`` requests first.
"""

from __future__ import annotations

from dataclasses import dataclass

from sift.store.hosts import MAX_CRAWL_DELAY_S


@dataclass(slots=True)
class HostState:
    running: int = 0
    not_before: float = 0.0
    crawl_delay_s: float | None = None
    probed: bool = False  # robots.txt has been asked for its Crawl-delay


class HostGate:
    """Which hosts may start a target now. Not thread-safe: the runner's loop owns it."""

    def __init__(self, per_host: int) -> None:
        if per_host < 1:
            raise ValueError("per_host must be at least 1")
        self.per_host = per_host
        self._hosts: dict[str, HostState] = {}

    def __len__(self) -> int:
        return len(self._hosts)

    def state(self, host: str) -> HostState:
        st = self._hosts.get(host)
        if st is None:
            st = self._hosts[host] = HostState()
        return st

    def is_open(self, host: str, now: float) -> bool:
        st = self._hosts.get(host)
        if st is None:
            return True
        if now < st.not_before:
            return False
        limit = self.per_host if st.probed else 1
        return st.running < limit

    def started(self, host: str, now: float) -> None:
        """A target for ``host`` starts at ``now``."""
        st = self.state(host)
        st.running += 1
        if st.crawl_delay_s:
            st.not_before = max(st.not_before, now + st.crawl_delay_s)

    def finished(self, host: str) -> None:
        """A target for ``host`` ended, whatever its outcome."""
        st = self._hosts.get(host)
        if st is None:
            return
        st.running = max(0, st.running - 1)

    def learn_crawl_delay(self, host: str, delay_s: float | None, started_at: float) -> None:
        """robots.txt answered: ``delay_s`` (None = no Crawl-delay) holds from now on.

        The target that asked started at ``started_at``; the next start waits for the delay.
        """
        st = self.state(host)
        st.probed = True
        if delay_s is not None and delay_s > 0:
            st.crawl_delay_s = min(delay_s, MAX_CRAWL_DELAY_S)
            st.not_before = max(st.not_before, started_at + st.crawl_delay_s)

    def probed(self, host: str) -> bool:
        st = self._hosts.get(host)
        return st is not None and st.probed

    def back_off(self, host: str, until: float) -> None:
        """No target for ``host`` starts before ``until`` (Retry-After or backoff)."""
        st = self.state(host)
        st.not_before = max(st.not_before, until)

    def next_open_at(self, hosts: set[str], now: float) -> float | None:
        """The earliest time one of ``hosts``, blocked only by time, opens (None if none is)."""
        times = [
            st.not_before
            for h in hosts
            if (st := self._hosts.get(h)) is not None and st.not_before > now
        ]
        return min(times) if times else None

    def forget_idle(self, now: float) -> None:
        """Drop hosts with nothing running, no pending wait and no learned delay: bounded memory
        over jobs that touch many hosts once."""
        idle = [
            h
            for h, st in self._hosts.items()
            if st.running == 0 and st.not_before <= now and not st.crawl_delay_s
        ]
        for h in idle:
            del self._hosts[h]
