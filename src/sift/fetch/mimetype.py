"""Which ``Content-Type`` a response means when it sends several: the last valid one, as
browsers decide (WHATWG Fetch, "extract a MIME type").

Every ``Content-Type`` field is split on commas outside quoted strings; each piece is parsed
as a MIME type; unparsable pieces and ``*/*`` are skipped; the last remaining one wins. When
it has no ``charset`` but an earlier type with the same essence had one, that charset is
kept (``text/html; charset=koi8-r`` then ``text/html`` is KOI8-R, as in a browser). Joining
the fields with ", " and reading the first type — what a plain header lookup does — would
instead take a type the browser ignores, and render the page as something else.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HTTP_WHITESPACE = " \t\r\n"
_CACHED_FIELDS = 256


def _split(text: str, sep: str) -> list[str]:
    """``text`` split on ``sep`` outside double-quoted strings (backslash escapes inside)."""
    if '"' not in text:
        return text.split(sep)  # the common case, without a loop over characters
    parts: list[str] = []
    start, quoted, escaped = 0, False, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif quoted and ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == sep and not quoted:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _parse(text: str) -> tuple[str, str | None] | None:
    """``(essence, charset)`` of one MIME type, or None when it does not parse."""
    pieces = _split(text.strip(_HTTP_WHITESPACE), ";")
    kind, slash, subtype = pieces[0].strip(_HTTP_WHITESPACE).partition("/")
    if not slash or not _TOKEN.fullmatch(kind) or not _TOKEN.fullmatch(subtype):
        return None
    charset: str | None = None
    for param in pieces[1:]:
        name, eq, value = param.strip(_HTTP_WHITESPACE).partition("=")
        if eq and name.lower() == "charset" and charset is None:
            value = value.strip(_HTTP_WHITESPACE)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:].partition('"')[0])
            charset = value or None
    return f"{kind}/{subtype}".lower(), charset


def extract_content_type(fields: Iterable[str]) -> str:
    """The ``Content-Type`` the response means, from all its ``Content-Type`` field values
    in order; ``""`` when none is a valid MIME type. A single valid value is returned as
    sent; an inherited charset is appended as ``; charset=…``."""
    values = tuple(fields)
    if len(values) == 1:
        return _one_field(values[0])
    return _extract(values)


@functools.lru_cache(maxsize=_CACHED_FIELDS)
def _one_field(field: str) -> str:
    # Nearly every response sends one field, and sites send the same few values.
    return _extract((field,))


def _extract(fields: tuple[str, ...]) -> str:
    chosen = ""
    essence: str | None = None
    charset: str | None = None
    for field in fields:
        for piece in _split(field, ","):
            parsed = _parse(piece)
            if parsed is None or parsed[0] == "*/*":
                continue
            chosen = piece.strip(_HTTP_WHITESPACE)
            if parsed[0] != essence:
                essence, charset = parsed[0], parsed[1]
            elif parsed[1] is None and charset is not None:
                chosen = f"{chosen}; charset={charset}"
    return chosen
