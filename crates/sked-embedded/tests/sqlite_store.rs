//! SQLite-specific behaviour beyond the contract suites: several handles on one file (as
//! several processes would have), durability across reopen, clear errors for files that
//! are not sked databases or are locked, busy → transient mapping, and throughput.

use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::{Job, JobSpec, JobState, Overlap};
use sked_core::ports::store::{
    AttemptResult, ClaimOutcome, Completion, Firing, JobClaim, JobFilter, PageRequest, RunTransition, StoreError,
};
use sked_core::ports::{
    Clock, Dispatch, DispatchQueue, JobStore, JobStoreExt, QueueError, Receipt, ReceiveRequest, Settlement,
    SystemClock, WorkError, WorkPort,
};
use sked_core::run::{AttemptOutcome, Run, RunState, Trigger};
use sked_core::timestamp::{Timestamp, parse};
use sked_embedded::sqlite::{OpenError, SqliteDb, SqliteOptions, SqliteQueue, SqliteStore, SqliteWork};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn t0() -> Timestamp {
    parse("2026-03-01T00:00:00Z").unwrap()
}

fn secs(s: i64) -> Timestamp {
    t0() + chrono::Duration::seconds(s)
}

fn tenant() -> TenantId {
    TenantId::from("t1")
}

fn db_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data").join("sked.db");
    (dir, path)
}

fn open(path: &Path) -> Arc<SqliteDb> {
    Arc::new(SqliteDb::open(path).unwrap())
}

fn job(id: &str, labels: &[(&str, &str)]) -> Job {
    let spec: JobSpec = serde_json::from_value(serde_json::json!({
        "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
        "schedule": {"every": "1m", "anchor": "2026-03-01T00:00:00.000Z"},
        "task": {"command": {"argv": ["true"]}},
    }))
    .unwrap();
    Job {
        tenant: tenant(),
        id: JobId::from(id),
        spec: spec.normalised(t0()),
        state: JobState::Active,
        next_fire_at: Some(secs(60)),
        version: 1,
        created_at: t0(),
        updated_at: t0(),
    }
}

fn run(job_id: &str, at: i64) -> Run {
    Run::new_pending(
        tenant(),
        JobId::from(job_id),
        secs(at),
        Trigger::Schedule,
        5,
        secs(at),
        3,
        secs(at),
    )
}

fn done(at: Timestamp) -> AttemptResult {
    AttemptResult {
        finished_at: at,
        outcome: AttemptOutcome::Succeeded,
        exit_code: Some(0),
        http_status: None,
        error: None,
        log_bytes: 12,
        log_truncated: false,
    }
}

fn dispatch(run_id: &RunId, not_before: Timestamp) -> Dispatch {
    Dispatch {
        tenant: tenant(),
        run_id: run_id.clone(),
        priority: 5,
        not_before,
    }
}

