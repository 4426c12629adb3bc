"""Screenshots: a picture of a loaded page, bounded by its class's pixels and bytes.

A screenshot is one step of a browser load, taken after the page is loaded (and after
anything else done to it) and after its DOM is read (``loader.py``). It goes through
DevTools' ``Page.captureScreenshot`` on the page's own session: PNG, JPEG and WebP are all
encoded by Chromium itself (Playwright's ``page.screenshot`` offers only PNG and JPEG), at
device scale 1, of the viewport's width.

Bounds, in order:

1. the viewport (``width`` × ``height``) must fit the class's ``screenshot_max_pixels``
   (checked before anything is loaded, ``options.py``) and each side ``MAX_SIDE``;
2. a full page is shot down to the height those pixels allow (and ``MAX_SIDE``, the
   largest capture Chromium draws correctly); a taller page is cut there (``cut``);
3. an image over ``screenshot_max_bytes`` is shot again, shorter in proportion to its
   excess (``cut``), at most ``BYTE_CUTS`` times; still over, it is ``TooLarge``.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

from sift.errors import TooLarge

if TYPE_CHECKING:
    from playwright.async_api import CDPSession, ViewportSize

ShotType = Literal["png", "jpeg", "webp"]
SHOT_TYPES: Final[tuple[str, ...]] = get_args(ShotType)
MEDIA_TYPES: Final[dict[str, str]] = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "webp": "image/webp",
}
# Chromium's largest texture: a capture taller or wider than this comes out wrong.
MAX_SIDE: Final = 16384
DEFAULT_WIDTH: Final = 1280
DEFAULT_HEIGHT: Final = 720
DEFAULT_QUALITY: Final = 80
# Shots again, shorter, of an image over the byte cap; then it is refused.
BYTE_CUTS: Final = 3
# A re-shot aims this far under the cap (an image's bytes do not shrink exactly with it).
_BYTE_MARGIN: Final = 0.9


@dataclass(frozen=True)
class ShotSpec:
    """What a caller asks for: the image type, viewport or whole page, the viewport's size
    and (JPEG and WebP only) the quality, 1-100."""

    type: ShotType = "png"
    full_page: bool = False
    width: int = DEFAULT_WIDTH
    height: int = DEFAULT_HEIGHT
    quality: int | None = None

    @property
    def pixels(self) -> int:
        return self.width * self.height

    @property
    def viewport(self) -> ViewportSize:
        return {"width": self.width, "height": self.height}

    def key(self) -> str:
        """A short name of the spec, for cache keys."""
        q = f"-q{self.quality}" if self.quality is not None else ""
        return f"{self.type}{'-full' if self.full_page else ''}-{self.width}x{self.height}{q}"


@dataclass(frozen=True)
class ShotOrder:
    """A spec with the bounds of the caller's class."""

    spec: ShotSpec
    max_pixels: int
    max_bytes: int

    def key(self) -> str:
        return f"{self.spec.key()}-{self.max_pixels}px-{self.max_bytes}b"


@dataclass(frozen=True)
class Shot:
    """One encoded image; ``page_height`` is the page's (or the viewport's) height, ``cut``
    whether the image ends above it."""

    data: bytes
    type: ShotType
    width: int
    height: int
    page_height: int
    cut: bool


async def capture(session: CDPSession, order: ShotOrder) -> Shot:
    """Shoot the page behind ``session``; see the module docstring for the bounds."""
    spec = order.spec
    width = spec.width
    page_height = spec.height
    if spec.full_page:
        metrics = await session.send("Page.getLayoutMetrics")
        page_height = max(1, math.ceil(metrics["cssContentSize"]["height"]))
    height = min(page_height, order.max_pixels // width, MAX_SIDE)
    for _ in range(BYTE_CUTS + 1):
        data = await _shoot(session, spec, width, height)
        if len(data) <= order.max_bytes:
            return Shot(data, spec.type, width, height, page_height, height < page_height)
        height = math.floor(height * order.max_bytes / len(data) * _BYTE_MARGIN)
        if height < 1:
            break
    raise TooLarge(
        f"The screenshot does not fit in {order.max_bytes} bytes, the limit of your class "
        "(classes.<class>.screenshot_max_bytes).",
        hint="Ask for a smaller viewport, type jpeg or webp with a lower quality, or "
        "full_page false.",
    )


async def _shoot(session: CDPSession, spec: ShotSpec, width: int, height: int) -> bytes:
    params: dict[str, Any] = {
        "format": spec.type,
        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        "captureBeyondViewport": height > spec.height,
    }
    if spec.type != "png":
        params["quality"] = spec.quality if spec.quality is not None else DEFAULT_QUALITY
    answer = await session.send("Page.captureScreenshot", params)
    return base64.b64decode(answer["data"])
