//! The dependency contract: what every [`JobStore`] decides for jobs with an `after`
//! schedule ([`sked_core::dependency`]) in the transaction that ends an upstream run — the
//! downstream run at the upstream's nominal time, the skip, the cascade, the wait and its
//! expiry — one `pub async fn` per case; run them all with
//! [`dependency_contract!`](crate::dependency_contract). Cases run on several threads, so
//! racing ends of a fan-in really run at once.

use super::fixtures::{at, completion, job, result, run, tenant, worker};
use sked_core::dependency::{UPSTREAM_FAILED, UPSTREAM_TIMEOUT};
use sked_core::ids::{JobId, RunId};
pub use sked_core::ports::JobStore;
use sked_core::ports::store::{ClaimOutcome, Ended, JobStoreExt, RunTransition};
use sked_core::run::{AttemptOutcome, Run, RunState, Trigger};
use sked_core::timestamp::Timestamp;
use sked_core::{Job, JobState};
use std::sync::Arc;

/// A job of tenant `t1` that runs after `upstreams` as `after_json` adds (`on`, `within`).
fn after_job(id: &str, upstreams: &[&str], extra: serde_json::Value) -> Job {
    let mut after = serde_json::json!({"jobs": upstreams});
    if let (Some(a), Some(e)) = (after.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    let mut j = job("t1", id);
    j.spec.schedule = serde_json::from_value(serde_json::json!({"after": after})).expect("after schedule");
    j.next_fire_at = None;
    j
}

/// Creates the jobs: every upstream (an `every` job) and the `after` ones given.
async fn create(store: &Arc<dyn JobStore>, upstreams: &[&str], downstream: Vec<Job>) {
    let mut jobs: Vec<Job> = upstreams.iter().map(|id| job("t1", id)).collect();
    jobs.extend(downstream);
    store.create_jobs(&jobs, None).await.unwrap();
}

/// Inserts and claims the run of `job_id` at `at(secs)`: its fencing token.
async fn started(store: &Arc<dyn JobStore>, job_id: &str, secs: i64) -> (Run, u64) {
    let r = run("t1", job_id, secs);
    assert!(store.insert_run(&r).await.unwrap());
    match store
        .claim_one(&r.tenant, &r.run_id, &worker("w"), at(secs), at(secs + 600))
        .await
        .unwrap()
    {
        ClaimOutcome::Claimed { token, .. } => (r, token),
        other => panic!("claim of {} answered {other:?}", r.run_id),
    }
}

/// Ends the claimed run as `state` at `end`.
async fn end(store: &Arc<dyn JobStore>, (r, token): &(Run, u64), state: RunState, end: Timestamp) -> Ended {
    let outcome = match state {
        RunState::Succeeded => AttemptOutcome::Succeeded,
        RunState::TimedOut => AttemptOutcome::TimedOut,
        _ => AttemptOutcome::Failed,
    };
    store
        .complete(&completion(
            r,
            *token,
            &result(outcome, end),
            RunTransition::Finish(state),
        ))
        .await
        .unwrap()
}

/// The run of `job_id` at `at(secs)`, if stored.
async fn run_of(store: &Arc<dyn JobStore>, job_id: &str, secs: i64) -> Option<Run> {
    let id = RunId::derive(&JobId::from(job_id), at(secs));
    store.get_run(&tenant("t1"), &id).await.unwrap()
}

/// (job, state, reason) of each released run, in job order.
fn summary(released: &[Run]) -> Vec<(String, RunState, Option<String>)> {
    let mut out: Vec<_> = released
        .iter()
        .map(|r| (r.job_id.to_string(), r.state, r.reason.clone()))
        .collect();
    out.sort_by(|a, b| (&a.0, a.1.as_str(), &a.2).cmp(&(&b.0, b.1.as_str(), &b.2)));
    out
}

/// The end of an upstream run writes, in its transaction, the downstream's run at the same
/// nominal time: PENDING, trigger `after`, with the downstream's priority; a job with no
/// `after` naming it releases nothing; `dependents` names the downstream.
pub async fn an_ended_run_releases_its_downstream_at_its_nominal_time(store: Arc<dyn JobStore>) {
    let mut b = after_job("b", &["a"], serde_json::json!({}));
    b.spec.priority = 8;
    create(&store, &["a", "lonely"], vec![b]).await;
    assert_eq!(
        store.dependents(&tenant("t1"), &"a".into()).await.unwrap(),
        [JobId::from("b")]
    );
    assert!(store.dependents(&tenant("t1"), &"b".into()).await.unwrap().is_empty());

    let a = started(&store, "a", 30).await;
    let ended = end(&store, &a, RunState::Succeeded, at(40)).await;
    assert_eq!(ended.run.state, RunState::Succeeded);
    assert_eq!(summary(&ended.released), [("b".to_string(), RunState::Pending, None)]);
    let b_run = run_of(&store, "b", 30).await.expect("b's run at a's nominal time");
    assert_eq!(ended.released[0], b_run, "answered as stored");
    assert_eq!(
        (b_run.trigger, b_run.priority, b_run.not_before, b_run.created_at),
        (Trigger::After, 8, at(40), at(40))
    );

    let lonely = started(&store, "lonely", 30).await;
    assert!(
        end(&store, &lonely, RunState::Succeeded, at(41))
            .await
            .released
            .is_empty()
    );
}

/// A fan-in runs once every upstream's run at the time has ended as asked, whichever ends
/// last; an upstream with no run at that time keeps it waiting.
pub async fn a_fan_in_runs_once_every_upstream_ended(store: Arc<dyn JobStore>) {
    create(
        &store,
        &["a", "b"],
        vec![after_job("c", &["a", "b"], serde_json::json!({}))],
    )
    .await;
    let (a, b) = (started(&store, "a", 0).await, started(&store, "b", 0).await);
    assert!(end(&store, &b, RunState::Succeeded, at(5)).await.released.is_empty());
    assert!(run_of(&store, "c", 0).await.is_none(), "waits for a");
    let ended = end(&store, &a, RunState::Succeeded, at(7)).await;
    assert_eq!(summary(&ended.released), [("c".to_string(), RunState::Pending, None)]);

    // At 60 only a runs: c waits for b's run at 60, which never comes.
    let a60 = started(&store, "a", 60).await;
    assert!(end(&store, &a60, RunState::Succeeded, at(65)).await.released.is_empty());
    assert!(run_of(&store, "c", 60).await.is_none());
}

/// An upstream that ends otherwise than `on` asks skips the occurrence at once (a SKIPPED run,
/// reason `upstream_failed`), and the skip goes down the chain: a job after the skipped one
/// runs only if it accepts any end. `on: failure` runs after a failure; a cancelled PENDING
/// upstream releases too, answered by `cancel_run`.
pub async fn an_upstream_that_ends_otherwise_skips_and_the_skip_goes_down_the_chain(store: Arc<dyn JobStore>) {
    create(
        &store,
        &["a"],
        vec![
            after_job("b", &["a"], serde_json::json!({})),
            after_job("c", &["b"], serde_json::json!({"on": "any"})),
            after_job("d", &["b"], serde_json::json!({"on": "success"})),
            after_job("e", &["a"], serde_json::json!({"on": "failure"})),
        ],
    )
    .await;
    let a = started(&store, "a", 0).await;
    let ended = end(&store, &a, RunState::Failed, at(3)).await;
    let failed = Some(UPSTREAM_FAILED.to_string());
    assert_eq!(
        summary(&ended.released),
        [
            ("b".to_string(), RunState::Skipped, failed.clone()),
            ("c".to_string(), RunState::Pending, None),
            ("d".to_string(), RunState::Skipped, failed.clone()),
            ("e".to_string(), RunState::Pending, None),
        ]
    );
    assert_eq!(run_of(&store, "b", 0).await.map(|r| r.state), Some(RunState::Skipped));

    // A PENDING upstream cancelled: `on: any` runs, `success` skips.
    let a60 = run("t1", "a", 60);
    assert!(store.insert_run(&a60).await.unwrap());
    let cancelled = store
        .cancel_run(&a60.tenant, &a60.run_id, at(61), "user")
        .await
        .unwrap();
    assert_eq!(cancelled.run.state, RunState::Cancelled);
    assert_eq!(
        summary(&cancelled.released),
        [
            ("b".to_string(), RunState::Skipped, failed.clone()),
            ("c".to_string(), RunState::Pending, None),
            ("d".to_string(), RunState::Skipped, failed.clone()),
            ("e".to_string(), RunState::Skipped, failed),
        ]
    );
}

/// With `within`, an occurrence still waiting for upstreams is recorded as a wait with its
/// deadline (the first upstream's end + within); once past it, `expired_waits` lists it and
/// `expire_wait` gives the occurrence up (SKIPPED, `upstream_timeout`) and removes the wait; an
/// upstream ending later changes nothing. A last upstream that ends after the deadline, before
/// any expiry, gives it up itself.
pub async fn within_gives_up_an_occurrence_that_waits_too_long(store: Arc<dyn JobStore>) {
    create(
        &store,
        &["a", "b"],
        vec![after_job("c", &["a", "b"], serde_json::json!({"within": "10s"}))],
    )
    .await;
    let (a, b) = (started(&store, "a", 0).await, started(&store, "b", 0).await);
    assert!(end(&store, &a, RunState::Succeeded, at(5)).await.released.is_empty());
    assert!(
        store.expired_waits(at(15), 10).await.unwrap().is_empty(),
        "not before its deadline"
    );
    let waits = store.expired_waits(at(16), 10).await.unwrap();
    assert_eq!(waits.len(), 1, "{waits:?}");
    let wait = &waits[0];
    assert_eq!(
        (wait.job_id.as_str(), wait.scheduled_for, wait.deadline),
        ("c", at(0), at(15))
    );
    let released = store.expire_wait(wait, at(16)).await.unwrap();
    assert_eq!(
        summary(&released),
        [("c".to_string(), RunState::Skipped, Some(UPSTREAM_TIMEOUT.to_string()))]
    );
    assert!(
        store.expired_waits(at(16), 10).await.unwrap().is_empty(),
        "the wait is gone"
    );
    assert!(end(&store, &b, RunState::Succeeded, at(20)).await.released.is_empty());
    assert_eq!(run_of(&store, "c", 0).await.map(|r| r.state), Some(RunState::Skipped));

    // The last upstream ends late, before any expiry: it gives the occurrence up itself.
    let (a, b) = (started(&store, "a", 60).await, started(&store, "b", 60).await);
    assert!(end(&store, &a, RunState::Succeeded, at(61)).await.released.is_empty());
    let ended = end(&store, &b, RunState::Succeeded, at(72)).await;
    assert_eq!(
        summary(&ended.released),
        [("c".to_string(), RunState::Skipped, Some(UPSTREAM_TIMEOUT.to_string()))]
    );
    assert!(
        store.expired_waits(at(100), 10).await.unwrap().is_empty(),
        "its wait went with it"
    );

    // In time: the run, and no wait left behind.
    let (a, b) = (started(&store, "a", 120).await, started(&store, "b", 120).await);
    assert!(end(&store, &a, RunState::Succeeded, at(121)).await.released.is_empty());
    let ended = end(&store, &b, RunState::Succeeded, at(125)).await;
    assert_eq!(summary(&ended.released), [("c".to_string(), RunState::Pending, None)]);
    assert!(store.expired_waits(at(200), 10).await.unwrap().is_empty());
}

/// A downstream paused when its occurrence would run skips it (`paused`); one changed to
/// another schedule, or DELETED, is released no more and is no longer a dependent.
pub async fn a_paused_changed_or_deleted_downstream_is_not_run(store: Arc<dyn JobStore>) {
    create(
        &store,
        &["a"],
        vec![
            after_job("b", &["a"], serde_json::json!({})),
            after_job("c", &["a"], serde_json::json!({})),
            after_job("d", &["a"], serde_json::json!({})),
        ],
    )
    .await;
    let update = async |id: &str, change: &dyn Fn(&mut Job)| {
        let current = store.get_job(&tenant("t1"), &id.into()).await.unwrap().unwrap();
        let mut next = current.clone();
        change(&mut next);
        next.version += 1;
        store
            .update_job(&next, current.version, current.next_fire_at)
            .await
            .unwrap();
    };
    update("b", &|j| j.state = JobState::Paused).await;
    update("c", &|j| j.spec.schedule = job("t1", "x").spec.schedule).await;
    update("d", &|j| j.state = JobState::Deleted).await;
    assert_eq!(
        store.dependents(&tenant("t1"), &"a".into()).await.unwrap(),
        [JobId::from("b")]
    );
    let a = started(&store, "a", 0).await;
    let ended = end(&store, &a, RunState::Succeeded, at(1)).await;
    assert_eq!(
        summary(&ended.released),
        [("b".to_string(), RunState::Skipped, Some("paused".to_string()))]
    );
}

/// The two upstreams of a fan-in ending at the same moment (from tasks racing each other),
/// occurrence after occurrence, release exactly one downstream run for each: never none (each
/// saw the other still running) and never two.
pub async fn racing_ends_of_a_fan_in_release_exactly_one_run(store: Arc<dyn JobStore>) {
    const OCCURRENCES: i64 = 12;
    create(
        &store,
        &["a", "b"],
        vec![after_job("c", &["a", "b"], serde_json::json!({}))],
    )
    .await;
    let mut claimed = Vec::new();
    for i in 0..OCCURRENCES {
        claimed.push((started(&store, "a", i * 60).await, started(&store, "b", i * 60).await));
    }
    let mut racers = tokio::task::JoinSet::new();
    for (a, b) in claimed {
        for upstream in [a, b] {
            let store = store.clone();
            racers.spawn(async move {
                let finished_at = upstream.0.scheduled_for + chrono::Duration::seconds(5);
                end(&store, &upstream, RunState::Succeeded, finished_at).await.released
            });
        }
    }
    let mut released: Vec<Run> = Vec::new();
    while let Some(answer) = racers.join_next().await {
        released.extend(answer.expect("racer"));
    }
    assert_eq!(
        released.len() as i64,
        OCCURRENCES,
        "one release per occurrence: {:?}",
        summary(&released)
    );
    for i in 0..OCCURRENCES {
        let c = run_of(&store, "c", i * 60).await;
        assert_eq!(c.map(|r| r.state), Some(RunState::Pending), "c at {}", i * 60);
    }
}
