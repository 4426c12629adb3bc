"""``[classes]``: what each caller class (fleet, restricted) may do, and its defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sift.config.values import check_cidr, check_positive, doc
from sift.errors import ConfigError

CallerClass = Literal["fleet", "restricted"]
CALLER_CLASSES: tuple[CallerClass, ...] = ("fleet", "restricted")
# The most page actions any class may allow per request (docs/browser.md#page-actions).
MAX_ACTION_STEPS = 100
# Screenshots stay well below what image libraries treat as a decompression bomb (Pillow
# warns past 89 million pixels): the MCP front end scales them (sift/mcp/image.py).
MAX_SCREENSHOT_PIXELS = 64 << 20


@dataclass(frozen=True)
class ClassSettings:
    """What one caller class may do. Defaults differ per class: see ``ClassesSettings``."""

    output_cap: int = field(
        default=64 << 10,
        metadata=doc(
            "Largest content slice returned per request (max_bytes is clamped to it).", size=True
        ),
    )
    live_jobs: int = field(default=2, metadata=doc("Queued or running batch jobs per caller."))
    max_targets: int = field(default=500, metadata=doc("Targets per batch job."))
    allow_private: bool = field(
        default=False,
        metadata=doc(
            "May reach private, loopback and link-local addresses (fleet only; "
            "an error under classes.restricted)."
        ),
    )
    private_cidrs: tuple[str, ...] = field(
        default=(),
        metadata=doc("With allow_private: only these private ranges (empty = all of them)."),
    )
    extra_ports: tuple[int, ...] = field(
        default=(),
        metadata=doc("Restricted: ports allowed besides 80 and 443. Fleet may use any port."),
    )
    max_download_bytes: int = field(
        default=8 << 20,
        metadata=doc("Largest upstream body (after decompression) sift will read.", size=True),
    )
    timeout_s: float = field(
        default=20.0,
        metadata=doc(
            "Total deadline for one fetch, all redirects included (timeout_s is clamped to it)."
        ),
    )
    connect_timeout_s: float = field(
        default=10.0, metadata=doc("Deadline for one TCP+TLS connect.")
    )
    max_redirects: int = field(default=5, metadata=doc("Redirect hops followed per fetch."))
    max_links: int = field(
        default=1000,
        metadata=doc(
            "Links returned per response (links=true); they also fit in max_bytes "
            "(warning links_truncated)."
        ),
    )
    max_inflight: int = field(
        default=16,
        metadata=doc(
            "Requests one caller may have in flight at once (/v1/fetch, MCP fetch, "
            "/v1/map, console render); more get 429 rate_limited with Retry-After."
        ),
    )
    browser: bool = field(
        default=True,
        metadata=doc(
            "May use the headless browser (engine browser, and auto for JavaScript pages)."
        ),
    )
    credentials: bool = field(
        default=False,
        metadata=doc(
            "May send its own headers and cookies to the requested URL's origin (the "
            "headers and cookies options; fleet true, restricted false)."
        ),
    )
    browser_pages: int = field(
        default=1, metadata=doc("Browser pages one caller of this class may have open at once.")
    )
    browser_pages_total: int = field(
        default=2,
        metadata=doc("Browser pages all callers of this class together may have open at once."),
    )
    browser_timeout_s: float = field(
        default=15.0,
        metadata=doc(
            "Deadline for one browser page: load, waiting and extraction (also within timeout_s)."
        ),
    )
    max_actions: int = field(
        default=10,
        metadata=doc(
            "Page actions (click, type, press, scroll, wait, wait_for) one browser request "
            "may run, at most 100; 0: this class may not use actions."
        ),
    )
    action_timeout_s: float = field(
        default=5.0,
        metadata=doc(
            "Longest one page action may wait (for its element, or a wait step); every "
            "step also ends within the page's deadline (browser_timeout_s)."
        ),
    )
    screenshot_max_pixels: int = field(
        default=4_194_304,
        metadata=doc(
            "Largest screenshot in pixels (width x height; a viewport over it is refused, a "
            "taller full page is cut to it, warning screenshot_cut); each side is also at "
            "most 16384, and this at most 67108864."
        ),
    )
    screenshot_max_bytes: int = field(
        default=4 << 20,
        metadata=doc(
            "Largest encoded screenshot; a larger image is shot again shorter (warning "
            "screenshot_cut), or refused as too_large.",
            size=True,
        ),
    )
    render_timeout_s: float = field(
        default=10.0,
        metadata=doc(
            "Wall-clock limit of one render; past it the render worker is killed (render_timeout)."
        ),
    )
    max_watches: int = field(
        default=20,
        metadata=doc(
            "Watches one caller may have (POST /v1/watches beyond it: 429 quota_exceeded)."
        ),
    )
    min_interval_s: float = field(
        default=3600.0,
        metadata=doc("Shortest interval (every) a caller's watch may have, in seconds."),
    )
    render_max_bytes: int = field(
        default=4 << 20,
        metadata=doc(
            "Largest rendered output kept per page (at least output_cap); rendering stops "
            "past it with the render_budget_exceeded warning.",
            size=True,
        ),
    )

    @property
    def render_budget_bytes(self) -> int:
        """The render output budget: ``render_max_bytes``, never below the output cap."""
        return max(self.render_max_bytes, self.output_cap)


def _fleet_defaults() -> ClassSettings:
    return ClassSettings(
        output_cap=1 << 20,
        live_jobs=20,
        max_targets=10_000,
        max_download_bytes=16 << 20,
        timeout_s=30.0,
        max_redirects=10,
        max_links=10_000,
        max_inflight=256,
        credentials=True,
        browser_pages=4,
        browser_pages_total=4,
        browser_timeout_s=30.0,
        max_actions=50,
        action_timeout_s=10.0,
        screenshot_max_pixels=16_777_216,
        screenshot_max_bytes=16 << 20,
        render_timeout_s=30.0,
        render_max_bytes=32 << 20,
        max_watches=1000,
        min_interval_s=60.0,
    )


@dataclass(frozen=True)
class ClassesSettings:
    fleet: ClassSettings = field(
        default_factory=_fleet_defaults, metadata=doc("Trusted internal services.")
    )
    restricted: ClassSettings = field(
        default_factory=ClassSettings,
        metadata=doc("Untrusted callers; never reach a non-public address."),
    )

    def get(self, name: CallerClass) -> ClassSettings:
        return self.fleet if name == "fleet" else self.restricted


def check_classes(classes: ClassesSettings, where: str) -> None:
    """Each class's counts, deadlines, private ranges and ports; restricted stays public."""
    if classes.restricted.allow_private:
        raise ConfigError(
            f"{where}: classes.restricted.allow_private: restricted callers never "
            "reach private addresses; remove it or use a fleet caller"
        )
    for cls_name in CALLER_CLASSES:
        c = classes.get(cls_name)
        for fname in (
            "output_cap",
            "live_jobs",
            "max_targets",
            "max_download_bytes",
            "max_redirects",
            "max_inflight",
            "max_links",
            "render_max_bytes",
            "max_watches",
        ):
            if getattr(c, fname) < (0 if fname == "max_redirects" else 1):
                raise ConfigError(f"{where}: classes.{cls_name}.{fname}: must be positive")
        check_positive(
            c,
            ("timeout_s", "connect_timeout_s", "render_timeout_s", "min_interval_s"),
            where,
            f"classes.{cls_name}.",
        )
        for cidr in c.private_cidrs:
            check_cidr(cidr, where, f"classes.{cls_name}.private_cidrs")
        for port in c.extra_ports:
            if not 0 < port < 65536:
                raise ConfigError(f"{where}: classes.{cls_name}.extra_ports: bad port {port}")


def check_class_browsers(classes: ClassesSettings, where: str) -> None:
    """Each class's browser page counts, deadline and page actions (checked after the
    listener's rules)."""
    for cls_name in CALLER_CLASSES:
        check_positive(
            classes.get(cls_name),
            (
                "browser_pages",
                "browser_pages_total",
                "browser_timeout_s",
                "action_timeout_s",
                "screenshot_max_pixels",
                "screenshot_max_bytes",
            ),
            where,
            f"classes.{cls_name}.",
        )
        if not 0 <= classes.get(cls_name).max_actions <= MAX_ACTION_STEPS:
            raise ConfigError(
                f"{where}: classes.{cls_name}.max_actions: must be between 0 and {MAX_ACTION_STEPS}"
            )
        if classes.get(cls_name).screenshot_max_pixels > MAX_SCREENSHOT_PIXELS:
            raise ConfigError(
                f"{where}: classes.{cls_name}.screenshot_max_pixels: at most "
                f"{MAX_SCREENSHOT_PIXELS} (a 8192 x 8192 image)"
            )
