"""Stage 1, validate: the URL and the options against the caller's class, before any I/O.

``Validator.request`` clamps the options to the class (or refuses what it forbids), builds
the class's fetch policy with this request's deadline, and checks the URL against it. Every
check possible without I/O (URL rules, ports, local names, literal addresses) runs here,
before the cache: a cached page is never a way around them. Bad input raises a 4xx
``SiftError`` and nothing is fetched.
"""

from __future__ import annotations

from typing import NamedTuple

from sift.config import ClassSettings, Settings
from sift.fetch import Fetcher, FetchPolicy, Target
from sift.fetch.policy import RESTRICTED_PORTS
from sift.options import Effective, FetchOptions, apply_class
from sift.principal import Principal
from sift.render import RenderOptions

CHECKED_URLS_MAX = 10_000


class Request(NamedTuple):
    """One validated fetch: the options as asked (``opts``), as the caller's class allows
    them (``eff``), and the rules its fetch and render run under. (A named tuple: cheaper
    to define at import and to build per request than a dataclass.)"""

    principal: Principal
    opts: FetchOptions
    limits: ClassSettings
    eff: Effective
    policy: FetchPolicy  # the class's policy with this request's deadline
    target: Target
    ropts: RenderOptions


class Validator:
    """Holds the memos that keep validation cheap on the hot path (policies, checked URLs)."""

    def __init__(self, settings: Settings, fetcher: Fetcher) -> None:
        self.settings = settings
        self.fetcher = fetcher
        self._policies: dict[tuple[str, bool | None, float, str], FetchPolicy] = {}
        self._checked: dict[tuple[str, FetchPolicy], Target] = {}

    def request(self, principal: Principal, options: FetchOptions) -> Request:
        """``options`` checked against ``principal``'s class. Raises ``SiftError``."""
        limits = self.settings.classes.get(principal.caller_class)
        opts = options
        eff = apply_class(opts, principal.caller_class, limits)
        policy = self.policy_for(principal, eff.timeout_s)
        target = self.check_url(opts.url, policy)
        ropts = RenderOptions(
            # A screenshot's text is the page's markdown.
            format="markdown" if opts.format == "screenshot" else opts.format,
            main_content=opts.main_content,
            selector=opts.selector,
            exclude=opts.exclude,
            links=opts.links,
            max_bytes=limits.render_budget_bytes,
            timeout_s=limits.render_timeout_s,
        )
        return Request(principal, opts, limits, eff, policy, target, ropts)

    def policy_for(self, principal: Principal, timeout_s: float) -> FetchPolicy:
        """The fetch policy of a caller's class, with this request's deadline (memoized)."""
        key = (principal.caller_class, principal.allow_private, timeout_s, principal.name)
        policy = self._policies.get(key)
        if policy is None:
            if len(self._policies) > 1024:
                self._policies.clear()
            policy = self._policies[key] = self._make_policy(principal, timeout_s)
        return policy

    def _make_policy(self, principal: Principal, timeout_s: float) -> FetchPolicy:
        limits = self.settings.classes.get(principal.caller_class)
        restricted = principal.caller_class == "restricted"
        allow_private = (
            principal.allow_private if principal.allow_private is not None else limits.allow_private
        )
        return FetchPolicy(
            allow_private=allow_private and not restricted,
            private_cidrs=limits.private_cidrs,
            allowed_ports=RESTRICTED_PORTS | frozenset(limits.extra_ports) if restricted else None,
            max_redirects=limits.max_redirects,
            max_download_bytes=limits.max_download_bytes,
            connect_timeout_s=min(limits.connect_timeout_s, timeout_s),
            timeout_s=timeout_s,
            pool="restricted" if restricted else "fleet",
            caller=principal.name,
        )

    def check_url(self, url: str, policy: FetchPolicy) -> Target:
        """``fetcher.check_url`` memoized per (URL, policy): pure, and costly to repeat on
        the hot path. Only successes are remembered; a refused URL is checked every time."""
        key = (url, policy)
        target = self._checked.get(key)
        if target is None:
            target = self.fetcher.check_url(url, policy)
            if len(self._checked) >= CHECKED_URLS_MAX:
                self._checked.pop(next(iter(self._checked)))
            self._checked[key] = target
        return target
