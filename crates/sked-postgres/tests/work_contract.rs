//! The work port contract (sked-testkit) against [`PgWork`], with [`PgStore`] and [`PgQueue`]
//! over the same fresh database of this binary's private cluster, as a self-hosted deployment
//! shares it; and what only a shared database can show: work ports on several pools (several
//! hosts), each with several receivers, draining a backlog claim and complete every run
//! exactly once and leave no message behind.

use sked_core::duration::Dur;
use sked_core::ports::Clock;
use sked_core::ports::queue::DispatchQueue;
use sked_core::ports::store::{ClaimOutcome, JobClaim, JobStore, JobStoreExt, RunTransition, StoreError};
use sked_core::ports::work::{ReceiveRequest, Received, Settlement, WorkError, WorkPort};
use sked_core::run::{AttemptOutcome, RunState};
use sked_postgres::testing::postgres;
use sked_postgres::{PgDb, PgOptions, PgQueue, PgStore, PgWork};
use sked_testkit::clock::ManualClock;
use sked_testkit::contract::fixtures::{at, completion, firing, job, result, run, t0, worker};
use sked_testkit::contract::work::WorkPorts;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

async fn connect(url: &str) -> PgDb {
    PgDb::connect(url, &PgOptions::default()).await.expect("connect")
}

sked_testkit::work_contract!(|clock: Arc<ManualClock>| async move {
    let db = connect(&postgres().fresh_database()).await;
    let as_clock = clock.clone() as Arc<dyn Clock>;
    WorkPorts {
        store: Arc::new(PgStore::new(db.clone())),
        queue: Arc::new(PgQueue::new(db.clone(), as_clock.clone())),
        work: Arc::new(PgWork::new(db, as_clock)),
        clock,
    }
});

/// Real time after which a drain that should have finished counts as hung.
const HANG: Duration = Duration::from_secs(120);

/// A backlog drained by several hosts at once.
struct Drain {
    /// Work ports, each on a pool of its own.
    hosts: usize,
    /// Concurrent receivers per host.
    receivers: usize,
    /// Jobs of tenant `t1`, fired through the first host.
    jobs: usize,
    /// Runs per job.
    runs_per_job: usize,
    /// Most messages a receive takes.
    batch: usize,
}

/// What a drain saw.
struct Drained {
    /// Per run id: how many times a receive claimed it, and how many times it was completed.
    seen: HashMap<String, (usize, usize)>,
    /// Claims that were not `Claimed` (Held, Leased, a refusal…), described.
    other_claims: Vec<String>,
    /// The database's rolled-back transactions during the drain (aborted and retried steps).
    rollbacks: i64,
    /// Receive calls that took something (each one transaction that committed).
    receives: usize,
    /// Steps that answered Transient (aborted for concurrent ones as often as they may be
    /// tried) and were called again.
    gave_up: usize,
    /// Real time the drain took.
    took: Duration,
    /// The store, to look at the runs afterwards.
    store: PgStore,
    /// A queue on the same database, to look at what is left.
    queue: PgQueue,
}

/// Whether a step failed only for now (the database aborted it for concurrent ones too often).
fn transient(e: &WorkError) -> bool {
    matches!(e, WorkError::Store(StoreError::Transient(_)))
}

/// The `application_name` of the drain's hosts' sessions.
const HOST_APP: &str = "sked-drain-host";

