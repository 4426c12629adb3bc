"""The bodies of ``POST /v1/crawl`` and ``POST /v1/map``, validated whole.

``parse_crawl`` and ``parse_map`` collect every problem (an unknown key, a value of the
wrong type or out of range, a glob that cannot compile, bad fetch options) and raise one
``BadRequest`` (422) listing each; nothing is fetched or stored for a bad body. The start
URL's own checks — the URL rules and the caller's egress policy — are ``/v1/fetch``'s and
run after (``crawl.submit``, ``crawl.map``), so they answer exactly as a fetch would.

A crawl's parameters are stored with its job as JSON (``CrawlSpec.to_json``); ``max_pages``
is stored already capped by the caller's class (``max_targets``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final, cast

from sift.config import CallerClass, ClassSettings
from sift.crawl.globs import MAX_GLOBS, GlobError, PathGlobs, compile_glob
from sift.crawl.scope import SCOPES, Scope
from sift.errors import BadRequest, SiftError
from sift.fetch.credentials import CREDENTIAL_OPTIONS, origin_of
from sift.fetch.url import validate_url
from sift.options import MAX_URL_BYTES, apply_class, parse_options

DEFAULT_MAX_PAGES: Final = 100
MAX_MAX_PAGES: Final = 1_000_000
DEFAULT_MAX_DEPTH: Final = 3
MAX_DEPTH: Final = 100
DEFAULT_MAP_LIMIT: Final = 1000
MAX_MAP_LIMIT: Final = 10_000
_CRAWL_KEYS: Final = (
    "url",
    "max_pages",
    "max_depth",
    "scope",
    "include",
    "exclude",
    "sitemap",
    "options",
)
_MAP_KEYS: Final = ("url", "scope", "include", "exclude", "sitemap", "limit")
# Options that go with a target only on the start URL's origin (the caller's secrets).
ORIGIN_ONLY_OPTIONS: Final = CREDENTIAL_OPTIONS


@dataclass(frozen=True)
class CrawlSpec:
    """A validated crawl. ``url`` as given (stripped); ``options`` the fetch options every
    page is fetched with (JSON object, without url)."""

    url: str
    max_pages: int
    max_depth: int
    scope: Scope
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    sitemap: bool
    options: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> CrawlSpec:
        d = json.loads(text)
        return cls(
            url=d["url"],
            max_pages=int(d["max_pages"]),
            max_depth=int(d["max_depth"]),
            scope=d["scope"],
            include=tuple(d["include"]),
            exclude=tuple(d["exclude"]),
            sitemap=bool(d["sitemap"]),
            options=dict(d["options"]),
        )

    def options_json(self, url: str | None = None) -> str:
        """The ``options`` column of a target (as batch stores it): of the target at
        ``url``, the caller's headers and cookies only when ``url`` is on the start URL's
        origin (scheme, host and port), so a crawl never sends them anywhere else."""
        options = self.options
        if url is not None and not self.on_start_origin(url):
            options = {k: v for k, v in options.items() if k not in ORIGIN_ONLY_OPTIONS}
        return json.dumps(options, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def on_start_origin(self, url: str) -> bool:
        """Whether ``url`` (in sift's normal form) is on the start URL's origin."""
        try:
            start = validate_url(self.url).url
        except SiftError:
            return False
        return origin_of(url) == origin_of(start)

    def view(self) -> dict[str, Any]:
        """What the job's status view shows of it."""
        d = asdict(self)
        del d["options"]
        d["include"], d["exclude"] = list(self.include), list(self.exclude)
        return d


@dataclass(frozen=True)
class MapSpec:
    url: str
    scope: Scope
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    sitemap: bool
    limit: int


def _int(data: Mapping[str, Any], name: str, default: int, lo: int, hi: int, bad: list[str]) -> int:
    value = data.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        bad.append(f"{name}: expected an integer from {lo} to {hi}")
        return default
    return value


def _globs(data: Mapping[str, Any], name: str, bad: list[str]) -> tuple[str, ...]:
    value = data.get(name)
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_GLOBS:
        bad.append(f"{name}: expected a list of at most {MAX_GLOBS} path globs")
        return ()
    out: list[str] = []
    for i, glob in enumerate(value):
        if not isinstance(glob, str):
            bad.append(f"{name}[{i}]: expected a glob string")
            continue
        try:
            compile_glob(glob)
        except GlobError as exc:
            bad.append(f"{name}[{i}]: {glob!r} is not a valid glob: {exc}")
            continue
        out.append(glob)
    return tuple(out)


def _common(
    data: Any, keys: tuple[str, ...], what: str, bad: list[str]
) -> tuple[str, Scope, tuple[str, ...], tuple[str, ...], bool]:
    if not isinstance(data, dict):
        raise BadRequest(
            "request body must be a JSON object",
            hint=f'Send {{"url": "https://…"}} and the optional fields of {what}.',
        )
    unknown = sorted(set(data) - set(keys))
    if unknown:
        bad.append(f"unknown field {', '.join(unknown)} (known: {', '.join(keys)})")
    url = data.get("url")
    if url is None:
        bad.append("url: required")
        url = ""
    elif not isinstance(url, str) or not url.strip():
        bad.append("url: expected a non-empty string")
        url = ""
    elif len(url.encode("utf-8", "surrogatepass")) > MAX_URL_BYTES:
        bad.append(f"url: longer than {MAX_URL_BYTES} bytes")
    scope = data.get("scope", "prefix")
    if scope not in SCOPES:
        bad.append(f"scope: expected one of {', '.join(SCOPES)}")
        scope = "prefix"
    include = _globs(data, "include", bad)
    exclude = _globs(data, "exclude", bad)
    sitemap = data.get("sitemap", True)
    if not isinstance(sitemap, bool):
        bad.append("sitemap: expected true or false")
        sitemap = True
    return url.strip(), cast(Scope, scope), include, exclude, sitemap


def _raise(bad: list[str], what: str) -> None:
    if bad:
        raise BadRequest(
            f"invalid {what} request: {'; '.join(bad)}",
            hint=f"Fix the listed fields and send the {what} again; nothing was started.",
        )


def parse_crawl(data: Any, caller_class: CallerClass, limits: ClassSettings) -> CrawlSpec:
    """Validate a ``/v1/crawl`` body for a caller of ``caller_class``; see the module doc."""
    bad: list[str] = []
    url, scope, include, exclude, sitemap = _common(data, _CRAWL_KEYS, "a crawl", bad)
    max_pages = _int(data, "max_pages", DEFAULT_MAX_PAGES, 1, MAX_MAX_PAGES, bad)
    max_depth = _int(data, "max_depth", DEFAULT_MAX_DEPTH, 0, MAX_DEPTH, bad)
    options = data.get("options")
    if options is None:
        options = {}
    if not isinstance(options, dict):
        bad.append("options: expected an object of fetch options")
        options = {}
    elif "url" in options:
        bad.append("options: url is the crawl's start URL, not an option")
    else:
        try:
            opts = parse_options({**options, "url": url or "http://x.test/"})
            apply_class(opts, caller_class, limits)
        except BadRequest as exc:
            bad.append(f"options: {exc.message.removeprefix('invalid options: ')}")
    _raise(bad, "crawl")
    return CrawlSpec(
        url=url,
        max_pages=min(max_pages, limits.max_targets),
        max_depth=max_depth,
        scope=scope,
        include=include,
        exclude=exclude,
        sitemap=sitemap,
        options=dict(options),
    )


def parse_map(data: Any) -> MapSpec:
    """Validate a ``/v1/map`` body; see the module docstring."""
    bad: list[str] = []
    url, scope, include, exclude, sitemap = _common(data, _MAP_KEYS, "a map", bad)
    limit = _int(data, "limit", DEFAULT_MAP_LIMIT, 1, MAX_MAP_LIMIT, bad)
    _raise(bad, "map")
    return MapSpec(url, scope, include, exclude, sitemap, limit)


def path_globs(spec: CrawlSpec | MapSpec) -> tuple[PathGlobs, PathGlobs]:
    """The compiled include and exclude globs."""
    return PathGlobs(spec.include), PathGlobs(spec.exclude)
