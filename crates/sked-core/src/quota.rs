//! Per-tenant limits: what a quota holds, which values are valid, what counts against each
//! limit, and the submit-rate rule (GCRA).
//!
//! - `max_active_jobs`: jobs in state ACTIVE or PAUSED (a paused job can resume at any time,
//!   so it keeps its place; COMPLETED and DELETED jobs do not count). A create, or a replace
//!   that brings a COMPLETED job back, beyond it is refused; the store decides it in the
//!   write's transaction.
//! - `max_concurrent_runs`: runs RUNNING under a lease live at the claim's `now`
//!   ([`occupies_slot`]). A claim beyond it starts nothing and answers
//!   [`ClaimOutcome::AtCapacity`](crate::ports::ClaimOutcome); the store decides it in the
//!   claim's transaction, so workers claiming at once cannot pass it together.
//! - `submit_rate`: job creations and manual triggers per second, with a burst, decided by
//!   [`admit`] on the API process ([`crate::service::quotas`]).
//!
//! An absent limit is no limit; a quota of `{}` limits nothing.

use crate::duration::Dur;
use crate::error::FieldError;
use crate::job::JobState;
use crate::run::{Run, RunState};
use crate::timestamp::Timestamp;
use serde::{Deserialize, Serialize};

/// Largest value any count limit may take.
pub const MAX_LIMIT: u64 = 1_000_000_000;
/// Largest `submit_rate.per_second` and `submit_rate.burst`.
pub const MAX_RATE: f64 = 1_000_000.0;

/// One tenant's limits; an absent (or `null`) limit is none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Quota {
    /// Most jobs ACTIVE or PAUSED at once.
    #[serde(default, deserialize_with = "crate::integer::whole_opt")]
    #[cfg_attr(feature = "utoipa", schema(minimum = 0, maximum = 1_000_000_000))]
    pub max_active_jobs: Option<u64>,
    /// Most runs RUNNING at once, across every worker.
    #[serde(default, deserialize_with = "crate::integer::whole_opt")]
    #[cfg_attr(feature = "utoipa", schema(minimum = 0, maximum = 1_000_000_000))]
    pub max_concurrent_runs: Option<u64>,
    /// Most submissions (jobs created, runs triggered) per second.
    #[serde(default)]
    pub submit_rate: Option<SubmitRate>,
}

/// A rate with a burst: `burst` submissions at once, then `per_second` on average.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SubmitRate {
    /// Sustained submissions per second (fractions allowed: 0.5 is one every 2 s).
    #[cfg_attr(feature = "utoipa", schema(minimum = 0.001, maximum = 1_000_000.0))]
    pub per_second: f64,
    /// Submissions allowed at once after a quiet spell.
    #[serde(deserialize_with = "crate::integer::whole")]
    #[cfg_attr(feature = "utoipa", schema(minimum = 1, maximum = 1_000_000))]
    pub burst: u32,
}

impl Quota {
    /// Every invalid field, named as in the request body.
    pub fn problems(&self) -> Vec<FieldError> {
        let mut out = Vec::new();
        for (field, value) in [
            ("max_active_jobs", self.max_active_jobs),
            ("max_concurrent_runs", self.max_concurrent_runs),
        ] {
            if value.is_some_and(|v| v > MAX_LIMIT) {
                out.push(FieldError::new(field, format!("must be 0 to {MAX_LIMIT}")));
            }
        }
        if let Some(rate) = &self.submit_rate {
            if !(rate.per_second.is_finite() && rate.per_second >= 0.001 && rate.per_second <= MAX_RATE) {
                out.push(FieldError::new(
                    "submit_rate.per_second",
                    format!("must be 0.001 to {MAX_RATE}"),
                ));
            }
            if rate.burst == 0 || f64::from(rate.burst) > MAX_RATE {
                out.push(FieldError::new("submit_rate.burst", format!("must be 1 to {MAX_RATE}")));
            }
        }
        out
    }
}

/// Whether a job in `state` counts against `max_active_jobs`.
pub fn counts_as_active(state: JobState) -> bool {
    matches!(state, JobState::Active | JobState::Paused)
}

/// Whether `run` holds one of its tenant's `max_concurrent_runs` slots at `now`: RUNNING
/// under a lease that has not expired (a run whose lease expired has had its payload stopped
/// by its worker, and its next claim takes a slot again).
pub fn occupies_slot(run: &Run, now: Timestamp) -> bool {
    run.state == RunState::Running && !run.lease_expired(now)
}

/// The refusal of a write that takes the tenant from `before` to `after` jobs counting
/// against `max_active_jobs`, if it goes past the limit. A write that adds none is never
/// refused, even when a lowered limit is already passed.
pub fn active_jobs_refusal(quota: &Quota, tenant: &crate::ids::TenantId, before: u64, after: u64) -> Option<String> {
    let max = quota.max_active_jobs?;
    (after > before && after > max)
        .then(|| format!("tenant {tenant} may have at most {max} active jobs (ACTIVE or PAUSED); it has {before}"))
}

