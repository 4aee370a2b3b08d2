//! The simulated deployment and its script: one store, one queue, an API process, sweepers,
//! a reaper and several workers, each process with its own (skewed) clock, all stepped by the
//! [`Driver`] on one thread while a seeded [`SimRng`] decides what happens next.
//!
//! A run has two phases. Under load, time moves in small random steps; at each step the
//! sweeper, reaper and workers may act, users call the API, and faults strike (port faults
//! through [`Faulty`], process faults here: crashes, pauses, clock skew and jumps, a sweeper
//! dying before its enqueue, two sweepers at once). Then faults stop, every job is paused,
//! and the system must bring every run to an end. Invariants are checked after every step
//! ([`super::check`]) and at the end.

use super::audit::{AuditStore, AuditWork};
use super::check::{self, Checker};
use super::driver::Driver;
use super::payload::{ExecLog, RecordingExecutor};
use super::trace::Trace;
use super::{SimConfig, SimReport};
use crate::clock::ManualClock;
use crate::faults::{Chaos, FaultKind, FaultPlan, Faulty, SimRng};
use crate::memory::{MemLogs, MemQueue, MemStore, MemWork};
use async_trait::async_trait;
use futures::FutureExt;
use serde_json::json;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, TenantId, WorkerId};
use sked_core::ports::{Clock, Delivery, Dispatch, DispatchQueue, JobStoreExt, QueueError, Receipt};
use sked_core::run::Run;
use sked_core::service::fire::{SkipSink, SkippedOccurrence};
use sked_core::service::jobs::NewJob;
use sked_core::service::reaper::{Reaper, ReaperConfig};
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::worker::{LongLease, Worker, WorkerConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp::{self, Timestamp};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Workers' lease (heartbeat every third).
pub const LEASE: Dur = Dur::secs(15);
/// Every third worker's long lease.
pub const LONG_LEASE: LongLease = LongLease {
    after: Dur::secs(5),
    lease: Dur::secs(30),
};
/// Reaper: a PENDING run ready this long without a claim is re-enqueued.
pub const STALE_AFTER: Dur = Dur::secs(30);
/// Fewest live workers the script keeps (it restarts crashed ones after a while).
const MIN_WORKERS: usize = 2;
/// Most jobs a run creates.
const MAX_JOBS: usize = 10;

/// The real store under the audit.
type Store = AuditStore<MemStore>;

/// One worker process.
struct SimWorker {
    /// The service.
    worker: Arc<Worker>,
    /// Its clock.
    clock: Arc<Faulty<ManualClock>>,
    /// Its view of the store (it may be cut off alone).
    store: Arc<Faulty<Store>>,
    /// Its one-transaction work port, if it has one (cut off with its store).
    work: Option<Arc<Faulty<AuditWork<MemWork>>>>,
    /// False once crashed.
    alive: bool,
    /// Paused until then.
    frozen_until: Option<Timestamp>,
    /// Never cancelled: a simulated worker ends by crashing.
    shutdown: CancellationToken,
}

/// The queue a dying sweeper sees: its enqueue never happens.
struct DeadOnEnqueue {
    /// The real (faulty) queue, for everything else.
    inner: Arc<Faulty<MemQueue>>,
    /// Counts the crash.
    chaos: Chaos,
}

#[async_trait]
impl DispatchQueue for DeadOnEnqueue {
    async fn enqueue(&self, _items: &[Dispatch]) -> Result<(), QueueError> {
        self.chaos.record(FaultKind::SweeperCrash);
        Err(QueueError::Other("sweeper crashed before its enqueue".into()))
    }
    async fn receive(&self, max: usize, visibility: Dur, wait: Dur) -> Result<Vec<Delivery>, QueueError> {
        self.inner.receive(max, visibility, wait).await
    }
    async fn extend(&self, receipt: &Receipt, visibility: Dur) -> Result<(), QueueError> {
        self.inner.extend(receipt, visibility).await
    }
    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError> {
        self.inner.ack(receipt).await
    }
    fn receive_limit(&self) -> Option<u32> {
        self.inner.receive_limit()
    }
}

/// A sink adding each skipped occurrence to `skips` (the sweepers' and the API's firings).
fn skip_sink(skips: &Arc<Mutex<Vec<SkippedOccurrence>>>) -> SkipSink {
    let skips = skips.clone();
    Arc::new(move |s| skips.lock().unwrap_or_else(|e| e.into_inner()).push(s.clone()))
}

/// The whole simulated deployment.
pub(super) struct World {
    /// The run's settings.
    config: SimConfig,
    /// Decides what happens (faults at the ports draw from their own stream).
    rng: SimRng,
    /// The true time.
    clock: Arc<ManualClock>,
    /// Fault injection.
    chaos: Chaos,
    /// The real store.
    mem: Arc<MemStore>,
    /// The audited store.
    audit: Arc<Store>,
    /// What every process sees of the store.
    store: Arc<Faulty<Store>>,
    /// The real queue (it records its takes for the fairness check).
    mem_queue: Arc<MemQueue>,
    /// What every process sees of the queue.
    queue: Arc<Faulty<MemQueue>>,
    /// Attempt logs.
    logs: Arc<MemLogs>,
    /// Polls every future.
    driver: Driver,
    /// Payload executions.
    execs: ExecLog,
    /// Occurrences the sweepers skipped.
    skips: Arc<Mutex<Vec<SkippedOccurrence>>>,
    /// Workers by index (crashed ones stay, dead).
    workers: Vec<SimWorker>,
    /// The API process.
    api: Sked,
    /// The API process's clock.
    api_clock: Arc<Faulty<ManualClock>>,
    /// The two sweeper processes' clocks.
    sweeper_clocks: [Arc<Faulty<ManualClock>>; 2],
    /// The reaper.
    reaper: Reaper,
    /// The reaper's clock.
    reaper_clock: Arc<Faulty<ManualClock>>,
    /// The event log.
    trace: Trace,
    /// Jobs created so far (ids are `j<n>`).
    jobs: usize,
    /// The tenants; job `j<n>` belongs to `tenants[n % len]`.
    tenants: Vec<TenantId>,
    /// Steps taken.
    steps: u64,
    /// Invariant checks.
    checker: Checker,
}

impl World {
    pub(super) fn new(config: SimConfig) -> Self {
        let mut rng = SimRng::new(config.seed);
        let start = timestamp::parse("2026-12-01T10:00:00Z").unwrap_or_default()
            + chrono::Duration::milliseconds(rng.range(0, 86_400_000) as i64);
        let clock = Arc::new(ManualClock::new(start));
        // The lean store repairs no run an unwritten firing shows (nor does DynamoDB's): it
        // rests on the queue keeping a message it accepted, as SQS does. Its seeds lose none
        // silently; an enqueue that fails says so.
        let faults = FaultPlan {
            queue_lost: if config.lean_one_shots {
                0.0
            } else {
                config.faults.queue_lost
            },
            ..config.faults
        };
        let chaos = Chaos::new(rng.fork(), faults, clock.clone());
        let mem = Arc::new(match config.lean_one_shots {
            true => MemStore::lean(),
            false => MemStore::new(),
        });
        let audit = Arc::new(AuditStore::new(mem.clone()));
        audit.log().lean_one_shots = config.lean_one_shots;
        let store = Arc::new(Faulty::new(audit.clone(), chaos.clone()));
        let mem_queue = Arc::new(MemQueue::recording(clock.clone()).with_receive_limit(super::RECEIVE_LIMIT));
        let queue = Arc::new(Faulty::new(mem_queue.clone(), chaos.clone()));
        let logs = Arc::new(MemLogs::new());
        let process_clock = || Arc::new(Faulty::new(clock.clone(), chaos.clone()));
        let api_clock = process_clock();
        let reaper_clock = process_clock();
        let sweeper_clocks = [process_clock(), process_clock()];
        let ports = |clock: Arc<Faulty<ManualClock>>| Ports::new(store.clone(), queue.clone(), logs.clone(), clock);
        let api_config = SkedConfig {
            fire_within: Dur::millis(config.fire_ahead.as_millis().max(0) as u64 / 3),
            ..SkedConfig::default()
        };
        let skips: Arc<Mutex<Vec<SkippedOccurrence>>> = Arc::default();
        let api =
            Sked::new(ports(api_clock.clone()), api_config, SweepSignal::default()).with_skip_sink(skip_sink(&skips));
        let reaper = Reaper::new(
            ports(reaper_clock.clone()),
            ReaperConfig {
                interval: Dur::secs(2),
                stale_after: STALE_AFTER,
                batch: 500,
            },
        );
        // No draw from the seeded stream: a one-tenant seed runs exactly as before tenants
        // took turns.
        let tenants = (0..config.tenants.max(1))
            .map(|i| {
                if i == 0 {
                    TenantId::default()
                } else {
                    TenantId(format!("tenant-{i}"))
                }
            })
            .collect();
        let mut world = World {
            checker: Checker::new(config.faults.max_skew_ms),
            config,
            rng,
            clock,
            chaos,
            mem,
            audit,
            store,
            mem_queue,
            queue,
            logs,
            driver: Driver::new(),
            execs: ExecLog::default(),
            skips,
            workers: Vec::new(),
            api,
            api_clock,
            sweeper_clocks,
            reaper,
            reaper_clock,
            trace: Trace::keeping(config.trace_lines),
            jobs: 0,
            tenants,
            steps: 0,
        };
        let workers = world.rng.range(2, 4);
        for _ in 0..workers {
            world.start_worker();
        }
        let jobs = world.rng.range(3, 6);
        for _ in 0..jobs {
            world.create_job();
        }
        world
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn log(&mut self, what: String) {
        let t = self.now().timestamp_millis();
        self.trace.line(format!("{t} {what}"));
    }

    fn ports(&self, clock: Arc<dyn Clock>) -> Ports {
        Ports::new(self.store.clone(), self.queue.clone(), self.logs.clone(), clock)
    }

    /// Runs the whole script and reports.
    pub(super) fn run(mut self) -> SimReport {
        let active_until = self.now() + self.config.active.to_chrono();
        while self.now() < active_until {
            self.step(true);
        }
        self.settle();
        self.finish()
    }

    // ----- the script -----

    /// One step: time moves, then the processes act, then the invariants are checked.
    fn step(&mut self, loaded: bool) {
        self.steps += 1;
        let dt = match self.rng.range(0, 99) {
            0..=59 => self.rng.range(10, 400),
            60..=96 => self.rng.range(400, 1_500),
            _ if loaded && self.chaos.enabled() => {
                self.chaos.record(FaultKind::ClockJump);
                self.rng.range(2_000, 8_000)
            }
            _ => self.rng.range(1_500, 3_000),
        };
        self.clock.advance(Dur::millis(dt));
        let now = self.now();
        for i in 0..self.workers.len() {
            if self.workers[i].frozen_until.is_some_and(|t| t <= now) {
                self.workers[i].frozen_until = None;
                self.driver.thaw(i);
                self.log(format!("w{i} resumes"));
            }
        }
        self.driver.run_until_stalled();

        let sweep = self.rng.chance(0.7);
        let api = loaded && self.rng.chance(0.05);
        match (sweep, api) {
            (true, true) if self.config.race_api_with_sweeps => self.api_call_while_sweeping(),
            (true, true) => {
                self.sweep();
                self.api_call(None);
            }
            (true, false) => self.sweep(),
            (false, true) => self.api_call(None),
            (false, false) => {}
        }
        if self.rng.chance(0.4) {
            self.reap();
        }
        self.feed_workers();
        if loaded && self.chaos.enabled() {
            self.process_faults();
        }
        self.keep_workers();
        self.driver.run_until_stalled();
        self.check_step();
    }

    /// A sweeper process (sometimes two at once, sometimes one that dies before enqueueing).
    fn sweeper(&self, which: usize, crash: bool) -> Sweeper {
        let clock: Arc<dyn Clock> = self.sweeper_clocks[which].clone();
        let mut ports = self.ports(clock.clone());
        if crash {
            let queue = Arc::new(DeadOnEnqueue {
                inner: self.queue.clone(),
                chaos: self.chaos.clone(),
            });
            ports = Ports::new(self.store.clone(), queue, self.logs.clone(), clock);
        }
        let config = SweeperConfig {
            lookahead: self.config.fire_ahead,
            ..SweeperConfig::default()
        };
        Sweeper::new(ports, SweepSignal::default(), config).with_skip_sink(skip_sink(&self.skips))
    }

    fn sweep(&mut self) {
        let chaos = self.chaos.enabled();
        let crash = chaos && self.rng.chance(0.03);
        let two = chaos && self.rng.chance(0.1);
        let a = self.sweeper(0, crash);
        if two {
            self.chaos.record(FaultKind::TwoSweepers);
            let b = self.sweeper(1, false);
            let (ra, rb) = self
                .driver
                .block_on(futures::future::join(a.sweep_once(), b.sweep_once()));
            self.log(format!("sweep x2 {ra:?} {rb:?}"));
        } else {
            let r = self.driver.block_on(a.sweep_once());
            self.log(format!("sweep{} {r:?}", if crash { " (crashing)" } else { "" }));
        }
    }

    fn reap(&mut self) {
        let r = self.driver.block_on(self.reaper.reap_once());
        self.log(format!("reap {r:?}"));
    }

    /// Each live, unpaused worker with room may take deliveries and start handling them.
    fn feed_workers(&mut self) {
        for i in 0..self.workers.len() {
            let w = &self.workers[i];
            if !w.alive || w.frozen_until.is_some() || !self.rng.chance(0.8) {
                continue;
            }
            let room = w.worker.config().concurrency.saturating_sub(self.driver.count_of(i));
            if room == 0 {
                continue;
            }
            let worker = w.worker.clone();
            // As `Worker::run` does: a batch received and claimed, then each claimed attempt
            // runs as its own task.
            match self.driver.block_on(worker.take_work(room, Dur::ZERO)) {
                Ok(claimed) => {
                    for attempt in claimed {
                        self.log(format!("w{i} claimed {}", attempt.run().run_id));
                        let (worker, stop) = (worker.clone(), self.workers[i].shutdown.clone());
                        self.driver
                            .spawn(i, async move { worker.run_claimed(attempt, stop).await });
                    }
                }
                Err(e) => self.log(format!("w{i} receive failed: {e}")),
            }
        }
    }

    /// Crashes, pauses and clock skews.
    fn process_faults(&mut self) {
        let live: Vec<usize> = (0..self.workers.len()).filter(|i| self.workers[*i].alive).collect();
        if !live.is_empty() && self.rng.chance(0.004) {
            let i = *self.rng.pick(&live);
            self.workers[i].alive = false;
            self.workers[i].frozen_until = None;
            self.driver.thaw(i);
            let dropped = self.driver.kill(i);
            self.chaos.record(FaultKind::WorkerCrash);
            self.log(format!("w{i} crashes with {dropped} attempts"));
        }
        let running: Vec<usize> = (0..self.workers.len())
            .filter(|i| self.workers[*i].alive && self.workers[*i].frozen_until.is_none())
            .collect();
        if !running.is_empty() && self.rng.chance(0.006) {
            let i = *self.rng.pick(&running);
            // Half the pauses outlast the lease: the worker must find itself fenced off.
            let ms = if self.rng.chance(0.5) {
                self.rng.range(500, LEASE.as_millis() as u64 / 2)
            } else {
                LEASE.as_millis() as u64 + self.rng.range(1_000, 30_000)
            };
            let until = self.now() + chrono::Duration::milliseconds(ms as i64);
            self.workers[i].frozen_until = Some(until);
            self.driver.freeze(i);
            self.execs.pause(i);
            self.chaos.record(FaultKind::WorkerPause);
            self.log(format!("w{i} pauses for {ms} ms"));
        }
        if !running.is_empty() && self.rng.chance(0.004) {
            // Cut off from the store past its lease: its heartbeats fail while others take
            // its runs over, so it must stop its payloads when its lease runs out.
            let i = *self.rng.pick(&running);
            let ms = self.rng.range(3_000, 2 * LEASE.as_millis() as u64);
            let until = self.now() + chrono::Duration::milliseconds(ms as i64);
            self.workers[i].store.partition(until);
            if let Some(work) = &self.workers[i].work {
                work.partition(until);
            }
            self.log(format!("w{i} cut off from the store for {ms} ms"));
        }
        if self.rng.chance(0.01) {
            let n = 4 + self.workers.len();
            match self.rng.index(n) {
                0 => self.api_clock.reskew(),
                1 => self.reaper_clock.reskew(),
                2 => self.sweeper_clocks[0].reskew(),
                3 => self.sweeper_clocks[1].reskew(),
                i => self.workers[i - 4].clock.reskew(),
            }
        }
    }

    /// Restarts workers (after a while) so that at least [`MIN_WORKERS`] live.
    fn keep_workers(&mut self) {
        let live = self.workers.iter().filter(|w| w.alive).count();
        if live < MIN_WORKERS && (self.rng.chance(0.1) || !self.chaos.enabled()) {
            self.start_worker();
        }
    }

    fn start_worker(&mut self) {
        let i = self.workers.len();
        let clock = Arc::new(Faulty::new(self.clock.clone(), self.chaos.clone()));
        let executor = Arc::new(RecordingExecutor::new(
            i,
            clock.clone(),
            self.clock.clone(),
            self.execs.clone(),
        ));
        let mut config = WorkerConfig::new(WorkerId(format!("w{i}")));
        config.lease = LEASE;
        // Every third worker moves its attempts past 5 s to a 30 s lease: leases that change
        // length mid-attempt, under the same pauses, cut-offs and skew.
        if i % 3 == 2 {
            config.long_lease = Some(LONG_LEASE);
        }
        config.grace = Dur::secs(1);
        // The clock skew the simulation injects is the bound the workers assume.
        config.max_clock_skew = Dur::millis(self.config.faults.max_skew_ms);
        config.concurrency = self.rng.range(1, 4) as usize;
        config.fired_ahead = !self.config.fire_ahead.is_zero();
        let store = Arc::new(Faulty::new(self.audit.clone(), self.chaos.clone()));
        let mut ports = Ports::new(store.clone(), self.queue.clone(), self.logs.clone(), clock.clone());
        let work = (self.config.one_transaction_workers && i % 2 == 1).then(|| {
            let work = MemWork::new(self.mem.clone(), self.mem_queue.clone(), clock.clone());
            Arc::new(Faulty::new(
                Arc::new(self.audit.work(Arc::new(work))),
                self.chaos.clone(),
            ))
        });
        if let Some(work) = &work {
            ports.work = work.clone();
        }
        let worker = Worker::new(ports, executor, config);
        self.workers.push(SimWorker {
            worker: Arc::new(worker),
            clock,
            store,
            work,
            alive: true,
            frozen_until: None,
            shutdown: CancellationToken::new(),
        });
        self.log(format!("w{i} starts"));
    }

    // ----- users -----

    /// A job definition drawn at random.
    fn random_spec(&mut self) -> serde_json::Value {
        let rng = &mut self.rng;
        let now = self.clock.now();
        let mut spec = json!({});
        let (schedule, recurring_secs) = match rng.range(0, 9) {
            0..=5 => {
                let secs = rng.range(5, 60);
                (json!({"every": format!("{secs}s")}), Some(secs))
            }
            6 | 7 => {
                let at = now + chrono::Duration::milliseconds(rng.range(0, 120_000) as i64);
                (json!({"at": timestamp::format(&at)}), None)
            }
            _ => {
                let secs = *rng.pick(&[10u64, 15, 20, 30]);
                (json!({"cron": format!("*/{secs} * * * * *")}), Some(secs))
            }
        };
        spec["schedule"] = schedule;
        let timeout_ms = rng.range(2_000, 20_000);
        let argv = match rng.range(0, 19) {
            0..=6 => json!(["ok"]),
            7..=9 => json!(["fail", "1"]),
            10..=14 => json!(["sleep", rng.range(100, timeout_ms.min(8_000)).to_string()]),
            15 | 16 => json!(["sleep", (timeout_ms + rng.range(1, 10_000)).to_string()]),
            17 => json!(["hang"]),
            _ => json!(["print", "one", "err:two"]),
        };
        spec["task"] = json!({"command": {"argv": argv}});
        spec["timeout"] = json!(format!("{timeout_ms}ms"));
        spec["on_timeout"] = json!(*rng.pick(&["fail", "retry"]));
        spec["max_retries"] = json!(rng.range(0, 3));
        spec["backoff"] = json!({
            "initial": format!("{}ms", rng.range(500, 5_000)),
            "max": "20s",
            "factor": 2.0,
            "jitter": *rng.pick(&[0.0, 0.2, 0.5]),
        });
        spec["priority"] = json!(rng.range(0, 9));
        if let Some(overlap) = *rng.pick(&[None, Some("allow"), Some("forbid"), Some("replace"), Some("queue_one")]) {
            spec["overlap"] = json!(overlap);
        }
        spec["misfire"] = json!(*rng.pick(&["fire_once", "fire_all", "skip"]));
        if let Some(secs) = recurring_secs
            && rng.chance(0.2)
        {
            spec["jitter"] = json!(format!("{}ms", rng.range(1, secs * 1000 / 2)));
        }
        spec
    }

    fn create_job(&mut self) {
        let n = self.jobs;
        let id = JobId(format!("j{n}"));
        self.jobs += 1;
        let mut spec = self.random_spec();
        // Every third job names one of two concurrency keys (no draw from the seeded stream):
        // `k0` with limit 1, `k1` with limit 2 (one limit per key, as the check assumes).
        if n.is_multiple_of(3) {
            let k = (n / 3) % 2;
            spec["concurrency"] = json!({"key": format!("k{k}"), "limit": k + 1});
        }
        // Every fourth job from the second round of tenants runs after the job one round
        // before it (the same tenant), on success or on any end (no draw either).
        if n % 4 == 2 && n >= self.tenants.len() {
            let upstream = format!("j{}", n - self.tenants.len());
            let on = if (n / 4).is_multiple_of(2) { "success" } else { "any" };
            spec["schedule"] = json!({"after": {"jobs": [upstream], "on": on}});
            if let Some(fields) = spec.as_object_mut() {
                fields.remove("jitter");
            }
        }
        // Every fifth job posts its failures, timeouts and skips (no draw): its runs' alerts
        // must be armed by whatever ends them (the checker's alert invariant).
        if n % 5 == 1 {
            spec["notify"] = json!({"on": ["failed", "timed_out", "skipped"], "webhook": "http://127.0.0.1:9/hook"});
        }
        let new = NewJob {
            id: Some(id.clone()),
            spec: serde_json::from_value(spec).expect("the simulation writes valid specs"),
        };
        let (api, tenant) = (self.api.clone(), self.tenant_of(&id));
        let r = self
            .driver
            .block_on(async move { api.create_job(&tenant, new, None).await });
        let what = match r {
            Ok(c) => format!(
                "created {id} next={:?}",
                c.job.next_fire_at.map(|t| t.timestamp_millis())
            ),
            Err(e) => format!("create {id} failed: {e}"),
        };
        self.log(what);
    }

    /// The tenant of job `id` (`j<n>`).
    fn tenant_of(&self, id: &JobId) -> TenantId {
        let n: usize = id.0.trim_start_matches('j').parse().unwrap_or(0);
        self.tenants[n % self.tenants.len()].clone()
    }

    /// Job ids that exist, in order.
    fn job_ids(&self) -> Vec<JobId> {
        (0..self.jobs).map(|n| JobId(format!("j{n}"))).collect()
    }

    /// Runs that have not ended, in id order.
    fn live_runs(&self) -> Vec<Run> {
        let mut runs: Vec<Run> = self
            .mem
            .all_runs()
            .into_iter()
            .filter(|r| !r.state.is_terminal())
            .collect();
        runs.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        runs
    }

    /// Runs that have not ended and do not wait for the resume of their paused job
    /// ([`sked_core::paused::waits_for_resume`]): what the settle phase must bring to an end.
    fn runs_to_end(&self) -> Vec<Run> {
        let jobs = self.mem.all_jobs();
        self.live_runs()
            .into_iter()
            .filter(|r| !jobs.iter().any(|j| sked_core::paused::waits_for_resume(r, j)))
            .collect()
    }

    /// One user action, possibly at the same time as a sweep (`alongside`).
    fn api_call(&mut self, alongside: Option<Sweeper>) {
        if self.rng.chance(0.1) && self.jobs < MAX_JOBS {
            // Creations are rare and never race a sweep: keep it simple.
            self.create_job();
            if let Some(s) = alongside {
                let r = self.driver.block_on(s.sweep_once());
                self.log(format!("sweep {r:?}"));
            }
            return;
        }
        let ids = self.job_ids();
        let id = self.rng.pick(&ids).clone();
        let (api, tenant) = (self.api.clone(), self.tenant_of(&id));
        let action = self.rng.range(0, 9);
        let live = self.live_runs();
        let spec = self.random_spec();
        let new_priority = self.rng.range(0, 9);
        let delete_running = self.rng.chance(0.5);
        let victim = (!live.is_empty()).then(|| {
            let run = &live[self.rng.index(live.len())];
            (run.tenant.clone(), run.run_id.clone())
        });
        let call = async move {
            match action {
                0 | 1 => api
                    .pause_job(&tenant, &id)
                    .await
                    .map(|j| format!("paused {id} ({})", j.state)),
                2 | 3 => api
                    .resume_job(&tenant, &id)
                    .await
                    .map(|j| format!("resumed {id} ({})", j.state)),
                4 => api
                    .trigger_job(&tenant, &id)
                    .await
                    .map(|r| format!("triggered {}", r.run_id)),
                5 => match victim {
                    Some((run_tenant, run_id)) => api
                        .cancel_run(&run_tenant, &run_id)
                        .await
                        .map(|r| format!("cancelled {} ({})", r.run_id, r.state)),
                    None => Ok("nothing to cancel".to_string()),
                },
                6 => {
                    let job = api.get_job(&tenant, &id).await?;
                    let mut spec_now = job.spec.clone();
                    spec_now.priority = new_priority as u8;
                    api.replace_job(&tenant, &id, spec_now, None)
                        .await
                        .map(|j| format!("reprioritised {id} to {}", j.spec.priority))
                }
                7 => {
                    let job = api.get_job(&tenant, &id).await?;
                    // A new schedule; the retry policy stays, so the backoff check holds.
                    let drawn: sked_core::JobSpec =
                        serde_json::from_value(spec).expect("the simulation writes valid specs");
                    let mut new_spec = job.spec.clone();
                    new_spec.schedule = drawn.schedule;
                    new_spec.jitter = None;
                    new_spec.overlap = drawn.overlap;
                    new_spec.misfire = drawn.misfire;
                    api.replace_job(&tenant, &id, new_spec, None).await.map(|j| {
                        format!(
                            "rescheduled {id} next={:?}",
                            j.next_fire_at.map(|t| t.timestamp_millis())
                        )
                    })
                }
                8 => api
                    .delete_job(&tenant, &id, delete_running, false)
                    .await
                    .map(|_| format!("deleted {id} (cancel running: {delete_running})")),
                _ => api
                    .get_job(&tenant, &id)
                    .await
                    .map(|j| format!("read {id} ({})", j.state)),
            }
        };
        let (answer, swept) = match alongside {
            Some(s) => {
                let (a, r) = self.driver.block_on(futures::future::join(call, s.sweep_once()));
                (a, Some(r))
            }
            None => (self.driver.block_on(call), None),
        };
        let answer = answer.unwrap_or_else(|e| format!("api error: {e}"));
        self.log(answer);
        if let Some(r) = swept {
            self.log(format!("sweep (alongside) {r:?}"));
        }
    }

    fn api_call_while_sweeping(&mut self) {
        let s = self.sweeper(0, false);
        self.api_call(Some(s));
    }

    // ----- the end -----

    /// Faults stop, paused workers resume, every job is paused; then the system gets time
    /// to end every run.
    fn settle(&mut self) {
        self.log("settle".to_string());
        self.chaos.set_enabled(false);
        self.api_clock.unskew();
        self.reaper_clock.unskew();
        for c in &self.sweeper_clocks {
            c.unskew();
        }
        for i in 0..self.workers.len() {
            self.workers[i].clock.unskew();
            self.workers[i].store.heal();
            if self.workers[i].frozen_until.take().is_some() {
                self.driver.thaw(i);
            }
        }
        // A last sweep, so every job is accounted up to now, then stop every job.
        self.sweep();
        for id in self.job_ids() {
            let (api, tenant) = (self.api.clone(), self.tenant_of(&id));
            let r = self.driver.block_on(async move { api.pause_job(&tenant, &id).await });
            let what = match r {
                Ok(j) => format!("stopped {} ({})", j.id, j.state),
                Err(e) => format!("stop failed: {e}"),
            };
            self.log(what);
        }
        let deadline = self.now() + self.config.settle_limit.to_chrono();
        let (mut mark, mut progressed_at) = (self.progress(), self.now());
        while self.now() < deadline {
            self.step(false);
            let busy = (0..self.workers.len()).any(|i| self.driver.count_of(i) > 0);
            if !busy && self.runs_to_end().is_empty() && self.queue.held_count() == 0 {
                break;
            }
            // Draining a backlog is not ending: only a stall is.
            let now_mark = self.progress();
            if now_mark != mark {
                (mark, progressed_at) = (now_mark, self.now());
            } else if self.now() - progressed_at > self.config.settle_stall.to_chrono() {
                self.log("settle: no progress; the runs still open never end".to_string());
                break;
            }
        }
    }

    /// What progress the system has made: attempts started, attempts ended, runs ended.
    fn progress(&self) -> (usize, usize, usize) {
        let runs = self.mem.all_runs();
        let attempts = runs.iter().map(|r| r.attempts.len()).sum();
        let ended = runs
            .iter()
            .flat_map(|r| &r.attempts)
            .filter(|a| a.finished_at.is_some())
            .count();
        (attempts, ended, runs.iter().filter(|r| r.state.is_terminal()).count())
    }

    fn check_step(&mut self) {
        let now = self.now();
        let runs = self.mem.all_runs();
        let jobs: Vec<_> = self
            .job_ids()
            .iter()
            .filter_map(|id| {
                self.mem
                    .get_job(&self.tenant_of(id), id)
                    .now_or_never()
                    .and_then(Result::ok)
                    .flatten()
            })
            .collect();
        let audit = std::mem::take(&mut self.audit.log().violations);
        let execs = self.execs.lock().clone();
        self.checker.step(now, &runs, &jobs, &execs, audit);
        self.checker.takes(now, self.mem_queue.drain_takes());
    }

    fn finish(mut self) -> SimReport {
        let now = self.now();
        let mut runs = self.mem.all_runs();
        runs.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        let jobs: Vec<_> = self
            .job_ids()
            .iter()
            .filter_map(|id| {
                self.mem
                    .get_job(&self.tenant_of(id), id)
                    .now_or_never()
                    .and_then(Result::ok)
                    .flatten()
            })
            .collect();
        let skips = self.skips.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let events = std::mem::take(&mut self.audit.log().job_events);
        let execs = self.execs.lock().clone();
        self.checker.finish(now, &runs, &jobs, &events, &skips);
        for run in &runs {
            self.trace.fold(&format!("{run:?}"));
        }
        for job in &jobs {
            self.trace.fold(&format!("{job:?}"));
        }
        let mut faults = self.chaos.counts();
        check::count_payload_faults(&execs, &jobs, &mut faults);
        SimReport {
            seed: self.config.seed,
            digest: self.trace.digest(),
            steps: self.steps,
            jobs: jobs.len(),
            runs: runs.len(),
            attempts: runs.iter().map(|r| r.attempts.len()).sum(),
            executions: execs.len(),
            fenced_writes: self.audit.log().fenced_writes,
            dead_letters: self.mem_queue.dead_letters().len(),
            faults,
            violations: self.checker.violations().to_vec(),
            trace_tail: self.trace.tail(),
        }
    }
}
