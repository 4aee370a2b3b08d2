//! The reaper: closes attempts whose worker stopped heartbeating (lease expired) and
//! re-enqueues PENDING runs whose queue message was lost (written but never received).

use super::Ports;
use crate::duration::Dur;
use crate::error::CoreError;
use tokio_util::sync::CancellationToken;

/// Reaper settings.
#[derive(Debug, Clone, Copy)]
pub struct ReaperConfig {
    /// Time between passes.
    pub interval: Dur,
    /// A PENDING run ready for longer than this without being claimed is re-enqueued.
    pub stale_after: Dur,
    /// Runs handled per pass and kind.
    pub batch: usize,
}

impl Default for ReaperConfig {
    fn default() -> Self {
        ReaperConfig { interval: Dur::secs(2), stale_after: Dur::secs(30), batch: 500 }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Attempts closed as worker lost.
    pub abandoned: usize,
    /// PENDING runs re-enqueued.
    pub requeued: usize,
}

/// The reaper task.
pub struct Reaper {
    pub(crate) ports: Ports,
    pub(crate) config: ReaperConfig,
}

impl Reaper {
    /// A reaper over `ports`.
    pub fn new(ports: Ports, config: ReaperConfig) -> Self {
        Reaper { ports, config }
    }

    /// Runs passes every `interval` until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) {
        let _ = shutdown;
        todo!()
    }

    /// One pass.
    pub async fn reap_once(&self) -> Result<ReapReport, CoreError> {
        todo!()
    }
}
