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

use crate::alert::{Alert, AlertKey, DueAlert};
use crate::dependency::Wait;
use crate::ids::{JobId, RunId, TenantId, WorkerId};
use crate::job::{Job, JobState, Overlap};
use crate::ledger::SkipRecord;
use crate::run::{Run, RunState};
use crate::run_settings::RunSettings;
use crate::timestamp::Timestamp;
use async_trait::async_trait;

pub use crate::attempt::{AttemptResult, ClaimOutcome, RunTransition};

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

/// How far past a claim's `now` an overlap check at claim looks among a job's active runs
/// ([`JobStore::active_runs`] with `scheduled_by`): no run starts before its nominal time by
/// its worker's clock (workers hold deliveries that come early; clocks agree within
/// `max_clock_skew`, 100 ms by default), so none scheduled later can be running, or be an
/// earlier run waiting, or a backfill run in turn.
pub const CLAIM_CHECK_HORIZON: crate::duration::Dur = crate::duration::Dur::secs(5);

/// `runs` without those scheduled after `by` (all of them without `by`): how a store that
/// reads a job's active runs whole answers [`JobStore::active_runs`] with `scheduled_by`.
pub fn scheduled_up_to(mut runs: Vec<Run>, by: Option<Timestamp>) -> Vec<Run> {
    if let Some(by) = by {
        runs.retain(|r| r.scheduled_for <= by);
    }
    runs
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

/// A sweep's decision about one job, written atomically (one of [`JobStore::fire`]'s batch).
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
    /// The occurrences the plan skipped, for the ledger ([`crate::ledger`]): written with the
    /// firing, each replacing a record of the job with the same `from`.
    pub skipped: Vec<SkipRecord>,
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

/// When a store lists a run just fired across its tenant's jobs, and to the repair scan
/// ([`JobStore::fired_run_listing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FiredRunListing {
    /// At once.
    AtFiring,
    /// Once written: the run of a one-shot's firing left unwritten
    /// ([`crate::unwritten_firing`]) is listed across jobs once its claim, or any other write
    /// of it, puts it (at its time, for a run fired ahead); its job's own listing shows it at
    /// once. The repair scan never needs it: its message was out before the firing counted.
    OnceWritten,
}

/// What [`JobStore::claim`] did with one run of a [`ClaimBatch`].
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // a return value, moved once; boxing would only add an allocation
pub enum JobClaim {
    /// Claimed (any [`ClaimOutcome`]), with the job the run id names as read in the same call
    /// (`None` when the run id names no existing job, or the batch did not read jobs).
    Claimed(ClaimOutcome, Option<Job>),
    /// Not claimed: its job's overlap policy must be checked before the claim.
    Held(Job),
}

/// A batch of claims at one instant, for one worker or for the receives of several taken
/// together ([`JobStore::claim`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimBatch {
    /// The runs, in the order their answers come back.
    pub runs: Vec<(TenantId, RunId)>,
    /// Who claims (each run, unless `owners` names another).
    pub worker: WorkerId,
    /// For the receives of several workers claimed in one batch: the worker of each run, in
    /// the order of `runs`. Empty: `worker` claims them all.
    pub owners: Vec<WorkerId>,
    /// When (millisecond precision).
    pub now: Timestamp,
    /// The lease of each attempt started.
    pub lease_until: Timestamp,
    /// Whether to read each run's job in the claim (answered beside it).
    pub read_jobs: bool,
    /// With `read_jobs`: a run whose job's overlap policy is one of these, or whose job is
    /// PAUSED, or (once read) a run of the schedule never tried at a time its job's timing no
    /// longer has, is not claimed but answered [`JobClaim::Held`] with its job (the caller
    /// checks first — overlap; a paused job's scheduled run, or one a schedule change dropped,
    /// is skipped — then claims it in a batch of its own):
    /// [`held_at_claim`](crate::lifecycle::held_at_claim),
    /// [`held_once_read`](crate::lifecycle::held_once_read).
    pub hold: Vec<Overlap>,
    /// For runs of `queue_one` jobs after their overlap check: a run is not claimed while
    /// another run of its job is RUNNING under a lease live at `now`; it is answered
    /// [`ClaimOutcome::Leased`] with the end of that lease (see
    /// [`another_run_leased_until`](crate::lifecycle::another_run_leased_until)), decided in
    /// the claim's transaction, so that two workers (or two batches of one worker) checking at
    /// the same time cannot both start a run of the job.
    pub alone: bool,
}

