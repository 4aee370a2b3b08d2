//! The send window of [`MemStore::lean`]: between a one-shot's unwritten firing and the next
//! sweep (DynamoDB: the watermark passing the job's due bucket), the job reads as not fired,
//! a change writes the job alone, and a claim of the occurrence — its message is out — puts
//! the run from the job as it then is, or finds none if the change took the occurrence away.

use sked_core::ids::RunId;
use sked_core::job::{Job, JobState};
use sked_core::ports::{ClaimBatch, ClaimOutcome, JobClaim, JobStore, JobStoreExt, StoreError};
use sked_core::run::{Run, RunState};
use sked_testkit::contract::fixtures::{at, claims, one_shot, planned_firing, run_keys, worker};
use sked_testkit::memory::MemStore;

/// A lean store holding the one-shot `a` at `at(60)`, fired (unwritten) by a sweep at `at(10)`:
/// the store, the job as created and the run its firing sent.
async fn fired_in_window() -> (MemStore, Job, Run) {
    let store = MemStore::lean();
    let a = one_shot("t1", "a", 60);
    store.create_jobs(std::slice::from_ref(&a), None).await.unwrap();
    let firing = planned_firing(&a, 10);
    let sent = store.fire_one(&firing).await.unwrap();
    assert_eq!(sent.len(), 1, "its run is sent");
    store.firings_sent(&[firing]).await.unwrap();
    (store, a, sent[0].clone())
}

async fn claim(store: &MemStore, run_id: &RunId) -> Result<ClaimOutcome, StoreError> {
    let tenant = one_shot("t1", "a", 60).tenant;
    // Past the run's `not_before` (its time, plus a jitter of at most 5 s).
    store.claim_one(&tenant, run_id, &worker("w1"), at(70), at(100)).await
}

/// `job` changed as a user's write would: `change` applied, the version bumped.
async fn change(store: &MemStore, job: &Job, change: impl FnOnce(&mut Job)) -> Job {
    let mut changed = job.clone();
    change(&mut changed);
    changed.version += 1;
    store.update_job(&changed, job.version, job.next_fire_at).await.unwrap();
    changed
}

