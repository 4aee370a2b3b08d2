//! A paused job's runs that came due ([`crate::paused`]), acted on: ending those the misfire
//! and overlap policies drop (by the worker that meets one, and at the resume), and starting
//! those kept at the resume.

use super::{Ports, Sked};
use crate::error::CoreError;
use crate::firing::SkipReason;
use crate::job::Job;
use crate::ledger::{PAUSED_AT_CLAIM, RESCHEDULED};
use crate::paused::{self, DueWhilePaused};
use crate::ports::{Dispatch, Event, JobStoreExt, Outcome, StoreError};
use crate::run::{Run, RunState};
use crate::timestamp::{self, Timestamp};

/// Ends `run`, a PENDING run of the schedule, CANCELLED with `reason` (an occurrence skipped
/// at claim time, `why`) and reports it, unless it has started or ended meanwhile (whoever
/// did reports it then).
pub(crate) async fn end_unstarted(
    ports: &Ports,
    run: &Run,
    now: Timestamp,
    reason: &str,
    why: SkipReason,
) -> Result<(), CoreError> {
    let (tenant, run_id) = (&run.tenant, &run.run_id);
    let ended = match ports.store.cancel_run(tenant, run_id, now, reason).await {
        Err(StoreError::NotFound) => return Ok(()),
        answer => answer?,
    };
    super::enqueue_released(ports, &ended).await;
    let ended = ended.run;
    if ended.state != RunState::Cancelled || ended.reason.as_deref() != Some(reason) {
        return Ok(());
    }
    tracing::info!(%tenant, job_id = %run.job_id, %run_id, reason, "occurrence skipped at claim");
    ports.observe(Event::Skipped { tenant, reason: why });
    if let Some(outcome) = Outcome::of(ended.state) {
        ports.observe(Event::Finished { tenant, outcome });
    }
    Ok(())
}

/// Ends the runs `decision` drops: skipped as `paused`, `overlap` or `rescheduled`.
pub(crate) async fn end_dropped(
    ports: &Ports,
    job: &Job,
    decision: &DueWhilePaused<'_>,
    now: Timestamp,
) -> Result<(), CoreError> {
    let overlapped = paused::overlapped_reason(job);
    let ended = [
        (&decision.drop, PAUSED_AT_CLAIM, SkipReason::Paused),
        (&decision.overlapped, overlapped.as_str(), SkipReason::Overlap),
        (&decision.rescheduled, RESCHEDULED, SkipReason::Rescheduled),
    ];
    for (runs, reason, why) in ended {
        for run in runs {
            end_unstarted(ports, run, now, reason, why).await?;
        }
    }
    Ok(())
}

impl Sked {
    /// Before `job`'s resume, while it is still PAUSED (so none of its runs can start): ends
    /// the runs that came due meanwhile that its policies drop ([`end_dropped`]).
    pub(super) async fn end_runs_dropped(&self, job: &Job) -> Result<(), CoreError> {
        let now = timestamp::trunc_ms(self.now());
        let runs = self.ports.store.active_runs_due(&job.tenant, &job.id, now).await?;
        let decision = paused::decide(job, job.updated_at, &runs, now);
        end_dropped(&self.ports, job, &decision, now).await
    }

    /// At `job`'s resume, once it is written: the runs that came due while it was paused and
    /// that its policies keep are due now and enqueued (`timing_since`: when the job was last
    /// changed before the resume). It ends none: the job is ACTIVE again, and a run a worker
    /// may be starting is not to be stopped (those dropped ended before the resume, in
    /// [`Sked::end_runs_dropped`]).
    pub(super) async fn start_runs_kept(&self, job: &Job, timing_since: Timestamp) -> Result<(), CoreError> {
        let now = timestamp::trunc_ms(self.now());
        let store = &self.ports.store;
        let runs = store.active_runs_due(&job.tenant, &job.id, now).await?;
        let decision = paused::decide(job, timing_since, &runs, now);
        let mut dispatches = Vec::with_capacity(decision.keep.len());
        for run in decision.keep {
            if run.not_before > now {
                store.defer_pending(&job.tenant, &run.run_id, now).await?;
            }
            let mut dispatch = Dispatch::from(run);
            dispatch.not_before = dispatch.not_before.min(now);
            dispatches.push(dispatch);
        }
        if !dispatches.is_empty() {
            self.ports.queue.enqueue(&dispatches).await?;
        }
        Ok(())
    }
}
