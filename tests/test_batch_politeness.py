"""HostGate: per-host limits, Crawl-delay and backoff, with exact times passed in."""

from __future__ import annotations

import pytest

from sift.batch.politeness import HostGate
from sift.store.hosts import MAX_CRAWL_DELAY_S, host_key


def test_host_key_is_host_and_port() -> None:
    assert host_key("http://Example.COM/a") == "example.com:80"
    assert host_key("https://example.com/a") == "example.com:443"
    assert host_key("http://127.0.0.1:8080/x") == "127.0.0.1:8080"
    assert host_key("http://[::1]:9/") == "::1:9"


def test_host_key_is_the_normalised_host() -> None:
    # Trailing dot, case, default port, IDNA and punycode spellings: one host.
    same = [
        "http://example.com/a",
        "http://EXAMPLE.com./b",
        "http://Example.COM:80/c",
        "HTTP://example.com.:80/d",
    ]
    assert {host_key(u) for u in same} == {"example.com:80"}
    idn = ["http://bücher.test/", "http://BÜCHER.test./", "http://xn--bcher-kva.test/",
           "http://XN--BCHER-KVA.TEST./", "http://ｂücher．test/"]  # fmt: skip
    assert {host_key(u) for u in idn} == {"xn--bcher-kva.test:80"}
    assert {host_key(u) for u in ["http://127.1:8/", "http://2130706433:8/"]} == {"127.0.0.1:8"}


def test_one_at_a_time_until_robots_answered_then_per_host() -> None:
    gate = HostGate(per_host=3)
    assert gate.is_open("h", 0)
    gate.started("h", 0)
    assert not gate.is_open("h", 0)  # unprobed: a single target asks robots.txt first
    gate.learn_crawl_delay("h", None, started_at=0)
    assert gate.is_open("h", 0)
    gate.started("h", 0)
    gate.started("h", 0)
    assert not gate.is_open("h", 0)  # per_host reached
    gate.finished("h")
    assert gate.is_open("h", 0)
    assert gate.is_open("other", 0)  # hosts are independent


def test_crawl_delay_spaces_starts_and_is_clamped() -> None:
    gate = HostGate(per_host=4)
    gate.started("h", 100)
    gate.learn_crawl_delay("h", 5, started_at=100)
    gate.finished("h")
    assert not gate.is_open("h", 104.9)
    assert gate.is_open("h", 105)
    gate.started("h", 105)
    gate.finished("h")
    assert gate.next_open_at({"h"}, 106) == 110
    gate.learn_crawl_delay("slow", 86400, started_at=0)
    assert gate.state("slow").crawl_delay_s == MAX_CRAWL_DELAY_S


def test_back_off_only_moves_forward_and_len_forget_idle() -> None:
    gate = HostGate(per_host=1)
    gate.back_off("h", 50)
    gate.back_off("h", 20)
    assert gate.next_open_at({"h", "unknown"}, 0) == 50
    assert gate.next_open_at({"h"}, 50) is None
    gate.started("a", 0)
    assert len(gate) == 2
    gate.forget_idle(60)
    assert len(gate) == 1  # "a" still runs; "h" is idle and its wait is over


def test_per_host_must_be_positive() -> None:
    with pytest.raises(ValueError, match="per_host must be at least 1"):
        HostGate(per_host=0)
