"""Rendering: fetched bytes → clean markdown, text or HTML, and the output cap.

Public surface (the service calls exactly this):

- ``render(body, *, content_type, url, options, charset=None) -> Rendered``
- ``RenderOptions`` (format, main_content, selector, exclude, links; ``cache_key()``)
- ``Rendered`` (title, lang, content, links, warnings, extractor; ``to_json``/``from_json``)
- ``cap(content, offset, max_bytes) -> Slice`` and ``Slice``

See docs/rendering.md for formats, warnings, the extraction algorithm and cap semantics.
"""

from sift.render.cap import Slice, cap
from sift.render.options import RENDER_VERSION, Rendered, RenderOptions
from sift.render.render import render

__all__ = ["RENDER_VERSION", "RenderOptions", "Rendered", "Slice", "cap", "render"]