/// Whether no new attempt may start while `occupied` runs of the tenant hold a slot.
pub fn at_capacity(quota: &Quota, occupied: u64) -> bool {
    quota.max_concurrent_runs.is_some_and(|max| occupied >= max)
}

/// What [`admit`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Admitted; keep this as the tenant's new theoretical arrival time.
    Admit(Timestamp),
    /// Refused; the same request is admitted after this long.
    RetryAfter(Dur),
    /// Refused for good: `n` is more than the burst allows at once.
    TooMany,
}

/// The generic cell rate algorithm for `n` submissions at `now`, given the tenant's
/// theoretical arrival time `tat` (`None` before its first): each submission moves `tat` on
/// by one emission interval (1 / `per_second`), and a request is admitted while `tat` stays
/// within `burst` intervals of `now`. One instant per tenant is the whole state.
pub fn admit(rate: &SubmitRate, tat: Option<Timestamp>, now: Timestamp, n: u32) -> Admission {
    if n > rate.burst {
        return Admission::TooMany;
    }
    let interval_us = 1e6 / rate.per_second;
    let span = |k: u32| chrono::Duration::microseconds((interval_us * f64::from(k)).ceil() as i64);
    let start = tat.map_or(now, |t| t.max(now));
    let new_tat = start + span(n);
    let limit = now + span(rate.burst);
    if new_tat <= limit {
        Admission::Admit(new_tat)
    } else {
        let wait = (new_tat - limit).num_milliseconds().max(1) as u64;
        Admission::RetryAfter(Dur::millis(wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at_ms(ms: i64) -> Timestamp {
        chrono::Utc.timestamp_millis_opt(1_800_000_000_000 + ms).unwrap()
    }

    fn rate(per_second: f64, burst: u32) -> SubmitRate {
        SubmitRate { per_second, burst }
    }

    /// Admits `n` one at a time at `now`, carrying the bucket; how many went through.
    fn admitted(r: &SubmitRate, tat: &mut Option<Timestamp>, now: Timestamp, n: u32) -> u32 {
        (0..n)
            .filter(|_| match admit(r, *tat, now, 1) {
                Admission::Admit(t) => {
                    *tat = Some(t);
                    true
                }
                _ => false,
            })
            .count() as u32
    }

    #[test]
    fn a_burst_passes_at_once_then_the_rate_holds() {
        let r = rate(10.0, 5);
        let mut tat = None;
        assert_eq!(admitted(&r, &mut tat, at_ms(0), 8), 5, "the burst, then refusals");
        assert_eq!(admitted(&r, &mut tat, at_ms(100), 3), 1, "one more per 100 ms");
        assert_eq!(
            admitted(&r, &mut tat, at_ms(1_000), 20),
            5,
            "a quiet second refills the burst, no more"
        );
    }

    #[test]
    fn a_refusal_says_when_the_same_request_passes() {
        let r = rate(2.0, 2);
        let mut tat = None;
        assert_eq!(admitted(&r, &mut tat, at_ms(0), 2), 2);
        let Admission::RetryAfter(wait) = admit(&r, tat, at_ms(0), 1) else {
            panic!("the third at once is refused")
        };
        assert_eq!(wait, Dur::millis(500));
        assert!(matches!(admit(&r, tat, at_ms(499), 1), Admission::RetryAfter(_)));
        assert!(matches!(admit(&r, tat, at_ms(500), 1), Admission::Admit(_)));
    }

    #[test]
    fn a_batch_takes_one_token_per_job_and_one_larger_than_the_burst_never_passes() {
        let r = rate(1.0, 10);
        assert!(matches!(admit(&r, None, at_ms(0), 10), Admission::Admit(_)));
        assert_eq!(admit(&r, None, at_ms(0), 11), Admission::TooMany);
    }

    #[test]
    fn fractional_rates_space_submissions_out() {
        let r = rate(0.5, 1);
        let mut tat = None;
        assert_eq!(admitted(&r, &mut tat, at_ms(0), 3), 1);
        assert_eq!(admitted(&r, &mut tat, at_ms(1_999), 1), 0);
        assert_eq!(admitted(&r, &mut tat, at_ms(2_000), 1), 1);
    }

    #[test]
    fn invalid_limits_are_named() {
        let q = Quota {
            max_active_jobs: Some(MAX_LIMIT + 1),
            max_concurrent_runs: Some(3),
            submit_rate: Some(rate(f64::NAN, 0)),
        };
        let fields: Vec<String> = q.problems().into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            ["max_active_jobs", "submit_rate.per_second", "submit_rate.burst"]
        );
        assert!(Quota::default().problems().is_empty());
    }
}
