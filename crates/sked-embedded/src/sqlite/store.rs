//! [`SqliteStore`]: the [`JobStore`] over the `jobs`, `runs` and `idempotency_keys` tables.
//!
//! Every conditional write (create, update, fire, claim, heartbeat, complete, cancel) is one
//! `BEGIN IMMEDIATE` transaction that reads the row, decides, and writes — so the decision
//! holds against other connections and other processes on the same file. A refused write
//! returns its error from inside the transaction, which rolls it back: nothing changes.
//! Listings use the reader pool.
//!
//! Cursors: jobs page on the last id (`id > cursor`); runs on `<scheduled_for ms>|<run id>`
//! of the last item (`(scheduled_for, run_id) < cursor`, newest first).
//!
//! Fencing tokens grow per run (`runs.last_token`): a claim hands out
//! `max(last_token, attempts) + 1`.
//!
//! The transactions' bodies are functions on a connection, gathered in `SqliteTx`, so that
//! [`super::SqliteWork`] makes the same writes with the queue's in one transaction.

use super::codec::{
    JOB_COLS, RUN_COLS, RunRow, StoredRun, collect_jobs, collect_runs, job_state, load_job, load_run, ms, put_job,
};
use super::db::SqliteDb;
use super::dependencies::{downstream_jobs, ended, expired_waits};
use super::error::TxError;
use super::ledger::{read_skip_records, write_skip_records};
use super::quotas::{active_jobs_before, at_capacity, check_active_jobs, key_holders};
use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use sked_core::alert::{Alert, AlertKey, DueAlert};
use sked_core::dependency::{self, Wait};
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::{Job, JobState};
use sked_core::ledger::SkipRecord;
use sked_core::lifecycle::{ClaimStep, ClaimTx, REPLACED, claim_batch};
use sked_core::ports::store::{
    ClaimBatch, ClaimOutcome, Completion, Ended, Firing, JobClaim, JobFilter, JobStore, Page, PageRequest, RunFilter,
    StoreError,
};
use sked_core::run::{Run, RunState};
use sked_core::run_settings::RunSettings;
use sked_core::timestamp::{Timestamp, trunc_ms};
use std::sync::Arc;

/// Jobs and runs in the SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// The shared database.
    db: Arc<SqliteDb>,
}

impl SqliteStore {
    /// A store over `db` (which may also back a [`super::SqliteQueue`]).
    pub fn new(db: Arc<SqliteDb>) -> Self {
        SqliteStore { db }
    }

    pub(crate) async fn write<T, F>(&self, mut f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&Connection) -> Result<T, TxError> + Send + 'static,
    {
        self.db.write(move |tx| f(tx)).await.map_err(TxError::into_store)
    }

    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, TxError> + Send + 'static,
    {
        self.db.read(f).await.map_err(TxError::into_store)
    }

    /// Loads a run for a conditional write, or `NotFound`.
    fn must_load(conn: &Connection, tenant: &str, run_id: &str) -> Result<StoredRun, TxError> {
        load_run(conn, tenant, run_id)?.ok_or(TxError::Store(StoreError::NotFound))
    }

    /// Writes back a run changed in this transaction.
    fn save(conn: &Connection, stored: &StoredRun) -> Result<(), TxError> {
        RunRow::new(&stored.run, stored.last_token)?.update(conn)
    }
}

/// The job's PENDING and RUNNING runs, oldest nominal time first.
fn load_active_runs(conn: &Connection, tenant: &str, job_id: &str) -> Result<Vec<Run>, TxError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLS} FROM runs INDEXED BY runs_active
         WHERE tenant = ?1 AND job_id = ?2 AND state IN ('PENDING', 'RUNNING')
         ORDER BY scheduled_for, run_id"
    ))?;
    collect_runs(stmt.query([tenant, job_id])?)
}

