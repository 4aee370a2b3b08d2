//! Fixtures for the contract suites: a fixed start instant, jobs and runs with
//! millisecond-exact timestamps, attempt results, and the firings, claim batches and
//! completions the cases write.
//!
//! Everything here is deterministic so a failing case reads the same on every adapter.

use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::{Job, JobSpec, JobState};
use sked_core::ports::queue::Dispatch;
use sked_core::ports::store::{AttemptResult, ClaimBatch, Completion, Firing, RunTransition};
use sked_core::run::{AttemptOutcome, Run, Trigger};
use sked_core::timestamp::{Timestamp, parse};

/// The instant every case starts from: 2026-03-01T00:00:00.000Z.
pub fn t0() -> Timestamp {
    parse("2026-03-01T00:00:00Z").unwrap_or_default()
}

/// `t0() + secs` seconds.
pub fn at(secs: i64) -> Timestamp {
    t0() + chrono::Duration::seconds(secs)
}

/// `t0() + ms` milliseconds.
pub fn at_ms(ms: i64) -> Timestamp {
    t0() + chrono::Duration::milliseconds(ms)
}

/// A tenant id.
pub fn tenant(name: &str) -> TenantId {
    TenantId::from(name)
}

/// A worker id.
pub fn worker(name: &str) -> WorkerId {
    WorkerId::from(name)
}

/// A job spec firing every second, labelled `team=core`, running `ok`: a run the suites write
/// at a whole second is one of its occurrences (a claim reading the job holds a run of the
/// schedule at a time its timing does not have: `sked_core::lifecycle::retimed_away`).
pub fn spec(name: &str) -> JobSpec {
    let spec: JobSpec = serde_json::from_value(serde_json::json!({
        "name": name,
        "labels": {"team": "core"},
        "schedule": {"every": "1s", "anchor": "2026-03-01T00:00:00.000Z"},
        "task": {"command": {"argv": ["ok"]}},
    }))
    .expect("fixture spec parses");
    spec.normalised(t0())
}

/// An ACTIVE job of `tenant`, version 1, next firing at `at(60)`.
pub fn job(tenant_name: &str, id: &str) -> Job {
    Job {
        tenant: tenant(tenant_name),
        id: JobId::from(id),
        spec: spec(id),
        state: JobState::Active,
        next_fire_at: Some(at(60)),
        version: 1,
        created_at: t0(),
        updated_at: t0(),
    }
}

/// An ACTIVE one-shot of `tenant` at `at(secs)`, version 1, due then, with a start jitter
/// (so a store that rebuilds its run must rebuild the jittered `not_before` too).
pub fn one_shot(tenant_name: &str, id: &str, secs: i64) -> Job {
    let spec: JobSpec = serde_json::from_value(serde_json::json!({
        "name": id,
        "schedule": {"at": sked_core::timestamp::format(&at(secs))},
        "task": {"command": {"argv": ["ok"]}},
        "jitter": "5s",
    }))
    .expect("fixture spec parses");
    Job {
        spec: spec.normalised(t0()),
        next_fire_at: Some(at(secs)),
        ..job(tenant_name, id)
    }
}

/// The firing a sweep at `at(secs)` plans for `j` (ten minutes of look-ahead), as
/// [`sked_core::firing::plan`] makes it.
pub fn planned_firing(j: &Job, secs: i64) -> Firing {
    sked_core::firing::plan(j, &[], at(secs), sked_core::duration::Dur::secs(600))
        .expect("the job is due within the look-ahead")
        .firing
}

/// `job` with labels replaced by `labels`.
pub fn job_with_labels(tenant_name: &str, id: &str, labels: &[(&str, &str)]) -> Job {
    let mut j = job(tenant_name, id);
    j.spec.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    j
}

/// A PENDING scheduled run of `job_id` at `at(secs)`: priority 5, ready at once, 3 attempts.
pub fn run(tenant_name: &str, job_id: &str, secs: i64) -> Run {
    Run::new_pending(
        tenant(tenant_name),
        JobId::from(job_id),
        at(secs),
        Trigger::Schedule,
        5,
        at(secs),
        3,
        at(secs),
    )
}

/// An attempt result with `outcome` at `finished_at` and nothing else of note.
pub fn result(outcome: AttemptOutcome, finished_at: Timestamp) -> AttemptResult {
    AttemptResult {
        finished_at,
        outcome,
        exit_code: None,
        http_status: None,
        error: None,
        log_bytes: 0,
        log_truncated: false,
    }
}

/// A sweep's firing of `j` as read: `runs` inserted, `next_fire_at` moved to `next`, the job
/// left ACTIVE, nothing cancelled.
pub fn firing(j: &Job, runs: Vec<Run>, next: Option<Timestamp>) -> Firing {
    Firing {
        tenant: j.tenant.clone(),
        job_id: j.id.clone(),
        expected_version: j.version,
        expected_next_fire_at: j.next_fire_at,
        next_fire_at: next,
        state: JobState::Active,
        runs,
        cancel: vec![],
        skipped: vec![],
        at: j.next_fire_at.unwrap_or(j.updated_at),
    }
}

/// A batch claiming `runs` for worker `w` at `now`, each lease until `lease_until`: no job
/// read, nothing held, not alone (what `JobStoreExt::claim_one` makes of one run).
pub fn claims(runs: Vec<(TenantId, RunId)>, w: &str, now: Timestamp, lease_until: Timestamp) -> ClaimBatch {
    ClaimBatch {
        runs,
        worker: worker(w),
        owners: Vec::new(),
        now,
        lease_until,
        read_jobs: false,
        hold: Vec::new(),
        alone: false,
    }
}

/// The (tenant, run id) of each run, as a claim batch names them.
pub fn run_keys(runs: &[&Run]) -> Vec<(TenantId, RunId)> {
    runs.iter().map(|r| (r.tenant.clone(), r.run_id.clone())).collect()
}

/// The worker's completion of `run`'s attempt holding `token` (no expiry condition: set
/// `only_if_expired_by` for the reaper's form).
pub fn completion(run: &Run, token: u64, result: &AttemptResult, next: RunTransition) -> Completion {
    Completion {
        tenant: run.tenant.clone(),
        run_id: run.run_id.clone(),
        token,
        result: result.clone(),
        next,
        only_if_expired_by: None,
    }
}

/// A dispatch of tenant `t1`'s run of `job_id` at [`t0`], with `priority`, ready at `not_before`.
pub fn dispatch(job_id: &str, priority: u8, not_before: Timestamp) -> Dispatch {
    Dispatch {
        tenant: tenant("t1"),
        run_id: RunId::derive(&JobId::from(job_id), t0()),
        priority,
        not_before,
    }
}
