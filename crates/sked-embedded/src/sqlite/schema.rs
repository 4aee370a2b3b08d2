//! The schema and its migrations, versioned by `PRAGMA user_version`.
//!
//! Migration `n` (1-based) brings a file from version `n - 1` to `n`. All of them run in
//! one `BEGIN IMMEDIATE` transaction, so two processes opening a fresh file at once
//! cannot both migrate it. The file is marked as sked's with `PRAGMA application_id`;
//! a non-empty database without that mark is refused rather than written into.
//! See the module header of [`super`] for what the tables mean.

use rusqlite::{Connection, TransactionBehavior};

/// `PRAGMA application_id` of a sked database: the bytes `"sked"`.
pub const APPLICATION_ID: i64 = 0x736B_6564;

/// Migrations in order; the schema version of a file is how many have run.
const MIGRATIONS: &[&str] = &[
    // 1: jobs, runs, idempotency keys, dispatch queue.
    r#"
    CREATE TABLE jobs (
        tenant        TEXT    NOT NULL,
        id            TEXT    NOT NULL,
        state         TEXT    NOT NULL,
        next_fire_at  INTEGER,
        version       INTEGER NOT NULL,
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL,
        labels        TEXT    NOT NULL DEFAULT '{}',
        spec          TEXT    NOT NULL,
        PRIMARY KEY (tenant, id)
    ) STRICT;
    CREATE INDEX jobs_due ON jobs (next_fire_at, tenant, id) WHERE state = 'ACTIVE';

    CREATE TABLE runs (
        tenant            TEXT    NOT NULL,
        run_id            TEXT    NOT NULL,
        job_id            TEXT    NOT NULL,
        scheduled_for     INTEGER NOT NULL,
        trigger_kind      TEXT    NOT NULL,
        state             TEXT    NOT NULL,
        priority          INTEGER NOT NULL,
        not_before        INTEGER NOT NULL,
        max_attempts      INTEGER NOT NULL,
        created_at        INTEGER NOT NULL,
        started_at        INTEGER,
        finished_at       INTEGER,
        lease_owner       TEXT,
        lease_token       INTEGER,
        lease_expires     INTEGER,
        cancel_requested  INTEGER NOT NULL DEFAULT 0,
        reason            TEXT,
        attempts          TEXT    NOT NULL DEFAULT '[]',
        last_token        INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant, run_id)
    ) STRICT;
    CREATE INDEX runs_by_job  ON runs (tenant, job_id, scheduled_for, run_id);
    CREATE INDEX runs_by_time ON runs (tenant, scheduled_for, run_id);
    CREATE INDEX runs_active  ON runs (tenant, job_id, scheduled_for, run_id)
        WHERE state IN ('PENDING', 'RUNNING');
    CREATE INDEX runs_leases  ON runs (lease_expires) WHERE state = 'RUNNING';
    CREATE INDEX runs_pending ON runs (not_before) WHERE state = 'PENDING';

    CREATE TABLE idempotency_keys (
        tenant       TEXT    NOT NULL,
        key          TEXT    NOT NULL,
        fingerprint  TEXT    NOT NULL,
        job_ids      TEXT    NOT NULL,
        created_at   INTEGER NOT NULL,
        PRIMARY KEY (tenant, key)
    ) STRICT;

    CREATE TABLE dispatch (
        seq            INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant         TEXT    NOT NULL,
        run_id         TEXT    NOT NULL,
        priority       INTEGER NOT NULL,
        not_before     INTEGER NOT NULL,
        rank           INTEGER NOT NULL,
        visible_at     INTEGER NOT NULL,
        receipt        TEXT,
        receive_count  INTEGER NOT NULL DEFAULT 0,
        UNIQUE (tenant, run_id)
    ) STRICT;
    CREATE INDEX dispatch_receive ON dispatch (rank, seq, visible_at);
    CREATE INDEX dispatch_visible ON dispatch (visible_at);
    "#,
    // 2: API keys, by the hash of their secret.
    r#"
    CREATE TABLE api_keys (
        id          TEXT    NOT NULL PRIMARY KEY,
        hash        TEXT    NOT NULL UNIQUE,
        tenant      TEXT    NOT NULL,
        role        TEXT    NOT NULL,
        name        TEXT    NOT NULL,
        created_at  INTEGER NOT NULL,
        revoked_at  INTEGER
    ) STRICT;
    CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at, id);
    "#,
    // 3: tenants' quotas, and each tenant's count of jobs ACTIVE or PAUSED, kept by triggers
    // on every write of `jobs` (so no code path can forget it), started from the jobs there are.
    r#"
    CREATE TABLE tenant_quotas (
        tenant               TEXT    NOT NULL PRIMARY KEY,
        max_active_jobs      INTEGER,
        max_concurrent_runs  INTEGER,
        rate_per_second      REAL,
        rate_burst           INTEGER
    ) STRICT;

    CREATE TABLE tenant_usage (
        tenant       TEXT    NOT NULL PRIMARY KEY,
        active_jobs  INTEGER NOT NULL
    ) STRICT;
    INSERT INTO tenant_usage (tenant, active_jobs)
        SELECT tenant, count(*) FROM jobs WHERE state IN ('ACTIVE', 'PAUSED') GROUP BY tenant;

    CREATE TRIGGER jobs_usage_insert AFTER INSERT ON jobs
        WHEN new.state IN ('ACTIVE', 'PAUSED')
    BEGIN
        INSERT INTO tenant_usage (tenant, active_jobs) VALUES (new.tenant, 1)
            ON CONFLICT (tenant) DO UPDATE SET active_jobs = active_jobs + 1;
    END;
    CREATE TRIGGER jobs_usage_update AFTER UPDATE OF state ON jobs
        WHEN (old.state IN ('ACTIVE', 'PAUSED')) != (new.state IN ('ACTIVE', 'PAUSED'))
    BEGIN
        INSERT INTO tenant_usage (tenant, active_jobs)
            VALUES (new.tenant, CASE WHEN new.state IN ('ACTIVE', 'PAUSED') THEN 1 ELSE -1 END)
            ON CONFLICT (tenant) DO UPDATE SET active_jobs = active_jobs + excluded.active_jobs;
    END;
    CREATE TRIGGER jobs_usage_delete AFTER DELETE ON jobs
        WHEN old.state IN ('ACTIVE', 'PAUSED')
    BEGIN
        UPDATE tenant_usage SET active_jobs = active_jobs - 1 WHERE tenant = old.tenant;
    END;
    "#,
    // 4: fair turns across tenants in the dispatch queue: each tenant's messages in serving
    // order, and the turn in which each tenant was last served.
    r#"
    CREATE INDEX dispatch_by_tenant ON dispatch (tenant, rank, seq, visible_at);
    CREATE TABLE dispatch_turns (
        tenant  TEXT    NOT NULL PRIMARY KEY,
        turn    INTEGER NOT NULL
    ) STRICT;
    "#,
    // 5: concurrency keys: each run's key and limit (copied from its job at creation), the
    // runs holding a key counted by `runs_by_key`, and messages parked on a full key.
    r#"
    ALTER TABLE runs ADD COLUMN concurrency_key TEXT;
    ALTER TABLE runs ADD COLUMN concurrency_limit INTEGER;
    CREATE INDEX runs_by_key ON runs (tenant, concurrency_key, lease_expires)
        WHERE state = 'RUNNING' AND concurrency_key IS NOT NULL;
    ALTER TABLE dispatch ADD COLUMN parked_on TEXT;
    CREATE INDEX dispatch_parked ON dispatch (tenant, parked_on, rank, seq) WHERE parked_on IS NOT NULL;
    "#,
    // 6: dependencies: which jobs run after which (kept by every write of a job), and the
    // `after` occurrences waiting for more upstreams, with the deadline of their `within`.
    r#"
    CREATE TABLE job_after (
        tenant      TEXT NOT NULL,
        upstream    TEXT NOT NULL,
        downstream  TEXT NOT NULL,
        PRIMARY KEY (tenant, upstream, downstream)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX job_after_by_downstream ON job_after (tenant, downstream);
    CREATE TABLE after_waits (
        tenant          TEXT    NOT NULL,
        job_id          TEXT    NOT NULL,
        scheduled_for   INTEGER NOT NULL,
        deadline        INTEGER NOT NULL,
        PRIMARY KEY (tenant, job_id, scheduled_for)
    ) STRICT, WITHOUT ROWID;
    CREATE INDEX after_waits_by_deadline ON after_waits (deadline);
    "#,
    // 7: the occurrence ledger's skip records: occurrences a firing skipped (consecutive ones
    // for one reason in one row), and pauses (count 0).
    r#"
    CREATE TABLE skip_records (
        tenant      TEXT    NOT NULL,
        job_id      TEXT    NOT NULL,
        from_ms     INTEGER NOT NULL,
        to_ms       INTEGER NOT NULL,
        count       INTEGER NOT NULL,
        reason      TEXT    NOT NULL,
        PRIMARY KEY (tenant, job_id, from_ms)
    ) STRICT, WITHOUT ROWID;
    "#,
    // 8: failure alerts: a run's (or a firing's skip record's) alert (its job's notify and the
    // delivery tries, JSON) and when it is next due (only while pending, so the indexes hold
    // only alerts to deliver); tenants' webhook secrets.
    r#"
    ALTER TABLE runs ADD COLUMN alert TEXT;
    ALTER TABLE runs ADD COLUMN alert_due INTEGER;
    CREATE INDEX runs_alerts_due ON runs (alert_due) WHERE alert_due IS NOT NULL;
    ALTER TABLE skip_records ADD COLUMN alert TEXT;
    ALTER TABLE skip_records ADD COLUMN alert_due INTEGER;
    CREATE INDEX skip_records_alerts_due ON skip_records (alert_due) WHERE alert_due IS NOT NULL;
    CREATE TABLE webhook_secrets (
        tenant      TEXT    NOT NULL PRIMARY KEY,
        secret      TEXT    NOT NULL,
        created_at  INTEGER NOT NULL
    ) STRICT;
    "#,
];

