//! [`PgStore`]: the [`JobStore`] over the `jobs`, `runs` and `idempotency_keys` tables (and,
//! through its sibling modules, the ledger, the `after` edges and waits, quotas and alerts).
//!
//! Every conditional write is one transaction, run again from the start when PostgreSQL
//! aborts it for a concurrent one. The writes of a run's hand-over — fire, claim, heartbeat,
//! complete, cancel, defer, a wait's expiry — are `READ COMMITTED` and follow the lock
//! discipline of [`crate::locks`] (the run row `FOR UPDATE` before deciding on it, the job
//! row before firing, advisory locks on what a claim counts and on a downstream occurrence),
//! the one [`crate::PgWork`]'s steps follow. The rest (create, update, insert a run, quotas,
//! alerts, skip records) are [`PgDb::transaction`]s: `SERIALIZABLE`, so their read-decide-write
//! holds against one another, and against a locking write where both write one row (a job
//! updated while a firing locked it: PostgreSQL aborts the `SERIALIZABLE` one if the row
//! changed since its snapshot, and it runs again). A refused write returns its error from inside the
//! transaction, which rolls it back: nothing changes. Plain reads (gets, listings, the
//! sweeper's and reaper's scans) are single statements on a pooled connection.
//!
//! Cursors, as SQLite's: jobs page on the last id (`id > cursor`); runs on
//! `<scheduled_for ms>|<run id>` of the last item (`(scheduled_for, run_id) < cursor`, newest
//! first, a row-value comparison both databases have). Keys compare bytewise (`COLLATE "C"`).
//!
//! Fencing tokens grow per run (`runs.last_token`): a claim hands out
//! `max(last_token, attempts) + 1`.
//!
//! The transactions' bodies are functions over a [`Tx`] (`apply_firings`, `finish_attempt`,
//! `renew_lease`) and `PgTx`, on which `sked-core`'s claim and dependency rules run, so that a
//! one-transaction work port makes the same writes with the queue's in one transaction.
//! Must not: decide a run's life — `sked-core`'s `Run` methods and rules do.

use crate::codec::{
    JOB_COLS, RUN_COLS, RunRow, StoredRun, decode_all, from_json, get, job_from_row, limit_param, load_job, load_run,
    ms, runs_of, to_json, truncated, ts,
};
use crate::db::PgDb;
use crate::dependencies::{EXPIRED_WAITS, ended, wait_from_row};
use crate::ledger::{SKIP_RECORDS_IN, skip_record_of, write_skip_records};
use crate::locks::{lock_claims, lock_jobs, lock_run, lock_runs_to_end};
use crate::quotas::{active_jobs_before, at_capacity, check_active_jobs, key_holders};
use crate::tx::{Tx, TxError};
use async_trait::async_trait;
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
use std::collections::HashMap;
use std::sync::LazyLock;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// Jobs and runs in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    /// The shared pool.
    db: PgDb,
}

impl PgStore {
    /// A store over `db` (whose pool the crate's other adapters may share).
    pub fn new(db: PgDb) -> Self {
        PgStore { db }
    }

    /// The pool.
    pub(crate) fn db(&self) -> &PgDb {
        &self.db
    }

    /// Runs `f` in one SERIALIZABLE transaction (see the module header), as a port's answer.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&mut Tx) -> Result<T, TxError> + Send + 'static,
    {
        self.db.transaction(f).await.map_err(TxError::into_store)
    }

    /// Runs `f`, which follows the lock discipline of `locks`, in one READ COMMITTED
    /// transaction (see the module header), as a port's answer.
    async fn write_locked<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&mut Tx) -> Result<T, TxError> + Send + 'static,
    {
        self.db.locking_transaction(f).await.map_err(TxError::into_store)
    }
}

