//! The sweeper function: on every EventBridge Scheduler tick (each minute), fire the jobs due
//! within the look-ahead and run the reaper — the AWS form of the local sweeper and reaper
//! tasks, with the same core services.
//!
//! One invocation ([`SweeperFn::handle`]):
//! 1. takes the sweep lease ([`SweepLease`], lease 0: the core sweeper scans every shard),
//!    held until the invocation's deadline at most — if another invocation holds it, this one
//!    returns at once (a tick that overlaps a long sweep, or a tick delivered twice);
//! 2. runs [`Reaper::reap_once`]: attempts whose lease expired are closed (worker lost) and
//!    retried, and PENDING runs ready for over [`STALE_AFTER`] without being claimed — written
//!    but never enqueued, a lost message, a retry whose backoff was beyond SQS's 15-minute
//!    delay — are enqueued (again), each again only when its wait doubles (so a backlog
//!    does not gain a duplicate per run and tick). It runs before the sweep so that a run this sweep fires
//!    late (a one-shot whose time has passed) is not also counted stale by it;
//! 3. runs [`Sweeper::sweep_once`] until nothing more is due within the look-ahead (each
//!    batch's runs go to SQS with `DelaySeconds` = time until due; the look-ahead is at most
//!    15 minutes so the delay always fits), or until the deadline comes near;
//! 4. gives the lease back.
//!
//! The lease only saves work: firing is conditional and run ids are derived from the
//! occurrence, so two sweeps at once still create each run once.
//!
//! The event's content does not matter (any payload is a tick); an EventBridge event is
//! logged with its id and time. The answer ([`SweepOutcome`]) says what was done.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use lambda_runtime::LambdaEvent;
use serde::Serialize;
use sked_aws::SweepLease;
use sked_core::CoreError;
use sked_core::duration::Dur;
use sked_core::ports::StoreError;
use sked_core::service::Ports;
use sked_core::service::SweepSignal;
use sked_core::service::reaper::{Reaper, ReaperConfig};
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::timestamp::Timestamp;

/// The lease the whole sweep takes.
pub const SWEEP_LEASE: u32 = 0;
/// Stop starting new sweep batches this long before the invocation's deadline.
pub const DEADLINE_MARGIN: Dur = Dur::secs(10);
/// The time budget when the context carries no deadline (tests, `cargo lambda invoke`).
pub const DEFAULT_BUDGET: Dur = Dur::secs(60);
/// A PENDING run ready this long without a claim is enqueued again: one tick. SQS keeps
/// every copy (claiming makes the extra ones harmless), so while the workers are behind a run
/// is enqueued again only when its wait crosses this, twice this, four times, … (the reaper's
/// doubling re-enqueue): a backlog is not buried under a copy per run and tick.
pub const STALE_AFTER: Dur = Dur::secs(60);
/// The time between ticks (the template's EventBridge schedule): the reaper's pass interval.
pub const TICK: Dur = Dur::secs(60);

/// A failed invocation (the Lambda reports it, and the "sweeper errors" alarm counts it).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// Taking or giving back the sweep lease failed.
    #[error("sweep lease: {0}")]
    Lease(#[source] StoreError),
    /// A sweep or reaper pass failed (what it had fired before is enqueued).
    #[error(transparent)]
    Core(#[from] CoreError),
}

impl From<SweepError> for lambda_runtime::Diagnostic {
    fn from(e: SweepError) -> Self {
        let error_type = match &e {
            SweepError::Lease(_) => "SweepLeaseError",
            SweepError::Core(_) => "SweepError",
        };
        lambda_runtime::Diagnostic {
            error_type: error_type.into(),
            // With the sources, so the function's error names the AWS call that failed.
            error_message: sources(&e),
        }
    }
}

/// An error and its sources, `: `-separated.
fn sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        text.push_str(": ");
        text.push_str(&s.to_string());
        next = s.source();
    }
    text
}

/// What one invocation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SweepOutcome {
    /// Another invocation held the sweep lease: this one did nothing.
    pub lease_held_elsewhere: bool,
    /// Sweep batches run.
    pub batches: usize,
    /// Runs created and enqueued.
    pub fired: usize,
    /// Occurrences skipped by policy.
    pub skipped: usize,
    /// The deadline came before the sweep ran out of due jobs (the next tick goes on).
    pub stopped_at_deadline: bool,
    /// Attempts closed as worker lost.
    pub abandoned: usize,
    /// PENDING runs enqueued again by the repair pass.
    pub requeued: usize,
}

