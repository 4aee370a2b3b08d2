//! Rows to domain values and back: `jobs` rows ↔ [`Job`], `runs` rows ↔ [`Run`].
//!
//! Timestamps are integer milliseconds since the Unix epoch; enums are their wire names
//! (`ACTIVE`, `PENDING`, `schedule`, …); a job's spec and a run's attempts are JSON.
//! Must not: decide anything. Conditions live in [`super::store`].

use super::error::TxError;
use rusqlite::types::ToSql;
use rusqlite::{Connection, OptionalExtension, Row};
use serde::{Deserialize, Serialize};
use sked_core::alert::Alert;
use sked_core::concurrency::Concurrency;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::{Job, JobSpec, JobState};
use sked_core::run::{Attempt, AttemptOutcome, Lease, Run, RunState, Trigger};
use sked_core::timestamp::{self, Timestamp};
use std::str::FromStr;

/// An instant as stored.
pub(crate) fn ms(t: Timestamp) -> i64 {
    t.timestamp_millis()
}

/// An optional instant as stored.
pub(crate) fn ms_opt(t: Option<Timestamp>) -> Option<i64> {
    t.map(ms)
}

/// A stored instant.
pub(crate) fn ts(ms: i64) -> Timestamp {
    timestamp::from_ms(ms)
}

/// Parses a wire name stored in a text column.
fn parse<T: FromStr<Err = String>>(s: &str) -> Result<T, TxError> {
    s.parse().map_err(TxError::bad)
}

// ----- jobs -----

/// The `jobs` columns, in the order [`job_from_row`] reads them.
pub(crate) const JOB_COLS: &str = "tenant, id, state, next_fire_at, version, created_at, updated_at, spec";

/// Decodes a row selected with [`JOB_COLS`].
pub(crate) fn job_from_row(row: &Row<'_>) -> Result<Job, TxError> {
    let state: String = row.get(2)?;
    let spec: String = row.get(7)?;
    Ok(Job {
        tenant: TenantId(row.get(0)?),
        id: JobId(row.get(1)?),
        state: parse(&state)?,
        next_fire_at: row.get::<_, Option<i64>>(3)?.map(ts),
        version: row.get::<_, i64>(4)? as u64,
        created_at: ts(row.get(5)?),
        updated_at: ts(row.get(6)?),
        spec: serde_json::from_str::<JobSpec>(&spec)?,
    })
}

/// Inserts `job`, replacing a row of the same (tenant, id).
pub(crate) fn put_job(conn: &Connection, job: &Job) -> Result<(), TxError> {
    let labels = serde_json::to_string(&job.spec.labels)?;
    let spec = serde_json::to_string(&job.spec)?;
    conn.prepare_cached(
        "INSERT INTO jobs (tenant, id, state, next_fire_at, version, created_at, updated_at, labels, spec)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (tenant, id) DO UPDATE SET
           state = excluded.state, next_fire_at = excluded.next_fire_at, version = excluded.version,
           created_at = excluded.created_at, updated_at = excluded.updated_at,
           labels = excluded.labels, spec = excluded.spec",
    )?
    .execute(rusqlite::params![
        job.tenant.as_str(),
        job.id.as_str(),
        job.state.as_str(),
        ms_opt(job.next_fire_at),
        job.version as i64,
        ms(job.created_at),
        ms(job.updated_at),
        labels,
        spec,
    ])?;
    super::dependencies::write_edges(conn, job)
}

/// One job by key.
pub(crate) fn load_job(conn: &Connection, tenant: &str, id: &str) -> Result<Option<Job>, TxError> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {JOB_COLS} FROM jobs WHERE tenant = ?1 AND id = ?2"))?;
    let mut rows = stmt.query([tenant, id])?;
    match rows.next()? {
        Some(row) => Ok(Some(job_from_row(row)?)),
        None => Ok(None),
    }
}

/// A job's state, if it exists.
pub(crate) fn job_state(conn: &Connection, tenant: &str, id: &str) -> Result<Option<JobState>, TxError> {
    let state: Option<String> = conn
        .prepare_cached("SELECT state FROM jobs WHERE tenant = ?1 AND id = ?2")?
        .query_row([tenant, id], |r| r.get(0))
        .optional()?;
    state.map(|s| parse(&s)).transpose()
}

