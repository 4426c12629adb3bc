"""Settings: one frozen tree, loaded from TOML, then ``SIFT_*`` environment, then CLI flags.

The dataclasses below are the single settings table: every field's TOML key, environment
variable (``SIFT_`` + the dotted key upper-cased with dots as underscores, e.g.
``SIFT_CLASSES_FLEET_OUTPUT_CAP``), ``--set KEY=VALUE`` flag and documentation entry are
derived from them (see ``iter_fields``); ``docs/configuration.md`` is checked against it.

Loading never half-succeeds: any problem raises ``ConfigError`` with one line naming the
file, the key and the reason, which the CLI prints before exiting with status 2.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import ipaddress
import os
import re
import tomllib
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from sift import __version__
from sift.errors import ConfigError

CallerClass = Literal["fleet", "restricted"]
CALLER_CLASSES: tuple[CallerClass, ...] = ("fleet", "restricted")
DEFAULT_CONFIG_FILE = "sift.toml"
# The environment variable naming the config file when no --config is given.
CONFIG_ENV = "SIFT_CONFIG"
# The name of the local operator principal (sift.principal.OPERATOR); no caller may take it.
RESERVED_CALLER = "operator"

_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "KiB": 1 << 10,
    "MiB": 1 << 20,
    "GiB": 1 << 30,
    "TiB": 1 << 40,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMGT]i?B|B)?\s*$")


def _doc(text: str, *, size: bool = False) -> dict[str, Any]:
    return {"doc": text, "size": size}


@dataclass(frozen=True)
class CacheSettings:
    max_bytes: int = field(
        default=1 << 30,
        metadata=_doc(
            "Byte budget of the content cache (raw bodies + rendered outputs); LRU-evicted.",
            size=True,
        ),
    )
    hot_bytes: int = field(
        default=64 << 20,
        metadata=_doc(
            "In-process copy of recently served renders, so cache hits skip the database.",
            size=True,
        ),
    )
    default_max_age_s: int = field(
        default=3600,
        metadata=_doc(
            "Age after which a cached page is revalidated, when a request sets no max_age_s."
        ),
    )


@dataclass(frozen=True)
class BatchSettings:
    max_bytes: int = field(
        default=256 << 20,
        metadata=_doc(
            "Byte budget of stored batch results; oldest finished jobs are evicted whole.",
            size=True,
        ),
    )
    ttl_s: int = field(
        default=86400,
        metadata=_doc(
            "Seconds a job lives after its last submit, result or read (the sliding lease)."
        ),
    )
    concurrency: int = field(
        default=32, metadata=_doc("Targets fetched at once across all batch jobs.")
    )
    per_host: int = field(default=4, metadata=_doc("Targets fetched at once per upstream host."))
    live_jobs_total: int = field(
        default=200,
        metadata=_doc("Queued or running jobs across all callers; beyond it submissions get 503."),
    )
    shutdown_grace_s: float = field(
        default=10.0,
        metadata=_doc("On SIGTERM/SIGINT, how long running targets may finish before sift exits."),
    )
    sweep_interval_s: float = field(
        default=60.0, metadata=_doc("How often expired jobs are swept.")
    )
    max_request_bytes: int = field(
        default=16 << 20,
        metadata=_doc(
            "Largest POST /v1/batch body (a 10,000-target list exceeds max_request_bytes).",
            size=True,
        ),
    )
    request_bytes_per_target: int = field(
        default=2 << 10,
        metadata=_doc(
            "POST /v1/batch body allowance per target the caller's class may submit: the "
            "body limit is 64 KiB + max_targets x this, at most batch.max_request_bytes.",
            size=True,
        ),
    )

    def request_max_bytes(self, max_targets: int) -> int:
        """The largest batch body a class allowed ``max_targets`` targets may send: a body
        is parsed in one go on the event loop, so it scales with what the class may submit."""
        return min(self.max_request_bytes, (64 << 10) + max_targets * self.request_bytes_per_target)


@dataclass(frozen=True)
class StoreSettings:
    """Where batch jobs live: the embedded SQLite (default) or a shared PostgreSQL."""

    url: str = field(
        default="",
        metadata=_doc(
            "PostgreSQL URL of the batch job store shared by several sift nodes "
            "(postgresql://user@host/db); empty: the embedded SQLite in data_dir."
        ),
    )
    pool_size: int = field(
        default=8,
        metadata=_doc("PostgreSQL connections per node (the pool's maximum)."),
    )
    connect_timeout_s: float = field(
        default=5.0,
        metadata=_doc(
            "How long a request waits for a PostgreSQL connection before 503 store_unavailable."
        ),
    )
    lease_s: float = field(
        default=30.0,
        metadata=_doc(
            "PostgreSQL store: a claimed target's lease; a node silent this long loses it and "
            "another node fetches the target again."
        ),
    )
    renew_s: float = field(
        default=5.0,
        metadata=_doc(
            "PostgreSQL store: how often a node renews its leases and reaps expired ones "
            "(also how soon a cancel reaches the node fetching the job)."
        ),
    )
    max_stalls: int = field(
        default=3,
        metadata=_doc(
            "PostgreSQL store: a target whose node was lost this many times fails as interrupted."
        ),
    )
    node_id: str = field(
        default="",
        metadata=_doc(
            "PostgreSQL store: this node's label in claims, for operators "
            "(default host:port:pid); correctness never depends on it."
        ),
    )


@dataclass(frozen=True)
class ClassSettings:
    """What one caller class may do. Defaults differ per class: see ``ClassesSettings``."""

    output_cap: int = field(
        default=64 << 10,
        metadata=_doc(
            "Largest content slice returned per request (max_bytes is clamped to it).", size=True
        ),
    )
    live_jobs: int = field(default=2, metadata=_doc("Queued or running batch jobs per caller."))
    max_targets: int = field(default=500, metadata=_doc("Targets per batch job."))
    allow_private: bool = field(
        default=False,
        metadata=_doc(
            "May reach private, loopback and link-local addresses (fleet only; "
            "an error under classes.restricted)."
        ),
    )
    private_cidrs: tuple[str, ...] = field(
        default=(),
        metadata=_doc("With allow_private: only these private ranges (empty = all of them)."),
    )
    extra_ports: tuple[int, ...] = field(
        default=(),
        metadata=_doc("Restricted: ports allowed besides 80 and 443. Fleet may use any port."),
    )
    max_download_bytes: int = field(
        default=8 << 20,
        metadata=_doc("Largest upstream body (after decompression) sift will read.", size=True),
    )
    timeout_s: float = field(
        default=20.0,
        metadata=_doc(
            "Total deadline for one fetch, all redirects included (timeout_s is clamped to it)."
        ),
    )
    connect_timeout_s: float = field(
        default=10.0, metadata=_doc("Deadline for one TCP+TLS connect.")
    )
    max_redirects: int = field(default=5, metadata=_doc("Redirect hops followed per fetch."))
    max_links: int = field(
        default=1000,
        metadata=_doc(
            "Links returned per response (links=true); they also fit in max_bytes "
            "(warning links_truncated)."
        ),
    )
    max_inflight: int = field(
        default=16,
        metadata=_doc(
            "Fetches one caller may have in flight at once (/v1/fetch, MCP fetch); "
            "more get 429 rate_limited with Retry-After."
        ),
    )
    browser: bool = field(
        default=True,
        metadata=_doc(
            "May use the headless browser (engine browser, and auto for JavaScript pages)."
        ),
    )
    browser_pages: int = field(
        default=1, metadata=_doc("Browser pages one caller of this class may have open at once.")
    )
    browser_pages_total: int = field(
        default=2,
        metadata=_doc("Browser pages all callers of this class together may have open at once."),
    )
    browser_timeout_s: float = field(
        default=15.0,
        metadata=_doc(
            "Deadline for one browser page: load, waiting and extraction (also within timeout_s)."
        ),
    )
    render_timeout_s: float = field(
        default=10.0,
        metadata=_doc(
            "Wall-clock limit of one render; past it the render worker is killed (render_timeout)."
        ),
    )
    render_max_bytes: int = field(
        default=4 << 20,
        metadata=_doc(
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
        browser_pages=4,
        browser_pages_total=4,
        browser_timeout_s=30.0,
        render_timeout_s=30.0,
        render_max_bytes=32 << 20,
    )


@dataclass(frozen=True)
class ClassesSettings:
    fleet: ClassSettings = field(
        default_factory=_fleet_defaults, metadata=_doc("Trusted internal services.")
    )
    restricted: ClassSettings = field(
        default_factory=ClassSettings,
        metadata=_doc("Untrusted callers; never reach a non-public address."),
    )

    def get(self, name: CallerClass) -> ClassSettings:
        return self.fleet if name == "fleet" else self.restricted


@dataclass(frozen=True)
class EgressSettings:
    """Lab/test settings that make the egress guard testable end to end without weakening it."""

    extra_public_cidrs: tuple[str, ...] = field(
        default=(),
        metadata=_doc("Lab/test only: treat these ranges as public (e.g. 127.0.1.0/24)."),
    )
    resolve: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: types.MappingProxyType({}),
        metadata=_doc(
            "Lab/test only: static host -> addresses, applied before DNS like curl --resolve; "
            "the addresses are still classified."
        ),
    )
    own_addresses: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            'sift\'s own addresses besides the bound one ("ip", "ip:port", "[v6]:port"), '
            "refused as fetch targets: e.g. the public address behind a wildcard bind."
        ),
    )


@dataclass(frozen=True)
class ListenerSettings:
    """Bounds on sift's own HTTP listener: what one connection may hold before a request."""

    max_connections: int = field(
        default=1000,
        metadata=_doc(
            "Open client connections; at the limit the oldest idle or half-sent one is closed, "
            "else the new one gets 503 too_many_connections."
        ),
    )
    head_timeout_s: float = field(
        default=10.0,
        metadata=_doc(
            "Deadline for a request head (line + headers), from connect or the previous "
            "response; then 408 request_timeout."
        ),
    )
    max_head_bytes: int = field(
        default=64 << 10,
        metadata=_doc(
            "Largest request head (line + headers); beyond it 431 header_too_large.", size=True
        ),
    )
    keep_alive_s: int = field(
        default=5, metadata=_doc("Idle seconds after which a kept-alive connection is closed.")
    )
    allowed_hosts: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            "Anonymous mode: Host names served besides loopback ones (localhost, 127.0.0.1, ::1)."
        ),
    )
    allowed_origins: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            "Browser origins (scheme://host[:port]) allowed besides loopback ones, in anonymous "
            "mode and on /mcp."
        ),
    )


