//! Deterministic simulation: the whole scheduler — API, sweepers, reaper, workers — on the
//! in-memory ports, one thread, a manual clock, and faults from a seeded PRNG
//! ([`crate::faults`]). The same seed gives the same run, byte for byte: [`SimReport::digest`]
//! is a hash of the event log, and a test runs seeds twice to compare.
//!
//! - [`driver`]: the executor that polls every future in a fixed order.
//! - [`world`]: the deployment and the script (load, user calls, process faults, settling).
//! - [`audit`]: checks fencing call by call at the store, and journals schedule moves.
//! - [`check`]: the invariants, after every step and at the end.
//! - [`payload`]: payload executions recorded in true time.
//! - [`trace`]: the event log and its digest.
//!
//! Services are driven step by step (`Sweeper::sweep_once`, `Reaper::reap_once`,
//! `Worker::take_work`, `Worker::run_claimed`), never through their `run` loops, and nothing
//! here reads the wall clock or the system's randomness. Workers take work through both
//! shapes of the work port: the store and the queue in turn (as DynamoDB with SQS), and one
//! transaction per step (as SQLite), each with its faults.

pub mod audit;
pub mod check;
pub mod driver;
pub mod payload;
pub mod trace;
mod world;

use crate::faults::{FaultCounts, FaultPlan};
use sked_core::duration::Dur;
use std::fmt;

/// How many times the simulation's queue delivers a message before it gives it up: the
/// template's redrive `maxReceiveCount` ([`crate::memory::MemQueue::with_receive_limit`]).
pub const RECEIVE_LIMIT: u32 = 5;

/// What one simulation does.
#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    /// Everything random follows from it.
    pub seed: u64,
    /// Simulated time under load and faults.
    pub active: Dur,
    /// Longest simulated time given afterwards for every run to end, as long as the system
    /// keeps making progress (a backlog of slow, retried payloads can take long to drain).
    pub settle_limit: Dur,
    /// How long the settle phase may pass without progress (no attempt started or ended, no
    /// run ended) before the runs still open count as never ending. Longer than any lease,
    /// backoff, timeout and repair gap of the simulated deployment.
    pub settle_stall: Dur,
    /// Port faults.
    pub faults: FaultPlan,
    /// Whether user changes may run concurrently with a sweep (on by default). It found a
    /// lost update: a user change written on a job read before a concurrent sweep put back the
    /// `next_fire_at` the sweep had advanced; `update_job` now also checks `next_fire_at`.
    pub race_api_with_sweeps: bool,
    /// How many of the last events a report shows ([`trace::KEPT`] by default; a replay can
    /// ask for the whole log).
    pub trace_lines: usize,
    /// How many tenants the jobs are spread over (job `j<n>` in tenant `n % tenants`): one,
    /// two or three by the seed (`1 + seed % 3`), so the queue's turns are checked too.
    pub tenants: u64,
    /// Whether every other worker (w1, w3, …) takes its work through the one-transaction
    /// shape of the work port ([`crate::memory::MemWork`], the steps SQLite's port runs),
    /// the others through the store and the queue in turn (on by default; no draw from the
    /// seeded stream).
    pub one_transaction_workers: bool,
    /// How far ahead of their time runs are fired, as the AWS deployment fires them (its
    /// sweeper looks ten minutes ahead, its API fires what falls due before the next tick):
    /// the sweepers' look-ahead; the API fires a third of it ahead
    /// ([`SkedConfig::fire_within`](sked_core::service::SkedConfig)), and workers check
    /// overlap and pauses at claim ([`WorkerConfig::fired_ahead`](sked_core::service::worker::WorkerConfig)).
    /// Zero: runs are fired when due, as the local deployment fires them. By the seed, no
    /// draw from its stream ([`fire_ahead_of`]).
    pub fire_ahead: Dur,
    /// Whether the store leaves one-shots' plain firings unwritten, as the lean DynamoDB
    /// layout does ([`MemStore::lean`](crate::memory::MemStore::lean)): for seeds whose
    /// remainder by 4 is 2 or 3, so every pairing with the look-ahead's and the tenants'
    /// choices comes up (no draw from the seeded stream).
    pub lean_one_shots: bool,
}

/// The look-ahead of `seed`: none for even seeds; 15 s, 30 s or 60 s for odd ones. (Longer
/// ones cost the simulation time in proportion to the runs fired ahead, and add nothing the
/// checks see: a user call comes every ten simulated seconds or so. 180 s made a seed 3.6
/// times slower than one without look-ahead.)
pub fn fire_ahead_of(seed: u64) -> Dur {
    match seed % 6 {
        1 => Dur::secs(15),
        3 => Dur::secs(30),
        5 => Dur::secs(60),
        _ => Dur::ZERO,
    }
}

impl SimConfig {
    /// The standard simulation of `seed`: 6 minutes under load with the standard faults,
    /// then up to 3 hours to settle, ending early once 10 minutes pass without progress;
    /// jobs spread over `1 + seed % 3` tenants; runs fired ahead by [`fire_ahead_of`].
    pub fn new(seed: u64) -> Self {
        SimConfig {
            seed,
            active: Dur::secs(360),
            settle_limit: Dur::secs(3 * 3600),
            settle_stall: Dur::secs(600),
            faults: FaultPlan::standard(),
            race_api_with_sweeps: true,
            trace_lines: trace::KEPT,
            tenants: 1 + seed % 3,
            one_transaction_workers: true,
            fire_ahead: fire_ahead_of(seed),
            lean_one_shots: seed % 4 >= 2,
        }
    }
}

/// What one simulation saw.
#[derive(Debug, Clone)]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// Hash of the event log (equal for two runs of one seed).
    pub digest: u64,
    /// Steps taken.
    pub steps: u64,
    /// Jobs at the end.
    pub jobs: usize,
    /// Runs at the end.
    pub runs: usize,
    /// Attempts recorded.
    pub attempts: usize,
    /// Payload executions.
    pub executions: usize,
    /// Writes refused because their token was fenced off.
    pub fenced_writes: u64,
    /// Messages the queue gave up after [`RECEIVE_LIMIT`] receives (dropped: the
    /// simulation runs no dead-letter handler, so a run they alone carried would never end).
    pub dead_letters: usize,
    /// Faults injected, by kind.
    pub faults: FaultCounts,
    /// Broken invariants (empty when all held).
    pub violations: Vec<String>,
    /// The end of the event log, for failure reports.
    pub trace_tail: String,
}

impl SimReport {
    /// Whether every invariant held.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {}: digest {:016x}, {} steps, {} jobs, {} runs, {} attempts, {} executions, {} fenced writes, {} dead letters",
            self.seed,
            self.digest,
            self.steps,
            self.jobs,
            self.runs,
            self.attempts,
            self.executions,
            self.fenced_writes,
            self.dead_letters
        )?;
        writeln!(f, "faults: {}", self.faults)?;
        if !self.ok() {
            writeln!(f, "VIOLATIONS:")?;
            for v in &self.violations {
                writeln!(f, "  {v}")?;
            }
            writeln!(f, "last events:\n{}", self.trace_tail)?;
            writeln!(
                f,
                "replay: SKED_SIM_SEED={} cargo test -p sked-testkit --test sim",
                self.seed
            )?;
        }
        Ok(())
    }
}

/// Runs one simulation.
pub fn simulate(config: SimConfig) -> SimReport {
    world::World::new(config).run()
}
