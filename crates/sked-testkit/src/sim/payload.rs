//! [`RecordingExecutor`]: the simulation's payloads. It plays the [`FakeExecutor`] scripts
//! (`ok`, `fail`, `sleep`, `hang`, `print`) and records, in true time, when each execution
//! started and ended and under which fencing token — the payload's own view, against which
//! the simulation checks that two executions of one run never overlap.
//!
//! An execution whose future is dropped (its worker crashed) ends at the drop: a payload is
//! tied to its worker's life (parent-death signal, own process group).

use crate::memory::FakeExecutor;
use async_trait::async_trait;
use sked_core::Timestamp;
use sked_core::ports::{Clock, ExecRequest, ExecResult, Executor, LogLine, StopReason};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{mpsc, watch};

/// One payload execution as the payload saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    /// The worker's index in the simulation.
    pub worker: usize,
    /// `SKED_RUN_ID`.
    pub run_id: String,
    /// `SKED_FENCING_TOKEN`.
    pub token: u64,
    /// When it started (true time).
    pub started_at: Timestamp,
    /// When it ended (true time); `None` while running.
    pub ended_at: Option<Timestamp>,
    /// Whether its worker stood still (paused) while it ran: a paused process's payload is
    /// modelled as paused too, and such an execution may overlap the next one.
    pub paused: bool,
}

/// Every execution of a simulation, shared by the workers' executors.
#[derive(Debug, Clone, Default)]
pub struct ExecLog(Arc<Mutex<Vec<Execution>>>);

impl ExecLog {
    /// The executions so far.
    pub fn lock(&self) -> MutexGuard<'_, Vec<Execution>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the running executions of `worker` as paused.
    pub fn pause(&self, worker: usize) {
        for e in self.lock().iter_mut() {
            if e.worker == worker && e.ended_at.is_none() {
                e.paused = true;
            }
        }
    }
}

/// A worker's executor in the simulation.
pub struct RecordingExecutor {
    /// Plays the scripts.
    fake: FakeExecutor,
    /// The true time.
    clock: Arc<dyn Clock>,
    /// Which worker this is.
    worker: usize,
    /// Where executions are recorded.
    log: ExecLog,
}

impl RecordingExecutor {
    /// The executor of worker `worker`; payload time runs on `payload_clock` (the worker's
    /// own), records are kept in true time (`clock`).
    pub fn new(worker: usize, payload_clock: Arc<dyn Clock>, clock: Arc<dyn Clock>, log: ExecLog) -> Self {
        RecordingExecutor {
            fake: FakeExecutor::new(payload_clock),
            clock,
            worker,
            log,
        }
    }
}

/// Ends the record at drop if the execution did not end normally (its worker crashed).
struct EndGuard {
    /// Where the record is.
    log: ExecLog,
    /// Its index.
    index: usize,
    /// True time.
    clock: Arc<dyn Clock>,
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        let now = self.clock.now();
        if let Some(e) = self.log.lock().get_mut(self.index)
            && e.ended_at.is_none()
        {
            e.ended_at = Some(now);
        }
    }
}

#[async_trait]
impl Executor for RecordingExecutor {
    async fn execute(
        &self,
        request: ExecRequest,
        output: mpsc::Sender<LogLine>,
        stop: watch::Receiver<Option<StopReason>>,
    ) -> ExecResult {
        let var = |name: &str| {
            request
                .context
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let index = {
            let mut log = self.log.lock();
            log.push(Execution {
                worker: self.worker,
                run_id: var("SKED_RUN_ID"),
                token: var("SKED_FENCING_TOKEN").parse().unwrap_or(0),
                started_at: self.clock.now(),
                ended_at: None,
                paused: false,
            });
            log.len() - 1
        };
        let _guard = EndGuard {
            log: self.log.clone(),
            index,
            clock: self.clock.clone(),
        };
        self.fake.execute(request, output, stop).await
    }
}
