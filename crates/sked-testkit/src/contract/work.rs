//! The work contract: every [`WorkPort`] must pass these cases, whether it calls a store and
//! a queue in turn or makes each step one transaction.
//!
//! Each case takes fresh, empty ports ([`WorkPorts`]) on a [`ManualClock`] reading
//! [`t0`](super::fixtures::t0), drives the work port, and checks through the store and the
//! queue what it did (one promise of the trait doc in sked-core's `ports/work.rs` a case).
//! Looking into the queue leases what it finds, so a case looks only where it expects
//! nothing, or last. Time moves only by `clock.advance`; real time appears only as timeouts
//! that turn a hang into a failure. Run them all with [`work_contract!`](crate::work_contract).

pub use sked_core::ports::work::WorkPort;

use super::fixtures::{at, completion, firing, job, result, run, worker};
use crate::clock::ManualClock;
use sked_core::duration::Dur;
use sked_core::ids::{RunId, TenantId};
use sked_core::job::{Job, Overlap};
use sked_core::ports::queue::{Delivery, Dispatch, DispatchQueue};
use sked_core::ports::store::{ClaimOutcome, JobClaim, JobStore, JobStoreExt, RunTransition, StoreError};
use sked_core::ports::work::{ReceiveRequest, Received, Settlement, WorkError};
use sked_core::run::{AttemptOutcome, Lease, Run, RunState};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The ports a case drives and looks into; the work port works on the same store and queue.
pub struct WorkPorts {
    /// The store the work port writes to (empty at the start).
    pub store: Arc<dyn JobStore>,
    /// The queue the work port hands runs over by (empty at the start).
    pub queue: Arc<dyn DispatchQueue>,
    /// The port under test.
    pub work: Arc<dyn WorkPort>,
    /// The clock every port reads.
    pub clock: Arc<ManualClock>,
}

/// The lease (and message visibility) a receive asks for.
const LEASE: Dur = Dur::secs(30);

/// Real time after which a call that should have returned counts as hung.
const HANG: Duration = Duration::from_secs(5);

// ----- helpers -----

/// Creates `j` and fires `runs` of it through the work port; panics unless all are created.
async fn fired(p: &WorkPorts, j: &Job, runs: &[Run]) {
    p.store
        .create_jobs(std::slice::from_ref(j), None)
        .await
        .expect("create_jobs");
    let answers = p
        .work
        .fire(&[firing(j, runs.to_vec(), j.next_fire_at)])
        .await
        .expect("fire");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].as_ref().ok(), Some(&runs.to_vec()), "every run created");
}

/// Receives (wait zero) for worker `w`, holding back runs of jobs whose policy is in `hold`.
async fn receive(p: &WorkPorts, w: &str, hold: Vec<Overlap>) -> Vec<Received> {
    let request = ReceiveRequest {
        max: 10,
        wait: Dur::ZERO,
        worker: worker(w),
        lease: LEASE,
        hold,
        stop: CancellationToken::new(),
    };
    tokio::time::timeout(HANG, p.work.receive(&request))
        .await
        .expect("receive with wait 0 must not block")
        .expect("receive")
}

/// Receives for `w` and expects exactly one delivery, claimed: its run, token and receipt.
async fn receive_one(p: &WorkPorts, w: &str) -> (Run, u64, Delivery) {
    let mut got = receive(p, w, vec![]).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let Received { delivery, claim } = got.remove(0);
    match claim {
        Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, token }, _)) => (run, token, delivery),
        other => panic!("expected Claimed, got {other:?}"),
    }
}

/// What the queue holds ready now, straight from the queue (leasing it).
async fn ready(p: &WorkPorts) -> Vec<Delivery> {
    tokio::time::timeout(HANG, p.queue.receive(100, LEASE, Dur::ZERO))
        .await
        .expect("receive with wait 0 must not block")
        .expect("queue receive")
}

/// The runs the deliveries name, sorted.
fn named(ds: &[Delivery]) -> Vec<(TenantId, RunId)> {
    let mut runs: Vec<_> = ds
        .iter()
        .map(|d| (d.dispatch.tenant.clone(), d.dispatch.run_id.clone()))
        .collect();
    runs.sort();
    runs
}

fn key(r: &Run) -> (TenantId, RunId) {
    (r.tenant.clone(), r.run_id.clone())
}

