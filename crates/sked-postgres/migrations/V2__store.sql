-- The store: jobs, runs, idempotency keys, the occurrence ledger's skip records, `after`
-- edges and waits, API keys, tenants' quotas and usage, webhook secrets. The SQLite schema
-- (crates/sked-embedded/src/sqlite/schema.rs, versions 1 to 8 without the dispatch tables),
-- ported: instants are BIGINT milliseconds since the Unix epoch (the domain is ms-exact),
-- enums TEXT by wire name, JSON TEXT unless a query looks inside it (`jobs.labels`: JSONB,
-- filtered with `@>`).
--
-- Identifiers and every TEXT column a listing orders or pages by are `COLLATE "C"`: byte
-- order, as SQLite's BINARY and Rust's `str` compare, whatever the cluster's locale (a
-- locale's order would differ from the other stores' and make cursors depend on the host).

-- One row per (tenant, job id), any state (DELETED rows are kept for history).
CREATE TABLE jobs (
    tenant        TEXT COLLATE "C" NOT NULL,
    id            TEXT COLLATE "C" NOT NULL,
    state         TEXT   NOT NULL,
    next_fire_at  BIGINT,
    version       BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    labels        JSONB  NOT NULL DEFAULT '{}',
    spec          TEXT   NOT NULL,
    PRIMARY KEY (tenant, id)
);
-- The sweeper's due jobs and its next wake-up.
CREATE INDEX jobs_due ON jobs (next_fire_at, tenant, id) WHERE state = 'ACTIVE';
-- Label filters (`labels @> '{"k":"v"}'`).
CREATE INDEX jobs_labels ON jobs USING GIN (labels jsonb_path_ops);

-- One row per (tenant, run id).
CREATE TABLE runs (
    tenant             TEXT COLLATE "C" NOT NULL,
    run_id             TEXT COLLATE "C" NOT NULL,
    job_id             TEXT COLLATE "C" NOT NULL,
    scheduled_for      BIGINT  NOT NULL,
    trigger_kind       TEXT    NOT NULL,
    state              TEXT    NOT NULL,
    priority           BIGINT  NOT NULL,
    not_before         BIGINT  NOT NULL,
    max_attempts       BIGINT  NOT NULL,
    created_at         BIGINT  NOT NULL,
    started_at         BIGINT,
    finished_at        BIGINT,
    -- The live lease: all three NULL or all three set.
    lease_owner        TEXT,
    lease_token        BIGINT,
    lease_expires      BIGINT,
    cancel_requested   BOOLEAN NOT NULL DEFAULT FALSE,
    reason             TEXT,
    -- JSON array of the attempts (instants in ms, outcome by wire name).
    attempts           TEXT    NOT NULL DEFAULT '[]',
    -- The highest fencing token handed out for this run.
    last_token         BIGINT  NOT NULL DEFAULT 0,
    -- The concurrency key copied from the job at creation: both NULL or both set.
    concurrency_key    TEXT COLLATE "C",
    concurrency_limit  BIGINT,
    -- JSON of the run's alert, and when its next try is due (set only while pending).
    alert              TEXT,
    alert_due          BIGINT,
    PRIMARY KEY (tenant, run_id)
);
-- History pages (walked backwards).
CREATE INDEX runs_by_job  ON runs (tenant, job_id, scheduled_for, run_id);
CREATE INDEX runs_by_time ON runs (tenant, scheduled_for, run_id);
-- Overlap checks and a job's active runs.
CREATE INDEX runs_active  ON runs (tenant, job_id, scheduled_for, run_id)
    WHERE state IN ('PENDING', 'RUNNING');
-- The reaper's expired leases. SQLite counts a tenant's slots through `runs_leases`; here the
-- count has an index of its own, led by the tenant, so that a claim reads (and, being
-- SERIALIZABLE, predicate-locks) only its tenant's leases rather than every tenant's.
CREATE INDEX runs_leases  ON runs (lease_expires) WHERE state = 'RUNNING';
CREATE INDEX runs_slots   ON runs (tenant, lease_expires) WHERE state = 'RUNNING';
-- The repair pass's stale PENDING runs.
CREATE INDEX runs_pending ON runs (not_before) WHERE state = 'PENDING';
-- The runs holding a concurrency key, counted at each claim.
CREATE INDEX runs_by_key  ON runs (tenant, concurrency_key, lease_expires)
    WHERE state = 'RUNNING' AND concurrency_key IS NOT NULL;