/// The database's rolled-back transactions so far, from its statistics.
async fn rollbacks(db: &PgDb) -> i64 {
    let conn = db.get().await.unwrap();
    conn.execute("SELECT pg_stat_clear_snapshot()", &[]).await.unwrap();
    let row = conn
        .query_one(
            "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await
        .unwrap();
    row.get(0)
}

/// Waits until the hosts' sessions have ended: a session reports its statistics when it
/// ends, if not before.
async fn hosts_gone(db: &PgDb) {
    let conn = db.get().await.unwrap();
    let gone = async {
        loop {
            let row = conn
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
                    &[&HOST_APP],
                )
                .await
                .unwrap();
            if row.get::<_, i64>(0) == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(HANG, gone)
        .await
        .expect("the hosts' sessions never ended");
}

impl Drain {
    /// Fires the backlog, then lets every receiver of every host receive, claim and complete
    /// (succeeded) until every run has been completed; a receiver waits (the clock never
    /// moves: only notifications and the fallback poll wake it) and is stopped once the last
    /// run is completed.
    async fn run(&self) -> Drained {
        let url = postgres().fresh_database();
        let clock = Arc::new(ManualClock::new(t0()));
        let mut hosts = Vec::new();
        let host_url = format!("{url}?application_name={HOST_APP}");
        for _ in 0..self.hosts {
            hosts.push(Arc::new(PgWork::new(connect(&host_url).await, clock.clone())));
        }
        let db = connect(&url).await;
        let store = PgStore::new(db.clone());
        let mut total = 0;
        for j in 0..self.jobs {
            let job = job("t1", &format!("job{j:03}"));
            store.create_jobs(std::slice::from_ref(&job), None).await.unwrap();
            let runs: Vec<_> = (0..self.runs_per_job)
                .map(|i| run("t1", job.id.as_str(), i as i64))
                .collect();
            total += runs.len();
            let answers = hosts[0].fire(&[firing(&job, runs, job.next_fire_at)]).await.unwrap();
            assert_eq!(answers[0].as_ref().map(Vec::len).ok(), Some(self.runs_per_job));
        }
        clock.advance(Dur::secs(3600)); // every run due
        let now = clock.now();
        let rollbacks_before = rollbacks(&db).await;

        let seen: Arc<Mutex<HashMap<String, (usize, usize)>>> = Arc::default();
        let other_claims: Arc<Mutex<Vec<String>>> = Arc::default();
        let completed = Arc::new(AtomicUsize::new(0));
        let receives = Arc::new(AtomicUsize::new(0));
        let gave_up = Arc::new(AtomicUsize::new(0));
        let stop = CancellationToken::new();
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (h, host) in hosts.iter().enumerate() {
            for r in 0..self.receivers {
                let (host, seen, other_claims, completed, receives, gave_up, stop) = (
                    host.clone(),
                    seen.clone(),
                    other_claims.clone(),
                    completed.clone(),
                    receives.clone(),
                    gave_up.clone(),
                    stop.clone(),
                );
                let request = ReceiveRequest {
                    max: self.batch,
                    wait: Dur::secs(3600),
                    worker: worker(&format!("h{h}r{r}")),
                    lease: Dur::secs(3600),
                    hold: Vec::new(),
                    stop: stop.clone(),
                };
                tasks.push(tokio::spawn(async move {
                    while !stop.is_cancelled() {
                        // A step that kept losing races answers Transient; a worker tries again.
                        let batch = match host.receive(&request).await {
                            Ok(batch) => batch,
                            Err(e) if transient(&e) => {
                                gave_up.fetch_add(1, Ordering::SeqCst);
                                continue;
                            }
                            Err(e) => panic!("receive: {e:?}"),
                        };
                        if !batch.is_empty() {
                            receives.fetch_add(1, Ordering::SeqCst);
                        }
                        for got in batch {
                            let claimed = match got.claim {
                                Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, token }, _)) => (run, token),
                                other => {
                                    other_claims.lock().unwrap().push(format!("{other:?}"));
                                    continue;
                                }
                            };
                            let (run, token) = claimed;
                            seen.lock().unwrap().entry(run.run_id.0.clone()).or_default().0 += 1;
                            let ok = result(AttemptOutcome::Succeeded, now);
                            let settlement = Settlement {
                                completion: completion(&run, token, &ok, RunTransition::Finish(RunState::Succeeded)),
                                receipt: got.delivery.receipt,
                            };
                            loop {
                                match host.complete(&settlement).await {
                                    Ok(_) => break,
                                    Err(e) if transient(&e) => gave_up.fetch_add(1, Ordering::SeqCst),
                                    Err(e) => panic!("complete: {e:?}"),
                                };
                            }
                            seen.lock().unwrap().entry(run.run_id.0.clone()).or_default().1 += 1;
                            if completed.fetch_add(1, Ordering::SeqCst) + 1 == total {
                                stop.cancel();
                            }
                        }
                    }
                }));
            }
        }
        for task in tasks {
            tokio::time::timeout(HANG, task)
                .await
                .expect("the drain hung")
                .expect("a receiver panicked");
        }
        let took = started.elapsed();
        drop(hosts);
        hosts_gone(&db).await;
        let rollbacks_after = rollbacks(&db).await;
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        let other_claims = std::mem::take(&mut *other_claims.lock().unwrap());
        Drained {
            seen,
            other_claims,
            rollbacks: rollbacks_after - rollbacks_before,
            receives: receives.load(Ordering::SeqCst),
            gave_up: gave_up.load(Ordering::SeqCst),
            took,
            store,
            queue: PgQueue::new(db, clock),
        }
    }
}

