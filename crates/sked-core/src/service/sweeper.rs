//! The sweeper: turns due jobs into runs (one conditional write per job) and enqueues them.
//! It sleeps until the earliest `next_fire_at` or until a job change wakes it — no fixed
//! polling interval.

use super::{Ports, SweepSignal};
use crate::duration::Dur;
use crate::error::CoreError;
use tokio_util::sync::CancellationToken;

/// Sweeper settings.
#[derive(Debug, Clone, Copy)]
pub struct SweeperConfig {
    /// Jobs fired per store query.
    pub batch: usize,
    /// Longest sleep without a look (a safety net; wakes normally come from due times and
    /// job changes).
    pub max_sleep: Dur,
    /// Fire jobs this far ahead of their time (runs carry `not_before` = their time).
    pub lookahead: Dur,
}

impl Default for SweeperConfig {
    fn default() -> Self {
        SweeperConfig { batch: 500, max_sleep: Dur::secs(60), lookahead: Dur::ZERO }
    }
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Jobs looked at.
    pub jobs: usize,
    /// Runs created and enqueued.
    pub fired: usize,
    /// Occurrences skipped by policy.
    pub skipped: usize,
}

/// The sweeper task.
pub struct Sweeper {
    pub(crate) ports: Ports,
    pub(crate) signal: SweepSignal,
    pub(crate) config: SweeperConfig,
}

impl Sweeper {
    /// A sweeper over `ports`, woken by `signal`.
    pub fn new(ports: Ports, signal: SweepSignal, config: SweeperConfig) -> Self {
        Sweeper { ports, signal, config }
    }

    /// Sweeps until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) {
        let _ = shutdown;
        todo!()
    }

    /// Fires everything due now, then returns.
    pub async fn sweep_once(&self) -> Result<SweepReport, CoreError> {
        todo!()
    }
}
