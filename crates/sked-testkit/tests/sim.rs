//! The deterministic simulation of the whole scheduler under faults (see
//! `sked_testkit::sim`).
//!
//! - `cargo test -p sked-testkit --test sim` runs 500 seeds (the CI count), the seeds that once
//!   broke an invariant, and a window of 2,000 more that moves with the commit: `make test`
//!   sets `SKED_SIM_WINDOW` to the commit's hash, which picks where the window starts (printed,
//!   so a failure replays; without it the window starts at 500). Coverage grows with every
//!   landing while `make test` stays short. `SKED_SIM_WINDOW_SEEDS=<n>` resizes the window.
//! - `SKED_SIM_SEEDS=100000` runs more; `SKED_SIM_FIRST=<n>` starts elsewhere.
//! - `SKED_SIM_SEED=<n>` replays one seed and prints its report (`SKED_SIM_TENANTS=1
//!   SKED_SIM_ONE_TRANSACTION=0` replays one of the once-broken seeds as they run here).
//! - `SKED_SIM_FIRE_AHEAD_MS=<n>` fires runs n ms ahead of their time (by default the odd
//!   seeds fire 15 s, 30 s or 60 s ahead, as the AWS deployment does; see
//!   `SimConfig::fire_ahead`), `0` when due.
//! - `SKED_SIM_ONE_TRANSACTION=0` keeps every worker on the store and the queue in turn (by
//!   default every other one takes the one-transaction work port).
//! - `SKED_SIM_TRACE_LINES=<n>` shows the last n events of a failing seed (default 60).
//! - `RUST_LOG=<filter>` with `SKED_SIM_SEED` prints the services' own log lines as well.
//! - `SKED_SIM_LEAN=1` (or `0`) has the store leave one-shots' plain firings unwritten, as
//!   the lean DynamoDB layout does (or not); by default seeds whose remainder by 4 is 2 or 3
//!   do (`SimConfig::lean_one_shots`).
//! - `SKED_SIM_RACE_API=0` keeps user changes from racing sweeps (they race by default; see
//!   `SimConfig::race_api_with_sweeps`).
//!
//! A failing seed prints its report: what broke, the last events, and the replay command.

use sked_core::duration::Dur;
use sked_testkit::faults::FaultCounts;
use sked_testkit::sim::{SimConfig, SimReport, simulate};
use std::time::Instant;

/// Seeds run by a plain `cargo test`.
const CI_SEEDS: u64 = 500;

/// Seeds in the window that moves with the commit.
const WINDOW_SEEDS: u64 = 2_000;

/// Seeds that broke an invariant once, each pinned with its cause (fixed in sked):
/// - 17701: a worker cut off from the store stopped its payload only at its lease's end by its
///   own clock; another worker, its clock ahead, had claimed the run 1.2 s before (the worker
///   now stops the payload its stop margin before the lease ends).
/// - 25079, 35441, 44825: a schedule change made on a clock behind the sweeper's gave back,
///   as the next fire time, the occurrence the sweeper had just fired, and it was fired twice
///   (a change now passes over what the old timing accounted for).
/// - 67301, 73225: runs created while a job was `allow`, then changed to `queue_one`, all
///   waited in line, longer than the settle time (`queue_one` now keeps one run waiting at
///   claim time too).
/// - 20111 (found by the next 100,000): not a fault of sked's — a backlog of 4-attempt runs
///   of a payload that always times out was still draining, an attempt every few seconds,
///   when the 20-minute settle ended (the settle now goes on while the system makes
///   progress, and fails on a 10-minute stall).
///
/// They are replayed as close to how they were found as the simulation allows: with one
/// tenant (jobs were spread over tenants later) and every worker on the store and the queue
/// in turn (workers took the one-transaction work port later). Their event logs differ from
/// then all the same: the worker's claims and their faults are now per batch.
const ONCE_BROKEN: [u64; 7] = [17701, 25079, 35441, 44825, 67301, 73225, 20111];

/// The configuration of `seed`, with the environment's switches.
fn config(seed: u64) -> SimConfig {
    let mut c = SimConfig::new(seed);
    c.race_api_with_sweeps = std::env::var("SKED_SIM_RACE_API").map_or(true, |v| v != "0");
    if let Some(n) = env_u64("SKED_SIM_TRACE_LINES") {
        c.trace_lines = n as usize;
    }
    if let Some(n) = env_u64("SKED_SIM_TENANTS") {
        c.tenants = n;
    }
    if let Some(n) = env_u64("SKED_SIM_ONE_TRANSACTION") {
        c.one_transaction_workers = n != 0;
    }
    if let Some(ms) = env_u64("SKED_SIM_FIRE_AHEAD_MS") {
        c.fire_ahead = Dur::millis(ms);
    }
    if let Some(n) = env_u64("SKED_SIM_LEAN") {
        c.lean_one_shots = n != 0;
    }
    c
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}")),
    )
}

