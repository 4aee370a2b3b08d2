//! What a claim and an attempt's end decide, as every store records them: the claim's
//! answer ([`ClaimOutcome`]), how an attempt ended ([`AttemptResult`]) and what the run does
//! next ([`RunTransition`]). Domain values: [`crate::lifecycle`] computes them, the ports
//! carry them.

use crate::run::{AttemptOutcome, Run, RunState};
use crate::timestamp::Timestamp;

/// Why a claim did not start an attempt, or the attempt it started.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    /// A new attempt began: the run is RUNNING under this worker's lease.
    Claimed {
        /// The run after the claim (its last attempt is the new one).
        run: Run,
        /// Fencing token for every later write about this attempt.
        token: u64,
    },
    /// The run has ended (possibly just now, if the previous attempt was abandoned with no
    /// attempt left). Drop the message.
    Terminal(Run),
    /// Another attempt holds a live lease until this instant.
    Leased(Timestamp),
    /// The run may not start before this instant (backoff or jitter).
    NotYet(Timestamp),
    /// The run's tenant has as many runs RUNNING as its quota's `max_concurrent_runs`
    /// allows; nothing changed. Try again when a slot may have freed.
    AtCapacity,
    /// The run's concurrency key has as many runs RUNNING as the run's limit allows
    /// ([`crate::concurrency`]); nothing changed. Try again when one of them ends.
    KeyAtLimit {
        /// The key.
        key: String,
    },
}

/// How a finished attempt ended, as written by [`crate::ports::JobStore::complete`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptResult {
    /// When it ended.
    pub finished_at: Timestamp,
    /// How.
    pub outcome: AttemptOutcome,
    /// Exit code, if a process or container ran.
    pub exit_code: Option<i32>,
    /// HTTP status, if a request was answered.
    pub http_status: Option<u16>,
    /// Error text, if any.
    pub error: Option<String>,
    /// Log bytes captured.
    pub log_bytes: u64,
    /// Whether the log hit its cap.
    pub log_truncated: bool,
}

/// What the run does after an attempt ends (decided by [`crate::retry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunTransition {
    /// Back to PENDING, claimable from `not_before`.
    Retry {
        /// Earliest next claim.
        not_before: Timestamp,
    },
    /// A terminal state.
    Finish(RunState),
}
