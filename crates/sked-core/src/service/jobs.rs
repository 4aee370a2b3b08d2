//! Job actions: create (single, batch, idempotent), read, list, replace, delete, pause,
//! resume, trigger, preview.

use super::Sked;
use crate::error::{BatchFieldError, CoreError, FieldError};
use crate::firing::SkipReason;
use crate::ids::{JobId, TenantId};
use crate::job::{Job, JobSpec, JobState};
use crate::ledger::{RESCHEDULED, SkipRecord};
use crate::ports::{Dispatch, Event, JobFilter, JobStoreExt, Page, PageRequest, StoreError};
use crate::run::{Run, RunState, Trigger};
use crate::run_settings::RunSettings;
use crate::schedule::next::{first_fire, next_fire_after};
use crate::task::Task;
use crate::timestamp::Timestamp;
use crate::validate::{validate_job_id, validate_spec};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Most jobs one batch may create.
pub const MAX_BATCH: usize = 1_000;

/// The longest one API call spends firing jobs directly ([`SkedConfig::fire_within`]) before
/// it leaves the rest to the sweeper: a create answers in about this time at worst, well
/// inside API Gateway's 29 s, whatever the batch. (One job's firing is bounded by
/// [`crate::firing::MAX_RUNS_PER_FIRING`]; the budget bounds how many jobs fire.)
///
/// [`SkedConfig::fire_within`]: super::SkedConfig::fire_within
pub const DIRECT_FIRE_BUDGET: crate::duration::Dur = crate::duration::Dur::secs(2);

/// Jobs one API call fires in one store call ([`Sked::fire_if_due`]): a batch's one-shots
/// then share the store's transactions (up to 100 items) and their runs' sends.
pub const DIRECT_FIRE_CHUNK: usize = 64;

/// Reads and writes one user change may take when sweeps keep moving the job.
const MAX_MODIFY_TRIES: usize = 5;

/// A job as submitted: an optional caller-given id and the definition.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// Caller-given id; a ULID is generated if absent.
    pub id: Option<JobId>,
    /// The definition.
    pub spec: JobSpec,
}

/// The answer to a create: the job, and whether this call created it (false when an
/// identical re-POST or a replayed idempotency key returned the existing job).
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    /// The stored job.
    pub job: Job,
    /// Whether it was created now.
    pub created: bool,
}

/// How many runs not yet started take a changed job's settings at once.
const RESETTLE_AT_ONCE: usize = 16;

impl Sked {
    /// Creates one job. Re-POST of the same id with the same spec returns the existing job
    /// (`created: false`); with a different spec, `Conflict`. With `idempotency_key`, a
    /// replay of the same request returns the first answer; a different request reusing
    /// the key is a `Conflict`.
    pub async fn create_job(
        &self,
        tenant: &TenantId,
        new: NewJob,
        idempotency_key: Option<&str>,
    ) -> Result<Created, CoreError> {
        let now = self.now();
        let problems = self.check_new_job(&new, now);
        if !problems.is_empty() {
            return Err(self.invalid_or_unsupported(problems));
        }
        let problems = self
            .check_after(tenant, new.id.as_ref(), &new.spec, &BTreeMap::new())
            .await?;
        if !problems.is_empty() {
            return Err(CoreError::Invalid(problems));
        }
        self.admit(tenant, 1).await?;
        let fingerprint = fingerprint(tenant, std::slice::from_ref(&new));
        if let Some(key) = idempotency_key
            && let Some(ids) = self.replayed(tenant, key, &fingerprint).await?
        {
            let job = self.get_job(tenant, &ids[0]).await?;
            return Ok(Created { job, created: false });
        }
        // The create is tried first: a job of that id that exists (a re-POST, or a race with
        // another create) refuses it, and only then is the job read — so a create costs no read.
        let submitted = new.spec.clone();
        let job = self.new_job(tenant, new, now);
        let idempotency = idempotency_key.map(|k| (k, fingerprint.as_str()));
        // A job due at once is created with its first firing in one write where the ports can
        // (`fired`: the job as that firing left it); else created, then fired.
        let written = match self.create_fired(&job, idempotency).await {
            Some(answer) => answer.map(Some),
            None => self
                .ports
                .store
                .create_jobs(std::slice::from_ref(&job), idempotency)
                .await
                .map(|()| None),
        };
        let fired = match written {
            Ok(fired) => fired,
            // The same definition answers like a first create, without creating (also when
            // the tenant is at its job quota: nothing would be added); another is a conflict.
            Err(refused @ (StoreError::Conflict(_) | StoreError::QuotaExceeded(_))) => {
                return match self.existing_twin(tenant, &job.id, &submitted).await? {
                    Some(existing) => Ok(Created {
                        job: existing,
                        created: false,
                    }),
                    None => Err(match refused {
                        StoreError::Conflict(_) => CoreError::Conflict(format!("job {} already exists", job.id)),
                        quota => quota.into(),
                    }),
                };
            }
            Err(e) => return Err(e.into()),
        };
        self.sweep.wake();
        let job = match fired {
            Some(fired) => fired,
            None => self.fire_if_due(vec![job]).await.remove(0),
        };
        Ok(Created { job, created: true })
    }

