"""Fetching: a guarded, bounded HTTP client with per-class egress policy and robots.txt.

The service builds one ``Fetcher`` per process and calls ``fetch(url, policy, ...)`` with a
``FetchPolicy`` derived from the caller's class. See docs/fetching.md.
"""

from sift.fetch.client import Fetcher, FetchResult
from sift.fetch.egress import BLOCKED_MESSAGE, EgressGuard, classify
from sift.fetch.policy import FetchPolicy, egress_scope, restricted_policy
from sift.fetch.resolver import AresResolver, DnsLimits, Lookups, Resolver, StaticResolver
from sift.fetch.robots import MemoryRobotsCache, RobotsCache, RobotsChecker
from sift.fetch.url import Target, normalize_url, validate_url

__all__ = [
    "BLOCKED_MESSAGE",
    "AresResolver",
    "DnsLimits",
    "EgressGuard",
    "FetchPolicy",
    "FetchResult",
    "Fetcher",
    "Lookups",
    "MemoryRobotsCache",
    "Resolver",
    "RobotsCache",
    "RobotsChecker",
    "StaticResolver",
    "Target",
    "classify",
    "egress_scope",
    "normalize_url",
    "restricted_policy",
    "validate_url",
]