@dataclass(frozen=True)
class BrowserSettings:
    """The guarded headless browser (docs/browser.md); per-class limits are in [classes]."""

    enabled: bool = field(
        default=True,
        metadata=_doc("Use a browser when Chromium is installed (false: engine http only)."),
    )
    executable: str = field(
        default="/usr/lib/chromium/chromium-headless-shell",
        metadata=_doc("Chromium binary (Debian package chromium-headless-shell)."),
    )
    max_pages: int = field(
        default=4, metadata=_doc("Browser pages open at once across all callers.")
    )
    max_subresources: int = field(
        default=300,
        metadata=_doc("Requests and tunnels one page may open; past it the page fails."),
    )
    max_page_bytes: int = field(
        default=32 << 20,
        metadata=_doc("Bytes one page may move through the guard proxy.", size=True),
    )
    max_dom_bytes: int = field(
        default=8 << 20,
        metadata=_doc("Largest rendered DOM (serialized HTML) handed to rendering.", size=True),
    )
    page_heap_bytes: int = field(
        default=256 << 20,
        metadata=_doc("JavaScript heap per page; a page over it crashes its tab.", size=True),
    )
    block_media: bool = field(
        default=True,
        metadata=_doc("Do not load images, fonts, audio and video (they do not change the text)."),
    )
    network_quiet_s: float = field(
        default=0.5,
        metadata=_doc("After DOMContentLoaded, wait until the page's network is this long idle."),
    )
    netns: str = field(
        default="auto",
        metadata=_doc(
            "Run Chromium in a network namespace reaching only the guard proxy: auto "
            "(where the machine allows it), on (fail otherwise) or off."
        ),
    )


