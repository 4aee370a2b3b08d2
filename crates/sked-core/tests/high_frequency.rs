//! High-frequency schedules stay cheap: a per-second cron created with the AWS
//! deployment's windows fires a bounded number of runs in the create call, successive sweeps
//! keep it fed a bounded batch at a time, and across all of them every occurrence becomes
//! exactly one run, delivered once — no gap, no duplicate. And one API call stops firing
//! directly once it has spent its time budget, leaving the rest to the sweeper.

use serde_json::json;
use sked_core::duration::Dur;
use sked_core::firing::MAX_RUNS_PER_FIRING;
use sked_core::ids::{JobId, TenantId};
use sked_core::ports::Clock;
use sked_core::service::jobs::{DIRECT_FIRE_BUDGET, DIRECT_FIRE_CHUNK, NewJob};
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp::{self, Timestamp};
use sked_core::{Job, JobState};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemPorts, MemStore};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The AWS sweeper's look-ahead (`sked_aws::env::DEFAULT_LOOKAHEAD`).
const LOOKAHEAD: Dur = Dur::secs(600);
/// The AWS API function's direct-firing window (`sked_aws::env::DIRECT_FIRE_WITHIN`).
const DIRECT_WINDOW: Dur = Dur::secs(90);
/// The AWS sweeper's tick.
const TICK: Dur = Dur::secs(60);

fn per_second() -> serde_json::Value {
    json!({"schedule": {"cron": "*/1 * * * * *"}, "task": {"command": {"argv": ["true"]}}})
}

struct Harness {
    clock: Arc<ManualClock>,
    store: Arc<MemStore>,
    ports: Ports,
    sked: Sked,
    tenant: TenantId,
}

impl Harness {
    fn new(fire_within: Dur) -> Self {
        let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00.250Z");
        Self::over(ports, clock, store, fire_within)
    }

