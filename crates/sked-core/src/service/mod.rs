//! Services: the scheduler's behaviour, written once against the ports.
//!
//! - [`Sked`] (in [`jobs`] and [`runs`]): what the API calls — submit, update, pause,
//!   trigger, cancel, read runs and logs.
//! - [`sweeper::Sweeper`]: turns due jobs into runs and hands them to the queue.
//! - [`worker::Worker`]: receives runs, claims, executes, heartbeats, completes.
//! - [`reaper::Reaper`]: closes attempts whose worker vanished; re-enqueues lost runs.

pub mod jobs;
pub mod reaper;
pub mod runs;
pub mod sweeper;
pub mod worker;

use crate::ports::{Clock, DispatchQueue, JobStore, LogStore};
use crate::validate::Capabilities;
use std::sync::Arc;
use tokio::sync::Notify;

/// The adapters a deployment plugs in.
#[derive(Clone)]
pub struct Ports {
    /// Jobs and runs.
    pub store: Arc<dyn JobStore>,
    /// Dispatch to workers.
    pub queue: Arc<dyn DispatchQueue>,
    /// Attempt logs.
    pub logs: Arc<dyn LogStore>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

/// Wakes the sweeper when a job changes, so it never waits out a stale sleep.
#[derive(Debug, Clone, Default)]
pub struct SweepSignal(Arc<Notify>);

impl SweepSignal {
    /// Tells the sweeper to look again now.
    pub fn wake(&self) {
        self.0.notify_one();
    }
    /// Waits for the next wake (a wake sent while nobody waited is kept for the next wait).
    pub async fn woken(&self) {
        self.0.notified().await;
    }
}

/// Settings of the API-facing service.
#[derive(Debug, Clone, Copy, Default)]
pub struct SkedConfig {
    /// What this deployment can run.
    pub capabilities: Capabilities,
}

/// The API-facing service: every user action goes through here.
#[derive(Clone)]
pub struct Sked {
    pub(crate) ports: Ports,
    pub(crate) config: SkedConfig,
    pub(crate) sweep: SweepSignal,
}

impl Sked {
    /// A service over `ports`; `sweep` is woken on every job change.
    pub fn new(ports: Ports, config: SkedConfig, sweep: SweepSignal) -> Self {
        Sked { ports, config, sweep }
    }

    /// The adapters (for health checks and tests).
    pub fn ports(&self) -> &Ports {
        &self.ports
    }
}
