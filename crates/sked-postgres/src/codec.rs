//! Rows to domain values and back: `jobs` rows ↔ [`Job`], `runs` rows ↔ [`Run`], and the
//! conversions every store module shares (instants, wire names, JSON columns).
//!
//! Timestamps are BIGINT milliseconds since the Unix epoch; enums are their wire names
//! (`ACTIVE`, `PENDING`, `schedule`, …); a job's spec and a run's attempts and alert are JSON
//! text, a job's labels JSONB (bound as text and cast: tokio-postgres is built here without
//! its serde_json feature). A port of the SQLite adapter's `codec`.
//! Must not: decide anything. Conditions live in `store` and the rules in `sked-core`.

use crate::tx::{Tx, TxError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sked_core::alert::Alert;
use sked_core::concurrency::Concurrency;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::{Job, JobSpec, JobState};
use sked_core::run::{Attempt, AttemptOutcome, Lease, Run, RunState, Trigger};
use sked_core::timestamp::{self, Timestamp};
use std::str::FromStr;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, ToSql};

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

/// A `LIMIT` as bound (PostgreSQL's is a BIGINT).
pub(crate) fn limit_param(n: usize) -> i64 {
    n.min(i64::MAX as usize) as i64
}

/// Column `i` of `row`. A value of the wrong type is a [`TxError::Codec`] (not `Pg`: an
/// error without SQLSTATE would read as a lost connection).
pub(crate) fn get<'a, T: FromSql<'a>>(row: &'a Row, i: usize) -> Result<T, TxError> {
    row.try_get(i).map_err(|e| TxError::Codec(format!("column {i}: {e}")))
}

/// A value that cannot be what it claims.
pub(crate) fn bad(msg: impl std::fmt::Display) -> TxError {
    TxError::Codec(msg.to_string())
}

/// `value` as JSON text.
pub(crate) fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String, TxError> {
    serde_json::to_string(value).map_err(bad)
}

/// A JSON text column's value.
pub(crate) fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, TxError> {
    serde_json::from_str(text).map_err(bad)
}

/// Parses a wire name stored in a text column.
fn parse<T: FromStr<Err = String>>(s: &str) -> Result<T, TxError> {
    s.parse().map_err(bad)
}

/// Decodes every row with `decode`.
pub(crate) fn decode_all<T>(rows: &[Row], decode: impl Fn(&Row) -> Result<T, TxError>) -> Result<Vec<T>, TxError> {
    rows.iter().map(decode).collect()
}

// ----- jobs -----

/// The `jobs` columns, in the order [`job_from_row`] reads them.
pub(crate) const JOB_COLS: &str = "tenant, id, state, next_fire_at, version, created_at, updated_at, spec";

/// Decodes a row selected with [`JOB_COLS`].
pub(crate) fn job_from_row(row: &Row) -> Result<Job, TxError> {
    let state: &str = get(row, 2)?;
    let spec: &str = get(row, 7)?;
    Ok(Job {
        tenant: TenantId(get(row, 0)?),
        id: JobId(get(row, 1)?),
        state: parse(state)?,
        next_fire_at: get::<Option<i64>>(row, 3)?.map(ts),
        version: get::<i64>(row, 4)? as u64,
        created_at: ts(get(row, 5)?),
        updated_at: ts(get(row, 6)?),
        spec: from_json::<JobSpec>(spec)?,
    })
}

/// Inserts `job`, replacing a row of the same (tenant, id), and keeps its `after` edges.
pub(crate) fn put_job(tx: &mut Tx, job: &Job) -> Result<(), TxError> {
    put_jobs(tx, std::slice::from_ref(job))
}

