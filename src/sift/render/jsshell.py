"""Does the text a person would see need JavaScript? Read from the HTTP response's HTML.

General statements about HTML, never a list of sites or frameworks. The tree parsed for the
render is read in two steps around ``dom.clean`` (``html.prepare``), never parsed again:

- the **visible text** of the body after cleaning (scripts, styles, templates, hidden
  elements and controls gone); a ``<noscript>`` counts only where cleaning keeps it as the
  page's text and it is more than a short plea to enable JavaScript;
- the **scripts that would run**: external (``src``) and module scripts, module preloads, and
  inline code (``type`` absent or a JavaScript type), with its size and whether it writes
  markup (``document.write``, ``innerHTML``, ``insertAdjacentHTML``, ``createElement``);
- **hydration data**: inline JSON or state blobs (``type="application/json"`` and the like,
  or code assigning ``window.__X__``/``self.__X``), which a client-side app renders from;
- **mount points**: an empty element (no text, no child element) in the body that has an
  ``id`` or is a custom element (a tag with a hyphen) — where an app puts what it builds —
  outside the elements cleaning drops (an ``<svg>``'s shapes, a ``<template>``'s content);
- the text of ``<noscript>``.

``verdict(signals)`` names why the page needs JavaScript (a reason code, listed in
``REASONS`` and in docs/browser.md), or None. A page needs it only when it has scripts that
would run *and* next to no visible text; every rule below is under that condition, so a page
whose text is in its HTML never needs the browser, however many scripts it carries.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from sift.render.dom import DROP_TAGS, text_len

# Visible text below this: "almost none" (a "Loading…", a one-line footer).
NEAR_EMPTY_CHARS = 50
# Visible text below this counts as "little": enough for a shell with an empty mount point
# and a script bundle, or one whose inline scripts dwarf its text.
LITTLE_TEXT_CHARS = 200
# Inline code at least this large, and this many times the text, is a script-built page.
HEAVY_SCRIPT_CHARS = 2000
HEAVY_SCRIPT_FACTOR = 5
# A <noscript> holding more than this is the page itself (clean() keeps it), not a plea.
NOSCRIPT_PLEA_CHARS = 300

# Reason codes, most specific first (the first that holds is given).
REASONS = (
    "noscript_only",  # the only text is a <noscript> ("enable JavaScript …")
    "empty_mount",  # an empty mount point, scripts to fill it, (almost) no text
    "hydration_data",  # state for a client-side render, no rendered text
    "script_written",  # inline code writes the markup, no text
    "script_heavy",  # inline code dwarfs the little text there is
    "scripts_only",  # scripts and no text at all
)

_JS_TYPES = frozenset(
    {"", "text/javascript", "application/javascript", "module", "text/ecmascript", "jsx"}
)
_NOT_DATA_TYPES = frozenset({"application/ld+json"})  # describes the page, renders nothing
_WRITES = re.compile(
    r"document\.write|\.innerHTML\s*=|insertAdjacentHTML|createElement\s*\(|\.textContent\s*="
)
_STATE = re.compile(r"\b(?:window|self|globalThis)\.__\w+")


@dataclass(frozen=True)
class Signals:
    """What the raw page says about its scripts and text (see the module docstring)."""

    visible_chars: int = 0
    external_scripts: int = 0
    module_scripts: int = 0
    inline_code_chars: int = 0
    writes_markup: bool = False
    hydration_data: bool = False
    empty_mounts: int = 0
    noscript_chars: int = 0

    @property
    def runs_scripts(self) -> bool:
        return bool(self.external_scripts or self.module_scripts or self.inline_code_chars)


class Reader:
    """Reads a page in two steps around ``dom.clean``: the scripts, mount points and
    ``<noscript>`` elements before (``Reader(root)``: cleaning drops scripts), the visible text
    after (``signals(body)``: cleaning has dropped what is never visible, in C)."""

    def __init__(self, root: Any) -> None:
        external = module = code = 0
        data = False
        # Inline code is searched (for markup writes and state blobs) only where the verdict
        # needs it, a page with little visible text: scripts are often hundreds of KB.
        self._code: list[str] = []
        for el in root.iter("script", "link"):
            if el.tag == "link":
                if (el.get("rel") or "").strip().lower() == "modulepreload":
                    module += 1
                continue
            kind = (el.get("type") or "").strip().lower()
            text = el.text or ""
            if kind == "module":
                module += 1
            if kind in _JS_TYPES:
                if el.get("src"):
                    external += 1
                elif text and not text.isspace():
                    code += len(text)
                    self._code.append(text)
            elif text and not text.isspace() and kind not in _NOT_DATA_TYPES and "json" in kind:
                data = True
        self._noscripts: list[Any] = []
        mounts = 0
        body = root.find("body")
        # What lies inside a dropped element is never a mount point: an <svg>'s empty
        # <path id> or a <template>'s placeholder is drawn or cloned, not filled by an app.
        inside = set() if body is None else {e for d in body.iter(*DROP_TAGS) for e in d.iter()}
        for el in () if body is None else body.iter():
            tag = el.tag
            if not isinstance(tag, str) or el in inside:
                continue
            if tag == "noscript":
                self._noscripts.append(el)
            elif len(el) == 0 and not (el.text or "").strip() and (el.get("id") or "-" in tag):
                mounts += 1
        self._base = Signals(
            external_scripts=external,
            module_scripts=module,
            inline_code_chars=code,
            hydration_data=data,
            empty_mounts=mounts,
            noscript_chars=sum(text_len(el.itertext()) for el in self._noscripts),
        )

    def signals(self, body: Any) -> Signals:
        """The signals, with the visible text of the cleaned ``body``. ``dom.clean`` keeps a
        ``<noscript>`` (as a ``div``) when it holds more text than the rest of the page: then
        it is the page's text and counts, unless it is only a short plea to enable
        JavaScript (at most ``NOSCRIPT_PLEA_CHARS``).

        What only a page with little text needs is read only there: ``visible_chars`` is
        counted up to ``LITTLE_TEXT_CHARS`` (past it, no reason holds), and inline code is
        searched for markup writes and state blobs only below it."""
        kept: list[Any] = []
        if self._base.noscript_chars <= NOSCRIPT_PLEA_CHARS:
            kept = [el for el in self._noscripts if el.tag == "div" and el.getparent() is not None]
        if kept:
            visible = text_len(body.itertext()) - sum(text_len(el.itertext()) for el in kept)
        else:
            visible = text_len(body.itertext(), LITTLE_TEXT_CHARS)
        visible = max(visible, 0)
        if visible >= LITTLE_TEXT_CHARS:
            return dataclasses.replace(self._base, visible_chars=visible)
        code = self._code
        return dataclasses.replace(
            self._base,
            visible_chars=visible,
            writes_markup=any(_WRITES.search(text) for text in code),
            hydration_data=self._base.hydration_data or any(_STATE.search(t) for t in code),
        )


def verdict(s: Signals) -> str | None:
    """Why the visible text needs JavaScript (a code of ``REASONS``), or None."""
    if not s.runs_scripts or s.visible_chars >= LITTLE_TEXT_CHARS:
        return None
    near_empty = s.visible_chars < NEAR_EMPTY_CHARS
    if near_empty and 0 < s.noscript_chars <= NOSCRIPT_PLEA_CHARS:
        return "noscript_only"
    bundle = s.external_scripts or s.module_scripts or s.inline_code_chars >= HEAVY_SCRIPT_CHARS
    if s.empty_mounts and bundle:
        return "empty_mount"
    if near_empty and s.hydration_data:
        return "hydration_data"
    if near_empty and s.writes_markup:
        return "script_written"
    if s.inline_code_chars > max(HEAVY_SCRIPT_CHARS, HEAVY_SCRIPT_FACTOR * s.visible_chars):
        return "script_heavy"
    if s.visible_chars == 0:
        return "scripts_only"
    return None
