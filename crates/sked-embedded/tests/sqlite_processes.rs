//! Real processes on one database file: the test binary re-runs itself as two children
//! (the ignored `child_worker` case, told the file by environment), which race to claim the
//! same runs directly and to drain a shared queue. The parent checks that every run was
//! claimed exactly once and ended SUCCEEDED with one attempt.

use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::ports::store::{AttemptResult, ClaimOutcome, Completion, RunTransition};
use sked_core::ports::{Clock, Dispatch, DispatchQueue, JobStore, JobStoreExt, SystemClock};
use sked_core::run::{AttemptOutcome, Run, RunState, Trigger};
use sked_embedded::sqlite::{SqliteDb, SqliteQueue, SqliteStore};
use std::process::{Command, Stdio};
use std::sync::Arc;

const DB_VAR: &str = "SKED_TEST_CHILD_DB";
const WORKER_VAR: &str = "SKED_TEST_CHILD_WORKER";
const START_VAR: &str = "SKED_TEST_CHILD_START_MS";
const DIRECT: usize = 200;
const QUEUED: usize = 300;

fn tenant() -> TenantId {
    TenantId::from("t1")
}

fn direct_run(i: usize) -> Run {
    let at = sked_core::timestamp::from_ms(1_700_000_000_000 + i as i64 * 1000);
    Run::new_pending(tenant(), JobId::from("direct"), at, Trigger::Schedule, 5, at, 1, at)
}

fn queued_run(i: usize) -> Run {
    let at = sked_core::timestamp::from_ms(1_700_000_000_000 + i as i64 * 1000);
    Run::new_pending(tenant(), JobId::from("queued"), at, Trigger::Schedule, 5, at, 1, at)
}

fn ok(now: sked_core::Timestamp) -> AttemptResult {
    AttemptResult {
        finished_at: now,
        outcome: AttemptOutcome::Succeeded,
        exit_code: Some(0),
        http_status: None,
        error: None,
        log_bytes: 0,
        log_truncated: false,
    }
}

/// Claims and completes `run_id`; returns whether this process got the claim.
async fn work(store: &SqliteStore, run_id: &RunId, me: &WorkerId) -> bool {
    let now = SystemClock.now();
    let lease = now + chrono::Duration::seconds(60);
    match store.claim_one(&tenant(), run_id, me, now, lease).await.expect("claim") {
        ClaimOutcome::Claimed { token, .. } => {
            store
                .complete(&Completion {
                    tenant: tenant(),
                    run_id: run_id.clone(),
                    token,
                    result: ok(SystemClock.now()),
                    next: RunTransition::Finish(RunState::Succeeded),
                    only_if_expired_by: None,
                })
                .await
                .expect("complete with own token");
            true
        }
        ClaimOutcome::Leased(_) | ClaimOutcome::Terminal(_) => false,
        ClaimOutcome::NotYet(t) => panic!("not yet until {t}"),
        ClaimOutcome::AtCapacity => panic!("no quota was set, yet the claim was refused for capacity"),
        ClaimOutcome::KeyAtLimit { key } => panic!("no run has a concurrency key, yet the claim was refused for {key}"),
    }
}

/// The child's body; does nothing unless started by the parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by two_processes_share_one_file"]
async fn child_worker() {
    let Ok(path) = std::env::var(DB_VAR) else { return };
    let me = WorkerId::from(std::env::var(WORKER_VAR).unwrap_or_default());
    let db = Arc::new(SqliteDb::open(&path).expect("child opens the file"));
    let store = SqliteStore::new(db.clone());
    let queue = SqliteQueue::new(db.clone(), Arc::new(SystemClock) as Arc<dyn Clock>);
    // Start together, so the two processes really contend for the same runs.
    let start: i64 = std::env::var(START_VAR).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let left = start - SystemClock.now().timestamp_millis();
    if left > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(left as u64)).await;
    }
    let mut direct = 0;
    for i in 0..DIRECT {
        if work(&store, &direct_run(i).run_id, &me).await {
            direct += 1;
        }
    }
    let mut queued = 0;
    loop {
        let batch = queue
            .receive(5, Dur::secs(60), Dur::millis(200))
            .await
            .expect("receive");
        if batch.is_empty() {
            if queue.depth().await.expect("depth") == 0 {
                break;
            }
            continue;
        }
        for d in batch {
            if work(&store, &d.dispatch.run_id, &me).await {
                queued += 1;
            }
            queue.ack(&d.receipt).await.expect("ack own receipt");
        }
    }
    println!("RESULT {direct} {queued}");
}

#[tokio::test]
async fn two_processes_share_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let db = Arc::new(SqliteDb::open(&path).unwrap());
    let store = SqliteStore::new(db.clone());
    let queue = SqliteQueue::new(db.clone(), Arc::new(SystemClock) as Arc<dyn Clock>);
    for i in 0..DIRECT {
        store.insert_run(&direct_run(i)).await.unwrap();
    }
    let mut items = Vec::new();
    for i in 0..QUEUED {
        let r = queued_run(i);
        store.insert_run(&r).await.unwrap();
        items.push(Dispatch {
            tenant: tenant(),
            run_id: r.run_id,
            priority: 5,
            not_before: r.not_before,
        });
    }
    queue.enqueue(&items).await.unwrap();

    let exe = std::env::current_exe().unwrap();
    let start = SystemClock.now().timestamp_millis() + 1_000;
    let children: Vec<_> = ["w1", "w2"]
        .iter()
        .map(|w| {
            Command::new(&exe)
                .args([
                    "child_worker",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(DB_VAR, &path)
                .env(WORKER_VAR, w)
                .env(START_VAR, start.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let (mut direct, mut queued) = (0, 0);
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // libtest may print "test child_worker ... " on the same line first.
        let line = stdout
            .lines()
            .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
            .expect("child reported");
        let (d, q) = line.split_once(' ').unwrap();
        eprintln!("child claimed {d} direct, {q} queued");
        direct += d.parse::<usize>().unwrap();
        queued += q.parse::<usize>().unwrap();
    }
    assert_eq!(direct, DIRECT, "each directly raced run claimed by exactly one process");
    assert_eq!(queued, QUEUED, "each queued run claimed by exactly one process");
    assert_eq!(queue.depth().await.unwrap(), 0);
    for r in (0..DIRECT).map(direct_run).chain((0..QUEUED).map(queued_run)) {
        let stored = store.get_run(&r.tenant, &r.run_id).await.unwrap().unwrap();
        assert_eq!(stored.state, RunState::Succeeded, "{}", r.run_id);
        assert_eq!(stored.attempts.len(), 1, "{}", r.run_id);
    }
}