    fn over(ports: Ports, clock: Arc<ManualClock>, store: Arc<MemStore>, fire_within: Dur) -> Self {
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

    async fn create(&self, id: &str, spec: serde_json::Value) -> Job {
        let new = NewJob {
            id: Some(JobId::from(id)),
            spec: serde_json::from_value(spec).unwrap(),
        };
        self.sked.create_job(&self.tenant, new, None).await.unwrap().job
    }

    /// One sweep with the AWS look-ahead: (runs fired, more due now).
    async fn sweep(&self) -> (usize, bool) {
        let config = SweeperConfig {
            lookahead: LOOKAHEAD,
            ..SweeperConfig::default()
        };
        let sweeper = Sweeper::new(self.ports.clone(), SweepSignal::default(), config);
        let report = sweeper.sweep_once().await.unwrap();
        (report.fired, report.more)
    }

    /// Receives (and acks) every message the queue hands out now; counts each run id.
    async fn drain_queue(&self, seen: &mut BTreeMap<String, usize>) {
        loop {
            let got = self.ports.queue.receive(100, Dur::secs(30), Dur::ZERO).await.unwrap();
            if got.is_empty() {
                return;
            }
            for delivery in got {
                *seen.entry(delivery.dispatch.run_id.to_string()).or_default() += 1;
                self.ports.queue.ack(&delivery.receipt).await.unwrap();
            }
        }
    }

    /// The nominal times of the (one) job's runs, in order, asserting none appears twice.
    fn run_times(&self) -> Vec<Timestamp> {
        let mut times: Vec<Timestamp> = self.store.all_runs().iter().map(|r| r.scheduled_for).collect();
        times.sort();
        let before = times.len();
        times.dedup();
        assert_eq!(times.len(), before, "two runs for one occurrence");
        times
    }
}

fn secs(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

#[tokio::test]
async fn a_per_second_cron_created_with_the_whole_look_ahead_as_window_fires_at_most_the_bound() {
    // What the API function did before its firing was bounded: the direct window was the look-ahead.
    let h = Harness::new(LOOKAHEAD);
    let job = h.create("every-second", per_second()).await;
    assert_eq!(
        h.store.run_count(),
        MAX_RUNS_PER_FIRING,
        "not the 600 within the window"
    );
    let first = timestamp::parse("2026-12-01T10:00:01Z").unwrap();
    assert_eq!(job.next_fire_at, Some(first + secs(MAX_RUNS_PER_FIRING as i64)));
    assert_eq!(job.state, JobState::Active);
    assert_eq!(job.version, 1);
}

#[tokio::test]
async fn a_per_second_cron_is_fed_by_successive_sweeps_without_gaps_or_duplicates() {
    let h = Harness::new(DIRECT_WINDOW);
    let t0 = h.clock.now();
    let first = timestamp::parse("2026-12-01T10:00:01Z").unwrap();

    // The create fires what comes before the next tick and a margin: 90 runs, not 600.
    let job = h.create("every-second", per_second()).await;
    assert_eq!(h.store.run_count(), 90);
    assert_eq!(job.next_fire_at, Some(first + secs(90)));

    let mut delivered = BTreeMap::new();
    let mut per_sweep = Vec::new();
    for tick in 1..=20 {
        let now = h.clock.advance(TICK);
        // Everything due before this tick was fired before it: the job never ran dry.
        let times = h.run_times();
        assert!(
            *times.last().unwrap() >= now,
            "tick {tick}: runs end at {}, before now",
            timestamp::format(times.last().unwrap())
        );
        h.drain_queue(&mut delivered).await;

        let (fired, more) = h.sweep().await;
        assert!(fired <= MAX_RUNS_PER_FIRING, "tick {tick}: {fired} runs in one sweep");
        assert!(!more, "only ahead-of-time occurrences were left: nothing is due now");
        per_sweep.push(fired);

        // Fed past the next tick, and at most the look-ahead out.
        let job = h.sked.get_job(&h.tenant, &JobId::from("every-second")).await.unwrap();
        let next = job.next_fire_at.unwrap();
        assert!(
            next > now + TICK.to_chrono(),
            "tick {tick}: fed only up to {}",
            timestamp::format(&next)
        );
        assert!(next <= now + LOOKAHEAD.to_chrono() + secs(1));
    }
    // The look-ahead fills at 96 a sweep, then a tick's worth (60) each.
    assert_eq!(per_sweep[0], MAX_RUNS_PER_FIRING);
    assert_eq!(*per_sweep.last().unwrap(), 60);

    // Every second from the first occurrence on has exactly one run, and each run that came
    // due was delivered exactly once.
    let now = h.clock.now();
    let times = h.run_times();
    let expected: Vec<Timestamp> = (0..times.len() as i64).map(|i| first + secs(i)).collect();
    assert_eq!(times, expected, "one run a second, no gap");
    let due: Vec<String> = h
        .store
        .all_runs()
        .iter()
        .filter(|r| r.not_before <= now)
        .map(|r| r.run_id.to_string())
        .collect();
    assert_eq!(due.len() as i64, (now - first).num_seconds() + 1);
    assert!(
        due.iter().all(|id| delivered.get(id) == Some(&1)),
        "each due run delivered once"
    );
    assert_eq!(delivered.len(), due.len(), "nothing delivered ahead of its time");
    assert!(now - t0 == secs(20 * 60));
}

/// A clock that moves forward `step` on every read: an API call that takes time.
struct SlowClock {
    inner: Arc<ManualClock>,
    step: Dur,
}

#[async_trait::async_trait]
impl Clock for SlowClock {
    fn now(&self) -> Timestamp {
        self.inner.advance(self.step)
    }
    async fn sleep_until(&self, deadline: Timestamp) {
        self.inner.sleep_until(deadline).await
    }
}

/// A batch's due jobs fire a chunk at a time ([`DIRECT_FIRE_CHUNK`], each chunk one store
/// call); once the call has spent its budget it starts no more chunks, and the sweeper fires
/// the jobs left.
#[tokio::test]
async fn a_batch_create_stops_firing_directly_at_its_budget_and_the_sweeper_fires_the_rest() {
    let MemPorts { ports, clock, store } = MemPorts::at("2026-12-01T10:00:00Z");
    // Every clock read takes a third of the budget.
    let step = Dur::millis(DIRECT_FIRE_BUDGET.as_millis() as u64 / 3);
    let total = DIRECT_FIRE_CHUNK * 4;
    let slow = Arc::new(SlowClock {
        inner: clock.clone(),
        step,
    });
    let ports = Ports::new(ports.store, ports.queue, ports.logs, slow);
    let h = Harness::over(ports, clock, store, DIRECT_WINDOW);
    let at = timestamp::format(&(h.clock.now() + secs(60)));
    let news: Vec<NewJob> = (0..total)
        .map(|i| NewJob {
            id: Some(JobId::from(format!("one-shot-{i}").as_str())),
            spec: serde_json::from_value(json!({"schedule": {"at": at}, "task": {"command": {"argv": ["true"]}}}))
                .unwrap(),
        })
        .collect();
    let jobs = h.sked.create_jobs(&h.tenant, news, None).await.unwrap();
    let fired_directly = jobs.iter().filter(|j| j.state == JobState::Completed).count();
    assert!(fired_directly > 0, "the budget lets the first chunk fire");
    assert!(
        fired_directly < total && fired_directly % DIRECT_FIRE_CHUNK == 0,
        "and stops after a few clock reads, a whole chunk at a time: {fired_directly}"
    );
    assert_eq!(h.store.run_count(), fired_directly);
    assert!(
        jobs.iter()
            .filter(|j| j.state == JobState::Active)
            .all(|j| j.next_fire_at.is_some()),
        "the rest wait for the sweeper"
    );

    let (fired, _) = h.sweep().await;
    assert_eq!(fired, total - fired_directly, "the sweeper fires exactly the rest");
    assert_eq!(h.store.run_count(), total);
    let mut ids: Vec<String> = h.store.all_runs().iter().map(|r| r.job_id.to_string()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), total, "one run per job");
}
