"""Bounded decoders and the charset whitelist: unit tests on bytes, no sockets."""

from __future__ import annotations

import os

import pytest

from sift.errors import UnsupportedEncoding, UpstreamError
from sift.fetch.charset import codec_for, detect_charset
from sift.fetch.decode import make_decoder, parse_content_encoding
from upstream import brotli_bomb, deflate_bomb, encode, gzip_bomb, zstd_bomb

BOMBS = {"gzip": gzip_bomb, "deflate": deflate_bomb, "br": brotli_bomb, "zstd": zstd_bomb}


@pytest.mark.parametrize("coding", sorted(BOMBS))
@pytest.mark.parametrize("limit", [10 << 10, 1 << 20])
def test_a_200_mib_bomb_never_yields_more_than_the_limit(coding: str, limit: int) -> None:
    bomb = BOMBS[coding]()
    decoder = make_decoder(coding, limit)
    total = 0
    largest = 0
    for i in range(0, len(bomb), 64 << 10):
        out = decoder.feed(bomb[i : i + (64 << 10)])
        largest = max(largest, len(out))
        total += len(out)
        assert largest <= limit + 1
    total += len(decoder.flush())
    # Exactly one byte past the limit: enough to know it is too large, never more.
    assert total == limit + 1


@pytest.mark.parametrize("coding", ["gzip", "deflate", "deflate-raw", "br", "zstd"])
@pytest.mark.parametrize("step", [1, 7, 4096])
def test_streamed_round_trip(coding: str, step: int) -> None:
    body = os.urandom(3000) + b"repetitive " * 2000
    wire = encode(body, coding)
    decoder = make_decoder("deflate" if coding == "deflate-raw" else coding, len(body))
    out = b"".join(decoder.feed(wire[i : i + step]) for i in range(0, len(wire), step))
    assert out + decoder.flush() == body


def test_gzip_members_and_trailing_padding() -> None:
    wire = encode(b"one ", "gzip") + encode(b"two", "gzip") + b"\x00" * 16
    decoder = make_decoder("gzip", 100)
    assert decoder.feed(wire) + decoder.flush() == b"one two"


def test_identity_is_bounded_too() -> None:
    decoder = make_decoder(None, 5)
    assert decoder.feed(b"abc") + decoder.feed(b"defgh") == b"abcdef"
    assert decoder.feed(b"more") == b""


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_corrupt_input_is_an_upstream_error(coding: str) -> None:
    decoder = make_decoder(coding, 1 << 20)
    with pytest.raises(UpstreamError) as info:
        decoder.feed(b"\x1f\x8b\x08\x00" + b"\xff" * 64 if coding == "gzip" else b"\xff" * 64)
        decoder.flush()
    assert info.value.code == "upstream_error"


def test_zstd_window_is_capped() -> None:
    import zstandard

    # A streamed frame (no content size) announcing a 128 MiB window: refused up front.
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=27)
    c = zstandard.ZstdCompressor(compression_params=params).compressobj()
    wire = c.compress(os.urandom(1 << 16)) + c.flush()
    decoder = make_decoder("zstd", 1 << 20)
    with pytest.raises(UpstreamError):
        decoder.feed(wire)


@pytest.mark.parametrize(("header", "coding"), [
    (None, None), ("", None), ("identity", None), ("gzip", "gzip"), ("x-gzip", "gzip"),
    (" GZIP ", "gzip"), ("deflate", "deflate"), ("br", "br"), ("zstd", "zstd"),
    ("identity, gzip", "gzip"),
])  # fmt: skip
def test_content_encoding_header(header: str | None, coding: str | None) -> None:
    assert parse_content_encoding(header) == coding


@pytest.mark.parametrize("header", ["gzip, br", "gzip,gzip", "compress", "sdch", "aes128gcm"])
def test_unsupported_content_encoding(header: str) -> None:
    with pytest.raises(UnsupportedEncoding):
        parse_content_encoding(header)


@pytest.mark.parametrize(("label", "codec"), [
    ("utf-8", "utf-8"), ("UTF8", "utf-8"), ('"utf-8"', "utf-8"), ("latin1", "cp1252"),
    ("iso-8859-1", "cp1252"), ("us-ascii", "cp1252"), ("windows-1251", "cp1251"),
    ("koi8-r", "koi8-r"), ("shift_jis", "cp932"), ("euc-jp", "euc_jp"), ("gb2312", "gbk"),
    ("big5", "big5hkscs"), ("utf-16le", "utf-16-le"), ("iso-8859-15", "iso8859-15"),
    ("zlib", None), ("zlib_codec", None), ("rot13", None), ("base64", None), ("hex", None),
    ("bz2", None), ("uu", None), ("quopri", None), ("unicode_escape", None), ("idna", None),
    ("punycode", None), ("utf-7", None), ("undefined", None), ("nonsense", None), ("", None),
    (None, None),
])  # fmt: skip
def test_codec_whitelist(label: str | None, codec: str | None) -> None:
    assert codec_for(label) == codec


@pytest.mark.parametrize(("body", "content_type", "charset"), [
    (b"<p>x</p>", "text/html; charset=zlib", "utf-8"),
    (b"\xef\xbb\xbf<p>x</p>", "text/html", "utf-8-sig"),
    (b"\xef\xbb\xbf<p>x</p>", "text/html; charset=utf-8", "utf-8-sig"),
    (b"\xff\xfe<\x00p\x00>\x00", "text/html", "utf-16"),
    (b'<?xml version="1.0" encoding="ISO-8859-2"?><r/>', "application/xml", "iso8859-2"),
    (b'<meta charset="utf-16"><p>x</p>', "text/html", "utf-8"),
    (b"<p>x</p>", "text/plain; charset=koi8-r", "koi8-r"),
    (b"{}", "application/json", "utf-8"),
    (b"%PDF-1.7", "application/pdf", None),
    (b"\x89PNG", "image/png", None),
    (b"", "text/html", None),
])  # fmt: skip
def test_detect_charset(body: bytes, content_type: str, charset: str | None) -> None:
    assert detect_charset(body, content_type) == charset
