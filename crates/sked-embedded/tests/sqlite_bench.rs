//! Throughput figures for the SQLite store and queue. Ignored by default; run with
//! `cargo test --release -p sked-embedded --test sqlite_bench -- --ignored --nocapture`.
//! Each case prints its figures and asserts nothing but correctness of the counts.

use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::ports::store::{AttemptResult, ClaimOutcome, Completion, RunTransition};
use sked_core::ports::{Clock, Dispatch, DispatchQueue, JobStore, JobStoreExt, SystemClock};
use sked_core::run::{AttemptOutcome, Run, RunState, Trigger};
use sked_embedded::sqlite::{SqliteDb, SqliteQueue, SqliteStore};
use std::sync::Arc;
use std::time::Instant;

fn tenant() -> TenantId {
    TenantId::from("t1")
}

fn at(i: usize) -> sked_core::Timestamp {
    sked_core::timestamp::from_ms(1_700_000_000_000 + i as i64)
}

fn fresh() -> (tempfile::TempDir, Arc<SqliteDb>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(SqliteDb::open(dir.path().join("bench.db")).unwrap());
    (dir, db)
}

fn dispatches(range: std::ops::Range<usize>, priority_spread: bool) -> Vec<Dispatch> {
    range
        .map(|i| Dispatch {
            tenant: tenant(),
            run_id: RunId::derive(&JobId::from("bench"), at(i)),
            priority: if priority_spread { (i % 10) as u8 } else { 5 },
            not_before: at(i),
        })
        .collect()
}

fn rate(n: usize, since: Instant) -> String {
    let s = since.elapsed().as_secs_f64();
    format!("{n} in {:.2} s = {:.0}/s", s, n as f64 / s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn bench_queue_cycle() {
    let (_dir, db) = fresh();
    let queue = SqliteQueue::new(db, Arc::new(SystemClock) as Arc<dyn Clock>);
    const N: usize = 20_000;

    let started = Instant::now();
    for d in dispatches(0..N, true) {
        queue.enqueue(std::slice::from_ref(&d)).await.unwrap();
    }
    eprintln!("enqueue one per call: {}", rate(N, started));

    let started = Instant::now();
    let mut n = 0;
    loop {
        let batch = queue.receive(10, Dur::secs(60), Dur::ZERO).await.unwrap();
        if batch.is_empty() {
            break;
        }
        for d in batch {
            queue.ack(&d.receipt).await.unwrap();
            n += 1;
        }
    }
    assert_eq!(n, N);
    eprintln!("receive(10) + ack each: {}", rate(N, started));

    let started = Instant::now();
    let mut n = 0;
    for chunk in dispatches(N..2 * N, true).chunks(100) {
        queue.enqueue(chunk).await.unwrap();
        let got = queue.receive(100, Dur::secs(60), Dur::ZERO).await.unwrap();
        for d in got {
            queue.ack(&d.receipt).await.unwrap();
            n += 1;
        }
    }
    eprintln!(
        "enqueue(100) + receive(100) + ack each, interleaved: {}",
        rate(n, started)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn bench_receive_vs_backlog() {
    for backlog in [1_000usize, 20_000, 1_000_000] {
        let (_dir, db) = fresh();
        let queue = SqliteQueue::new(db, Arc::new(SystemClock) as Arc<dyn Clock>);
        let started = Instant::now();
        for chunk in dispatches(0..backlog, true).chunks(10_000) {
            queue.enqueue(chunk).await.unwrap();
        }
        eprintln!(
            "backlog {backlog}: bulk enqueue (10k per call): {}",
            rate(backlog, started)
        );
        let started = Instant::now();
        let mut n = 0;
        for _ in 0..100 {
            for d in queue.receive(10, Dur::secs(60), Dur::ZERO).await.unwrap() {
                queue.ack(&d.receipt).await.unwrap();
                n += 1;
            }
        }
        eprintln!("backlog {backlog}: receive(10) + ack each: {}", rate(n, started));
        // Many leased messages in front: receive must skip them.
        let started = Instant::now();
        let mut leased = 0;
        for _ in 0..100 {
            leased += queue.receive(10, Dur::secs(600), Dur::ZERO).await.unwrap().len();
        }
        eprintln!(
            "backlog {backlog}: receive(10) leaving {leased} leased: {}",
            rate(leased, started)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn bench_claim_complete() {
    let (_dir, db) = fresh();
    let store = SqliteStore::new(db);
    const N: usize = 10_000;
    let runs: Vec<Run> = (0..N)
        .map(|i| {
            Run::new_pending(
                tenant(),
                JobId::from("bench"),
                at(i),
                Trigger::Schedule,
                5,
                at(i),
                3,
                at(i),
            )
        })
        .collect();
    let started = Instant::now();
    for r in &runs {
        assert!(store.insert_run(r).await.unwrap());
    }
    eprintln!("insert_run: {}", rate(N, started));
    let me = WorkerId::from("w");
    let now = at(N);
    let started = Instant::now();
    for r in &runs {
        let ClaimOutcome::Claimed { token, .. } = store
            .claim_one(&r.tenant, &r.run_id, &me, now, now + chrono::Duration::seconds(30))
            .await
            .unwrap()
        else {
            panic!("claim")
        };
        let result = AttemptResult {
            finished_at: now,
            outcome: AttemptOutcome::Succeeded,
            exit_code: Some(0),
            http_status: None,
            error: None,
            log_bytes: 100,
            log_truncated: false,
        };
        store
            .complete(&Completion {
                tenant: r.tenant.clone(),
                run_id: r.run_id.clone(),
                token,
                result,
                next: RunTransition::Finish(RunState::Succeeded),
                only_if_expired_by: None,
            })
            .await
            .unwrap();
    }
    eprintln!("claim + complete: {}", rate(N, started));
    let started = Instant::now();
    let mut cursor = None;
    let mut seen = 0;
    loop {
        let page = store
            .list_runs(
                &tenant(),
                &Default::default(),
                &sked_core::ports::PageRequest { cursor, limit: 100 },
            )
            .await
            .unwrap();
        seen += page.items.len();
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, N);
    eprintln!("list_runs pages of 100: {}", rate(N, started));
}
