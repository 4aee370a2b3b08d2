//! One claimed attempt, run to its end ([`Worker::run_claimed`]): the payload through the
//! executor, its output into the attempt's log (secrets masked), heartbeats every third of
//! the lease (the long lease once a long attempt reaches it; retried every fifteenth of the
//! lease after a failure), the timeout, a cancel asked for, and
//! the lease stop margin — a worker that cannot renew its lease asks the payload to stop that
//! long before the lease ends by its own clock, and never starts a payload inside it. What the
//! attempt ended as goes to [`super::completion`].

use super::Worker;
use super::claim::ClaimedAttempt;
use super::completion::Ended;
use crate::duration::Dur;
use crate::error::CoreError;
use crate::job::Job;
use crate::ports::Event;
use crate::ports::{
    Delivery, ExecRequest, ExecResult, LogKey, LogLine, LogSummary, LogWriter, StopReason, StoreError, WorkError,
};
use crate::run::Run;
use crate::timestamp::{self, Timestamp};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// Buffered output lines between an executor and the log writer.
const OUTPUT_BUFFER: usize = 1024;

/// What a heartbeat learned.
enum Beat {
    /// The store lease now lasts until `until`; `cancel` if a cancel was asked for.
    Renewed { until: Timestamp, cancel: bool },
    /// Another attempt holds the run (or the lease ended): stop and write nothing.
    Fenced,
    /// The store could not be reached; the lease stands until it expires.
    Failed,
}

impl Worker {
    /// Runs an attempt [`Worker::take_work`] claimed to its end (heartbeats, timeout,
    /// completion).
    pub async fn run_claimed(&self, attempt: ClaimedAttempt, shutdown: CancellationToken) {
        let ClaimedAttempt {
            delivery,
            job,
            run,
            token,
        } = attempt;
        let tenant = run.tenant.clone();
        let now = self.ports.clock.now();
        let lag = (now - run.not_before).to_std().unwrap_or_default();
        self.ports.observe(Event::Started { tenant: &tenant, lag });
        // Every line logged while the attempt runs (heartbeats, lease, completion, follow-ups)
        // carries the run's ids, in text and JSON logs alike.
        let span =
            tracing::info_span!("attempt", job_id = %run.job_id, run_id = %run.run_id, attempt = run.attempt_count());
        let ran = self
            .run_attempt(&delivery, &job, run, token, shutdown)
            .instrument(span.clone())
            .await;
        if let Err(e) = ran {
            span.in_scope(|| self.unhandled(&delivery, &e));
        }
        self.ports.observe(Event::Stopped { tenant: &tenant });
    }

