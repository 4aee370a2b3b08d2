//! The quota contract: what every store that keeps quotas ([`QuotaStore`]) must enforce in its
//! own [`JobStore`] transactions, one `pub async fn` per case; run them all with
//! [`quota_contract!`](crate::quota_contract). Each case gets the same store as both ports.

use super::claiming::{claim_outcomes, is_claimed, keys_of, race_claims, running};
use super::fixtures::{at, completion, job, result, run, tenant, worker};
use sked_core::job::JobState;
use sked_core::ports::store::{ClaimOutcome, JobStoreExt, RunTransition, StoreError};
pub use sked_core::ports::{JobStore, QuotaStore};
use sked_core::quota::{Quota, SubmitRate};
use sked_core::run::{AttemptOutcome, Run, RunState};
use std::sync::Arc;

/// One store, as both ports.
pub type Stores = (Arc<dyn JobStore>, Arc<dyn QuotaStore>);

fn limits(max_active_jobs: Option<u64>, max_concurrent_runs: Option<u64>) -> Quota {
    Quota {
        max_active_jobs,
        max_concurrent_runs,
        submit_rate: None,
    }
}

async fn insert_runs(store: &Arc<dyn JobStore>, tenant_name: &str, n: i64) -> Vec<Run> {
    let mut out = Vec::new();
    for i in 0..n {
        let r = run(tenant_name, &format!("j{i}"), 0);
        assert!(store.insert_run(&r).await.unwrap());
        out.push(r);
    }
    out
}

/// A quota reads back as written; a second write replaces it whole; a tenant without one
/// reads `None`.
pub async fn put_quota_reads_back_and_replaces((_, quotas): Stores) {
    let t1 = tenant("t1");
    assert_eq!(quotas.get_quota(&t1).await.unwrap(), None);
    let first = Quota {
        max_active_jobs: Some(10),
        max_concurrent_runs: Some(2),
        submit_rate: Some(SubmitRate {
            per_second: 0.5,
            burst: 3,
        }),
    };
    quotas.put_quota(&t1, &first).await.unwrap();
    assert_eq!(quotas.get_quota(&t1).await.unwrap(), Some(first));
    quotas.put_quota(&t1, &limits(None, Some(1))).await.unwrap();
    assert_eq!(quotas.get_quota(&t1).await.unwrap(), Some(limits(None, Some(1))));
    assert_eq!(quotas.get_quota(&tenant("t2")).await.unwrap(), None);
}

/// `create_jobs` past `max_active_jobs` is `QuotaExceeded` and writes nothing (a batch
/// all-or-nothing); PAUSED jobs count, COMPLETED and DELETED ones do not; other tenants are
/// not limited; an update that brings a COMPLETED job back is refused at the limit.
pub async fn create_jobs_past_max_active_jobs_writes_nothing((store, quotas): Stores) {
    let t1 = tenant("t1");
    quotas.put_quota(&t1, &limits(Some(2), None)).await.unwrap();
    store.create_jobs(&[job("t1", "a")], None).await.unwrap();
    let refused = store.create_jobs(&[job("t1", "b"), job("t1", "c")], None).await;
    assert!(matches!(refused, Err(StoreError::QuotaExceeded(_))), "{refused:?}");
    for id in ["b", "c"] {
        assert!(
            store.get_job(&t1, &id.into()).await.unwrap().is_none(),
            "{id} was written"
        );
    }
    let mut paused = job("t1", "b");
    paused.state = JobState::Paused;
    store.create_jobs(&[paused], None).await.unwrap();
    let refused = store.create_jobs(&[job("t1", "c")], None).await;
    assert!(
        matches!(refused, Err(StoreError::QuotaExceeded(_))),
        "a paused job counts"
    );
    let mut completed = job("t1", "done");
    completed.state = JobState::Completed;
    completed.next_fire_at = None;
    store.create_jobs(&[completed.clone()], None).await.unwrap();
    store
        .create_jobs(&[job("t2", "x"), job("t2", "y"), job("t2", "z")], None)
        .await
        .unwrap();

    // Bringing the completed job back would make three.
    let mut revived = completed.clone();
    revived.state = JobState::Active;
    revived.next_fire_at = Some(at(600));
    revived.version += 1;
    let refused = store.update_job(&revived, completed.version, None).await;
    assert!(matches!(refused, Err(StoreError::QuotaExceeded(_))), "{refused:?}");
    assert_eq!(
        store.get_job(&t1, &"done".into()).await.unwrap().map(|j| j.state),
        Some(JobState::Completed)
    );
    // Deleting one frees its place.
    let mut deleted = store.get_job(&t1, &"a".into()).await.unwrap().unwrap();
    deleted.state = JobState::Deleted;
    deleted.next_fire_at = None;
    deleted.version += 1;
    store.update_job(&deleted, 1, Some(at(60))).await.unwrap();
    store.update_job(&revived, completed.version, None).await.unwrap();
    // A lowered limit refuses what adds, not what keeps: the paused job may still change.
    quotas.put_quota(&t1, &limits(Some(1), None)).await.unwrap();
    let mut changed = store.get_job(&t1, &"b".into()).await.unwrap().unwrap();
    changed.spec.priority = 7;
    changed.version += 1;
    store.update_job(&changed, 1, Some(at(60))).await.unwrap();
}

