"""Bounded content decoding: gzip, deflate, brotli and zstd, one layer at most.

Every decoder takes an output budget and never materialises more than ``budget + 1`` bytes
in total (the extra byte is how the caller learns the body is over its limit), however small
the compressed input: zlib gets ``max_length``, brotli ``output_buffer_limit``, and zstd
writes through a sink that stops the decompressor as soon as the budget is spent. zstd
frames may not ask for a window above 8 MiB (RFC 9659), so a frame header cannot make the
decoder allocate more than that either.
"""

from __future__ import annotations

import zlib
from typing import Protocol

import brotli
import zstandard

from sift.errors import UnsupportedEncoding, UpstreamError

ZSTD_MAX_WINDOW_BYTES = 8 << 20
SUPPORTED = ("gzip", "deflate", "br", "zstd")
_ALIASES = {"x-gzip": "gzip"}


class Decoder(Protocol):
    """Feeds wire bytes in, gets decoded bytes out, within a fixed total output budget."""

    def feed(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


def parse_content_encoding(header: str | None) -> str | None:
    """The one coding named by ``Content-Encoding`` (``None`` for identity).

    Raises ``UnsupportedEncoding`` for stacked codings (``gzip, br``) and unknown ones.
    """
    if not header:
        return None
    codings = [c.strip().lower() for c in header.split(",")]
    codings = [_ALIASES.get(c, c) for c in codings if c and c != "identity"]
    if not codings:
        return None
    if len(codings) > 1:
        raise UnsupportedEncoding(
            f"The upstream stacked content encodings ({header!r}); sift decodes one at most."
        )
    if codings[0] not in SUPPORTED:
        raise UnsupportedEncoding(f"The upstream used an unsupported content encoding {header!r}.")
    return codings[0]


def make_decoder(coding: str | None, max_output_bytes: int) -> Decoder:
    """A decoder for ``coding`` (from ``parse_content_encoding``) with a total output budget."""
    if coding is None:
        return _Identity(max_output_bytes)
    if coding == "gzip":
        return _Zlib(max_output_bytes, wbits=16 + zlib.MAX_WBITS, coding=coding)
    if coding == "deflate":
        return _Zlib(max_output_bytes, wbits=zlib.MAX_WBITS, coding=coding)
    if coding == "br":
        return _Brotli(max_output_bytes)
    if coding == "zstd":
        return _Zstd(max_output_bytes)
    raise UnsupportedEncoding(f"Unsupported content encoding {coding!r}.")


def _corrupt(coding: str) -> UpstreamError:
    return UpstreamError(f"The upstream's {coding} body is corrupt and cannot be decoded.")


class _Budget:
    def __init__(self, max_output_bytes: int) -> None:
        self.max_output_bytes = max_output_bytes
        self.produced = 0

    @property
    def room(self) -> int:
        """How many more bytes may be produced, counting the one overflow byte."""
        return max(0, self.max_output_bytes + 1 - self.produced)


class _Identity(_Budget):
    def feed(self, data: bytes) -> bytes:
        out = data[: self.room]
        self.produced += len(out)
        return out

    def flush(self) -> bytes:
        return b""


class _Zlib(_Budget):
    """gzip (several members allowed) or deflate (zlib-wrapped, or raw as some servers send)."""

    def __init__(self, max_output_bytes: int, *, wbits: int, coding: str) -> None:
        super().__init__(max_output_bytes)
        self._wbits = wbits
        self._coding = coding
        self._d = zlib.decompressobj(wbits)
        # deflate: hold the first two bytes until we know whether a zlib header is there.
        self._head: bytes | None = b"" if coding == "deflate" else None
        self._done = False

    def feed(self, data: bytes) -> bytes:
        if self._head is not None:
            data = self._head + data
            if len(data) < 2:
                self._head = data
                return b""
            self._head = None
            if not _is_zlib_header(data):
                # "deflate" without the zlib wrapper: common enough to accept.
                self._wbits = -zlib.MAX_WBITS
                self._d = zlib.decompressobj(self._wbits)
        parts: list[bytes] = []
        try:
            while data and self.room > 0 and not self._done:
                if self._d.eof:
                    # Another gzip member may follow; anything else is trailing padding.
                    if self._coding != "gzip" or not data.startswith(b"\x1f\x8b"):
                        self._done = True
                        break
                    self._d = zlib.decompressobj(self._wbits)
                out = self._d.decompress(data, self.room)
                self.produced += len(out)
                parts.append(out)
                data = self._d.unused_data if self._d.eof else self._d.unconsumed_tail
        except zlib.error as exc:
            raise _corrupt(self._coding) from exc
        return b"".join(parts)

    def flush(self) -> bytes:
        if self._head:
            raise _corrupt(self._coding)
        if self.room <= 0 or self._done:
            return b""
        try:
            out = self._d.flush(self.room)
        except zlib.error as exc:
            raise _corrupt(self._coding) from exc
        self.produced += len(out)
        return out


def _is_zlib_header(data: bytes) -> bool:
    """RFC 1950: method 8 (deflate), window <= 32 KiB, and a header checksum."""
    cmf, flg = data[0], data[1]
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0


class _Brotli(_Budget):
    def __init__(self, max_output_bytes: int) -> None:
        super().__init__(max_output_bytes)
        self._d = brotli.Decompressor()

    def feed(self, data: bytes) -> bytes:
        parts: list[bytes] = []
        try:
            if self._d.is_finished() or self.room <= 0:
                return b""
            out = self._d.process(data, output_buffer_limit=self.room)
            while True:
                out = out[: self.room]
                self.produced += len(out)
                parts.append(out)
                if self.room <= 0 or self._d.can_accept_more_data() or not out:
                    break
                out = self._d.process(b"", output_buffer_limit=self.room)
        except brotli.error as exc:
            raise _corrupt("br") from exc
        return b"".join(parts)

    def flush(self) -> bytes:
        return b""


class _Full(Exception):
    """Raised inside the zstd sink to stop decompression once the budget is spent."""


class _Sink:
    def __init__(self, budget: _Budget) -> None:
        self._budget = budget
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        take = data[: self._budget.room]
        self.parts.append(take)
        self._budget.produced += len(take)
        if self._budget.room <= 0:
            raise _Full
        return len(data)


class _Zstd(_Budget):
    def __init__(self, max_output_bytes: int) -> None:
        super().__init__(max_output_bytes)
        self._sink = _Sink(self)
        dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW_BYTES)
        # The sink only needs write(); zstandard's stubs ask for a whole IO[bytes].
        self._w = dctx.stream_writer(self._sink, write_size=64 << 10, closefd=False)  # type: ignore[arg-type]

    def feed(self, data: bytes) -> bytes:
        if self.room > 0:
            try:
                self._w.write(data)
            except _Full:
                pass
            except zstandard.ZstdError as exc:
                raise _corrupt("zstd") from exc
        out = b"".join(self._sink.parts)
        self._sink.parts.clear()
        return out

    def flush(self) -> bytes:
        return b""