    /// Creates up to [`MAX_BATCH`] jobs in one transaction; any invalid entry fails them all
    /// with `InvalidBatch` listing every problem.
    pub async fn create_jobs(
        &self,
        tenant: &TenantId,
        jobs: Vec<NewJob>,
        idempotency_key: Option<&str>,
    ) -> Result<Vec<Job>, CoreError> {
        let now = self.now();
        if jobs.is_empty() || jobs.len() > MAX_BATCH {
            return Err(CoreError::invalid(
                "jobs",
                format!("a batch holds 1 to {MAX_BATCH} jobs, not {}", jobs.len()),
            ));
        }
        let mut problems = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (index, new) in jobs.iter().enumerate() {
            for e in self.check_new_job(new, now) {
                problems.push(BatchFieldError {
                    index,
                    field: e.field,
                    message: e.message,
                });
            }
            if let Some(id) = &new.id
                && !seen.insert(id.clone())
            {
                let message = format!("id {id} appears twice in the batch");
                problems.push(BatchFieldError {
                    index,
                    field: "id".into(),
                    message,
                });
            }
        }
        if problems.is_empty() {
            let batch: BTreeMap<JobId, JobSpec> = jobs
                .iter()
                .filter_map(|new| new.id.clone().map(|id| (id, new.spec.clone())))
                .collect();
            for (index, new) in jobs.iter().enumerate() {
                for e in self.check_after(tenant, new.id.as_ref(), &new.spec, &batch).await? {
                    problems.push(BatchFieldError {
                        index,
                        field: e.field,
                        message: e.message,
                    });
                }
            }
        }
        if !problems.is_empty() {
            return Err(CoreError::InvalidBatch(problems));
        }
        self.admit(tenant, jobs.len()).await?;
        let fingerprint = fingerprint(tenant, &jobs);
        if let Some(key) = idempotency_key
            && let Some(ids) = self.replayed(tenant, key, &fingerprint).await?
        {
            let mut out = Vec::with_capacity(ids.len());
            for id in &ids {
                out.push(self.get_job(tenant, id).await?);
            }
            return Ok(out);
        }
        let jobs: Vec<Job> = jobs.into_iter().map(|new| self.new_job(tenant, new, now)).collect();
        self.ports
            .store
            .create_jobs(&jobs, idempotency_key.map(|k| (k, fingerprint.as_str())))
            .await
            .map_err(|e| match e {
                StoreError::Conflict(msg) => {
                    CoreError::Conflict(format!("a job id in the batch already exists: {msg}"))
                }
                other => other.into(),
            })?;
        self.sweep.wake();
        Ok(self.fire_if_due(jobs).await)
    }