/// Inserts `jobs` (no two of one (tenant, id)), each replacing a row of its (tenant, id), and
/// keeps their `after` edges: one statement for the jobs, one or two for the edges, whatever
/// their number (a batch create of 1,000 jobs made 3,000 round trips).
pub(crate) fn put_jobs(tx: &mut Tx, jobs: &[Job]) -> Result<(), TxError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let labels = jobs
        .iter()
        .map(|j| to_json(&j.spec.labels))
        .collect::<Result<Vec<_>, _>>()?;
    let specs = jobs.iter().map(|j| to_json(&j.spec)).collect::<Result<Vec<_>, _>>()?;
    let column = |f: fn(&Job) -> &str| jobs.iter().map(f).collect::<Vec<&str>>();
    let instants = |f: fn(&Job) -> Timestamp| jobs.iter().map(|j| ms(f(j))).collect::<Vec<i64>>();
    tx.execute(
        "INSERT INTO jobs (tenant, id, state, next_fire_at, version, created_at, updated_at, labels, spec)
         SELECT tenant, id, state, next_fire_at, version, created_at, updated_at, labels::jsonb, spec
         FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
                     $7::bigint[], $8::text[], $9::text[])
           AS j(tenant, id, state, next_fire_at, version, created_at, updated_at, labels, spec)
         ON CONFLICT (tenant, id) DO UPDATE SET
           state = excluded.state, next_fire_at = excluded.next_fire_at, version = excluded.version,
           created_at = excluded.created_at, updated_at = excluded.updated_at,
           labels = excluded.labels, spec = excluded.spec",
        &[
            &column(|j| j.tenant.as_str()),
            &column(|j| j.id.as_str()),
            &column(|j| j.state.as_str()),
            &jobs
                .iter()
                .map(|j| ms_opt(j.next_fire_at))
                .collect::<Vec<Option<i64>>>(),
            &jobs.iter().map(|j| j.version as i64).collect::<Vec<i64>>(),
            &instants(|j| j.created_at),
            &instants(|j| j.updated_at),
            &labels,
            &specs,
        ],
    )?;
    crate::dependencies::write_edges(tx, jobs)
}

/// One job by key.
pub(crate) fn load_job(tx: &mut Tx, tenant: &str, id: &str) -> Result<Option<Job>, TxError> {
    let row = tx.query_opt(
        &format!("SELECT {JOB_COLS} FROM jobs WHERE tenant = $1 AND id = $2"),
        &[&tenant, &id],
    )?;
    row.as_ref().map(job_from_row).transpose()
}

/// The states of those of `keys` (tenant, id) that exist, in one statement.
pub(crate) fn job_states(
    tx: &mut Tx,
    keys: &[(&str, &str)],
) -> Result<std::collections::HashMap<(String, String), JobState>, TxError> {
    let (tenants, ids): (Vec<&str>, Vec<&str>) = keys.iter().copied().unzip();
    tx.query(
        "SELECT tenant, id, state FROM jobs WHERE (tenant, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
        &[&tenants, &ids],
    )?
    .iter()
    .map(|r| Ok(((get(r, 0)?, get(r, 1)?), parse(get::<&str>(r, 2)?)?)))
    .collect()
}

// ----- runs -----

/// The `runs` columns, in the order [`run_from_row`] reads and [`RunRow::insert`] binds.
pub(crate) const RUN_COLS: &str = "tenant, run_id, job_id, scheduled_for, trigger_kind, state, priority, not_before, \
     max_attempts, created_at, started_at, finished_at, lease_owner, lease_token, lease_expires, \
     cancel_requested, reason, attempts, last_token, concurrency_key, concurrency_limit, alert, alert_due";

/// One attempt as kept in the `attempts` JSON array (instants in ms); the same shape as the
/// SQLite adapter's.
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
pub(crate) fn run_from_row(row: &Row) -> Result<StoredRun, TxError> {
    run_from_row_at(row, 0)
}