@dataclass(frozen=True)
class Caller:
    name: str
    caller_class: CallerClass
    key_sha256: str


@dataclass(frozen=True)
class Settings:
    listen: str = field(
        default="127.0.0.1:8080", metadata=_doc("Address the HTTP service binds, HOST:PORT.")
    )
    data_dir: str = field(
        default="sift-data", metadata=_doc("Directory of the database (sift.db).")
    )
    user_agent: str = field(
        default=f"sift/{__version__} (+https://github.com/sift-fetch/sift)",
        metadata=_doc(
            "User-Agent sent upstream; its first token is the one matched in robots.txt."
        ),
    )
    allow_anonymous_public: bool = field(
        default=False,
        metadata=_doc("With no callers configured, allow binding a non-loopback address anyway."),
    )
    metrics_require_key: bool = field(
        default=False,
        metadata=_doc("GET /metrics answers only requests with a fleet caller's key (else 401)."),
    )
    max_request_bytes: int = field(
        default=1 << 20,
        metadata=_doc(
            "Largest request body the API accepts (POST /v1/batch: batch.max_request_bytes).",
            size=True,
        ),
    )
    access_log: bool = field(
        default=True,
        metadata=_doc("Write one structured (JSON) log line per request to standard error."),
    )
    render_workers: int = field(
        default=0,
        metadata=_doc("Processes that render pages (sift serve); 0 means one per CPU core."),
    )
    render_memory_bytes: int = field(
        default=1 << 30,
        metadata=_doc(
            "Address-space limit of each render worker (0: none); a render needing more "
            "fails with render_failed and the worker is replaced.",
            size=True,
        ),
    )
    cache: CacheSettings = field(default_factory=CacheSettings, metadata=_doc("[cache]"))
    batch: BatchSettings = field(default_factory=BatchSettings, metadata=_doc("[batch]"))
    store: StoreSettings = field(default_factory=StoreSettings, metadata=_doc("[store]"))
    classes: ClassesSettings = field(default_factory=ClassesSettings, metadata=_doc("[classes]"))
    egress: EgressSettings = field(default_factory=EgressSettings, metadata=_doc("[egress]"))
    browser: BrowserSettings = field(default_factory=BrowserSettings, metadata=_doc("[browser]"))
    listener: ListenerSettings = field(
        default_factory=ListenerSettings, metadata=_doc("[listener]")
    )
    callers: tuple[Caller, ...] = field(
        default=(),
        metadata=_doc("[[callers]] entries: name, class, key_sha256 (see `sift keys add`)."),
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


# ---------------------------------------------------------------------------------------
# The settings table


@dataclass(frozen=True)
class FieldInfo:
    key: str  # dotted TOML key, e.g. "classes.fleet.output_cap"
    env: str  # environment variable
    type_name: str
    default: Any
    doc: str
    size: bool


def _is_section(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp) and tp is not Caller


def iter_fields(cls: type = Settings, prefix: str = "", default: Any = None) -> Iterator[FieldInfo]:
    """Every scalar setting with its key, env var, default and doc (nested sections flattened)."""
    instance = default if default is not None else cls()
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        key = f"{prefix}{f.name}"
        value = getattr(instance, f.name)
        if _is_section(tp):
            yield from iter_fields(tp, key + ".", value)
            continue
        yield FieldInfo(
            key=key,
            env="SIFT_" + key.upper().replace(".", "_"),
            type_name=_type_name(tp, f.metadata.get("size", False)),
            default=value,
            doc=f.metadata.get("doc", ""),
            size=f.metadata.get("size", False),
        )


def _type_name(tp: Any, size: bool) -> str:
    if size:
        return "size"
    if tp is bool:
        return "bool"
    if tp in (int, float, str):
        return str(tp.__name__)
    origin = get_origin(tp)
    if origin is tuple:
        return f"list of {_type_name(get_args(tp)[0], False)}"
    return "table"


# ---------------------------------------------------------------------------------------
# Parsing values


def parse_size(value: object) -> int:
    """``65536``, ``"64KiB"``, ``"1GiB"``, ``"10MB"`` → bytes. Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError('expected a size such as 65536 or "64KiB"')
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a size cannot be negative")
        return value
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if m:
            return int(m.group(1)) * _SIZE_UNITS[m.group(2) or ""]
    raise ValueError(f'bad size {value!r}: use an integer or a string like "64KiB", "1GiB"')


def parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad listen address {value!r}: use HOST:PORT, e.g. 127.0.0.1:8080")
    return host.strip("[]"), int(port)


def _coerce(value: Any, tp: Any, size: bool, from_text: bool) -> Any:
    """Convert a TOML value (or an env/flag string when ``from_text``) to the field's type."""
    if size:
        return parse_size(int(value) if from_text and str(value).strip().isdigit() else value)
    if tp is bool:
        if from_text and isinstance(value, str):
            low = value.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
        if isinstance(value, bool):
            return value
        raise ValueError(f"expected true or false, got {value!r}")
    if tp is int:
        if from_text and isinstance(value, str):
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if from_text and isinstance(value, str):
            value = float(value.strip())
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {value!r}")
        return value
    if get_origin(tp) is tuple:
        item_tp = get_args(tp)[0]
        if from_text and isinstance(value, str):
            value = [v for v in (p.strip() for p in value.split(",")) if v]
        if not isinstance(value, list | tuple):
            raise ValueError(f"expected a list, got {value!r}")
        return tuple(_coerce(v, item_tp, False, from_text) for v in value)
    raise ValueError("cannot be set from the environment or a flag; use the config file")


# ---------------------------------------------------------------------------------------
# Loading


def _build(cls: type, base: Any, table: Mapping[str, Any], where: str, prefix: str) -> Any:
    """A copy of ``base`` (an instance of dataclass ``cls``) with ``table``'s keys applied."""
    hints = get_type_hints(cls)
    names = {f.name: f for f in dataclasses.fields(cls)}
    changes: dict[str, Any] = {}
    for name, value in table.items():
        key = f"{prefix}{name}"
        if name not in names:
            what = (
                "unknown class; use fleet or restricted"
                if cls is ClassesSettings
                else ("unknown setting")
            )
            raise ConfigError(f"{where}: {key}: {what}")
        f, tp = names[name], hints[name]
        try:
            if _is_section(tp):
                if not isinstance(value, dict):
                    raise ValueError("expected a table")
                changes[name] = _build(tp, getattr(base, name), value, where, key + ".")
            elif name == "callers":
                changes[name] = _parse_callers(value)
            elif name == "resolve":
                changes[name] = _parse_resolve(value)
            else:
                changes[name] = _coerce(value, tp, f.metadata.get("size", False), False)
        except ConfigError:
            raise
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{where}: {key}: {exc}") from exc
    return dataclasses.replace(base, **changes)


def _parse_callers(value: Any) -> tuple[Caller, ...]:
    if not isinstance(value, list):
        raise ValueError("expected [[callers]] tables")
    callers = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise ValueError(f"entry {i}: expected a table")
        unknown = set(entry) - {"name", "class", "key_sha256"}
        if unknown:
            raise ValueError(f"entry {i}: unknown key {sorted(unknown)[0]!r}")
        name, cls, digest = entry.get("name"), entry.get("class"), entry.get("key_sha256")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.@-]{1,64}", name):
            raise ValueError(f"entry {i}: name must be 1-64 of A-Z a-z 0-9 _ . @ -")
        if cls not in CALLER_CLASSES:
            raise ValueError(f"entry {i} ({name}): unknown class {cls!r}; use fleet or restricted")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ValueError(f"entry {i} ({name}): key_sha256 must be 64 lowercase hex digits")
        callers.append(Caller(name=name, caller_class=cls, key_sha256=digest))
    return tuple(callers)