/// Runs `seeds`, each configured by `make`, on every core; reports in seed order.
fn run_seeds(seeds: Vec<u64>, make: fn(u64) -> SimConfig) -> Vec<SimReport> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(seeds.len().max(1));
    let mut reports: Vec<SimReport> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let mine: Vec<u64> = seeds.iter().copied().skip(t).step_by(threads).collect();
                scope.spawn(move || {
                    mine.into_iter()
                        .map(|seed| {
                            std::panic::catch_unwind(|| simulate(make(seed))).unwrap_or_else(|panic| {
                                let what = panic
                                    .downcast_ref::<String>()
                                    .cloned()
                                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                                    .unwrap_or_default();
                                SimReport {
                                    seed,
                                    digest: 0,
                                    steps: 0,
                                    jobs: 0,
                                    runs: 0,
                                    attempts: 0,
                                    executions: 0,
                                    fenced_writes: 0,
                                    dead_letters: 0,
                                    faults: FaultCounts::default(),
                                    violations: vec![format!("panicked: {what}")],
                                    trace_tail: String::new(),
                                }
                            })
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    reports.sort_by_key(|r| r.seed);
    reports
}

#[test]
fn sim_seeds_keep_every_invariant() {
    if let Some(seed) = env_u64("SKED_SIM_SEED") {
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_test_writer()
                .try_init();
        }
        let report = simulate(config(seed));
        println!("{report}");
        assert!(report.ok(), "seed {seed} broke an invariant:\n{report}");
        return;
    }
    let count = env_u64("SKED_SIM_SEEDS").unwrap_or(CI_SEEDS);
    let first = env_u64("SKED_SIM_FIRST").unwrap_or(0);
    assert_seeds_hold(
        &format!("{count} seeds from {first}"),
        (first..first + count).collect(),
        config,
    );
}

/// Runs `seeds` (each configured by `make`), prints what they did (time, runs, attempts,
/// faults), and fails naming every seed that broke an invariant.
fn assert_seeds_hold(what: &str, seeds: Vec<u64>, make: fn(u64) -> SimConfig) {
    let count = seeds.len();
    let started = Instant::now();
    let reports = run_seeds(seeds, make);
    let secs = started.elapsed().as_secs_f64();
    let mut faults = FaultCounts::default();
    let (mut runs, mut attempts, mut fenced, mut dead_letters) = (0, 0, 0, 0);
    for r in &reports {
        faults.merge(&r.faults);
        runs += r.runs;
        attempts += r.attempts;
        fenced += r.fenced_writes;
        dead_letters += r.dead_letters;
    }
    println!(
        "{what}: {count} seeds in {secs:.1} s ({:.1} seeds/s): {runs} runs, {attempts} attempts, {fenced} fenced writes, {dead_letters} dead letters",
        count as f64 / secs
    );
    println!("faults injected: {faults}");
    let failed: Vec<&SimReport> = reports.iter().filter(|r| !r.ok()).collect();
    for r in failed.iter().take(3) {
        println!("{r}");
    }
    let seeds: Vec<u64> = failed.iter().map(|r| r.seed).collect();
    assert!(
        failed.is_empty(),
        "{what}: {} of {count} seeds broke an invariant: {seeds:?}\nreplay one with SKED_SIM_SEED=<seed> cargo test -p sked-testkit --test sim",
        failed.len()
    );
}

/// Whether one seed is being replayed (`SKED_SIM_SEED`): the other seed sets then stand aside.
fn replaying() -> bool {
    env_u64("SKED_SIM_SEED").is_some()
}

#[test]
fn the_seeds_that_once_broke_keep_every_invariant() {
    if replaying() {
        return;
    }
    assert_seeds_hold("once broken", ONCE_BROKEN.to_vec(), |seed| SimConfig {
        tenants: 1,
        one_transaction_workers: false,
        fire_ahead: Dur::ZERO,
        lean_one_shots: false,
        ..config(seed)
    });
}

/// Where the moving window starts: from `SKED_SIM_WINDOW` (a commit hash, or any text), far
/// from the fixed seeds and from the soak's ranges; at 500 without it.
fn window_start() -> (u64, String) {
    match std::env::var("SKED_SIM_WINDOW").ok().filter(|v| !v.trim().is_empty()) {
        Some(v) => {
            // FNV-1a of the text: the same commit, the same window.
            let hash = v.trim().bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
            (
                10_000_000 + hash % 1_000_000_000,
                format!("SKED_SIM_WINDOW={}", v.trim()),
            )
        }
        None => (CI_SEEDS, "SKED_SIM_WINDOW unset".to_string()),
    }
}

#[test]
fn sim_moving_window_keeps_every_invariant() {
    if replaying() {
        return;
    }
    let (first, from) = window_start();
    let count = env_u64("SKED_SIM_WINDOW_SEEDS").unwrap_or(WINDOW_SEEDS);
    println!(
        "moving window ({from}): seeds {first}..{}; replay one with SKED_SIM_SEED=<seed>",
        first + count
    );
    assert_seeds_hold(
        &format!("window from {first}"),
        (first..first + count).collect(),
        config,
    );
}

#[test]
fn the_same_seed_replays_byte_for_byte() {
    for seed in [1, 77, 4242] {
        let a = simulate(config(seed));
        let b = simulate(config(seed));
        assert_eq!(a.digest, b.digest, "seed {seed} ran differently twice");
        assert_eq!((a.steps, a.runs, a.attempts), (b.steps, b.runs, b.attempts));
        assert_eq!(a.faults, b.faults);
    }
    let other = simulate(SimConfig::new(2));
    assert_ne!(
        other.digest,
        simulate(SimConfig::new(1)).digest,
        "different seeds, different runs"
    );
}
