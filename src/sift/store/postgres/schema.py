"""The PostgreSQL batch schema and its versioned, append-only migrations.

``migrate(conn)`` brings a database to ``SCHEMA_VERSION``. It runs in one transaction under
a transaction-level advisory lock, so when several sift nodes start together exactly one of
them migrates and the others wait, then find nothing to do. Steps are only ever appended
(the same rule as ``dcache.schema.MIGRATIONS``): a released step is never edited.

The spec's tables and columns (``spec/batchstore.md``) keep their names and types; the
additions serve several nodes sharing the store:

- ``batch_job.seq``: insertion order (SQLite's rowid), the tie-break of the spec's orders.
- ``batch_target.host`` (``host_key(url)``, set at submit), ``attempt`` (429/503 retries),
  ``stalls`` (leases lost with their node), ``lease_token`` (the fencing token of the claim
  being worked on), ``lease_until`` (PostgreSQL clock, unix seconds), ``lease_owner`` (a node
  label for operators; correctness never reads it).
- ``host_gate``: one row per host, the cluster-wide politeness gate. ``inflight`` equals the
  number of the host's running targets; it moves in the same statement as every target that
  enters or leaves ``running``, so it cannot drift.
"""

from __future__ import annotations

from typing import Final

import psycopg

from sift.errors import ConfigError
from sift.store.postgres.history import HISTORY_DDL
from sift.store.postgres.webhooks import DDL as WEBHOOKS_DDL

# pg_advisory_xact_lock key of the migration ("sift" + 1 in ASCII).
MIGRATE_LOCK: Final = 0x73696674_00000001
EVICT_LOCK: Final = 0x73696674_00000002
SWEEP_LOCK: Final = 0x73696674_00000003

MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: the spec's two tables plus the cluster's columns and the host gate.
    """
    CREATE TABLE batch_job (
        id            text PRIMARY KEY,
        caller        text NOT NULL,
        caller_class  text NOT NULL,
        idem_key      text NOT NULL,
        status        text NOT NULL,
        error         text NOT NULL DEFAULT '',
        targets_total integer NOT NULL,
        targets_done  integer NOT NULL DEFAULT 0,
        created_at    bigint NOT NULL,
        lease         bigint NOT NULL,
        nbytes        bigint NOT NULL DEFAULT 0,
        seq           bigint GENERATED ALWAYS AS IDENTITY
    );
    CREATE INDEX batch_job_idem ON batch_job (caller, idem_key);
    CREATE INDEX batch_job_lease ON batch_job (lease);
    CREATE INDEX batch_job_live ON batch_job (caller, seq) WHERE status IN ('queued', 'running');
    CREATE TABLE batch_target (
        job_id      text NOT NULL REFERENCES batch_job (id) ON DELETE CASCADE,
        idx         integer NOT NULL,
        url         text NOT NULL,
        options     text NOT NULL,
        status      text NOT NULL,
        result      text,
        error       text,
        hint        text,
        host        text NOT NULL DEFAULT '',
        attempt     smallint NOT NULL DEFAULT 0,
        stalls      smallint NOT NULL DEFAULT 0,
        lease_token bigint,
        lease_until double precision,
        lease_owner text,
        PRIMARY KEY (job_id, idx)
    );
    CREATE INDEX batch_target_pending ON batch_target (job_id, idx) WHERE status = 'pending';
    CREATE INDEX batch_target_status ON batch_target (job_id, status);
    CREATE INDEX batch_target_leased ON batch_target (lease_until) WHERE status = 'running';
    ALTER TABLE batch_target SET (autovacuum_vacuum_scale_factor = 0.01,
                                  autovacuum_analyze_scale_factor = 0.01);
    CREATE SEQUENCE batch_lease_seq;
    CREATE TABLE host_gate (
        host          text PRIMARY KEY,
        inflight      integer NOT NULL DEFAULT 0 CHECK (inflight >= 0),
        probed        boolean NOT NULL DEFAULT false,
        crawl_delay_s double precision NOT NULL DEFAULT 0,
        not_before    double precision NOT NULL DEFAULT 0
    );
    """
    # sift_claim: one round trip claims up to p_max targets of ONE open host for one caller.
    # 1. a window of the next p_window pending targets of each of the caller's live jobs,
    #    oldest job first; 2. the first host in window order whose gate is open, locked with
    #    SKIP LOCKED (a host another node is claiming right now is passed over); 3. claim,
    #    gate and job start move in one statement, so the gate cannot drift. The gate limit is
    #    checked in the locked row itself: a count over batch_target here would read an older
    #    snapshot and could admit one target too many.
    """
    CREATE FUNCTION sift_claim(p_caller text, p_node text, p_per_host integer, p_max integer,
                               p_lease_s double precision, p_window integer)
    RETURNS TABLE (job_id text, idx integer, lease_token bigint, url text, options text,
                   host text, attempt smallint, caller_class text,
                   claimed_at double precision, probed boolean)
    LANGUAGE plpgsql AS $$
    #variable_conflict use_column
    DECLARE
      v_now double precision := extract(epoch FROM clock_timestamp());
      v_jobs text[]; v_idxs integer[]; v_hosts text[];
      g record; v_free integer;
    BEGIN
      SELECT array_agg(c.job_id ORDER BY c.seq, c.idx), array_agg(c.idx ORDER BY c.seq, c.idx),
             array_agg(c.host ORDER BY c.seq, c.idx)
        INTO v_jobs, v_idxs, v_hosts
        FROM batch_job j CROSS JOIN LATERAL
             (SELECT t.job_id, t.idx, t.host, j.seq FROM batch_target t
               WHERE t.job_id = j.id AND t.status = 'pending'
               ORDER BY t.idx LIMIT p_window) c
       WHERE j.caller = p_caller AND j.status IN ('queued', 'running');
      IF v_jobs IS NULL THEN RETURN; END IF;
      SELECT h.host, h.inflight, h.probed, h.crawl_delay_s INTO g FROM host_gate h
       WHERE h.host = ANY (v_hosts) AND h.not_before <= v_now
         AND h.inflight < CASE WHEN h.probed THEN p_per_host ELSE 1 END
       ORDER BY array_position(v_hosts, h.host) LIMIT 1 FOR UPDATE SKIP LOCKED;
      IF NOT FOUND THEN RETURN; END IF;
      v_free := least(p_max, CASE WHEN g.probed THEN p_per_host ELSE 1 END - g.inflight);
      IF g.crawl_delay_s > 0 THEN v_free := least(v_free, 1); END IF;
      RETURN QUERY
      WITH c AS (SELECT u.j, u.i FROM unnest(v_jobs, v_idxs, v_hosts) AS u(j, i, h)
                  WHERE u.h = g.host LIMIT v_free),
      claimed AS (
        UPDATE batch_target t SET status = 'running',
               lease_token = nextval('batch_lease_seq'),
               lease_until = v_now + p_lease_s, lease_owner = p_node
          FROM c WHERE t.job_id = c.j AND t.idx = c.i AND t.status = 'pending'
        RETURNING t.job_id, t.idx, t.lease_token, t.url, t.options, t.host, t.attempt),
      gate AS (
        UPDATE host_gate h SET inflight = h.inflight + (SELECT count(*) FROM claimed),
               not_before = CASE WHEN h.crawl_delay_s > 0
                                 THEN greatest(h.not_before, v_now + h.crawl_delay_s)
                                 ELSE h.not_before END
         WHERE h.host = g.host AND EXISTS (SELECT 1 FROM claimed)),
      began AS (
        UPDATE batch_job b SET status = 'running', lease = floor(v_now)::bigint
         WHERE b.id IN (SELECT claimed.job_id FROM claimed) AND b.status = 'queued')
      SELECT cl.job_id, cl.idx, cl.lease_token, cl.url, cl.options, cl.host, cl.attempt,
             b.caller_class, v_now, g.probed
        FROM claimed cl JOIN batch_job b ON b.id = cl.job_id;
    END $$;
    """,
    # 2: crawls (docs/crawl.md): the job's kind and parameters, a target's depth and parent,
    # and the seen-set, one row per normalised URL per job (gone with its job).
    """
    ALTER TABLE batch_job ADD COLUMN kind text NOT NULL DEFAULT 'batch',
                          ADD COLUMN spec text NOT NULL DEFAULT '';
    ALTER TABLE batch_target ADD COLUMN depth integer NOT NULL DEFAULT 0,
                             ADD COLUMN parent integer;
    CREATE TABLE crawl_seen (
        job_id text NOT NULL REFERENCES batch_job (id) ON DELETE CASCADE,
        url    text NOT NULL,
        PRIMARY KEY (job_id, url)
    );
    """,
    # 3: the change history of changes=true fetches (store/postgres/history.py).
    HISTORY_DDL,
    # 4: the webhook outbox, its delivery log and the job webhooks waiting for their job
    # to end (sift.store.webhooks; the DDL lives with its SQL in webhooks.py).
    WEBHOOKS_DDL,
    # 5: watches (docs/watches.md, sift.store.watches): the schedule, the claim (lease_until,
    # token) and a summary per watch; one row per check event, kept up to events_kept.
    """
    CREATE TABLE watch (
        id              text PRIMARY KEY,
        caller          text NOT NULL,
        caller_class    text NOT NULL,
        url             text NOT NULL,
        every_s         double precision NOT NULL,
        options         text NOT NULL,
        ignore          text NOT NULL,
        webhook         text NOT NULL,
        webhook_secret  text NOT NULL,
        created_at      double precision NOT NULL,
        next_due        double precision NOT NULL,
        lease_until     double precision NOT NULL DEFAULT 0,
        token           bigint NOT NULL DEFAULT 0,
        checks          bigint NOT NULL DEFAULT 0,
        failures        bigint NOT NULL DEFAULT 0,
        changes         bigint NOT NULL DEFAULT 0,
        last_checked_at double precision,
        last_outcome    text NOT NULL DEFAULT ''
    );
    CREATE INDEX watch_caller ON watch (caller, created_at);
    CREATE INDEX watch_due ON watch (next_due);
    CREATE TABLE watch_event (
        watch_id    text NOT NULL REFERENCES watch (id) ON DELETE CASCADE,
        seq         bigint NOT NULL,
        checked_at  double precision NOT NULL,
        outcome     text NOT NULL,
        http_status integer,
        change      text,
        error       text,
        hint        text,
        PRIMARY KEY (watch_id, seq)
    );
    """,
)
SCHEMA_VERSION: Final = len(MIGRATIONS)


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """Apply the missing steps in one transaction; the version reached. Raises
    ``ConfigError`` when the database is newer than this sift."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS sift_schema (version integer NOT NULL)")
        row = conn.execute("SELECT max(version) FROM sift_schema").fetchone()
        current = int(str(row[0])) if row is not None and row[0] is not None else 0
        if current > SCHEMA_VERSION:
            raise ConfigError(
                f"store.url: the database has batch schema version {current}, newer than this "
                f"sift's {SCHEMA_VERSION}; upgrade sift"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            conn.execute(MIGRATIONS[version - 1].encode())
            conn.execute("INSERT INTO sift_schema (version) VALUES (%s)", (version,))
    return SCHEMA_VERSION


def prepare(url: str, *, connect_timeout_s: float = 5.0) -> int:
    """Connect once and migrate (``sift serve`` calls this before it listens). Raises
    ``ConfigError`` with one line naming what is wrong, so a bad URL exits 2 at start."""
    try:
        with psycopg.connect(
            url, autocommit=True, connect_timeout=max(1, round(connect_timeout_s))
        ) as conn:
            return migrate(conn)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"store.url: cannot use the PostgreSQL store: {reason}") from exc
