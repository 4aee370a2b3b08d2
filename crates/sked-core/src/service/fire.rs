//! Firing due jobs ([`fire_jobs`]): plan each one's occurrences, write each one's runs and
//! next fire time in a conditional store write of its own (a chunk of jobs in one call), and
//! enqueue the runs ([`crate::ports::WorkPort::fire`]). The sweeper does this for every due
//! job it finds; [`Sked`](super::Sked) does it for jobs just created, replaced or resumed
//! whose next occurrence falls within [`SkedConfig::fire_within`](super::SkedConfig) — the AWS
//! API handler's "enqueue runs due within the look-ahead directly". One code path, so a run
//! fired either way is the same run (same id, same `not_before`), and a second firing of the
//! same occurrence is a no-op (the write is conditional on the job's version and
//! `next_fire_at`; run ids are derived from the occurrence).
//!
//! This module decides nothing itself: the plan is [`crate::firing::plan`].

use super::Ports;
use crate::duration::Dur;
use crate::error::CoreError;
use crate::firing::{Plan, SkipReason, plan};
use crate::ids::{JobId, TenantId};
use crate::job::{Job, JobState, Overlap};
use crate::ports::{Event, Firing, StoreError};

use crate::run::Run;
use crate::timestamp::Timestamp;
use std::sync::Arc;

/// An occurrence a sweep skipped by policy, reported once its firing was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedOccurrence {
    /// Owner.
    pub tenant: TenantId,
    /// The job.
    pub job_id: JobId,
    /// The occurrence's nominal time.
    pub scheduled_for: Timestamp,
    /// Why it did not become a run.
    pub reason: SkipReason,
}

/// Receives every skipped occurrence (besides the log line each gets). Deployments leave it
/// unset; simulations use it to account for every occurrence.
pub type SkipSink = Arc<dyn Fn(&SkippedOccurrence) + Send + Sync>;

/// What firing one job wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fired {
    /// The runs it created (and enqueued).
    pub created: usize,
    /// Occurrences skipped by policy.
    pub skipped: usize,
    /// The job's `next_fire_at` and state after the write; `None` when nothing was due (no
    /// write was made).
    pub job_after: Option<(Option<Timestamp>, JobState)>,
}

/// One job's firing among [`fire_jobs`]'s: its plan, and what writing it came to.
#[derive(Debug)]
pub struct JobFiring {
    /// The plan written.
    pub plan: Plan,
    /// What it wrote ([`written`]), or why not (a job that moved on meanwhile is a
    /// [`StoreError::Conflict`]: nothing written).
    pub fired: Result<Fired, StoreError>,
}

/// Fires `jobs` at `now`, for occurrences up to `now + lookahead`, together: plans them from
/// one read ([`plan_jobs`]), writes their firings in one call
/// ([`WorkPort::fire`](crate::ports::WorkPort::fire): one transaction where the store can,
/// and their runs enqueued at once), and reports each one written ([`written`]). Answers per
/// job, in order: `None` when nothing was due. The error is a failure of the whole call
/// (nothing written).
pub async fn fire_jobs(
    ports: &Ports,
    jobs: &[Job],
    now: Timestamp,
    lookahead: Dur,
    skips: Option<&SkipSink>,
) -> Result<Vec<Option<JobFiring>>, CoreError> {
    let plans = plan_jobs(ports, jobs, now, lookahead).await?;
    let firings: Vec<Firing> = plans.iter().flatten().map(|plan| plan.firing.clone()).collect();
    let mut answers = if firings.is_empty() {
        Vec::new()
    } else {
        ports.work.fire(&firings).await?
    }
    .into_iter();
    Ok(jobs
        .iter()
        .zip(plans)
        .map(|(job, plan)| {
            let plan = plan?;
            let answer = answers
                .next()
                .unwrap_or_else(|| Err(StoreError::Other("fire answered fewer firings".into())));
            let fired = answer.map(|created| written(ports, job, &plan, &created, skips));
            Some(JobFiring { plan, fired })
        })
        .collect())
}

/// The plans for `jobs` at `now` (`None` for a job with nothing due), reading in one store
/// call the active runs of those whose overlap policy needs them. Write them with
/// [`WorkPort::fire`](crate::ports::WorkPort::fire), then report each with [`written`].
pub async fn plan_jobs(
    ports: &Ports,
    jobs: &[Job],
    now: Timestamp,
    lookahead: Dur,
) -> Result<Vec<Option<Plan>>, CoreError> {
    let needs_active = |job: &Job| job.spec.overlap_policy() != Overlap::Allow;
    let wanted: Vec<(TenantId, JobId)> = jobs
        .iter()
        .filter(|job| needs_active(job))
        .map(|job| (job.tenant.clone(), job.id.clone()))
        .collect();
    let mut active = if wanted.is_empty() {
        Vec::new()
    } else {
        ports.store.active_runs(&wanted, None).await?
    }
    .into_iter();
    Ok(jobs
        .iter()
        .map(|job| {
            let runs = if needs_active(job) {
                active.next().unwrap_or_default()
            } else {
                Vec::new()
            };
            plan(job, &runs, now, lookahead)
        })
        .collect())
}

/// What the written `plan` of `job` amounts to, given the runs the store `created`; logs the
/// runs fired and the skipped occurrences, tells the ports' observer, and reports the skips
/// to `skips`.
pub fn written(ports: &Ports, job: &Job, plan: &Plan, created: &[Run], skips: Option<&SkipSink>) -> Fired {
    for run in created {
        tracing::info!(tenant = %job.tenant, job_id = %job.id, run_id = %run.run_id, attempt = 1, scheduled_for = %crate::timestamp::format(&run.scheduled_for), "run fired");
    }
    if !created.is_empty() {
        ports.observe(Event::Fired {
            tenant: &job.tenant,
            runs: created.len(),
        });
    }
    for (at, reason) in &plan.skipped {
        tracing::info!(tenant = %job.tenant, job_id = %job.id, scheduled_for = %crate::timestamp::format(at), reason = reason.as_str(), "occurrence skipped");
        ports.observe(Event::Skipped {
            tenant: &job.tenant,
            reason: *reason,
        });
    }
    if let Some(sink) = skips {
        for (at, reason) in &plan.skipped {
            sink(&SkippedOccurrence {
                tenant: job.tenant.clone(),
                job_id: job.id.clone(),
                scheduled_for: *at,
                reason: *reason,
            });
        }
    }
    Fired {
        created: created.len(),
        skipped: plan.skipped.len(),
        job_after: Some((plan.firing.next_fire_at, plan.firing.state)),
    }
}