async fn get(p: &WorkPorts, r: &Run) -> Run {
    p.store
        .get_run(&r.tenant, &r.run_id)
        .await
        .expect("get_run")
        .expect("run exists")
}

async fn job_now(p: &WorkPorts, j: &Job) -> Job {
    p.store
        .get_job(&j.tenant, &j.id)
        .await
        .expect("get_job")
        .expect("job exists")
}

fn is_fenced<T: std::fmt::Debug>(r: &Result<T, WorkError>) -> bool {
    matches!(r, Err(WorkError::Store(StoreError::Fenced)))
}

// ----- fire -----

/// `fire` writes each firing as the store does and enqueues exactly the runs created: a
/// conflicting firing enqueues nothing and does not stop the others, a run that already
/// existed is not enqueued again.
pub async fn fire_writes_runs_and_enqueues_exactly_the_created_ones(p: WorkPorts) {
    let (a, b, c) = (job("t1", "a"), job("t1", "b"), job("t2", "c"));
    p.store.create_jobs(&[a.clone(), b.clone()], None).await.unwrap();
    p.store.create_jobs(std::slice::from_ref(&c), None).await.unwrap();
    let existing = run("t2", "c", 0);
    assert!(p.store.insert_run(&existing).await.unwrap());
    let (ra, rb, rc) = (run("t1", "a", 0), run("t1", "b", 0), run("t2", "c", 1));
    let mut stale = firing(&b, vec![rb.clone()], Some(at(120)));
    stale.expected_version += 1;
    let answers = p
        .work
        .fire(&[
            firing(&a, vec![ra.clone()], Some(at(120))),
            stale,
            firing(&c, vec![existing.clone(), rc.clone()], Some(at(120))),
        ])
        .await
        .expect("fire");
    assert_eq!(answers.len(), 3);
    assert_eq!(answers[0].as_ref().ok(), Some(&vec![ra.clone()]));
    assert!(
        matches!(answers[1], Err(StoreError::Conflict(_))),
        "expected Conflict, got {:?}",
        answers[1]
    );
    assert_eq!(answers[2].as_ref().ok(), Some(&vec![rc.clone()]));
    assert_eq!(get(&p, &ra).await, ra);
    assert_eq!(get(&p, &rc).await, rc);
    assert_eq!(
        p.store.get_run(&rb.tenant, &rb.run_id).await.unwrap(),
        None,
        "b fired nothing"
    );
    assert_eq!(job_now(&p, &a).await.next_fire_at, Some(at(120)));
    assert_eq!(job_now(&p, &b).await, b, "b unchanged");
    assert!(p.work.fire(&[]).await.unwrap().is_empty());

    p.clock.advance(Dur::secs(1));
    let mut dispatches: Vec<Dispatch> = ready(&p).await.into_iter().map(|d| d.dispatch).collect();
    dispatches.sort_by(|x, y| x.run_id.cmp(&y.run_id));
    assert_eq!(
        dispatches,
        vec![Dispatch::from(&ra), Dispatch::from(&rc)],
        "exactly the runs created are enqueued, each once"
    );
}

// ----- receive -----

/// `receive` leases messages and claims their runs for the worker, at the clock's instant,
/// each answered with its job; a run whose job's overlap policy is in `hold` is answered
/// `Held` with its job, stays PENDING, and its message stays leased like the others.
pub async fn receive_claims_runs_with_their_jobs_and_holds_by_overlap_policy(p: WorkPorts) {
    let free = job("t1", "a");
    let mut queued = job("t1", "q");
    queued.spec.overlap = Some(Overlap::QueueOne);
    let (ra, rq) = (run("t1", "a", 0), run("t1", "q", 0));
    fired(&p, &free, std::slice::from_ref(&ra)).await;
    fired(&p, &queued, std::slice::from_ref(&rq)).await;
    p.clock.advance(Dur::secs(5));
    let got = receive(&p, "w1", vec![Overlap::QueueOne]).await;
    assert_eq!(got.len(), 2, "{got:?}");
    let (free_now, queued_now) = (job_now(&p, &free).await, job_now(&p, &queued).await);
    for Received { delivery, claim } in &got {
        assert_eq!(delivery.receive_count, 1);
        if delivery.dispatch.run_id == ra.run_id {
            assert_eq!(delivery.dispatch, Dispatch::from(&ra));
            let Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, token }, Some(j))) = claim else {
                panic!("expected Claimed with its job, got {claim:?}");
            };
            assert_eq!(j, &free_now);
            assert_eq!((run.state, run.attempt_count()), (RunState::Running, 1));
            assert_eq!(
                run.lease,
                Some(Lease {
                    owner: worker("w1"),
                    token: *token,
                    expires_at: at(35)
                }),
                "leased from the receive's instant"
            );
            assert_eq!(&get(&p, &ra).await, run);
        } else {
            assert_eq!(delivery.dispatch, Dispatch::from(&rq));
            assert_eq!(claim.as_ref().ok(), Some(&JobClaim::Held(queued_now.clone())));
        }
    }
    assert_eq!(get(&p, &rq).await, rq, "a held run is not claimed");
    assert!(ready(&p).await.is_empty(), "both messages are leased, the held one too");
    p.clock.advance(Dur::secs(31));
    assert_eq!(
        named(&ready(&p).await),
        vec![key(&ra), key(&rq)],
        "unacked, both come back after their visibility"
    );
}