/// Runs one read statement on a pooled connection (prepared once per connection).
pub(crate) async fn read_rows(db: &PgDb, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StoreError> {
    let conn = db.get().await.map_err(|e| TxError::from(e).into_store())?;
    let stmt = conn
        .prepare_cached(sql)
        .await
        .map_err(|e| TxError::from(e).into_store())?;
    conn.query(&stmt, params)
        .await
        .map_err(|e| TxError::from(e).into_store())
}

/// Runs one read statement built for this call (a listing's filters) on a pooled connection,
/// unprepared: its shapes are too many to cache per connection.
async fn read_built(db: &PgDb, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StoreError> {
    let conn = db.get().await.map_err(|e| TxError::from(e).into_store())?;
    conn.query(sql, params).await.map_err(|e| TxError::from(e).into_store())
}

/// Decodes, as a port's answer.
fn decoded<T>(decoding: Result<T, TxError>) -> Result<T, StoreError> {
    decoding.map_err(TxError::into_store)
}

/// Loads a run for a conditional write, locked until the transaction ends (see `locks`), or
/// `NotFound`.
fn must_load(tx: &mut Tx, tenant: &str, run_id: &str) -> Result<StoredRun, TxError> {
    lock_run(tx, tenant, run_id)?.ok_or(TxError::Store(StoreError::NotFound))
}

/// Writes back a run changed in this transaction.
fn save(tx: &mut Tx, stored: &StoredRun) -> Result<(), TxError> {
    tx.write_run(RunRow::new(&stored.run, stored.last_token)?);
    Ok(())
}

/// A job's PENDING and RUNNING runs (`$1` tenant, `$2` job), oldest nominal time first.
pub(crate) static ACTIVE_RUNS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {RUN_COLS} FROM runs
         WHERE tenant = $1 AND job_id = $2 AND state IN ('PENDING', 'RUNNING')
         ORDER BY scheduled_for, run_id"
    )
});

/// The job's PENDING and RUNNING runs, oldest nominal time first.
pub(crate) fn load_active_runs(tx: &mut Tx, tenant: &str, job_id: &str) -> Result<Vec<Run>, TxError> {
    let rows = tx.query(&ACTIVE_RUNS, &[&tenant, &job_id])?;
    runs_of(&rows)
}

