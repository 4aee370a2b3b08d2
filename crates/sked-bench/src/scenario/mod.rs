//! The benchmark scenarios. Each returns one [`Record`] per case it ran.
//!
//! - [`burst`]: N jobs due at the same whole second.
//! - [`stream`]: jobs due at a steady rate, staggered.
//! - [`backlog`]: draining runs already pending.
//! - [`dependencies`]: `after` jobs: a chain of 3 and a fan-in of 10, start after the last upstream.
//! - [`fairness`]: one tenant's burst and another tenant's run due just after it.
//! - [`schedules`]: many stored cron jobs; sweep cost and memory.
//! - [`scaleout`]: `sked worker` processes on one database.
//! - [`api`]: HTTP requests against `sked server`.
//! - [`scrape`]: `GET /metrics` against `sked server` with 20k and 1M jobs stored.
//! - [`spawn`] (opt-in): the process executor alone, spawner against direct start.

pub mod api;
pub mod backlog;
pub mod burst;
pub mod dependencies;
pub mod fairness;
pub mod scaleout;
pub mod schedules;
pub mod scrape;
pub mod spawn;
pub mod stream;

use crate::engine::{Backend, Exec, Slots};
use std::path::PathBuf;

/// Settings every scenario reads.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Reduced sizes (`make bench-quick`).
    pub quick: bool,
    /// Worker layout of the in-process engine.
    pub slots: Slots,
    /// Worker counts the stream runs with (each at `slots.concurrency`): more workers must
    /// never mean slower starts.
    pub stream_workers: Vec<usize>,
    /// Executors to run each in-process scenario with.
    pub execs: Vec<Exec>,
    /// Where temporary data directories go (default: the system's temp dir).
    pub tmp: Option<PathBuf>,
    /// Sweeper look-ahead (0, the server's default, unless `--lookahead-ms`).
    pub lookahead: sked_core::duration::Dur,
    /// Start `command` payloads directly instead of through the `sked` spawner process.
    pub no_spawner: bool,
    /// Overrides of the sizes of the scenario being run (empty: its defaults).
    pub sizes: Vec<usize>,
    /// The database every case keeps its data in (`--backend`).
    pub backend: Backend,
}

impl Settings {
    /// `sizes` if given, else `quick` or `full`.
    pub fn sizes_or(&self, quick: &[usize], full: &[usize]) -> Vec<usize> {
        if !self.sizes.is_empty() {
            self.sizes.clone()
        } else if self.quick {
            quick.to_vec()
        } else {
            full.to_vec()
        }
    }
}

/// Whether `exec` runs at size `n`: in quick mode the process executor runs only the
/// smallest size (it is two orders of magnitude slower than the no-op one).
pub(crate) fn runs_at(settings: &Settings, exec: Exec, n: usize, sizes: &[usize]) -> bool {
    !(settings.quick && exec == Exec::Process && sizes.iter().any(|&s| s < n))
}

/// A fresh directory for a scenario's data (under the harness's root), removed on drop.
pub(crate) fn data_dir(settings: &Settings) -> anyhow::Result<tempfile::TempDir> {
    crate::engine::case_dir(settings.tmp.as_deref())
}

/// A fresh engine on the settings' backend, with the settings' sweeper.
pub(crate) async fn engine(settings: &Settings) -> anyhow::Result<crate::engine::Engine> {
    let mut engine = crate::engine::Engine::fresh(settings.tmp.as_deref(), &settings.backend).await?;
    engine.sweeper.lookahead = settings.lookahead;
    engine.spawner = !settings.no_spawner;
    Ok(engine)
}

/// Seconds, for rates.
pub(crate) fn secs(d: std::time::Duration) -> f64 {
    d.as_secs_f64().max(1e-9)
}