    /// One job (DELETED jobs included, so history stays reachable).
    pub async fn get_job(&self, tenant: &TenantId, id: &JobId) -> Result<Job, CoreError> {
        self.ports
            .store
            .get_job(tenant, id)
            .await?
            .ok_or_else(|| CoreError::NotFound(format!("job {id}")))
    }

    /// A page of jobs.
    pub async fn list_jobs(
        &self,
        tenant: &TenantId,
        filter: &JobFilter,
        page: &PageRequest,
    ) -> Result<Page<Job>, CoreError> {
        Ok(self.ports.store.list_jobs(tenant, filter, page).await?)
    }

    /// Replaces a job's definition (PUT; PATCH merges first, then calls this). A change of
    /// schedule, window or DST rule recomputes `next_fire_at`. With `if_version`, `Conflict`
    /// unless it matches.
    pub async fn replace_job(
        &self,
        tenant: &TenantId,
        id: &JobId,
        spec: JobSpec,
        if_version: Option<u64>,
    ) -> Result<Job, CoreError> {
        let now = self.now();
        // `{"secret": true}` keeps the secret the job has under that name (what a client that
        // read the job and writes it back sends); one that cannot be kept is a problem below.
        // Only such a request reads the job here; every other replace reads it once, below.
        let mut spec = spec;
        if let Some(env) = spec.task.env_mut().filter(|env| crate::secret::keeps_secrets(env)) {
            let current = self.live_job(tenant, id).await?;
            if let Some(old) = current.spec.task.env() {
                crate::secret::keep_secrets(env, old);
            }
        }
        let problems = self.check_new_job(
            &NewJob {
                id: None,
                spec: spec.clone(),
            },
            now,
        );
        if !problems.is_empty() {
            return Err(self.invalid_or_unsupported(problems));
        }
        let problems = self.check_after(tenant, Some(id), &spec, &BTreeMap::new()).await?;
        if !problems.is_empty() {
            return Err(CoreError::Invalid(problems));
        }
        let spec = spec.normalised(now);
        // Whether the change that was written moved the job's timing, and whether it changed
        // what its runs copy of it (the last try's verdicts).
        let retimed = AtomicBool::new(false);
        let resettled = AtomicBool::new(false);
        let job = self
            .modify(tenant, id, if_version, |job, now| {
                let timing_changed = spec.schedule != job.spec.schedule
                    || spec.window() != job.spec.window()
                    || spec.dst != job.spec.dst;
                retimed.store(timing_changed, Ordering::Relaxed);
                resettled.store(RunSettings::of(&spec) != RunSettings::of(&job.spec), Ordering::Relaxed);
                let mut updated = job.clone();
                if timing_changed {
                    updated.next_fire_at = job.first_fire_after_change(&spec, now);
                    updated.state = match (job.state, updated.next_fire_at) {
                        (JobState::Paused, _) => JobState::Paused,
                        (_, Some(_)) => JobState::Active,
                        (_, None) if spec.schedule.after().is_some() => JobState::Active,
                        (_, None) => JobState::Completed,
                    };
                }
                updated.spec = spec.clone();
                Ok(Some(updated))
            })
            .await?;
        // The change is stored: a failure here is only logged (the runs fired ahead then run
        // as they would have before the change).
        if retimed.load(Ordering::Relaxed)
            && let Err(e) = self.end_runs_off_schedule(&job).await
        {
            tracing::warn!(%tenant, job_id = %id, error = %e, "runs fired ahead under the old timing not ended");
        }
        if resettled.load(Ordering::Relaxed)
            && let Err(e) = self.resettle_unstarted_runs(&job).await
        {
            tracing::warn!(%tenant, job_id = %id, error = %e, "runs not started kept the job's old settings");
        }
        Ok(self.fire_if_due(vec![job]).await.remove(0))
    }

