//! [`ReceiveGroups`]: the work port's receives that come at about the same time — a process's
//! worker loops, each asking for its free slots — taken and claimed in one transaction
//! ([`sked_core::work::one_transaction::receive_together`]: one take of all their messages,
//! one claim batch, each run for the worker whose receive it goes to, one commit), served by
//! [`crate::grouping::Groups`]. Each loop's receive otherwise made its own transaction of four
//! round trips for the few slots that had freed since its last one.
//!
//! This is the first look of a receive, at the instant its group is taken: one that finds
//! nothing then waits alone (the queue's long poll, `Poller`), as before.

use crate::db::PgDb;
use crate::grouping::{Groups, each_failed};
use crate::store::PgTx;
use crate::tx::Isolation;
use sked_core::ports::{Clock, ReceiveRequest, Received, StoreError};
use sked_core::timestamp::trunc_ms;
use sked_core::work::one_transaction;
use std::sync::Arc;

/// Most receives taken in one transaction.
pub const GROUP_MAX: usize = 16;

/// Most groups taken at once (each on its own connection).
pub const PARALLEL_GROUPS: usize = 2;

/// A receive's answer: its deliveries with their claims.
type Answer = Result<Vec<Received>, StoreError>;

/// Receives taken in groups over one pool; cheap to clone.
#[derive(Clone)]
pub(crate) struct ReceiveGroups {
    groups: Groups<ReceiveRequest, Answer>,
}

impl ReceiveGroups {
    /// Groups over `db`, taking at the instant `clock` tells when a group's turn comes.
    pub(crate) fn new(db: PgDb, clock: Arc<dyn Clock>) -> Self {
        let groups = Groups::new(
            GROUP_MAX,
            PARALLEL_GROUPS,
            Arc::new(move |requests| Box::pin(take(db.clone(), clock.clone(), requests))),
        );
        ReceiveGroups { groups }
    }

    /// What is visible now for `request` (never waits for a message), taken and claimed with
    /// the receives that come at the same time.
    pub(crate) async fn receive(&self, request: ReceiveRequest) -> Answer {
        self.groups
            .submit(request)
            .await
            .unwrap_or_else(|| Err(StoreError::Other("receive group dropped".into())))
    }
}

/// One transaction for the group; a failure is each receive's answer.
async fn take(db: PgDb, clock: Arc<dyn Clock>, requests: Vec<ReceiveRequest>) -> Vec<Answer> {
    let n = requests.len();
    let now = trunc_ms(clock.now());
    let taken = db
        .transaction_with(Isolation::ReadCommitted, move |tx| {
            one_transaction::receive_together(&mut PgTx(tx), &requests, now)
        })
        .await;
    match taken {
        Ok(answers) => answers.into_iter().map(Ok).collect(),
        Err(e) => each_failed(e.into_store(), n, Err),
    }
}

#[cfg(test)]
mod tests {
    //! Receives taken together: each run claimed once, for the worker whose receive it went
    //! to, in serving order and up to each receive's `max`; receives that lease otherwise
    //! take on their own terms in the same transaction.
    use super::*;
    use crate::testing::postgres;
    use crate::{PgOptions, PgStore, PgWork};
    use sked_core::duration::Dur;
    use sked_core::ports::{ClaimOutcome, JobClaim, JobStore, SystemClock, WorkPort};
    use sked_core::run::Run;
    use sked_core::timestamp::Timestamp;
    use sked_testkit::contract::fixtures::{firing, job, run, worker};
    use std::collections::HashSet;
    use tokio_util::sync::CancellationToken;

    /// `n` runs of job `a` of tenant `t1`, due in the past, fired (written and enqueued).
    async fn fired(store: &PgStore, work: &PgWork, n: usize) {
        let j = job("t1", "a");
        store.create_jobs(std::slice::from_ref(&j), None).await.unwrap();
        let runs: Vec<Run> = (0..n).map(|i| run("t1", "a", -(i as i64) - 10)).collect();
        work.fire(&[firing(&j, runs, j.next_fire_at)]).await.unwrap();
    }

    fn request(name: &str, max: usize, lease: Dur) -> ReceiveRequest {
        ReceiveRequest {
            max,
            wait: Dur::ZERO,
            worker: worker(name),
            lease,
            hold: Vec::new(),
            stop: CancellationToken::new(),
        }
    }

