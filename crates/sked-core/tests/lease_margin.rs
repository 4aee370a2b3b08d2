//! A worker cut off from the store stops its payload before its lease can have ended in any
//! other worker's view: the stop margin (twice the clock-skew bound plus the lease-lost grace)
//! before the lease's end by its own clock. Found by simulation seed 17701, where a worker
//! that stopped its payload only at its lease's end overlapped the next attempt, started by a
//! worker whose clock was ahead.

use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::service::jobs::NewJob;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::worker::{Worker, WorkerConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp;
use sked_testkit::faults::{Chaos, FaultPlan, Faulty, SimRng};
use sked_testkit::memory::MemPorts;
use sked_testkit::sim::payload::{ExecLog, RecordingExecutor};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The clock moves in steps this long while the test watches the payload.
const STEP: Dur = Dur::millis(50);

#[tokio::test]
async fn a_worker_cut_off_from_the_store_stops_its_payload_the_margin_before_its_lease_ends() {
    // Given: a worker whose store calls can be cut off, with a 15 s lease, a 5 s grace and
    // a 500 ms clock-skew bound: its payload must be asked to stop 2 x 0.5 s + 3 s (the grace,
    // at most a fifth of the lease) before the lease ends.
    let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00Z");
    let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
    let chaos = Chaos::new(SimRng::new(1), FaultPlan::none(), clock.clone());
    let cut = Arc::new(Faulty::new(store.clone(), chaos));
    // Every store call the worker makes, its work port's included, goes through the cut.
    let ports = Ports::new(cut.clone(), ports.queue, ports.logs, ports.clock);
    let execs = ExecLog::default();
    let executor = Arc::new(RecordingExecutor::new(0, clock.clone(), clock.clone(), execs.clone()));
    let mut config = WorkerConfig::new(WorkerId::from("w"));
    config.lease = Dur::secs(15);
    config.grace = Dur::secs(5);
    config.max_clock_skew = Dur::millis(500);
    assert_eq!(config.lease_stop_margin(), Dur::secs(4));
    config.check().expect("a 15 s lease leaves room for a 4 s margin");
    let worker = Arc::new(Worker::new(ports.clone(), executor, config));

    // A payload that runs until stopped, due now, claimed by the worker.
    let at = timestamp::format(&clock.now());
    let spec = json!({"schedule": {"at": at}, "task": {"command": {"argv": ["hang"]}}, "timeout": "1h"});
    let new = NewJob {
        id: Some(JobId::from("j")),
        spec: serde_json::from_value(spec).unwrap(),
    };
    sked.create_job(&TenantId::default(), new, None).await.unwrap();
    Sweeper::new(ports.clone(), SweepSignal::default(), SweeperConfig::default())
        .sweep_once()
        .await
        .unwrap();
    let mut claimed = worker.take_work(1, Dur::ZERO).await.unwrap();
    let attempt = claimed.pop().expect("the run is claimed");
    let lease_end = attempt
        .run()
        .lease
        .as_ref()
        .expect("a claimed run holds a lease")
        .expires_at;
    let running = {
        let worker = worker.clone();
        tokio::spawn(async move { worker.run_claimed(attempt, CancellationToken::new()).await })
    };

    // When: the worker is cut off from the store for longer than its lease.
    cut.partition(clock.now() + chrono::Duration::seconds(60));
    let ended = loop {
        tokio::task::yield_now().await;
        if let Some(ended) = execs.lock().first().and_then(|e| e.ended_at) {
            break ended;
        }
        assert!(clock.now() < lease_end, "the payload still ran when its lease ended");
        clock.advance(STEP);
    };

    // Then: the payload was stopped at the margin before the lease's end (to the clock's
    // step), and the worker wrote nothing.
    let stop_at = lease_end - chrono::Duration::seconds(4);
    assert!(
        ended >= stop_at && ended <= stop_at + STEP.to_chrono(),
        "payload ended at {}, lease ends at {}",
        timestamp::format(&ended),
        timestamp::format(&lease_end)
    );
    running.await.unwrap();
    assert_eq!(execs.lock().len(), 1, "one execution");
}
