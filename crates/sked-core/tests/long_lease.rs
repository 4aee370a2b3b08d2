//! A worker with a long lease (`WorkerConfig::long_lease`) heartbeats a long attempt less
//! often once it has run the long lease's `after`: its heartbeats ask for the long lease and
//! come every third of it, so the store holds the run for longer between fewer writes. Before
//! that point the attempt is held exactly as without one.

use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::ports::JobStore;
use sked_core::service::jobs::NewJob;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::worker::{LongLease, Worker, WorkerConfig};
use sked_core::service::{Sked, SkedConfig, SweepSignal};
use sked_core::timestamp::{self, Timestamp};
use sked_testkit::memory::MemPorts;
use sked_testkit::sim::payload::{ExecLog, RecordingExecutor};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The clock's step while the test watches the run's lease.
const STEP: Dur = Dur::secs(1);

/// What the store's lease of the run looked like over one stretch of the attempt.
#[derive(Default, Debug)]
struct Held {
    /// Times the lease's end moved (heartbeats written).
    renewals: usize,
    /// The shortest and the longest time left on the lease, seen at each step.
    least_left: Option<Dur>,
    most_left: Option<Dur>,
}

impl Held {
    fn saw(&mut self, left: Dur, renewed: bool) {
        self.renewals += usize::from(renewed);
        self.least_left = Some(self.least_left.map_or(left, |l| l.min(left)));
        self.most_left = Some(self.most_left.map_or(left, |m| m.max(left)));
    }
}

#[tokio::test]
async fn a_long_attempt_moves_to_the_long_lease_and_heartbeats_a_third_of_it_apart() {
    // Given: a worker with a 15 s lease that moves to a 60 s lease 5 minutes into an attempt,
    // and a payload that runs until stopped.
    let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00Z");
    let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
    let execs = ExecLog::default();
    let executor = Arc::new(RecordingExecutor::new(0, clock.clone(), clock.clone(), execs.clone()));
    let mut config = WorkerConfig::new(WorkerId::from("w"));
    config.lease = Dur::secs(15);
    config.long_lease = Some(LongLease {
        after: Dur::secs(300),
        lease: Dur::secs(60),
    });
    config.check().unwrap();
    let worker = Arc::new(Worker::new(ports.clone(), executor, config));
    let at = timestamp::format(&clock.now());
    let spec = json!({"schedule": {"at": at}, "task": {"command": {"argv": ["hang"]}}, "timeout": "1h"});
    let new = NewJob {
        id: Some(JobId::from("long")),
        spec: serde_json::from_value(spec).unwrap(),
    };
    let tenant = TenantId::default();
    sked.create_job(&tenant, new, None).await.unwrap();
    Sweeper::new(ports.clone(), SweepSignal::default(), SweeperConfig::default())
        .sweep_once()
        .await
        .unwrap();
    let attempt = worker.take_work(1, Dur::ZERO).await.unwrap().pop().expect("claimed");
    let run_id = attempt.run().run_id.clone();
    let started = clock.now();
    let running = {
        let worker = worker.clone();
        tokio::spawn(async move { worker.run_claimed(attempt, CancellationToken::new()).await })
    };
    let lease_end = async || -> Timestamp {
        let run = store.get_run(&tenant, &run_id).await.unwrap().expect("the run");
        run.lease.expect("a RUNNING run holds a lease").expires_at
    };

    // When: the attempt runs 10 minutes, watched a second at a time.
    let (mut short, mut long) = (Held::default(), Held::default());
    let mut last_end = lease_end().await;
    while clock.now() < started + chrono::Duration::minutes(10) {
        clock.advance(STEP);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let now = clock.now();
        let end = lease_end().await;
        let left = Dur::millis((end - now).num_milliseconds().max(0) as u64);
        let ran = now - started;
        // The first heartbeat on the long lease is the first at or after 5 minutes.
        let stretch = if ran < chrono::Duration::seconds(300) {
            Some(&mut short)
        } else if ran > chrono::Duration::seconds(305) {
            Some(&mut long)
        } else {
            None
        };
        if let Some(held) = stretch {
            held.saw(left, end != last_end);
        }
        last_end = end;
    }
    running.abort();

    // Then: the first 5 minutes on the 15 s lease, a heartbeat every 5 s; the next 5 on the
    // 60 s lease, a heartbeat every 20 s — never less than 40 s left on it.
    assert!(short.most_left <= Some(Dur::secs(15)), "{short:?}");
    assert!((58..=60).contains(&short.renewals), "{short:?}");
    assert!(long.least_left >= Some(Dur::secs(39)), "{long:?}");
    assert!(long.most_left <= Some(Dur::secs(60)), "{long:?}");
    assert!((14..=15).contains(&long.renewals), "{long:?}");
    assert_eq!(execs.lock().len(), 1, "one execution");
}
