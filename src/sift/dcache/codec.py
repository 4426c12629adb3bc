"""How cached bytes are stored: zstd when it pays, as-is otherwise.

Measured on the 181 pages of the extraction benchmark (bench/dcache.py, docs/dcache.md): zstd
level 3 shrinks HTML about 5x at ~200 MB/s and decompresses at ~600 MB/s, so a cache hit pays
well under a millisecond for a 5x larger effective cache. Levels above 3 gain a few percent for
3x or more CPU.
"""

from __future__ import annotations

from typing import Final, Literal

import zstandard

Codec = Literal["identity", "zstd"]

DEFAULT_LEVEL: Final = 3
# Below this size the zstd frame header and the call overhead eat the gain.
MIN_COMPRESS_BYTES: Final = 256
# Keep the compressed form only when it saves at least this fraction (already-compressed
# images, PDFs and archives do not shrink; storing them as-is keeps reads free).
MIN_SAVING: Final = 0.10


class Codecs:
    """Compressor state for one DB (zstandard's objects are not shared across threads)."""

    def __init__(self, level: int = DEFAULT_LEVEL) -> None:
        """``level`` 0 turns compression off; otherwise a zstd level (1–22)."""
        self.level = level
        self._c = zstandard.ZstdCompressor(level=level) if level > 0 else None
        self._d = zstandard.ZstdDecompressor()

    def encode(self, data: bytes) -> tuple[Codec, bytes]:
        """The codec and the bytes to store for ``data``."""
        if self._c is None or len(data) < MIN_COMPRESS_BYTES:
            return "identity", data
        packed: bytes = self._c.compress(data)
        if len(packed) <= len(data) * (1 - MIN_SAVING):
            return "zstd", packed
        return "identity", data

    def decode(self, codec: str, stored: bytes) -> bytes:
        """The original bytes back. Frames written by ``encode`` carry their content size."""
        if codec == "zstd":
            out: bytes = self._d.decompress(stored)
            return out
        return stored