/// Decodes a row whose columns from `first` on are [`RUN_COLS`].
pub(crate) fn run_from_row_at(row: &Row, first: usize) -> Result<StoredRun, TxError> {
    let col = |i: usize| first + i;
    let trigger: &str = get(row, col(4))?;
    let state: &str = get(row, col(5))?;
    let attempts: Vec<AttemptJson> = from_json(get::<&str>(row, col(17))?)?;
    let lease_owner: Option<String> = get(row, col(12))?;
    let lease_token: Option<i64> = get(row, col(13))?;
    let lease_expires: Option<i64> = get(row, col(14))?;
    let lease = match (lease_owner, lease_token, lease_expires) {
        (Some(owner), Some(token), Some(expires)) => Some(Lease {
            owner: WorkerId(owner),
            token: token as u64,
            expires_at: ts(expires),
        }),
        (None, None, None) => None,
        _ => return Err(bad("run with a partial lease")),
    };
    let concurrency = match (get::<Option<String>>(row, col(19))?, get::<Option<i64>>(row, col(20))?) {
        (Some(key), Some(limit)) => Some(Concurrency {
            key,
            limit: u32::try_from(limit).map_err(bad)?,
        }),
        (None, None) => None,
        _ => return Err(bad("run with a partial concurrency key")),
    };
    let alert = get::<Option<&str>>(row, col(21))?.map(from_json::<Alert>).transpose()?;
    Ok(StoredRun {
        run: Run {
            tenant: TenantId(get(row, col(0))?),
            run_id: RunId(get(row, col(1))?),
            job_id: JobId(get(row, col(2))?),
            scheduled_for: ts(get(row, col(3))?),
            trigger: parse::<Trigger>(trigger)?,
            state: parse::<RunState>(state)?,
            priority: u8::try_from(get::<i64>(row, col(6))?).map_err(bad)?,
            not_before: ts(get(row, col(7))?),
            max_attempts: get::<i64>(row, col(8))? as u32,
            created_at: ts(get(row, col(9))?),
            started_at: get::<Option<i64>>(row, col(10))?.map(ts),
            finished_at: get::<Option<i64>>(row, col(11))?.map(ts),
            lease,
            cancel_requested: get(row, col(15))?,
            reason: get(row, col(16))?,
            attempts: attempts
                .into_iter()
                .map(AttemptJson::into_attempt)
                .collect::<Result<_, _>>()?,
            concurrency,
            alert,
        },
        last_token: get::<i64>(row, col(18))? as u64,
    })
}

/// Decodes every row selected with [`RUN_COLS`] into its run.
pub(crate) fn runs_of(rows: &[Row]) -> Result<Vec<Run>, TxError> {
    decode_all(rows, |r| Ok(run_from_row(r)?.run))
}

/// One column of `rows`, as an array to bind for `unnest`.
fn col<'a, T>(rows: &'a [RunRow], f: impl Fn(&'a RunRow) -> T) -> Vec<T> {
    rows.iter().map(f).collect()
}