#[tokio::test]
async fn in_the_window_the_job_reads_unfired_and_a_claim_puts_its_run() {
    let (store, a, sent) = fired_in_window().await;
    assert_eq!(store.get_job(&a.tenant, &a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(store.get_run(&a.tenant, &sent.run_id).await.unwrap(), None);
    assert!(store.active_runs_of(&a.tenant, &a.id).await.unwrap().is_empty());

    let Ok(ClaimOutcome::Claimed { run, .. }) = claim(&store, &sent.run_id).await else {
        panic!("the claim puts the run")
    };
    assert_eq!(
        (run.run_id.clone(), run.state),
        (sent.run_id.clone(), RunState::Running)
    );
    assert_eq!(run.not_before, sent.not_before);
    let after = store.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!((after.state, after.next_fire_at), (JobState::Completed, None));
    assert!(
        store.due_jobs(at(10_000), 10).await.unwrap().is_empty(),
        "not due again"
    );
    assert!(
        store.fire_one(&planned_firing(&a, 10)).await.is_err(),
        "not fired again"
    );
}

#[tokio::test]
async fn the_next_sweep_passes_the_firing_and_reads_show_it() {
    let (store, a, sent) = fired_in_window().await;
    assert!(store.due_jobs(at(10), 10).await.unwrap().is_empty());
    let job = store.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!((job.state, job.next_fire_at), (JobState::Completed, None));
    assert_eq!(
        store.get_run(&a.tenant, &sent.run_id).await.unwrap(),
        Some(sent.clone())
    );
    assert_eq!(store.unwritten_run_count(), 1, "shown, not written");
}

#[tokio::test]
async fn a_change_in_the_window_that_keeps_the_occurrence_is_what_its_claim_starts() {
    let (store, a, sent) = fired_in_window().await;
    let changed = change(&store, &a, |j| j.spec.priority = 9).await;
    let Ok(ClaimOutcome::Claimed { run, .. }) = claim(&store, &sent.run_id).await else {
        panic!("the occurrence is still the job's")
    };
    assert_eq!(run.priority, 9, "the job as changed, not as fired");
    // The sweep that comes next finds its run, and fires nothing again.
    assert!(store.due_jobs(at(600), 10).await.unwrap().is_empty());
    let after = store.get_job(&a.tenant, &a.id).await.unwrap().unwrap();
    assert_eq!((after.state, after.version), (JobState::Completed, changed.version));
}

#[tokio::test]
async fn a_change_in_the_window_that_takes_the_occurrence_away_leaves_its_claim_nothing() {
    let (store, a, sent) = fired_in_window().await;
    let retimed = change(&store, &a, |j| {
        j.spec.schedule = sked_core::schedule::Schedule::At(at(120));
        j.next_fire_at = Some(at(120));
    })
    .await;
    assert!(matches!(claim(&store, &sent.run_id).await, Err(StoreError::NotFound)));
    let due = store.due_jobs(at(120), 10).await.unwrap();
    assert_eq!(due, vec![retimed], "the new time is due as ever");

    let (store, a, sent) = fired_in_window().await;
    let paused = change(&store, &a, |j| j.state = JobState::Paused).await;
    assert!(matches!(claim(&store, &sent.run_id).await, Err(StoreError::NotFound)));
    assert_eq!(
        store.get_job(&a.tenant, &a.id).await.unwrap(),
        Some(paused),
        "the occurrence stays on the paused job's schedule: a resume fires it"
    );

    let (store, a, sent) = fired_in_window().await;
    let deleted = change(&store, &a, |j| {
        j.state = JobState::Deleted;
        j.next_fire_at = None;
    })
    .await;
    let batch = ClaimBatch {
        read_jobs: true,
        ..claims(run_keys(&[&sent]), "w1", at(70), at(100))
    };
    let answers = store.claim(&batch).await.unwrap();
    assert_eq!(
        answers[0].as_ref().ok(),
        Some(&JobClaim::Held(deleted)),
        "the worker ends it"
    );
}

#[tokio::test]
async fn a_job_changed_in_the_window_is_not_passed_by_the_sweep_and_fires_again() {
    let (store, a, sent) = fired_in_window().await;
    let relabelled = change(&store, &a, |j| {
        j.spec.labels.insert("team".into(), "ops".into());
    })
    .await;
    let due = store.due_jobs(at(600), 10).await.unwrap();
    assert_eq!(due, vec![relabelled.clone()], "still due: its firing was not written");
    let again = store.fire_one(&planned_firing(&relabelled, 10)).await.unwrap();
    assert_eq!(again.len(), 1, "sent again, as DynamoDB's next sweep would");
    assert_eq!(
        again[0].run_id, sent.run_id,
        "the same run: one of the two messages claims it"
    );
}

#[tokio::test]
async fn a_firing_whose_run_never_reached_the_queue_stays_unfired_and_fires_again() {
    let store = MemStore::lean();
    let a = one_shot("t1", "a", 60);
    store.create_jobs(std::slice::from_ref(&a), None).await.unwrap();
    let firing = planned_firing(&a, 10);
    let sent = store.fire_one(&firing).await.unwrap();
    // No `firings_sent`: the enqueue failed.
    let due = store.due_jobs(at(600), 10).await.unwrap();
    assert_eq!(due, vec![a.clone()], "the next sweep finds it due");
    assert_eq!(store.get_run(&a.tenant, &sent[0].run_id).await.unwrap(), None);
    assert_eq!(store.fire_one(&firing).await.unwrap(), sent, "fired again");
    store.firings_sent(&[firing]).await.unwrap();
    assert!(store.due_jobs(at(600), 10).await.unwrap().is_empty());
    assert_eq!(
        store.get_run(&a.tenant, &sent[0].run_id).await.unwrap(),
        Some(sent[0].clone())
    );
}

#[tokio::test]
async fn a_firing_written_in_the_window_ends_the_mark_of_the_one_left_unwritten() {
    // A second sweep, the job still reading unfired, decides otherwise: it skips the
    // occurrence (an earlier run of the job still going, say), and that firing is written.
    let (store, a, sent) = fired_in_window().await;
    let mut skip = planned_firing(&a, 10);
    skip.runs.clear();
    skip.skipped = sked_core::ledger::records_of(&[(at(60), sked_core::firing::SkipReason::Overlap)]);
    assert_eq!(store.fire_one(&skip).await.unwrap(), Vec::<Run>::new());
    // The sweep after it passes nothing: the run sent is not the occurrence's any more.
    assert!(store.due_jobs(at(600), 10).await.unwrap().is_empty());
    assert_eq!(
        store.get_run(&a.tenant, &sent.run_id).await.unwrap(),
        None,
        "skipped, not shown"
    );
    assert!(matches!(claim(&store, &sent.run_id).await, Err(StoreError::NotFound)));
}
