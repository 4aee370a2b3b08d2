//! [`WorkerConfig`]: a worker's settings, and the lease arithmetic they imply — when a worker
//! that cannot renew its lease must stop its payload, given the clock-skew bound.

use crate::duration::Dur;
use crate::ids::WorkerId;

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
    /// The operating assumption on clocks: no process's clock is further than this from the
    /// true time. A lease's end is written by its holder's clock and judged by a claimer's,
    /// so a worker that cannot renew its lease stops its payload [`Self::lease_stop_margin`]
    /// before the lease ends by its own clock: by then no other worker can have found it
    /// ended. Default 100 ms (NTP-synchronised hosts; Amazon Time Sync is within a
    /// millisecond); one host, as the local deployment, has no skew at all.
    pub max_clock_skew: Dur,
    /// Longest single receive wait.
    pub poll_wait: Dur,
    /// Runs may be fired ahead of their time (a sweeper or API look-ahead, as on AWS): a
    /// `forbid` run then checks, when claimed, that the previous run has ended. Off where
    /// nothing fires ahead (the local deployment), which saves a read per run.
    pub fired_ahead: bool,
    /// How long a run refused for its tenant's concurrency cap waits before it is tried
    /// again (each try is one receive and one claim). Default 250 ms.
    pub capacity_retry: Dur,
}

impl WorkerConfig {
    /// Defaults for a worker named `id`: 4 at once, 15 s lease, 5 s grace.
    pub fn new(id: WorkerId) -> Self {
        WorkerConfig {
            id,
            concurrency: 4,
            lease: Dur::secs(15),
            grace: Dur::secs(5),
            max_clock_skew: Dur::millis(100),
            poll_wait: Dur::secs(1),
            fired_ahead: false,
            capacity_retry: Dur::millis(250),
        }
    }

    /// TERM → KILL grace when the lease is being lost: `grace`, but at most a fifth of the
    /// lease, so the stop fits well inside it.
    pub fn lease_lost_grace(&self) -> Dur {
        self.grace.min(Dur::millis(self.lease.as_millis() as u64 / 5))
    }

    /// How long before its lease ends (by its own clock) a worker that could not renew it
    /// asks its payload to stop: twice the clock-skew bound (the holder's clock may be that
    /// far behind, a claimer's that far ahead) plus [`Self::lease_lost_grace`], for the
    /// payload to be gone before any other worker can claim the run.
    pub fn lease_stop_margin(&self) -> Dur {
        Dur::millis(2 * self.max_clock_skew.as_millis() as u64 + self.lease_lost_grace().as_millis() as u64)
    }

    /// Whether the settings make sense together: the lease must leave room for at least one
    /// renewal (a third of it) before the stop margin, or payloads would be stopped as soon
    /// as they start.
    pub fn check(&self) -> Result<(), String> {
        let lease = self.lease.as_millis();
        if lease < 1 || 3 * self.lease_stop_margin().as_millis() > 2 * lease {
            return Err(format!(
                "a lease of {} is too short for a clock-skew bound of {} and a grace of {}: the payload would have to stop {} before the lease ends",
                self.lease,
                self.max_clock_skew,
                self.lease_lost_grace(),
                self.lease_stop_margin()
            ));
        }
        Ok(())
    }
}