    /// After a change of what `job`'s runs copy of it ([`RunSettings`]: priority, retries,
    /// concurrency key, notify): each of its runs that has not started (PENDING, no attempt —
    /// one fired ahead of its time, as on AWS, or due and still queued) takes the job's new
    /// settings, and one whose priority or concurrency key changed is queued again (at its new
    /// priority; a message parked on its old key is set free). A run claimed meanwhile keeps
    /// what it started with.
    async fn resettle_unstarted_runs(&self, job: &Job) -> Result<(), CoreError> {
        let settings = RunSettings::of(&job.spec);
        let mut unstarted = self.ports.store.active_runs_of(&job.tenant, &job.id).await?;
        unstarted.retain(Run::is_unstarted);
        let mut requeue = Vec::new();
        // Some writes at a time: a per-second job has hundreds of runs fired ahead on AWS.
        for chunk in unstarted.chunks(RESETTLE_AT_ONCE) {
            let writes = chunk
                .iter()
                .map(|run| self.ports.store.take_settings(&job.tenant, &run.run_id, &settings));
            for (run, taken) in chunk.iter().zip(futures::future::join_all(writes).await) {
                // A message parked on the old concurrency key is set free by its re-enqueue too.
                let moved = |taken: &Run| taken.priority != run.priority || taken.concurrency != run.concurrency;
                if let Some(taken) = taken?.filter(moved) {
                    requeue.push(Dispatch::from(&taken));
                }
            }
        }
        if !requeue.is_empty() {
            self.ports.queue.enqueue(&requeue).await?;
        }
        Ok(())
    }

    /// After a change of `job`'s timing (schedule, window, DST rule): each of its runs fired
    /// ahead of its time before the change (a sweeper or create look-ahead, as on AWS) whose
    /// nominal time is not one of the new timing ends CANCELLED unstarted, with the reason
    /// [`RESCHEDULED`] (the ledger's `rescheduled`), so the old timing starts nothing more.
    /// Runs already due are left to run: they came due under the timing of their time. A run
    /// at a time both timings share is kept (the new timing counts it fired).
    async fn end_runs_off_schedule(&self, job: &Job) -> Result<(), CoreError> {
        let now = self.now();
        for run in self.ports.store.active_runs_of(&job.tenant, &job.id).await? {
            let fired_ahead = run.is_untried_occurrence() && run.scheduled_for > now;
            if !fired_ahead || job.spec.is_occurrence(run.scheduled_for) {
                continue;
            }
            let ended = self
                .ports
                .store
                .cancel_run(&job.tenant, &run.run_id, now, RESCHEDULED)
                .await?;
            self.ports.observe(Event::Skipped {
                tenant: &job.tenant,
                reason: SkipReason::Rescheduled,
            });
            super::enqueue_released(&self.ports, &ended).await;
        }
        Ok(())
    }

    /// Deletes a job: no new runs, and its PENDING runs are cancelled; RUNNING attempts
    /// finish unless `cancel_running`. A job that others run `after` is a `Conflict` unless
    /// `force`.
    pub async fn delete_job(
        &self,
        tenant: &TenantId,
        id: &JobId,
        cancel_running: bool,
        force: bool,
    ) -> Result<Job, CoreError> {
        self.check_no_dependents(tenant, id, force).await?;
        let deleted = self
            .modify(tenant, id, None, |job, _| {
                let mut deleted = job.clone();
                deleted.state = JobState::Deleted;
                deleted.next_fire_at = None;
                Ok(Some(deleted))
            })
            .await?;
        let now = self.now();
        for run in self.ports.store.active_runs_of(tenant, id).await? {
            if run.state == RunState::Pending || cancel_running {
                let ended = self
                    .ports
                    .store
                    .cancel_run(tenant, &run.run_id, now, crate::lifecycle::JOB_DELETED)
                    .await?;
                super::enqueue_released(&self.ports, &ended).await;
            }
        }
        Ok(deleted)
    }

