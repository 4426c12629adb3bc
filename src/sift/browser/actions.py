"""Page actions: what a caller asks the browser to do on a page before it is read.

An ordered list of steps (the fetch option ``actions``), each one JSON object::

    {"action": "click", "selector": "#more"}
    {"action": "type", "selector": "#q", "text": "solar"}
    {"action": "press", "key": "Enter"}              (optional "selector": focus it first)
    {"action": "scroll", "to": "bottom"}             ("top"), or {"action": "scroll", "pixels": 800}
    {"action": "wait", "ms": 500}
    {"action": "wait_for", "selector": "#results li"}

``parse_actions`` checks untrusted steps strictly (every problem names its step index);
``check_for_class`` refuses what the caller's class does not allow; ``actions_key`` is the
digest of their canonical serialization, part of the page's cache key; ``run_actions`` runs
them on a loaded page (``loader.py`` calls it after the page has loaded and before it is
read) and returns each step's outcome.

Bounds: a step waits at most ``step_timeout_s`` (the class's ``action_timeout_s``) for its
element, and never past ``until`` (the page's deadline, less the time kept for reading it).
After a step that may change the page (click, type, press, scroll) ``settle`` lets the page
load what the step asked for (its network quiet, a navigation it started loaded). Every
request still goes through the page's guard proxy, and after each step ``check`` refuses a
page that navigated where the caller's policy does not reach. Popups are never created (the
launcher's ``--block-new-web-contents``); a download is cancelled and counted in the step's
outcome (``downloads_refused``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, get_args

from sift.config import MAX_ACTION_STEPS, CallerClass, ClassSettings
from sift.errors import ActionFailed, BadRequest, BrowserTimeout, SiftError

if TYPE_CHECKING:
    from playwright.async_api import Download, Page

ActionKind = Literal["click", "type", "press", "scroll", "wait", "wait_for"]
ACTION_KINDS: tuple[str, ...] = get_args(ActionKind)
SCROLL_TO: tuple[str, ...] = ("bottom", "top")
MAX_ACTION_TEXT_CHARS = 2000
MAX_KEY_CHARS = 64
MAX_WAIT_MS = 60_000
MAX_SCROLL_PIXELS = 1_000_000
# Playwright key names: "Enter", "ArrowDown", "F5", "a", "/", with modifiers ("Control+A").
_KEY_RE = re.compile(r"(?:[A-Za-z]{1,16}\+){0,3}(?:[A-Za-z][A-Za-z0-9]{0,23}|[0-9]|[!-~])")
_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # required, optional
    "click": (("selector",), ()),
    "type": (("selector", "text"), ()),
    "press": (("key",), ("selector",)),
    "scroll": ((), ("to", "pixels")),
    "wait": (("ms",), ()),
    "wait_for": (("selector",), ()),
}
# Steps after which the page may load more (a list, a result, a new document).
_SETTLES = frozenset({"click", "type", "press", "scroll"})
_SCROLL_JS = """([to, pixels]) => {
  const el = document.scrollingElement || document.documentElement;
  if (to === "bottom") window.scrollTo(0, el ? el.scrollHeight : 0);
  else if (to === "top") window.scrollTo(0, 0);
  else window.scrollBy(0, pixels);
}"""
EXAMPLE = '{"action": "click", "selector": "#more"}'


@dataclass(frozen=True)
class Action:
    """One validated step; only the fields of its kind are set (see the module docstring)."""

    action: ActionKind
    selector: str | None = None
    text: str | None = None
    key: str | None = None
    to: str | None = None
    pixels: int | None = None
    ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The step as the caller sends it (only the fields it has)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    def label(self, idx: int) -> str:
        """``actions[2] (click '#more')``: how messages name a step (never the typed text)."""
        what = {
            "scroll": f"{self.pixels} px" if self.pixels is not None else self.to,
            "wait": f"{self.ms} ms",
            "press": repr(self.key),
        }.get(self.action, repr(_short(self.selector or "")))
        return f"actions[{idx}] ({self.action} {what})"


@dataclass(frozen=True)
class ActionPlan:
    """The steps one page load runs, and how long one step may wait."""

    steps: tuple[Action, ...]
    step_timeout_s: float


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- checking -------------------------------------------------------------------------------


def parse_actions(
    value: Any, from_query: bool, problems: list[str], max_selector_chars: int
) -> tuple[Action, ...] | None:
    """Untrusted steps → ``Action``s, or ``None`` with a line per problem in ``problems``.
    From a query string the list comes as JSON text."""
    if from_query and isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            problems.append(f"actions: expected a JSON list of steps like [{EXAMPLE}]")
            return None
    if not isinstance(value, list | tuple):
        problems.append(f"actions: expected a list of steps like [{EXAMPLE}]")
        return None
    if len(value) > MAX_ACTION_STEPS:
        problems.append(f"actions: at most {MAX_ACTION_STEPS} steps")
        return None
    before = len(problems)
    steps = [_parse_step(i, step, max_selector_chars, problems) for i, step in enumerate(value)]
    if len(problems) > before:
        return None
    return tuple(s for s in steps if s is not None)


def _parse_step(idx: int, step: Any, max_selector_chars: int, problems: list[str]) -> Action | None:
    where = f"actions[{idx}]"
    if not isinstance(step, dict):
        problems.append(f"{where}: expected an object like {EXAMPLE}")
        return None
    kind = step.get("action")
    if kind not in ACTION_KINDS:
        problems.append(f"{where}: action: expected one of {', '.join(ACTION_KINDS)}")
        return None
    step = {name: value for name, value in step.items() if value is not None}  # null: absent
    required, optional = _FIELDS[kind]
    known = (*required, *optional)
    bad: list[str] = []
    unknown = sorted(set(step) - {"action", *known})
    if unknown:
        takes = f"its fields: {', '.join(known)}" if known else "no other field"
        bad.append(f"{kind} takes no {', '.join(unknown)} ({takes})")
    missing = [name for name in required if step.get(name) is None]
    if missing:
        bad.append(f"{kind} needs {' and '.join(missing)}")
    if kind == "scroll" and (step.get("to") is None) == (step.get("pixels") is None):
        bad.append('scroll needs either to ("bottom" or "top") or pixels')
    values: dict[str, Any] = {}
    for name in known:
        if step.get(name) is not None:
            problem = _check_field(name, step[name], max_selector_chars)
            if problem:
                bad.append(f"{name}: {problem}")
            else:
                values[name] = step[name]
    problems.extend(f"{where}: {b}" for b in bad)
    return None if bad else Action(action=kind, **values)


def _check_field(name: str, value: Any, max_selector_chars: int) -> str | None:
    """What is wrong with one field's value, or ``None``."""
    if name == "selector":
        ok = isinstance(value, str) and 0 < len(value) <= max_selector_chars
        return None if ok else f"expected a selector of 1-{max_selector_chars} chars"
    if name == "text":
        ok = isinstance(value, str) and len(value) <= MAX_ACTION_TEXT_CHARS
        return None if ok else f"expected a string of at most {MAX_ACTION_TEXT_CHARS} chars"
    if name == "key":
        ok = (
            isinstance(value, str)
            and len(value) <= MAX_KEY_CHARS
            and bool(_KEY_RE.fullmatch(value))
        )
        return None if ok else "expected a key name such as Enter, ArrowDown, a or Control+A"
    if name == "to":
        return None if value in SCROLL_TO else 'expected "bottom" or "top"'
    if name == "pixels":
        ok = _is_int(value) and value != 0 and abs(value) <= MAX_SCROLL_PIXELS
        return None if ok else f"expected a non-zero integer within ±{MAX_SCROLL_PIXELS}"
    ok = _is_int(value) and 0 < value <= MAX_WAIT_MS  # ms
    return None if ok else f"expected milliseconds from 1 to {MAX_WAIT_MS}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_for_class(
    steps: tuple[Action, ...],
    engine: str,
    caller_class: CallerClass,
    limits: ClassSettings,
    timeout_s: float,
) -> None:
    """Refuse (``BadRequest``) actions the request's engine or the caller's class rules out:
    the HTTP engine, a class without the browser or actions, more steps than
    ``max_actions``, a wait longer than ``action_timeout_s`` or waits adding up to the
    page's deadline."""
    if not steps:
        return
    where = f"classes.{caller_class}"
    if engine == "http":
        raise BadRequest(
            "actions: only the browser runs page actions",
            hint="Drop engine=http: actions imply the browser engine.",
        )
    if not limits.browser or limits.max_actions == 0:
        raise BadRequest(
            f"actions: the {caller_class} class may not use page actions",
            hint=f"Drop actions, or ask the operator to set {where}.browser = true and "
            f"{where}.max_actions above 0.",
        )
    if len(steps) > limits.max_actions:
        raise BadRequest(
            f"actions: {len(steps)} steps exceed this class's limit of {limits.max_actions} "
            f"({where}.max_actions)",
            hint=f"Send at most {limits.max_actions} steps.",
        )
    for idx, step in enumerate(steps):
        if step.ms is not None and step.ms > limits.action_timeout_s * 1000:
            raise BadRequest(
                f"{step.label(idx)}: longer than one step may take, "
                f"{limits.action_timeout_s:g} s ({where}.action_timeout_s)",
                hint="Wait less, or wait for an element with a wait_for step.",
            )
    deadline_s = min(timeout_s, limits.browser_timeout_s)
    waits_s = sum(step.ms or 0 for step in steps) / 1000
    if waits_s >= deadline_s:
        raise BadRequest(
            f"actions: the wait steps add up to {waits_s:g} s, the whole of the page's "
            f"deadline of {deadline_s:g} s",
            hint="Wait less, or for elements (wait_for) rather than for time.",
        )


