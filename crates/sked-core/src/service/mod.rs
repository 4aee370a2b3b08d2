//! Services: the scheduler's behaviour, written once against the ports.
//!
//! - [`Sked`] (in [`jobs`] and [`runs`]): what the API calls — submit, update, pause,
//!   trigger, cancel, read runs and logs.
//! - [`sweeper::Sweeper`]: turns due jobs into runs and hands them to the queue.
//! - [`fire`]: firing one due job (plan, conditional write, enqueue) — shared by the
//!   sweeper and by [`Sked`]'s direct firing ([`SkedConfig::fire_within`]).
//! - [`ledger`]: the occurrence ledger of a job (a page, the explanation of one occurrence).
//! - [`keys::Keys`]: API keys — authenticate, create, list, revoke, the first operator key.
//! - [`quotas::Quotas`]: tenants' quotas — read, set, and the submit-rate check.
//! - [`dependencies`]: the store-backed checks of an `after` schedule (upstreams exist, no
//!   cycle, no delete of a job others run after).
//! - [`dead_letter`]: what the DLQ handler does with a run whose message was dead-lettered.
//! - `paused`: a paused job's runs that came due, ended or started as its policies decide.
//! - [`worker::Worker`]: receives runs, claims, executes, heartbeats, completes.
//! - [`reaper::Reaper`]: closes attempts whose worker vanished; re-enqueues lost runs.
//! - [`log_retention::LogPruner`]: removes attempts' logs older than the retention period.
//! - [`alerts`]: the notifier that posts runs' due alerts, and tenants' webhook secrets.

pub mod alerts;
pub mod backfill;
pub mod dead_letter;
pub mod dependencies;
pub mod fire;
pub mod jobs;
pub mod keys;
pub mod ledger;
pub mod log_retention;
mod paused;
pub mod quotas;
pub mod reaper;
pub mod runs;
pub mod sweeper;
pub mod worker;

use crate::error::CoreError;
use crate::job::Job;
use crate::ports::{Clock, Dispatch, DispatchQueue, Event, JobStore, LogStore, NoObserver, Observer, WorkPort};
use crate::run::{Run, RunState, Trigger};
use crate::validate::Capabilities;
use std::sync::Arc;
use tokio::sync::Notify;

/// The adapters a deployment plugs in.
#[derive(Clone)]
pub struct Ports {
    /// Jobs and runs.
    pub store: Arc<dyn JobStore>,
    /// Dispatch to workers.
    pub queue: Arc<dyn DispatchQueue>,
    /// How runs pass between the store and the queue (fire, receive and claim, heartbeat,
    /// complete and ack): [`crate::work::QueueThenStore`] over the two above, or an
    /// adapter's own where its queue lives in its store's database.
    pub work: Arc<dyn WorkPort>,
    /// Attempt logs.
    pub logs: Arc<dyn LogStore>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Told of every run fired, started, retried and finished, every skip and sweep (metrics);
    /// [`NoObserver`] unless a deployment watches ([`Ports::with_observer`]).
    pub observer: Arc<dyn Observer>,
}

impl Ports {
    /// Ports whose work goes to `store` and `queue` in turn ([`crate::work::QueueThenStore`]).
    pub fn new(
        store: Arc<dyn JobStore>,
        queue: Arc<dyn DispatchQueue>,
        logs: Arc<dyn LogStore>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let work = Arc::new(crate::work::QueueThenStore::new(
            store.clone(),
            queue.clone(),
            clock.clone(),
        ));
        Ports {
            store,
            queue,
            work,
            logs,
            clock,
            observer: Arc::new(NoObserver),
        }
    }

    /// The same ports, reporting to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// Reports `event` to the observer.
    pub fn observe(&self, event: Event<'_>) {
        self.observer.observe(&event);
    }
}

/// Wakes the sweeper when a job changes, so it never waits out a stale sleep.
#[derive(Debug, Clone, Default)]
pub struct SweepSignal(Arc<Notify>);

impl SweepSignal {
    /// Tells the sweeper to look again now.
    pub fn wake(&self) {
        self.0.notify_one();
    }
    /// Waits for the next wake (a wake sent while nobody waited is kept for the next wait).
    pub async fn woken(&self) {
        self.0.notified().await;
    }
}