/// Applies one sweep decision in the current transaction (see [`JobStore::fire`]).
pub(crate) fn apply_firing(conn: &Connection, firing: &Firing) -> Result<Vec<Run>, TxError> {
    let job =
        load_job(conn, firing.tenant.as_str(), firing.job_id.as_str())?.ok_or(TxError::Store(StoreError::NotFound))?;
    if !firing.still_applies_to(&job) {
        return Err(conflict(format!("job {} moved on", firing.job_id)));
    }
    let mut released = Vec::new();
    for id in &firing.cancel {
        if let Some(mut stored) = load_run(conn, firing.tenant.as_str(), id.as_str())?
            && !stored.run.state.is_terminal()
        {
            stored.run.request_cancel(firing.at, REPLACED);
            SqliteStore::save(conn, &stored)?;
            released.extend(ended(conn, stored.run)?.released);
        }
    }
    let mut inserted = Vec::new();
    for run in &firing.runs {
        if RunRow::new(run, 0)?.insert(conn)? {
            inserted.push(super::codec::truncated(run));
        }
    }
    // The runs the cancellations released, to enqueue with the firing's.
    inserted.extend(released.into_iter().filter(|r| r.state == RunState::Pending));
    conn.prepare_cached("UPDATE jobs SET next_fire_at = ?3, state = ?4 WHERE tenant = ?1 AND id = ?2")?
        .execute(params![
            firing.tenant.as_str(),
            firing.job_id.as_str(),
            firing.next_fire_at.map(ms),
            firing.state.as_str()
        ])?;
    write_skip_records(conn, firing.tenant.as_str(), firing.job_id.as_str(), &firing.skipped)?;
    Ok(inserted)
}

/// Applies sweep decisions in the current transaction, each on its own (see
/// [`JobStore::fire`]): a refusal (the job moved on, or is gone) comes before any write of
/// its firing, so it needs no savepoint; an SQL failure fails the whole call.
pub(crate) fn apply_firings(
    conn: &Connection,
    firings: &[Firing],
) -> Result<Vec<Result<Vec<Run>, StoreError>>, TxError> {
    let mut out = Vec::with_capacity(firings.len());
    for firing in firings {
        match apply_firing(conn, firing) {
            Err(TxError::Store(refused)) => out.push(Err(refused)),
            written => out.push(Ok(written?)),
        }
    }
    Ok(out)
}

/// The current transaction, as a claim's ([`claim_batch`] decides, this reads and writes)
/// and as a step of [`super::SqliteWork`] (with the queue's writes, in `super::work`).
pub(crate) struct SqliteTx<'a>(pub(crate) &'a Connection);