impl Drained {
    /// Every run of the drain claimed once and completed once, SUCCEEDED in the store with
    /// one attempt, and no message left in the queue.
    async fn assert_each_run_once(&self, drain: &Drain) {
        let total = drain.jobs * drain.runs_per_job;
        assert!(self.other_claims.is_empty(), "claims not made: {:?}", self.other_claims);
        assert_eq!(self.seen.len(), total, "every run claimed");
        let twice: Vec<_> = self.seen.iter().filter(|(_, n)| **n != (1, 1)).collect();
        assert!(
            twice.is_empty(),
            "runs not claimed and completed exactly once: {twice:?}"
        );
        for j in 0..drain.jobs {
            for i in 0..drain.runs_per_job {
                let r = run("t1", &format!("job{j:03}"), i as i64);
                let stored = self.store.get_run(&r.tenant, &r.run_id).await.unwrap().unwrap();
                assert_eq!((stored.state, stored.attempts.len()), (RunState::Succeeded, 1));
            }
        }
        let depth = self.queue.depth().await.unwrap().unwrap_or_default();
        assert!(depth.is_empty(), "every message acked: {depth:?}");
    }
}

/// Two hosts (a pool and a work port each, on one database) with three receivers each drain
/// 300 runs of 10 jobs: each run is claimed and completed exactly once, and every message is
/// acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn work_ports_on_two_pools_claim_and_complete_each_run_once() {
    let drain = Drain {
        hosts: 2,
        receivers: 3,
        jobs: 10,
        runs_per_job: 30,
        batch: 5,
    };
    let drained = drain.run().await;
    drained.assert_each_run_once(&drain).await;
}

/// The measurement behind the isolation chosen in `src/work.rs` (run with `--ignored
/// --nocapture`): four hosts, four receivers each, drain 2,000 runs; prints the time taken,
/// how many transactions PostgreSQL aborted (each then run again) and how many steps ran out
/// of tries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measurement: prints its numbers"]
async fn drain_under_four_hosts() {
    let drain = Drain {
        hosts: 4,
        receivers: 4,
        jobs: 20,
        runs_per_job: 100,
        batch: 10,
    };
    let drained = drain.run().await;
    drained.assert_each_run_once(&drain).await;
    println!(
        "drained {} runs in {:?}: {} receives and {} completions committed, {} transactions rolled back, \
         {} steps answered Transient and were called again",
        drained.seen.len(),
        drained.took,
        drained.receives,
        drained.seen.len(),
        drained.rollbacks,
        drained.gave_up
    );
}

/// A run released by a write of the store alone (here a completion through [`PgStore`], as the
/// reaper's or a claim's end of an upstream would be) is enqueued by the transaction that
/// releases it: the queue delivers it with no one enqueuing it and no repair pass.
#[tokio::test]
async fn a_run_released_by_the_store_is_enqueued_in_its_transaction() {
    let db = connect(&postgres().fresh_database()).await;
    let clock = Arc::new(ManualClock::new(t0()));
    let store = PgStore::new(db.clone());
    let queue = PgQueue::new(db, clock.clone());
    let mut after = job("t1", "b");
    after.spec.schedule = serde_json::from_value(serde_json::json!({"after": {"jobs": ["a"]}})).unwrap();
    after.next_fire_at = None;
    store.create_jobs(&[job("t1", "a"), after], None).await.unwrap();
    let upstream = run("t1", "a", 0);
    assert!(store.insert_run(&upstream).await.unwrap());
    let token = match store
        .claim_one(&upstream.tenant, &upstream.run_id, &worker("w"), t0(), at(600))
        .await
        .unwrap()
    {
        ClaimOutcome::Claimed { token, .. } => token,
        other => panic!("expected Claimed, got {other:?}"),
    };
    let ok = result(AttemptOutcome::Succeeded, at(5));
    let ended = store
        .complete(&completion(
            &upstream,
            token,
            &ok,
            RunTransition::Finish(RunState::Succeeded),
        ))
        .await
        .unwrap();
    assert_eq!(ended.released.len(), 1, "{ended:?}");
    let released = &ended.released[0];
    clock.advance(Dur::secs(5));
    let got = queue.receive(10, Dur::secs(30), Dur::ZERO).await.unwrap();
    let runs: Vec<_> = got.iter().map(|d| &d.dispatch.run_id).collect();
    assert_eq!(runs, [&released.run_id], "the released run's message is queued");
}

