//! Direct firing (`SkedConfig::fire_within`): a create, replace or resume that leaves a job due
//! within the window fires it at once, through the sweeper's own path — and a sweep after it
//! fires nothing twice. With the window zero (the local default) nothing changes.

use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId};
use sked_core::run::RunState;
use sked_core::service::jobs::NewJob;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp::{self, Timestamp};
use sked_core::{Job, JobState};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemPorts, MemStore};
use std::sync::Arc;

const WINDOW: Dur = Dur::secs(600);

struct Harness {
    clock: Arc<ManualClock>,
    store: Arc<MemStore>,
    ports: Ports,
    sked: Sked,
    tenant: TenantId,
}

impl Harness {
    fn new(fire_within: Dur) -> Self {
        let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00Z");
        let config = SkedConfig {
            fire_within,
            ..SkedConfig::default()
        };
        let sked = Sked::new(ports.clone(), config, SweepSignal::default());
        Harness {
            clock,
            store,
            ports,
            sked,
            tenant: TenantId::default(),
        }
    }

    fn in_secs(&self, secs: i64) -> Timestamp {
        self.clock.now() + chrono::Duration::seconds(secs)
    }

    fn at(&self, secs: i64) -> serde_json::Value {
        let at = timestamp::format(&self.in_secs(secs));
        json!({"schedule": {"at": at}, "task": {"command": {"argv": ["true"]}}, "priority": 8})
    }

    async fn create(&self, id: &str, spec: serde_json::Value) -> Job {
        let new = NewJob {
            id: Some(JobId::from(id)),
            spec: serde_json::from_value(spec).unwrap(),
        };
        self.sked.create_job(&self.tenant, new, None).await.unwrap().job
    }

    /// Sweeps with the same look-ahead as the window, as the AWS sweeper does.
    async fn sweep(&self) -> usize {
        let config = SweeperConfig {
            lookahead: WINDOW,
            ..SweeperConfig::default()
        };
        let sweeper = Sweeper::new(self.ports.clone(), SweepSignal::default(), config);
        sweeper.sweep_once().await.unwrap().fired
    }

    /// Run ids the queue hands out once the clock is at `at`.
    async fn delivered_at(&self, at: Timestamp) -> Vec<String> {
        self.clock.set(at);
        let got = self.ports.queue.receive(100, Dur::secs(30), Dur::ZERO).await.unwrap();
        got.into_iter().map(|d| d.dispatch.run_id.to_string()).collect()
    }
}

#[tokio::test]
async fn given_no_window_when_a_job_is_created_due_soon_then_only_the_sweeper_fires_it() {
    let h = Harness::new(Dur::ZERO);
    let job = h.create("soon", h.at(60)).await;
    assert_eq!(job.state, JobState::Active);
    assert_eq!(h.store.run_count(), 0, "the API call wrote no run");
    assert!(h.delivered_at(h.in_secs(60)).await.is_empty());
}

#[tokio::test]
async fn given_a_window_when_a_job_due_within_it_is_created_then_its_run_is_written_and_enqueued_at_once() {
    let h = Harness::new(WINDOW);
    let due = h.in_secs(120);
    let job = h.create("soon", h.at(120)).await;

    // The answer already shows the job moved on, as after a sweep (same version).
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.next_fire_at, None);
    assert_eq!(job.version, 1);
    let runs = h.store.all_runs();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].state, runs[0].not_before), (RunState::Pending, due));

    // The sweeper finds nothing left to do: one run for the occurrence.
    assert_eq!(h.sweep().await, 0);
    assert_eq!(h.store.run_count(), 1);

    // The queue holds it back until its time, then hands it out.
    assert!(h.delivered_at(h.in_secs(60)).await.is_empty());
    assert_eq!(h.delivered_at(due).await, vec![runs[0].run_id.to_string()]);
}

