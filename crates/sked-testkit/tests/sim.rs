//! The deterministic simulation of the whole scheduler under faults (see
//! `sked_testkit::sim`).
//!
//! - `cargo test -p sked-testkit --test sim` runs 500 seeds (the CI count).
//! - `SKED_SIM_SEEDS=100000` runs more; `SKED_SIM_FIRST=<n>` starts elsewhere.
//! - `SKED_SIM_SEED=<n>` replays one seed and prints its report.
//! - `SKED_SIM_TRACE_LINES=<n>` shows the last n events of a failing seed (default 60).
//! - `RUST_LOG=<filter>` with `SKED_SIM_SEED` prints the services' own log lines as well.
//! - `SKED_SIM_RACE_API=0` keeps user changes from racing sweeps (they race by default; see
//!   `SimConfig::race_api_with_sweeps`).
//!
//! A failing seed prints its report: what broke, the last events, and the replay command.

use sked_testkit::faults::FaultCounts;
use sked_testkit::sim::{SimConfig, SimReport, simulate};
use std::time::Instant;

/// Seeds run by a plain `cargo test`.
const CI_SEEDS: u64 = 500;

/// The configuration of `seed`, with the environment's switches.
fn config(seed: u64) -> SimConfig {
    let mut c = SimConfig::new(seed);
    c.race_api_with_sweeps = std::env::var("SKED_SIM_RACE_API").map_or(true, |v| v != "0");
    if let Some(n) = env_u64("SKED_SIM_TRACE_LINES") {
        c.trace_lines = n as usize;
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

/// Runs `seeds` on every core; reports in seed order.
fn run_seeds(seeds: Vec<u64>) -> Vec<SimReport> {
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
                            std::panic::catch_unwind(|| simulate(config(seed))).unwrap_or_else(|panic| {
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
    let started = Instant::now();
    let reports = run_seeds((first..first + count).collect());
    let secs = started.elapsed().as_secs_f64();
    let mut faults = FaultCounts::default();
    let (mut runs, mut attempts, mut fenced) = (0, 0, 0);
    for r in &reports {
        faults.merge(&r.faults);
        runs += r.runs;
        attempts += r.attempts;
        fenced += r.fenced_writes;
    }
    println!(
        "{count} seeds from {first} in {secs:.1} s ({:.1} seeds/s): {runs} runs, {attempts} attempts, {fenced} fenced writes",
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
        "{} of {count} seeds broke an invariant: {seeds:?}\nreplay one with SKED_SIM_SEED=<seed> cargo test -p sked-testkit --test sim",
        failed.len()
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