@functools.lru_cache(maxsize=1024)
def actions_key(steps: tuple[Action, ...]) -> str:
    """The steps' digest for cache keys: sha256 of their canonical JSON (sorted keys, no
    spaces), so equal steps share a key and any other steps do not."""
    canonical = json.dumps(
        [s.to_json() for s in steps], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


# -- running --------------------------------------------------------------------------------

Settle = Callable[[], Awaitable[None]]
Check = Callable[[], None]


async def run_actions(
    page: Page, plan: ActionPlan, *, until: float, settle: Settle, check: Check
) -> tuple[dict[str, Any], ...]:
    """Run ``plan`` on ``page`` in order; each step's outcome (``{"step", "action", "ok",
    "ms"}``, ``downloads_refused`` when it started downloads). ``until`` is a
    ``time.monotonic()`` instant no step may wait past. Raises ``ActionFailed`` naming the
    step, ``BrowserTimeout`` when the deadline comes first, or what ``check`` raises (a
    refused navigation), its message prefixed with the step."""
    downloads = [0]

    def on_download(_: Download) -> None:  # cancelled: the context accepts no downloads
        downloads[0] += 1

    page.on("download", on_download)
    outcomes: list[dict[str, Any]] = []
    try:
        for idx, step in enumerate(plan.steps):
            before, started = downloads[0], time.monotonic()
            await _run_step(page, idx, step, plan.step_timeout_s, until)
            if step.action in _SETTLES:
                await settle()
            try:
                check()
            except SiftError as exc:
                raise type(exc)(f"{step.label(idx)}: {exc.message}", hint=exc.hint) from exc
            outcome: dict[str, Any] = {
                "step": idx,
                "action": step.action,
                "ok": True,
                "ms": round((time.monotonic() - started) * 1000),
            }
            if downloads[0] > before:
                outcome["downloads_refused"] = downloads[0] - before
            outcomes.append(outcome)
    finally:
        page.remove_listener("download", on_download)
    return tuple(outcomes)


async def _run_step(
    page: Page, idx: int, step: Action, step_timeout_s: float, until: float
) -> None:
    """One step within ``min(step_timeout_s, until - now)``; Playwright's errors translated."""
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    budget_s = min(step_timeout_s, until - time.monotonic())
    cut = budget_s < step_timeout_s  # the page's deadline, not the step's limit, bounds it
    if budget_s <= 0 or (step.ms is not None and step.ms / 1000 > budget_s):
        raise BrowserTimeout(f"{step.label(idx)}: no time left within the page's deadline.")
    try:
        await _act(page, step, budget_s)
    except PlaywrightTimeout as exc:
        if cut:
            raise BrowserTimeout(
                f"{step.label(idx)}: did not finish within the page's deadline."
            ) from exc
        raise ActionFailed(f"{step.label(idx)}: {_missed(step, budget_s)}") from exc
    except PlaywrightError as exc:
        message = exc.message.strip().splitlines()[0] if exc.message.strip() else "failed"
        if "crash" in message.lower() or "closed" in message.lower():
            raise  # the tab or the browser is gone: the loader says which
        raise ActionFailed(f"{step.label(idx)}: {message[:200]}") from exc


async def _act(page: Page, step: Action, budget_s: float) -> None:
    timeout_ms = budget_s * 1000
    if step.action == "click":
        assert step.selector is not None
        await page.click(step.selector, timeout=timeout_ms)
    elif step.action == "type":
        assert step.selector is not None and step.text is not None
        await page.fill(step.selector, step.text, timeout=timeout_ms)
    elif step.action == "press":
        assert step.key is not None
        if step.selector is not None:
            await page.press(step.selector, step.key, timeout=timeout_ms)
        else:
            await page.keyboard.press(step.key)
    elif step.action == "scroll":
        await page.evaluate(_SCROLL_JS, [step.to, step.pixels])
    elif step.action == "wait":
        assert step.ms is not None
        await asyncio.sleep(step.ms / 1000)
    else:  # wait_for
        assert step.selector is not None
        await page.wait_for_selector(step.selector, state="attached", timeout=timeout_ms)


def _missed(step: Action, budget_s: float) -> str:
    """Why a step timed out, in the caller's terms."""
    within = f"within {budget_s:g} s"
    if step.action == "click":
        return f"no element matching it could be clicked {within} (absent, hidden or covered)"
    if step.action == "type":
        return f"no element matching it could be typed into {within}"
    if step.action == "press":
        return f"no element matching {_short(step.selector or '')!r} could take the key {within}"
    return f"no element matched {within}"
