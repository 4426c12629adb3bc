"""What a render is asked for (``RenderOptions``) and what it gives back (``Rendered``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from sift.errors import BadRequest

Format = Literal["markdown", "text", "html", "raw"]
FORMATS: tuple[str, ...] = get_args(Format)

# Bump whenever any render's output can change, so cached renders are not reused.
RENDER_VERSION = 8

Warning = Literal[
    "thin_content",
    "js_required_suspected",
    "selector_no_match",
    "truncated_input",
    "render_budget_exceeded",
]


@dataclass(frozen=True)
class RenderOptions:
    """How to render a body.

    ``format``: ``markdown`` (default), ``text``, ``html`` (cleaned main-content HTML) or
    ``raw`` (the decoded body as is). ``main_content`` keeps only the article; false renders
    the whole visible page. ``selector`` (CSS) narrows the page to the matching elements
    before anything else; ``exclude`` (CSS selectors) removes elements. ``links`` fills
    ``Rendered.links`` with the rendered links, absolute.

    Limits: ``max_bytes`` bounds the rendered output (UTF-8 bytes; rendering stops past it
    and says so with the ``render_budget_exceeded`` warning; None: unbounded) and is part of
    the cache key. ``timeout_s`` is the wall-clock limit the render pool enforces; it is not
    part of the cache key, since a render that finishes is the same whatever its limit.
    """

    format: Format = "markdown"
    main_content: bool = True
    selector: str | None = None
    exclude: tuple[str, ...] = ()
    links: bool = False
    max_bytes: int | None = None
    timeout_s: float | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise BadRequest(
                f"unknown format {self.format!r}",
                hint=f"Use one of: {', '.join(FORMATS)}.",
            )
        raw: object = self.exclude
        if isinstance(raw, str):
            object.__setattr__(self, "exclude", (raw,))  # one selector given bare
        elif not isinstance(raw, tuple):
            object.__setattr__(self, "exclude", tuple(raw))  # type: ignore[arg-type]

    def cache_key(self) -> str:
        """A stable string naming this render; changes with RENDER_VERSION."""
        fields: list[Any] = [
            self.format,
            self.main_content,
            self.selector,
            list(self.exclude),
            self.links,
        ]
        if self.max_bytes is not None:
            fields.append(self.max_bytes)
        payload = json.dumps(
            fields,
            separators=(",", ":"),
            ensure_ascii=True,
        )
        return f"r{RENDER_VERSION}:{payload}"


@dataclass(frozen=True)
class Rendered:
    """The result of a render. ``links`` is filled only when ``RenderOptions.links`` is set.

    ``page_type`` (HTML with ``main_content`` only, else None): ``article``, ``forum``,
    ``product``, ``listing``, ``collection``, ``service``, ``documentation`` or ``other``.
    ``metadata`` (HTML only): what the page declares about itself (``render.metadata``);
    absent fields are omitted. ``js_shell`` (HTML only): why the page's visible text needs
    JavaScript (a reason code of ``render.jsshell.REASONS``; then ``warnings`` holds
    ``js_required_suspected``), or None.
    """

    title: str | None
    lang: str | None
    content: str
    links: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    extractor: str = "sift"
    page_type: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    js_shell: str | None = None

    def to_json(self) -> bytes:
        """Serialise for the render cache; ``from_json`` is its exact inverse."""
        return json.dumps(
            {
                "v": RENDER_VERSION,
                "title": self.title,
                "lang": self.lang,
                "content": self.content,
                "links": self.links,
                "warnings": self.warnings,
                "extractor": self.extractor,
                "page_type": self.page_type,
                "metadata": self.metadata,
                "js_shell": self.js_shell,
            },
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> Rendered:
        """Load what ``to_json`` wrote. Raises ValueError on anything else."""
        obj: Any = json.loads(data)
        if not isinstance(obj, dict) or not isinstance(obj.get("content"), str):
            raise ValueError("not a serialised Rendered")
        return cls(
            title=obj.get("title"),
            lang=obj.get("lang"),
            content=obj["content"],
            links=[dict(x) for x in obj.get("links") or []],
            warnings=[str(w) for w in obj.get("warnings") or []],
            extractor=str(obj.get("extractor") or "sift"),
            page_type=obj.get("page_type"),
            metadata=dict(obj.get("metadata") or {}),
            js_shell=obj.get("js_shell"),
        )