    /// Stops a job firing until resumed. Pausing a paused job changes nothing. The pause is
    /// recorded for the ledger (occurrences skipped meanwhile show as `paused`). A job whose
    /// last occurrences were all fired ahead of their time (a look-ahead, as on AWS) is
    /// COMPLETED while their runs wait to start: it can be paused too, and those runs then
    /// start no more than they would have were they not fired yet.
    pub async fn pause_job(&self, tenant: &TenantId, id: &JobId) -> Result<Job, CoreError> {
        let current = self.live_job(tenant, id).await?;
        let from: &[JobState] = if current.state == JobState::Completed && self.has_runs_to_start(&current).await? {
            &[JobState::Active, JobState::Completed]
        } else {
            &[JobState::Active]
        };
        let (job, changed) = self.set_state(tenant, id, from, JobState::Paused).await?;
        if changed {
            let pause = SkipRecord::pause(job.updated_at);
            self.ports.store.record_skips(tenant, id, &[pause]).await?;
        }
        Ok(job)
    }

    /// Whether `job` has a run of its schedule still to start (PENDING, never tried): one a
    /// pause would stop.
    async fn has_runs_to_start(&self, job: &Job) -> Result<bool, CoreError> {
        let runs = self.ports.store.active_runs_of(&job.tenant, &job.id).await?;
        Ok(runs.iter().any(Run::is_untried_occurrence))
    }

    /// Resumes a paused job; occurrences missed meanwhile follow its misfire policy (and show
    /// in the ledger as skipped because `paused`), those the pause kept from firing and the
    /// runs fired before the pause that came due meanwhile alike ([`crate::paused`]): the
    /// runs the policy keeps start now. A job with no occurrence left to fire (one paused
    /// once its last ones were fired ahead) resumes COMPLETED.
    pub async fn resume_job(&self, tenant: &TenantId, id: &JobId) -> Result<Job, CoreError> {
        let paused = self.live_job(tenant, id).await?;
        // While the job is still paused no run of its schedule can start, so what its policies
        // drop ends first (it would be dropped at any later resume too, should this one fail).
        if paused.state == JobState::Paused
            && let Err(e) = self.end_runs_dropped(&paused).await
        {
            tracing::warn!(%tenant, job_id = %id, error = %e, "runs that came due while paused not ended");
        }
        let (job, changed) = self
            .set_state(tenant, id, &[JobState::Paused], JobState::Active)
            .await?;
        if changed {
            self.close_pause(tenant, id, job.updated_at).await?;
            // The resume is stored: a failure here is only logged (the runs kept wait their
            // deferral, `PARKED_RECHECK` at most, and start then).
            if let Err(e) = self.start_runs_kept(&job, paused.updated_at).await {
                tracing::warn!(%tenant, job_id = %id, error = %e, "runs that came due while paused not started");
            }
        }
        Ok(self.fire_if_due(vec![job]).await.remove(0))
    }

    /// Runs a job once now, outside its schedule.
    pub async fn trigger_job(&self, tenant: &TenantId, id: &JobId) -> Result<Run, CoreError> {
        let job = self.live_job(tenant, id).await?;
        self.admit(tenant, 1).await?;
        let run = super::start_extra_run(&self.ports, &job, Trigger::Manual).await?;
        Ok(run)
    }

    /// The next `count` fire times of a stored job, DST applied.
    pub async fn preview_job(&self, tenant: &TenantId, id: &JobId, count: usize) -> Result<Vec<Timestamp>, CoreError> {
        let job = self.get_job(tenant, id).await?;
        let spec = &job.spec;
        let mut out = Vec::with_capacity(count);
        let mut next = job
            .next_fire_at
            .filter(|_| matches!(job.state, JobState::Active | JobState::Paused));
        while let (Some(t), true) = (next, out.len() < count) {
            out.push(t);
            next = next_fire_after(&spec.schedule, &spec.dst, &spec.window(), t);
        }
        Ok(out)
    }