/// A receive waiting for messages stops waiting, and answers nothing, once its `stop` is
/// cancelled — the way a worker ends its receive at shutdown without dropping it.
pub async fn a_stopped_receive_waits_no_more(p: WorkPorts) {
    let stop = CancellationToken::new();
    let request = ReceiveRequest {
        max: 10,
        wait: Dur::secs(3600),
        worker: worker("w1"),
        lease: LEASE,
        hold: Vec::new(),
        stop: stop.clone(),
    };
    let cancel = async {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        stop.cancel();
    };
    let (received, ()) = tokio::time::timeout(HANG, async { tokio::join!(p.work.receive(&request), cancel) })
        .await
        .expect("a stopped receive must stop waiting");
    assert!(received.expect("receive").is_empty());
    // Stopped before it is called: no wait at all.
    let received = tokio::time::timeout(HANG, p.work.receive(&request))
        .await
        .expect("a stopped receive must not wait");
    assert!(received.expect("receive").is_empty());
}

/// With nothing visible (nothing queued, or nothing due yet), `receive` with wait zero
/// answers empty at once and claims nothing.
pub async fn receive_with_nothing_visible_answers_empty(p: WorkPorts) {
    assert!(receive(&p, "w1", vec![]).await.is_empty());
    let later = run("t1", "a", 10);
    fired(&p, &job("t1", "a"), std::slice::from_ref(&later)).await;
    assert!(receive(&p, "w1", vec![]).await.is_empty(), "not due yet");
    assert_eq!(get(&p, &later).await, later, "unchanged");
    p.clock.advance(Dur::secs(10));
    let (claimed, _, _) = receive_one(&p, "w1").await;
    assert_eq!(claimed.run_id, later.run_id);
}

/// A run whose message comes to a second worker while the first holds the run (its lease
/// renewed in the store, the message's visibility over, and the run enqueued again as the
/// repair pass might) is claimed once: every later delivery answers `Leased` with its job,
/// and the run keeps its one attempt.
pub async fn a_run_received_twice_is_claimed_once(p: WorkPorts) {
    let a = job("t1", "a");
    let ra = run("t1", "a", 0);
    fired(&p, &a, std::slice::from_ref(&ra)).await;
    let (_, token, _) = receive_one(&p, "w1").await;
    p.clock.advance(Dur::secs(20));
    let held = p
        .store
        .heartbeat(&ra.tenant, &ra.run_id, token, at(20), at(60))
        .await
        .expect("store heartbeat");
    p.clock.advance(Dur::secs(11)); // 31 s: past the message's visibility, within the lease
    p.queue.enqueue(&[Dispatch::from(&ra)]).await.unwrap();
    let got = receive(&p, "w2", vec![]).await;
    assert!(!got.is_empty(), "the run's message is delivered again");
    let a_now = job_now(&p, &a).await;
    for Received { delivery, claim } in &got {
        assert_eq!(delivery.dispatch.run_id, ra.run_id);
        assert_eq!(
            claim.as_ref().ok(),
            Some(&JobClaim::Claimed(ClaimOutcome::Leased(at(60)), Some(a_now.clone())))
        );
    }
    assert_eq!(get(&p, &ra).await, held, "still w1's one attempt");
}