    /// The claimed run and its lease's end, for each of `received`.
    fn claimed(received: &[Received]) -> Vec<(Run, Timestamp)> {
        received
            .iter()
            .map(|r| match &r.claim {
                Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, _)) => {
                    let until = run.lease.as_ref().expect("a claimed run has a lease").expires_at;
                    (run.clone(), until)
                }
                other => panic!("expected a claim, got {other:?}"),
            })
            .collect()
    }

    /// Three receives in one transaction: the two that lease alike share the first messages
    /// in serving order (the first up to its `max`, then the second), each run owned by its
    /// receive's worker; the third, with another lease, takes after them with its own lease.
    #[tokio::test]
    async fn receives_taken_together_split_the_messages_in_order_each_claimed_by_its_worker() {
        let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
            .await
            .unwrap();
        let store = PgStore::new(db.clone());
        let work = PgWork::new(db.clone(), Arc::new(SystemClock));
        fired(&store, &work, 8).await;
        let requests = vec![
            request("w1", 2, Dur::secs(60)),
            request("other-lease", 2, Dur::secs(90)),
            request("w2", 3, Dur::secs(60)),
        ];
        let now = trunc_ms(SystemClock.now());
        let answers = db
            .transaction_with(Isolation::ReadCommitted, move |tx| {
                one_transaction::receive_together(&mut PgTx(tx), &requests, now)
            })
            .await
            .unwrap();
        let counts: Vec<usize> = answers.iter().map(Vec::len).collect();
        assert_eq!(counts, vec![2, 2, 3]);
        let (w1, other, w2) = (claimed(&answers[0]), claimed(&answers[1]), claimed(&answers[2]));
        // Oldest first (serving order): w1 the two oldest, w2 the next three, then the other.
        let scheduled = |c: &[(Run, Timestamp)]| c.iter().map(|(r, _)| r.scheduled_for).collect::<Vec<_>>();
        let (s1, s2, s3) = (scheduled(&w1), scheduled(&w2), scheduled(&other));
        assert!(s1.iter().all(|a| s2.iter().all(|b| a < b)), "{s1:?} before {s2:?}");
        assert!(s2.iter().all(|a| s3.iter().all(|b| a < b)), "{s2:?} before {s3:?}");
        for (answer, name, lease) in [(&w1, "w1", 60), (&w2, "w2", 60), (&other, "other-lease", 90)] {
            for (run, until) in answer {
                let stored = store.get_run(&run.tenant, &run.run_id).await.unwrap().unwrap();
                let owner = &stored.lease.as_ref().expect("claimed").owner;
                assert_eq!(owner.0, name, "{}", run.run_id);
                assert_eq!(*until, now + chrono::Duration::seconds(lease), "{}", run.run_id);
            }
        }
        let distinct: HashSet<_> = [&w1, &w2, &other]
            .into_iter()
            .flatten()
            .map(|(r, _)| r.run_id.clone())
            .collect();
        assert_eq!(distinct.len(), 7, "each run claimed once");
    }

    /// Through the work port, twenty receives at once over 60 messages: every message is
    /// received once, by one receive, and each run's lease names that receive's worker.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn receives_sent_at_once_take_each_message_once_for_their_own_worker() {
        let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
            .await
            .unwrap();
        let store = PgStore::new(db.clone());
        let work = Arc::new(PgWork::new(db, Arc::new(SystemClock)));
        fired(&store, &work, 60).await;
        let mut sent = tokio::task::JoinSet::new();
        for i in 0..20 {
            let work = work.clone();
            sent.spawn(async move {
                let name = format!("w{i}");
                let received = work.receive(&request(&name, 3, Dur::secs(60))).await.unwrap();
                (name, received)
            });
        }
        let mut seen = HashSet::new();
        for (name, received) in sent.join_all().await {
            assert!(received.len() <= 3, "{name} got {}", received.len());
            for (run, _) in claimed(&received) {
                assert!(seen.insert(run.run_id.clone()), "{} received twice", run.run_id);
                let stored = store.get_run(&run.tenant, &run.run_id).await.unwrap().unwrap();
                assert_eq!(stored.lease.as_ref().expect("claimed").owner.0, name);
            }
        }
        assert_eq!(seen.len(), 60, "every message received");
    }
}
