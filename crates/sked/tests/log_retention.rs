//! End to end: `sked server` (with its sweeper) removes attempts' logs older than
//! `--log-retention` (30 days by default) from its data dir when it starts, and keeps recent
//! ones; a retention it cannot read is refused at start, naming it; so is a log bucket, which
//! only a PostgreSQL database can use.

mod common;

use common::*;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

/// Writes a log file at `path`, last modified `age` ago.
fn log_file(path: &Path, age: Duration) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        "{\"ts\":\"2026-01-01T00:00:00.000Z\",\"stream\":\"stdout\",\"line\":\"hi\"}\n",
    )
    .unwrap();
    let file = std::fs::File::options().append(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

#[tokio::test]
async fn the_server_removes_logs_older_than_the_retention_and_keeps_recent_ones() {
    let sandbox = Sandbox::new();
    let logs = sandbox.data_dir().join("logs");
    let old = logs.join("acme/old@20260101T000000.000Z/1.log");
    let recent = logs.join("acme/recent@20260101T000000.000Z/1.log");
    log_file(&old, Duration::from_secs(40 * 86_400));
    log_file(&recent, Duration::from_secs(86_400));

    let _server = sandbox.server(&["--workers", "0", "--log-retention", "30d"]);
    let server_log = sandbox.path().join("server.log");
    let deadline = Instant::now() + Duration::from_secs(20);
    // The pass at start logs what it removed once it is done.
    while !std::fs::read_to_string(&server_log)
        .unwrap_or_default()
        .contains("removed old attempt logs")
    {
        assert!(
            Instant::now() < deadline,
            "no retention pass in 20 s; log:\n{}",
            std::fs::read_to_string(&server_log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!old.exists(), "the 40-day-old log is still there");
    assert!(!old.parent().unwrap().exists(), "its run folder is still there");
    assert!(recent.exists(), "the 1-day-old log was removed");
}

#[test]
fn an_unreadable_retention_is_refused() {
    let (code, stderr) = Sandbox::new().server_refusing(&["--log-retention", "thirty days"], Duration::from_secs(20));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--log-retention") && stderr.contains("thirty days"),
        "{stderr}"
    );
}

#[test]
fn a_log_bucket_beside_the_sqlite_file_is_refused() {
    let (code, stderr) = Sandbox::new().server_refusing(&["--log-bucket", "s3://sked-logs"], Duration::from_secs(20));
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("--log-bucket") && stderr.contains("--database-url"),
        "{stderr}"
    );
}
