"""Which text codec a body is in: header, then BOM, then ``<meta>``/XML declaration, then
charset-normalizer — and only ever a codec from the whitelist below.

Python's codec registry also holds bytes-to-bytes and text-to-text codecs (``zlib``,
``base64``, ``rot13``, ``uu``, ``unicode_escape`` …). A ``charset=zlib`` header must never run
one of those, so every label is looked up, canonicalised, and kept only if the canonical name
is a text encoding listed here. Labels are then folded as browsers fold them (WHATWG
Encoding): ``iso-8859-1`` and ``us-ascii`` decode as ``cp1252``, ``shift_jis`` as ``cp932`` …
UTF-7 is left out on purpose (it lets markup hide from filters).
"""

from __future__ import annotations

import codecs
import functools
import re

import charset_normalizer

TEXT_CODECS = frozenset(
    {
        "utf-8",
        "utf-8-sig",
        "utf-16",
        "utf-16-le",
        "utf-16-be",
        "utf-32",
        "utf-32-le",
        "utf-32-be",
        "ascii",
        *(f"iso8859-{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16)),
        *(f"cp{n}" for n in range(1250, 1259)),
        "cp874",
        "cp866",
        "koi8-r",
        "koi8-u",
        "mac-roman",
        "mac-cyrillic",
        "shift_jis",
        "cp932",
        "euc_jp",
        "iso2022_jp",
        "euc_kr",
        "cp949",
        "gb2312",
        "gbk",
        "gb18030",
        "big5",
        "big5hkscs",
        "cp950",
        "tis-620",
    }
)

# Browser folding (WHATWG Encoding "labels"): decode with the superset browsers use.
_FOLD = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "gb2312": "gbk",
    "big5": "big5hkscs",
}

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_CT_CHARSET = re.compile(r";\s*charset\s*=\s*[\"']?([^\"';\s]+)", re.IGNORECASE)
_META = re.compile(rb"<meta[^>]+?charset\s*=\s*[\"']?\s*([A-Za-z0-9_:.\-]+)", re.IGNORECASE)
_XML_DECL = re.compile(rb"^\s*<\?xml[^>]+encoding\s*=\s*[\"']([A-Za-z0-9_.\-]+)[\"']")
_TEXT_TYPES = (
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
)
META_SCAN_BYTES = 1024
SNIFF_BYTES = 64 << 10


@functools.lru_cache(maxsize=256)
def codec_for(label: str | None) -> str | None:
    """The whitelisted (and browser-folded) codec name for a charset label, else ``None``."""
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip().strip("\"'").lower()).name
    except (LookupError, ValueError):
        return None
    if name not in TEXT_CODECS:
        return None
    return _FOLD.get(name, name)


def is_textual(content_type: str) -> bool:
    """Whether a body of this type is text a charset applies to (empty type: maybe)."""
    media = content_type.partition(";")[0].strip().lower()
    return (
        not media
        or media.startswith("text/")
        or media.endswith(("+xml", "+json"))
        or media in _TEXT_TYPES
    )


def header_charset(content_type: str) -> str | None:
    m = _CT_CHARSET.search(content_type)
    return m.group(1) if m else None


def bom_charset(body: bytes) -> str | None:
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    return None


def meta_charset(body: bytes) -> str | None:
    """The charset an HTML ``<meta>`` or XML declaration names in the first 1024 bytes."""
    head = body[:META_SCAN_BYTES]
    m = _XML_DECL.search(head) or _META.search(head)
    if m is None:
        return None
    label = m.group(1).decode("ascii", "replace")
    codec = codec_for(label)
    # A document that could announce UTF-16 in ASCII bytes is not UTF-16 (WHATWG).
    if codec is not None and codec.startswith("utf-16"):
        return "utf-8"
    return codec


def sniffed_charset(body: bytes) -> str | None:
    best = charset_normalizer.from_bytes(body[:SNIFF_BYTES]).best()
    if best is None:
        return None
    codec = codec_for(best.encoding)
    # Pure ASCII so far: UTF-8 decodes it the same and also whatever follows the sample.
    return "utf-8" if codec == "cp1252" and best.encoding == "ascii" else codec


def detect_charset(body: bytes, content_type: str) -> str | None:
    """The codec to decode ``body`` with, or ``None`` for non-text or undecidable bodies."""
    if not is_textual(content_type) or not body:
        return None
    found = (
        codec_for(header_charset(content_type))
        or bom_charset(body)
        or meta_charset(body)
        or sniffed_charset(body)  # the slow one: only when nothing else spoke
    )
    if found == "utf-8" and body.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    return found
