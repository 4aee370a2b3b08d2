//! The worker: receives dispatches, claims the run (fenced lease), runs the task through the
//! executor, heartbeats at a third of the lease, enforces the timeout, and completes — or,
//! having lost its lease, stops the payload and writes nothing.

use super::Ports;
use crate::duration::Dur;
use crate::ids::WorkerId;
use crate::ports::Executor;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Worker settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Recorded on leases and attempts.
    pub id: WorkerId,
    /// Attempts run at once by this worker.
    pub concurrency: usize,
    /// Lease length; heartbeats every third of it.
    pub lease: Dur,
    /// TERM → KILL grace when stopping a payload.
    pub grace: Dur,
    /// Longest single receive wait.
    pub poll_wait: Dur,
}

impl WorkerConfig {
    /// Defaults for a worker named `id`: 4 at once, 15 s lease, 5 s grace.
    pub fn new(id: WorkerId) -> Self {
        WorkerConfig { id, concurrency: 4, lease: Dur::secs(15), grace: Dur::secs(5), poll_wait: Dur::secs(1) }
    }
}

/// One worker (which may run several attempts at once).
pub struct Worker {
    pub(crate) ports: Ports,
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) config: WorkerConfig,
}

impl Worker {
    /// A worker over `ports`, running tasks through `executor`.
    pub fn new(ports: Ports, executor: Arc<dyn Executor>, config: WorkerConfig) -> Self {
        Worker { ports, executor, config }
    }

    /// Works until `shutdown` is cancelled; then stops taking work, stops running payloads
    /// (their runs are retried elsewhere) and returns.
    pub async fn run(self, shutdown: CancellationToken) {
        let _ = shutdown;
        todo!()
    }
}
