//! The `Executor` port: runs one attempt's task, streams its output, and stops it when told.

use crate::duration::Dur;
use crate::ports::logs::LogLine;
use crate::task::Task;
use async_trait::async_trait;
use tokio::sync::{mpsc, watch};

/// Why the worker asks a payload to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The attempt exceeded the job's timeout.
    Timeout,
    /// A user cancelled the run (or `replace` overlap did).
    Cancelled,
    /// The worker lost its lease: another attempt may run; write nothing.
    LeaseLost,
    /// The worker is shutting down.
    Shutdown,
}

/// Everything an executor needs for one attempt.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// What to run.
    pub task: Task,
    /// `SKED_JOB_ID`, `SKED_RUN_ID`, `SKED_ATTEMPT`, `SKED_SCHEDULED_FOR`,
    /// `SKED_FENCING_TOKEN`: environment for commands, `Sked-*` headers for HTTP.
    pub context: Vec<(String, String)>,
    /// Time between the polite stop (SIGTERM) and the forced one (SIGKILL).
    pub grace: Dur,
    /// The same when the stop is [`StopReason::LeaseLost`]: the worker asks for that stop this
    /// long (plus the clock-skew bound) before its lease can end, so the payload must be gone
    /// by then; never longer than `grace`.
    pub lease_lost_grace: Dur,
}

impl ExecRequest {
    /// Time between the polite stop and the forced one for a stop asked for `reason`.
    pub fn grace_for(&self, reason: StopReason) -> Dur {
        match reason {
            StopReason::LeaseLost => self.lease_lost_grace.min(self.grace),
            _ => self.grace,
        }
    }
}

/// How the payload ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecResult {
    /// Whether it succeeded (exit 0, expected status). Ignored when `stopped` is set.
    pub success: bool,
    /// Exit code, if a process ran to an exit.
    pub exit_code: Option<i32>,
    /// HTTP status, if a response came.
    pub http_status: Option<u16>,
    /// What went wrong (failed to start, killed by signal N, connection refused, …).
    pub error: Option<String>,
    /// Set when the payload ended because a stop was asked for.
    pub stopped: Option<StopReason>,
}

/// Runs tasks.
#[async_trait]
pub trait Executor: Send + Sync + 'static {
    /// Runs `request.task` to its end. Output lines go to `output` as they come. When `stop`
    /// turns `Some(reason)`, the payload is stopped (TERM, [`ExecRequest::grace_for`] the
    /// reason, KILL for processes) and
    /// the result carries `stopped: Some(reason)`. Never panics on payload failure: every
    /// failure is an `ExecResult` with `success: false` and an `error`.
    async fn execute(
        &self,
        request: ExecRequest,
        output: mpsc::Sender<LogLine>,
        stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult;
}