impl ClaimBatch {
    /// The worker that claims the run at `index` of `runs`.
    pub fn owner_of(&self, index: usize) -> &WorkerId {
        self.owners.get(index).unwrap_or(&self.worker)
    }
}

/// The end of an attempt, as the worker (or the reaper) writes it ([`JobStore::complete`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Owner of the run.
    pub tenant: TenantId,
    /// The run.
    pub run_id: RunId,
    /// The fencing token of the attempt being closed.
    pub token: u64,
    /// How it ended.
    pub result: AttemptResult,
    /// What the run does next.
    pub next: RunTransition,
    /// The reaper's form: fenced unless the lease expired before this instant.
    pub only_if_expired_by: Option<Timestamp>,
}

/// A run as a write that may end it left it, and the runs that its end released in the same
/// transaction ([`crate::dependency::release`]): downstream runs PENDING, for the caller to
/// enqueue, and occurrences SKIPPED, to report. `released` is empty unless the run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    /// The run written.
    pub run: Run,
    /// What its end released.
    pub released: Vec<Run>,
}

impl Ended {
    /// The released runs that are PENDING: to enqueue.
    pub fn to_enqueue(&self) -> impl Iterator<Item = &Run> {
        self.released.iter().filter(|r| r.state == RunState::Pending)
    }
}

