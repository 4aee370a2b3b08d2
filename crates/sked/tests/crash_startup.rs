//! End to end: `sked server` (and `sked worker`) meeting a bad database file or a full disk.
//!
//! - A corrupted file (garbage where `sked.db` is) and another application's SQLite file:
//!   both processes exit non-zero with a message naming the file, and leave its bytes as
//!   they were.
//! - A file another process keeps locked: a message naming the file and the lock; once the
//!   lock is released, every job created before is still there.
//! - A full disk, made real with `RLIMIT_FSIZE` (`ulimit -f` in the shell that execs the
//!   server, with `SIGXFSZ` ignored so writes fail with `EFBIG` instead of killing it):
//!   creating jobs answers 503 `unavailable`, the server keeps serving reads and stops cleanly, and
//!   after a restart without the limit every job accepted with 201 is there while the
//!   refused batch left nothing behind.
//! - Logs that cannot be written (stderr on `/dev/full`): the server still starts, runs
//!   work and stops on SIGTERM.

mod common;

use common::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// How long a refusing process may take: SQLite's busy timeout (5 s) plus start-up.
const REFUSAL: Duration = Duration::from_secs(30);

/// `n` bytes that are not an SQLite file (a fixed pseudo-random sequence).
fn garbage(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Asserts a refusal: non-zero exit, and stderr naming `db` and containing `what`.
fn assert_refused(who: &str, (code, stderr): &(i32, String), db: &Path, what: &str) {
    assert_ne!(*code, 0, "{who} exited 0; stderr: {stderr}");
    assert!(
        stderr.contains(&db.display().to_string()),
        "{who}'s message does not name {}: {stderr}",
        db.display()
    );
    assert!(stderr.contains(what), "{who}'s message does not say {what:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{who} panicked: {stderr}");
}

/// `count` one-shot jobs far in the future (they stay ACTIVE and never run), ids
/// `<prefix>-<n>`, each with a `pad`-byte argument so that the database grows.
fn far_jobs(prefix: &str, count: usize, pad: usize) -> Vec<Value> {
    let filler = "x".repeat(pad);
    (0..count)
        .map(|i| {
            json!({"id": format!("{prefix}-{i:04}"), "schedule": {"at": "2099-01-01T00:00:00Z"},
                   "task": {"command": {"argv": ["echo", filler]}}})
        })
        .collect()
}

/// The ids of every job the server has.
async fn job_ids(api: &Api) -> BTreeSet<String> {
    api.all_jobs("")
        .await
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_corrupted_database_file_is_refused_and_left_untouched() {
    let sandbox = Sandbox::new();
    let db = sandbox.data_dir().join("sked.db");
    std::fs::create_dir_all(sandbox.data_dir()).unwrap();
    let bytes = garbage(64 * 1024);
    std::fs::write(&db, &bytes).unwrap();

    let server = sandbox.server_refusing(&[], REFUSAL);
    assert_refused("sked server", &server, &db, "is not a sked database");
    let worker = sandbox.worker_refusing(REFUSAL);
    assert_refused("sked worker", &worker, &db, "is not a sked database");

    assert!(std::fs::read(&db).unwrap() == bytes, "the corrupted file was changed");
    for side in ["sked.db-wal", "sked.db-journal"] {
        let path = sandbox.data_dir().join(side);
        let len = std::fs::metadata(&path).map_or(0, |m| m.len());
        assert_eq!(len, 0, "{} was written beside the corrupted file", path.display());
    }
}

#[test]
fn another_application_s_database_is_refused_and_left_untouched() {
    let sandbox = Sandbox::new();
    let db = sandbox.data_dir().join("sked.db");
    std::fs::create_dir_all(sandbox.data_dir()).unwrap();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');")
            .unwrap();
    }
    let before = std::fs::read(&db).unwrap();

    let server = sandbox.server_refusing(&[], REFUSAL);
    assert_refused("sked server", &server, &db, "is not a sked database");

    assert!(
        std::fs::read(&db).unwrap() == before,
        "the other application's file was changed"
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let body: String = conn.query_row("SELECT body FROM notes", [], |r| r.get(0)).unwrap();
    assert_eq!(body, "mine");
}

#[tokio::test]
async fn a_locked_database_is_reported_and_loses_nothing() {
    let sandbox = Sandbox::new();
    let db = sandbox.data_dir().join("sked.db");
    let mut server = sandbox.server(&["--workers", "0"]);
    let jobs = far_jobs("kept", 50, 16);
    let (status, body) = server.api().post("/v1/jobs:batch", &json!({ "jobs": jobs })).await;
    assert_eq!(status, 201, "{body}");
    let created = job_ids(&server.api()).await;
    assert_eq!(created.len(), 50);
    assert_eq!(
        server.terminate(Duration::from_secs(15)),
        Some(0),
        "server did not stop cleanly"
    );

    // Another process takes the write lock and keeps it.
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();

    let refused = sandbox.server_refusing(&["--workers", "0"], REFUSAL);
    assert_refused("sked server", &refused, &db, "is locked by another process");
    let refused = sandbox.worker_refusing(REFUSAL);
    assert_refused("sked worker", &refused, &db, "is locked by another process");

    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);

    let server = sandbox.server(&["--workers", "0"]);
    assert_eq!(job_ids(&server.api()).await, created, "jobs changed across the lock");
    server.api().create_job(far_jobs("after", 1, 0).remove(0)).await;
}

#[tokio::test]
async fn a_full_disk_answers_503_and_keeps_every_accepted_job() {
    let sandbox = Sandbox::new();
    // 2048 blocks: 1 MiB where `ulimit -f` counts 512-byte blocks (POSIX sh), 2 MiB where it
    // counts KiB (bash). The loop below only needs the limit to be met at all.
    let mut server = sandbox.server_after("trap '' XFSZ\nulimit -f 2048", &["--workers", "0"]);
    let api = server.api();

    let mut accepted = BTreeSet::new();
    let mut refused = None;
    for batch in 0..200 {
        let jobs = far_jobs(&format!("b{batch:03}"), 100, 1024);
        let (status, body) = api.post("/v1/jobs:batch", &json!({ "jobs": jobs })).await;
        if status == 201 {
            accepted.extend(items(&body).iter().map(|j| j["id"].as_str().unwrap().to_string()));
            continue;
        }
        refused = Some((batch, status, body));
        break;
    }
    let (batch, status, body) = refused.expect("the file size limit was never met");
    println!("disk full after {} accepted jobs: {status} {body}", accepted.len());
    assert!(!accepted.is_empty(), "the limit left no room for a first batch");
    assert_eq!(status, 503, "a full disk is worth retrying later: {body}");
    assert_eq!(body["error"]["code"], "unavailable", "{body}");

    // Still serving: reads work, and writes keep failing cleanly rather than crashing.
    let first = accepted.iter().next().unwrap();
    api.get_ok(&format!("/v1/jobs/{first}")).await;
    // The same batch again (a smaller write may still fit in what is left).
    let again = far_jobs(&format!("b{batch:03}"), 100, 1024);
    let (status, body) = api.post("/v1/jobs:batch", &json!({ "jobs": again })).await;
    assert_eq!(status, 503, "a full disk is worth retrying later: {body}");
    assert_eq!(api.get_ok("/healthz").await["status"], "ok");
    assert!(!server.exited(), "the server exited on a full disk");
    let log = std::fs::read_to_string(sandbox.path().join("server.log")).unwrap();
    assert!(
        log.contains("disk I/O error") || log.contains("disk is full"),
        "the server log does not say what failed:\n{}",
        server.log_tail(20)
    );
    assert_eq!(
        server.terminate(Duration::from_secs(20)),
        Some(0),
        "the server did not stop cleanly on a full disk"
    );

    let server = sandbox.server(&["--workers", "0"]);
    let api = server.api();
    let ids = job_ids(&api).await;
    let missing: Vec<_> = accepted.difference(&ids).collect();
    assert!(missing.is_empty(), "accepted jobs lost: {missing:?}");
    let extra: Vec<_> = ids.difference(&accepted).collect();
    assert!(extra.is_empty(), "refused jobs were stored (batch {batch}): {extra:?}");
    api.create_job(far_jobs("after", 1, 0).remove(0)).await;
}

#[tokio::test]
async fn unwritable_logs_do_not_stop_the_server() {
    let sandbox = Sandbox::new();
    // Every log line fails with ENOSPC. Before the fix the first one panicked the main task
    // (exit 101), and a failed line in the signal handler swallowed SIGTERM.
    let mut server = sandbox.server_after("exec 2>/dev/full", &["--workers", "1"]);
    let api = server.api();
    api.create_job(json!({"id": "hello", "schedule": {"at": iso(in_secs(0.0))}, "task": sh("echo hi")}))
        .await;
    let run = wait_first_run(&api, "hello", Duration::from_secs(10)).await;
    let run = wait_terminal(&api, run["run_id"].as_str().unwrap(), Duration::from_secs(20)).await;
    assert_eq!(run["state"], "SUCCEEDED", "{run}");
    assert_eq!(
        server.terminate(Duration::from_secs(15)),
        Some(0),
        "SIGTERM did not stop the server"
    );
}