// ----- heartbeat -----

/// `heartbeat` renews the store's lease to now + lease (answering the run and that instant)
/// and keeps the message invisible past its first visibility, until the renewed one ends.
pub async fn heartbeat_renews_the_lease_and_keeps_the_message_invisible(p: WorkPorts) {
    let ra = run("t1", "a", 0);
    fired(&p, &job("t1", "a"), std::slice::from_ref(&ra)).await;
    let (_, token, delivery) = receive_one(&p, "w1").await;
    p.clock.advance(Dur::secs(20));
    let (hb, until) = p
        .work
        .heartbeat(&ra.tenant, &ra.run_id, token, &delivery.receipt, LEASE)
        .await
        .expect("heartbeat");
    assert_eq!(until, at(50));
    assert_eq!(
        hb.lease,
        Some(Lease {
            owner: worker("w1"),
            token,
            expires_at: at(50)
        })
    );
    assert!(!hb.cancel_requested);
    assert_eq!(get(&p, &ra).await, hb);
    p.clock.advance(Dur::secs(15)); // 35 s: past the first visibility (30 s)
    assert!(ready(&p).await.is_empty(), "the message stays invisible");
    let w2 = p
        .store
        .claim_one(&ra.tenant, &ra.run_id, &worker("w2"), at(35), at(65))
        .await
        .unwrap();
    assert_eq!(w2, ClaimOutcome::Leased(at(50)), "the renewed lease holds");
    p.clock.advance(Dur::secs(16)); // 51 s: past the renewed one
    let again = ready(&p).await;
    assert_eq!(named(&again), vec![key(&ra)], "unacked, it comes back");
    assert_eq!(again[0].receive_count, 2);
}

/// A heartbeat with a token that is not the live lease's (a wrong one, or after the lease
/// expired) is `WorkError::Store(StoreError::Fenced)`, changes nothing in the store, and does
/// not keep the message invisible.
pub async fn heartbeat_fenced_is_a_store_error(p: WorkPorts) {
    let ra = run("t1", "a", 0);
    fired(&p, &job("t1", "a"), std::slice::from_ref(&ra)).await;
    let (claimed, token, delivery) = receive_one(&p, "w1").await;
    p.clock.advance(Dur::secs(20));
    let res = p
        .work
        .heartbeat(&ra.tenant, &ra.run_id, token + 1000, &delivery.receipt, LEASE)
        .await;
    assert!(is_fenced(&res), "wrong token: expected Fenced, got {res:?}");
    assert_eq!(get(&p, &ra).await, claimed, "unchanged");
    p.clock.advance(Dur::secs(11)); // 31 s: the lease and the message's visibility are over
    let res = p
        .work
        .heartbeat(&ra.tenant, &ra.run_id, token, &delivery.receipt, LEASE)
        .await;
    assert!(is_fenced(&res), "expired lease: expected Fenced, got {res:?}");
    assert_eq!(get(&p, &ra).await, claimed, "unchanged");
    assert_eq!(
        named(&ready(&p).await),
        vec![key(&ra)],
        "a fenced heartbeat does not hold the message back"
    );
}

// ----- complete -----

/// `complete` with `Finish` ends the run as the store's completion does and removes the
/// message: the queue never delivers it again.
pub async fn complete_finish_ends_the_run_and_removes_the_message(p: WorkPorts) {
    let ra = run("t1", "a", 0);
    fired(&p, &job("t1", "a"), std::slice::from_ref(&ra)).await;
    let (_, token, delivery) = receive_one(&p, "w1").await;
    p.clock.advance(Dur::secs(5));
    let ok = result(AttemptOutcome::Succeeded, at(5));
    let settlement = Settlement {
        completion: completion(&ra, token, &ok, RunTransition::Finish(RunState::Succeeded)),
        receipt: delivery.receipt,
    };
    let done = p.work.complete(&settlement).await.expect("complete").run;
    assert_eq!(
        (done.state, done.finished_at, done.lease.clone()),
        (RunState::Succeeded, Some(at(5)), None)
    );
    assert_eq!(done.attempts.len(), 1);
    assert_eq!(
        (done.attempts[0].outcome, done.attempts[0].finished_at),
        (Some(AttemptOutcome::Succeeded), Some(at(5)))
    );
    assert_eq!(get(&p, &ra).await, done);
    p.clock.advance(Dur::secs(26)); // 31 s: past the delivery's visibility
    assert!(ready(&p).await.is_empty(), "acked: not delivered again");
    p.clock.advance(Dur::secs(3600));
    assert!(ready(&p).await.is_empty(), "acked: not delivered again");
}