    /// With [`SkedConfig::fire_within`](super::SkedConfig) set, fires each of `jobs` whose
    /// next occurrence is within it (the sweeper's path, [`super::fire::fire_jobs`], which
    /// enqueues the runs); returns the jobs as they are after that (next fire time and state
    /// moved on; the version does not change, as with any sweep). The user's change is
    /// already stored, so a failure here is only logged: the sweeper fires the job at its
    /// next tick (a conflict means it, or another call, already did).
    ///
    /// The due jobs fire [`DIRECT_FIRE_CHUNK`] at a time, each chunk planned from one read and
    /// written in one store call ([`super::fire::fire_jobs`]: a batch's one-shots share
    /// transactions, and their runs are enqueued together).
    ///
    /// Bounded, so a request answers in about the same time whatever the schedules: each job
    /// fires at most [`crate::firing::MAX_RUNS_PER_FIRING`] runs, only up to `fire_within`
    /// ahead, and once the call has spent [`DIRECT_FIRE_BUDGET`] firing it starts no more
    /// chunks (a big batch): the jobs left are fired by the sweeper, as without the window.
    async fn fire_if_due(&self, mut jobs: Vec<Job>) -> Vec<Job> {
        let within = self.config.fire_within;
        if within.is_zero() {
            return jobs;
        }
        let now = self.now();
        let horizon = now + within.to_chrono();
        let stop_at = self.ports.clock.now() + DIRECT_FIRE_BUDGET.to_chrono();
        let due: Vec<usize> = (0..jobs.len())
            .filter(|&i| jobs[i].state == JobState::Active && jobs[i].next_fire_at.is_some_and(|t| t <= horizon))
            .collect();
        let mut left = 0usize;
        for chunk in due.chunks(DIRECT_FIRE_CHUNK) {
            if self.ports.clock.now() >= stop_at {
                left += chunk.len();
                continue;
            }
            let firing: Vec<Job> = chunk.iter().map(|&i| jobs[i].clone()).collect();
            let answers = match super::fire::fire_jobs(&self.ports, &firing, now, within, self.skips.as_ref()).await {
                Ok(answers) => answers,
                Err(e) => {
                    tracing::warn!(jobs = chunk.len(), error = %e, "direct firing failed; the sweeper will fire the jobs");
                    continue;
                }
            };
            for (&i, answer) in chunk.iter().zip(answers) {
                let job = &mut jobs[i];
                match answer.map(|firing| firing.fired) {
                    Some(Ok(super::fire::Fired {
                        job_after: Some((next_fire_at, state)),
                        ..
                    })) => {
                        job.next_fire_at = next_fire_at;
                        job.state = state;
                    }
                    None | Some(Ok(_)) | Some(Err(StoreError::Conflict(_))) => {}
                    Some(Err(e)) => {
                        tracing::warn!(tenant = %job.tenant, job_id = %job.id, error = %e, "direct firing failed; the sweeper will fire the job");
                    }
                }
            }
        }
        if left > 0 {
            tracing::info!(jobs = left, budget = %DIRECT_FIRE_BUDGET, "direct firing stopped at its time budget; the sweeper fires the rest");
        }
        jobs
    }

