//! The log contract (sked-testkit) against [`PgLogs`], each case on a fresh database of this
//! binary's private cluster; and what only a shared database can show: a log written through
//! one pool (a worker's host) is read, while it is written, through another (an API server's).

use sked_core::ports::{LogKey, LogLine, LogQuery, LogStore, LogStream};
use sked_postgres::testing::postgres;
use sked_postgres::{PgDb, PgLogs, PgOptions};
use sked_testkit::contract::fixtures::{at_ms, tenant};
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn connect(url: &str) -> PgDb {
    PgDb::connect(url, &PgOptions::default()).await.expect("connect")
}

sked_testkit::log_contract!(|cap: u64| async move {
    let db = connect(&postgres().fresh_database()).await;
    Arc::new(PgLogs::new(db).with_cap(cap)) as Arc<dyn LogStore>
});

fn key() -> LogKey {
    LogKey {
        tenant: tenant("acme"),
        run_id: "report@20260301T000000.000Z".into(),
        attempt: 1,
    }
}

fn line(i: i64, text: &str) -> LogLine {
    LogLine {
        ts: at_ms(i),
        stream: LogStream::Stdout,
        line: text.to_string(),
    }
}

/// A worker's host appends; an API server's host, on a pool of its own, follows the log with
/// its cursor and sees every line once, in order, before the writer finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_written_on_one_host_is_followed_from_another() {
    let url = postgres().fresh_database();
    let worker = PgLogs::new(connect(&url).await);
    let server = PgLogs::new(connect(&url).await);
    let mut writer = worker.writer(&key()).await.unwrap();
    let mut seen = Vec::new();
    let mut cursor = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0..50 {
        writer.append(line(i, &format!("line {i}"))).await.unwrap();
        if i % 10 == 9 {
            // Follow until the lines appended so far have all been seen.
            while seen.len() < (i + 1) as usize {
                assert!(Instant::now() < deadline, "lines not visible: saw {}", seen.len());
                match server
                    .read(
                        &key(),
                        &LogQuery {
                            after: cursor,
                            ..Default::default()
                        },
                    )
                    .await
                {
                    Ok(page) => {
                        seen.extend(page.lines.into_iter().map(|l| l.line));
                        cursor = Some(page.cursor);
                    }
                    Err(sked_core::ports::LogError::NotFound) => {}
                    Err(e) => panic!("{e}"),
                }
                tokio::task::yield_now().await;
            }
        }
    }
    writer.finish().await.unwrap();
    let expected: Vec<String> = (0..50).map(|i| format!("line {i}")).collect();
    assert_eq!(seen, expected);
}

/// A NUL, which PostgreSQL's text cannot hold, does not lose the line: it reads back as
/// U+FFFD, the rest of the text intact.
#[tokio::test]
async fn a_line_with_a_nul_is_kept() {
    let logs = PgLogs::new(connect(&postgres().fresh_database()).await);
    let mut writer = logs.writer(&key()).await.unwrap();
    writer.append(line(0, "a\0b")).await.unwrap();
    let summary = writer.finish().await.unwrap();
    assert_eq!(summary.bytes, 3);
    let page = logs.read(&key(), &LogQuery::default()).await.unwrap();
    assert_eq!(page.lines[0].line, "a\u{FFFD}b");
}

/// A writer opened again on an attempt that has lines appends after them.
#[tokio::test]
async fn a_second_writer_of_an_attempt_appends() {
    let logs = PgLogs::new(connect(&postgres().fresh_database()).await);
    for text in ["first", "second"] {
        let mut writer = logs.writer(&key()).await.unwrap();
        writer.append(line(0, text)).await.unwrap();
        writer.finish().await.unwrap();
    }
    let page = logs.read(&key(), &LogQuery::default()).await.unwrap();
    let texts: Vec<&str> = page.lines.iter().map(|l| l.line.as_str()).collect();
    assert_eq!(texts, ["first", "second"]);
}