/// Settings of the API-facing service.
#[derive(Debug, Clone, Copy, Default)]
pub struct SkedConfig {
    /// What this deployment can run.
    pub capabilities: Capabilities,
    /// Fire a job at once, from the API call itself, when a create, replace or resume leaves
    /// its next occurrence at most this far from now; its runs go to the queue with their
    /// `not_before` (SQS `DelaySeconds` on AWS). Zero (the default) disables it: the local
    /// deployment's sweeper is woken on every change and needs no help, while on AWS the
    /// sweeper only runs on a tick, so the API handler sets this to a little more than the
    /// tick: a job due before the next sweep is not late. Only occurrences within this window
    /// are fired here (the sweeper fires the rest of its look-ahead at its tick), at most
    /// [`crate::firing::MAX_RUNS_PER_FIRING`] per job, for at most
    /// [`jobs::DIRECT_FIRE_BUDGET`] per call — so a per-second cron costs a create about a
    /// minute of runs, not the look-ahead's ten. Firing here is the sweeper's own path
    /// ([`fire::fire_jobs`]), conditional like it, so the two never fire one occurrence twice.
    pub fire_within: crate::duration::Dur,
}

/// How long [`Sked::ready`] waits for the store.
pub const READY_WITHIN: crate::duration::Dur = crate::duration::Dur::secs(2);

/// The API-facing service: every user action goes through here.
#[derive(Clone)]
pub struct Sked {
    pub(crate) ports: Ports,
    pub(crate) config: SkedConfig,
    pub(crate) sweep: SweepSignal,
    pub(crate) quotas: Option<quotas::Quotas>,
    pub(crate) webhook_secrets: Option<alerts::WebhookSecretService>,
    /// Told of every occurrence a direct firing skips ([`SkedConfig::fire_within`]).
    pub(crate) skips: Option<fire::SkipSink>,
}

impl Sked {
    /// A service over `ports`; `sweep` is woken on every job change. No quotas: see
    /// [`Sked::with_quotas`].
    pub fn new(ports: Ports, config: SkedConfig, sweep: SweepSignal) -> Self {
        Sked {
            ports,
            config,
            sweep,
            quotas: None,
            webhook_secrets: None,
            skips: None,
        }
    }

    /// The same service, also reporting every occurrence its direct firings skip to `sink`
    /// (as [`sweeper::Sweeper::with_skip_sink`] does for the sweeper's).
    pub fn with_skip_sink(mut self, sink: fire::SkipSink) -> Self {
        self.skips = Some(sink);
        self
    }

    /// The same service, checking every submission against the tenants' quotas in `quotas`
    /// (which must be kept in the same database as `ports.store`, whose transactions enforce
    /// the count limits).
    pub fn with_quotas(mut self, quotas: quotas::Quotas) -> Self {
        self.quotas = Some(quotas);
        self
    }

    /// The same service, keeping tenants' webhook secrets with `secrets` ([`alerts`]).
    pub fn with_webhook_secrets(mut self, secrets: alerts::WebhookSecretService) -> Self {
        self.webhook_secrets = Some(secrets);
        self
    }

    /// The webhook secret service, where the deployment keeps them.
    pub fn webhook_secrets(&self) -> Option<&alerts::WebhookSecretService> {
        self.webhook_secrets.as_ref()
    }

    /// The quota service, where the deployment keeps quotas.
    pub fn quotas(&self) -> Option<&quotas::Quotas> {
        self.quotas.as_ref()
    }

    /// Admits `n` submissions of `tenant` by its submit rate (always, without quotas).
    pub(crate) async fn admit(&self, tenant: &crate::ids::TenantId, n: usize) -> Result<(), CoreError> {
        match &self.quotas {
            Some(quotas) => quotas.admit(tenant, n).await,
            None => Ok(()),
        }
    }

