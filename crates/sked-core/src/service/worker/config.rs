//! [`WorkerConfig`]: a worker's settings, and the lease arithmetic they imply — when a worker
//! that cannot renew its lease must stop its payload, given the clock-skew bound, and how long
//! a lease its heartbeats ask for as an attempt runs on ([`LongLease`]).

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
    /// A longer lease for attempts that have run a while (`None`: `lease` throughout).
    pub long_lease: Option<LongLease>,
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
            long_lease: None,
            grace: Dur::secs(5),
            max_clock_skew: Dur::millis(100),
            poll_wait: Dur::secs(1),
            fired_ahead: false,
            capacity_retry: Dur::millis(250),
        }
    }

    /// The lease a heartbeat asks for once its attempt has run `ran`: `lease`, or the long
    /// lease from its `after` on. The worker heartbeats every third of it.
    pub fn lease_after_running(&self, ran: Dur) -> Dur {
        match self.long_lease {
            Some(long) if ran >= long.after => long.lease,
            _ => self.lease,
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
    /// as they start; a long lease must be longer than the lease, from a point after the
    /// attempt's start.
    pub fn check(&self) -> Result<(), String> {
        if let Some(long) = self.long_lease
            && (long.lease <= self.lease || long.after.is_zero())
        {
            return Err(format!(
                "a long lease of {} from {} into an attempt: it must be longer than the lease ({}) and start after the attempt does",
                long.lease, long.after, self.lease
            ));
        }
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

/// A longer lease for long attempts: once an attempt has run `after`, its heartbeats extend its
/// lease by `lease` (every third of it) instead of the worker's lease. Fewer heartbeats — each
/// a store write and a queue request — for the attempts that run longest, at a price: a worker
/// that dies during such an attempt is found up to `lease` after its last heartbeat, not the
/// worker's lease. An attempt shorter than `after` is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongLease {
    /// How long an attempt runs on the worker's lease first.
    pub after: Dur,
    /// The lease from then on.
    pub lease: Dur,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(long_lease: Option<LongLease>) -> WorkerConfig {
        WorkerConfig {
            long_lease,
            ..WorkerConfig::new(WorkerId::from("w"))
        }
    }

    #[test]
    fn an_attempt_asks_for_the_long_lease_from_its_point_on() {
        let long = LongLease {
            after: Dur::secs(300),
            lease: Dur::secs(60),
        };
        let with = config(Some(long));
        assert_eq!(with.lease_after_running(Dur::ZERO), Dur::secs(15));
        assert_eq!(with.lease_after_running(Dur::millis(299_999)), Dur::secs(15));
        assert_eq!(with.lease_after_running(Dur::secs(300)), Dur::secs(60));
        assert_eq!(with.lease_after_running(Dur::secs(86_400)), Dur::secs(60));
        assert_eq!(config(None).lease_after_running(Dur::secs(86_400)), Dur::secs(15));
        assert!(with.check().is_ok());
    }

    #[test]
    fn a_long_lease_no_longer_than_the_lease_or_from_the_start_is_refused() {
        for (after, lease) in [(300, 15), (300, 10), (0, 60)] {
            let long = LongLease {
                after: Dur::secs(after),
                lease: Dur::secs(lease),
            };
            let err = config(Some(long)).check().unwrap_err();
            assert!(err.contains("long lease"), "{err}");
        }
    }
}
