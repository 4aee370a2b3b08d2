//! Executors of the local deployment: how a worker runs a task.
//!
//! - [`ProcessExecutor`] (`process`): `command` tasks as processes, tied to the worker; started
//!   through the [`spawner`] process (as `sked` does) or [`direct`]ly; [`payload`] is what
//!   either hands the executor, [`group`] signals a payload's process group.
//! - [`HttpExecutor`] (`http`): `http` tasks as one request.
//! - [`TaskExecutor`]: the one a worker is given; routes each task to the executor of its kind.
//!   `container` tasks need the ECS executor of the AWS deployment, which can be plugged in.
//! - [`NoopExecutor`]: succeeds at once, for benchmarks of the scheduling path.
//! - [`lines`]: splitting captured output into log lines.
//!
//! What this module must not do: decide retries, timeouts or run states. Executors report
//! how a payload ended; sked-core's worker decides what that means.

pub mod direct;
pub mod group;
pub mod http;
pub mod lines;
pub mod payload;
pub mod process;
pub mod spawner;

pub use http::HttpExecutor;
pub use process::ProcessExecutor;
pub use spawner::Spawner;

use async_trait::async_trait;
use sked_core::ports::{Clock, ExecRequest, ExecResult, Executor, LogLine, StopReason};
use sked_core::task::Task;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// What a `container` task answers where no container executor is configured.
pub const NO_CONTAINER_EXECUTOR: &str = "container tasks need the ECS executor of the AWS deployment";

/// Routes each task to the executor of its kind.
pub struct TaskExecutor {
    /// Runs `command` tasks.
    process: ProcessExecutor,
    /// Runs `http` tasks.
    http: HttpExecutor,
    /// Runs `container` tasks, where configured.
    container: Option<Arc<dyn Executor>>,
}

impl TaskExecutor {
    /// Process and HTTP executors stamping output with `clock`; no container executor.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        TaskExecutor::from_parts(ProcessExecutor::new(clock.clone()), HttpExecutor::new(clock))
    }

    /// A router over executors configured by the caller.
    pub fn from_parts(process: ProcessExecutor, http: HttpExecutor) -> Self {
        TaskExecutor {
            process,
            http,
            container: None,
        }
    }

    /// Runs `container` tasks with `executor` (the AWS deployment's ECS executor).
    pub fn with_container_executor(mut self, executor: Arc<dyn Executor>) -> Self {
        self.container = Some(executor);
        self
    }
}

#[async_trait]
impl Executor for TaskExecutor {
    async fn execute(
        &self,
        request: ExecRequest,
        output: mpsc::Sender<LogLine>,
        stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        match (&request.task, &self.container) {
            (Task::Command(_), _) => self.process.execute(request, output, stop).await,
            (Task::Http(_), _) => self.http.execute(request, output, stop).await,
            (Task::Container(_), Some(container)) => container.execute(request, output, stop).await,
            (Task::Container(_), None) => ExecResult {
                success: false,
                error: Some(NO_CONTAINER_EXECUTOR.into()),
                ..Default::default()
            },
        }
    }
}

/// Succeeds at once with no output, whatever the task: measures sked without payloads.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopExecutor;

#[async_trait]
impl Executor for NoopExecutor {
    async fn execute(
        &self,
        _request: ExecRequest,
        _output: mpsc::Sender<LogLine>,
        _stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        ExecResult {
            success: true,
            ..Default::default()
        }
    }
}

/// Resolves with the reason once `stop` holds `Some`; never, if its sender is gone first
/// (nobody can ask for a stop any more).
pub(crate) async fn wait_for_stop(stop: &mut watch::Receiver<Option<StopReason>>) -> StopReason {
    loop {
        if let Some(reason) = *stop.borrow_and_update() {
            return reason;
        }
        if stop.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}
