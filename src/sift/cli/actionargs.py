"""``sift fetch --action STEP`` (repeatable, in order): page actions in a short form.

    click:SELECTOR              type:SELECTOR=TEXT          press:KEY
    scroll:bottom  scroll:top   scroll:PIXELS               wait:MS
    wait_for:SELECTOR           or one step as JSON: {"action": "press", "key": "Enter"}

In ``type`` the text starts after the first ``=`` outside square brackets and quotes, so an
attribute selector keeps its own: ``type:input[name=q]=solar panels``. Each flag becomes one
step object of the API (docs/browser.md#page-actions); the server checks the steps as it
checks any request, so a bad selector or key is its 422, not this parser's.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

KINDS = ("click", "type", "press", "scroll", "wait", "wait_for")
SYNTAX = (
    "click:SELECTOR, type:SELECTOR=TEXT, press:KEY, scroll:bottom|top|PIXELS, wait:MS, "
    "wait_for:SELECTOR, or a JSON step object"
)


def parse_action_flag(text: str) -> dict[str, Any]:
    """One ``--action`` value → one step object; ``ArgumentTypeError`` saying the syntax."""
    if text.lstrip().startswith("{"):
        try:
            step = json.loads(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: not valid JSON ({exc})") from exc
        if not isinstance(step, dict):
            raise argparse.ArgumentTypeError(f"{text!r}: expected a JSON object")
        return step
    kind, sep, arg = text.partition(":")
    kind = kind.strip().replace("-", "_")
    if not sep or kind not in KINDS or not arg:
        raise argparse.ArgumentTypeError(f"{text!r}: expected {SYNTAX}")
    if kind in ("click", "wait_for"):
        return {"action": kind, "selector": arg}
    if kind == "press":
        return {"action": kind, "key": arg}
    if kind == "type":
        at = _split_at(arg)
        if at < 0:
            raise argparse.ArgumentTypeError(f"{text!r}: expected type:SELECTOR=TEXT")
        return {"action": kind, "selector": arg[:at], "text": arg[at + 1 :]}
    number = _int(arg)
    if kind == "wait":
        if number is None:
            raise argparse.ArgumentTypeError(f"{text!r}: expected wait:MILLISECONDS")
        return {"action": kind, "ms": number}
    if arg in ("bottom", "top"):
        return {"action": kind, "to": arg}
    if number is None:
        raise argparse.ArgumentTypeError(f"{text!r}: expected scroll:bottom, top or PIXELS")
    return {"action": kind, "pixels": number}


def _split_at(arg: str) -> int:
    """The index of the first ``=`` outside ``[...]`` and quotes, or -1."""
    depth, quote = 0, ""
    for i, ch in enumerate(arg):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "=" and depth == 0:
            return i
    return -1


def _int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None
