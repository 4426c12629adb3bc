"""Bytes to text: choose a charset safely, decode with replacement.

Order: the caller's charset (from the HTTP header, or the ``charset=`` parameter of the
content type), a byte-order mark, valid UTF-8 with multi-byte sequences (a stale ``<meta>``
loses to it), a ``<meta charset>`` / ``http-equiv`` declaration in the first 4 KiB, then for
unlabelled non-UTF-8 bytes windows-1252 when they look like accented Latin text (as browsers
do), else charset-normalizer on a bounded sample, else UTF-8. Every name goes through
``text_codec``: only real text codecs are accepted, never bytes-to-bytes ones (``zlib``,
``base64``, ``rot13`` …) that a hostile page could
declare. Decoding always uses ``errors="replace"``: the result is a ``str`` whatever the bytes.
"""

from __future__ import annotations

import codecs
import re

from sift.fetch.charset import is_utf8_multibyte, sniffed_charset

_META = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]{1,40})""", re.IGNORECASE)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Sample size for statistical detection: enough to decide, bounded in time.
DETECT_SAMPLE_BYTES = 64 * 1024


def text_codec(name: str | None) -> str | None:
    """The canonical name of a text codec, or None for unknown or non-text codecs."""
    if not name:
        return None
    name = name.strip().strip("\"'").lower()
    if not name:
        return None
    # WHATWG: pages labelled latin-1/ascii are really windows-1252.
    if name in ("iso-8859-1", "latin-1", "latin1", "us-ascii", "ascii", "iso8859-1"):
        name = "cp1252"
    try:
        info = codecs.lookup(name)
    except (LookupError, ValueError):
        return None
    if not getattr(info, "_is_text_encoding", True):
        return None
    return info.name


def sniff_charset(body: bytes) -> str | None:
    """The charset declared by a BOM or ``<meta>`` in the first 4 KiB, if it is a text codec."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    m = _META.search(body[:4096])
    if m:
        return text_codec(m.group(1).decode("ascii", "replace"))
    return None


def detect_charset(body: bytes, declared: str | None = None) -> str:
    """Pick the charset for ``body``: declared, sniffed, detected, or UTF-8."""
    codec = text_codec(declared)
    if codec:
        return codec
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    if is_utf8_multibyte(body):
        return "utf-8"  # whatever a stale <meta> says
    codec = sniff_charset(body)
    if codec:
        return codec
    if body[:DETECT_SAMPLE_BYTES].isascii():
        return "utf-8"
    return text_codec(sniffed_charset(body)) or "utf-8"


def decode(body: bytes, charset: str | None = None) -> tuple[str, str]:
    """Decode ``body``; returns ``(text, codec_used)``. Never raises on bad bytes."""
    codec = detect_charset(body, charset)
    if codec == "utf-8" and body.startswith(codecs.BOM_UTF8):
        codec = "utf-8-sig"
    try:
        text = body.decode(codec, errors="replace")
    except (LookupError, UnicodeError):
        text, codec = body.decode("utf-8", errors="replace"), "utf-8"
    return text, codec


def utf8_of(body: bytes, charset: str | None = None) -> bytes:
    """``body`` as UTF-8 bytes: ``decode(body, charset)``'s text, encoded (invalid bytes
    replaced). Valid UTF-8 without a BOM is its own encoding, returned as is: an ASCII body
    is not decoded at all (``isascii`` runs in C at memory speed), other UTF-8 is only
    checked (a page costs its decoding, not also a text copy and a search of it)."""
    if not body.startswith(codecs.BOM_UTF8) and detect_charset(body, charset) == "utf-8":
        if body.isascii():
            return body
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return body
    text, _codec = decode(body, charset)
    return text.encode("utf-8", errors="replace")