/// Receives on several hosts at once, each taking one message of a different job's run naming
/// one concurrency key whose last slot is free: exactly one of them claims it (the others park
/// their messages on the key), as the claims run at `READ COMMITTED` and count the key's
/// holders only once they hold the key's lock. Without that lock each would count the slot
/// free and claim it. Several rounds, a key each, so that a race lost by chance shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn receives_on_several_hosts_claim_a_key_s_last_slot_once() {
    const HOSTS: usize = 6;
    const RACERS: usize = 12;
    const ROUNDS: usize = 8;
    const LIMIT: u32 = 2;
    let url = postgres().fresh_database();
    let clock = Arc::new(ManualClock::new(t0()));
    let mut hosts = Vec::new();
    for _ in 0..HOSTS {
        hosts.push(Arc::new(PgWork::new(connect(&url).await, clock.clone())));
    }
    let store = PgStore::new(connect(&url).await);
    // The run of job `j` of `round`, holding the round's key.
    let keyed = |round: usize, j: usize| {
        let job = job("t1", &format!("round{round}job{j:02}"));
        let mut r = run("t1", job.id.as_str(), 0);
        r.concurrency = Some(sked_core::concurrency::Concurrency {
            key: format!("key{round}"),
            limit: LIMIT,
        });
        (job, r)
    };
    let request = |name: &str| ReceiveRequest {
        max: 1,
        wait: Dur::ZERO,
        worker: worker(name),
        lease: Dur::secs(3600),
        hold: Vec::new(),
        stop: CancellationToken::new(),
    };
    let fire = |round: usize, j: usize| {
        let (job, r) = keyed(round, j);
        let (host, store) = (hosts[0].clone(), store.clone());
        async move {
            store.create_jobs(std::slice::from_ref(&job), None).await.unwrap();
            host.fire(&[firing(&job, vec![r], job.next_fire_at)]).await.unwrap();
        }
    };
    // Every run due; the clock stays there, so a parked message stays parked.
    clock.advance(Dur::secs(60));
    for round in 0..ROUNDS {
        // One slot of the key's two held.
        fire(round, 0).await;
        let first = hosts[0].receive(&request("holder")).await.unwrap();
        assert!(
            matches!(
                first[..],
                [Received {
                    claim: Ok(JobClaim::Claimed(ClaimOutcome::Claimed { .. }, _)),
                    ..
                }]
            ),
            "round {round}: {first:?}"
        );
        for j in 1..=RACERS {
            fire(round, j).await;
        }
        // The racers, each on a host's pool, released at once.
        let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
        let mut racers = tokio::task::JoinSet::new();
        for i in 0..RACERS {
            let (host, barrier, request) = (hosts[i % HOSTS].clone(), barrier.clone(), request(&format!("r{i}")));
            racers.spawn(async move {
                barrier.wait().await;
                let mut claimed = 0;
                loop {
                    let got = host.receive(&request).await.expect("receive");
                    if got.is_empty() {
                        return claimed;
                    }
                    claimed += got
                        .iter()
                        .filter(|g| matches!(g.claim, Ok(JobClaim::Claimed(ClaimOutcome::Claimed { .. }, _))))
                        .count();
                }
            });
        }
        let mut claimed = 0;
        while let Some(n) = racers.join_next().await {
            claimed += n.expect("racer");
        }
        assert_eq!(
            claimed, 1,
            "round {round}: claims of the key's last slot that succeeded"
        );
        let mut holding = 0;
        for j in 0..=RACERS {
            let (_, r) = keyed(round, j);
            let stored = store.get_run(&r.tenant, &r.run_id).await.unwrap().unwrap();
            holding += usize::from(stored.state == RunState::Running);
        }
        assert_eq!(holding, LIMIT as usize, "round {round}: runs holding the key");
    }
}