/// A run's column values, owned, ready to bind as `$1..$23` in [`RUN_COLS`] order.
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
            attempts: to_json(&attempts)?,
            last_token: last_token as i64,
            concurrency_key: run.concurrency.as_ref().map(|c| c.key.clone()),
            concurrency_limit: run.concurrency.as_ref().map(|c| i64::from(c.limit)),
            alert: run.alert.as_ref().map(to_json).transpose()?,
            alert_due: run.alert.as_ref().and_then(|a| a.due).map(ms),
        })
    }

    /// Whether `other` is a row of the same run.
    pub(crate) fn same_run(&self, other: &RunRow) -> bool {
        self.tenant == other.tenant && self.run_id == other.run_id
    }

    /// Inserts the run unless (tenant, run_id) exists; returns whether it was inserted.
    pub(crate) fn insert(&self, tx: &mut Tx) -> Result<bool, TxError> {
        let n = tx.execute(
            &format!(
                "INSERT INTO runs ({RUN_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
                 ON CONFLICT (tenant, run_id) DO NOTHING"
            ),
            &[
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
            ],
        )?;
        Ok(n == 1)
    }

    /// Writes the settings an unstarted run takes from its changed job
    /// (`Run::take_settings`): priority, attempts, concurrency key, alert.
    pub(crate) fn update_settings(&self, tx: &mut Tx) -> Result<(), TxError> {
        tx.execute(
            "UPDATE runs SET priority = $3, max_attempts = $4, concurrency_key = $5,
               concurrency_limit = $6, alert = $7, alert_due = $8
             WHERE tenant = $1 AND run_id = $2",
            &[
                &self.tenant,
                &self.run_id,
                &self.priority,
                &self.max_attempts,
                &self.concurrency_key,
                &self.concurrency_limit,
                &self.alert,
                &self.alert_due,
            ],
        )?;
        Ok(())
    }

    /// Inserts each of `rows` unless its (tenant, run_id) exists (or an earlier row of
    /// `rows` has it), in one statement; answers the (tenant, run_id) of those inserted.
    pub(crate) fn insert_all(tx: &mut Tx, rows: &[RunRow]) -> Result<Vec<(String, String)>, TxError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let inserted = tx.query(
            &format!(
                "INSERT INTO runs ({RUN_COLS})
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[],
                   $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[],
                   $13::text[], $14::bigint[], $15::bigint[], $16::boolean[], $17::text[], $18::text[],
                   $19::bigint[], $20::text[], $21::bigint[], $22::text[], $23::bigint[])
                 ON CONFLICT (tenant, run_id) DO NOTHING
                 RETURNING tenant, run_id"
            ),
            &[
                &col(rows, |r| r.tenant.as_str()),
                &col(rows, |r| r.run_id.as_str()),
                &col(rows, |r| r.job_id.as_str()),
                &col(rows, |r| r.scheduled_for),
                &col(rows, |r| r.trigger),
                &col(rows, |r| r.state),
                &col(rows, |r| r.priority),
                &col(rows, |r| r.not_before),
                &col(rows, |r| r.max_attempts),
                &col(rows, |r| r.created_at),
                &col(rows, |r| r.started_at),
                &col(rows, |r| r.finished_at),
                &col(rows, |r| r.lease_owner.as_deref()),
                &col(rows, |r| r.lease_token),
                &col(rows, |r| r.lease_expires),
                &col(rows, |r| r.cancel_requested),
                &col(rows, |r| r.reason.as_deref()),
                &col(rows, |r| r.attempts.as_str()),
                &col(rows, |r| r.last_token),
                &col(rows, |r| r.concurrency_key.as_deref()),
                &col(rows, |r| r.concurrency_limit),
                &col(rows, |r| r.alert.as_deref()),
                &col(rows, |r| r.alert_due),
            ],
        )?;
        inserted.iter().map(|row| Ok((get(row, 0)?, get(row, 1)?))).collect()
    }

    /// The columns of `rows` that [`UPDATE_RUNS`] binds (at most one row per (tenant,
    /// run_id)).
    pub(crate) fn update_columns(rows: &[RunRow]) -> RunUpdate<'_> {
        RunUpdate {
            tenant: col(rows, |r| r.tenant.as_str()),
            run_id: col(rows, |r| r.run_id.as_str()),
            job_id: col(rows, |r| r.job_id.as_str()),
            scheduled_for: col(rows, |r| r.scheduled_for),
            state: col(rows, |r| r.state),
            not_before: col(rows, |r| r.not_before),
            started_at: col(rows, |r| r.started_at),
            finished_at: col(rows, |r| r.finished_at),
            lease_owner: col(rows, |r| r.lease_owner.as_deref()),
            lease_token: col(rows, |r| r.lease_token),
            lease_expires: col(rows, |r| r.lease_expires),
            cancel_requested: col(rows, |r| r.cancel_requested),
            reason: col(rows, |r| r.reason.as_deref()),
            attempts: col(rows, |r| r.attempts.as_str()),
            last_token: col(rows, |r| r.last_token),
            alert: col(rows, |r| r.alert.as_deref()),
            alert_due: col(rows, |r| r.alert_due),
        }
    }
}

/// Overwrites the stored run of each row of a [`RunUpdate`], in one statement: the columns a
/// run's life changes (job, nominal time, trigger, priority, creation and concurrency key are
/// fixed at creation). Sent by [`Tx`] for the runs a transaction wrote ([`Tx::write_run`]).
/// Each row is matched on its job and nominal time too ([`RUN_KEYS_IN`] says why).
pub(crate) const UPDATE_RUNS: &str = "UPDATE runs SET state = u.state, not_before = u.not_before,
       started_at = u.started_at, finished_at = u.finished_at, lease_owner = u.lease_owner,
       lease_token = u.lease_token, lease_expires = u.lease_expires,
       cancel_requested = u.cancel_requested, reason = u.reason, attempts = u.attempts,
       last_token = u.last_token, alert = u.alert, alert_due = u.alert_due
     FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
       $7::text[], $8::bigint[], $9::bigint[], $10::boolean[], $11::text[], $12::text[],
       $13::bigint[], $14::text[], $15::bigint[], $16::text[], $17::bigint[])
       AS u(tenant, run_id, state, not_before, started_at, finished_at, lease_owner, lease_token,
            lease_expires, cancel_requested, reason, attempts, last_token, alert, alert_due,
            job_id, scheduled_for)
     WHERE runs.tenant = u.tenant AND runs.run_id = u.run_id
       AND runs.job_id = u.job_id AND runs.scheduled_for = u.scheduled_for";