def _parse_resolve(value: Any) -> Mapping[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise ValueError("expected a table of host = [addresses]")
    out: dict[str, tuple[str, ...]] = {}
    for host, addrs in value.items():
        if isinstance(addrs, str):
            addrs = [addrs]
        if not isinstance(addrs, list) or not addrs:
            raise ValueError(f"{host}: expected a non-empty list of IP addresses")
        for a in addrs:
            ipaddress.ip_address(a)  # ValueError names the bad address
        out[host.lower().rstrip(".")] = tuple(addrs)
    return types.MappingProxyType(out)


def _set_dotted(table: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    for part in parts[:-1]:
        table = table.setdefault(part, {})
    table[parts[-1]] = value


def _apply_text(settings: Settings, pairs: Mapping[str, tuple[str, str]]) -> Settings:
    """``pairs``: dotted key → (where, text). Each is coerced by its field's type."""
    known = {f.key: f for f in iter_fields()}
    table: dict[str, Any] = {}
    for key, (where, text) in pairs.items():
        info = known.get(key)
        if info is None:
            raise ConfigError(f"{where}: {key}: unknown setting")
        try:
            tp = _field_type(key)
            value = _coerce(text, tp, info.size, True)
            if key == "listen":
                parse_listen(value)
            _set_dotted(table, key, value)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{where}: {key}: {exc}") from exc
    built: Settings = _build_typed(settings, table)
    return built


def _field_type(key: str) -> Any:
    cls: Any = Settings
    parts = key.split(".")
    for part in parts[:-1]:
        cls = get_type_hints(cls)[part]
    return get_type_hints(cls)[parts[-1]]


def _build_typed(base: Any, table: Mapping[str, Any]) -> Any:
    """Like ``_build`` but the leaf values are already typed."""
    changes: dict[str, Any] = {}
    for name, value in table.items():
        current = getattr(base, name)
        changes[name] = _build_typed(current, value) if isinstance(value, dict) else value
    return dataclasses.replace(base, **changes)


def load_settings(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> Settings:
    """Defaults ← TOML file ← ``SIFT_*`` env ← ``overrides`` (dotted key → text), validated.

    ``path=None`` reads the file ``$SIFT_CONFIG`` names, else ``./sift.toml`` when it
    exists. ``env`` defaults to ``os.environ``.
    """
    settings = Settings()
    env = os.environ if env is None else env
    path = config_path(path, env)
    where = str(path) if path is not None else "defaults"
    if path is not None:
        try:
            with open(path, "rb") as fh:
                table = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
        settings = _build(Settings, settings, table, str(path), "")
    pairs: dict[str, tuple[str, str]] = {}
    by_env = {f.env: f.key for f in iter_fields()}
    for name, text in env.items():
        if name.startswith("SIFT_") and name in by_env:
            pairs[by_env[name]] = (f"environment {name}", text)
    for key, text in (overrides or {}).items():
        pairs[key] = (f"flag --set {key}", text)
    if pairs:
        settings = _apply_text(settings, pairs)
    validate(settings, where)
    return settings


def config_path(
    path: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None
) -> str | os.PathLike[str] | None:
    """The config file to read: ``path``, else ``$SIFT_CONFIG``, else ``./sift.toml`` if it
    exists, else None (defaults only)."""
    if path is not None:
        return path
    named = (os.environ if env is None else env).get(CONFIG_ENV)
    if named:
        return named
    return DEFAULT_CONFIG_FILE if Path(DEFAULT_CONFIG_FILE).is_file() else None


def validate(settings: Settings, where: str) -> None:
    """Cross-field rules; raises ConfigError naming the key."""
    try:
        parse_listen(settings.listen)
    except ValueError as exc:
        raise ConfigError(f"{where}: listen: {exc}") from exc
    if settings.classes.restricted.allow_private:
        raise ConfigError(
            f"{where}: classes.restricted.allow_private: restricted callers never "
            "reach private addresses; remove it or use a fleet caller"
        )
    for cls_name in CALLER_CLASSES:
        c = settings.classes.get(cls_name)
        for fname in (
            "output_cap",
            "live_jobs",
            "max_targets",
            "max_download_bytes",
            "max_redirects",
            "max_inflight",
            "max_links",
            "render_max_bytes",
        ):
            if getattr(c, fname) < (0 if fname == "max_redirects" else 1):
                raise ConfigError(f"{where}: classes.{cls_name}.{fname}: must be positive")
        for fname in ("timeout_s", "connect_timeout_s", "render_timeout_s"):
            if getattr(c, fname) <= 0:
                raise ConfigError(f"{where}: classes.{cls_name}.{fname}: must be positive")
        for cidr in c.private_cidrs:
            _check_cidr(cidr, where, f"classes.{cls_name}.private_cidrs")
        for port in c.extra_ports:
            if not 0 < port < 65536:
                raise ConfigError(f"{where}: classes.{cls_name}.extra_ports: bad port {port}")
    for cidr in settings.egress.extra_public_cidrs:
        _check_cidr(cidr, where, "egress.extra_public_cidrs")
    _check_listener(settings.listener, where)
    for entry in settings.egress.own_addresses:
        _check_own_address(entry, where)
    if settings.render_workers < 0:
        raise ConfigError(f"{where}: render_workers: must be 0 (one per core) or more")
    for cls_name in CALLER_CLASSES:
        c = settings.classes.get(cls_name)
        for fname in ("browser_pages", "browser_pages_total", "browser_timeout_s"):
            if getattr(c, fname) <= 0:
                raise ConfigError(f"{where}: classes.{cls_name}.{fname}: must be positive")
    b = settings.browser
    for fname in ("max_pages", "max_subresources", "max_page_bytes", "max_dom_bytes"):
        if getattr(b, fname) < 1:
            raise ConfigError(f"{where}: browser.{fname}: must be positive")
    if b.page_heap_bytes < 16 << 20:
        raise ConfigError(f"{where}: browser.page_heap_bytes: must be at least 16MiB")
    if b.network_quiet_s < 0:
        raise ConfigError(f"{where}: browser.network_quiet_s: must be 0 or more")
    if b.netns not in ("auto", "on", "off"):
        raise ConfigError(f"{where}: browser.netns: use auto, on or off")
    for fname in ("concurrency", "per_host", "live_jobs_total", "ttl_s"):
        if getattr(settings.batch, fname) < 1:
            raise ConfigError(f"{where}: batch.{fname}: must be at least 1")
    if settings.store.url and not settings.store.url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            f"{where}: store.url: expected a postgresql:// URL (or nothing for the embedded "
            "SQLite store)"
        )
    st = settings.store
    for fname in ("pool_size", "connect_timeout_s", "lease_s", "renew_s", "max_stalls"):
        if getattr(st, fname) <= 0:
            raise ConfigError(f"{where}: store.{fname}: must be positive")
    if st.renew_s * 2 > st.lease_s:
        raise ConfigError(
            f"{where}: store.renew_s: must be at most half of store.lease_s ({st.lease_s}), "
            "or a slow renewal loses the lease of a healthy node"
        )
    names: set[str] = set()
    digests: set[str] = set()
    for caller in settings.callers:
        if caller.name == RESERVED_CALLER:
            raise ConfigError(
                f"{where}: callers: the name {RESERVED_CALLER!r} is reserved for the local "
                "operator (the in-process CLI); rename that caller"
            )
        if caller.name in names:
            raise ConfigError(f"{where}: callers: duplicate caller name {caller.name!r}")
        if caller.key_sha256 in digests:
            raise ConfigError(f"{where}: callers: {caller.name!r} reuses another caller's key")
        names.add(caller.name)
        digests.add(caller.key_sha256)


def _check_listener(listener: ListenerSettings, where: str) -> None:
    for fname in ("max_connections", "max_head_bytes"):
        if getattr(listener, fname) < 1:
            raise ConfigError(f"{where}: listener.{fname}: must be at least 1")
    for fname in ("head_timeout_s", "keep_alive_s"):
        if getattr(listener, fname) <= 0:
            raise ConfigError(f"{where}: listener.{fname}: must be positive")
    for origin in listener.allowed_origins:
        if not re.fullmatch(r"https?://[^/\s]+", origin):
            raise ConfigError(
                f"{where}: listener.allowed_origins: bad origin {origin!r}; use scheme://host[:port]"
            )


def _check_own_address(entry: str, where: str) -> None:
    """``ip``, ``ip:port``, ``[v6]`` or ``[v6]:port`` (the guard parses them at start)."""
    text = entry.strip()
    host, port = text, "1"
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":") if rest else "1"
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    try:
        ipaddress.ip_address(host)
        if not (port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(port)
    except ValueError:
        raise ConfigError(
            f"{where}: egress.own_addresses: bad address {entry!r}; use ip, ip:port or [v6]:port"
        ) from None


def _check_cidr(cidr: str, where: str, key: str) -> None:
    try:
        ipaddress.ip_network(cidr, strict=False)
    except ValueError as exc:
        raise ConfigError(f"{where}: {key}: bad CIDR {cidr!r}") from exc
