"""Request options for one fetch: parsed from JSON or query strings, checked against a class.

``parse_options`` turns untrusted input into a ``FetchOptions`` or raises ``BadRequest``
listing every problem (unknown option, wrong type, out-of-range value) — nothing is fetched
for a bad request. ``apply_class`` then clamps ``max_bytes`` and ``timeout_s`` to the
caller's class (each clamp adds the ``clamped`` warning) and refuses what the class forbids.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from sift.browser.actions import Action, check_for_class, parse_actions
from sift.browser.shot import MAX_SIDE, SHOT_TYPES, ShotSpec
from sift.config import CallerClass, ClassSettings
from sift.errors import BadRequest
from sift.fetch.credentials import Credentials, Pairs, check_total, parse_cookies, parse_headers
from sift.render.cap import MIN_MAX_BYTES as MIN_MAX_BYTES
from sift.render.selector import LIMITS_TEXT, check_selectors
from sift.render.selector import MAX_SELECTOR_CHARS as MAX_SELECTOR_CHARS
from sift.store.history import WATCH_TAG_PREFIX

# screenshot: the page's markdown and a picture of it, taken by the browser (docs/browser.md).
Format = Literal["markdown", "text", "html", "raw", "screenshot"]
FORMATS: tuple[str, ...] = get_args(Format)
# auto: HTTP, and the browser when the page looks like a JavaScript shell (docs/browser.md).
Engine = Literal["auto", "http", "browser"]
ENGINES: tuple[str, ...] = get_args(Engine)
MAX_URL_BYTES = 8 << 10
# What every URL must start with (after leading whitespace), as the schemas state it; the
# full rules are ``sift.fetch.url``'s.
URL_PATTERN = r"^\s*[Hh][Tt][Tt][Pp][Ss]?://"
MAX_EXCLUDES = 32
# JSON integers beyond this never reach SQLite (whose INTEGER is 64-bit signed).
MAX_INT = (1 << 53) - 1
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
# changes=true: a history tag keeps one caller's histories of a URL apart (docs/watches.md).
MAX_TAG_CHARS = 64
_TAG_RE = re.compile(rf"[A-Za-z0-9._:-]{{1,{MAX_TAG_CHARS}}}")
# Tags a watch's checks use (f"watch:{id}"): callers cannot write into a watch's history
# (nor make their own history unevictable, see store/history.py).
RESERVED_TAG_PREFIX = WATCH_TAG_PREFIX


@dataclass(frozen=True)
class FetchOptions:
    """One validated fetch request. ``None`` means "the class or server default"."""

    url: str
    format: Format = "markdown"
    main_content: bool = True
    selector: str | None = None
    exclude: tuple[str, ...] = ()
    links: bool = False
    max_bytes: int | None = None
    offset: int = 0
    digest: str | None = None
    max_age_s: int | None = None
    timeout_s: float | None = None
    robots: bool = True
    engine: Engine = "auto"
    wait_for: str | None = None  # CSS selector the browser waits for (within the deadline)
    # The caller's own headers and cookies, for the requested URL's origin only (secrets:
    # never in a repr; see sift.fetch.credentials and docs/fetching.md).
    headers: Pairs = dataclasses.field(default=(), repr=False)
    cookies: Pairs = dataclasses.field(default=(), repr=False)
    actions: tuple[Action, ...] = ()  # page actions, run in the browser before reading it
    screenshot: ShotSpec | None = None  # set exactly when format is "screenshot"
    # Change tracking (docs/watches.md): compare with this caller's last snapshot of the URL
    # (under ``tag``), the ``ignore`` selectors excluded from the comparison.
    changes: bool = False
    tag: str | None = None
    ignore: tuple[str, ...] = ()

    @property
    def credentials(self) -> Credentials:
        return Credentials(self.headers, self.cookies)


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(FetchOptions))
_OPTION_SET: frozenset[str] = frozenset(OPTION_NAMES)
# Options that only shape a fetch (used by batch to validate per-target option objects).
TARGET_OPTION_NAMES: tuple[str, ...] = tuple(n for n in OPTION_NAMES if n not in ("url",))


def _bool(name: str, value: Any, from_query: bool, problems: list[str]) -> bool | None:
    if isinstance(value, bool):
        return value
    if from_query and isinstance(value, str) and value.lower() in ("true", "1", "false", "0"):
        return value.lower() in ("true", "1")
    problems.append(f"{name}: expected true or false")
    return None


def _int(name: str, value: Any, from_query: bool, lo: int, problems: list[str]) -> int | None:
    if from_query and isinstance(value, str) and re.fullmatch(r"-?\d{1,20}", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(f"{name}: expected an integer")
        return None
    if not lo <= value <= MAX_INT:
        problems.append(f"{name}: must be between {lo} and {MAX_INT}")
        return None
    return value


def parse_options(
    data: Mapping[str, Any], *, from_query: bool = False, require_url: bool = True
) -> FetchOptions:
    """Validate untrusted options. ``from_query``: values are strings from a query string."""
    problems: list[str] = []
    unknown = sorted(set(data).difference(_OPTION_SET))
    if unknown:
        problems.append(f"unknown option {', '.join(unknown)} (known: {', '.join(OPTION_NAMES)})")
    out: dict[str, Any] = {}
    _parse_url(data.get("url"), require_url, out, problems)
    for name, value in data.items():
        if name == "url" or name not in OPTION_NAMES or value is None:
            continue
        _parse_option(name, value, from_query, out, problems)
    if "headers" in out or "cookies" in out:
        check_total(out.get("headers") or (), out.get("cookies") or (), problems)
    _settle_screenshot(data, out, problems)
    if not problems and ("selector" in out or "exclude" in out or "ignore" in out):
        # Bounded selectors only: their cost runs inside libxml2 (see render/selector.py).
        # The ignore selectors are excluded in the same render as exclude: bounded together.
        exclude = out.get("exclude") or ()
        found = check_selectors(out.get("selector"), (*exclude, *(out.get("ignore") or ())))
        problems.extend(_ignore_named(p, len(exclude)) for p in found)
    if "changes" in out or "tag" in out or "ignore" in out:
        _check_changes(out, problems)
    if problems:
        raise BadRequest(
            "invalid options: " + "; ".join(problems),
            hint=_SELECTOR_HINT
            if any(p.startswith(("selector", "exclude", "ignore")) for p in problems)
            else None,
        )
    return FetchOptions(**{k: v for k, v in out.items() if v is not None})


def _ignore_named(problem: str, n_exclude: int) -> str:
    """``exclude[k]`` of the combined list, named as the caller wrote it."""
    m = re.match(r"exclude\[(\d+)\]", problem)
    if m is None or int(m.group(1)) < n_exclude:
        return problem
    return f"ignore[{int(m.group(1)) - n_exclude}]" + problem[m.end() :]


def _check_changes(out: dict[str, Any], problems: list[str]) -> None:
    """``tag`` and ``ignore`` shape a ``changes`` fetch only; a continuation compares nothing."""
    if out.get("changes"):
        if out.get("digest") is not None:
            problems.append("changes: not with digest (a continuation reads an old snapshot)")
        return
    for name in ("tag", "ignore"):
        if out.get(name):
            problems.append(f"{name}: only with changes=true")


def _parse_url(url: Any, require_url: bool, out: dict[str, Any], problems: list[str]) -> None:
    if url is None:
        if require_url:
            problems.append("url: required")
        out["url"] = ""
    elif not isinstance(url, str) or not url.strip():
        problems.append("url: expected a non-empty string")
    elif len(url.encode("utf-8", "surrogatepass")) > MAX_URL_BYTES:
        problems.append(f"url: longer than {MAX_URL_BYTES} bytes")
    else:
        out["url"] = url.strip()


def _parse_option(
    name: str, value: Any, from_query: bool, out: dict[str, Any], problems: list[str]
) -> None:
    """Check one option other than ``url``: its value into ``out``, or a line into ``problems``."""
    if name == "format":
        if value not in FORMATS:
            problems.append(f"format: expected one of {', '.join(FORMATS)}")
        else:
            out[name] = value
    elif name in ("main_content", "links", "robots"):
        out[name] = _bool(name, value, from_query, problems)
    elif name in ("selector", "wait_for"):
        if not isinstance(value, str) or not 0 < len(value) <= MAX_SELECTOR_CHARS:
            problems.append(f"{name}: expected a CSS selector of 1-{MAX_SELECTOR_CHARS} chars")
        else:
            out[name] = value
    elif name == "engine":
        if value not in ENGINES:
            problems.append(f"engine: expected one of {', '.join(ENGINES)}")
        else:
            out[name] = value
    elif name in ("headers", "cookies"):
        if from_query:  # a query string is a URL, and URLs end up in logs
            problems.append(
                f"{name}: not accepted in a query string (URLs end up in logs); "
                "send it in the JSON body of POST /v1/fetch"
            )
        else:
            out[name] = (parse_headers if name == "headers" else parse_cookies)(value, problems)
    elif name in ("exclude", "ignore"):
        if from_query and isinstance(value, str):
            value = [value]
        if (
            not isinstance(value, list | tuple)
            or len(value) > MAX_EXCLUDES
            or not all(isinstance(v, str) and 0 < len(v) <= MAX_SELECTOR_CHARS for v in value)
        ):
            problems.append(f"{name}: expected a list of at most {MAX_EXCLUDES} CSS selectors")
        else:
            out[name] = tuple(value)
    elif name == "changes":
        out[name] = _bool(name, value, from_query, problems)
    elif name == "tag":
        if not isinstance(value, str) or not _TAG_RE.fullmatch(value):
            problems.append(f"tag: expected 1-{MAX_TAG_CHARS} of A-Z a-z 0-9 . _ : -")
        elif value.startswith(RESERVED_TAG_PREFIX):
            problems.append(f"tag: {RESERVED_TAG_PREFIX}* tags are the watches' own")
        else:
            out[name] = value
    elif name == "max_bytes":
        out[name] = _int(name, value, from_query, MIN_MAX_BYTES, problems)
    elif name in ("offset", "max_age_s"):
        out[name] = _int(name, value, from_query, 0, problems)
    elif name == "digest":
        if not isinstance(value, str) or not _DIGEST_RE.fullmatch(value):
            problems.append("digest: expected 'sha256:' and 64 lowercase hex digits")
        else:
            out[name] = value
    elif name == "actions":
        out[name] = parse_actions(value, from_query, problems, MAX_SELECTOR_CHARS)
    elif name == "screenshot":
        if from_query:
            problems.append(
                "screenshot: its options go in a POST body; a query takes format=screenshot"
            )
        else:
            out[name] = _parse_shot(value, problems)
    elif name == "timeout_s":
        if from_query and isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = float(value)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (0 < value <= 86400)
        ):
            problems.append("timeout_s: expected a number of seconds above 0")
        else:
            out[name] = float(value)


_SHOT_FIELDS: tuple[str, ...] = ("type", "full_page", "width", "height", "quality")


def _parse_shot(value: Any, problems: list[str]) -> ShotSpec | None:
    """The ``screenshot`` object: ``{type, full_page, width, height, quality}``, all optional."""
    if not isinstance(value, dict):
        problems.append("screenshot: expected an object {type, full_page, width, height, quality}")
        return None
    unknown = sorted(set(value) - set(_SHOT_FIELDS))
    if unknown:
        problems.append(f"screenshot: unknown field {', '.join(unknown)}")
        return None
    before = len(problems)
    fields: dict[str, Any] = {}
    if value.get("type") is not None:
        if value["type"] not in SHOT_TYPES:
            problems.append(f"screenshot.type: expected one of {', '.join(SHOT_TYPES)}")
        fields["type"] = value["type"]
    if value.get("full_page") is not None:
        fields["full_page"] = _bool("screenshot.full_page", value["full_page"], False, problems)
    for name, hi in (("width", MAX_SIDE), ("height", MAX_SIDE), ("quality", 100)):
        v = value.get(name)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
                problems.append(f"screenshot.{name}: expected an integer from 1 to {hi}")
            fields[name] = v
    if fields.get("quality") is not None and fields.get("type", "png") == "png":
        problems.append("screenshot.quality: only for type jpeg or webp")
    return ShotSpec(**fields) if len(problems) == before else None


def _settle_screenshot(data: Mapping[str, Any], out: dict[str, Any], problems: list[str]) -> None:
    """``format: "screenshot"`` and the ``screenshot`` object go together: the format alone
    takes the default spec, the object alone implies the format; the object with another
    format is refused."""
    given = data.get("screenshot") is not None
    if out.get("format") == "screenshot" and not given:
        out["screenshot"] = ShotSpec()
    elif given and "format" not in out and data.get("format") is None:
        out["format"] = "screenshot"
    elif given and out.get("format") not in (None, "screenshot"):
        problems.append("screenshot: only with format screenshot")


_SELECTOR_HINT = "Use a simple CSS selector such as 'article', 'div.content' or '#main p'. " + (
    LIMITS_TEXT
)


@dataclass(frozen=True)
class Effective:
    """The limits one request runs under after the class clamps, and the warnings they add."""

    max_bytes: int
    timeout_s: float
    warnings: tuple[str, ...]


def apply_class(opts: FetchOptions, caller_class: CallerClass, limits: ClassSettings) -> Effective:
    """Clamp ``max_bytes``/``timeout_s`` to the class and refuse what it forbids."""
    clamped = False
    max_bytes = opts.max_bytes if opts.max_bytes is not None else limits.output_cap
    if max_bytes > limits.output_cap:
        max_bytes, clamped = limits.output_cap, True
    timeout_s = opts.timeout_s if opts.timeout_s is not None else limits.timeout_s
    if timeout_s > limits.timeout_s:
        timeout_s, clamped = limits.timeout_s, True
    if not opts.robots and caller_class == "restricted":
        raise BadRequest(
            "robots: restricted callers always obey robots.txt",
            hint="Drop robots=false, or ask the operator for a fleet key.",
        )
    if opts.engine == "browser" and not limits.browser:
        raise BadRequest(
            f"engine: the {caller_class} class may not use the browser",
            hint="Use engine=http (or auto), or ask the operator to set "
            f"classes.{caller_class}.browser = true.",
        )
    if (opts.headers or opts.cookies) and not limits.credentials:
        raise BadRequest(
            f"headers, cookies: the {caller_class} class may not send its own headers or cookies",
            hint="Drop headers and cookies, or ask the operator to set "
            f"classes.{caller_class}.credentials = true.",
        )
    if opts.screenshot is not None:
        _check_shot(opts, opts.screenshot, caller_class, limits)
    if opts.wait_for is not None and opts.engine == "http":
        raise BadRequest(
            "wait_for: only the browser waits for selectors",
            hint="Drop wait_for, or use engine=browser or auto.",
        )
    check_for_class(opts.actions, opts.engine, caller_class, limits, timeout_s)
    return Effective(max_bytes, timeout_s, ("clamped",) if clamped else ())


def _check_shot(
    opts: FetchOptions, spec: ShotSpec, caller_class: CallerClass, limits: ClassSettings
) -> None:
    """A screenshot needs the browser, and its viewport must fit the class's pixels."""
    if opts.engine == "http":
        raise BadRequest(
            "format: screenshots are taken by the browser; engine http cannot take one",
            hint="Drop engine=http (auto and browser both take the screenshot in the browser).",
        )
    if not limits.browser:
        raise BadRequest(
            f"format: the {caller_class} class may not use the browser, which takes screenshots",
            hint=f"Ask the operator to set classes.{caller_class}.browser = true.",
        )
    if spec.pixels > limits.screenshot_max_pixels:
        raise BadRequest(
            f"screenshot: a {spec.width}x{spec.height} viewport is {spec.pixels} pixels, over "
            f"the {limits.screenshot_max_pixels} your class may have",
            hint="Ask for a smaller width and height (a full page is cut at the limit).",
        )
