//! The `JobStore` port: jobs, runs and attempts, with the conditional writes the scheduler's
//! guarantees rest on.
//!
//! - Run ids are derived from (job, nominal time); inserting a run whose id exists is a no-op.
//!   That is what makes a repeated sweep harmless.
//! - Every write a worker makes about an attempt (heartbeat, completion) names the fencing
//!   token it was given at claim; a write with any other token is [`StoreError::Fenced`] and
//!   changes nothing.
//! - Job updates are compare-and-set on `version`; sweeps are compare-and-set on
//!   `next_fire_at` and do not bump `version`.

use crate::duration::Dur;
use crate::ids::{JobId, RunId, TenantId, WorkerId};
use crate::job::{Job, JobState, Overlap};
use crate::ports::queue::{Delivery, Receipt};
use crate::run::{AttemptOutcome, Run, RunState};
use crate::timestamp::Timestamp;
use async_trait::async_trait;

/// Store failures.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The job or run does not exist (for this tenant).
    #[error("not found")]
    NotFound,
    /// A condition did not hold: the id exists, the version or `next_fire_at` moved on.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A listing's cursor is not one this store issued (the caller's mistake, not the
    /// store's: the API answers 400 naming `cursor`).
    #[error("malformed cursor: {0}")]
    BadCursor(String),
    /// The write named a fencing token that no longer holds the run's lease.
    #[error("fenced: the lease is held by another attempt or has ended")]
    Fenced,
    /// The write would take the tenant past a limit of its quota (the message says which);
    /// nothing was written.
    #[error("quota exceeded: {0}")]
    QuotaExceeded(String),
    /// A failure worth retrying (throttling, a busy database).
    #[error("transient store error: {0}")]
    Transient(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Anything else (I/O, corruption, a bug).
    #[error("store error: {0}")]
    Other(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The items, in the listing's order.
    pub items: Vec<T>,
    /// Opaque cursor for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// Where a page starts and how long it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// A `next_cursor` from the previous page, or `None` for the first.
    pub cursor: Option<String>,
    /// At most this many items (the caller has bounded it).
    pub limit: usize,
}

/// Filters for listing jobs (ordered by id ascending).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs in this state. DELETED jobs are listed only when asked for by state.
    pub state: Option<JobState>,
    /// Only jobs carrying every one of these label pairs.
    pub labels: Vec<(String, String)>,
}

/// Filters for listing runs (ordered by `scheduled_for` descending, then run id descending).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only this job's runs.
    pub job_id: Option<JobId>,
    /// Only runs in this state.
    pub state: Option<RunState>,
    /// Only runs with `scheduled_for >= since`.
    pub since: Option<Timestamp>,
    /// Only runs with `scheduled_for < until`.
    pub until: Option<Timestamp>,
}

/// A sweep's decision about one job, written atomically by [`JobStore::fire`].
#[derive(Debug, Clone, PartialEq)]
pub struct Firing {
    /// Owner.
    pub tenant: TenantId,
    /// The job.
    pub job_id: JobId,
    /// Condition: the job's version is still this…
    pub expected_version: u64,
    /// …and its `next_fire_at` is still this.
    pub expected_next_fire_at: Option<Timestamp>,
    /// The new `next_fire_at`.
    pub next_fire_at: Option<Timestamp>,
    /// The job's new state (COMPLETED when nothing is left to fire).
    pub state: JobState,
    /// Runs to insert; ones whose id exists are left as they are.
    pub runs: Vec<Run>,
    /// Runs to cancel first (`replace` overlap): PENDING ones end CANCELLED, RUNNING ones
    /// get `cancel_requested`.
    pub cancel: Vec<RunId>,
    /// When the sweep decided (the cancellations' time).
    pub at: Timestamp,
}

impl Firing {
    /// Whether `job` is still the version the sweep decided on (the write's condition).
    pub fn still_applies_to(&self, job: &Job) -> bool {
        job.version == self.expected_version
            && job.next_fire_at.map(crate::timestamp::trunc_ms)
                == self.expected_next_fire_at.map(crate::timestamp::trunc_ms)
    }
}

/// Why a claim did not start an attempt, or the attempt it started.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    /// A new attempt began: the run is RUNNING under this worker's lease.
    Claimed {
        /// The run after the claim (its last attempt is the new one).
        run: Run,
        /// Fencing token for every later write about this attempt.
        token: u64,
    },
    /// The run has ended (possibly just now, if the previous attempt was abandoned with no
    /// attempt left). Drop the message.
    Terminal(Run),
    /// Another attempt holds a live lease until this instant.
    Leased(Timestamp),
    /// The run may not start before this instant (backoff or jitter).
    NotYet(Timestamp),
    /// The run's tenant has as many runs RUNNING as its quota's `max_concurrent_runs`
    /// allows; nothing changed. Try again when a slot may have freed.
    AtCapacity,
}

