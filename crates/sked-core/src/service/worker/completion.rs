//! What an ended attempt records: its outcome (or nothing at all if its lease was lost) and
//! the run's next step — a retry or the run's end — with the delivery settled
//! ([`crate::ports::WorkPort::complete`]: the retry's message enqueued and the old one acked,
//! in one transaction where the queue lives in the store's database), then the follow-ups of
//! an ended run: the timeout handler job, and the run `queue_one` held back.

use super::Worker;
use crate::error::CoreError;
use crate::job::{Job, OnTimeout, Overlap};
use crate::ports::{
    AttemptResult, Completion, Delivery, Dispatch, Event, ExecResult, JobStoreExt, LogSummary, Outcome, RunTransition,
    Settlement, StopReason, StoreError, WorkError,
};
use crate::retry::after_attempt_for;
use crate::run::{AttemptOutcome, Run, RunState, Trigger};
use crate::service::backfill::runs_in_turn;
use crate::service::start_extra_run;
use crate::timestamp;

/// How an attempt's execution ended, as the attempt loop saw it.
pub(super) struct Ended {
    /// What the executor answered.
    pub(super) result: ExecResult,
    /// Why the worker asked the payload to stop, if it did.
    pub(super) stop: Option<StopReason>,
    /// The attempt's log, finished.
    pub(super) summary: LogSummary,
}

impl Worker {
    /// Records how the attempt `token` of `run` (claimed from `delivery`) ended, unless its
    /// lease was lost: then another attempt may be running, and nothing is written.
    pub(super) async fn record_attempt(
        &self,
        delivery: &Delivery,
        job: &Job,
        run: &Run,
        token: u64,
        ended: Ended,
    ) -> Result<(), CoreError> {
        let Ended { result, stop, summary } = ended;
        let clock = &self.ports.clock;
        let attempt = run.attempt_count();
        let stopped = result.stopped.or(stop.filter(|s| *s == StopReason::LeaseLost));
        let outcome = match stopped {
            // Fenced off: another attempt may be running. Write nothing about this one.
            Some(StopReason::LeaseLost) => {
                tracing::warn!(worker = %self.config.id, run_id = %run.run_id, attempt, "lease lost; payload stopped, nothing recorded");
                return Ok(());
            }
            Some(StopReason::Timeout) => AttemptOutcome::TimedOut,
            Some(StopReason::Cancelled) => AttemptOutcome::Cancelled,
            Some(StopReason::Shutdown) => AttemptOutcome::WorkerLost,
            None if result.success => AttemptOutcome::Succeeded,
            None => AttemptOutcome::Failed,
        };
        let now = timestamp::trunc_ms(clock.now());
        let error = match stopped {
            Some(StopReason::Timeout) => Some(format!("timed out after {}", job.spec.timeout)),
            Some(StopReason::Cancelled) => Some("cancelled".to_string()),
            Some(StopReason::Shutdown) => Some(format!("worker {} shut down", self.config.id)),
            _ => result.error.clone(),
        };
        let attempt_result = AttemptResult {
            finished_at: now,
            outcome,
            exit_code: result.exit_code,
            http_status: result.http_status,
            error,
            log_bytes: summary.bytes,
            log_truncated: summary.truncated,
        };
        let next = match after_attempt_for(run, &job.spec, outcome, now) {
            // Interrupted by a clean shutdown, not by a fault of the payload: the retry need
            // not wait out a backoff (it still counts as an attempt).
            RunTransition::Retry { .. } if stopped == Some(StopReason::Shutdown) => {
                RunTransition::Retry { not_before: now }
            }
            next => next,
        };
        let settlement = Settlement {
            completion: Completion {
                tenant: run.tenant.clone(),
                run_id: run.run_id.clone(),
                token,
                result: attempt_result,
                next,
                only_if_expired_by: None,
            },
            receipt: delivery.receipt.clone(),
        };
        let finished = match self.ports.work.complete(&settlement).await {
            Ok(ended) => {
                crate::service::report_released(&self.ports, &ended.released);
                ended.run
            }
            Err(WorkError::Store(StoreError::Fenced)) => {
                tracing::warn!(worker = %self.config.id, run_id = %run.run_id, attempt, "completion fenced off; nothing recorded");
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        tracing::info!(worker = %self.config.id, job_id = %run.job_id, run_id = %run.run_id, attempt, outcome = %outcome, state = %finished.state, "attempt ended");
        let tenant = &run.tenant;
        match Outcome::of(finished.state) {
            Some(outcome) => self.ports.observe(Event::Finished { tenant, outcome }),
            None => {
                tracing::info!(worker = %self.config.id, job_id = %run.job_id, run_id = %run.run_id, attempt, not_before = %timestamp::format(&finished.not_before), "run will be retried");
                self.ports.observe(Event::Retried { tenant });
            }
        }
        if finished.state.is_terminal() {
            self.after_run(job, &finished).await?;
        }
        Ok(())
    }

    /// Follow-ups once a run has ended: the timeout handler job, and the run `queue_one`
    /// held back.
    async fn after_run(&self, job: &Job, run: &Run) -> Result<(), CoreError> {
        if let (RunState::TimedOut, OnTimeout::RunJob(handler)) = (run.state, &job.spec.on_timeout) {
            match self.ports.store.get_job(&run.tenant, handler).await? {
                Some(handler) if handler.state != crate::job::JobState::Deleted => {
                    start_extra_run(&self.ports, &handler, Trigger::Handler).await?;
                }
                _ => tracing::warn!(run_id = %run.run_id, handler = %handler, "timeout handler job not found"),
            }
        }
        let policy = job.spec.overlap_policy();
        if policy == Overlap::QueueOne {
            let waiting: Vec<_> = self
                .ports
                .store
                .active_runs_of(&run.tenant, &run.job_id)
                .await?
                .iter()
                .filter(|r| r.state == RunState::Pending)
                .map(Dispatch::from)
                .collect();
            if !waiting.is_empty() {
                self.ports.queue.enqueue(&waiting).await?;
            }
        }
        if runs_in_turn(run, policy) {
            self.next_backfill_run(run).await?;
        }
        Ok(())
    }

    /// After a backfill run of a job whose runs take turns: the earliest backfill run still
    /// waiting is made due now and enqueued (it was deferred behind this one; see
    /// [`crate::service::backfill`]).
    async fn next_backfill_run(&self, ended: &Run) -> Result<(), CoreError> {
        let active = self.ports.store.active_runs_of(&ended.tenant, &ended.job_id).await?;
        let Some(next) = active
            .iter()
            .filter(|r| r.trigger == Trigger::Backfill && r.state == RunState::Pending)
            .min_by_key(|r| r.scheduled_for)
        else {
            return Ok(());
        };
        let now = crate::timestamp::trunc_ms(self.ports.clock.now());
        let mut dispatch = Dispatch::from(next);
        if next.not_before > now {
            self.ports.store.defer_pending(&next.tenant, &next.run_id, now).await?;
            dispatch.not_before = now;
        }
        self.ports.queue.enqueue(&[dispatch]).await?;
        Ok(())
    }
}