/// Past `max_concurrent_runs`, a claim answers `AtCapacity` and changes nothing; a run that
/// ends, or whose lease expires, frees its slot; another tenant is not limited.
pub async fn claims_past_max_concurrent_runs_answer_at_capacity((store, quotas): Stores) {
    quotas.put_quota(&tenant("t1"), &limits(None, Some(2))).await.unwrap();
    let runs = insert_runs(&store, "t1", 4).await;
    let others = insert_runs(&store, "t2", 3).await;
    let w = worker("w1");
    let answers = claim_outcomes(&store, keys_of(&runs), "w1").await;
    let claimed: Vec<bool> = answers.iter().map(is_claimed).collect();
    assert_eq!(claimed, [true, true, false, false], "{answers:?}");
    assert_eq!(answers[2].as_ref().ok(), Some(&ClaimOutcome::AtCapacity));
    let waiting = store.get_run(&runs[2].tenant, &runs[2].run_id).await.unwrap().unwrap();
    assert_eq!(
        (waiting.state, waiting.attempts.len()),
        (RunState::Pending, 0),
        "unchanged"
    );
    let answers_t2 = claim_outcomes(&store, keys_of(&others), "w1").await;
    assert!(answers_t2.iter().all(is_claimed), "t2 has no quota: {answers_t2:?}");

    // The first ends: its slot is free, and only one.
    let Ok(ClaimOutcome::Claimed { token, .. }) = answers[0] else {
        unreachable!("checked above")
    };
    let ok = result(AttemptOutcome::Succeeded, at(3));
    let finish = RunTransition::Finish(RunState::Succeeded);
    store.complete(&completion(&runs[0], token, &ok, finish)).await.unwrap();
    let answer = store
        .claim_one(&runs[2].tenant, &runs[2].run_id, &w, at(4), at(34))
        .await;
    assert!(is_claimed(&answer), "a slot freed by a finished run: {answer:?}");
    let answer = store
        .claim_one(&runs[3].tenant, &runs[3].run_id, &w, at(4), at(34))
        .await;
    assert_eq!(answer.ok(), Some(ClaimOutcome::AtCapacity));
    // Past the lease of runs[1] (until 31), only runs[2] (until 34) holds a slot.
    let answer = store
        .claim_one(&runs[3].tenant, &runs[3].run_id, &w, at(32), at(62))
        .await;
    assert!(is_claimed(&answer), "an expired lease frees its slot: {answer:?}");
}

/// Many claims of different runs of one tenant at once (from tasks racing each other, through
/// batches and single claims) never start more than `max_concurrent_runs` attempts.
pub async fn racing_claims_never_pass_max_concurrent_runs((store, quotas): Stores) {
    const CAP: usize = 3;
    quotas
        .put_quota(&tenant("t1"), &limits(None, Some(CAP as u64)))
        .await
        .unwrap();
    let runs = insert_runs(&store, "t1", 24).await;
    let started = race_claims(&store, &runs)
        .await
        .iter()
        .filter(|a| is_claimed(a))
        .count();
    assert_eq!(started, CAP, "claims started past the cap, or fewer than it allows");
    assert_eq!(running(&store, &runs).await, CAP);
}