// ----- runs -----

/// The `runs` columns, in the order [`run_from_row`] reads and [`RunRow::params`] binds.
pub(crate) const RUN_COLS: &str = "tenant, run_id, job_id, scheduled_for, trigger_kind, state, priority, not_before, \
     max_attempts, created_at, started_at, finished_at, lease_owner, lease_token, lease_expires, \
     cancel_requested, reason, attempts, last_token, concurrency_key, concurrency_limit, alert, alert_due";

/// One attempt as kept in the `attempts` JSON array (instants in ms).
#[derive(Debug, Serialize, Deserialize)]
struct AttemptJson {
    attempt: u32,
    worker: String,
    started_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    finished_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    http_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default)]
    log_bytes: u64,
    #[serde(default)]
    log_truncated: bool,
}

impl AttemptJson {
    fn from_attempt(a: &Attempt) -> Self {
        AttemptJson {
            attempt: a.attempt,
            worker: a.worker.0.clone(),
            started_at: ms(a.started_at),
            finished_at: ms_opt(a.finished_at),
            outcome: a.outcome.map(|o| o.as_str().to_string()),
            exit_code: a.exit_code,
            http_status: a.http_status,
            error: a.error.clone(),
            log_bytes: a.log_bytes,
            log_truncated: a.log_truncated,
        }
    }

    fn into_attempt(self) -> Result<Attempt, TxError> {
        Ok(Attempt {
            attempt: self.attempt,
            worker: WorkerId(self.worker),
            started_at: ts(self.started_at),
            finished_at: self.finished_at.map(ts),
            outcome: self.outcome.as_deref().map(parse::<AttemptOutcome>).transpose()?,
            exit_code: self.exit_code,
            http_status: self.http_status,
            error: self.error,
            log_bytes: self.log_bytes,
            log_truncated: self.log_truncated,
        })
    }
}

/// A run and the highest fencing token ever issued for it (kept apart from the lease,
/// which is cleared when an attempt ends).
#[derive(Debug, Clone)]
pub(crate) struct StoredRun {
    /// The run.
    pub run: Run,
    /// `last_token`.
    pub last_token: u64,
}

/// Decodes a row selected with [`RUN_COLS`].
pub(crate) fn run_from_row(row: &Row<'_>) -> Result<StoredRun, TxError> {
    run_from_row_at(row, 0)
}

/// Decodes a row whose columns from `first` on are [`RUN_COLS`].
pub(crate) fn run_from_row_at(row: &Row<'_>, first: usize) -> Result<StoredRun, TxError> {
    let col = |i: usize| first + i;
    let trigger: String = row.get(col(4))?;
    let state: String = row.get(col(5))?;
    let attempts: String = row.get(col(17))?;
    let attempts: Vec<AttemptJson> = serde_json::from_str(&attempts)?;
    let lease_owner: Option<String> = row.get(col(12))?;
    let lease_token: Option<i64> = row.get(col(13))?;
    let lease_expires: Option<i64> = row.get(col(14))?;
    let lease = match (lease_owner, lease_token, lease_expires) {
        (Some(owner), Some(token), Some(expires)) => Some(Lease {
            owner: WorkerId(owner),
            token: token as u64,
            expires_at: ts(expires),
        }),
        (None, None, None) => None,
        _ => return Err(TxError::bad("run with a partial lease")),
    };
    let concurrency = match (
        row.get::<_, Option<String>>(col(19))?,
        row.get::<_, Option<i64>>(col(20))?,
    ) {
        (Some(key), Some(limit)) => Some(Concurrency {
            key,
            limit: u32::try_from(limit).map_err(|e| TxError::bad(e.to_string()))?,
        }),
        (None, None) => None,
        _ => return Err(TxError::bad("run with a partial concurrency key")),
    };
    let alert = row
        .get::<_, Option<String>>(col(21))?
        .map(|a| serde_json::from_str::<Alert>(&a))
        .transpose()?;
    Ok(StoredRun {
        run: Run {
            tenant: TenantId(row.get(col(0))?),
            run_id: RunId(row.get(col(1))?),
            job_id: JobId(row.get(col(2))?),
            scheduled_for: ts(row.get(col(3))?),
            trigger: parse::<Trigger>(&trigger)?,
            state: parse::<RunState>(&state)?,
            priority: u8::try_from(row.get::<_, i64>(col(6))?).map_err(|e| TxError::bad(e.to_string()))?,
            not_before: ts(row.get(col(7))?),
            max_attempts: row.get::<_, i64>(col(8))? as u32,
            created_at: ts(row.get(col(9))?),
            started_at: row.get::<_, Option<i64>>(col(10))?.map(ts),
            finished_at: row.get::<_, Option<i64>>(col(11))?.map(ts),
            lease,
            cancel_requested: row.get(col(15))?,
            reason: row.get(col(16))?,
            attempts: attempts
                .into_iter()
                .map(AttemptJson::into_attempt)
                .collect::<Result<_, _>>()?,
            concurrency,
            alert,
        },
        last_token: row.get::<_, i64>(col(18))? as u64,
    })
}

