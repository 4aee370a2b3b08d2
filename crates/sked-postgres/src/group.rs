//! [`CompletionGroups`]: group commit of the work port's completions (served by
//! [`crate::grouping::Groups`]). The attempts a process ends at about the same time are closed
//! in one transaction ([`sked_core::work::one_transaction::complete_each`]: a few statements
//! and one commit for the group instead of five statements and a commit each), at most
//! [`GROUP_MAX`] in a group, [`PARALLEL_GROUPS`] groups written at once.
//!
//! Each caller gets its own answer: a refused completion (fenced) changes nothing and answers
//! its refusal, the others are written. A group whose transaction fails for a statement (the
//! database's error, not a refusal) is written again one completion per transaction, so that
//! one completion's failure is never another's; one that fails because the database is away
//! answers that to each.

use crate::db::PgDb;
use crate::grouping::{Groups, each_failed};
use crate::store::PgTx;
use sked_core::ports::{Settlement, StoreError, WorkError};
use sked_core::work::one_transaction::{self, Settled};
use std::sync::Arc;

/// Most completions written in one transaction.
pub const GROUP_MAX: usize = 64;

/// Most groups written at once (each on its own connection): while one commits, the next
/// is being written.
pub const PARALLEL_GROUPS: usize = 2;

/// A completion's answer: the run as ended, and whether a message became receivable.
type Answer = Result<Settled, WorkError>;

/// Group commit of completions over one pool; cheap to clone.
#[derive(Clone)]
pub(crate) struct CompletionGroups {
    groups: Groups<Settlement, Answer>,
}

impl CompletionGroups {
    pub(crate) fn new(db: PgDb) -> Self {
        let groups = Groups::new(
            GROUP_MAX,
            PARALLEL_GROUPS,
            Arc::new(move |settlements| Box::pin(write(db.clone(), settlements))),
        );
        CompletionGroups { groups }
    }

    /// Writes `settlement` with whatever other completions are written at the same time.
    pub(crate) async fn complete(&self, settlement: Settlement) -> Answer {
        self.groups
            .submit(settlement)
            .await
            .unwrap_or_else(|| Err(WorkError::Store(StoreError::Other("completion group dropped".into()))))
    }
}

/// One transaction for the whole group; if it fails, one per completion.
async fn write(db: PgDb, settlements: Vec<Settlement>) -> Vec<Answer> {
    let n = settlements.len();
    let group = settlements.clone();
    let written = db
        .locking_transaction(move |tx| one_transaction::complete_each(&mut PgTx(tx), &group))
        .await;
    match written {
        Ok(answers) => answers
            .into_iter()
            .map(|answer| answer.map_err(WorkError::Store))
            .collect(),
        // One completion, or the database away (each would wait for a connection in turn):
        // the same error for each.
        Err(e) if n == 1 || e.is_transient() => each_failed(e.into_store(), n, |e| Err(WorkError::Store(e))),
        Err(_) => {
            let mut answers = Vec::with_capacity(n);
            for settlement in settlements {
                let written = db
                    .locking_transaction(move |tx| one_transaction::complete(&mut PgTx(tx), &settlement))
                    .await;
                answers.push(written.map_err(|e| WorkError::Store(e.into_store())));
            }
            answers
        }
    }
}

#[cfg(test)]
mod tests {
    //! A group written in one transaction answers each completion on its own; completions
    //! sent at once through the work port are all written.
    use super::*;
    use crate::testing::postgres;
    use crate::{PgOptions, PgStore, PgWork};
    use sked_core::duration::Dur;
    use sked_core::ports::{
        ClaimOutcome, Clock, JobClaim, JobStore, Receipt, ReceiveRequest, Received, RunTransition, SystemClock,
        WorkPort,
    };
    use sked_core::run::{AttemptOutcome, Run, RunState};
    use sked_core::timestamp;
    use sked_testkit::contract::fixtures::{completion, firing, job, result, run, worker};
    use tokio_util::sync::CancellationToken;