/// A condition on `runs` matching the keys [`RunKeys`] binds as `$1..$4`: each run by tenant
/// and run id, and by the job and nominal time its id names, so that whichever of the indexes
/// led by the tenant a plan looks a key up in (the primary key, `runs_by_time`,
/// `runs_by_job`), the lookup is exact. Matched on the tenant and run id alone, a plan made
/// while `runs` held a few rows (the hand-over's statements are prepared once per connection,
/// and PostgreSQL may keep a generic plan from their sixth execution) can look each key up in
/// `runs_by_time` by tenant alone — every run of the tenant per key once the table has grown
/// (measured: a 20,000-run burst drained at half the speed on the connections that kept such a
/// plan). A run's id is always derived from its job and nominal time (`RunId::derive`); a key
/// whose id names none matches no run, as no run has it.
pub(crate) const RUN_KEYS_IN: &str = "(tenant, run_id, job_id, scheduled_for) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]))";

/// Run keys as [`RUN_KEYS_IN`] binds them.
pub(crate) struct RunKeys<'a> {
    tenants: Vec<&'a str>,
    run_ids: Vec<&'a str>,
    job_ids: Vec<String>,
    scheduled_for: Vec<i64>,
}

impl<'a> RunKeys<'a> {
    /// The keys (tenant, run id) with the job and nominal time each id names.
    pub(crate) fn of(keys: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut out = RunKeys {
            tenants: Vec::new(),
            run_ids: Vec::new(),
            job_ids: Vec::new(),
            scheduled_for: Vec::new(),
        };
        for (tenant, run_id) in keys {
            let (job_id, at) = RunId::from(run_id)
                .parts()
                .map_or((String::new(), i64::MIN), |(job, at)| (job.0, at.timestamp_millis()));
            out.tenants.push(tenant);
            out.run_ids.push(run_id);
            out.job_ids.push(job_id);
            out.scheduled_for.push(at);
        }
        out
    }

    /// `$1..$4` of [`RUN_KEYS_IN`].
    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 4] {
        [&self.tenants, &self.run_ids, &self.job_ids, &self.scheduled_for]
    }
}

/// The arrays [`UPDATE_RUNS`] binds, borrowed from the rows written.
pub(crate) struct RunUpdate<'a> {
    tenant: Vec<&'a str>,
    run_id: Vec<&'a str>,
    job_id: Vec<&'a str>,
    scheduled_for: Vec<i64>,
    state: Vec<&'static str>,
    not_before: Vec<i64>,
    started_at: Vec<Option<i64>>,
    finished_at: Vec<Option<i64>>,
    lease_owner: Vec<Option<&'a str>>,
    lease_token: Vec<Option<i64>>,
    lease_expires: Vec<Option<i64>>,
    cancel_requested: Vec<bool>,
    reason: Vec<Option<&'a str>>,
    attempts: Vec<&'a str>,
    last_token: Vec<i64>,
    alert: Vec<Option<&'a str>>,
    alert_due: Vec<Option<i64>>,
}

impl RunUpdate<'_> {
    /// `$1..$17` of [`UPDATE_RUNS`].
    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 17] {
        [
            &self.tenant,
            &self.run_id,
            &self.state,
            &self.not_before,
            &self.started_at,
            &self.finished_at,
            &self.lease_owner,
            &self.lease_token,
            &self.lease_expires,
            &self.cancel_requested,
            &self.reason,
            &self.attempts,
            &self.last_token,
            &self.alert,
            &self.alert_due,
            &self.job_id,
            &self.scheduled_for,
        ]
    }
}

