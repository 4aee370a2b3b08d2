//! Job definitions: arbitrary bytes decoded as JSON into `sked_core::JobSpec` the way the API
//! does (bytes → `serde_json::Value` → `JobSpec`), then `sked_core::validate::validate_spec` at
//! a fixed `now`, and for a spec it accepts, what submitting and firing it does with it.
//!
//! Checks, besides "no panic":
//! - every problem validation reports names a field and says something;
//! - a valid spec stays valid once normalised (defaults filled in, as stored);
//! - a normalised valid spec survives its JSON form (what stores keep and the API echoes):
//!   encoding and decoding gives an equal spec, and the same JSON again;
//! - its first fire time (`first_fire`) is what `preview` starts with; `preview` is strictly
//!   increasing and inside the `start_at`/`end_at` window; an `at` job fires at its instant;
//!   a job with no `end_at` has a first fire time (validation accepts no job that never fires);
//! - a firing plan (`firing::plan`) at its first fire time has runs named after their
//!   occurrence (the run id gives back job and time), none due after the horizon, each
//!   starting no earlier than its occurrence and less than the job's jitter after it;
//! - backoff delays between retries (`retry::backoff_delay`) follow the documented
//!   `min(initial · factor^(n-1), max)`, spread by at most ±`jitter`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::retry::backoff_delay;
use sked_core::schedule::next::first_fire;
use sked_core::schedule::{Schedule, preview};
use sked_core::validate::validate_spec;
use sked_core::{Job, JobSpec, JobState, firing, timestamp};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(spec) = serde_json::from_value::<JobSpec>(value) else {
        return;
    };
    let now = timestamp::parse("2026-06-01T12:00:00Z").unwrap();
    let problems = validate_spec(&spec, now);
    for p in &problems {
        assert!(
            !p.field.is_empty() && !p.message.is_empty(),
            "{p:?} names no field or says nothing"
        );
    }
    if !problems.is_empty() {
        return;
    }

    let spec = spec.normalised(now);
    let problems = validate_spec(&spec, now);
    assert!(
        problems.is_empty(),
        "valid, but not once normalised: {problems:?}\n{spec:?}"
    );
    let json = serde_json::to_string(&spec).unwrap();
    let back: JobSpec = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json} does not decode: {e}"));
    assert_eq!(back, spec, "the JSON form decodes to another spec: {json}");
    assert_eq!(
        serde_json::to_string(&back).unwrap(),
        json,
        "the JSON form is not stable"
    );

    let window = spec.window();
    let first = first_fire(&spec.schedule, &spec.dst, &window, now);
    let series = preview(&spec.schedule, &spec.dst, &window, now, 3);
    assert_eq!(series.first().copied(), first, "preview does not start with first_fire");
    assert!(
        series.windows(2).all(|w| w[0] < w[1]),
        "preview goes backwards: {series:?}"
    );
    assert!(
        series.iter().all(|t| window.contains(*t)),
        "preview leaves {window:?}: {series:?}"
    );
    if let Schedule::At(at) = spec.schedule {
        assert_eq!(first, Some(at), "an `at` job fires at its instant");
    }

    if spec.end_at.is_none() {
        assert!(first.is_some(), "valid, with no end_at, but never fires: {json}");
    }

    let b = &spec.backoff;
    for attempt in 1..=spec.max_attempts().min(20) {
        // The documented formula, in u128 milliseconds (`Dur::as_millis` is an i64).
        let delay = backoff_delay(b, attempt, "fuzz#1").0.as_millis() as f64;
        let raw = b.initial.0.as_millis() as f64 * b.factor.powi(attempt as i32 - 1);
        let capped = raw.min(b.max.0.as_millis() as f64);
        let (least, most) = (capped * (1.0 - b.jitter), capped * (1.0 + b.jitter));
        assert!(
            delay + 1.0 >= least * (1.0 - 1e-9) && delay <= most * (1.0 + 1e-9) + 1.0,
            "retry {attempt} waits {delay} ms, not within {least}..={most} ms: {json}"
        );
    }

    let Some(first) = first else {
        return;
    };
    let id = JobId::from("fuzz");
    let job = Job {
        tenant: TenantId::default(),
        id: id.clone(),
        spec,
        state: JobState::Active,
        next_fire_at: Some(first),
        version: 1,
        created_at: now,
        updated_at: now,
    };
    let lookahead = Dur::secs(1);
    let plan = firing::plan(&job, &[], first, lookahead).expect("a job is due at its first fire time");
    let jitter_ms = job.spec.jitter.unwrap_or(Dur::ZERO).0.as_millis();
    for run in &plan.firing.runs {
        let t = run.scheduled_for;
        assert!(t <= first + lookahead.to_chrono(), "{t} fired, past the horizon");
        assert_eq!(run.run_id, RunId::derive(&id, t));
        assert_eq!(
            run.run_id.parts(),
            Some((id.clone(), t)),
            "run id {} does not read back",
            run.run_id
        );
        assert!(run.not_before >= t, "run {} may start before its time", run.run_id);
        let delay_ms = (run.not_before - t).num_milliseconds() as u128;
        assert!(
            jitter_ms == 0 || delay_ms < jitter_ms,
            "run {} starts {delay_ms} ms after its time, jitter {jitter_ms} ms",
            run.run_id
        );
    }
});
