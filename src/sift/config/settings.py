"""The whole settings tree: the top-level keys, one field per section, and ``validate``.

Each section (``[cache]``, ``[classes]``, …) lives in its own module with its dataclass,
defaults and rules; ``validate`` runs the rules of every section in one fixed order, so the
first problem reported for a file is always the same one.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from pathlib import Path

from sift import __version__
from sift.config.batch import BatchSettings, check_batch
from sift.config.browser import BrowserSettings, check_browser
from sift.config.cache import CacheSettings
from sift.config.callers import Caller, check_callers
from sift.config.classes import ClassesSettings, check_class_browsers, check_classes
from sift.config.egress import (
    EgressSettings,
    check_dns,
    check_own_addresses,
    check_public_cidrs,
)
from sift.config.history import HistorySettings, check_history
from sift.config.listener import ListenerSettings, check_listener
from sift.config.store import StoreSettings, check_store
from sift.config.values import doc, parse_listen
from sift.config.watch import WatchSettings, check_watch
from sift.config.webhooks import WebhooksSettings, check_webhooks
from sift.errors import ConfigError


@dataclass(frozen=True)
class Settings:
    listen: str = field(
        default="127.0.0.1:8080", metadata=doc("Address the HTTP service binds, HOST:PORT.")
    )
    data_dir: str = field(default="sift-data", metadata=doc("Directory of the database (sift.db)."))
    user_agent: str = field(
        default=f"sift/{__version__} (+https://github.com/sift-fetch/sift)",
        metadata=doc("User-Agent sent upstream; its first token is the one matched in robots.txt."),
    )
    allow_anonymous_public: bool = field(
        default=False,
        metadata=doc("With no callers configured, allow binding a non-loopback address anyway."),
    )
    metrics_require_key: bool = field(
        default=True,
        metadata=doc(
            "With keys configured, GET /metrics answers only a fleet caller's key (else 401); "
            "false opens it. In anonymous mode it is open (to loopback clients)."
        ),
    )
    max_request_bytes: int = field(
        default=1 << 20,
        metadata=doc(
            "Largest request body the API accepts (POST /v1/batch: batch.max_request_bytes).",
            size=True,
        ),
    )
    access_log: bool = field(
        default=True,
        metadata=doc("Write one structured (JSON) log line per request to standard error."),
    )
    render_workers: int = field(
        default=0,
        metadata=doc("Processes that render pages (sift serve); 0 means one per CPU core."),
    )
    render_memory_bytes: int = field(
        default=1 << 30,
        metadata=doc(
            "Address-space limit of each render worker (0: none); a render needing more "
            "fails with render_failed and the worker is replaced.",
            size=True,
        ),
    )
    render_reserved_workers: int = field(
        default=1,
        metadata=doc(
            "Render turns beyond render_workers that only a caller with nothing rendering may "
            "take, each on a worker of its own: one caller's renders filling every worker never "
            "make another caller's render wait for one of them to end. 0: none."
        ),
    )
    render_spare_workers: int = field(
        default=1,
        metadata=doc(
            "Render workers kept started beyond the turns, so the render after a worker was "
            "killed (at its time limit) takes one that is ready while the replacement starts."
        ),
    )
    render_worker_nice: int = field(
        default=5,
        metadata=doc(
            "How much lower than the server's process render workers run (nice, 0-19): under "
            "contention the event loop, which answers every caller, comes first."
        ),
    )
    cache: CacheSettings = field(default_factory=CacheSettings, metadata=doc("[cache]"))
    batch: BatchSettings = field(default_factory=BatchSettings, metadata=doc("[batch]"))
    store: StoreSettings = field(default_factory=StoreSettings, metadata=doc("[store]"))
    history: HistorySettings = field(default_factory=HistorySettings, metadata=doc("[history]"))
    classes: ClassesSettings = field(default_factory=ClassesSettings, metadata=doc("[classes]"))
    egress: EgressSettings = field(default_factory=EgressSettings, metadata=doc("[egress]"))
    browser: BrowserSettings = field(default_factory=BrowserSettings, metadata=doc("[browser]"))
    listener: ListenerSettings = field(default_factory=ListenerSettings, metadata=doc("[listener]"))
    webhooks: WebhooksSettings = field(default_factory=WebhooksSettings, metadata=doc("[webhooks]"))
    watch: WatchSettings = field(default_factory=WatchSettings, metadata=doc("[watch]"))
    callers: tuple[Caller, ...] = field(
        default=(),
        metadata=doc("[[callers]] entries: name, class, key_sha256 (see `sift keys add`)."),
    )

    @property
    def db_path(self) -> Path:
        return Path(self.data_dir) / "sift.db"

    @property
    def listen_host_port(self) -> tuple[str, int]:
        return parse_listen(self.listen)

    def find_caller(self, key: str) -> Caller | None:
        """The caller whose key hashes to ``sha256(key)``; constant-time over every caller."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        found: Caller | None = None
        for caller in self.callers:
            if hmac.compare_digest(caller.key_sha256, digest):
                found = caller
        return found


def validate(settings: Settings, where: str) -> None:
    """Cross-field rules; raises ConfigError naming the key."""
    try:
        parse_listen(settings.listen)
    except ValueError as exc:
        raise ConfigError(f"{where}: listen: {exc}") from exc
    check_classes(settings.classes, where)
    check_public_cidrs(settings.egress, where)
    check_listener(settings.listener, where)
    check_own_addresses(settings.egress, where)
    check_dns(settings.egress, where)
    if settings.render_workers < 0:
        raise ConfigError(f"{where}: render_workers: must be 0 (one per core) or more")
    for key in ("render_reserved_workers", "render_spare_workers"):
        if getattr(settings, key) < 0:
            raise ConfigError(f"{where}: {key}: must be 0 or more")
    if not 0 <= settings.render_worker_nice <= 19:
        raise ConfigError(f"{where}: render_worker_nice: must be 0 to 19")
    check_class_browsers(settings.classes, where)
    check_browser(settings.browser, where)
    check_batch(settings.batch, where)
    check_store(settings.store, where)
    check_webhooks(settings.webhooks, where)
    check_history(settings.history, where)
    check_watch(settings.watch, where)
    check_callers(settings.callers, where)
