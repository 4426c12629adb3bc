"""The pinned classifier table and the policy decision: pure unit tests, no sockets."""

from __future__ import annotations

import ipaddress

import pytest

from sift.errors import Blocked, ConfigError
from sift.fetch.egress import BLOCKED_MESSAGE, TABLE, EgressGuard, classify
from sift.fetch.policy import FetchPolicy, restricted_policy

CASES = [
    # IPv4 denied ranges, first and last address of each
    ("0.0.0.0", "forbidden"),
    ("0.255.255.255", "forbidden"),
    ("10.0.0.0", "private"),
    ("10.255.255.255", "private"),
    ("100.64.0.1", "private"),
    ("100.127.255.255", "private"),
    ("100.128.0.0", "public"),
    ("127.0.0.1", "private"),
    ("127.255.255.254", "private"),
    ("169.254.169.254", "private"),  # cloud metadata
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("172.32.0.0", "public"),
    ("192.0.0.8", "forbidden"),
    ("192.0.2.1", "forbidden"),
    ("192.88.99.1", "forbidden"),
    ("192.168.1.1", "private"),
    ("198.18.0.1", "private"),
    ("198.19.255.255", "private"),
    ("198.20.0.0", "public"),
    ("198.51.100.7", "forbidden"),
    ("203.0.113.9", "forbidden"),
    ("224.0.0.1", "forbidden"),
    ("239.255.255.250", "forbidden"),
    ("240.0.0.1", "forbidden"),
    ("255.255.255.255", "forbidden"),
    # IPv4 public
    ("1.1.1.1", "public"),
    ("8.8.8.8", "public"),
    ("93.184.216.34", "public"),
    ("9.255.255.255", "public"),
    ("11.0.0.0", "public"),
    # IPv6
    ("::", "forbidden"),
    ("::1", "private"),
    ("::2", "forbidden"),  # IPv4-compatible ::/96
    ("::7f00:1", "forbidden"),  # IPv4-compatible 127.0.0.1
    ("::808:808", "forbidden"),  # IPv4-compatible 8.8.8.8
    ("::ffff:127.0.0.1", "private"),  # mapped: judged as 127.0.0.1
    ("::ffff:7f00:1", "private"),
    ("::ffff:169.254.169.254", "private"),
    ("::ffff:8.8.8.8", "public"),
    ("::ffff:0:7f00:1", "forbidden"),  # IPv4-translated: outside 2000::/3
    ("64:ff9b::7f00:1", "forbidden"),  # NAT64 of 127.0.0.1
    ("64:ff9b::808:808", "forbidden"),  # NAT64 of a public address: still refused
    ("64:ff9b:1::1", "forbidden"),
    ("100::1", "forbidden"),
    ("2001::1", "forbidden"),  # Teredo
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "forbidden"),
    ("2001:db8::1", "forbidden"),
    ("2002:7f00:1::1", "forbidden"),  # 6to4 of 127.0.0.1
    ("2002:808:808::1", "forbidden"),
    ("3fff::1", "forbidden"),
    ("fc00::1", "private"),
    ("fd00:ec2::254", "private"),  # AWS metadata over IPv6
    ("fe80::1", "private"),
    ("febf:ffff::1", "private"),
    ("fec0::1", "private"),
    ("ff02::1", "forbidden"),
    ("4000::1", "forbidden"),  # outside global unicast
    ("2606:4700:4700::1111", "public"),
    ("2a00:1450:4001:80b::200e", "public"),
]


@pytest.mark.parametrize(("address", "expected"), CASES)
def test_classify(address: str, expected: str) -> None:
    assert classify(address) == expected


def test_every_table_row_is_exercised_by_cases() -> None:
    covered = {ipaddress.ip_address(a) for a, _ in CASES}
    for row in TABLE:
        assert any(ip in row.network for ip in covered), row.name


def test_extra_public_cidrs_only_widen_the_named_range() -> None:
    nets = [ipaddress.ip_network("127.0.1.0/24")]
    assert classify("127.0.1.1", nets) == "public"
    assert classify("::ffff:127.0.1.1", nets) == "public"
    assert classify("127.0.0.1", nets) == "private"
    assert classify("127.0.2.1", nets) == "private"


