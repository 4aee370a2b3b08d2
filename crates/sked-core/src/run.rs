//! Runs (one firing of a job at a nominal time) and their attempts, with the run state machine:
//!
//! ```text
//! PENDING ──claim──▶ RUNNING ──▶ SUCCEEDED | FAILED | TIMED_OUT | CANCELLED
//!    ▲                  │
//!    └── retry (not_before = now + backoff) ◀── failed / timed out / worker lost, attempts left
//! PENDING ──cancel──▶ CANCELLED
//! (none) ──upstreams ended otherwise, or late──▶ SKIPPED   (`after` jobs only)
//! ```

use crate::alert::Alert;
use crate::concurrency::Concurrency;
use crate::ids::{JobId, RunId, TenantId, WorkerId};
use crate::job::{Job, wire_enum};
use crate::run_settings::RunSettings;
use crate::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

wire_enum!(
    /// Where a run is in its life.
    RunState {
        /// Waiting to be claimed (first attempt or a retry after backoff).
        Pending = "PENDING",
        /// An attempt holds a lease.
        Running = "RUNNING",
        /// Ended well.
        Succeeded = "SUCCEEDED",
        /// Ended badly with no retry left (or not retryable).
        Failed = "FAILED",
        /// The last attempt exceeded its timeout.
        TimedOut = "TIMED_OUT",
        /// Cancelled by a user or by the `replace` overlap policy.
        Cancelled = "CANCELLED",
        /// Never ran: an occurrence of an `after` job whose upstreams did not end as it asks,
        /// or not in time, or that came while the job was paused (`reason` says which).
        Skipped = "SKIPPED",
    }
);

impl RunState {
    /// Whether the run has ended for good.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, RunState::Pending | RunState::Running)
    }
}

wire_enum!(
    /// Why a run exists.
    Trigger {
        /// Its job's schedule fired.
        Schedule = "schedule",
        /// `POST /jobs/{id}/trigger`.
        Manual = "manual",
        /// Another job's `on_timeout: {run_job}`.
        Handler = "handler",
        /// `POST /jobs/{id}/backfill`: an occurrence of the job's schedule re-run on request.
        Backfill = "backfill",
        /// The job's `after` upstreams ended as it asks ([`crate::dependency`]).
        After = "after",
    }
);

wire_enum!(
    /// How one attempt ended.
    AttemptOutcome {
        /// Exit 0 / expected HTTP status.
        Succeeded = "succeeded",
        /// Non-zero exit, unexpected status, or failed to start.
        Failed = "failed",
        /// Exceeded the job's timeout and was stopped.
        TimedOut = "timed_out",
        /// Stopped because the run was cancelled.
        Cancelled = "cancelled",
        /// Its worker stopped heartbeating; closed at lease expiry.
        WorkerLost = "worker_lost",
    }
);

/// The lease an attempt holds while it runs. Every write by its worker names `token`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The worker holding it.
    pub owner: WorkerId,
    /// Fencing token: strictly greater than every earlier token of this run.
    pub token: u64,
    /// Lost unless renewed before this instant.
    pub expires_at: Timestamp,
}

/// One attempt of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1-based.
    pub attempt: u32,
    /// Who ran it.
    pub worker: WorkerId,
    /// When it was claimed.
    pub started_at: Timestamp,
    /// When it ended; `None` while running.
    pub finished_at: Option<Timestamp>,
    /// How it ended; `None` while running.
    pub outcome: Option<AttemptOutcome>,
    /// Process exit code (command tasks, containers).
    pub exit_code: Option<i32>,
    /// Response status (http tasks).
    pub http_status: Option<u16>,
    /// What went wrong, for people.
    pub error: Option<String>,
    /// Bytes of log captured.
    pub log_bytes: u64,
    /// Whether the log hit its cap.
    pub log_truncated: bool,
}

/// One firing of a job at a nominal time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Owner.
    pub tenant: TenantId,
    /// Derived from job and nominal time ([`RunId::derive`]).
    pub run_id: RunId,
    /// The job.
    pub job_id: JobId,
    /// Nominal time.
    pub scheduled_for: Timestamp,
    /// Why it exists.
    pub trigger: Trigger,
    /// State.
    pub state: RunState,
    /// 0..=9, copied from the job at creation.
    pub priority: u8,
    /// Not to be claimed before this (jitter, backoff).
    pub not_before: Timestamp,
    /// Attempts allowed in all (`max_retries + 1`), copied from the job at creation.
    pub max_attempts: u32,
    /// When the run was written.
    pub created_at: Timestamp,
    /// First attempt's start.
    pub started_at: Option<Timestamp>,
    /// When it reached a terminal state.
    pub finished_at: Option<Timestamp>,
    /// Attempts so far, oldest first.
    pub attempts: Vec<Attempt>,
    /// The live lease while RUNNING.
    pub lease: Option<Lease>,
    /// A cancel was asked for while RUNNING; the worker stops the payload.
    pub cancel_requested: bool,
    /// Why it ended, when not obvious from the last attempt (cancelled, DLQ, …).
    pub reason: Option<String>,
    /// The concurrency key it counts against and its limit, copied from the job at creation
    /// ([`crate::concurrency`]).
    pub concurrency: Option<Concurrency>,
    /// Its job's `notify`, copied at creation, and the delivery of its alert
    /// ([`crate::alert`]); `None` when the job has no `notify`.
    pub alert: Option<Alert>,
}

impl Run {
    /// A fresh PENDING run with no attempts.
    #[allow(clippy::too_many_arguments)]
    pub fn new_pending(
        tenant: TenantId,
        job_id: JobId,
        scheduled_for: Timestamp,
        trigger: Trigger,
        priority: u8,
        not_before: Timestamp,
        max_attempts: u32,
        now: Timestamp,
    ) -> Self {
        Run {
            run_id: RunId::derive(&job_id, scheduled_for),
            tenant,
            job_id,
            scheduled_for,
            trigger,
            state: RunState::Pending,
            priority,
            not_before,
            max_attempts,
            created_at: now,
            started_at: None,
            finished_at: None,
            attempts: Vec::new(),
            lease: None,
            cancel_requested: false,
            reason: None,
            concurrency: None,
            alert: None,
        }
    }

    /// A fresh PENDING run of `job` at nominal time `scheduled_for`, claimable from
    /// `not_before`, with the job's settings ([`RunSettings`]).
    pub fn of_job(
        job: &Job,
        scheduled_for: Timestamp,
        trigger: Trigger,
        not_before: Timestamp,
        now: Timestamp,
    ) -> Self {
        let settings = RunSettings::of(&job.spec);
        let mut run = Run::new_pending(
            job.tenant.clone(),
            job.id.clone(),
            scheduled_for,
            trigger,
            settings.priority,
            not_before,
            settings.max_attempts,
            now,
        );
        run.concurrency = settings.concurrency;
        run.alert = settings.notify.map(Alert::new);
        run
    }

    /// Whether this is an occurrence of its job's schedule not tried yet (PENDING, no
    /// attempt): what a pause or a change of the job's timing stops.
    pub fn is_untried_occurrence(&self) -> bool {
        self.trigger == Trigger::Schedule && self.is_unstarted()
    }

    /// Number of the latest attempt (0 before the first claim).
    pub fn attempt_count(&self) -> u32 {
        self.attempts.len() as u32
    }

    /// The attempt currently holding the lease, if RUNNING.
    pub fn current_attempt(&self) -> Option<&Attempt> {
        if self.state == RunState::Running {
            self.attempts.last()
        } else {
            None
        }
    }
}