    /// With [`SkedConfig::fire_within`](super::SkedConfig) set and `job` (new, not stored
    /// yet) due within it, plans its first firing and has the ports create it with that
    /// firing in one write ([`WorkPort::create_fired`](crate::ports::WorkPort::create_fired));
    /// answers the job as the firing left it, or the refusal. `None`: nothing was written
    /// (nothing due, a planning failure, or ports that write the two apart) — the caller
    /// creates the job, then fires it ([`Sked::fire_if_due`]).
    async fn create_fired(&self, job: &Job, idempotency: Option<(&str, &str)>) -> Option<Result<Job, StoreError>> {
        let within = self.config.fire_within;
        let now = self.now();
        if within.is_zero() || job.state != JobState::Active || job.next_fire_at? > now + within.to_chrono() {
            return None;
        }
        let plan = match super::fire::plan_jobs(&self.ports, std::slice::from_ref(job), now, within).await {
            Ok(mut plans) => plans.pop().flatten()?,
            Err(e) => {
                tracing::warn!(tenant = %job.tenant, job_id = %job.id, error = %e, "first firing not planned; the job is created, then fired");
                return None;
            }
        };
        let answer = self.ports.work.create_fired(job, idempotency, &plan.firing).await?;
        Some(answer.map(|created| {
            let fired = super::fire::written(&self.ports, job, &plan, &created, self.skips.as_ref());
            let mut after = job.clone();
            if let Some((next_fire_at, state)) = fired.job_after {
                after.next_fire_at = next_fire_at;
                after.state = state;
            }
            after
        }))
    }

    /// The clock's now, at store precision.
    pub(crate) fn now(&self) -> Timestamp {
        crate::timestamp::trunc_ms(self.ports.clock.now())
    }

    /// Every problem with a submitted job, capability checks included.
    fn check_new_job(&self, new: &NewJob, now: Timestamp) -> Vec<FieldError> {
        let mut problems: Vec<FieldError> = new
            .id
            .as_ref()
            .and_then(|id| validate_job_id(id.as_str()))
            .into_iter()
            .collect();
        problems.extend(validate_spec(&new.spec, now));
        if matches!(new.spec.task, Task::Container(_)) && !self.config.capabilities.container_tasks {
            problems.push(FieldError::new(
                "task.container",
                "container tasks need the ECS executor of the AWS deployment; the local deployment runs command and http tasks",
            ));
        }
        problems
    }

    /// `Unsupported` when the only problems are capability ones, else `Invalid`.
    fn invalid_or_unsupported(&self, problems: Vec<FieldError>) -> CoreError {
        match problems.as_slice() {
            [only] if only.field == "task.container" => CoreError::Unsupported {
                field: only.field.clone(),
                message: only.message.clone(),
            },
            _ => CoreError::Invalid(problems),
        }
    }

    /// The job ids an idempotency key already answered, if this is a replay.
    async fn replayed(&self, tenant: &TenantId, key: &str, fingerprint: &str) -> Result<Option<Vec<JobId>>, CoreError> {
        match self.ports.store.idempotency_lookup(tenant, key).await? {
            Some((recorded, ids)) if recorded == fingerprint => Ok(Some(ids)),
            Some(_) => Err(CoreError::Conflict(format!(
                "Idempotency-Key {key:?} was used for a different request"
            ))),
            None => Ok(None),
        }
    }

    /// The live job `id` if it exists with the same definition; `Conflict` if it exists with
    /// another one.
    async fn existing_twin(&self, tenant: &TenantId, id: &JobId, spec: &JobSpec) -> Result<Option<Job>, CoreError> {
        match self.ports.store.get_job(tenant, id).await? {
            Some(existing) if existing.state != JobState::Deleted => {
                if spec.clone().normalised(existing.created_at) == existing.spec {
                    Ok(Some(existing))
                } else {
                    Err(CoreError::Conflict(format!(
                        "job {id} already exists with a different definition"
                    )))
                }
            }
            _ => Ok(None),
        }
    }

    /// A new job from a validated submission.
    fn new_job(&self, tenant: &TenantId, new: NewJob, now: Timestamp) -> Job {
        let spec = new.spec.normalised(now);
        let next_fire_at = first_fire(&spec.schedule, &spec.dst, &spec.window(), now);
        Job {
            tenant: tenant.clone(),
            id: new.id.unwrap_or_else(|| JobId::generate(now)),
            // An `after` job never has a fire time: it stays ACTIVE, run by its upstreams.
            state: if next_fire_at.is_some() || spec.schedule.after().is_some() {
                JobState::Active
            } else {
                JobState::Completed
            },
            next_fire_at,
            spec,
            version: 1,
            created_at: now,
            updated_at: now,
        }
    }