impl ClaimTx for SqliteTx<'_> {
    type Error = TxError;

    fn job(&mut self, tenant: &TenantId, id: &JobId) -> Result<Option<Job>, TxError> {
        load_job(self.0, tenant.as_str(), id.as_str())
    }

    fn active_runs(&mut self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<Run>, TxError> {
        load_active_runs(self.0, tenant.as_str(), job_id.as_str())
    }

    fn run(&mut self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, TxError> {
        Ok(load_run(self.0, tenant.as_str(), run_id.as_str())?.map(|stored| stored.run))
    }

    /// A run that does not exist (found before any write) is that run's answer; an SQL
    /// failure fails the whole call.
    fn claim_run(
        &mut self,
        tenant: &TenantId,
        run_id: &RunId,
        owner: &WorkerId,
        batch: &ClaimBatch,
    ) -> Result<Result<ClaimOutcome, StoreError>, TxError> {
        match claim_run(self.0, (tenant.as_str(), run_id.as_str()), owner, batch) {
            Err(TxError::Store(refused)) => Ok(Err(refused)),
            answer => Ok(Ok(answer?)),
        }
    }
}

/// Decides and writes one claim in the current transaction (see [`JobStore::claim`]).
/// [`StoreError::NotFound`] before any write if the run does not exist.
fn claim_run(
    conn: &Connection,
    (tenant, run_id): (&str, &str),
    owner: &WorkerId,
    batch: &ClaimBatch,
) -> Result<ClaimOutcome, TxError> {
    let (now, lease_until) = (trunc_ms(batch.now), trunc_ms(batch.lease_until));
    let mut stored = SqliteStore::must_load(conn, tenant, run_id)?;
    if let ClaimStep::Answer { outcome, changed } = stored.run.decide_claim(now) {
        if changed {
            SqliteStore::save(conn, &stored)?;
            // Ended here: what it released is written and enqueued in this transaction.
            ended(conn, stored.run)?;
        }
        return Ok(outcome);
    }
    if at_capacity(conn, tenant, now)? {
        return Ok(ClaimOutcome::AtCapacity);
    }
    if let Some(concurrency) = &stored.run.concurrency
        && concurrency.full(key_holders(conn, tenant, &concurrency.key, now)?)
    {
        return Ok(ClaimOutcome::KeyAtLimit {
            key: concurrency.key.clone(),
        });
    }
    let token = stored.last_token.max(stored.run.attempts.len() as u64) + 1;
    stored.run.start_attempt(owner, now, lease_until, token);
    stored.last_token = token;
    SqliteStore::save(conn, &stored)?;
    Ok(ClaimOutcome::Claimed { run: stored.run, token })
}

/// Closes the attempt holding `done.token` in the current transaction (see
/// [`JobStore::complete`]).
pub(crate) fn finish_attempt(conn: &Connection, done: &Completion) -> Result<Ended, TxError> {
    let mut stored = SqliteStore::must_load(conn, done.tenant.as_str(), done.run_id.as_str())?;
    stored
        .run
        .finish_attempt(done.token, &done.result, done.next, done.only_if_expired_by)
        .map_err(TxError::Store)?;
    SqliteStore::save(conn, &stored)?;
    ended(conn, stored.run)
}

/// Renews the lease of the attempt holding `token` in the current transaction (see
/// [`JobStore::heartbeat`]).
pub(crate) fn renew_lease(
    conn: &Connection,
    tenant: &str,
    run_id: &str,
    token: u64,
    now: Timestamp,
    lease_until: Timestamp,
) -> Result<Run, TxError> {
    let lease_until = trunc_ms(lease_until);
    let mut stored = SqliteStore::must_load(conn, tenant, run_id)?;
    stored
        .run
        .renew_lease(token, now, lease_until)
        .map_err(TxError::Store)?;
    conn.prepare_cached("UPDATE runs SET lease_expires = ?3 WHERE tenant = ?1 AND run_id = ?2")?
        .execute(params![tenant, run_id, ms(lease_until)])?;
    Ok(stored.run)
}

fn conflict(msg: String) -> TxError {
    TxError::Store(StoreError::Conflict(msg))
}

/// Parses a run listing cursor `<scheduled_for ms>|<run id>`.
fn parse_run_cursor(c: &str) -> Result<(i64, String), StoreError> {
    let (ms, id) = c
        .split_once('|')
        .ok_or_else(|| StoreError::BadCursor("malformed run cursor".into()))?;
    let ms = ms
        .parse()
        .map_err(|_| StoreError::BadCursor("malformed run cursor".into()))?;
    Ok((ms, id.to_string()))
}

/// Splits `limit + 1` fetched rows into a page and its next cursor.
fn paginate<T>(mut items: Vec<T>, limit: usize, cursor: impl Fn(&T) -> String) -> Page<T> {
    let more = items.len() > limit;
    items.truncate(limit);
    let next_cursor = if more { items.last().map(cursor) } else { None };
    Page { items, next_cursor }
}

#[async_trait]
impl JobStore for SqliteStore {
    async fn create_jobs(&self, jobs: &[Job], idempotency: Option<(&str, &str)>) -> Result<(), StoreError> {
        let jobs = jobs.to_vec();
        let idempotency = idempotency.map(|(k, f)| (k.to_string(), f.to_string()));
        self.write(move |conn| {
            let tenants: std::collections::BTreeSet<&str> = jobs.iter().map(|j| j.tenant.as_str()).collect();
            let before = tenants
                .iter()
                .map(|t| Ok((*t, active_jobs_before(conn, t)?)))
                .collect::<Result<Vec<_>, TxError>>()?;
            for job in &jobs {
                match job_state(conn, job.tenant.as_str(), job.id.as_str())? {
                    Some(state) if state != JobState::Deleted => {
                        return Err(conflict(format!("job {} exists", job.id)));
                    }
                    _ => put_job(conn, job)?,
                }
            }
            for (tenant, before) in before {
                check_active_jobs(conn, tenant, before)?;
            }
            if let (Some((key, fingerprint)), Some(first)) = (&idempotency, jobs.first()) {
                let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
                let inserted = conn
                    .prepare_cached(
                        "INSERT INTO idempotency_keys (tenant, key, fingerprint, job_ids, created_at)
                         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (tenant, key) DO NOTHING",
                    )?
                    .execute(params![
                        first.tenant.as_str(),
                        key,
                        fingerprint,
                        serde_json::to_string(&ids)?,
                        ms(first.created_at)
                    ])?;
                if inserted == 0 {
                    return Err(conflict(format!("idempotency key {key} already recorded")));
                }
            }
            Ok(())
        })
        .await
    }

    async fn idempotency_lookup(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<(String, Vec<JobId>)>, StoreError> {
        let (tenant, key) = (tenant.0.clone(), key.to_string());
        self.read(move |conn| {
            let row: Option<(String, String)> = conn
                .prepare_cached("SELECT fingerprint, job_ids FROM idempotency_keys WHERE tenant = ?1 AND key = ?2")?
                .query_row([&tenant, &key], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            match row {
                Some((fingerprint, ids)) => Ok(Some((fingerprint, serde_json::from_str::<Vec<JobId>>(&ids)?))),
                None => Ok(None),
            }
        })
        .await
    }

    async fn get_jobs(&self, ids: &[(TenantId, JobId)]) -> Result<Vec<Option<Job>>, StoreError> {
        let ids = ids.to_vec();
        self.read(move |conn| {
            ids.iter()
                .map(|(tenant, id)| load_job(conn, tenant.as_str(), id.as_str()))
                .collect()
        })
        .await
    }

    async fn update_job(
        &self,
        job: &Job,
        expected_version: u64,
        expected_next_fire_at: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        let job = job.clone();
        self.write(move |conn| {
            let stored: Option<(i64, Option<i64>)> = conn
                .prepare_cached("SELECT version, next_fire_at FROM jobs WHERE tenant = ?1 AND id = ?2")?
                .query_row([job.tenant.as_str(), job.id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            match stored {
                None => Err(TxError::Store(StoreError::NotFound)),
                Some((v, _)) if v as u64 != expected_version => Err(conflict(format!(
                    "job {} is at version {v}, not {expected_version}",
                    job.id
                ))),
                Some((_, next)) if next != expected_next_fire_at.map(ms) => {
                    Err(conflict(format!("job {} was swept meanwhile", job.id)))
                }
                Some(_) => {
                    let before = active_jobs_before(conn, job.tenant.as_str())?;
                    put_job(conn, &job)?;
                    check_active_jobs(conn, job.tenant.as_str(), before)
                }
            }
        })
        .await
    }

    async fn list_jobs(
        &self,
        tenant: &TenantId,
        filter: &JobFilter,
        page: &PageRequest,
    ) -> Result<Page<Job>, StoreError> {
        let mut sql = format!("SELECT {JOB_COLS} FROM jobs WHERE tenant = ?");
        let mut args: Vec<Value> = vec![Value::Text(tenant.0.clone())];
        match filter.state {
            Some(state) => {
                sql.push_str(" AND state = ?");
                args.push(Value::Text(state.as_str().into()));
            }
            None => sql.push_str(" AND state <> 'DELETED'"),
        }
        for (k, v) in &filter.labels {
            sql.push_str(" AND EXISTS (SELECT 1 FROM json_each(jobs.labels) AS l WHERE l.key = ? AND l.value = ?)");
            args.push(Value::Text(k.clone()));
            args.push(Value::Text(v.clone()));
        }
        if let Some(after) = &page.cursor {
            sql.push_str(" AND id > ?");
            args.push(Value::Text(after.clone()));
        }
        sql.push_str(" ORDER BY id LIMIT ?");
        args.push(Value::Integer(
            page.limit.saturating_add(1).min(i64::MAX as usize) as i64
        ));
        let limit = page.limit;
        let jobs = self
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(&sql)?;
                collect_jobs(stmt.query(params_from_iter(args))?)
            })
            .await?;
        Ok(paginate(jobs, limit, |j| j.id.0.clone()))
    }

    async fn due_jobs(&self, horizon: Timestamp, limit: usize) -> Result<Vec<Job>, StoreError> {
        let limit = limit.min(i64::MAX as usize) as i64;
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {JOB_COLS} FROM jobs WHERE state = 'ACTIVE' AND next_fire_at <= ?1
                 ORDER BY next_fire_at, tenant, id LIMIT ?2"
            ))?;
            collect_jobs(stmt.query(params![ms(horizon), limit])?)
        })
        .await
    }

    async fn next_due_at(&self) -> Result<Option<Timestamp>, StoreError> {
        self.read(|conn| {
            let min: Option<i64> = conn
                .prepare_cached("SELECT min(next_fire_at) FROM jobs WHERE state = 'ACTIVE'")?
                .query_row([], |r| r.get(0))?;
            Ok(min.map(super::codec::ts))
        })
        .await
    }

    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, StoreError> {
        let firings = firings.to_vec();
        self.write(move |conn| apply_firings(conn, &firings)).await
    }

    /// Every firing is written: nothing to record once its runs are sent.
    async fn firings_sent(&self, _firings: &[Firing]) -> Result<(), StoreError> {
        Ok(())
    }

    async fn insert_run(&self, run: &Run) -> Result<bool, StoreError> {
        let row = RunRow::new(run, 0).map_err(TxError::into_store)?;
        self.write(move |conn| row.insert(conn)).await
    }

    async fn get_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, StoreError> {
        let (tenant, run_id) = (tenant.0.clone(), run_id.0.clone());
        self.read(move |conn| Ok(load_run(conn, &tenant, &run_id)?.map(|s| s.run)))
            .await
    }

    async fn list_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        page: &PageRequest,
    ) -> Result<Page<Run>, StoreError> {
        let after = page.cursor.as_deref().map(parse_run_cursor).transpose()?;
        let mut sql = format!("SELECT {RUN_COLS} FROM runs WHERE tenant = ?");
        let mut args: Vec<Value> = vec![Value::Text(tenant.0.clone())];
        if let Some(job) = &filter.job_id {
            sql.push_str(" AND job_id = ?");
            args.push(Value::Text(job.0.clone()));
        }
        if let Some(state) = filter.state {
            sql.push_str(" AND state = ?");
            args.push(Value::Text(state.as_str().into()));
        }
        if let Some(since) = filter.since {
            sql.push_str(" AND scheduled_for >= ?");
            args.push(Value::Integer(ms(since)));
        }
        if let Some(until) = filter.until {
            sql.push_str(" AND scheduled_for < ?");
            args.push(Value::Integer(ms(until)));
        }
        if let Some((at, id)) = after {
            // Newest first: the next page holds keys strictly below the cursor.
            sql.push_str(" AND (scheduled_for, run_id) < (?, ?)");
            args.push(Value::Integer(at));
            args.push(Value::Text(id));
        }
        sql.push_str(" ORDER BY scheduled_for DESC, run_id DESC LIMIT ?");
        args.push(Value::Integer(
            page.limit.saturating_add(1).min(i64::MAX as usize) as i64
        ));
        let limit = page.limit;
        let runs = self
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(&sql)?;
                collect_runs(stmt.query(params_from_iter(args))?)
            })
            .await?;
        Ok(paginate(runs, limit, |r| {
            format!("{}|{}", ms(r.scheduled_for), r.run_id)
        }))
    }

    async fn active_runs(
        &self,
        jobs: &[(TenantId, JobId)],
        scheduled_by: Option<Timestamp>,
    ) -> Result<Vec<Vec<Run>>, StoreError> {
        let jobs = jobs.to_vec();
        self.read(move |conn| {
            jobs.iter()
                .map(|(tenant, job_id)| {
                    let runs = load_active_runs(conn, tenant.as_str(), job_id.as_str())?;
                    Ok(sked_core::ports::scheduled_up_to(runs, scheduled_by))
                })
                .collect()
        })
        .await
    }

    async fn claim(&self, batch: &ClaimBatch) -> Result<Vec<Result<JobClaim, StoreError>>, StoreError> {
        let batch = batch.clone();
        self.write(move |conn| claim_batch(&mut SqliteTx(conn), &batch)).await
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Run, StoreError> {
        let (tenant, run_id) = (tenant.0.clone(), run_id.0.clone());
        self.write(move |conn| renew_lease(conn, &tenant, &run_id, token, now, lease_until))
            .await
    }

    async fn complete(&self, done: &Completion) -> Result<Ended, StoreError> {
        let done = done.clone();
        self.write(move |conn| finish_attempt(conn, &done)).await
    }

    async fn cancel_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Ended, StoreError> {
        let (tenant, run_id, reason) = (tenant.0.clone(), run_id.0.clone(), reason.to_string());
        self.write(move |conn| {
            let mut stored = Self::must_load(conn, &tenant, &run_id)?;
            if !stored.run.request_cancel(now, &reason) {
                return Ok(Ended {
                    run: stored.run,
                    released: Vec::new(),
                });
            }
            Self::save(conn, &stored)?;
            ended(conn, stored.run)
        })
        .await
    }

    async fn defer_pending(&self, tenant: &TenantId, run_id: &RunId, until: Timestamp) -> Result<bool, StoreError> {
        let (tenant, run_id) = (tenant.0.clone(), run_id.0.clone());
        self.write(move |conn| {
            let Some(mut stored) = load_run(conn, &tenant, &run_id)? else {
                return Ok(false);
            };
            let changed = stored.run.defer(until);
            if changed {
                Self::save(conn, &stored)?;
            }
            Ok(changed)
        })
        .await
    }

    async fn take_settings(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        settings: &RunSettings,
    ) -> Result<Option<Run>, StoreError> {
        let (tenant, run_id, settings) = (tenant.0.clone(), run_id.0.clone(), settings.clone());
        self.write(move |conn| {
            let Some(mut stored) = load_run(conn, &tenant, &run_id)? else {
                return Ok(None);
            };
            if !stored.run.take_settings(&settings) {
                return Ok(None);
            }
            RunRow::new(&stored.run, stored.last_token)?.update_settings(conn)?;
            Ok(Some(stored.run))
        })
        .await
    }

    async fn expired_leases(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let limit = limit.min(i64::MAX as usize) as i64;
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {RUN_COLS} FROM runs WHERE state = 'RUNNING' AND lease_expires < ?1
                 ORDER BY lease_expires, run_id LIMIT ?2"
            ))?;
            collect_runs(stmt.query(params![ms(now), limit])?)
        })
        .await
    }

    async fn stale_pending(&self, ready_before: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let limit = limit.min(i64::MAX as usize) as i64;
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {RUN_COLS} FROM runs WHERE state = 'PENDING' AND not_before <= ?1
                 ORDER BY not_before, scheduled_for, run_id LIMIT ?2"
            ))?;
            collect_runs(stmt.query(params![ms(ready_before), limit])?)
        })
        .await
    }

    async fn skip_records(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        (since, until): (Timestamp, Timestamp),
        limit: usize,
    ) -> Result<Vec<SkipRecord>, StoreError> {
        let (tenant, job_id) = (tenant.0.clone(), job_id.0.clone());
        self.read(move |conn| read_skip_records(conn, &tenant, &job_id, (ms(since), ms(until)), limit))
            .await
    }

    async fn record_skips(&self, tenant: &TenantId, job_id: &JobId, records: &[SkipRecord]) -> Result<(), StoreError> {
        let (tenant, job_id, records) = (tenant.0.clone(), job_id.0.clone(), records.to_vec());
        self.write(move |conn| write_skip_records(conn, &tenant, &job_id, &records))
            .await
    }

    async fn dependents(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<JobId>, StoreError> {
        let (tenant, job_id) = (tenant.0.clone(), job_id.0.clone());
        self.read(move |conn| {
            Ok(downstream_jobs(conn, &tenant, &job_id)?
                .into_iter()
                .map(|j| j.id)
                .collect())
        })
        .await
    }

    async fn expired_waits(&self, now: Timestamp, limit: usize) -> Result<Vec<Wait>, StoreError> {
        self.read(move |conn| expired_waits(conn, now, limit)).await
    }

    async fn expire_wait(&self, wait: &Wait, now: Timestamp) -> Result<Vec<Run>, StoreError> {
        let wait = wait.clone();
        self.write(move |conn| dependency::expire(&mut SqliteTx(conn), &wait, now))
            .await
    }

    async fn due_alerts(&self, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, StoreError> {
        self.read_due_alerts(now, limit).await
    }

    async fn save_alert(&self, key: &AlertKey, expected: Timestamp, alert: &Alert) -> Result<bool, StoreError> {
        self.write_alert(key, expected, alert).await
    }
}