/// `complete` with `Retry` leaves the run PENDING from the retry's `not_before`, and exactly
/// one message for it, delivered from that instant (not before, not twice).
pub async fn complete_retry_leaves_one_message_due_at_not_before(p: WorkPorts) {
    let ra = run("t1", "a", 0);
    fired(&p, &job("t1", "a"), std::slice::from_ref(&ra)).await;
    let (_, token, delivery) = receive_one(&p, "w1").await;
    p.clock.advance(Dur::secs(5));
    let failed = result(AttemptOutcome::Failed, at(5));
    let settlement = Settlement {
        completion: completion(&ra, token, &failed, RunTransition::Retry { not_before: at(45) }),
        receipt: delivery.receipt,
    };
    let pending = p.work.complete(&settlement).await.expect("complete").run;
    assert_eq!(
        (
            pending.state,
            pending.not_before,
            pending.lease.clone(),
            pending.finished_at
        ),
        (RunState::Pending, at(45), None, None)
    );
    assert_eq!(pending.attempts[0].outcome, Some(AttemptOutcome::Failed));
    assert_eq!(get(&p, &pending).await, pending);
    p.clock.advance(Dur::secs(39)); // 44 s: past the old delivery's visibility
    assert!(ready(&p).await.is_empty(), "nothing before the retry's not_before");
    p.clock.advance(Dur::secs(1));
    let got = ready(&p).await;
    assert_eq!(got.len(), 1, "one message for the run: {got:?}");
    assert_eq!(got[0].dispatch, Dispatch::from(&pending));
    p.queue.ack(&got[0].receipt).await.unwrap();
    p.clock.advance(Dur::secs(3600));
    assert!(ready(&p).await.is_empty(), "no second message");
}

/// A fenced completion (a stale attempt's token after the run was delivered and claimed
/// again, or a wrong one; a finish or a retry) is `WorkError::Store(StoreError::Fenced)` and
/// changes neither the run nor the message: no ack, no retry's message, and the current
/// delivery comes back after its visibility.
pub async fn complete_fenced_changes_neither_run_nor_message(p: WorkPorts) {
    let ra = run("t1", "a", 0);
    fired(&p, &job("t1", "a"), std::slice::from_ref(&ra)).await;
    let (_, stale, first) = receive_one(&p, "w1").await;
    p.clock.advance(Dur::secs(31)); // the first lease and visibility are over
    let (current, token, second) = receive_one(&p, "w2").await;
    assert!(token > stale);
    assert_eq!(second.receive_count, 2);
    p.clock.advance(Dur::secs(1));
    let ok = result(AttemptOutcome::Succeeded, at(32));
    let failed = result(AttemptOutcome::Failed, at(32));
    let attempts = [
        (stale, &first, &ok, RunTransition::Finish(RunState::Succeeded)),
        (stale, &first, &failed, RunTransition::Retry { not_before: at(32) }),
        (token + 1000, &second, &ok, RunTransition::Finish(RunState::Succeeded)),
        (
            token + 1000,
            &second,
            &failed,
            RunTransition::Retry { not_before: at(32) },
        ),
    ];
    for (t, delivery, res, next) in attempts {
        let settlement = Settlement {
            completion: completion(&ra, t, res, next),
            receipt: delivery.receipt.clone(),
        };
        let answer = p.work.complete(&settlement).await;
        assert!(
            is_fenced(&answer),
            "token {t}, {next:?}: expected Fenced, got {answer:?}"
        );
        assert_eq!(get(&p, &ra).await, current, "unchanged");
    }
    assert!(ready(&p).await.is_empty(), "still leased to w2, and no retry enqueued");
    p.clock.advance(Dur::secs(30)); // 62 s: past the second delivery's visibility (61 s)
    let again = ready(&p).await;
    assert_eq!(named(&again), vec![key(&ra)], "not acked: delivered again");
    assert_eq!(again[0].receive_count, 3);
}
