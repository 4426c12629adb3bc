"""The host a target counts against: ``host_key(url)``, stored with every target
(``batch_target.host``) so both backends gate politeness on the same key, and the longest
Crawl-delay any gate follows.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from sift.errors import InvalidUrl
from sift.fetch.url import validate_url

# Crawl-delay values beyond this are clamped: one target per ten minutes is the slowest pace
# a batch job follows (a larger value would stall the job for hours per target).
MAX_CRAWL_DELAY_S: Final = 600.0


def host_key(url: str) -> str:
    """``host:port`` of ``url`` in sift's normal form: the unit of politeness.

    The host is the one the fetcher connects to (``fetch.url.validate_url``): lowercase,
    IDNA/UTS #46 mapped to punycode, without a trailing dot, numeric IPv4 spellings as a
    dotted quad; the default port filled in. ``Example.COM.``, ``example.com`` and
    ``EXAMPLE.com:80`` are one host, and so are ``bücher.test`` and ``xn--bcher-kva.test``:
    spelling a host differently never buys a job more concurrency against it.
    """
    try:
        target = validate_url(url)
    except InvalidUrl:
        return _plain_host_key(url)  # never fetched (the fetch refuses it); any key will do
    return f"{target.host}:{target.port}"


def _plain_host_key(url: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return f"{host}:{port}"
