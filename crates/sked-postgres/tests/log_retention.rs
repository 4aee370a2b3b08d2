//! Log retention on PostgreSQL ([`PgLogs`] as the `LogRetention` port): lines older than the
//! cutoff go, a bounded batch per call, recent ones stay; the delete finds old lines by the
//! index of migration 5; two processes pruning at once remove each line once.

use chrono::Duration;
use sked_core::Timestamp;
use sked_core::ports::{LogError, LogKey, LogLine, LogQuery, LogRetention, LogStore, LogStream};
use sked_postgres::testing::postgres;
use sked_postgres::{PgDb, PgLogs, PgOptions};
use sked_testkit::contract::fixtures::tenant;

async fn connect(url: &str) -> PgDb {
    PgDb::connect(url, &PgOptions::default()).await.expect("connect")
}

fn key(run: &str) -> LogKey {
    LogKey {
        tenant: tenant("acme"),
        run_id: format!("{run}@20260301T000000.000Z").as_str().into(),
        attempt: 1,
    }
}

/// Writes one line per instant of `at` to `key`'s log.
async fn write(logs: &PgLogs, key: &LogKey, at: &[Timestamp]) {
    let mut writer = logs.writer(key).await.unwrap();
    for (i, ts) in at.iter().enumerate() {
        let line = LogLine {
            ts: *ts,
            stream: LogStream::Stdout,
            line: format!("line {i}"),
        };
        writer.append(line).await.unwrap();
    }
    writer.finish().await.unwrap();
}

async fn lines(logs: &PgLogs, key: &LogKey) -> Result<Vec<String>, LogError> {
    let page = logs.read(key, &LogQuery::default()).await?;
    Ok(page.lines.into_iter().map(|l| l.line).collect())
}

#[tokio::test]
async fn old_lines_go_in_bounded_batches_and_recent_ones_stay() {
    let logs = PgLogs::new(connect(&postgres().fresh_database()).await);
    let now = chrono::Utc::now();
    let old = now - Duration::days(40);
    let (gone, straddling, recent) = (key("gone"), key("straddling"), key("recent"));
    write(&logs, &gone, &[old; 5]).await;
    write(&logs, &straddling, &[old, old, now, now]).await;
    write(&logs, &recent, &[now; 3]).await;
    let cutoff = now - Duration::days(30);

    let batches = [
        logs.remove_before(cutoff, 3).await.unwrap(),
        logs.remove_before(cutoff, 3).await.unwrap(),
        logs.remove_before(cutoff, 3).await.unwrap(),
    ];
    assert_eq!(batches, [3, 3, 1]);
    assert!(matches!(lines(&logs, &gone).await, Err(LogError::NotFound)));
    assert_eq!(lines(&logs, &straddling).await.unwrap(), ["line 2", "line 3"]);
    assert_eq!(lines(&logs, &recent).await.unwrap(), ["line 0", "line 1", "line 2"]);
}

/// The batch is found through `log_lines_ts`, not by reading the whole table (the planner is
/// told to avoid sequential scans: on a table this small it would prefer one).
#[tokio::test]
async fn old_lines_are_found_by_the_index() {
    let db = connect(&postgres().fresh_database()).await;
    let conn = db.get().await.unwrap();
    conn.batch_execute("SET enable_seqscan = off").await.unwrap();
    let plan: Vec<String> = conn
        .query(
            "EXPLAIN SELECT tenant, run_id, attempt, seq FROM log_lines WHERE ts < $1 LIMIT $2",
            &[&0_i64, &10_i64],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(plan.iter().any(|l| l.contains("log_lines_ts")), "{plan:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_pruning_at_once_remove_each_line_once() {
    let url = postgres().fresh_database();
    let (a, b) = (PgLogs::new(connect(&url).await), PgLogs::new(connect(&url).await));
    let now = chrono::Utc::now();
    for run in 0..10 {
        write(&a, &key(&format!("r{run}")), &[now - Duration::days(40); 20]).await;
    }
    let cutoff = now - Duration::days(30);
    let prune = |logs: PgLogs| async move {
        let mut removed = 0;
        loop {
            let batch = logs.remove_before(cutoff, 7).await.unwrap();
            removed += batch;
            if batch < 7 {
                return removed;
            }
        }
    };
    let (x, y) = tokio::join!(tokio::spawn(prune(a.clone())), tokio::spawn(prune(b)));
    assert_eq!(x.unwrap() + y.unwrap(), 200);
    assert_eq!(a.remove_before(cutoff, 7).await.unwrap(), 0);
}
