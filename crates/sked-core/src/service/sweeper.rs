//! The sweeper: turns due jobs into runs (one conditional write per job) and enqueues them.
//! It sleeps until the earliest `next_fire_at` or until a job change wakes it — no fixed
//! polling interval. Due jobs are planned by [`super::fire::plan_jobs`] (shared with the API's
//! direct firing) and written a chunk at a time with [`crate::ports::WorkPort::fire`], which
//! enqueues each chunk's runs together.
//!
//! **What one sweep fires is bounded**: at most `batch` jobs (a store query), and per job at
//! most [`crate::firing::MAX_RUNS_PER_FIRING`] runs, however frequent its schedule and however
//! long the look-ahead. A job with more within reach keeps its `next_fire_at` at the first
//! occurrence not fired; the next sweep goes on from there (at once, with `more` set, when that
//! occurrence is already due). So a per-second job costs a run and a message per second, a
//! sweep's time grows with the number of due jobs rather than with their frequency, and a
//! caller with a time budget (the AWS sweeper function) stops between sweeps.

use super::fire::{JobFiring, SkipSink, fire_jobs};
use super::{Ports, SweepSignal};
use crate::duration::Dur;
use crate::error::CoreError;
use crate::ports::StoreError;
use crate::timestamp::Timestamp;
use tokio_util::sync::CancellationToken;

/// Jobs planned together, written in one store call, and enqueued together: the first
/// chunk of a sweep is this small so its runs start soon (burst 1k: first start 5 ms after
/// its time); each later chunk doubles, up to [`FIRE_CHUNK_MAX`], so a big batch costs few
/// store calls.
const FIRE_CHUNK: usize = 32;

/// The largest chunk (see [`FIRE_CHUNK`]).
const FIRE_CHUNK_MAX: usize = 256;

/// Pause after a failed sweep before trying again.
const ERROR_BACKOFF: Dur = Dur::secs(1);

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
        SweeperConfig {
            batch: 500,
            max_sleep: Dur::secs(60),
            lookahead: Dur::ZERO,
        }
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
    /// The batch was full, or a job's firing stopped at the bound with occurrences still due:
    /// more may be due right now.
    pub more: bool,
}

/// The sweeper task.
pub struct Sweeper {
    pub(crate) ports: Ports,
    pub(crate) signal: SweepSignal,
    pub(crate) config: SweeperConfig,
    pub(crate) skips: Option<SkipSink>,
}

impl Sweeper {
    /// A sweeper over `ports`, woken by `signal`.
    pub fn new(ports: Ports, signal: SweepSignal, config: SweeperConfig) -> Self {
        Sweeper {
            ports,
            signal,
            config,
            skips: None,
        }
    }

    /// Also reports every skipped occurrence to `sink`.
    pub fn with_skip_sink(mut self, sink: SkipSink) -> Self {
        self.skips = Some(sink);
        self
    }

    /// Sweeps until `shutdown` is cancelled: fire what is due, then sleep until the earliest
    /// `next_fire_at` (or `max_sleep`), a job change, or shutdown.
    pub async fn run(self, shutdown: CancellationToken) {
        let clock = self.ports.clock.clone();
        while !shutdown.is_cancelled() {
            let wake_at = match self.sweep_once().await {
                Ok(report) if report.more => clock.now(),
                Ok(_) => self.next_wake().await,
                Err(e) => {
                    tracing::warn!(error = %e, "sweep failed; retrying");
                    clock.now() + ERROR_BACKOFF.to_chrono()
                }
            };
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                _ = self.signal.woken() => {}
                _ = clock.sleep_until(wake_at) => {}
            }
        }
    }

    /// When the next sweep is due: the earliest `next_fire_at` less the look-ahead, capped
    /// at `max_sleep` from now.
    async fn next_wake(&self) -> Timestamp {
        let now = self.ports.clock.now();
        let latest = now + self.config.max_sleep.to_chrono();
        match self.ports.store.next_due_at().await {
            Ok(Some(due)) => (due - self.config.lookahead.to_chrono()).min(latest),
            Ok(None) => latest,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the next due time");
                now + ERROR_BACKOFF.to_chrono()
            }
        }
    }

    /// Fires one batch of what is due now. `more` in the report says another batch waits.
    pub async fn sweep_once(&self) -> Result<SweepReport, CoreError> {
        let began = self.ports.clock.now();
        let swept = self.sweep_batch().await;
        let duration = (self.ports.clock.now() - began).to_std().unwrap_or_default();
        self.ports.observe(crate::ports::Event::Swept { duration });
        swept
    }

    /// [`Sweeper::sweep_once`] without its timing.
    async fn sweep_batch(&self) -> Result<SweepReport, CoreError> {
        let now = crate::timestamp::trunc_ms(self.ports.clock.now());
        let horizon = now + self.config.lookahead.to_chrono();
        let due = self.ports.store.due_jobs(horizon, self.config.batch).await?;
        let mut report = SweepReport {
            jobs: due.len(),
            more: due.len() == self.config.batch,
            ..SweepReport::default()
        };
        let mut failed = None;
        // Jobs fire a chunk at a time: their plans are made from one read, written in one
        // store call (one transaction where the store can), and the chunk's runs are
        // enqueued at once — the first runs of a big batch do not wait for the last ones.
        let mut rest = &due[..];
        let mut size = FIRE_CHUNK;
        while !rest.is_empty() {
            let (chunk, after) = rest.split_at(size.min(rest.len()));
            (rest, size) = (after, (size * 2).min(FIRE_CHUNK_MAX));
            let answers = match fire_jobs(&self.ports, chunk, now, self.config.lookahead, self.skips.as_ref()).await {
                Ok(answers) => answers,
                Err(e) => {
                    failed.get_or_insert(e);
                    continue;
                }
            };
            for JobFiring { plan, fired } in answers.into_iter().flatten() {
                match fired {
                    Ok(fired) => {
                        report.more |= plan.still_due(now);
                        report.fired += fired.created;
                        report.skipped += fired.skipped;
                    }
                    // Someone changed the job meanwhile (a user, another sweeper): the next
                    // sweep sees its new state.
                    Err(StoreError::Conflict(_)) => {}
                    // One job's failure does not hold back the others: go on, then report it.
                    Err(e) => {
                        failed.get_or_insert(e.into());
                    }
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }
}
