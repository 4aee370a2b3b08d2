//! The occurrence ledger through the service, on in-memory ports and a manual clock: the
//! sweeper fires and skips, runs are claimed and ended by hand as a worker would (a payload
//! that takes 2.5 s is a run claimed at its time and completed 2.5 s later), and the ledger
//! answers what became of every nominal time.

use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::ledger::{Occurrence, OccurrenceOutcome};
use sked_core::ports::{AttemptResult, ClaimOutcome, Completion, JobStoreExt, PageRequest, RunFilter, RunTransition};
use sked_core::run::{AttemptOutcome, RunState};
use sked_core::service::jobs::NewJob;
use sked_core::service::ledger::LedgerQuery;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp::Timestamp;
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::MemPorts;
use std::sync::Arc;

struct Harness {
    clock: Arc<ManualClock>,
    ports: Ports,
    sked: Sked,
    tenant: TenantId,
    /// Runs started, with the instant each one's payload ends.
    running: Vec<(sked_core::RunId, u64, Timestamp)>,
}

impl Harness {
    fn new() -> Self {
        let MemPorts { ports, clock, .. } = MemPorts::at("2026-12-01T10:00:00Z");
        let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
        Harness {
            clock,
            ports,
            sked,
            tenant: TenantId::default(),
            running: Vec::new(),
        }
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    async fn create(&self, id: &str, spec: serde_json::Value) {
        let new = NewJob {
            id: Some(JobId::from(id)),
            spec: serde_json::from_value(spec).unwrap(),
        };
        self.sked.create_job(&self.tenant, new, None).await.unwrap();
    }

    async fn sweep(&self) {
        Sweeper::new(self.ports.clone(), SweepSignal::default(), SweeperConfig::default())
            .sweep_once()
            .await
            .unwrap();
    }

    /// One worker with one slot: ends the payloads whose time has come, then starts the due
    /// PENDING runs of `job` (oldest first) for `payload` each, while its slot is free.
    async fn work(&mut self, job: &str, payload: Dur) {
        let now = self.now();
        let store = &self.ports.store;
        let mut still = Vec::new();
        for (run_id, token, ends) in std::mem::take(&mut self.running) {
            if ends > now {
                still.push((run_id, token, ends));
                continue;
            }
            let result = AttemptResult {
                finished_at: ends,
                outcome: AttemptOutcome::Succeeded,
                exit_code: Some(0),
                http_status: None,
                error: None,
                log_bytes: 0,
                log_truncated: false,
            };
            let done = Completion {
                tenant: self.tenant.clone(),
                run_id,
                token,
                result,
                next: RunTransition::Finish(RunState::Succeeded),
                only_if_expired_by: None,
            };
            store.complete(&done).await.unwrap();
        }
        self.running = still;
        if !self.running.is_empty() {
            return;
        }
        let filter = RunFilter {
            job_id: Some(JobId::from(job)),
            state: Some(RunState::Pending),
            ..RunFilter::default()
        };
        let page = PageRequest {
            cursor: None,
            limit: 1000,
        };
        let mut pending = self.sked.list_runs(&self.tenant, &filter, &page).await.unwrap().items;
        pending.retain(|r| r.not_before <= now);
        if let Some(run) = pending.last() {
            let worker = WorkerId::from("w");
            let lease = now + chrono::Duration::seconds(30);
            if let ClaimOutcome::Claimed { token, .. } = store
                .claim_one(&self.tenant, &run.run_id, &worker, now, lease)
                .await
                .unwrap()
            {
                self.running
                    .push((run.run_id.clone(), token, now + payload.to_chrono()));
            }
        }
    }

    /// Every occurrence of `job` (newest first), through pages of 7.
    async fn ledger(&self, job: &str) -> Vec<Occurrence> {
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let q = LedgerQuery {
                limit: 7,
                cursor,
                ..LedgerQuery::default()
            };
            let page = self
                .sked
                .occurrences(&self.tenant, &JobId::from(job), &q)
                .await
                .unwrap();
            out.extend(page.items);
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return out,
            }
        }
    }
}