/// Applies sweep decisions in the current transaction, each on its own (see
/// [`JobStore::fire`]), in a few statements for the whole call: the firings' jobs locked at
/// once (sorted, as `locks` orders rows), then each firing decided on its job as locked — a
/// refusal (the job moved on, or is gone) before any write of its firing, so it needs no
/// savepoint — and its cancellations written, then every firing's runs inserted in one
/// statement and every job's next firing in another. An SQL failure fails the whole call.
pub(crate) fn apply_firings(tx: &mut Tx, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, TxError> {
    let keys: Vec<(&str, &str)> = firings.iter().map(|f| (f.tenant.as_str(), f.job_id.as_str())).collect();
    let mut jobs = lock_jobs(tx, &keys)?;
    // Per firing: its answer so far (the runs its cancellations released, or its refusal).
    let mut answers: Vec<Result<Vec<Run>, StoreError>> = Vec::with_capacity(firings.len());
    let mut rows = Vec::new();
    // The jobs' new next firing, the last firing of each job winning (one statement may
    // change a row once).
    let mut next: HashMap<(&str, &str), (Option<i64>, &'static str)> = HashMap::new();
    for firing in firings {
        let key = (firing.tenant.as_str().to_string(), firing.job_id.as_str().to_string());
        let Some(job) = jobs.get_mut(&key) else {
            answers.push(Err(StoreError::NotFound));
            continue;
        };
        if !firing.still_applies_to(job) {
            answers.push(Err(StoreError::Conflict(format!("job {} moved on", firing.job_id))));
            continue;
        }
        // A later firing of the same job in this call sees this one's write.
        job.next_fire_at = firing.next_fire_at;
        job.state = firing.state;
        let mut released = Vec::new();
        for id in &firing.cancel {
            if let Some(mut stored) = lock_run(tx, firing.tenant.as_str(), id.as_str())?
                && !stored.run.state.is_terminal()
            {
                stored.run.request_cancel(firing.at, REPLACED);
                save(tx, &stored)?;
                released.extend(ended(tx, stored.run)?.released);
            }
        }
        for run in &firing.runs {
            rows.push(RunRow::new(run, 0)?);
        }
        next.insert(
            (firing.tenant.as_str(), firing.job_id.as_str()),
            (firing.next_fire_at.map(ms), firing.state.as_str()),
        );
        write_skip_records(tx, firing.tenant.as_str(), firing.job_id.as_str(), &firing.skipped)?;
        answers.push(Ok(released));
    }
    let mut inserted: std::collections::HashSet<(String, String)> =
        RunRow::insert_all(tx, &rows)?.into_iter().collect();
    update_next_firings(tx, &next)?;
    // Each applied firing's inserted runs, then the runs its cancellations released (to
    // enqueue with the firing's).
    Ok(firings
        .iter()
        .zip(answers)
        .map(|(firing, answer)| {
            answer.map(|released| {
                let mut runs: Vec<Run> = firing
                    .runs
                    .iter()
                    .filter(|run| inserted.remove(&(run.tenant.as_str().to_string(), run.run_id.as_str().to_string())))
                    .map(truncated)
                    .collect();
                runs.extend(released.into_iter().filter(|r| r.state == RunState::Pending));
                runs
            })
        })
        .collect())
}

/// Sets each job's `next_fire_at` and state, in one statement.
fn update_next_firings(tx: &mut Tx, next: &HashMap<(&str, &str), (Option<i64>, &'static str)>) -> Result<(), TxError> {
    if next.is_empty() {
        return Ok(());
    }
    let (mut tenants, mut ids, mut at, mut states) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ((tenant, id), (next_fire_at, state)) in next {
        tenants.push(*tenant);
        ids.push(*id);
        at.push(*next_fire_at);
        states.push(*state);
    }
    tx.execute(
        "UPDATE jobs SET next_fire_at = u.next_fire_at, state = u.state
         FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS u(tenant, id, next_fire_at, state)
         WHERE jobs.tenant = u.tenant AND jobs.id = u.id",
        &[&tenants, &ids, &at, &states],
    )?;
    Ok(())
}

/// The current transaction, as a claim's ([`claim_batch`] decides, this reads and writes), as
/// a release's ([`sked_core::dependency::DependencyTx`], in `dependencies`), and as a step of a
/// one-transaction work port.
pub(crate) struct PgTx<'a>(pub(crate) &'a mut Tx);

impl ClaimTx for PgTx<'_> {
    type Error = TxError;

    fn job(&mut self, tenant: &TenantId, id: &JobId) -> Result<Option<Job>, TxError> {
        if let Some(read) = self.0.claims.job(tenant.as_str(), id.as_str()) {
            return Ok(read);
        }
        load_job(self.0, tenant.as_str(), id.as_str())
    }

    fn active_runs(&mut self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<Run>, TxError> {
        load_active_runs(self.0, tenant.as_str(), job_id.as_str())
    }

    fn run(&mut self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, TxError> {
        if let Some(locked) = self.0.claims.peek(tenant.as_str(), run_id.as_str()) {
            return Ok(Some(locked.run.clone()));
        }
        Ok(load_run(self.0, tenant.as_str(), run_id.as_str())?.map(|stored| stored.run))
    }

    /// The batch's runs locked, then the keys, caps and jobs their claims count (`locks`).
    fn lock_claims(&mut self, batch: &ClaimBatch) -> Result<(), TxError> {
        lock_claims(self.0, batch)
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
    tx: &mut Tx,
    (tenant, run_id): (&str, &str),
    owner: &WorkerId,
    batch: &ClaimBatch,
) -> Result<ClaimOutcome, TxError> {
    let (now, lease_until) = (trunc_ms(batch.now), trunc_ms(batch.lease_until));
    let mut stored = match tx.claims.take(tenant, run_id) {
        Some(locked) => locked,
        None => must_load(tx, tenant, run_id)?,
    };
    if let ClaimStep::Answer { outcome, changed } = stored.run.decide_claim(now) {
        if changed {
            save(tx, &stored)?;
            // Ended here: what it released is written in this transaction.
            ended(tx, stored.run)?;
        }
        return Ok(outcome);
    }
    if at_capacity(tx, tenant, now)? {
        return Ok(ClaimOutcome::AtCapacity);
    }
    if let Some(concurrency) = &stored.run.concurrency
        && concurrency.full(key_holders(tx, tenant, &concurrency.key, now)?)
    {
        return Ok(ClaimOutcome::KeyAtLimit {
            key: concurrency.key.clone(),
        });
    }
    let token = stored.last_token.max(stored.run.attempts.len() as u64) + 1;
    stored.run.start_attempt(owner, now, lease_until, token);
    stored.last_token = token;
    save(tx, &stored)?;
    Ok(ClaimOutcome::Claimed { run: stored.run, token })
}

/// Closes the attempt of `done` in the current transaction (see [`JobStore::complete`]): a
/// refusal is an error.
pub(crate) fn finish_attempt(tx: &mut Tx, done: &Completion) -> Result<Ended, TxError> {
    let mut answers = finish_attempts(tx, std::slice::from_ref(done))?;
    answers
        .pop()
        .expect("one answer per completion")
        .map_err(TxError::Store)
}

/// Closes the attempt of each of `done` in the current transaction, each on its own and in
/// order (a refused one answers its refusal and writes nothing), in a few statements for the
/// whole group: the runs locked in one (sorted), each decided on its run as the ones before
/// it left it, every changed run written in one (`Tx::write_run`), then each ended run's
/// downstream runs released (no statement for a job with no `after` edge).
pub(crate) fn finish_attempts(tx: &mut Tx, done: &[Completion]) -> Result<Vec<Result<Ended, StoreError>>, TxError> {
    let keys: Vec<(&str, &str)> = done.iter().map(|d| (d.tenant.as_str(), d.run_id.as_str())).collect();
    let mut runs = lock_runs_to_end(tx, &keys)?;
    let mut decided: Vec<Result<Run, StoreError>> = Vec::with_capacity(done.len());
    for d in done {
        let key = (d.tenant.as_str().to_string(), d.run_id.as_str().to_string());
        let Some(stored) = runs.get_mut(&key) else {
            decided.push(Err(StoreError::NotFound));
            continue;
        };
        match stored
            .run
            .finish_attempt(d.token, &d.result, d.next, d.only_if_expired_by)
        {
            Ok(()) => {
                save(tx, stored)?;
                decided.push(Ok(stored.run.clone()));
            }
            Err(refusal) => decided.push(Err(refusal)),
        }
    }
    decided
        .into_iter()
        .map(|run| match run {
            Ok(run) => Ok(Ok(ended(tx, run)?)),
            Err(refusal) => Ok(Err(refusal)),
        })
        .collect()
}

/// A heartbeat's write ([`JobStore::heartbeat`]): which attempt, when, and until when.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeaseRenewal<'a> {
    /// Owner of the run.
    pub tenant: &'a str,
    /// The run.
    pub run_id: &'a str,
    /// The fencing token of the attempt whose lease is renewed.
    pub token: u64,
    /// When the worker asks (a lease expired before it is not renewed).
    pub now: Timestamp,
    /// The lease's new end.
    pub lease_until: Timestamp,
}

/// Renews the lease of the attempt holding `renewal.token` in the current transaction (see
/// [`JobStore::heartbeat`]).
pub(crate) fn renew_lease(tx: &mut Tx, renewal: LeaseRenewal<'_>) -> Result<Run, TxError> {
    let lease_until = trunc_ms(renewal.lease_until);
    let mut stored = must_load(tx, renewal.tenant, renewal.run_id)?;
    stored
        .run
        .renew_lease(renewal.token, renewal.now, lease_until)
        .map_err(TxError::Store)?;
    tx.execute(
        "UPDATE runs SET lease_expires = $3 WHERE tenant = $1 AND run_id = $2",
        &[&renewal.tenant, &renewal.run_id, &ms(lease_until)],
    )?;
    Ok(stored.run)
}

fn conflict(msg: String) -> TxError {
    TxError::Store(StoreError::Conflict(msg))
}

/// Parses a run listing cursor `<scheduled_for ms>|<run id>`.
fn parse_run_cursor(c: &str) -> Result<(i64, String), StoreError> {
    let malformed = || StoreError::BadCursor("malformed run cursor".into());
    let (ms, id) = c.split_once('|').ok_or_else(malformed)?;
    Ok((ms.parse().map_err(|_| malformed())?, id.to_string()))
}

/// Splits `limit + 1` fetched rows into a page and its next cursor.
fn paginate<T>(mut items: Vec<T>, limit: usize, cursor: impl Fn(&T) -> String) -> Page<T> {
    let more = items.len() > limit;
    items.truncate(limit);
    let next_cursor = if more { items.last().map(cursor) } else { None };
    Page { items, next_cursor }
}

/// A statement's text and its values, built clause by clause (`$n` numbered as pushed).
#[derive(Default)]
struct Built {
    sql: String,
    values: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl Built {
    fn new(sql: impl Into<String>) -> Self {
        Built {
            sql: sql.into(),
            values: Vec::new(),
        }
    }

    /// Appends `clause`, whose `{}` is replaced by the placeholder of `value`.
    fn push(&mut self, clause: &str, value: impl ToSql + Sync + Send + 'static) {
        self.values.push(Box::new(value));
        self.sql
            .push_str(&clause.replace("{}", &format!("${}", self.values.len())));
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)).collect()
    }
}

/// The (tenant, id) pairs as two parallel text arrays, for `unnest($1::text[], $2::text[])`.
fn key_arrays(keys: &[(TenantId, JobId)]) -> (Vec<&str>, Vec<&str>) {
    keys.iter().map(|(t, j)| (t.as_str(), j.as_str())).unzip()
}

#[async_trait]
impl JobStore for PgStore {
    async fn create_jobs(&self, jobs: &[Job], idempotency: Option<(&str, &str)>) -> Result<(), StoreError> {
        let jobs = jobs.to_vec();
        let idempotency = idempotency.map(|(k, f)| (k.to_string(), f.to_string()));
        self.write(move |tx| {
            let tenants: std::collections::BTreeSet<&str> = jobs.iter().map(|j| j.tenant.as_str()).collect();
            let before = tenants
                .iter()
                .map(|t| Ok((*t, active_jobs_before(tx, t)?)))
                .collect::<Result<Vec<_>, TxError>>()?;
            // Refused at the first job, in order, whose id is taken: by a live job, or by an
            // earlier job of this batch.
            let keys: Vec<(&str, &str)> = jobs.iter().map(|j| (j.tenant.as_str(), j.id.as_str())).collect();
            let stored = crate::codec::job_states(tx, &keys)?;
            let mut seen = std::collections::HashSet::with_capacity(keys.len());
            for (job, key) in jobs.iter().zip(&keys) {
                let owned = (key.0.to_string(), key.1.to_string());
                let live = stored.get(&owned).is_some_and(|state| *state != JobState::Deleted);
                if live || !seen.insert(key) {
                    return Err(conflict(format!("job {} exists", job.id)));
                }
            }
            crate::codec::put_jobs(tx, &jobs)?;
            for (tenant, before) in before {
                check_active_jobs(tx, tenant, before)?;
            }
            if let (Some((key, fingerprint)), Some(first)) = (&idempotency, jobs.first()) {
                let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
                let inserted = tx.execute(
                    "INSERT INTO idempotency_keys (tenant, key, fingerprint, job_ids, created_at)
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, key) DO NOTHING",
                    &[
                        &first.tenant.as_str(),
                        key,
                        fingerprint,
                        &to_json(&ids)?,
                        &ms(first.created_at),
                    ],
                )?;
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
        let rows = read_rows(
            &self.db,
            "SELECT fingerprint, job_ids FROM idempotency_keys WHERE tenant = $1 AND key = $2",
            &[&tenant.as_str(), &key],
        )
        .await?;
        decoded(
            rows.first()
                .map(|r| Ok((get(r, 0)?, from_json::<Vec<JobId>>(get(r, 1)?)?)))
                .transpose(),
        )
    }

    async fn get_jobs(&self, ids: &[(TenantId, JobId)]) -> Result<Vec<Option<Job>>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // One statement for the batch; the answers are put back in the asked order.
        let (tenants, job_ids) = key_arrays(ids);
        let rows = read_rows(
            &self.db,
            &format!(
                "SELECT {JOB_COLS} FROM jobs
                 WHERE (tenant, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))"
            ),
            &[&tenants, &job_ids],
        )
        .await?;
        let found: HashMap<(TenantId, JobId), Job> = decoded(decode_all(&rows, job_from_row))?
            .into_iter()
            .map(|j| ((j.tenant.clone(), j.id.clone()), j))
            .collect();
        Ok(ids.iter().map(|key| found.get(key).cloned()).collect())
    }

    async fn update_job(
        &self,
        job: &Job,
        expected_version: u64,
        expected_next_fire_at: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        let job = job.clone();
        self.write(move |tx| {
            let stored = tx.query_opt(
                "SELECT version, next_fire_at FROM jobs WHERE tenant = $1 AND id = $2",
                &[&job.tenant.as_str(), &job.id.as_str()],
            )?;
            let stored: Option<(i64, Option<i64>)> = match stored {
                Some(row) => Some((get(&row, 0)?, get(&row, 1)?)),
                None => None,
            };
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
                    let before = active_jobs_before(tx, job.tenant.as_str())?;
                    crate::codec::put_job(tx, &job)?;
                    check_active_jobs(tx, job.tenant.as_str(), before)
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
        let mut q = Built::new(format!("SELECT {JOB_COLS} FROM jobs WHERE "));
        q.push("tenant = {}", tenant.0.clone());
        match filter.state {
            Some(state) => q.push(" AND state = {}", state.as_str()),
            None => q.sql.push_str(" AND state <> 'DELETED'"),
        }
        for (k, v) in &filter.labels {
            // SQLite looks each pair up with `json_each`; here JSONB containment, one pair each
            // (a filter may name a key twice, which one object could not say).
            let pair = serde_json::json!({ k: v }).to_string();
            q.push(" AND labels @> {}::text::jsonb", pair);
        }
        if let Some(after) = &page.cursor {
            q.push(" AND id > {}", after.clone());
        }
        q.push(" ORDER BY id LIMIT {}", limit_param(page.limit.saturating_add(1)));
        let rows = read_built(&self.db, &q.sql, &q.params()).await?;
        let jobs = decoded(decode_all(&rows, job_from_row))?;
        Ok(paginate(jobs, page.limit, |j| j.id.0.clone()))
    }

    async fn due_jobs(&self, horizon: Timestamp, limit: usize) -> Result<Vec<Job>, StoreError> {
        let rows = read_rows(
            &self.db,
            &format!(
                "SELECT {JOB_COLS} FROM jobs WHERE state = 'ACTIVE' AND next_fire_at <= $1
                 ORDER BY next_fire_at, tenant, id LIMIT $2"
            ),
            &[&ms(horizon), &limit_param(limit)],
        )
        .await?;
        decoded(decode_all(&rows, job_from_row))
    }

    async fn next_due_at(&self) -> Result<Option<Timestamp>, StoreError> {
        let rows = read_rows(
            &self.db,
            "SELECT min(next_fire_at) FROM jobs WHERE state = 'ACTIVE'",
            &[],
        )
        .await?;
        let min: Option<i64> = match rows.first() {
            Some(row) => decoded(get(row, 0))?,
            None => None,
        };
        Ok(min.map(ts))
    }

    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, StoreError> {
        let firings = firings.to_vec();
        self.write_locked(move |tx| apply_firings(tx, &firings)).await
    }

    /// Every firing is written: nothing to record once its runs are sent.
    async fn firings_sent(&self, _firings: &[Firing]) -> Result<(), StoreError> {
        Ok(())
    }

    async fn insert_run(&self, run: &Run) -> Result<bool, StoreError> {
        let row = RunRow::new(run, 0).map_err(TxError::into_store)?;
        self.write(move |tx| row.insert(tx)).await
    }

    async fn get_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, StoreError> {
        let rows = read_rows(
            &self.db,
            &format!("SELECT {RUN_COLS} FROM runs WHERE tenant = $1 AND run_id = $2"),
            &[&tenant.as_str(), &run_id.as_str()],
        )
        .await?;
        Ok(decoded(runs_of(&rows))?.pop())
    }

    async fn list_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        page: &PageRequest,
    ) -> Result<Page<Run>, StoreError> {
        let after = page.cursor.as_deref().map(parse_run_cursor).transpose()?;
        let mut q = Built::new(format!("SELECT {RUN_COLS} FROM runs WHERE "));
        q.push("tenant = {}", tenant.0.clone());
        if let Some(job) = &filter.job_id {
            q.push(" AND job_id = {}", job.0.clone());
        }
        if let Some(state) = filter.state {
            q.push(" AND state = {}", state.as_str());
        }
        if let Some(since) = filter.since {
            q.push(" AND scheduled_for >= {}", ms(since));
        }
        if let Some(until) = filter.until {
            q.push(" AND scheduled_for < {}", ms(until));
        }
        if let Some((at, id)) = after {
            // Newest first: the next page holds keys strictly below the cursor.
            q.push(" AND (scheduled_for, run_id) < ({}", at);
            q.push(", {})", id);
        }
        q.push(
            " ORDER BY scheduled_for DESC, run_id DESC LIMIT {}",
            limit_param(page.limit.saturating_add(1)),
        );
        let rows = read_built(&self.db, &q.sql, &q.params()).await?;
        let runs = decoded(runs_of(&rows))?;
        Ok(paginate(runs, page.limit, |r| {
            format!("{}|{}", ms(r.scheduled_for), r.run_id)
        }))
    }

    async fn active_runs(
        &self,
        jobs: &[(TenantId, JobId)],
        scheduled_by: Option<Timestamp>,
    ) -> Result<Vec<Vec<Run>>, StoreError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        // One statement for the batch, grouped back by job in the asked order.
        let (tenants, job_ids) = key_arrays(jobs);
        let rows = read_rows(
            &self.db,
            &format!(
                "SELECT {RUN_COLS} FROM runs
                 WHERE state IN ('PENDING', 'RUNNING')
                   AND (tenant, job_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
                   AND ($3::bigint IS NULL OR scheduled_for <= $3)
                 ORDER BY scheduled_for, run_id"
            ),
            &[&tenants, &job_ids, &scheduled_by.map(ms)],
        )
        .await?;
        let mut by_job: HashMap<(TenantId, JobId), Vec<Run>> = HashMap::new();
        for run in decoded(runs_of(&rows))? {
            by_job
                .entry((run.tenant.clone(), run.job_id.clone()))
                .or_default()
                .push(run);
        }
        Ok(jobs
            .iter()
            .map(|key| by_job.get(key).cloned().unwrap_or_default())
            .collect())
    }

    async fn claim(&self, batch: &ClaimBatch) -> Result<Vec<Result<JobClaim, StoreError>>, StoreError> {
        let batch = batch.clone();
        self.write_locked(move |tx| claim_batch(&mut PgTx(tx), &batch)).await
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
        self.write_locked(move |tx| {
            let renewal = LeaseRenewal {
                tenant: &tenant,
                run_id: &run_id,
                token,
                now,
                lease_until,
            };
            renew_lease(tx, renewal)
        })
        .await
    }

    async fn complete(&self, done: &Completion) -> Result<Ended, StoreError> {
        let done = done.clone();
        self.write_locked(move |tx| finish_attempt(tx, &done)).await
    }

    async fn cancel_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Ended, StoreError> {
        let (tenant, run_id, reason) = (tenant.0.clone(), run_id.0.clone(), reason.to_string());
        self.write_locked(move |tx| {
            let mut stored = must_load(tx, &tenant, &run_id)?;
            if !stored.run.request_cancel(now, &reason) {
                return Ok(Ended {
                    run: stored.run,
                    released: Vec::new(),
                });
            }
            save(tx, &stored)?;
            ended(tx, stored.run)
        })
        .await
    }

    async fn defer_pending(&self, tenant: &TenantId, run_id: &RunId, until: Timestamp) -> Result<bool, StoreError> {
        let (tenant, run_id) = (tenant.0.clone(), run_id.0.clone());
        self.write_locked(move |tx| {
            let Some(mut stored) = lock_run(tx, &tenant, &run_id)? else {
                return Ok(false);
            };
            let changed = stored.run.defer(until);
            if changed {
                save(tx, &stored)?;
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
        self.write_locked(move |tx| {
            let Some(mut stored) = lock_run(tx, &tenant, &run_id)? else {
                return Ok(None);
            };
            if !stored.run.take_settings(&settings) {
                return Ok(None);
            }
            RunRow::new(&stored.run, stored.last_token)?.update_settings(tx)?;
            Ok(Some(stored.run))
        })
        .await
    }

    async fn expired_leases(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let rows = read_rows(
            &self.db,
            &format!(
                "SELECT {RUN_COLS} FROM runs WHERE state = 'RUNNING' AND lease_expires < $1
                 ORDER BY lease_expires, run_id LIMIT $2"
            ),
            &[&ms(now), &limit_param(limit)],
        )
        .await?;
        decoded(runs_of(&rows))
    }

    async fn stale_pending(&self, ready_before: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let rows = read_rows(
            &self.db,
            &format!(
                "SELECT {RUN_COLS} FROM runs WHERE state = 'PENDING' AND not_before <= $1
                 ORDER BY not_before, scheduled_for, run_id LIMIT $2"
            ),
            &[&ms(ready_before), &limit_param(limit)],
        )
        .await?;
        decoded(runs_of(&rows))
    }

    async fn skip_records(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        (since, until): (Timestamp, Timestamp),
        limit: usize,
    ) -> Result<Vec<SkipRecord>, StoreError> {
        let rows = read_rows(
            &self.db,
            SKIP_RECORDS_IN,
            &[
                &tenant.as_str(),
                &job_id.as_str(),
                &ms(since),
                &ms(until),
                &limit_param(limit),
            ],
        )
        .await?;
        decoded(decode_all(&rows, |r| skip_record_of(r, 0)))
    }

    async fn record_skips(&self, tenant: &TenantId, job_id: &JobId, records: &[SkipRecord]) -> Result<(), StoreError> {
        let (tenant, job_id, records) = (tenant.0.clone(), job_id.0.clone(), records.to_vec());
        self.write(move |tx| write_skip_records(tx, &tenant, &job_id, &records))
            .await
    }

    async fn dependents(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<JobId>, StoreError> {
        // SQLite reads the edges, then each job; one join here.
        let rows = read_rows(
            &self.db,
            "SELECT j.id FROM job_after a JOIN jobs j ON j.tenant = a.tenant AND j.id = a.downstream
             WHERE a.tenant = $1 AND a.upstream = $2 AND j.state <> 'DELETED'
             ORDER BY j.id",
            &[&tenant.as_str(), &job_id.as_str()],
        )
        .await?;
        decoded(decode_all(&rows, |r| Ok(JobId(get(r, 0)?))))
    }

    async fn expired_waits(&self, now: Timestamp, limit: usize) -> Result<Vec<Wait>, StoreError> {
        let rows = read_rows(&self.db, EXPIRED_WAITS, &[&ms(now), &limit_param(limit)]).await?;
        decoded(decode_all(&rows, wait_from_row))
    }

    async fn expire_wait(&self, wait: &Wait, now: Timestamp) -> Result<Vec<Run>, StoreError> {
        let wait = wait.clone();
        self.write_locked(move |tx| dependency::expire(&mut PgTx(tx), &wait, now))
            .await
    }

    async fn due_alerts(&self, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, StoreError> {
        self.read_due_alerts(now, limit).await
    }

    async fn save_alert(&self, key: &AlertKey, expected: Timestamp, alert: &Alert) -> Result<bool, StoreError> {
        self.write_alert(key, expected, alert).await
    }
}
