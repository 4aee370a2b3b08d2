//! Benchmark jobs and their creation through the core's batch path (`Sked::create_jobs`,
//! what `POST /v1/jobs:batch` calls).

use crate::engine::tenant;
use sked_core::schedule::Schedule;
use sked_core::service::Sked;
use sked_core::service::jobs::{MAX_BATCH, NewJob};
use sked_core::{JobId, JobSpec, TenantId, Timestamp};
use std::time::{Duration, Instant};

/// A job spec running `argv`; its schedule is replaced per job.
pub fn template(argv: &[&str]) -> JobSpec {
    serde_json::from_value(serde_json::json!({
        "schedule": {"at": "2099-01-01T00:00:00Z"},
        "task": {"command": {"argv": argv}},
    }))
    .expect("the benchmark template is a valid job spec")
}

/// `template` firing once at `at`, with id `prefix-<i>`.
pub fn one_shot(template: &JobSpec, prefix: &str, i: usize, at: Timestamp) -> NewJob {
    let mut spec = template.clone();
    spec.schedule = Schedule::At(at);
    NewJob {
        id: Some(JobId(format!("{prefix}-{i}"))),
        spec,
    }
}

/// `template` on a 6-field cron expression (UTC), with id `prefix-<i>`.
pub fn cron(template: &JobSpec, prefix: &str, i: usize, expr: String) -> NewJob {
    let mut spec = template.clone();
    spec.schedule = Schedule::Cron {
        expr,
        timezone: "UTC".into(),
    };
    NewJob {
        id: Some(JobId(format!("{prefix}-{i}"))),
        spec,
    }
}

/// Creates `n` jobs made by `make(i)` in batches of [`MAX_BATCH`]; returns the time spent in
/// `create_jobs` calls only (building the specs is not counted).
pub async fn create(sked: &Sked, n: usize, make: impl FnMut(usize) -> NewJob) -> anyhow::Result<Duration> {
    create_for(sked, &tenant(), n, make).await
}

/// [`create`] in `tenant`.
pub async fn create_for(
    sked: &Sked,
    tenant: &TenantId,
    n: usize,
    mut make: impl FnMut(usize) -> NewJob,
) -> anyhow::Result<Duration> {
    let mut spent = Duration::ZERO;
    let mut i = 0;
    while i < n {
        let end = (i + MAX_BATCH).min(n);
        let batch: Vec<NewJob> = (i..end).map(&mut make).collect();
        let started = Instant::now();
        sked.create_jobs(tenant, batch, None).await?;
        spent += started.elapsed();
        i = end;
    }
    Ok(spent)
}

/// The first whole second at least `ahead` from now.
pub fn whole_second_after(ahead: Duration) -> Timestamp {
    let ms = chrono::Utc::now().timestamp_millis() + ahead.as_millis() as i64;
    sked_core::timestamp::from_ms((ms / 1000 + 1) * 1000)
}