/// The nominal times of `ledger`, oldest first, must be consecutive seconds: no gap, no repeat.
fn assert_every_second(ledger: &[Occurrence]) {
    let times: Vec<Timestamp> = ledger.iter().rev().map(|o| o.scheduled_for).collect();
    for pair in times.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            chrono::Duration::seconds(1),
            "a gap or a repeat between {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
}

fn summary(ledger: &[Occurrence]) -> Vec<(OccurrenceOutcome, Option<&str>)> {
    ledger.iter().rev().map(|o| (o.outcome, o.reason.as_deref())).collect()
}

/// An every-1s job with `overlap: forbid` whose payload takes 2.5 s: every nominal time once,
/// consecutive, some fired and the ones that came while a run was going skipped with `overlap`.
#[tokio::test]
async fn every_second_with_a_payload_of_two_and_a_half_seconds_fires_some_and_skips_the_rest_for_overlap() {
    let mut h = Harness::new();
    h.create(
        "tick",
        json!({"schedule": {"every": "1s"}, "overlap": "forbid", "task": {"command": {"argv": ["sleep"]}}}),
    )
    .await;
    for _ in 0..40 {
        h.clock.advance(Dur::millis(250));
        h.sweep().await;
        h.work("tick", Dur::millis(2_500)).await;
    }
    let ledger = h.ledger("tick").await;
    assert!(ledger.len() >= 9, "{ledger:?}");
    assert_every_second(&ledger);
    let got = summary(&ledger);
    assert!(got.contains(&(OccurrenceOutcome::Fired, None)), "{got:?}");
    assert!(got.contains(&(OccurrenceOutcome::Skipped, Some("overlap"))), "{got:?}");
    assert!(
        got.iter().all(|o| matches!(
            o,
            (OccurrenceOutcome::Fired, None) | (OccurrenceOutcome::Skipped, Some("overlap"))
        )),
        "{got:?}"
    );
    // A fired one names its run and how late it started.
    let fired = ledger.iter().find(|o| o.outcome == OccurrenceOutcome::Fired).unwrap();
    assert!(fired.run_id.is_some() && fired.lag_ms.is_some(), "{fired:?}");
}

/// A job paused for 5 s: the occurrences that fell while it was paused show as skipped with
/// `paused` (whatever policy dropped them at the resume), the others fired, no gap.
#[tokio::test]
async fn a_job_paused_for_five_seconds_shows_the_occurrences_it_missed_as_paused() {
    let mut h = Harness::new();
    h.create(
        "tick",
        json!({"schedule": {"every": "1s"}, "task": {"command": {"argv": ["ok"]}}}),
    )
    .await;
    let step = async |h: &mut Harness| {
        h.clock.advance(Dur::millis(500));
        h.work("tick", Dur::millis(100)).await;
        h.sweep().await;
        h.work("tick", Dur::millis(100)).await;
    };
    for _ in 0..6 {
        step(&mut h).await;
    }
    let paused_at = h.now();
    h.sked.pause_job(&h.tenant, &"tick".into()).await.unwrap();
    for _ in 0..10 {
        step(&mut h).await;
    }
    let resumed_at = h.now();
    h.sked.resume_job(&h.tenant, &"tick".into()).await.unwrap();
    for _ in 0..6 {
        step(&mut h).await;
    }
    let ledger = h.ledger("tick").await;
    assert_every_second(&ledger);
    let during: Vec<&Occurrence> = ledger
        .iter()
        .filter(|o| o.scheduled_for > paused_at && o.scheduled_for < resumed_at)
        .collect();
    assert!(during.len() >= 4, "{ledger:?}");
    let skipped_while_paused = during
        .iter()
        .filter(|o| o.outcome == OccurrenceOutcome::Skipped)
        .count();
    assert!(skipped_while_paused >= 4, "{during:?}");
    assert!(
        during
            .iter()
            .filter(|o| o.outcome == OccurrenceOutcome::Skipped)
            .all(|o| o.reason.as_deref() == Some("paused")),
        "{during:?}"
    );
    assert!(
        ledger
            .iter()
            .filter(|o| o.scheduled_for <= paused_at || o.scheduled_for > resumed_at)
            .all(|o| o.outcome == OccurrenceOutcome::Fired),
        "{ledger:?}"
    );
}