    /// `n` runs of job `a` of tenant `t1`, fired through `work` and received with their
    /// claims: (run as claimed, token, receipt).
    async fn claimed(store: &PgStore, work: &PgWork, n: usize) -> Vec<(Run, u64, Receipt)> {
        let j = job("t1", "a");
        store.create_jobs(std::slice::from_ref(&j), None).await.unwrap();
        let runs: Vec<Run> = (0..n).map(|i| run("t1", "a", -(i as i64) - 10)).collect();
        work.fire(&[firing(&j, runs, j.next_fire_at)]).await.unwrap();
        let request = ReceiveRequest {
            max: n,
            wait: Dur::ZERO,
            worker: worker("w"),
            lease: Dur::secs(60),
            hold: Vec::new(),
            stop: CancellationToken::new(),
        };
        let received = work.receive(&request).await.unwrap();
        assert_eq!(received.len(), n);
        received
            .into_iter()
            .map(|Received { delivery, claim }| match claim {
                Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, token }, _)) => (run, token, delivery.receipt),
                other => panic!("expected a claim, got {other:?}"),
            })
            .collect()
    }

    fn settlement(run: &Run, token: u64, receipt: &Receipt, next: RunTransition) -> Settlement {
        let now = timestamp::trunc_ms(SystemClock.now());
        Settlement {
            completion: completion(run, token, &result(AttemptOutcome::Succeeded, now), next),
            receipt: receipt.clone(),
        }
    }

    /// One transaction: a completion fenced off between others answers its refusal and
    /// changes nothing, the others are written, their messages acknowledged or re-armed.
    #[tokio::test]
    async fn a_group_answers_each_completion_on_its_own() {
        let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
            .await
            .unwrap();
        let store = PgStore::new(db.clone());
        let work = PgWork::new(db.clone(), Arc::new(SystemClock));
        let runs = claimed(&store, &work, 4).await;
        let finish = |state| RunTransition::Finish(state);
        let later = timestamp::trunc_ms(SystemClock.now()) + chrono::Duration::hours(1);
        let group = vec![
            settlement(&runs[0].0, runs[0].1, &runs[0].2, finish(RunState::Succeeded)),
            // A stale attempt's completion: fenced off, in the middle of the group.
            settlement(&runs[1].0, runs[1].1 + 1, &runs[1].2, finish(RunState::Succeeded)),
            settlement(
                &runs[2].0,
                runs[2].1,
                &runs[2].2,
                RunTransition::Retry { not_before: later },
            ),
            settlement(&runs[3].0, runs[3].1, &runs[3].2, finish(RunState::Failed)),
        ];
        // In one transaction (not `write`, which would fall back to one per completion).
        let answers = db
            .locking_transaction(move |tx| one_transaction::complete_each(&mut PgTx(tx), &group))
            .await
            .unwrap();
        let states: Vec<_> = answers
            .iter()
            .map(|a| a.as_ref().map(|(ended, receivable)| (ended.run.state, *receivable)))
            .collect();
        assert!(matches!(states[0], Ok((RunState::Succeeded, false))), "{states:?}");
        assert!(matches!(states[1], Err(StoreError::Fenced)), "{states:?}");
        assert!(matches!(states[2], Ok((RunState::Pending, true))), "{states:?}");
        assert!(matches!(states[3], Ok((RunState::Failed, false))), "{states:?}");

        let stored = |i: usize| {
            let (run, store) = (&runs[i].0, &store);
            async move { store.get_run(&run.tenant, &run.run_id).await.unwrap().unwrap() }
        };
        assert_eq!(stored(0).await.state, RunState::Succeeded);
        let fenced = stored(1).await;
        assert_eq!(fenced.state, RunState::Running, "the fenced completion changed nothing");
        assert_eq!(fenced.lease.map(|l| l.token), Some(runs[1].1));
        let retried = stored(2).await;
        assert_eq!((retried.state, retried.not_before), (RunState::Pending, later));
        assert_eq!(stored(3).await.state, RunState::Failed);

        // The ended runs' messages are gone, the retry's waits for its time, the fenced
        // attempt's is still leased to it.
        let messages: Vec<(String, i64)> = store_messages(&store).await;
        let ids = |i: usize| runs[i].0.run_id.as_str().to_string();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages.iter().any(|(id, _)| *id == ids(1)), "{messages:?}");
        assert!(
            messages
                .iter()
                .any(|(id, visible)| *id == ids(2) && *visible == later.timestamp_millis()),
            "{messages:?}"
        );
    }

    /// The queue's messages: (run id, visible at in ms).
    async fn store_messages(store: &PgStore) -> Vec<(String, i64)> {
        let db = store.db().clone();
        db.transaction(|tx| {
            let rows = tx.query("SELECT run_id, visible_at FROM dispatch ORDER BY run_id", &[])?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
        .await
        .unwrap()
    }

    /// Through the work port, 40 at once: grouped as they come, each written once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn completions_sent_at_once_are_all_written() {
        let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
            .await
            .unwrap();
        let store = PgStore::new(db.clone());
        let work = PgWork::new(db, Arc::new(SystemClock));
        let runs = claimed(&store, &work, 40).await;
        let done = RunTransition::Finish(RunState::Succeeded);
        let work = Arc::new(work);
        let mut sent = tokio::task::JoinSet::new();
        for (run, token, receipt) in &runs {
            let (work, settlement) = (work.clone(), settlement(run, *token, receipt, done));
            sent.spawn(async move { work.complete(&settlement).await });
        }
        let answers = sent.join_all().await;
        for answer in &answers {
            assert_eq!(answer.as_ref().unwrap().run.state, RunState::Succeeded);
        }
        for (run, _, _) in &runs {
            let stored = store.get_run(&run.tenant, &run.run_id).await.unwrap().unwrap();
            assert_eq!(stored.state, RunState::Succeeded);
        }
        assert!(store_messages(&store).await.is_empty(), "every message acknowledged");
    }
}
