//! The reaper: closes attempts whose worker stopped heartbeating (lease expired),
//! re-enqueues PENDING runs whose queue message was lost (written but never received), and
//! gives up the `after` occurrences whose `within` passed ([`crate::dependency::expire`]).
//!
//! A stale run is re-enqueued on every pass by default, which suits a queue that keeps one
//! message per run (the local one). A queue that keeps every copy (SQS) would gain a
//! duplicate per run and pass while the workers are merely behind — which slows them down
//! further. [`Reaper::with_doubling_requeue`] re-enqueues a run only when its time since it
//! became ready crosses `stale_after`, then twice that, four times, … up to
//! [`MAX_REQUEUE_GAP`] times, then every such gap: a lost message is still repaired, and a
//! backlog gains a few copies per run instead of one per pass.

use super::Ports;
use crate::duration::Dur;
use crate::error::CoreError;
use crate::ports::{AttemptResult, Completion, Dispatch, Event, JobStoreExt, Outcome, RunTransition, StoreError};
use crate::retry::after_attempt_for;
use crate::run::{AttemptOutcome, Run, RunState};
use tokio_util::sync::CancellationToken;

/// Reaper settings.
#[derive(Debug, Clone, Copy)]
pub struct ReaperConfig {
    /// Time between passes.
    pub interval: Dur,
    /// A PENDING run ready for longer than this without being claimed is re-enqueued.
    pub stale_after: Dur,
    /// Runs handled per pass and kind.
    pub batch: usize,
}