    /// Whether the store answers, for a readiness probe: one primary-key read, within
    /// [`READY_WITHIN`]; a transient store error otherwise.
    pub async fn ready(&self) -> Result<(), CoreError> {
        let clock = &self.ports.clock;
        let (tenant, run_id) = (crate::ids::TenantId::default(), crate::ids::RunId::from("readyz@probe"));
        let probe = self.ports.store.get_run(&tenant, &run_id);
        tokio::select! {
            read = probe => read.map(|_| ()).map_err(CoreError::from),
            _ = clock.sleep_until(clock.now() + READY_WITHIN.to_chrono()) => Err(CoreError::Store(
                crate::ports::StoreError::Transient(format!("the store did not answer within {READY_WITHIN}").into()),
            )),
        }
    }

    /// The adapters (for health checks and tests).
    pub fn ports(&self) -> &Ports {
        &self.ports
    }
}

/// Reports what a run's end released ([`crate::ports::Ended::released`]): downstream runs
/// fired, occurrences skipped. Their messages are the caller's: [`enqueue_released`] for a
/// write made on the store directly.
pub(crate) fn report_released(ports: &Ports, released: &[Run]) {
    for run in released {
        match crate::firing::SkipReason::of_skipped(run).filter(|_| run.state == RunState::Skipped) {
            Some(reason) => {
                ports.observe(Event::Skipped {
                    tenant: &run.tenant,
                    reason,
                });
                tracing::info!(tenant = %run.tenant, job_id = %run.job_id, run_id = %run.run_id, reason = reason.as_str(), "occurrence skipped");
            }
            None => {
                ports.observe(Event::Fired {
                    tenant: &run.tenant,
                    runs: 1,
                });
                tracing::info!(tenant = %run.tenant, job_id = %run.job_id, run_id = %run.run_id, attempt = 1, trigger = %run.trigger, "run fired");
            }
        }
    }
}

/// Enqueues and reports what a run's end released, for a write made on the store directly
/// (a cancel, the reaper's close). A failure to enqueue is logged: the runs are PENDING and
/// the repair pass enqueues them.
pub(crate) async fn enqueue_released(ports: &Ports, ended: &crate::ports::Ended) {
    let dispatches: Vec<Dispatch> = ended.to_enqueue().map(Dispatch::from).collect();
    if !dispatches.is_empty()
        && let Err(e) = ports.queue.enqueue(&dispatches).await
    {
        tracing::warn!(error = %e, runs = dispatches.len(), "released runs not enqueued; the repair pass will");
    }
    report_released(ports, &ended.released);
}

/// Most nominal times [`start_extra_run`] tries, a millisecond apart.
const EXTRA_RUN_TIMES: usize = 1_000;

/// Writes and enqueues a run of `job` outside its schedule (manual trigger, timeout
/// handler), nominally at now — or at the first millisecond after it that names no run yet
/// and is no occurrence of the job's schedule: a run's id is its job and nominal time, so two
/// triggers in one millisecond would otherwise name one run, and a trigger at an occurrence's
/// very millisecond would take the id of the occurrence's run (which the sweeper would then
/// find written and count as fired).
pub(crate) async fn start_extra_run(ports: &Ports, job: &Job, trigger: Trigger) -> Result<Run, CoreError> {
    let now = crate::timestamp::trunc_ms(ports.clock.now());
    let mut inserted = None;
    for nominal in (0..EXTRA_RUN_TIMES as i64).map(|ms| now + chrono::Duration::milliseconds(ms)) {
        if job.spec.is_occurrence(nominal) {
            continue;
        }
        let run = Run::of_job(job, nominal, trigger, now, now);
        if ports.store.insert_run(&run).await? {
            inserted = Some(run);
            break;
        }
    }
    let Some(run) = inserted else {
        return Err(CoreError::Conflict(format!(
            "job {} has runs at every millisecond of the next second; try again",
            job.id
        )));
    };
    ports.queue.enqueue(&[Dispatch::from(&run)]).await?;
    ports.observe(Event::Fired {
        tenant: &run.tenant,
        runs: 1,
    });
    tracing::info!(tenant = %run.tenant, job_id = %run.job_id, run_id = %run.run_id, attempt = 1, trigger = %run.trigger, "run fired");
    Ok(run)
}