    /// A job that exists and is not DELETED.
    pub(super) async fn live_job(&self, tenant: &TenantId, id: &JobId) -> Result<Job, CoreError> {
        match self.ports.store.get_job(tenant, id).await? {
            Some(job) if job.state != JobState::Deleted => Ok(job),
            _ => Err(CoreError::NotFound(format!("job {id}"))),
        }
    }

    /// Moves a job from one of `from` to `to` (no-op if already `to`); a job moved to ACTIVE
    /// with nothing left to fire by the clock (one paused once its last occurrences were
    /// fired ahead) is COMPLETED instead. Answers the job and whether this call changed its
    /// state.
    async fn set_state(
        &self,
        tenant: &TenantId,
        id: &JobId,
        from: &[JobState],
        to: JobState,
    ) -> Result<(Job, bool), CoreError> {
        let changed = AtomicBool::new(false);
        let job = self
            .modify(tenant, id, None, |job, _| {
                changed.store(job.state != to, Ordering::Relaxed);
                if job.state == to {
                    return Ok(None);
                }
                if !from.contains(&job.state) {
                    return Err(CoreError::Conflict(format!(
                        "job {id} is {}, not {}",
                        job.state, from[0]
                    )));
                }
                let spent = job.next_fire_at.is_none() && job.spec.schedule.after().is_none();
                let mut changed = job.clone();
                changed.state = match to {
                    JobState::Active if spent => JobState::Completed,
                    to => to,
                };
                Ok(Some(changed))
            })
            .await?;
        Ok((job, changed.into_inner()))
    }

    /// Applies a user change to a live job: reads it, lets `change` derive the new job from
    /// it (`None`: nothing to write), and writes that conditional on the version and
    /// `next_fire_at` it read. A sweep moves `next_fire_at` without bumping the version, so a
    /// lost race with one is retried on a fresh read; a change by another user is a
    /// `Conflict` when `if_version` names the version the caller saw.
    async fn modify(
        &self,
        tenant: &TenantId,
        id: &JobId,
        if_version: Option<u64>,
        change: impl Fn(&Job, Timestamp) -> Result<Option<Job>, CoreError>,
    ) -> Result<Job, CoreError> {
        for _ in 0..MAX_MODIFY_TRIES {
            let current = self.live_job(tenant, id).await?;
            if let Some(v) = if_version.filter(|v| *v != current.version) {
                let message = format!("job {id} is at version {}, not {v}", current.version);
                return Err(CoreError::Conflict(message));
            }
            let now = self.now();
            let Some(mut updated) = change(&current, now)? else {
                return Ok(current);
            };
            updated.version = current.version + 1;
            updated.updated_at = now;
            match self
                .ports
                .store
                .update_job(&updated, current.version, current.next_fire_at)
                .await
            {
                Ok(()) => {
                    self.sweep.wake();
                    return Ok(updated);
                }
                Err(StoreError::Conflict(_)) => continue,
                Err(StoreError::NotFound) => return Err(CoreError::NotFound(format!("job {id}"))),
                Err(other) => return Err(other.into()),
            }
        }
        Err(CoreError::Conflict(format!(
            "job {id} kept changing meanwhile; try again"
        )))
    }
}

/// A stable digest of a create request, to recognise a replayed idempotency key.
fn fingerprint(tenant: &TenantId, jobs: &[NewJob]) -> String {
    let body: Vec<_> = jobs
        .iter()
        .map(|j| serde_json::json!({"id": j.id, "spec": j.spec}))
        .collect();
    let text = serde_json::to_string(&(tenant, body)).unwrap_or_default();
    format!("{:x}", Sha256::digest(text.as_bytes()))
}
