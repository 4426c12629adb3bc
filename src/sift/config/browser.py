"""``[browser]``: the guarded headless browser's binary, page budgets and network namespace."""

from __future__ import annotations

from dataclasses import dataclass, field

from sift.config.values import doc
from sift.errors import ConfigError


@dataclass(frozen=True)
class BrowserSettings:
    """The guarded headless browser (docs/browser.md); per-class limits are in [classes]."""

    enabled: bool = field(
        default=True,
        metadata=doc("Use a browser when Chromium is installed (false: engine http only)."),
    )
    executable: str = field(
        default="/usr/lib/chromium/chromium-headless-shell",
        metadata=doc("Chromium binary (Debian package chromium-headless-shell)."),
    )
    max_pages: int = field(
        default=4, metadata=doc("Browser pages open at once across all callers.")
    )
    max_subresources: int = field(
        default=300,
        metadata=doc("Requests and tunnels one page may open; past it the page fails."),
    )
    max_page_bytes: int = field(
        default=32 << 20,
        metadata=doc("Bytes one page may move through the guard proxy.", size=True),
    )
    max_dom_bytes: int = field(
        default=8 << 20,
        metadata=doc("Largest rendered DOM (serialized HTML) handed to rendering.", size=True),
    )
    page_heap_bytes: int = field(
        default=256 << 20,
        metadata=doc("JavaScript heap per page; a page over it crashes its tab.", size=True),
    )
    page_memory_bytes: int = field(
        default=768 << 20,
        metadata=doc(
            "Memory one page may use in all (its renderer process's resident memory: "
            "ArrayBuffers, WebAssembly, DOM, JavaScript heap); past it the page is stopped "
            "within 0.1 s (browser_memory_exceeded).",
            size=True,
        ),
    )
    page_cpu_s: float = field(
        default=5.0,
        metadata=doc(
            "CPU time one page may use (its renderer process, all threads); past it the "
            "page is stopped (browser_cpu_exceeded)."
        ),
    )
    page_nice: int = field(
        default=10,
        metadata=doc(
            "Scheduling priority of pages' renderer processes (nice, 0-19): under "
            "contention sift's own work comes first and pages share what is left."
        ),
    )
    block_media: bool = field(
        default=True,
        metadata=doc("Do not load images, fonts, audio and video (they do not change the text)."),
    )
    network_quiet_s: float = field(
        default=0.5,
        metadata=doc("After DOMContentLoaded, wait until the page's network is this long idle."),
    )
    netns: str = field(
        default="auto",
        metadata=doc(
            "Run Chromium in a network namespace reaching only the guard proxy: auto "
            "(where the machine allows it), on (fail otherwise) or off."
        ),
    )


def check_browser(b: BrowserSettings, where: str) -> None:
    for fname in ("max_pages", "max_subresources", "max_page_bytes", "max_dom_bytes"):
        if getattr(b, fname) < 1:
            raise ConfigError(f"{where}: browser.{fname}: must be positive")
    if b.page_heap_bytes < 16 << 20:
        raise ConfigError(f"{where}: browser.page_heap_bytes: must be at least 16MiB")
    if b.page_memory_bytes < 64 << 20:
        raise ConfigError(f"{where}: browser.page_memory_bytes: must be at least 64MiB")
    if not b.page_cpu_s > 0:
        raise ConfigError(f"{where}: browser.page_cpu_s: must be above 0")
    if not 0 <= b.page_nice <= 19:
        raise ConfigError(f"{where}: browser.page_nice: use 0 to 19")
    if b.network_quiet_s < 0:
        raise ConfigError(f"{where}: browser.network_quiet_s: must be 0 or more")
    if b.netns not in ("auto", "on", "off"):
        raise ConfigError(f"{where}: browser.netns: use auto, on or off")
