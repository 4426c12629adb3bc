"""Connecting to the SQLite file and migrating its schema.

The schema is versioned with ``PRAGMA user_version``: ``MIGRATIONS[i]`` takes a database from
version ``i`` to ``i + 1``. ``connect`` applies the missing steps in one transaction, so a crash
mid-migration leaves the old version intact and opening twice is a no-op the second time.
Append new steps; never edit a released one.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from sift.errors import StoreError
from sift.store.sqlite.history import HISTORY_DDL
from sift.store.sqlite.webhooks import DDL as WEBHOOKS_DDL

MEMORY: Final = ":memory:"

# How long a statement waits for another process's write lock (the CLI reading a live server's
# database, say) before failing. Inside one process there is one connection, so no waiting.
BUSY_TIMEOUT_MS: Final = 5000

# Version 1: the content cache (blob, body, page, render), robots.txt, and the batch store
# exactly as spec/batchstore.md gives it, plus one partial index for next_pending_targets.
_V1: Final[tuple[str, ...]] = (
    # Stored bytes of bodies and renders live apart from their metadata rows: a cache hit
    # rewrites the small metadata row (its lru), and SQLite rewrites a whole row on UPDATE.
    """CREATE TABLE IF NOT EXISTS blob (
        id   INTEGER PRIMARY KEY,
        data BLOB NOT NULL                  -- compressed when the owner's codec is 'zstd'
    )""",
    """CREATE TABLE IF NOT EXISTS body (
        digest      TEXT PRIMARY KEY,       -- 'sha256:<hex>' of the uncompressed bytes
        blob_id     INTEGER NOT NULL,       -- blob.id holding the stored bytes
        codec       TEXT NOT NULL,          -- 'identity' | 'zstd'
        raw_bytes   INTEGER NOT NULL,       -- uncompressed length
        nbytes      INTEGER NOT NULL,       -- stored length: what counts against max_bytes
        created_at  INTEGER NOT NULL,       -- unix seconds
        accessed_at INTEGER NOT NULL,       -- unix seconds of the last hit
        lru         INTEGER NOT NULL        -- global access sequence; smallest is evicted first
    )""",
    "CREATE INDEX IF NOT EXISTS body_lru ON body(lru)",
    """CREATE TABLE IF NOT EXISTS page (
        key           TEXT PRIMARY KEY,     -- normalised URL + fetch-affecting options
        url           TEXT NOT NULL,
        final_url     TEXT NOT NULL,
        status        INTEGER NOT NULL,
        content_type  TEXT NOT NULL,
        etag          TEXT,
        last_modified TEXT,
        fetched_at    INTEGER NOT NULL,
        digest        TEXT NOT NULL REFERENCES body(digest),
        headers_json  TEXT NOT NULL DEFAULT '{}'
    )""",
    "CREATE INDEX IF NOT EXISTS page_digest ON page(digest)",
    """CREATE TABLE IF NOT EXISTS render (
        digest      TEXT NOT NULL REFERENCES body(digest),
        render_key  TEXT NOT NULL,          -- the render options, serialised by the service
        blob_id     INTEGER NOT NULL,
        codec       TEXT NOT NULL,
        raw_bytes   INTEGER NOT NULL,
        nbytes      INTEGER NOT NULL,
        created_at  INTEGER NOT NULL,
        accessed_at INTEGER NOT NULL,
        lru         INTEGER NOT NULL,
        PRIMARY KEY (digest, render_key)
    )""",
    "CREATE INDEX IF NOT EXISTS render_lru ON render(lru)",
    """CREATE TABLE IF NOT EXISTS robots (
        origin     TEXT PRIMARY KEY,        -- scheme://host[:port]
        status     INTEGER NOT NULL,
        body       BLOB NOT NULL,
        fetched_at INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS batch_job (
        id            TEXT PRIMARY KEY,
        caller        TEXT NOT NULL,
        caller_class  TEXT NOT NULL,
        idem_key      TEXT NOT NULL,
        status        TEXT NOT NULL,
        error         TEXT NOT NULL DEFAULT '',
        targets_total INTEGER NOT NULL,
        targets_done  INTEGER NOT NULL DEFAULT 0,
        created_at    INTEGER NOT NULL,
        lease         INTEGER NOT NULL,
        nbytes        INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE IF NOT EXISTS batch_target (
        job_id  TEXT NOT NULL,
        idx     INTEGER NOT NULL,
        url     TEXT NOT NULL,
        options TEXT NOT NULL,
        status  TEXT NOT NULL,
        result  TEXT,
        error   TEXT,
        hint    TEXT,
        PRIMARY KEY (job_id, idx)
    )""",
    "CREATE INDEX IF NOT EXISTS batch_job_idem  ON batch_job(caller, idem_key)",
    "CREATE INDEX IF NOT EXISTS batch_job_lease ON batch_job(lease)",
    # Not in the spec: lets next_pending_targets read the next few pending targets of a
    # 10,000-target job without scanning the finished ones each time. Partial, so it stays small.
    """CREATE INDEX IF NOT EXISTS batch_target_pending
        ON batch_target(job_id, idx) WHERE status = 'pending'""",
)

# Version 2: service counters that outlive the process (hits, misses, …) for `sift stats`,
# and a covering index so a job's per-status counts (polled by every status read) are an
# index-only scan: 4x faster on a 10,000-target job.
_V2: Final[tuple[str, ...]] = (
    """CREATE TABLE IF NOT EXISTS counter (
        name  TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS batch_target_status ON batch_target(job_id, status)",
)

# Version 3: crawls (docs/crawl.md). A job has a kind ("batch" or "crawl") and, for a crawl,
# its parameters as JSON; a target its depth and the idx of the page it was found on; and a
# crawl's seen-set lives here, one row per normalised URL, so a 10,000-page crawl's memory
# does not grow with it and each URL is enqueued at most once per job.
_V3: Final[tuple[str, ...]] = (
    "ALTER TABLE batch_job ADD COLUMN kind TEXT NOT NULL DEFAULT 'batch'",
    "ALTER TABLE batch_job ADD COLUMN spec TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE batch_target ADD COLUMN depth INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE batch_target ADD COLUMN parent INTEGER",
    """CREATE TABLE IF NOT EXISTS crawl_seen (
        job_id TEXT NOT NULL,
        url    TEXT NOT NULL,
        PRIMARY KEY (job_id, url)
    ) WITHOUT ROWID""",
)

# Version 4: screenshots (docs/browser.md#screenshots), in the content cache's byte budget and
# LRU order, stored by the SHA-256 of the image; and who was served each one: the image is
# returned only to a caller it was served to (its grant), never to anyone holding the digest.
_V4: Final[tuple[str, ...]] = (
    """CREATE TABLE IF NOT EXISTS shot (
        digest      TEXT PRIMARY KEY,       -- 'sha256:<hex>' of the image bytes
        blob_id     INTEGER NOT NULL,       -- blob.id holding the image, as encoded
        type        TEXT NOT NULL,          -- 'png' | 'jpeg' | 'webp'
        width       INTEGER NOT NULL,
        height      INTEGER NOT NULL,
        nbytes      INTEGER NOT NULL,       -- what counts against max_bytes
        created_at  INTEGER NOT NULL,
        accessed_at INTEGER NOT NULL,
        lru         INTEGER NOT NULL        -- the same sequence as body.lru and render.lru
    )""",
    "CREATE INDEX IF NOT EXISTS shot_lru ON shot(lru)",
    """CREATE TABLE IF NOT EXISTS shot_grant (
        digest TEXT NOT NULL REFERENCES shot(digest),
        caller TEXT NOT NULL,
        PRIMARY KEY (digest, caller)
    ) WITHOUT ROWID""",
)

# Version 5: the change history of changes=true fetches (store/sqlite/history.py).
# Version 6: the webhook outbox, its delivery log and the job webhooks waiting for their
# job to end (sift.store.webhooks; the DDL lives with its SQL in store/sqlite/webhooks.py).

# Version 7: watches (docs/watches.md): one row per watch with its schedule, its claim
# (lease_until, token) and a summary of its checks; one row per check event, kept per watch
# up to [watch] events_kept.
_V7: Final[tuple[str, ...]] = (
    """CREATE TABLE IF NOT EXISTS watch (
        id              TEXT PRIMARY KEY,
        caller          TEXT NOT NULL,
        caller_class    TEXT NOT NULL,
        url             TEXT NOT NULL,
        every_s         REAL NOT NULL,
        options         TEXT NOT NULL,       -- JSON fetch options, url excluded
        ignore          TEXT NOT NULL,       -- JSON list of CSS selectors
        webhook         TEXT NOT NULL,       -- '' when none
        webhook_secret  TEXT NOT NULL,
        created_at      REAL NOT NULL,
        next_due        REAL NOT NULL,
        lease_until     REAL NOT NULL DEFAULT 0,
        token           INTEGER NOT NULL DEFAULT 0,
        checks          INTEGER NOT NULL DEFAULT 0,
        failures        INTEGER NOT NULL DEFAULT 0,
        changes         INTEGER NOT NULL DEFAULT 0,
        last_checked_at REAL,
        last_outcome    TEXT NOT NULL DEFAULT ''
    )""",
    "CREATE INDEX IF NOT EXISTS watch_caller ON watch(caller, created_at)",
    "CREATE INDEX IF NOT EXISTS watch_due ON watch(next_due)",
    """CREATE TABLE IF NOT EXISTS watch_event (
        watch_id    TEXT NOT NULL,
        seq         INTEGER NOT NULL,
        checked_at  REAL NOT NULL,
        outcome     TEXT NOT NULL,           -- 'ok' | 'failed'
        http_status INTEGER,
        change      TEXT,                    -- the envelope's change, JSON
        error       TEXT,
        hint        TEXT,
        PRIMARY KEY (watch_id, seq)
    ) WITHOUT ROWID""",
)

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    _V1,
    _V2,
    _V3,
    _V4,
    HISTORY_DDL,
    WEBHOOKS_DDL,
    _V7,
)
SCHEMA_VERSION: Final = len(MIGRATIONS)


def connect(path: str) -> sqlite3.Connection:
    """Open ``path`` (or ``":memory:"``), set the pragmas and migrate to ``SCHEMA_VERSION``.

    Raises StoreError naming the file when it cannot be opened, is not a SQLite database, is
    read-only, or carries a schema newer than this code knows.
    """
    try:
        # isolation_level=None: no implicit BEGIN; the DB opens its own transactions explicitly.
        conn = sqlite3.connect(
            path,
            check_same_thread=False,
            isolation_level=None,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open database {path}: {exc}") from exc
    try:
        _configure(conn)
        _migrate(conn, path)
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"cannot open database {path}: {exc}") from exc
    except StoreError:
        conn.close()
        raise
    return conn


def _configure(conn: sqlite3.Connection) -> None:
    # journal_mode is the first statement that reads the file header, so a file that is not a
    # database fails here, inside connect's error translation.
    conn.execute("PRAGMA journal_mode=WAL").fetchone()
    # Under WAL, NORMAL loses at most the last transactions on power loss, never consistency.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA temp_store=MEMORY")
    # Keep the -wal file from staying huge after a burst of writes is checkpointed.
    conn.execute("PRAGMA journal_size_limit=67108864")


def _migrate(conn: sqlite3.Connection, path: str) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"database {path} has schema version {version}, newer than this sift "
                f"supports ({SCHEMA_VERSION})",
                hint="Upgrade sift, or point data_dir at a fresh directory.",
            )
        for step in MIGRATIONS[version:]:
            for statement in step:
                conn.execute(statement)
        if version != SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