/// One run by key.
pub(crate) fn load_run(tx: &mut Tx, tenant: &str, run_id: &str) -> Result<Option<StoredRun>, TxError> {
    let row = tx.query_opt(
        &format!("SELECT {RUN_COLS} FROM runs WHERE tenant = $1 AND run_id = $2"),
        &[&tenant, &run_id],
    )?;
    row.as_ref().map(run_from_row).transpose()
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

#[cfg(test)]
mod tests {
    //! The run-key lookups stay exact in any plan PostgreSQL may keep for them.
    use super::*;
    use crate::testing::postgres;
    use crate::{PgDb, PgOptions};

    /// Each `runs` index scan of a plan, and the lines of its node (its conditions).
    fn runs_index_scans(plan: &[String]) -> Vec<String> {
        let mut scans: Vec<String> = Vec::new();
        for line in plan {
            if line.contains("Index Scan") || line.contains("Index Only Scan") || line.contains("Bitmap Index Scan") {
                scans.push(line.trim().to_string());
            } else if line.trim_start().starts_with("Index Cond")
                && let Some(scan) = scans.last_mut()
            {
                scan.push(' ');
                scan.push_str(line.trim());
            }
        }
        scans.retain(|scan| scan.contains(" on runs"));
        scans
    }

    /// `EXPLAIN EXECUTE` of `statement` prepared and planned generically on a `runs` with no
    /// row yet (with `$n` bound to NULL: a generic plan does not look at the values).
    async fn generic_plan(db: &PgDb, statement: &str, params: usize) -> Vec<String> {
        let client = db.get().await.unwrap();
        client
            .batch_execute(&format!(
                "SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan;
                 PREPARE looked_up AS {statement}"
            ))
            .await
            .unwrap();
        let nulls = vec!["NULL"; params].join(", ");
        let rows = client
            .simple_query(&format!("EXPLAIN EXECUTE looked_up({nulls})"))
            .await
            .unwrap();
        client.batch_execute("DEALLOCATE looked_up; RESET ALL").await.unwrap();
        rows.iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
                _ => None,
            })
            .collect()
    }

    /// A generic plan made while `runs` is empty (as the hand-over's statements may keep one
    /// from their sixth execution on a new database) looks each key up by all its columns in
    /// whichever index it picks: never by the tenant alone, which walks every run of the
    /// tenant per key once the table has grown.
    #[tokio::test]
    async fn a_plan_made_on_an_empty_table_looks_each_run_key_up_exactly() {
        let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
            .await
            .unwrap();
        let lock = format!("SELECT tenant FROM runs WHERE {RUN_KEYS_IN} ORDER BY tenant, run_id FOR UPDATE OF runs");
        for (what, statement, params) in [("lock", lock.as_str(), 4), ("update", UPDATE_RUNS, 17)] {
            let plan = generic_plan(&db, statement, params).await;
            let scans = runs_index_scans(&plan);
            assert!(!scans.is_empty(), "{what}: an index scan of runs: {plan:#?}");
            for scan in scans {
                let exact = scan.contains("runs_pkey")
                    || (scan.contains("runs_by_time") && scan.contains("scheduled_for"))
                    || (scan.contains("runs_by_job") && scan.contains("job_id") && scan.contains("scheduled_for"));
                assert!(
                    exact,
                    "{what}: a key looked up by less than its columns: {scan}\n{plan:#?}"
                );
            }
        }
    }

    /// The hand-over plans generically (`tx.rs`): a statement that counts or reads runs
    /// through a partial index names the index's predicate with literals, so a generic plan
    /// made on an empty table still uses the partial index (a parameter in its place would
    /// leave the plan a walk of a full index, filtered row by row).
    #[tokio::test]
    async fn a_generic_plan_reads_runs_through_their_partial_indexes() {
        let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
            .await
            .unwrap();
        let statements = [
            ("runs_active", crate::store::ACTIVE_RUNS.as_str(), 2),
            ("runs_slots", crate::quotas::TENANT_RUNNING, 2),
            ("runs_by_key", crate::quotas::KEY_HOLDERS, 3),
        ];
        for (index, statement, params) in statements {
            let plan = generic_plan(&db, statement, params).await;
            let scans = runs_index_scans(&plan);
            assert!(
                !scans.is_empty() && scans.iter().all(|scan| scan.contains(index)),
                "{index}: {plan:#?}"
            );
        }
    }
}