FLEET = FetchPolicy(allow_private=False)
FLEET_PRIVATE = FetchPolicy(allow_private=True)
FLEET_TEN = FetchPolicy(allow_private=True, private_cidrs=("10.0.0.0/8",))
RESTRICTED = restricted_policy()


@pytest.mark.parametrize(
    ("policy", "address", "port", "allowed"),
    [
        (RESTRICTED, "8.8.8.8", 80, True),
        (RESTRICTED, "8.8.8.8", 443, True),
        (RESTRICTED, "8.8.8.8", 8080, False),
        (RESTRICTED, "127.0.0.1", 80, False),
        (RESTRICTED, "169.254.169.254", 80, False),
        (RESTRICTED, "::ffff:10.0.0.1", 443, False),
        (FLEET, "8.8.8.8", 8080, True),
        (FLEET, "10.0.0.1", 80, False),
        (FLEET_PRIVATE, "10.0.0.1", 8080, True),
        (FLEET_PRIVATE, "127.0.0.1", 8080, True),
        (FLEET_PRIVATE, "fe80::1", 80, True),
        (FLEET_PRIVATE, "0.0.0.0", 80, False),  # forbidden is never allowed
        (FLEET_PRIVATE, "::", 80, False),
        (FLEET_PRIVATE, "224.0.0.1", 80, False),
        (FLEET_PRIVATE, "64:ff9b::a00:1", 80, False),
        (FLEET_TEN, "10.1.2.3", 80, True),
        (FLEET_TEN, "192.168.1.1", 80, False),
        (FLEET_TEN, "127.0.0.1", 80, False),
        (FLEET_TEN, "8.8.8.8", 80, True),
    ],
)
def test_policy_decision(policy: FetchPolicy, address: str, port: int, allowed: bool) -> None:
    assert EgressGuard().permits(address, port, policy) is allowed


def test_own_address_is_refused_even_when_private_is_allowed() -> None:
    guard = EgressGuard(own_addresses=["127.0.0.1:8080", "[::1]:8080", "10.9.9.9"])
    assert not guard.permits("127.0.0.1", 8080, FLEET_PRIVATE)
    assert guard.permits("127.0.0.1", 8081, FLEET_PRIVATE)
    assert not guard.permits("::1", 8080, FLEET_PRIVATE)
    assert not guard.permits("::ffff:127.0.0.1", 8080, FLEET_PRIVATE)
    assert not guard.permits("10.9.9.9", 1, FLEET_PRIVATE)


def test_own_public_address_is_refused_for_restricted_too() -> None:
    guard = EgressGuard(own_addresses=["93.184.216.34:443"])
    assert not guard.permits("93.184.216.34", 443, RESTRICTED)
    assert guard.permits("93.184.216.34", 80, RESTRICTED)


def test_wildcard_own_address_refuses_every_local_address_on_that_port() -> None:
    guard = EgressGuard(own_addresses=["0.0.0.0:8080"])
    assert not guard.permits("127.0.0.1", 8080, FLEET_PRIVATE)
    assert not guard.permits("192.168.1.5", 8080, FLEET_PRIVATE)
    assert guard.permits("127.0.0.1", 8081, FLEET_PRIVATE)


def test_vet_refuses_if_any_answer_is_refused_and_unwraps_mapped() -> None:
    guard = EgressGuard(extra_public_cidrs=["127.0.1.0/24"])
    policy = restricted_policy(frozenset({8000}))
    assert guard.vet(["127.0.1.1", "::ffff:127.0.1.2", "127.0.1.1"], 8000, policy) == [
        "127.0.1.1",
        "127.0.1.2",
    ]
    for answers in (["127.0.1.1", "127.0.0.1"], [], ["not-an-ip"], ["::1"]):
        with pytest.raises(Blocked) as info:
            guard.vet(answers, 8000, policy)
        assert info.value.message == BLOCKED_MESSAGE


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        EgressGuard(extra_public_cidrs=["127.0.1.0/33"])
    with pytest.raises(ConfigError):
        EgressGuard(own_addresses=["localhost:80"])


def test_docs_list_every_table_row() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "fetching.md").read_text()
    for row in TABLE:
        assert f"| `{row.network}` | {row.category} | {row.name} |" in text
