//! Claims as the contract cases make them: the outcomes of a batch that reads no job, claims
//! racing each other from several tasks, and how many runs ended up RUNNING.

use super::fixtures::{at, claims, worker};
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::JobStore;
use sked_core::ports::store::{ClaimOutcome, JobClaim, JobStoreExt, StoreError};
use sked_core::run::{Run, RunState};
use std::sync::Arc;

/// The (tenant, run id) of each run.
pub fn keys_of(runs: &[Run]) -> Vec<(TenantId, RunId)> {
    runs.iter().map(|r| (r.tenant.clone(), r.run_id.clone())).collect()
}

/// Whether a claim started an attempt.
pub fn is_claimed(answer: &Result<ClaimOutcome, StoreError>) -> bool {
    matches!(answer, Ok(ClaimOutcome::Claimed { .. }))
}

/// The outcomes of a batch that reads no job; panics unless every answer is
/// `Claimed(_, None)` or an error.
pub fn without_jobs(answers: Vec<Result<JobClaim, StoreError>>) -> Vec<Result<ClaimOutcome, StoreError>> {
    answers
        .into_iter()
        .map(|answer| match answer {
            Ok(JobClaim::Claimed(outcome, None)) => Ok(outcome),
            Ok(other) => panic!("a batch reading no job answered {other:?}"),
            Err(e) => Err(e),
        })
        .collect()
}

/// Claims `runs` in one batch for worker `w` at `at(1)` (lease to `at(31)`), reading no job:
/// each answer's outcome.
pub async fn claim_outcomes(
    store: &Arc<dyn JobStore>,
    runs: Vec<(TenantId, RunId)>,
    w: &str,
) -> Vec<Result<ClaimOutcome, StoreError>> {
    without_jobs(store.claim(&claims(runs, w, at(1), at(31))).await.unwrap())
}

/// Claims every run at once at `at(1)`: pairs of runs from tasks racing each other, every
/// other task through one batch, the others one claim at a time. Every answer, in no order.
pub async fn race_claims(store: &Arc<dyn JobStore>, runs: &[Run]) -> Vec<Result<ClaimOutcome, StoreError>> {
    let mut racers = tokio::task::JoinSet::new();
    for (i, chunk) in runs.chunks(2).enumerate() {
        let (store, chunk) = (store.clone(), keys_of(chunk));
        racers.spawn(async move {
            let w = format!("w{i}");
            if i % 2 == 0 {
                claim_outcomes(&store, chunk, &w).await
            } else {
                let mut out = Vec::new();
                for (t, r) in &chunk {
                    out.push(store.claim_one(t, r, &worker(&w), at(1), at(31)).await);
                }
                out
            }
        });
    }
    let mut answers = Vec::new();
    while let Some(joined) = racers.join_next().await {
        answers.extend(joined.unwrap());
    }
    answers
}

/// How many of `runs` are RUNNING in the store.
pub async fn running(store: &Arc<dyn JobStore>, runs: &[Run]) -> usize {
    let mut count = 0;
    for r in runs {
        let stored = store.get_run(&r.tenant, &r.run_id).await.unwrap().unwrap();
        count += usize::from(stored.state == RunState::Running);
    }
    count
}