#[tokio::test]
async fn two_handles_racing_to_claim_get_exactly_one_claim_per_run() {
    let (_dir, path) = db_path();
    let a = SqliteStore::new(open(&path));
    let b = SqliteStore::new(open(&path));
    let runs: Vec<Run> = (0..100).map(|i| run("race", i)).collect();
    for r in &runs {
        assert!(a.insert_run(r).await.unwrap());
    }
    let mut tasks = Vec::new();
    for (store, w) in [(a.clone(), "wa"), (b.clone(), "wb")] {
        let runs = runs.clone();
        tasks.push(tokio::spawn(async move {
            let mut claimed = Vec::new();
            for r in &runs {
                match store
                    .claim_one(&r.tenant, &r.run_id, &WorkerId::from(w), secs(200), secs(230))
                    .await
                    .unwrap()
                {
                    ClaimOutcome::Claimed { run, token } => claimed.push((run.run_id, token)),
                    ClaimOutcome::Leased(until) => assert_eq!(until, secs(230)),
                    other => panic!("unexpected {other:?}"),
                }
            }
            claimed
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_eq!(all.len(), runs.len(), "each run claimed exactly once");
    all.sort();
    all.dedup_by(|x, y| x.0 == y.0);
    assert_eq!(all.len(), runs.len());
    for r in &runs {
        let stored = b.get_run(&r.tenant, &r.run_id).await.unwrap().unwrap();
        assert_eq!(stored.attempts.len(), 1);
        assert_eq!(stored.state, RunState::Running);
    }
}

#[tokio::test]
async fn two_handles_racing_to_receive_deliver_each_message_once() {
    let (_dir, path) = db_path();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let qa = Arc::new(SqliteQueue::new(open(&path), clock.clone()));
    let qb = Arc::new(SqliteQueue::new(open(&path), clock.clone()));
    let ids: Vec<RunId> = (0..500).map(|i| RunId::derive(&JobId::from("q"), secs(i))).collect();
    let items: Vec<Dispatch> = ids.iter().map(|id| dispatch(id, t0())).collect();
    qa.enqueue(&items).await.unwrap();
    let mut tasks = Vec::new();
    for q in [qa.clone(), qb.clone()] {
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let batch = q.receive(7, Dur::secs(600), Dur::ZERO).await.unwrap();
                if batch.is_empty() {
                    return got;
                }
                for d in batch {
                    assert_eq!(d.receive_count, 1);
                    got.push(d.dispatch.run_id);
                }
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(all, expected, "every message delivered exactly once across handles");
}

#[tokio::test]
async fn long_poll_sees_an_enqueue_from_another_handle() {
    let (_dir, path) = db_path();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let waiter = Arc::new(SqliteQueue::new(open(&path), clock.clone()));
    let other = SqliteQueue::new(open(&path), clock.clone());
    let started = Instant::now();
    let task = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.receive(10, Dur::secs(30), Dur::secs(10)).await }
    });
    tokio::time::sleep(Duration::from_millis(120)).await;
    let id = RunId::derive(&JobId::from("x"), t0());
    other.enqueue(&[dispatch(&id, t0())]).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), 1);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "woke by polling, not by the 10 s wait"
    );
}

#[tokio::test]
async fn reopening_the_file_keeps_everything() {
    let (_dir, path) = db_path();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let j = job("keep", &[("team", "core")]);
    let r = run("keep", 0);
    let (claimed, token) = {
        let db = open(&path);
        let store = SqliteStore::new(db.clone());
        let queue = SqliteQueue::new(db.clone(), clock.clone());
        store
            .create_jobs(std::slice::from_ref(&j), Some(("key-1", "fp")))
            .await
            .unwrap();
        store.insert_run(&r).await.unwrap();
        queue.enqueue(&[dispatch(&r.run_id, t0())]).await.unwrap();
        let ClaimOutcome::Claimed { run, token } = store
            .claim_one(&r.tenant, &r.run_id, &WorkerId::from("w"), secs(1), secs(31))
            .await
            .unwrap()
        else {
            panic!("claim")
        };
        (run, token)
    };
    // Everything dropped: the file is closed. Open it again.
    let db = open(&path);
    let store = SqliteStore::new(db.clone());
    let queue = SqliteQueue::new(db.clone(), clock.clone());
    assert_eq!(store.get_job(&j.tenant, &j.id).await.unwrap(), Some(j.clone()));
    assert_eq!(
        store.idempotency_lookup(&tenant(), "key-1").await.unwrap(),
        Some(("fp".to_string(), vec![j.id.clone()]))
    );
    assert_eq!(store.get_run(&r.tenant, &r.run_id).await.unwrap(), Some(claimed));
    assert_eq!(queue.depth().await.unwrap(), 1);
    let got = queue.receive(10, Dur::secs(30), Dur::ZERO).await.unwrap();
    assert_eq!(got[0].dispatch.run_id, r.run_id);
    // The token survives too: completing with it works, and a new claim gets a bigger one.
    store
        .complete(&Completion {
            tenant: r.tenant.clone(),
            run_id: r.run_id.clone(),
            token,
            result: done(secs(2)),
            next: RunTransition::Retry { not_before: secs(3) },
            only_if_expired_by: None,
        })
        .await
        .unwrap();
    let ClaimOutcome::Claimed { token: next, .. } = store
        .claim_one(&r.tenant, &r.run_id, &WorkerId::from("w"), secs(4), secs(34))
        .await
        .unwrap()
    else {
        panic!("second claim")
    };
    assert!(next > token);
}