/// The sweeper function's handler.
pub struct SweeperFn {
    ports: Ports,
    sweeper: Sweeper,
    reaper: Reaper,
    lease: SweepLease,
}

impl SweeperFn {
    /// A handler over `ports` firing `lookahead` ahead (at most 15 minutes: SQS's longest
    /// delay), taking `lease` for each sweep.
    pub fn new(ports: Ports, lease: SweepLease, lookahead: Dur) -> Self {
        let sweeper = Sweeper::new(
            ports.clone(),
            SweepSignal::default(),
            SweeperConfig {
                lookahead,
                ..SweeperConfig::default()
            },
        );
        let reaper = repairing_reaper(&ports, STALE_AFTER, TICK);
        SweeperFn {
            ports,
            sweeper,
            reaper,
            lease,
        }
    }

    /// The same handler for ticks every `tick` instead of [`TICK`], re-enqueuing runs stale
    /// after `stale_after` instead of [`STALE_AFTER`] (a schedule faster than EventBridge's
    /// minute: tests, `make local-aws`).
    pub fn with_tick(mut self, tick: Dur, stale_after: Dur) -> Self {
        self.reaper = repairing_reaper(&self.ports, stale_after, tick);
        self
    }

    /// Handles one tick (see the module docs).
    pub async fn handle(&self, event: LambdaEvent<serde_json::Value>) -> Result<SweepOutcome, SweepError> {
        let LambdaEvent { payload, context } = event;
        if let Ok(tick) = serde_json::from_value::<EventBridgeEvent>(payload) {
            tracing::info!(id = ?tick.id, time = ?tick.time, source = %tick.source, "sweeper tick");
        }
        let now = self.ports.clock.now();
        let deadline = deadline_of(context.deadline, now);
        let owner = if context.request_id.is_empty() {
            format!("sweeper-{}", ulid::Ulid::new())
        } else {
            context.request_id.clone()
        };
        if !self
            .lease
            .acquire(SWEEP_LEASE, &owner, deadline)
            .await
            .map_err(SweepError::Lease)?
        {
            tracing::info!("another sweeper invocation holds the sweep lease; nothing to do");
            return Ok(SweepOutcome {
                lease_held_elsewhere: true,
                ..SweepOutcome::default()
            });
        }
        let result = self.sweep_and_reap(deadline - DEADLINE_MARGIN.to_chrono()).await;
        // Give the lease back whatever happened; a failure to do so only delays the next
        // sweep until the lease expires.
        if let Err(e) = self.lease.release(SWEEP_LEASE, &owner).await {
            tracing::warn!(error = %e, "sweep lease not released; it expires at the deadline");
        }
        let outcome = result?;
        tracing::info!(?outcome, "sweep done");
        Ok(outcome)
    }

    async fn sweep_and_reap(&self, stop_at: Timestamp) -> Result<SweepOutcome, SweepError> {
        let reaped = self.reaper.reap_once().await?;
        let mut outcome = SweepOutcome {
            abandoned: reaped.abandoned,
            requeued: reaped.requeued,
            ..SweepOutcome::default()
        };
        loop {
            let report = self.sweeper.sweep_once().await?;
            outcome.batches += 1;
            outcome.fired += report.fired;
            outcome.skipped += report.skipped;
            if !report.more {
                break;
            }
            if self.ports.clock.now() >= stop_at {
                outcome.stopped_at_deadline = true;
                break;
            }
        }
        Ok(outcome)
    }
}

/// The reaper of one tick: stale runs re-enqueued with doubling waits (SQS keeps copies).
fn repairing_reaper(ports: &Ports, stale_after: Dur, tick: Dur) -> Reaper {
    let config = ReaperConfig {
        stale_after,
        interval: tick,
        ..ReaperConfig::default()
    };
    Reaper::new(ports.clone(), config).with_doubling_requeue(tick)
}

/// The invocation's deadline (ms since the epoch in the context; 0 when there is none, then
/// [`DEFAULT_BUDGET`] from `now`).
fn deadline_of(deadline_ms: u64, now: Timestamp) -> Timestamp {
    i64::try_from(deadline_ms)
        .ok()
        .filter(|ms| *ms > 0)
        .and_then(chrono::DateTime::from_timestamp_millis)
        .unwrap_or(now + DEFAULT_BUDGET.to_chrono())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_comes_from_the_context_or_a_default_budget() {
        let now = chrono::DateTime::from_timestamp_millis(1_000_000).unwrap();
        assert_eq!(deadline_of(0, now), now + chrono::Duration::seconds(60));
        assert_eq!(deadline_of(2_000_000, now).timestamp_millis(), 2_000_000);
    }
}