    /// Runs the claimed attempt to its end and records it (unless the lease was lost).
    async fn run_attempt(
        &self,
        delivery: &Delivery,
        job: &Job,
        run: Run,
        token: u64,
        shutdown: CancellationToken,
    ) -> Result<(), CoreError> {
        let clock = self.ports.clock.clone();
        let attempt = run.attempt_count();
        let started = clock.now();
        tracing::info!(worker = %self.config.id, tenant = %run.tenant, job_id = %run.job_id, run_id = %run.run_id, attempt, "attempt started");
        let key = LogKey {
            tenant: run.tenant.clone(),
            run_id: run.run_id.clone(),
            attempt,
        };
        let writer = self.ports.logs.writer(&key).await?;
        // The worker may have stalled since the claim (a paused process, a long wait for a
        // thread): once the lease is within its stop margin another worker may soon hold
        // the run, so the payload must not start at all. Nothing awaits between this check
        // and the payload's start.
        let margin = self.config.lease_stop_margin().to_chrono();
        if let Some(lease) = run.lease.as_ref().filter(|l| clock.now() >= l.expires_at - margin) {
            tracing::warn!(worker = %self.config.id, run_id = %run.run_id, attempt, expired_at = %timestamp::format(&lease.expires_at), "lease ended before the payload could start; nothing started, nothing recorded");
            return Ok(());
        }
        let (out_tx, out_rx) = mpsc::channel(OUTPUT_BUFFER);
        let (stop_tx, stop_rx) = watch::channel(None);
        let request = ExecRequest {
            task: job.spec.task.clone(),
            context: context_env(&run, job, token),
            grace: self.config.grace,
            lease_lost_grace: self.config.lease_lost_grace(),
        };

        // The log pump runs beside the attempt in this same future (not a spawned task), so
        // a worker driven step by step (a simulation) owns every piece of its work.
        let secrets = job
            .spec
            .task
            .env()
            .map(crate::secret::secret_values)
            .unwrap_or_default();
        let pump = pump_output(out_rx, writer, secrets);
        let execution = self.executor.execute(request, out_tx, stop_rx);
        let attempt_loop = async {
            tokio::pin!(execution);
            // The lease each heartbeat asks for, by how long the attempt has run (a long
            // attempt may move to a longer lease: `WorkerConfig::long_lease`), and the next
            // heartbeat a third of it later.
            let lease_at = |now: Timestamp| {
                let ran = Dur::millis((now - started).num_milliseconds().max(0) as u64);
                self.config.lease_after_running(ran)
            };
            let third_of = |lease: Dur| Dur::millis((lease.as_millis() / 3).max(1) as u64).to_chrono();
            // After a failed renewal, try again sooner: the lease must be renewed before its
            // stop margin, not only before it ends.
            let retry_every = Dur::millis((self.config.lease.as_millis() / 15).max(1) as u64).to_chrono();
            let deadline = started + job.spec.timeout.to_chrono();
            let mut next_beat = started + third_of(self.config.lease);
            // The lease as last granted by the store: once it has passed without a renewal
            // the store may hand the run to another worker, so the payload must be gone by
            // then — asked to stop the stop margin before, not only when a later heartbeat
            // hears it was fenced.
            let mut held_until = run
                .lease
                .as_ref()
                .map_or(started + self.config.lease.to_chrono(), |l| l.expires_at);
            let mut stop: Option<StopReason> = None;
            let result: ExecResult = loop {
                // `biased`: branches are tried in order, so the same inputs always take the
                // same branch (replayable simulations); the payload's end wins any tie.
                tokio::select! {
                    biased;
                    result = &mut execution => break result,
                    _ = clock.sleep_until(next_beat), if stop != Some(StopReason::LeaseLost) => {
                        let now = clock.now();
                        let lease = lease_at(now);
                        next_beat = now + third_of(lease);
                        match self.heartbeat(delivery, &run, token, lease).await {
                            Beat::Renewed { until, cancel } => {
                                held_until = until;
                                if cancel && stop.is_none() {
                                    stop = Some(StopReason::Cancelled);
                                    let _ = stop_tx.send(stop);
                                }
                            }
                            Beat::Fenced => {
                                stop = Some(StopReason::LeaseLost);
                                let _ = stop_tx.send(stop);
                            }
                            Beat::Failed => next_beat = clock.now() + retry_every,
                        }
                    }
                    _ = clock.sleep_until(held_until - margin), if stop != Some(StopReason::LeaseLost) => {
                        tracing::warn!(worker = %self.config.id, run_id = %run.run_id, attempt, "lease about to end without renewal; stopping the payload");
                        stop = Some(StopReason::LeaseLost);
                        let _ = stop_tx.send(stop);
                    }
                    _ = clock.sleep_until(deadline), if stop.is_none() => {
                        stop = Some(StopReason::Timeout);
                        let _ = stop_tx.send(stop);
                    }
                    _ = shutdown.cancelled(), if stop.is_none() => {
                        stop = Some(StopReason::Shutdown);
                        let _ = stop_tx.send(stop);
                    }
                }
            };
            (result, stop)
        };
        let ((result, stop), pumped) = tokio::join!(attempt_loop, pump);
        let summary = match pumped {
            Ok(summary) => summary,
            Err(e) => {
                tracing::warn!(run_id = %run.run_id, attempt, error = %e, "log could not be finished");
                LogSummary::default()
            }
        };
        let ended = Ended { result, stop, summary };
        self.record_attempt(delivery, job, &run, token, ended).await
    }

    /// Renews the store lease and the queue lease, for `lease` from now.
    async fn heartbeat(&self, delivery: &Delivery, run: &Run, token: u64, lease: Dur) -> Beat {
        let renewed = self
            .ports
            .work
            .heartbeat(&run.tenant, &run.run_id, token, &delivery.receipt, lease)
            .await;
        match renewed {
            Ok((current, until)) => Beat::Renewed {
                until,
                cancel: current.cancel_requested,
            },
            Err(WorkError::Store(StoreError::Fenced)) => Beat::Fenced,
            Err(e) => {
                tracing::warn!(run_id = %run.run_id, error = %e, "heartbeat failed; will retry");
                Beat::Failed
            }
        }
    }
}

/// The SKED_* variables every payload gets (`SKED_RESOURCES` tells a container executor the
/// job's resource tier).
fn context_env(run: &Run, job: &Job, token: u64) -> Vec<(String, String)> {
    vec![
        ("SKED_TENANT".into(), run.tenant.to_string()),
        ("SKED_JOB_ID".into(), run.job_id.to_string()),
        ("SKED_RUN_ID".into(), run.run_id.to_string()),
        ("SKED_ATTEMPT".into(), run.attempt_count().to_string()),
        ("SKED_SCHEDULED_FOR".into(), timestamp::format(&run.scheduled_for)),
        ("SKED_FENCING_TOKEN".into(), token.to_string()),
        ("SKED_RESOURCES".into(), job.spec.resources.to_string()),
    ]
}

/// Moves output lines into the attempt's log until the executor drops its sender, each with
/// the task's `secrets` masked.
async fn pump_output(
    mut lines: mpsc::Receiver<LogLine>,
    mut writer: Box<dyn LogWriter>,
    secrets: Vec<String>,
) -> Result<LogSummary, crate::ports::LogError> {
    let mut failed = None;
    while let Some(mut line) = lines.recv().await {
        if !secrets.is_empty() {
            line.line = crate::secret::mask(&line.line, &secrets);
        }
        if failed.is_none()
            && let Err(e) = writer.append(line).await
        {
            failed = Some(e);
        }
    }
    match failed {
        Some(e) => Err(e),
        None => writer.finish().await,
    }
}