/// A run's column values, owned, ready to bind as `?1..?23` in [`RUN_COLS`] order.
pub(crate) struct RunRow {
    tenant: String,
    run_id: String,
    job_id: String,
    scheduled_for: i64,
    trigger: &'static str,
    state: &'static str,
    priority: i64,
    not_before: i64,
    max_attempts: i64,
    created_at: i64,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    lease_owner: Option<String>,
    lease_token: Option<i64>,
    lease_expires: Option<i64>,
    cancel_requested: bool,
    reason: Option<String>,
    attempts: String,
    last_token: i64,
    concurrency_key: Option<String>,
    concurrency_limit: Option<i64>,
    alert: Option<String>,
    alert_due: Option<i64>,
}

impl RunRow {
    /// Encodes `run`; `last_token` is raised to cover its lease and attempt count, so the
    /// next claim's token is greater than any this run has seen.
    pub(crate) fn new(run: &Run, last_token: u64) -> Result<Self, TxError> {
        let attempts: Vec<AttemptJson> = run.attempts.iter().map(AttemptJson::from_attempt).collect();
        let last_token = last_token
            .max(run.lease.as_ref().map_or(0, |l| l.token))
            .max(run.attempts.len() as u64);
        Ok(RunRow {
            tenant: run.tenant.0.clone(),
            run_id: run.run_id.0.clone(),
            job_id: run.job_id.0.clone(),
            scheduled_for: ms(run.scheduled_for),
            trigger: run.trigger.as_str(),
            state: run.state.as_str(),
            priority: i64::from(run.priority),
            not_before: ms(run.not_before),
            max_attempts: i64::from(run.max_attempts),
            created_at: ms(run.created_at),
            started_at: ms_opt(run.started_at),
            finished_at: ms_opt(run.finished_at),
            lease_owner: run.lease.as_ref().map(|l| l.owner.0.clone()),
            lease_token: run.lease.as_ref().map(|l| l.token as i64),
            lease_expires: run.lease.as_ref().map(|l| ms(l.expires_at)),
            cancel_requested: run.cancel_requested,
            reason: run.reason.clone(),
            attempts: serde_json::to_string(&attempts)?,
            last_token: last_token as i64,
            concurrency_key: run.concurrency.as_ref().map(|c| c.key.clone()),
            concurrency_limit: run.concurrency.as_ref().map(|c| i64::from(c.limit)),
            alert: run.alert.as_ref().map(serde_json::to_string).transpose()?,
            alert_due: run.alert.as_ref().and_then(|a| a.due).map(ms),
        })
    }

    /// The values in [`RUN_COLS`] order.
    fn params(&self) -> [&dyn ToSql; 23] {
        [
            &self.tenant,
            &self.run_id,
            &self.job_id,
            &self.scheduled_for,
            &self.trigger,
            &self.state,
            &self.priority,
            &self.not_before,
            &self.max_attempts,
            &self.created_at,
            &self.started_at,
            &self.finished_at,
            &self.lease_owner,
            &self.lease_token,
            &self.lease_expires,
            &self.cancel_requested,
            &self.reason,
            &self.attempts,
            &self.last_token,
            &self.concurrency_key,
            &self.concurrency_limit,
            &self.alert,
            &self.alert_due,
        ]
    }

