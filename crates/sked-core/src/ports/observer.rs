//! The `Observer` port: what the services report as they move runs and do their work — a run
//! fired, started, retried or finished, an occurrence skipped, a sweep done, a worker started
//! or stopped — told once, at the moment it happens, by the service that made it happen.
//!
//! It exists for metrics: an adapter counts these events (sked-api's Prometheus recorder), so
//! a scrape reads counters kept in memory and never scans the jobs or runs tables. It must
//! stay cheap and must not fail: `observe` is called on the services' hot paths, and nothing
//! it does can change what they do. Events carry the tenant, never a job or run id, so an
//! adapter that labels by them stays bounded.
//!
//! [`NoObserver`] (what [`crate::service::Ports::new`] plugs in) ignores every event, for
//! deployments and tests that do not watch.

use crate::firing::SkipReason;
use crate::ids::TenantId;
use crate::run::RunState;
use std::time::Duration;

/// How a run ended, as `sked_runs_finished_total{outcome}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// SUCCEEDED.
    Succeeded,
    /// FAILED (its last attempt failed, its worker was lost for good, it was dead-lettered).
    Failed,
    /// TIMED_OUT.
    TimedOut,
    /// CANCELLED (by a user, by `replace`, or skipped at claim by its overlap policy).
    Cancelled,
}

impl Outcome {
    /// Every outcome, in label order.
    pub const ALL: [Outcome; 4] = [
        Outcome::Succeeded,
        Outcome::Failed,
        Outcome::TimedOut,
        Outcome::Cancelled,
    ];

    /// The outcome of a run that reached the terminal `state`; `None` for a state that is not
    /// terminal.
    pub fn of(state: RunState) -> Option<Outcome> {
        match state {
            RunState::Succeeded => Some(Outcome::Succeeded),
            RunState::Failed => Some(Outcome::Failed),
            RunState::TimedOut => Some(Outcome::TimedOut),
            RunState::Cancelled => Some(Outcome::Cancelled),
            _ => None,
        }
    }

    /// The label value.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// Something a service did, reported as it happened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event<'a> {
    /// `runs` runs of `tenant` were created and handed to the queue: by a sweep, a direct
    /// firing, a manual trigger, a timeout handler or a backfill.
    Fired {
        /// Owner.
        tenant: &'a TenantId,
        /// How many.
        runs: usize,
    },
    /// An occurrence of a job of `tenant` did not become a run, or its run was ended at
    /// claim time, for `reason`.
    Skipped {
        /// Owner.
        tenant: &'a TenantId,
        /// Why.
        reason: SkipReason,
    },
    /// A worker of this process claimed an attempt of a run of `tenant` and starts it, `lag`
    /// after the attempt was due (its `not_before`: the nominal time plus jitter for a first
    /// attempt, the backoff's end for a retry).
    Started {
        /// Owner.
        tenant: &'a TenantId,
        /// How late it started (zero if early).
        lag: Duration,
    },
    /// An attempt [`Event::Started`] by this process is over on this worker, however it ended
    /// (recorded, fenced off, lease lost, shut down).
    Stopped {
        /// Owner.
        tenant: &'a TenantId,
    },
    /// An attempt of a run of `tenant` failed or timed out (or its worker was lost) and the
    /// run goes back to PENDING for another attempt.
    Retried {
        /// Owner.
        tenant: &'a TenantId,
    },
    /// A run of `tenant` reached a terminal state.
    Finished {
        /// Owner.
        tenant: &'a TenantId,
        /// Which.
        outcome: Outcome,
    },
    /// One sweep (one batch of due jobs) took `duration`, by the clock.
    Swept {
        /// How long.
        duration: Duration,
    },
    /// A worker task of this process started.
    WorkerUp,
    /// A worker task of this process stopped.
    WorkerDown,
}

/// Receives the services' events. Implementations count; they never block or fail.
pub trait Observer: Send + Sync + 'static {
    /// Takes note of `event`.
    fn observe(&self, event: &Event<'_>);
}

/// The observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

impl Observer for NoObserver {
    fn observe(&self, _event: &Event<'_>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_terminal_states_have_an_outcome() {
        assert_eq!(Outcome::of(RunState::TimedOut), Some(Outcome::TimedOut));
        assert_eq!(Outcome::of(RunState::Pending), None);
        assert_eq!(Outcome::of(RunState::Running), None);
        let labels: Vec<_> = Outcome::ALL.iter().map(Outcome::as_str).collect();
        assert_eq!(labels, ["succeeded", "failed", "timed_out", "cancelled"]);
    }
}
