"""Path globs for a crawl's ``include`` and ``exclude``.

A glob is matched against a URL's path (percent-encoded as sift normalises it; the query is
not part of it). ``*`` matches any run of characters except ``/``, ``**`` any run including
``/``, ``?`` one character except ``/``, ``[abc]`` / ``[a-z]`` / ``[!abc]`` one character of
a class. A glob that does not start with ``/`` may match at any depth: ``*.html`` is
``**/*.html``. A glob that cannot compile (an unclosed ``[``, a reversed range) is refused.
"""

from __future__ import annotations

import re
from typing import Final

MAX_GLOBS: Final = 32
MAX_GLOB_CHARS: Final = 512


class GlobError(ValueError):
    """The glob cannot be compiled; the message says why."""


def compile_glob(glob: str) -> re.Pattern[str]:
    """The regular expression for ``glob`` (see the module docstring); ``GlobError``."""
    if not glob:
        raise GlobError("empty glob")
    if len(glob) > MAX_GLOB_CHARS:
        raise GlobError(f"longer than {MAX_GLOB_CHARS} characters")
    if any(ord(c) < 0x20 or c.isspace() for c in glob):
        raise GlobError("contains whitespace or a control character")
    out = [] if glob.startswith("/") else ["(?:.*/)?"]
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            if glob.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 2 if glob.startswith(("[!", "[]"), i) else i + 1)
            if end < 0:
                raise GlobError(f"unclosed '[' at {i}")
            body = glob[i + 1 : end]
            negate = body.startswith("!")
            if negate:
                body = body[1:]
            body = body.replace("\\", "\\\\").replace("^", "\\^")
            out.append(f"[{'^' if negate else ''}{body}]")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    try:
        return re.compile("".join(out) + r"\Z")
    except re.error as exc:
        raise GlobError(str(exc)) from exc


class PathGlobs:
    """A compiled list of globs: ``matches(path)`` when any of them matches the whole path."""

    def __init__(self, globs: tuple[str, ...]) -> None:
        self.globs = globs
        self._patterns = [compile_glob(g) for g in globs]

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def matches(self, path: str) -> bool:
        return any(p.match(path) for p in self._patterns)