#[test]
fn creates_missing_directories() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b").join("c").join("sked.db");
    SqliteDb::open(&path).unwrap();
    assert!(path.exists());
}

#[test]
fn garbage_file_is_not_a_sked_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.db");
    std::fs::write(&path, vec![b'x'; 8192]).unwrap();
    let err = SqliteDb::open(&path).unwrap_err();
    assert!(matches!(err, OpenError::NotSked { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{} is not a sked database: ", path.display())),
        "{msg}"
    );
    // The bytes are left alone.
    assert_eq!(std::fs::read(&path).unwrap(), vec![b'x'; 8192]);
}

#[test]
fn another_applications_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE things (x INTEGER); INSERT INTO things VALUES (1);")
        .unwrap();
    drop(conn);
    let err = SqliteDb::open(&path).unwrap_err();
    assert!(matches!(err, OpenError::NotSked { .. }), "{err:?}");
    assert!(err.to_string().contains("is not a sked database"), "{err}");
}

#[test]
fn newer_schema_is_refused() {
    let (_dir, path) = db_path();
    drop(SqliteDb::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = SqliteDb::open(&path).unwrap_err();
    assert!(matches!(err, OpenError::TooNew { found: 99, .. }), "{err:?}");
}

#[test]
fn reopen_is_idempotent_and_keeps_the_schema_version() {
    let (_dir, path) = db_path();
    drop(SqliteDb::open(&path).unwrap());
    drop(SqliteDb::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
    assert_eq!(v, sked_embedded::sqlite::schema::LATEST);
    assert_eq!(mode, "wal");
}

fn quick() -> SqliteOptions {
    SqliteOptions {
        busy_timeout: Duration::from_millis(100),
        ..SqliteOptions::default()
    }
}

#[test]
fn a_file_locked_by_another_process_is_reported() {
    let (_dir, path) = db_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // Another program holds an exclusive lock on a (rollback-journal) database file.
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder
        .execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; CREATE TABLE t (x);")
        .unwrap();
    let err = SqliteDb::open_with(&path, quick()).unwrap_err();
    assert!(matches!(err, OpenError::Locked { .. }), "{err:?}");
    assert!(err.to_string().contains("is locked by another process"), "{err}");
}

#[tokio::test]
async fn busy_database_is_a_transient_error_with_its_source() {
    let (_dir, path) = db_path();
    let db = Arc::new(SqliteDb::open_with(&path, quick()).unwrap());
    let store = SqliteStore::new(db.clone());
    let queue = SqliteQueue::new(db.clone(), Arc::new(SystemClock));
    // Another process is in the middle of a write transaction.
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE;").unwrap();

    let err = store.insert_run(&run("busy", 0)).await.unwrap_err();
    assert!(matches!(err, StoreError::Transient(_)), "{err:?}");
    assert!(std::error::Error::source(&err).is_some(), "source kept");
    let err = queue
        .enqueue(&[dispatch(&RunId::from("busy@x"), t0())])
        .await
        .unwrap_err();
    assert!(matches!(err, QueueError::Transient(_)), "{err:?}");

    // Reads still work beside the writer (WAL), and writes resume once it is gone.
    assert_eq!(store.get_run(&tenant(), &RunId::from("nope")).await.unwrap(), None);
    holder.execute_batch("ROLLBACK;").unwrap();
    assert!(store.insert_run(&run("busy", 0)).await.unwrap());
}

#[tokio::test]
async fn label_filters_handle_awkward_keys() {
    let (_dir, path) = db_path();
    let store = SqliteStore::new(open(&path));
    let odd = [("a.b", "x"), ("quo\"te", "it's"), ("$[0]", "v")];
    store
        .create_jobs(&[job("odd", &odd), job("plain", &[("a", "x")])], None)
        .await
        .unwrap();
    for (k, v) in odd {
        let filter = JobFilter {
            state: None,
            labels: vec![(k.to_string(), v.to_string())],
        };
        let page = store
            .list_jobs(
                &tenant(),
                &filter,
                &PageRequest {
                    cursor: None,
                    limit: 10,
                },
            )
            .await
            .unwrap();
        assert_eq!(
            page.items.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
            ["odd"],
            "label {k}"
        );
    }
    let filter = JobFilter {
        state: None,
        labels: vec![("a.b".into(), "y".into())],
    };
    let page = store
        .list_jobs(
            &tenant(),
            &filter,
            &PageRequest {
                cursor: None,
                limit: 10,
            },
        )
        .await
        .unwrap();
    assert!(page.items.is_empty());
}

#[tokio::test]
async fn ten_thousand_runs_enqueue_receive_ack_quickly() {
    let (_dir, path) = db_path();
    let queue = SqliteQueue::new(open(&path), Arc::new(SystemClock));
    let now = SystemClock.now();
    let items: Vec<Dispatch> = (0..10_000)
        .map(|i| dispatch(&RunId::derive(&JobId::from("bulk"), secs(i)), now))
        .collect();
    let started = Instant::now();
    queue.enqueue(&items).await.unwrap();
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
    let took = started.elapsed();
    assert_eq!(n, 10_000);
    assert_eq!(queue.depth().await.unwrap(), 0);
    eprintln!(
        "10,000 enqueue+receive+ack in {took:?} ({:.0}/s)",
        10_000.0 / took.as_secs_f64()
    );
    assert!(took < Duration::from_secs(60), "took {took:?}");
}

/// A settlement of `run`'s attempt `token` ending it SUCCEEDED, with `receipt`.
fn finished(r: &Run, token: u64, now: Timestamp, receipt: &Receipt) -> Settlement {
    Settlement {
        completion: Completion {
            tenant: r.tenant.clone(),
            run_id: r.run_id.clone(),
            token,
            result: done(now),
            next: RunTransition::Finish(RunState::Succeeded),
            only_if_expired_by: None,
        },
        receipt: receipt.clone(),
    }
}

#[tokio::test]
async fn work_complete_removes_the_message_in_the_completing_transaction_only_when_it_may() {
    let (_dir, path) = db_path();
    let db = open(&path);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = SqliteStore::new(db.clone());
    let queue = SqliteQueue::new(db.clone(), clock.clone());
    let work = SqliteWork::new(db, clock.clone());
    let now = clock.now();
    let lease = chrono::Duration::seconds(30);
    let mut runs = Vec::new();
    for i in 0..2 {
        let r = run("acked", i);
        store.insert_run(&r).await.unwrap();
        queue.enqueue(&[dispatch(&r.run_id, secs(i))]).await.unwrap();
        runs.push(r);
    }
    let mut delivered = queue.receive(2, Dur::secs(30), Dur::ZERO).await.unwrap();
    delivered.sort_by(|a, b| a.dispatch.run_id.cmp(&b.dispatch.run_id));
    let mut tokens = Vec::new();
    for r in &runs {
        let ClaimOutcome::Claimed { token, .. } = store
            .claim_one(&r.tenant, &r.run_id, &WorkerId::from("w"), now, now + lease)
            .await
            .unwrap()
        else {
            panic!("not claimed")
        };
        tokens.push(token);
    }

    // Fenced: nothing is written, and the message stays.
    let fenced = work
        .complete(&finished(&runs[0], tokens[0] + 1, now, &delivered[0].receipt))
        .await;
    assert!(
        matches!(fenced, Err(WorkError::Store(StoreError::Fenced))),
        "{fenced:?}"
    );
    assert_eq!(queue.depth().await.unwrap(), 2);

    // The current receipt: the run ends and its message is gone, in one write.
    let ended = work
        .complete(&finished(&runs[0], tokens[0], now, &delivered[0].receipt))
        .await
        .unwrap()
        .run;
    assert_eq!(ended.state, RunState::Succeeded);
    assert_eq!(queue.depth().await.unwrap(), 1);
    assert!(matches!(
        queue.ack(&delivered[0].receipt).await,
        Err(QueueError::StaleReceipt)
    ));

    // A receipt that is no longer current (the message was redelivered): the run ends, the
    // message is left for its current holder.
    let stale = Receipt(format!("{}x", delivered[1].receipt.0));
    let ended = work
        .complete(&finished(&runs[1], tokens[1], now, &stale))
        .await
        .unwrap()
        .run;
    assert_eq!(ended.state, RunState::Succeeded);
    assert_eq!(queue.depth().await.unwrap(), 1);
    queue.ack(&delivered[1].receipt).await.unwrap();
    assert_eq!(queue.depth().await.unwrap(), 0);
}

#[tokio::test]
async fn fire_writes_a_chunk_in_one_call_and_a_refused_firing_leaves_no_trace() {
    let (_dir, path) = db_path();
    let store = SqliteStore::new(open(&path));
    let jobs: Vec<Job> = (0..3).map(|i| job(&format!("j{i}"), &[])).collect();
    store.create_jobs(&jobs, None).await.unwrap();
    let firings: Vec<Firing> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| Firing {
            tenant: j.tenant.clone(),
            job_id: j.id.clone(),
            // The middle one was decided on a version that is gone.
            expected_version: if i == 1 { 7 } else { j.version },
            expected_next_fire_at: j.next_fire_at,
            next_fire_at: Some(secs(120)),
            state: JobState::Active,
            runs: vec![run(j.id.as_str(), 60)],
            cancel: vec![],
            skipped: vec![],
            at: secs(60),
        })
        .collect();
    let answers = store.fire(&firings).await.unwrap();
    assert!(answers[0].is_ok() && answers[2].is_ok());
    assert!(matches!(answers[1], Err(StoreError::Conflict(_))));
    for (i, j) in jobs.iter().enumerate() {
        let r = run(j.id.as_str(), 60);
        let stored = store.get_run(&r.tenant, &r.run_id).await.unwrap();
        let after = store.get_job(&j.tenant, &j.id).await.unwrap().unwrap();
        if i == 1 {
            assert_eq!((stored, after.next_fire_at), (None, Some(secs(60))), "untouched");
        } else {
            assert!(stored.is_some());
            assert_eq!(after.next_fire_at, Some(secs(120)));
        }
    }
}

#[tokio::test]
async fn work_fire_enqueues_the_runs_in_the_firing_transaction() {
    let (_dir, path) = db_path();
    let db = open(&path);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = SqliteStore::new(db.clone());
    let queue = SqliteQueue::new(db.clone(), clock.clone());
    let work = SqliteWork::new(db, clock);
    let jobs: Vec<Job> = (0..2).map(|i| job(&format!("j{i}"), &[])).collect();
    store.create_jobs(&jobs, None).await.unwrap();
    let firings: Vec<Firing> = jobs
        .iter()
        .map(|j| Firing {
            tenant: j.tenant.clone(),
            job_id: j.id.clone(),
            expected_version: j.version,
            expected_next_fire_at: j.next_fire_at,
            next_fire_at: Some(secs(120)),
            state: JobState::Active,
            runs: vec![run(j.id.as_str(), 60)],
            cancel: vec![],
            skipped: vec![],
            at: secs(60),
        })
        .collect();
    let answers = work.fire(&firings).await.unwrap();
    assert!(answers.iter().all(|a| a.as_ref().is_ok_and(|runs| runs.len() == 1)));
    let mut delivered: Vec<String> = queue
        .receive(10, Dur::secs(30), Dur::ZERO)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.dispatch.run_id.to_string())
        .collect();
    delivered.sort();
    let expected: Vec<String> = jobs.iter().map(|j| run(j.id.as_str(), 60).run_id.to_string()).collect();
    assert_eq!(delivered, expected);
    // Fired again: refused, and nothing more is queued.
    let again = work.fire(&firings).await.unwrap();
    assert!(again.iter().all(|a| matches!(a, Err(StoreError::Conflict(_)))));
    assert_eq!(queue.depth().await.unwrap(), 2);
}

