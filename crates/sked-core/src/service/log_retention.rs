//! Log retention: the pass that removes attempts' logs older than the deployment's retention
//! period ([`LogRetentionConfig::keep`], 30 days by default), through the
//! [`LogRetention`] port, once at start and then every [`LogRetentionConfig::interval`],
//! timed by the [`Clock`] port.
//!
//! A pass removes in bounded batches (the store deletes at most
//! [`LogRetentionConfig::batch`] logs or lines per call) and calls again while a batch comes
//! back full, so no single statement or walk grows with the backlog. Several processes may run
//! passes at once (two sweepers): each removes what is left. What it must not do: touch runs or
//! attempts (their records outlive their logs, and read as empty logs), or decide how a store
//! finds what is old.

use crate::duration::{Dur, DurationParseError};
use crate::ports::{Clock, LogError, LogRetention};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// How long attempts' logs are kept: `--log-retention`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// Nothing is removed (`off`, or `0`).
    Forever,
    /// Logs older than this are removed.
    Keep(Dur),
}

impl Retention {
    /// The default: 30 days.
    pub const DEFAULT: Retention = Retention::Keep(Dur::secs(30 * 86_400));
}

impl Default for Retention {
    fn default() -> Self {
        Retention::DEFAULT
    }
}

impl FromStr for Retention {
    type Err = DurationParseError;

    /// `off` (or `forever`, or any zero duration): keep forever; otherwise a duration such
    /// as `30d`, `12h` or `1d12h`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if matches!(s.trim(), "off" | "forever") {
            return Ok(Retention::Forever);
        }
        let keep: Dur = s.parse()?;
        Ok(if keep.is_zero() {
            Retention::Forever
        } else {
            Retention::Keep(keep)
        })
    }
}

impl fmt::Display for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Retention::Forever => f.write_str("off"),
            Retention::Keep(keep) => keep.fmt(f),
        }
    }
}

/// Log retention settings.
#[derive(Debug, Clone, Copy)]
pub struct LogRetentionConfig {
    /// Logs older than this are removed.
    pub keep: Dur,
    /// Time between passes (the first runs at start).
    pub interval: Dur,
    /// Most logs (or lines) one call of the store removes.
    pub batch: usize,
}

impl LogRetentionConfig {
    /// Passes every hour removing what is older than `keep`, 1,000 at a time.
    pub fn keeping(keep: Dur) -> Self {
        LogRetentionConfig {
            keep,
            interval: Dur::secs(3_600),
            batch: 1_000,
        }
    }
}

/// The retention task.
pub struct LogPruner {
    /// Where the logs are.
    logs: Arc<dyn LogRetention>,
    /// What "older" is measured against.
    clock: Arc<dyn Clock>,
    /// Period, schedule and batch size.
    config: LogRetentionConfig,
}

impl LogPruner {
    /// A pruner of `logs` timed by `clock`.
    pub fn new(logs: Arc<dyn LogRetention>, clock: Arc<dyn Clock>, config: LogRetentionConfig) -> Self {
        LogPruner {
            logs,
            clock,
            config: LogRetentionConfig {
                // A batch of zero would remove nothing and look like the end.
                batch: config.batch.max(1),
                ..config
            },
        }
    }

    /// Runs a pass at once, then one every `interval`, until `shutdown` is cancelled (a pass
    /// under way is dropped between two calls of the store's).
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                removed = self.prune_once() => match removed {
                    Ok(0) => {}
                    Ok(removed) => tracing::info!(removed, keep = %self.config.keep, "removed old attempt logs"),
                    Err(e) => tracing::warn!(error = %e, "log retention pass failed"),
                },
            }
            let next = self.clock.now() + self.config.interval.to_chrono();
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                _ = self.clock.sleep_until(next) => {}
            }
        }
    }

    /// One pass: removes everything older than now minus `keep`, a batch at a time; returns how
    /// many logs (or lines) went.
    pub async fn prune_once(&self) -> Result<u64, LogError> {
        let cutoff = self.clock.now() - self.config.keep.to_chrono();
        let mut removed = 0;
        loop {
            let batch = self.logs.remove_before(cutoff, self.config.batch).await?;
            removed += batch;
            if batch < self.config.batch as u64 {
                return Ok(removed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_reads_durations_and_off() {
        assert_eq!(
            "30d".parse::<Retention>().unwrap(),
            Retention::Keep(Dur::secs(30 * 86_400))
        );
        assert_eq!(
            "12h".parse::<Retention>().unwrap(),
            Retention::Keep(Dur::secs(12 * 3_600))
        );
        assert_eq!("off".parse::<Retention>().unwrap(), Retention::Forever);
        assert_eq!("0".parse::<Retention>().unwrap(), Retention::Forever);
        assert_eq!("0d".parse::<Retention>().unwrap(), Retention::Forever);
        assert!("30 days".parse::<Retention>().is_err());
        assert_eq!(Retention::default().to_string(), "30d");
        assert_eq!(Retention::Forever.to_string(), "off");
    }
}
