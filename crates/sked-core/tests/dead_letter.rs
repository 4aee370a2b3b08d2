//! `service::dead_letter`: a run whose message was dead-lettered ends FAILED with the reason,
//! unless something else still owns it.

use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{RunId, TenantId, WorkerId};
use sked_core::ports::{AttemptResult, ClaimOutcome, Completion, JobStore, JobStoreExt, RunTransition};
use sked_core::run::{AttemptOutcome, Run, RunState};
use sked_core::service::Ports;
use sked_core::service::dead_letter::{DLQ_WORKER, DeadLetterOutcome, dead_letter, dead_letter_reason};
use sked_core::timestamp;
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemPorts, MemStore, fire_one_shot_now};
use std::sync::Arc;

struct Harness {
    clock: Arc<ManualClock>,
    store: Arc<MemStore>,
    ports: Ports,
    tenant: TenantId,
}

impl Harness {
    /// A one-shot job `job` with `max_retries`, fired: one PENDING run, ready now.
    async fn with_pending_run(max_retries: u32) -> (Harness, RunId) {
        let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00Z");
        let h = Harness {
            clock,
            store,
            ports,
            tenant: TenantId::default(),
        };
        let run_id = fire_one_shot_now(&h.ports, json!({"max_retries": max_retries})).await;
        (h, run_id)
    }

    async fn dead_letter(&self, run_id: &RunId) -> DeadLetterOutcome {
        dead_letter(&self.ports, &self.tenant, run_id, &dead_letter_reason(5))
            .await
            .unwrap()
    }

    async fn claim(&self, run_id: &RunId, worker: &str, lease: Dur) -> u64 {
        let now = self.clock.now();
        match self
            .store
            .claim_one(
                &self.tenant,
                run_id,
                &WorkerId::from(worker),
                now,
                now + lease.to_chrono(),
            )
            .await
            .unwrap()
        {
            ClaimOutcome::Claimed { token, .. } => token,
            other => panic!("not claimed: {other:?}"),
        }
    }

    /// Receives and acks the run's message (the queue's only one): as if it were dead-lettered.
    async fn take_its_message(&self, run_id: &RunId) {
        let got = self.ports.queue.receive(10, Dur::secs(30), Dur::ZERO).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(&got[0].dispatch.run_id, run_id);
        self.ports.queue.ack(&got[0].receipt).await.unwrap();
    }

    /// The queue holds one message of the run, received at `due` and not before.
    async fn assert_message_due(&self, run_id: &RunId, due: timestamp::Timestamp) {
        let receive = || self.ports.queue.receive(10, Dur::secs(30), Dur::ZERO);
        assert!(receive().await.unwrap().is_empty(), "nothing before its time");
        self.clock.set(due);
        let got = receive().await.unwrap();
        assert_eq!(got.len(), 1, "a new message");
        assert_eq!(&got[0].dispatch.run_id, run_id);
        assert_eq!(got[0].dispatch.not_before, due);
    }

    async fn run(&self, run_id: &RunId) -> Run {
        self.store.get_run(&self.tenant, run_id).await.unwrap().unwrap()
    }
}

#[tokio::test]
async fn given_a_pending_run_when_dead_lettered_then_it_ends_failed_with_the_reason_on_a_last_attempt() {
    let (h, run_id) = Harness::with_pending_run(3).await;
    let DeadLetterOutcome::Failed(run) = h.dead_letter(&run_id).await else {
        panic!("not failed");
    };
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(run.finished_at, Some(h.clock.now()));
    let last = run.attempts.last().unwrap();
    assert_eq!(last.worker, WorkerId::from(DLQ_WORKER));
    assert_eq!(last.outcome, Some(AttemptOutcome::Failed));
    assert_eq!(last.error.as_deref(), Some("dead-lettered after 5 receives"));
    assert_eq!(run.lease, None);
    assert_eq!(h.run(&run_id).await, run, "stored as answered");
}

#[tokio::test]
async fn given_a_run_whose_worker_vanished_when_dead_lettered_then_the_lost_attempt_is_closed_first() {
    let (h, run_id) = Harness::with_pending_run(3).await;
    h.claim(&run_id, "w1", Dur::secs(15)).await;
    h.clock.advance(Dur::secs(20));
    let DeadLetterOutcome::Failed(run) = h.dead_letter(&run_id).await else {
        panic!("not failed");
    };
    let outcomes: Vec<_> = run.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(
        outcomes,
        vec![Some(AttemptOutcome::WorkerLost), Some(AttemptOutcome::Failed)]
    );
    assert_eq!(run.state, RunState::Failed);
}

#[tokio::test]
async fn given_a_run_with_no_attempt_left_when_dead_lettered_then_it_ends_by_the_claim_rules() {
    let (h, run_id) = Harness::with_pending_run(0).await;
    h.claim(&run_id, "w1", Dur::secs(15)).await;
    h.clock.advance(Dur::secs(20));
    let DeadLetterOutcome::AlreadyEnded(run) = h.dead_letter(&run_id).await else {
        panic!("not ended");
    };
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(run.attempt_count(), 1, "no attempt beyond max_attempts");
}

#[tokio::test]
async fn given_a_run_under_a_live_lease_when_dead_lettered_then_it_is_left_to_its_worker_with_a_message_for_the_lease_end()
 {
    let (h, run_id) = Harness::with_pending_run(3).await;
    h.take_its_message(&run_id).await;
    h.claim(&run_id, "w1", Dur::secs(15)).await;
    let outcome = h.dead_letter(&run_id).await;
    let DeadLetterOutcome::StillRunning(until) = outcome else {
        panic!("not left running: {outcome:?}");
    };
    assert_eq!(h.run(&run_id).await.state, RunState::Running);
    h.assert_message_due(&run_id, until).await;
}

#[tokio::test]
async fn given_a_run_waiting_out_a_backoff_when_dead_lettered_then_it_is_left_with_a_message_for_its_time() {
    let (h, run_id) = Harness::with_pending_run(3).await;
    h.take_its_message(&run_id).await;
    let token = h.claim(&run_id, "w1", Dur::secs(15)).await;
    let now = h.clock.now();
    let retry_at = now + chrono::Duration::seconds(60);
    let failed = AttemptResult {
        finished_at: now,
        outcome: AttemptOutcome::Failed,
        exit_code: Some(1),
        http_status: None,
        error: None,
        log_bytes: 0,
        log_truncated: false,
    };
    let completion = Completion {
        tenant: h.tenant.clone(),
        run_id: run_id.clone(),
        token,
        result: failed,
        next: RunTransition::Retry { not_before: retry_at },
        only_if_expired_by: None,
    };
    h.store.complete(&completion).await.unwrap();
    assert_eq!(h.dead_letter(&run_id).await, DeadLetterOutcome::Waiting(retry_at));
    assert_eq!(h.run(&run_id).await.state, RunState::Pending);
    h.assert_message_due(&run_id, retry_at).await;
}

#[tokio::test]
async fn given_an_ended_or_unknown_run_when_dead_lettered_then_nothing_changes() {
    let (h, run_id) = Harness::with_pending_run(3).await;
    h.dead_letter(&run_id).await;
    let before = h.run(&run_id).await;
    assert!(matches!(
        h.dead_letter(&run_id).await,
        DeadLetterOutcome::AlreadyEnded(_)
    ));
    assert_eq!(h.run(&run_id).await, before);
    let unknown = RunId::from("nope@20261201T100000.000Z");
    assert_eq!(h.dead_letter(&unknown).await, DeadLetterOutcome::Gone);
}