impl Default for ReaperConfig {
    fn default() -> Self {
        ReaperConfig {
            interval: Dur::secs(2),
            stale_after: Dur::secs(30),
            batch: 500,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Attempts closed as worker lost.
    pub abandoned: usize,
    /// PENDING runs re-enqueued.
    pub requeued: usize,
    /// Waiting `after` occurrences given up (`upstream_timeout`).
    pub waits_expired: usize,
}

/// The reaper task.
pub struct Reaper {
    pub(crate) ports: Ports,
    pub(crate) config: ReaperConfig,
    /// With doubling re-enqueue: the time between passes (see the module docs).
    requeue_window: Option<Dur>,
}

impl Reaper {
    /// A reaper over `ports`.
    pub fn new(ports: Ports, config: ReaperConfig) -> Self {
        Reaper {
            ports,
            config,
            requeue_window: None,
        }
    }

    /// Re-enqueues a stale run only in the passes in which its time since it became ready
    /// has just crossed `stale_after × 2^k` (k = 0, 1, 2, …, capped at [`MAX_REQUEUE_GAP`]
    /// between two re-enqueues): those less than twice
    /// `pass_interval` after that time, so that a late pass does not miss it (it may then be
    /// enqueued twice). For queues without dedupe by run (SQS); see the module docs.
    pub fn with_doubling_requeue(mut self, pass_interval: Dur) -> Self {
        self.requeue_window = Some(Dur(pass_interval.0 * 2));
        self
    }

    /// Runs passes every `interval` until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) {
        let clock = self.ports.clock.clone();
        while !shutdown.is_cancelled() {
            if let Err(e) = self.reap_once().await {
                tracing::warn!(error = %e, "reaper pass failed");
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                _ = clock.sleep_until(clock.now() + self.config.interval.to_chrono()) => {}
            }
        }
    }

    /// One pass: abandon expired leases, give up expired waits, then re-enqueue stale PENDING
    /// runs.
    pub async fn reap_once(&self) -> Result<ReapReport, CoreError> {
        let now = crate::timestamp::trunc_ms(self.ports.clock.now());
        let mut report = ReapReport::default();
        let mut dispatches = Vec::new();
        for run in self.ports.store.expired_leases(now, self.config.batch).await? {
            match self.abandon(&run, now).await {
                Ok(Some(retry)) => {
                    report.abandoned += 1;
                    dispatches.push(retry);
                }
                Ok(None) => report.abandoned += 1,
                // The worker renewed just in time, or another reaper got there first.
                Err(CoreError::Store(StoreError::Fenced | StoreError::Conflict(_))) => {}
                Err(e) => return Err(e),
            }
        }
        for wait in self.ports.store.expired_waits(now, self.config.batch).await? {
            match self.ports.store.expire_wait(&wait, now).await {
                Ok(released) => {
                    report.waits_expired += 1;
                    dispatches.extend(
                        released
                            .iter()
                            .filter(|r| r.state == RunState::Pending)
                            .map(Dispatch::from),
                    );
                    super::report_released(&self.ports, &released);
                }
                Err(StoreError::Conflict(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let ready_before = now - self.config.stale_after.to_chrono();
        for run in self.ports.store.stale_pending(ready_before, self.config.batch).await? {
            if let Some(window) = self.requeue_window
                && !requeue_due(
                    (now - run.not_before).num_milliseconds(),
                    self.config.stale_after,
                    window,
                )
            {
                continue;
            }
            report.requeued += 1;
            dispatches.push(Dispatch::from(&run));
        }
        if !dispatches.is_empty() {
            self.ports.queue.enqueue(&dispatches).await?;
        }
        Ok(report)
    }

    /// Closes the expired attempt of `run` as worker lost, at its lease's expiry; returns the
    /// dispatch of the retry if one follows.
    async fn abandon(&self, run: &Run, now: crate::timestamp::Timestamp) -> Result<Option<Dispatch>, CoreError> {
        let Some(lease) = &run.lease else { return Ok(None) };
        let job = self.ports.store.get_job(&run.tenant, &run.job_id).await?;
        let next = match &job {
            Some(job) => after_attempt_for(run, &job.spec, AttemptOutcome::WorkerLost, now),
            None => RunTransition::Finish(crate::run::RunState::Failed),
        };
        let result = AttemptResult {
            finished_at: lease.expires_at,
            outcome: AttemptOutcome::WorkerLost,
            exit_code: None,
            http_status: None,
            error: Some(format!("worker lost: {} stopped renewing its lease", lease.owner)),
            log_bytes: 0,
            log_truncated: false,
        };
        let ended = self
            .ports
            .store
            .complete(&Completion {
                tenant: run.tenant.clone(),
                run_id: run.run_id.clone(),
                token: lease.token,
                result,
                next,
                only_if_expired_by: Some(now),
            })
            .await?;
        super::enqueue_released(&self.ports, &ended).await;
        let updated = ended.run;
        tracing::warn!(tenant = %run.tenant, job_id = %run.job_id, run_id = %run.run_id, attempt = run.attempt_count(), worker = %lease.owner, "attempt abandoned: worker lost");
        let tenant = &run.tenant;
        match Outcome::of(updated.state) {
            Some(outcome) => self.ports.observe(Event::Finished { tenant, outcome }),
            None => self.ports.observe(Event::Retried { tenant }),
        }
        Ok(matches!(next, RunTransition::Retry { .. }).then(|| Dispatch::from(&updated)))
    }
}

/// The longest gap between two re-enqueues of one waiting run, in multiples of `stale_after`:
/// the doubling stops there, so a message lost after a long wait is still repaired within
/// this bound (16 minutes with the sweeper function's one-minute `stale_after`).
pub const MAX_REQUEUE_GAP: i64 = 16;

/// Whether a run ready `age_ms` ago is in one of its re-enqueue windows, each `window` long,
/// starting at `stale_after × 1, 2, 4, …, MAX_REQUEUE_GAP` and then every
/// `stale_after × MAX_REQUEUE_GAP`.
fn requeue_due(age_ms: i64, stale_after: Dur, window: Dur) -> bool {
    let (stale_ms, window_ms) = (stale_after.as_millis().max(1), window.as_millis().max(1));
    let max_gap = stale_ms.saturating_mul(MAX_REQUEUE_GAP);
    let (mut start, mut gap) = (stale_ms, stale_ms);
    while start <= age_ms {
        if age_ms < start.saturating_add(window_ms) {
            return true;
        }
        start = start.saturating_add(gap);
        gap = gap.saturating_mul(2).min(max_gap);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeue_windows_start_at_stale_after_and_double() {
        let (stale, window) = (Dur::secs(10), Dur::secs(4));
        let due: Vec<i64> = (0..100).filter(|s| requeue_due(s * 1000, stale, window)).collect();
        assert_eq!(
            due,
            vec![10, 11, 12, 13, 20, 21, 22, 23, 40, 41, 42, 43, 80, 81, 82, 83]
        );
        // A window as long as stale_after covers the first two without a gap.
        assert!((60..180).all(|s| requeue_due(s * 1000, Dur::secs(60), Dur::secs(60))));
        assert!(!requeue_due(200_000, Dur::secs(60), Dur::secs(60)));
    }

    #[test]
    fn requeue_gaps_stop_doubling_at_the_max_gap() {
        let (stale, window) = (Dur::secs(10), Dur::secs(1));
        let due: Vec<i64> = (0..700).filter(|s| requeue_due(s * 1000, stale, window)).collect();
        // 10, 20, 40, 80, 160, then every 160 s (MAX_REQUEUE_GAP × stale_after).
        assert_eq!(due, vec![10, 20, 40, 80, 160, 320, 480, 640]);
    }
}
