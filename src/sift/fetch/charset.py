"""Which text codec a body is in: header, then BOM, then valid multi-byte UTF-8, then
``<meta>``/XML declaration, then windows-1252 for unlabelled accented Latin text, then
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


# Runs of 3+ non-ASCII bytes: words written in a non-Latin script (or multi-byte CJK).
_HIGH_RUN = re.compile(rb"[\x80-\xff]{3,}")
_HIGH = re.compile(rb"[\x80-\xff]")
_HTML_LANG = re.compile(rb"<html[^>]*?\slang\s*=\s*[\"']?([A-Za-z]{2,3})", re.IGNORECASE)
# Bytes windows-1252 leaves undefined: a body holding them is in another code page.
_CP1252_UNDEFINED = re.compile(rb"[\x81\x8d\x8f\x90\x9d]")
# Languages written in Latin script whose legacy code page is not windows-1252.
_NOT_CP1252_LANGS = frozenset(
    {"pl", "cs", "sk", "hu", "ro", "hr", "sl", "bs", "sr", "sq", "lt", "lv", "et", "tr", "az", "vi"}
)


def is_utf8_multibyte(body: bytes) -> bool:
    """True when the sample holds non-ASCII bytes and all of it is valid UTF-8.

    Random legacy-code-page text is almost never valid UTF-8 once it has a non-ASCII byte, so
    such a body is UTF-8 whatever a (stale, copied-in) ``<meta>`` claims.
    """
    sample = body[:SNIFF_BYTES]
    if sample.isascii():
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Only a sequence cut by the sample's end is forgiven.
        return len(sample) == SNIFF_BYTES and exc.start >= len(sample) - 3
    return True


def is_western_single_byte(body: bytes) -> bool:
    """True when non-ASCII bytes are sparse, isolated letters inside ASCII words.

    That is how French, German, Spanish … look in a legacy code page ("tr\xe8s"); Cyrillic,
    Greek, Hebrew, Arabic and CJK words are runs of non-ASCII bytes. Browsers decode such
    unlabelled pages as windows-1252, and so does sift, rather than trust a statistical
    guess that may pick a Baltic or Central European code page for a handful of accents.
    """
    sample = body[:SNIFF_BYTES]
    high = len(_HIGH.findall(sample))
    if not high or _CP1252_UNDEFINED.search(sample):
        return False
    lang = _HTML_LANG.search(sample[:4096])
    if lang and lang.group(1).decode("ascii").lower() in _NOT_CP1252_LANGS:
        return False
    in_runs = sum(len(m) for m in _HIGH_RUN.findall(sample))
    return in_runs <= 0.1 * high


def sniffed_charset(body: bytes) -> str | None:
    """The charset of an unlabelled body: UTF-8, windows-1252 for sparse accented Latin
    text, else charset-normalizer's guess."""
    if is_utf8_multibyte(body):
        return "utf-8"
    if is_western_single_byte(body):
        return "cp1252"
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
        or ("utf-8" if is_utf8_multibyte(body) else None)  # beats a stale <meta>
        or meta_charset(body)
        or sniffed_charset(body)  # the slow one: only when nothing else spoke
    )
    if found == "utf-8" and body.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    return found