-- The notifier's pending alerts.
CREATE INDEX runs_alerts_due ON runs (alert_due) WHERE alert_due IS NOT NULL;

-- (tenant, key) → the request's fingerprint and the job ids it created (JSON array).
CREATE TABLE idempotency_keys (
    tenant       TEXT COLLATE "C" NOT NULL,
    key          TEXT COLLATE "C" NOT NULL,
    fingerprint  TEXT   NOT NULL,
    job_ids      TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (tenant, key)
);

-- The occurrence ledger: occurrences a firing skipped (consecutive ones for one reason in one
-- row), and pauses (count 0); each with its alert while one is pending.
CREATE TABLE skip_records (
    tenant     TEXT COLLATE "C" NOT NULL,
    job_id     TEXT COLLATE "C" NOT NULL,
    from_ms    BIGINT NOT NULL,
    to_ms      BIGINT NOT NULL,
    count      BIGINT NOT NULL,
    reason     TEXT   NOT NULL,
    alert      TEXT,
    alert_due  BIGINT,
    PRIMARY KEY (tenant, job_id, from_ms)
);
CREATE INDEX skip_records_alerts_due ON skip_records (alert_due) WHERE alert_due IS NOT NULL;

-- Which jobs run after which (kept by every write of a job).
CREATE TABLE job_after (
    tenant      TEXT COLLATE "C" NOT NULL,
    upstream    TEXT COLLATE "C" NOT NULL,
    downstream  TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, upstream, downstream)
);
CREATE INDEX job_after_by_downstream ON job_after (tenant, downstream);

-- `after` occurrences waiting for more upstreams, with the deadline of their `within`.
CREATE TABLE after_waits (
    tenant         TEXT COLLATE "C" NOT NULL,
    job_id         TEXT COLLATE "C" NOT NULL,
    scheduled_for  BIGINT NOT NULL,
    deadline       BIGINT NOT NULL,
    PRIMARY KEY (tenant, job_id, scheduled_for)
);
CREATE INDEX after_waits_by_deadline ON after_waits (deadline);

-- API keys, by the SHA-256 of their secret (the secret itself is never stored).
CREATE TABLE api_keys (
    id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    hash        TEXT   NOT NULL UNIQUE,
    tenant      TEXT COLLATE "C" NOT NULL,
    role        TEXT   NOT NULL,
    name        TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at, id);

-- Tenants' quotas; NULL is no limit. The rate's two columns are both set or both NULL.
CREATE TABLE tenant_quotas (
    tenant               TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    max_active_jobs      BIGINT,
    max_concurrent_runs  BIGINT,
    rate_per_second      DOUBLE PRECISION,
    rate_burst           BIGINT
);

-- Each tenant's jobs in state ACTIVE or PAUSED, kept by triggers on every write of `jobs` (so
-- no code path can forget it). Runs holding a slot of `max_concurrent_runs` are counted at
-- each claim instead (`runs_slots`): a lease that expires frees its slot without any write.
CREATE TABLE tenant_usage (
    tenant       TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    active_jobs  BIGINT NOT NULL
);

-- SQLite's three triggers (`jobs_usage_insert`, `jobs_usage_update`, `jobs_usage_delete`) as
-- one PL/pgSQL function: the change a written row makes to its tenant's count.
CREATE FUNCTION jobs_usage() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was BOOLEAN := TG_OP <> 'INSERT' AND OLD.state IN ('ACTIVE', 'PAUSED');
    now_counts BOOLEAN := TG_OP <> 'DELETE' AND NEW.state IN ('ACTIVE', 'PAUSED');
    delta BIGINT := now_counts::int - was::int;
    owner TEXT := CASE WHEN TG_OP = 'DELETE' THEN OLD.tenant ELSE NEW.tenant END;
BEGIN
    IF delta <> 0 THEN
        INSERT INTO tenant_usage (tenant, active_jobs) VALUES (owner, delta)
            ON CONFLICT (tenant) DO UPDATE SET active_jobs = tenant_usage.active_jobs + excluded.active_jobs;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER jobs_usage_insert AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_usage();
CREATE TRIGGER jobs_usage_update AFTER UPDATE OF state ON jobs FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION jobs_usage();
CREATE TRIGGER jobs_usage_delete AFTER DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_usage();

-- Tenants' webhook secrets (kept: alerts are signed with them).
CREATE TABLE webhook_secrets (
    tenant      TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    secret      TEXT   NOT NULL,
    created_at  BIGINT NOT NULL
);