/// sked down for three minutes (no sweep): the occurrences missed by more than the misfire
/// grace follow the misfire policy (`skip`: each skipped with `misfire`); the later ones fire
/// late; every nominal time once. `why` explains the one nearest an instant in a sentence.
#[tokio::test]
async fn a_server_stopped_for_minutes_shows_the_missed_occurrences_with_the_misfire_policy() {
    let mut h = Harness::new();
    h.create(
        "ten",
        json!({"schedule": {"every": "10s"}, "overlap": "allow", "misfire": "skip", "task": {"command": {"argv": ["ok"]}}}),
    )
    .await;
    for _ in 0..3 {
        h.clock.advance(Dur::secs(10));
        h.sweep().await;
        h.work("ten", Dur::millis(100)).await;
    }
    let stopped_at = h.now();
    h.clock.advance(Dur::secs(180));
    h.sweep().await;
    for _ in 0..10 {
        h.clock.advance(Dur::millis(200));
        h.work("ten", Dur::millis(10)).await;
    }
    let grace_edge = h.now() - chrono::Duration::seconds(62);
    let ledger = h.ledger("ten").await;
    let times: Vec<Timestamp> = ledger.iter().rev().map(|o| o.scheduled_for).collect();
    for pair in times.windows(2) {
        assert_eq!(pair[1] - pair[0], chrono::Duration::seconds(10), "{times:?}");
    }
    let missed: Vec<&Occurrence> = ledger
        .iter()
        .filter(|o| o.scheduled_for > stopped_at && o.scheduled_for < grace_edge)
        .collect();
    assert!(missed.len() >= 10, "{ledger:?}");
    assert!(
        missed
            .iter()
            .all(|o| (o.outcome, o.reason.as_deref()) == (OccurrenceOutcome::Skipped, Some("misfire"))),
        "{missed:?}"
    );
    assert!(
        ledger
            .iter()
            .any(|o| o.scheduled_for > grace_edge && o.outcome == OccurrenceOutcome::Fired),
        "{ledger:?}"
    );

    let why = h
        .sked
        .why(
            &h.tenant,
            &"ten".into(),
            missed[0].scheduled_for + chrono::Duration::seconds(3),
        )
        .await
        .unwrap();
    assert_eq!(why.occurrence, *missed[0]);
    assert!(
        why.explanation.contains("was skipped") && why.explanation.contains("misfire policy is skip"),
        "{}",
        why.explanation
    );
    let first = ledger.last().unwrap();
    let why = h.sked.why(&h.tenant, &"ten".into(), first.scheduled_for).await.unwrap();
    assert!(why.explanation.contains("fired as run"), "{}", why.explanation);
    assert!(
        h.sked
            .why(&TenantId::from("other"), &"ten".into(), h.now())
            .await
            .is_err(),
        "another tenant's job is not found"
    );
}

/// An occurrence older than its job (a one-shot `at` in the past) is in the ledger by default.
#[tokio::test]
async fn an_occurrence_before_the_job_was_created_is_listed() {
    let mut h = Harness::new();
    let at = h.now() - chrono::Duration::minutes(5);
    h.create(
        "late",
        json!({"schedule": {"at": sked_core::timestamp::format(&at)}, "task": {"command": {"argv": ["ok"]}}}),
    )
    .await;
    h.sweep().await;
    h.work("late", Dur::millis(10)).await;
    let ledger = h.ledger("late").await;
    assert_eq!(ledger.len(), 1, "{ledger:?}");
    assert_eq!(
        (ledger[0].scheduled_for, ledger[0].outcome),
        (at, OccurrenceOutcome::Fired)
    );
}
