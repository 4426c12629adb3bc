"""A screenshot as MCP image content, sized for a vision model.

A model is given the image itself (``ImageContent``), scaled down — never up, aspect kept —
so that its longest side is at most ``VISION_MAX_SIDE`` (1568 px) and its area at most
``VISION_MAX_PIXELS`` (1.15 megapixels). These are Anthropic's published limits for Claude's
vision: an image whose long edge is over 1568 px, or over about 1,600 tokens (tokens ≈
width × height / 750), is scaled down by the model's API before it is looked at, and
images of at most 1.15 megapixels within 1568 px on both sides are recommended
(https://docs.claude.com/en/docs/build-with-claude/vision, "Evaluate image size"). Sending
more costs transfer and context and shows the model nothing more. The stored image is
untouched; the full-size one stays at the envelope's ``screenshot.url``.

Decoding and resizing run on a thread (Pillow), never on the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import io
import math
from typing import Final, NamedTuple

import mcp.types as types
from PIL import Image

from sift.browser.shot import DEFAULT_QUALITY, MEDIA_TYPES

VISION_MAX_SIDE: Final = 1568
VISION_MAX_PIXELS: Final = 1_150_000
_PIL_FORMATS: Final = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}


class Fitted(NamedTuple):
    data: bytes
    width: int
    height: int


def fitted_size(width: int, height: int) -> tuple[int, int]:
    """The size an image of ``width`` × ``height`` is sent at (itself when it fits)."""
    scale = min(
        1.0, VISION_MAX_SIDE / max(width, height), math.sqrt(VISION_MAX_PIXELS / (width * height))
    )
    if scale >= 1.0:
        return width, height
    # The epsilon keeps a side scaled to exactly 1568 from rounding down to 1567.
    return max(1, math.floor(width * scale + 1e-9)), max(1, math.floor(height * scale + 1e-9))


def fit(data: bytes, type_: str, width: int, height: int) -> Fitted:
    """``data`` scaled to ``fitted_size``, re-encoded in its own type (as is if it fits)."""
    size = fitted_size(width, height)
    if size == (width, height):
        return Fitted(data, width, height)
    with Image.open(io.BytesIO(data)) as img:
        small = img.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    out = io.BytesIO()
    if type_ == "png":
        small.save(out, "PNG")
    else:
        small.save(out, _PIL_FORMATS[type_], quality=DEFAULT_QUALITY)
    return Fitted(out.getvalue(), *size)


async def image_content(
    data: bytes, type_: str, width: int, height: int
) -> tuple[types.ImageContent, Fitted]:
    """The MCP image block for a screenshot, and what was sent."""
    fitted = await asyncio.to_thread(fit, data, type_, width, height)
    block = types.ImageContent(
        type="image",
        data=base64.b64encode(fitted.data).decode("ascii"),
        mime_type=MEDIA_TYPES[type_],
    )
    return block, fitted