#[tokio::test]
async fn given_a_window_when_a_job_is_due_beyond_it_then_the_sweeper_fires_it_later() {
    let h = Harness::new(WINDOW);
    let job = h.create("later", h.at(3600)).await;
    assert_eq!(job.state, JobState::Active);
    assert_eq!(h.store.run_count(), 0);

    h.clock.set(h.in_secs(3000));
    assert_eq!(h.sweep().await, 1, "within the look-ahead now");
}

#[tokio::test]
async fn given_a_window_when_a_replace_moves_a_job_into_it_then_the_replace_fires_it() {
    let h = Harness::new(WINDOW);
    h.create("moved", h.at(3600)).await;
    let spec = serde_json::from_value(h.at(30)).unwrap();
    let job = h
        .sked
        .replace_job(&h.tenant, &JobId::from("moved"), spec, None)
        .await
        .unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.version, 2);
    assert_eq!(h.store.run_count(), 1);
    assert_eq!(h.delivered_at(h.in_secs(30)).await.len(), 1);
}

#[tokio::test]
async fn given_a_window_when_a_paused_job_due_within_it_is_resumed_then_the_resume_fires_it() {
    let h = Harness::new(WINDOW);
    let id = JobId::from("held");
    // Paused before its first occurrence comes within the window.
    h.create("held", h.at(3600)).await;
    h.sked.pause_job(&h.tenant, &id).await.unwrap();
    h.clock.set(h.in_secs(3300));
    assert_eq!(h.sweep().await, 0, "paused jobs do not fire");

    let job = h.sked.resume_job(&h.tenant, &id).await.unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(h.store.run_count(), 1);
}

#[tokio::test]
async fn given_a_window_when_a_batch_is_created_then_only_the_jobs_due_within_it_fire() {
    let h = Harness::new(WINDOW);
    let news = [("a", 10), ("b", 7200), ("c", 590)]
        .into_iter()
        .map(|(id, secs)| NewJob {
            id: Some(JobId::from(id)),
            spec: serde_json::from_value(h.at(secs)).unwrap(),
        })
        .collect();
    let jobs = h.sked.create_jobs(&h.tenant, news, None).await.unwrap();
    let states: Vec<_> = jobs.iter().map(|j| (j.id.to_string(), j.state)).collect();
    assert_eq!(
        states,
        vec![
            ("a".to_string(), JobState::Completed),
            ("b".to_string(), JobState::Active),
            ("c".to_string(), JobState::Completed),
        ]
    );
    assert_eq!(h.store.run_count(), 2);
    assert_eq!(h.delivered_at(h.in_secs(600)).await.len(), 2);
}

#[tokio::test]
async fn given_a_window_when_a_frequent_recurring_job_is_created_then_each_coming_occurrence_gets_its_own_run() {
    // Found with `make local-aws`: an `every 5s` job (overlap `forbid` by default) got one
    // run, at the far end of the window, and every later occurrence was skipped.
    let h = Harness::new(Dur::secs(60));
    let spec = json!({"schedule": {"every": "5s"}, "task": {"command": {"argv": ["true"]}}});
    h.create("often", spec).await;
    let mut runs: Vec<Timestamp> = h.store.all_runs().iter().map(|r| r.scheduled_for).collect();
    runs.sort();
    let expected: Vec<Timestamp> = (1..=12).map(|k| h.in_secs(5 * k)).collect();
    assert_eq!(
        runs, expected,
        "one run per occurrence in the next minute, the first 5 s from now"
    );
    // The sweeper's look-ahead (10 min) goes further: it adds the rest, at most
    // MAX_RUNS_PER_FIRING a sweep, and nothing twice.
    assert_eq!(h.sweep().await, sked_core::firing::MAX_RUNS_PER_FIRING);
    assert_eq!(h.sweep().await, 108 - sked_core::firing::MAX_RUNS_PER_FIRING);
    assert_eq!(h.sweep().await, 0);
    assert_eq!(h.store.run_count(), 120);
}
