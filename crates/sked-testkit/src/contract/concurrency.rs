//! The concurrency-key contract: what every [`JobStore`] must decide in its own claim
//! transactions for runs that carry a concurrency key ([`sked_core::concurrency`]), one
//! `pub async fn` per case; run them all with
//! [`concurrency_contract!`](crate::concurrency_contract). Cases run on several threads, so
//! racing claims really run at once.

use super::claiming::{claim_outcomes, is_claimed, keys_of, race_claims, running};
use super::fixtures::{at, completion, result, run, worker};
use sked_core::concurrency::Concurrency;
use sked_core::ids::RunId;
pub use sked_core::ports::JobStore;
use sked_core::ports::store::{ClaimOutcome, JobStoreExt, RunTransition};
use sked_core::run::{AttemptOutcome, Run, RunState};
use std::sync::Arc;

/// A PENDING run of `job_id` in `tenant_name`, due at `at(0)`, holding `key` with `limit`.
fn keyed(tenant_name: &str, job_id: &str, key: &str, limit: u32) -> Run {
    let mut r = run(tenant_name, job_id, 0);
    r.concurrency = Some(Concurrency { key: key.into(), limit });
    r
}

async fn inserted(store: &Arc<dyn JobStore>, runs: Vec<Run>) -> Vec<Run> {
    for r in &runs {
        assert!(store.insert_run(r).await.unwrap(), "inserted {}", r.run_id);
    }
    runs
}

fn at_limit(key: &str) -> ClaimOutcome {
    ClaimOutcome::KeyAtLimit { key: key.into() }
}

/// Past its key's limit, a claim answers `KeyAtLimit` naming the key and changes nothing,
/// across the different jobs naming the key; another key, and the same key in another
/// tenant, are counted apart; a run that ends, or whose lease expires, frees its slot.
pub async fn claims_past_a_concurrency_key_limit_answer_key_at_limit(store: Arc<dyn JobStore>) {
    let runs = inserted(
        &store,
        vec![
            keyed("t1", "a", "db", 2),
            keyed("t1", "b", "db", 2),
            keyed("t1", "c", "db", 2),
            keyed("t1", "d", "db", 2),
            keyed("t1", "e", "other", 1),
            keyed("t2", "a", "db", 2),
            run("t1", "free", 0),
        ],
    )
    .await;
    let answers = claim_outcomes(&store, keys_of(&runs), "w1").await;
    let claimed: Vec<bool> = answers.iter().map(is_claimed).collect();
    assert_eq!(claimed, [true, true, false, false, true, true, true], "{answers:?}");
    assert_eq!(answers[2].as_ref().ok(), Some(&at_limit("db")));
    let waiting = store.get_run(&runs[2].tenant, &runs[2].run_id).await.unwrap().unwrap();
    assert_eq!(
        (waiting.state, waiting.attempts.len()),
        (RunState::Pending, 0),
        "unchanged"
    );
    assert_eq!(waiting.concurrency, runs[2].concurrency, "the key round-trips");

    // The first ends: its slot is free, and only one.
    let Ok(ClaimOutcome::Claimed { token, .. }) = answers[0] else {
        unreachable!("checked above")
    };
    let ok = result(AttemptOutcome::Succeeded, at(3));
    let finish = RunTransition::Finish(RunState::Succeeded);
    store.complete(&completion(&runs[0], token, &ok, finish)).await.unwrap();
    let w = worker("w1");
    let answer = store
        .claim_one(&runs[2].tenant, &runs[2].run_id, &w, at(4), at(34))
        .await;
    assert!(is_claimed(&answer), "a slot freed by a finished run: {answer:?}");
    let answer = store
        .claim_one(&runs[3].tenant, &runs[3].run_id, &w, at(4), at(34))
        .await;
    assert_eq!(answer.ok(), Some(at_limit("db")));
    // Past the lease of runs[1] (until 31), only runs[2] (until 34) holds the key.
    let answer = store
        .claim_one(&runs[3].tenant, &runs[3].run_id, &w, at(32), at(62))
        .await;
    assert!(is_claimed(&answer), "an expired lease frees its slot: {answer:?}");
}

/// Many claims of runs of several jobs naming one key, at once (from tasks racing each other,
/// through batches and single claims), never start more attempts than the key's limit.
pub async fn racing_claims_never_pass_a_concurrency_key_limit(store: Arc<dyn JobStore>) {
    const LIMIT: usize = 3;
    let runs: Vec<Run> = (0..24)
        .map(|i| keyed("t1", &format!("j{}", i % 6), "db", LIMIT as u32))
        .enumerate()
        .map(|(i, mut r)| {
            // Distinct runs of six jobs: one nominal time each.
            r.scheduled_for = at(-(i as i64));
            r.run_id = RunId::derive(&r.job_id, r.scheduled_for);
            r
        })
        .collect();
    let runs = inserted(&store, runs).await;
    let mut started = 0;
    for answer in race_claims(&store, &runs).await {
        match answer {
            Ok(ClaimOutcome::Claimed { .. }) => started += 1,
            Ok(ClaimOutcome::KeyAtLimit { key }) => assert_eq!(key, "db"),
            other => panic!("a claim of a due run answered {other:?}"),
        }
    }
    assert_eq!(started, LIMIT, "claims started past the limit, or fewer than it allows");
    assert_eq!(running(&store, &runs).await, LIMIT);
}