#[tokio::test]
async fn work_receive_leases_visible_messages_and_claims_their_runs_in_one_call() {
    let (_dir, path) = db_path();
    let db = open(&path);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = SqliteStore::new(db.clone());
    let queue = SqliteQueue::new(db.clone(), clock.clone());
    let work = SqliteWork::new(db, clock.clone());
    let now = clock.now();
    let mut waits = job("waits", &[]);
    waits.spec.overlap = Some(Overlap::QueueOne);
    store.create_jobs(&[job("plain", &[]), waits], None).await.unwrap();
    // Due: one run of each job. Not yet visible: a later run of the plain job.
    let (plain, held, later) = (run("plain", 0), run("waits", 0), run("plain", 60));
    for r in [&plain, &held, &later] {
        store.insert_run(r).await.unwrap();
    }
    let soon = now + chrono::Duration::hours(1);
    queue
        .enqueue(&[
            dispatch(&plain.run_id, now),
            dispatch(&held.run_id, now),
            dispatch(&later.run_id, soon),
        ])
        .await
        .unwrap();

    let request = ReceiveRequest {
        max: 10,
        wait: Dur::ZERO,
        worker: WorkerId::from("w"),
        lease: Dur::secs(30),
        hold: vec![Overlap::QueueOne],
        stop: tokio_util::sync::CancellationToken::new(),
    };
    let answers = work.receive(&request).await.unwrap();
    let mut by_run: Vec<(String, String)> = answers
        .iter()
        .map(|received| {
            let delivery = &received.delivery;
            let what = match &received.claim {
                Ok(JobClaim::Claimed(ClaimOutcome::Claimed { run, .. }, Some(job))) => {
                    format!("claimed {:?} job {}", run.state, job.id)
                }
                Ok(JobClaim::Held(job)) => format!("held job {}", job.id),
                other => format!("{other:?}"),
            };
            assert_eq!(delivery.receive_count, 1);
            (delivery.dispatch.run_id.to_string(), what)
        })
        .collect();
    by_run.sort();
    assert_eq!(
        by_run,
        [
            (plain.run_id.to_string(), "claimed Running job plain".to_string()),
            (held.run_id.to_string(), "held job waits".to_string()),
        ]
    );
    let stored = |r: &Run| {
        let store = &store;
        let id = r.run_id.clone();
        async move { store.get_run(&tenant(), &id).await.unwrap().unwrap().state }
    };
    assert_eq!(stored(&plain).await, RunState::Running);
    assert_eq!(stored(&held).await, RunState::Pending, "held: checked, then claimed");
    assert_eq!(stored(&later).await, RunState::Pending);
    // Both messages are leased: nothing more to receive now, all three still held.
    assert!(queue.receive(10, Dur::secs(30), Dur::ZERO).await.unwrap().is_empty());
    assert_eq!(queue.depth().await.unwrap(), 3);
    // The receipts are live ones: acking works.
    for received in &answers {
        queue.ack(&received.delivery.receipt).await.unwrap();
    }
    assert_eq!(queue.depth().await.unwrap(), 1);
}