/// Jobs and runs.
///
/// A write that ends a run (complete, cancel, a claim that finds it over, a firing's
/// cancellations) also decides, in its transaction, the occurrences of the jobs that run
/// `after` it ([`crate::dependency::release`]). `complete` and `cancel_run` answer them
/// ([`Ended`]) and `fire` lists them among its runs, for the caller to enqueue; those a claim
/// releases are enqueued by the repair pass (a PENDING run without a message).
///
/// One method per operation, batch-shaped where a caller has several at once (jobs read,
/// firings written, active runs read, claims); single-item conveniences are in
/// [`JobStoreExt`]. No method has a default: a wrapper (faults, audit) forwards every one.
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

    /// The create of a job due at once and its first firing, in one write where the store
    /// can: `job` (as [`create_jobs`](JobStore::create_jobs) would insert it, with
    /// `idempotency`) is inserted as `firing` leaves it — its `next_fire_at` and state — with
    /// the firing's runs and skip records, all or nothing; answers the runs inserted. Refused
    /// as `create_jobs` refuses (nothing written). `None`, the default and always correct:
    /// nothing was written, and the caller creates the job and fires it apart.
    async fn create_fired(
        &self,
        job: &Job,
        idempotency: Option<(&str, &str)>,
        firing: &Firing,
    ) -> Option<Result<Vec<Run>, StoreError>> {
        let _ = (job, idempotency, firing);
        None
    }

    /// What an idempotency key recorded: its request fingerprint and the job ids it created.
    async fn idempotency_lookup(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<(String, Vec<JobId>)>, StoreError>;

    /// Jobs (of any tenants, in any state) by id: each answer in order, `None` for one that
    /// does not exist. A store that can reads them in one go.
    async fn get_jobs(&self, ids: &[(TenantId, JobId)]) -> Result<Vec<Option<Job>>, StoreError>;

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

    /// Applies sweep decisions, each atomically and on its own: if the job's version and
    /// `next_fire_at` still match, cancels `firing.cancel`, inserts the runs that do not exist
    /// yet, and sets `next_fire_at` and state; answers the runs actually inserted (and those
    /// the cancellations released, after them). A firing
    /// whose job moved on is [`StoreError::Conflict`] (and changes nothing), and does not stop
    /// the others; answers in order. A store that can writes them in one transaction. The
    /// outer error is a failure of the call as a whole (nothing was written). The runs are
    /// not enqueued: [`crate::ports::WorkPort::fire`] does both. A store may leave a
    /// one-shot's plain firing unwritten and answer every read as if written
    /// ([`crate::unwritten_firing`]); its run is then dated by the job's last write, not by
    /// `firing.at`.
    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, StoreError>;

    /// The runs that `firings` answered ([`JobStore::fire`]; those it refused too) are in the
    /// queue. A store that left a firing unwritten ([`crate::unwritten_firing`]) counts it
    /// sent from here on (DynamoDB: the sweep may pass its due bucket); a firing whose runs
    /// did not reach the queue is never named here, stays unfired, and is fired again. Every
    /// other store has nothing to do. A failure is only logged: the firing is then fired
    /// again, a second message of the same run.
    async fn firings_sent(&self, firings: &[Firing]) -> Result<(), StoreError>;

    /// When a run just fired is listed across its tenant's jobs (`list_runs` naming no job)
    /// and to the repair scan (`stale_pending`). Every read of the run or its job shows it
    /// at once either way.
    fn fired_run_listing(&self) -> FiredRunListing {
        FiredRunListing::AtFiring
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

    /// For each job (of any tenants), its runs that are PENDING or RUNNING, oldest nominal
    /// time first; answers in order. With `scheduled_by`, only those whose nominal time is
    /// at or before it: an overlap check at claim needs no run fired ahead beyond now (a job
    /// fired ten minutes ahead every second has 600), and a store keyed by nominal time
    /// then reads only what it answers. A store that can reads them in one go.
    async fn active_runs(
        &self,
        jobs: &[(TenantId, JobId)],
        scheduled_by: Option<Timestamp>,
    ) -> Result<Vec<Vec<Run>>, StoreError>;

    /// Starts attempts, each answered as below, in order ([`StoreError::NotFound`] for a run
    /// that does not exist; the outer error is a failure of the call as a whole). A store
    /// that can makes them in one transaction.
    ///
    /// A run that is PENDING with `not_before <= now`, or RUNNING with a lease that expired
    /// before `now` (its attempt is then closed as WORKER_LOST at the lease's expiry, and if
    /// that was the last allowed attempt the run ends FAILED and `Terminal` is returned), gets
    /// attempt n+1 for `worker`: RUNNING with a lease until `lease_until` and a token greater
    /// than any earlier one of this run, `started_at` set on the first attempt. A run with
    /// `cancel_requested` is not claimed (`Leased` while its lease lives, else it ends
    /// CANCELLED and is `Terminal`). An attempt that would start while the tenant's quota has
    /// `max_concurrent_runs` runs occupying a slot ([`crate::quota::occupies_slot`]) does
    /// not: `AtCapacity`, and nothing changes — decided in the claim's transaction, so claims
    /// made at once never pass the cap together. See [`ClaimBatch`] for `read_jobs`, `hold`
    /// and `alone`.
    async fn claim(&self, batch: &ClaimBatch) -> Result<Vec<Result<JobClaim, StoreError>>, StoreError>;

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

    /// Closes the attempt holding `done.token` with `done.result` and moves the run by
    /// `done.next`, clearing the lease. On `Finish`, `finished_at` is `result.finished_at`.
    /// [`StoreError::Fenced`] (and no change) unless the token is the current lease's token
    /// and the run is RUNNING (and, with `only_if_expired_by`, the lease expired before it).
    async fn complete(&self, done: &Completion) -> Result<Ended, StoreError>;

    /// Asks for a run to stop: a PENDING run ends CANCELLED at once (with `reason`);
    /// a RUNNING one gets `cancel_requested` (its worker stops it). A terminal run is
    /// returned unchanged. [`StoreError::NotFound`] if absent.
    async fn cancel_run(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        now: Timestamp,
        reason: &str,
    ) -> Result<Ended, StoreError>;

    /// Sets a PENDING run's `not_before` to `until` ([`Run::defer`]); `false` (no change) if
    /// the run is absent or not PENDING.
    async fn defer_pending(&self, tenant: &TenantId, run_id: &RunId, until: Timestamp) -> Result<bool, StoreError>;

    /// Gives a run that has not started (PENDING, no attempt) its job's changed `settings`
    /// ([`Run::take_settings`]) and answers it as written; `None` (no change) if the run is
    /// absent, has started or ended, or has these settings already.
    async fn take_settings(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        settings: &RunSettings,
    ) -> Result<Option<Run>, StoreError>;

    /// Up to `limit` RUNNING runs (any tenant) whose lease expired before `now`.
    async fn expired_leases(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError>;

    /// Up to `limit` PENDING runs (any tenant) with `not_before <= ready_before`, oldest
    /// first: candidates for re-enqueue by the repair pass.
    async fn stale_pending(&self, ready_before: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError>;

    // ----- the ledger -----

    /// Up to `limit` skip records of `tenant`'s job `job_id` that reach into `[since, until)`
    /// (a record spans `from..=to`), latest `from` first ([`crate::ledger`]).
    async fn skip_records(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        (since, until): (Timestamp, Timestamp),
        limit: usize,
    ) -> Result<Vec<SkipRecord>, StoreError>;

    /// Writes skip records of one job, each replacing a record of the job with the same
    /// `from` (how a pause is opened and closed).
    async fn record_skips(&self, tenant: &TenantId, job_id: &JobId, records: &[SkipRecord]) -> Result<(), StoreError>;

    // ----- dependencies -----

    /// The ids of `tenant`'s jobs (not DELETED) whose `after` names `job_id`, in id order.
    async fn dependents(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<JobId>, StoreError>;

    /// Up to `limit` waits (any tenant) whose deadline is before `now`, earliest first.
    async fn expired_waits(&self, now: Timestamp, limit: usize) -> Result<Vec<Wait>, StoreError>;

    /// Gives up the occurrence of an expired `wait` ([`crate::dependency::expire`]) and
    /// removes the wait, in one transaction; answers what that released (the occurrence
    /// SKIPPED, and what its end released in turn).
    async fn expire_wait(&self, wait: &Wait, now: Timestamp) -> Result<Vec<Run>, StoreError>;

    // ----- alerts -----

    /// Up to `limit` alerts (any tenant) pending and due by `now` ([`crate::alert`]) — of
    /// ended runs and of firings' skip records — earliest due first. Reading an index of
    /// pending alerts, never every run.
    async fn due_alerts(&self, now: Timestamp, limit: usize) -> Result<Vec<DueAlert>, StoreError>;

    /// Replaces the alert kept at `key` with `alert`, if its `due` is still `expected`
    /// (another notifier has not taken or recorded it meanwhile); whether it did. Nothing else
    /// of the run or record changes.
    async fn save_alert(&self, key: &AlertKey, expected: Timestamp, alert: &Alert) -> Result<bool, StoreError>;
}

/// Single-item forms of [`JobStore`]'s batch methods, for every store.
#[async_trait]
pub trait JobStoreExt: JobStore {
    /// One job, in any state.
    async fn get_job(&self, tenant: &TenantId, id: &JobId) -> Result<Option<Job>, StoreError> {
        let mut jobs = self.get_jobs(&[(tenant.clone(), id.clone())]).await?;
        Ok(jobs.pop().flatten())
    }

    /// The job's runs that are PENDING or RUNNING, oldest nominal time first.
    async fn active_runs_of(&self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<Run>, StoreError> {
        let mut runs = self.active_runs(&[(tenant.clone(), job_id.clone())], None).await?;
        Ok(runs.pop().unwrap_or_default())
    }

    /// The job's runs that are PENDING or RUNNING and scheduled at or before `by`, oldest
    /// nominal time first.
    async fn active_runs_due(&self, tenant: &TenantId, job_id: &JobId, by: Timestamp) -> Result<Vec<Run>, StoreError> {
        let mut runs = self.active_runs(&[(tenant.clone(), job_id.clone())], Some(by)).await?;
        Ok(runs.pop().unwrap_or_default())
    }

    /// One firing ([`JobStore::fire`]): the runs inserted, or its refusal.
    async fn fire_one(&self, firing: &Firing) -> Result<Vec<Run>, StoreError> {
        let mut answers = self.fire(std::slice::from_ref(firing)).await?;
        answers
            .pop()
            .unwrap_or_else(|| Err(StoreError::Other("fire answered no firing".into())))
    }

    /// One claim ([`JobStore::claim`]) of `run_id` for `worker`, reading no job.
    async fn claim_one(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        worker: &WorkerId,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<ClaimOutcome, StoreError> {
        let batch = ClaimBatch {
            runs: vec![(tenant.clone(), run_id.clone())],
            worker: worker.clone(),
            owners: Vec::new(),
            now,
            lease_until,
            read_jobs: false,
            hold: Vec::new(),
            alone: false,
        };
        match self.claim(&batch).await?.pop() {
            Some(Ok(JobClaim::Claimed(outcome, _))) => Ok(outcome),
            Some(Ok(JobClaim::Held(_))) | None => Err(StoreError::Other("claim answered no claim".into())),
            Some(Err(e)) => Err(e),
        }
    }
}

impl<S: JobStore + ?Sized> JobStoreExt for S {}