/// What [`JobStore::claim_many_with_jobs`] did with one run.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // a return value, moved once; boxing would only add an allocation
pub enum JobClaim {
    /// Claimed (any [`ClaimOutcome`]), with the job the run id names as read in the same call.
    Claimed(ClaimOutcome, Option<Job>),
    /// Not claimed: its job's overlap policy must be checked before the claim.
    Held(Job),
}

/// How a finished attempt ended, as written by [`JobStore::complete`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptResult {
    /// When it ended.
    pub finished_at: Timestamp,
    /// How.
    pub outcome: AttemptOutcome,
    /// Exit code, if a process or container ran.
    pub exit_code: Option<i32>,
    /// HTTP status, if a request was answered.
    pub http_status: Option<u16>,
    /// Error text, if any.
    pub error: Option<String>,
    /// Log bytes captured.
    pub log_bytes: u64,
    /// Whether the log hit its cap.
    pub log_truncated: bool,
}

/// What the run does after an attempt ends (decided by [`crate::retry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunTransition {
    /// Back to PENDING, claimable from `not_before`.
    Retry {
        /// Earliest next claim.
        not_before: Timestamp,
    },
    /// A terminal state.
    Finish(RunState),
}

/// Jobs and runs.
///
/// Contract (checked by sked-testkit's store suite), beyond each method's doc:
/// - every read and write is scoped by tenant, except the sweeper's and reaper's scans,
///   which span tenants;
/// - a run read back equals the run written (timestamps at millisecond precision).
#[async_trait]
pub trait JobStore: Send + Sync + 'static {
    // ----- jobs -----

    /// Inserts jobs all-or-nothing. [`StoreError::Conflict`] if any (tenant, id) exists
    /// in a state other than DELETED (a DELETED job of that id is replaced). With an
    /// idempotency key, the key is recorded in the same transaction as
    /// `(key, fingerprint) → job ids`. [`StoreError::QuotaExceeded`] (nothing written) if the
    /// jobs would take the tenant past its quota's `max_active_jobs`.
    async fn create_jobs(&self, jobs: &[Job], idempotency: Option<(&str, &str)>) -> Result<(), StoreError>;

    /// What an idempotency key recorded: its request fingerprint and the job ids it created.
    async fn idempotency_lookup(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<(String, Vec<JobId>)>, StoreError>;

    /// One job, in any state.
    async fn get_job(&self, tenant: &TenantId, id: &JobId) -> Result<Option<Job>, StoreError>;

    /// [`JobStore::get_job`] for several jobs (of any tenants) at once: each answer in
    /// order. A store that can should read them in one go.
    async fn get_jobs(&self, ids: &[(TenantId, JobId)]) -> Result<Vec<Option<Job>>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        for (tenant, id) in ids {
            out.push(self.get_job(tenant, id).await?);
        }
        Ok(out)
    }

    /// Replaces a job if its stored version is `expected_version` and its stored
    /// `next_fire_at` is still `expected_next_fire_at` (a sweep moves it without bumping the
    /// version, and a user change must not undo that); stores `job` as given (the caller has
    /// bumped `job.version`). [`StoreError::Conflict`] otherwise, [`StoreError::NotFound`] if
    /// it does not exist. [`StoreError::QuotaExceeded`] if the change makes the job count
    /// against `max_active_jobs` again (a COMPLETED job replaced with a schedule that fires)
    /// and the tenant is at that limit.
    async fn update_job(
        &self,
        job: &Job,
        expected_version: u64,
        expected_next_fire_at: Option<Timestamp>,
    ) -> Result<(), StoreError>;

    /// A page of jobs, ordered by id.
    async fn list_jobs(
        &self,
        tenant: &TenantId,
        filter: &JobFilter,
        page: &PageRequest,
    ) -> Result<Page<Job>, StoreError>;

    /// Up to `limit` ACTIVE jobs (any tenant) with `next_fire_at <= horizon`, earliest first.
    async fn due_jobs(&self, horizon: Timestamp, limit: usize) -> Result<Vec<Job>, StoreError>;

    /// The earliest `next_fire_at` of any ACTIVE job, for the sweeper's sleep.
    async fn next_due_at(&self) -> Result<Option<Timestamp>, StoreError>;

    /// Applies a sweep decision atomically: if the job's version and `next_fire_at` still
    /// match, cancels `firing.cancel`, inserts the runs that do not exist yet, and sets
    /// `next_fire_at` and state. Returns the runs actually inserted.
    /// [`StoreError::Conflict`] (and no change) if the job moved on.
    async fn fire(&self, firing: &Firing) -> Result<Vec<Run>, StoreError>;

    /// [`JobStore::fire`] for several jobs in one call: each firing is applied atomically and
    /// on its own (one that conflicts changes nothing and does not stop the others), and
    /// gets its own answer, in order. A store that can should write them in one transaction.
    /// The outer error is a failure of the call as a whole (nothing was written).
    ///
    /// The flag says whether the created runs were also enqueued, in the same transaction —
    /// possible where the store holds the dispatch queue in the same database and that queue
    /// is the one in use. When it is `false` (the default) the caller enqueues them.
    async fn fire_many(&self, firings: &[Firing]) -> Result<(Vec<Result<Vec<Run>, StoreError>>, bool), StoreError> {
        let mut out = Vec::with_capacity(firings.len());
        for firing in firings {
            out.push(self.fire(firing).await);
        }
        Ok((out, false))
    }

    // ----- runs -----

    /// Inserts a run unless its id exists. Returns whether it was inserted.
    async fn insert_run(&self, run: &Run) -> Result<bool, StoreError>;

    /// One run.
    async fn get_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, StoreError>;

    /// A page of runs, newest nominal time first.
    async fn list_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        page: &PageRequest,
    ) -> Result<Page<Run>, StoreError>;

    /// The job's runs that are PENDING or RUNNING, oldest nominal time first.
    async fn active_runs(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<Run>, StoreError>;

    /// [`JobStore::active_runs`] for several jobs (of any tenants) at once: each answer in
    /// order. A store that can should read them in one go.
    async fn active_runs_many(&self, jobs: &[(TenantId, JobId)]) -> Result<Vec<Vec<Run>>, StoreError> {
        let mut out = Vec::with_capacity(jobs.len());
        for (tenant, job_id) in jobs {
            out.push(self.active_runs(tenant, job_id).await?);
        }
        Ok(out)
    }

    /// Starts an attempt. If the run is PENDING with `not_before <= now`, or RUNNING with a
    /// lease that expired before `now` (its attempt is then closed as WORKER_LOST at the
    /// lease's expiry, and if that was the last allowed attempt the run ends FAILED and
    /// `Terminal` is returned), appends attempt n+1 for `worker`, sets the run RUNNING with a
    /// lease until `lease_until` and a token greater than any earlier one of this run, and
    /// sets `started_at` on the first attempt. A run with `cancel_requested` is not claimed
    /// (`Leased` while its lease lives, else it ends CANCELLED and is `Terminal`). An attempt
    /// that would start while the tenant's quota has `max_concurrent_runs` runs occupying a
    /// slot ([`crate::quota::occupies_slot`]) does not: `AtCapacity`, and nothing changes —
    /// decided in the claim's transaction, so claims made at once never pass the cap together.
    async fn claim(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<ClaimOutcome, StoreError>;

    /// [`JobStore::claim`] for several runs at once (a worker's received batch), all for
    /// `worker` at `now`: each answer is the one `claim` would give, in order
    /// ([`StoreError::NotFound`] for a run that does not exist). A store that can should
    /// make them in one transaction. The outer error is a failure of the call as a whole.
    async fn claim_many(
        &self,
        runs: &[(TenantId, RunId)],
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<Result<ClaimOutcome, StoreError>>, StoreError> {
        let mut out = Vec::with_capacity(runs.len());
        for (tenant, run_id) in runs {
            out.push(self.claim(tenant, run_id, worker, now, lease_until).await);
        }
        Ok(out)
    }

    /// [`JobStore::claim_many`] for runs of `queue_one` jobs: a run is not claimed while
    /// another run of its job is RUNNING under a lease live at `now`; it is answered
    /// [`ClaimOutcome::Leased`] with the end of that lease (see
    /// [`another_run_leased_until`](crate::lifecycle::another_run_leased_until)). A store that
    /// can makes the check in the claim's transaction, so that two workers (or two batches of
    /// one worker) checking at the same time cannot both start a run of the job. The default
    /// checks with [`JobStore::active_runs`], then claims: not atomic.
    async fn claim_many_alone(
        &self,
        runs: &[(TenantId, RunId)],
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<Result<ClaimOutcome, StoreError>>, StoreError> {
        let mut out = Vec::with_capacity(runs.len());
        for (tenant, run_id) in runs {
            let busy_until = match run_id.parts() {
                Some((job_id, _)) => {
                    crate::lifecycle::another_run_leased_until(&self.active_runs(tenant, &job_id).await?, run_id, now)
                }
                None => None,
            };
            out.push(match busy_until {
                Some(until) => Ok(ClaimOutcome::Leased(until)),
                None => self.claim(tenant, run_id, worker, now, lease_until).await,
            });
        }
        Ok(out)
    }

    /// [`JobStore::claim_many`] together with [`JobStore::get_jobs`] for the jobs the run ids
    /// name, in one call (one transaction where the store can): a run whose job's overlap
    /// policy is one of `hold` is not claimed but answered [`JobClaim::Held`] with its job
    /// (the caller checks overlap first, then claims it); every other run is claimed as
    /// `claim` would, and answered with its job (`None` when the run id names no existing
    /// job). [`StoreError::NotFound`] for a run that does not exist.
    async fn claim_many_with_jobs(
        &self,
        runs: &[(TenantId, RunId)],
        hold: &[Overlap],
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<Result<JobClaim, StoreError>>, StoreError> {
        let named: Vec<Option<(TenantId, JobId)>> = runs
            .iter()
            .map(|(tenant, run_id)| Some((tenant.clone(), run_id.parts()?.0)))
            .collect();
        let wanted: Vec<(TenantId, JobId)> = named.iter().flatten().cloned().collect();
        let mut read = self.get_jobs(&wanted).await?.into_iter();
        let jobs: Vec<Option<Job>> = named
            .iter()
            .map(|n| n.as_ref().and_then(|_| read.next().flatten()))
            .collect();
        let is_held = |job: &Option<Job>| job.as_ref().is_some_and(|j| hold.contains(&j.spec.overlap_policy()));
        let to_claim: Vec<(TenantId, RunId)> = runs
            .iter()
            .zip(&jobs)
            .filter(|(_, job)| !is_held(job))
            .map(|(run, _)| run.clone())
            .collect();
        let mut claims = self.claim_many(&to_claim, worker, now, lease_until).await?.into_iter();
        Ok(jobs
            .into_iter()
            .map(|job| match job {
                Some(job) if hold.contains(&job.spec.overlap_policy()) => Ok(JobClaim::Held(job)),
                job => match claims.next() {
                    Some(claim) => claim.map(|outcome| JobClaim::Claimed(outcome, job)),
                    None => Err(StoreError::Other("claim_many answered too few runs".into())),
                },
            })
            .collect())
    }

    /// Where this store's database also holds the dispatch queue in use (the local
    /// deployment: SQLite with its queue on the same file), receives without waiting up to
    /// `max` messages visible at `now`, leased for `visibility` as
    /// [`DispatchQueue::receive`](crate::ports::DispatchQueue::receive) would, and answers
    /// each as [`JobStore::claim_many_with_jobs`] would, all in one transaction: a worker
    /// under load saves a round trip per batch. `None` where the store cannot (the default):
    /// receive from the queue, then claim.
    async fn receive_and_claim(
        &self,
        max: usize,
        visibility: Dur,
        hold: &[Overlap],
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Option<Vec<(Delivery, Result<JobClaim, StoreError>)>>, StoreError> {
        let _ = (max, visibility, hold, worker, now, lease_until);
        Ok(None)
    }

    /// Renews the lease of the attempt holding `token` until `lease_until`, if that lease has
    /// not expired before `now`. Returns the run (so the worker sees `cancel_requested`).
    /// [`StoreError::Fenced`] if the token is not the live lease.
    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Run, StoreError>;

    /// Closes the attempt holding `token` with `result` and moves the run by `next`, clearing
    /// the lease. On `Finish`, `finished_at` is `result.finished_at`. [`StoreError::Fenced`]
    /// (and no change) unless `token` is the current lease's token and the run is RUNNING.
    /// With `only_if_expired_by = Some(t)`, also fenced unless the lease expired before `t`
    /// (the reaper's form).
    async fn complete(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        result: &AttemptResult,
        next: RunTransition,
        only_if_expired_by: Option<Timestamp>,
    ) -> Result<Run, StoreError>;

    /// [`JobStore::complete`] (the worker's form), and — where this store also holds the
    /// dispatch queue, in the same database — the removal of the delivered message
    /// `receipt` in the same transaction. Returns the run and whether the message was
    /// removed; when it was not (the default, for a store apart from its queue, or a receipt
    /// that is no longer current), the caller acks it through the queue. A fenced completion
    /// removes nothing.
    async fn complete_and_ack(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        result: &AttemptResult,
        next: RunTransition,
        receipt: &Receipt,
    ) -> Result<(Run, bool), StoreError> {
        let _ = receipt;
        let run = self.complete(tenant, run_id, token, result, next, None).await?;
        Ok((run, false))
    }

    /// Asks for a run to stop: a PENDING run ends CANCELLED at once (with `reason`);
    /// a RUNNING one gets `cancel_requested` (its worker stops it). A terminal run is
    /// returned unchanged. [`StoreError::NotFound`] if absent.
    async fn cancel_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Run, StoreError>;

    /// Up to `limit` RUNNING runs (any tenant) whose lease expired before `now`.
    async fn expired_leases(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError>;

    /// Up to `limit` PENDING runs (any tenant) with `not_before <= ready_before`, oldest
    /// first: candidates for re-enqueue by the repair pass.
    async fn stale_pending(&self, ready_before: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError>;
}