/// The schema version this build writes.
pub const LATEST: i64 = MIGRATIONS.len() as i64;

/// What [`migrate`] found that stops it.
#[derive(Debug)]
pub(crate) enum MigrateError {
    /// SQLite failed.
    Sql(rusqlite::Error),
    /// The database is not sked's (reason).
    NotSked(String),
    /// The schema is newer than [`LATEST`].
    TooNew(i64),
}

impl From<rusqlite::Error> for MigrateError {
    fn from(e: rusqlite::Error) -> Self {
        MigrateError::Sql(e)
    }
}

/// Reads, without writing anything, whether the file is one sked may use: a sked database
/// this build knows (answers its schema version), or an empty one (answers 0). Refuses
/// another application's database and a newer sked's.
pub(crate) fn check_ours(conn: &Connection) -> Result<i64, MigrateError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let app_id: i64 = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
    if version > LATEST {
        return Err(MigrateError::TooNew(version));
    }
    if app_id != APPLICATION_ID {
        let objects: i64 = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
        if version != 0 || objects != 0 {
            return Err(MigrateError::NotSked(format!(
                "it is an SQLite database of another application (application_id {app_id:#x}, {objects} schema objects)"
            )));
        }
    }
    Ok(version)
}

/// Brings the file to [`LATEST`], checking first (again, now under the write lock) that it
/// is sked's or empty.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), MigrateError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version = check_ours(&tx)?;
    let app_id: i64 = tx.pragma_query_value(None, "application_id", |r| r.get(0))?;
    if app_id != APPLICATION_ID {
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}
