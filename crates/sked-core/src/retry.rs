//! Retries: backoff delays and what a run does after an attempt ends.
//!
//! Jitter here is deterministic — derived from the run id and attempt number — so the same
//! run always waits the same time (replayable simulations) while different runs spread out.

use crate::duration::Dur;
use crate::job::{Backoff, JobSpec, OnTimeout};
use crate::ports::RunTransition;
use crate::run::{AttemptOutcome, Run, RunState};
use crate::timestamp::Timestamp;
use sha2::{Digest, Sha256};

/// A number in `[0, 1)` derived from `seed`: the same seed always gives the same number.
pub fn unit_fraction(seed: &str) -> f64 {
    let digest = Sha256::digest(seed.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

/// Delay before the retry that follows failed attempt number `attempt` (1-based):
/// `initial · factor^(attempt-1)`, capped at `max`, then spread by ±`jitter` using `seed`.
pub fn backoff_delay(backoff: &Backoff, attempt: u32, seed: &str) -> Dur {
    let exponent = attempt.saturating_sub(1).min(64) as i32;
    let raw_ms = backoff.initial.as_millis() as f64 * backoff.factor.max(1.0).powi(exponent);
    let capped_ms = raw_ms.min(backoff.max.as_millis() as f64);
    let spread = backoff.jitter.clamp(0.0, 1.0) * (2.0 * unit_fraction(seed) - 1.0);
    Dur::millis((capped_ms * (1.0 + spread)).max(0.0).round() as u64)
}

/// Start delay of a run from the job's `jitter`: a deterministic fraction of it per run.
pub fn start_jitter(jitter: Option<Dur>, run_seed: &str) -> Dur {
    match jitter {
        Some(j) if !j.is_zero() => Dur::millis((j.as_millis() as f64 * unit_fraction(run_seed)) as u64),
        _ => Dur::ZERO,
    }
}

/// What the run does after its latest attempt ended with `outcome` at `now`.
///
/// - succeeded → SUCCEEDED; cancelled → CANCELLED;
/// - failed or worker lost → retry after backoff while attempts are left, else FAILED;
/// - timed out → with `on_timeout: retry`, like a failure but ending TIMED_OUT; otherwise
///   TIMED_OUT at once (`run_job` triggers its handler job besides).
pub fn after_attempt(
    run: &Run,
    spec_backoff: &Backoff,
    on_timeout: &OnTimeout,
    outcome: AttemptOutcome,
    now: Timestamp,
) -> RunTransition {
    let attempts = run.attempt_count();
    let retry_or = |terminal: RunState| {
        if attempts < run.max_attempts {
            let delay = backoff_delay(spec_backoff, attempts, &format!("{}#{}", run.run_id, attempts));
            RunTransition::Retry {
                not_before: now + delay.to_chrono(),
            }
        } else {
            RunTransition::Finish(terminal)
        }
    };
    match outcome {
        AttemptOutcome::Succeeded => RunTransition::Finish(RunState::Succeeded),
        AttemptOutcome::Cancelled => RunTransition::Finish(RunState::Cancelled),
        AttemptOutcome::Failed | AttemptOutcome::WorkerLost => retry_or(RunState::Failed),
        AttemptOutcome::TimedOut => match on_timeout {
            OnTimeout::Retry => retry_or(RunState::TimedOut),
            OnTimeout::Fail | OnTimeout::RunJob(_) => RunTransition::Finish(RunState::TimedOut),
        },
    }
}

/// [`after_attempt`] with the job's policy.
pub fn after_attempt_for(run: &Run, spec: &JobSpec, outcome: AttemptOutcome, now: Timestamp) -> RunTransition {
    after_attempt(run, &spec.backoff, &spec.on_timeout, outcome, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{Attempt, Trigger};
    use crate::timestamp::parse;

    fn backoff(initial: u64, max: u64, factor: f64, jitter: f64) -> Backoff {
        Backoff {
            initial: Dur::secs(initial),
            max: Dur::secs(max),
            factor,
            jitter,
        }
    }

    fn run_with_attempts(n: u32, max_attempts: u32) -> Run {
        let t = parse("2026-12-01T00:00:00Z").unwrap();
        let mut run = Run::new_pending("t".into(), "j".into(), t, Trigger::Schedule, 5, t, max_attempts, t);
        for i in 1..=n {
            run.attempts.push(Attempt {
                attempt: i,
                worker: "w".into(),
                started_at: t,
                finished_at: Some(t),
                outcome: Some(AttemptOutcome::Failed),
                exit_code: Some(1),
                http_status: None,
                error: None,
                log_bytes: 0,
                log_truncated: false,
            });
        }
        run
    }

    #[test]
    fn backoff_grows_exponentially_and_caps() {
        let b = backoff(10, 60, 2.0, 0.0);
        let delays: Vec<_> = (1..=5).map(|n| backoff_delay(&b, n, "s").as_millis() / 1000).collect();
        assert_eq!(delays, vec![10, 20, 40, 60, 60]);
    }

    #[test]
    fn backoff_jitter_stays_within_spread_and_is_deterministic() {
        let b = backoff(10, 600, 2.0, 0.2);
        for seed in ["a", "b", "c", "d", "e", "f"] {
            let d = backoff_delay(&b, 1, seed).as_millis();
            assert!((8_000..=12_000).contains(&d), "{d}");
            assert_eq!(d, backoff_delay(&b, 1, seed).as_millis());
        }
        let spread: std::collections::BTreeSet<_> = (0..20).map(|i| backoff_delay(&b, 1, &i.to_string())).collect();
        assert!(spread.len() > 10, "jitter should spread runs apart");
    }

    #[test]
    fn start_jitter_is_below_the_jitter() {
        for i in 0..50 {
            let d = start_jitter(Some(Dur::secs(10)), &i.to_string());
            assert!(d < Dur::secs(10));
        }
        assert_eq!(start_jitter(None, "x"), Dur::ZERO);
    }

    #[test]
    fn failure_retries_while_attempts_left_then_fails() {
        let now = parse("2026-12-01T00:00:10Z").unwrap();
        let b = backoff(10, 600, 2.0, 0.0);
        let t = after_attempt(
            &run_with_attempts(1, 3),
            &b,
            &OnTimeout::Fail,
            AttemptOutcome::Failed,
            now,
        );
        assert_eq!(
            t,
            RunTransition::Retry {
                not_before: parse("2026-12-01T00:00:20Z").unwrap()
            }
        );
        let t = after_attempt(
            &run_with_attempts(2, 3),
            &b,
            &OnTimeout::Fail,
            AttemptOutcome::WorkerLost,
            now,
        );
        assert_eq!(
            t,
            RunTransition::Retry {
                not_before: parse("2026-12-01T00:00:30Z").unwrap()
            }
        );
        let t = after_attempt(
            &run_with_attempts(3, 3),
            &b,
            &OnTimeout::Fail,
            AttemptOutcome::Failed,
            now,
        );
        assert_eq!(t, RunTransition::Finish(RunState::Failed));
    }

    #[test]
    fn timeout_follows_on_timeout() {
        let now = parse("2026-12-01T00:00:00Z").unwrap();
        let b = Backoff::default();
        let run = run_with_attempts(1, 2);
        assert_eq!(
            after_attempt(&run, &b, &OnTimeout::Fail, AttemptOutcome::TimedOut, now),
            RunTransition::Finish(RunState::TimedOut)
        );
        assert!(matches!(
            after_attempt(&run, &b, &OnTimeout::Retry, AttemptOutcome::TimedOut, now),
            RunTransition::Retry { .. }
        ));
        assert_eq!(
            after_attempt(
                &run_with_attempts(2, 2),
                &b,
                &OnTimeout::Retry,
                AttemptOutcome::TimedOut,
                now
            ),
            RunTransition::Finish(RunState::TimedOut)
        );
        assert_eq!(
            after_attempt(&run, &b, &OnTimeout::RunJob("h".into()), AttemptOutcome::TimedOut, now),
            RunTransition::Finish(RunState::TimedOut)
        );
    }

    #[test]
    fn success_and_cancel_are_terminal_regardless_of_attempts_left() {
        let now = parse("2026-12-01T00:00:00Z").unwrap();
        let run = run_with_attempts(1, 5);
        let b = Backoff::default();
        assert_eq!(
            after_attempt(&run, &b, &OnTimeout::Fail, AttemptOutcome::Succeeded, now),
            RunTransition::Finish(RunState::Succeeded)
        );
        assert_eq!(
            after_attempt(&run, &b, &OnTimeout::Fail, AttemptOutcome::Cancelled, now),
            RunTransition::Finish(RunState::Cancelled)
        );
    }
}