    /// Inserts the run unless (tenant, run_id) exists; returns whether it was inserted.
    pub(crate) fn insert(&self, conn: &Connection) -> Result<bool, TxError> {
        let n = conn
            .prepare_cached(&format!(
                "INSERT INTO runs ({RUN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)
                 ON CONFLICT (tenant, run_id) DO NOTHING"
            ))?
            .execute(&self.params()[..])?;
        Ok(n == 1)
    }

    /// Overwrites the stored run of the same (tenant, run_id): the columns a run's life
    /// changes. SQLite rewrites every index over a column an UPDATE assigns, changed or not;
    /// the fixed ones (job, nominal time, trigger, priority, creation) stay out of the SET so
    /// that `runs_by_job` and `runs_by_time` are not rewritten on every claim and completion.
    pub(crate) fn update(&self, conn: &Connection) -> Result<(), TxError> {
        conn.prepare_cached(
            "UPDATE runs SET state = ?6, not_before = ?8, started_at = ?11, finished_at = ?12,
               lease_owner = ?13, lease_token = ?14, lease_expires = ?15, cancel_requested = ?16,
               reason = ?17, attempts = ?18, last_token = ?19, alert = ?22, alert_due = ?23
             WHERE tenant = ?1 AND run_id = ?2",
        )?
        // The concurrency key's columns (?20, ?21) are fixed at creation too: bound, not set.
        .execute(&self.params()[..])?;
        Ok(())
    }

    /// Writes the settings an unstarted run takes from its changed job ([`Run::take_settings`]):
    /// priority, attempts, concurrency key, alert.
    pub(crate) fn update_settings(&self, conn: &Connection) -> Result<(), TxError> {
        conn.prepare_cached(
            "UPDATE runs SET priority = ?7, max_attempts = ?9, concurrency_key = ?20,
               concurrency_limit = ?21, alert = ?22, alert_due = ?23
             WHERE tenant = ?1 AND run_id = ?2",
        )?
        .execute(&self.params()[..])?;
        Ok(())
    }
}

/// One run by key.
pub(crate) fn load_run(conn: &Connection, tenant: &str, run_id: &str) -> Result<Option<StoredRun>, TxError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLS} FROM runs WHERE tenant = ?1 AND run_id = ?2"
    ))?;
    let mut rows = stmt.query([tenant, run_id])?;
    match rows.next()? {
        Some(row) => Ok(Some(run_from_row(row)?)),
        None => Ok(None),
    }
}

/// Runs every row of a prepared query through [`run_from_row`].
pub(crate) fn collect_runs(mut rows: rusqlite::Rows<'_>) -> Result<Vec<Run>, TxError> {
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(run_from_row(row)?.run);
    }
    Ok(out)
}

/// Runs every row of a prepared query through [`job_from_row`].
pub(crate) fn collect_jobs(mut rows: rusqlite::Rows<'_>) -> Result<Vec<Job>, TxError> {
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(job_from_row(row)?);
    }
    Ok(out)
}

/// `run` as it reads back: every instant truncated to whole milliseconds.
pub(crate) fn truncated(run: &Run) -> Run {
    let mut r = run.clone();
    r.scheduled_for = timestamp::trunc_ms(r.scheduled_for);
    r.not_before = timestamp::trunc_ms(r.not_before);
    r.created_at = timestamp::trunc_ms(r.created_at);
    r.started_at = r.started_at.map(timestamp::trunc_ms);
    r.finished_at = r.finished_at.map(timestamp::trunc_ms);
    for a in &mut r.attempts {
        a.started_at = timestamp::trunc_ms(a.started_at);
        a.finished_at = a.finished_at.map(timestamp::trunc_ms);
    }
    if let Some(l) = &mut r.lease {
        l.expires_at = timestamp::trunc_ms(l.expires_at);
    }
    r
}
