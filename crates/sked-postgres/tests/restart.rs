//! A database restart under a waiting receive and under a writing log: each test has a cluster
//! of its own (it stops and starts it), so nothing else in this binary shares it.

use sked_core::duration::Dur;
use sked_core::ports::queue::DispatchQueue;
use sked_core::ports::{Clock, LogKey, LogLine, LogQuery, LogStore, LogStream};
use sked_postgres::testing::PgServer;
use sked_postgres::{PgDb, PgLogs, PgOptions, PgQueue};
use sked_testkit::clock::ManualClock;
use sked_testkit::contract::fixtures::{at, at_ms, dispatch, t0, tenant};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Real time after which a wait counts as hung.
const HANG: Duration = Duration::from_secs(60);

async fn connect(url: &str) -> PgDb {
    PgDb::connect(url, &PgOptions::default()).await.expect("connect")
}

/// Stops the server and starts it again (on a blocking thread: it waits for the server).
async fn restart(server: &Arc<PgServer>) {
    let server = server.clone();
    tokio::task::spawn_blocking(move || {
        server.stop();
        server.start_again();
    })
    .await
    .unwrap();
}

/// A receive waiting while the database restarts gets the message enqueued after it is back:
/// its listener reconnects (the fallback poll is an hour away, the clock stands still).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_receive_survives_a_database_restart() {
    let server = Arc::new(PgServer::start());
    let url = server.fresh_database();
    let clock = Arc::new(ManualClock::new(t0()));
    let waiter = Arc::new(
        PgQueue::new(connect(&url).await, clock.clone() as Arc<dyn Clock>)
            .with_fallback_poll(Duration::from_secs(3600)),
    );
    let received = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.receive(10, Dur::secs(60), Dur::secs(3600)).await }
    });
    restart(&server).await;
    // A pool of the host that enqueues, opened once the database is back.
    let other = PgQueue::new(connect(&url).await, clock.clone() as Arc<dyn Clock>);
    other.enqueue(&[dispatch("after-restart", 5, at(0))]).await.unwrap();
    let got = tokio::time::timeout(HANG, received)
        .await
        .expect("the waiting receive never got the message")
        .unwrap()
        .expect("receive");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].dispatch, dispatch("after-restart", 5, at(0)));
}

/// A line appended while the database is down is inserted once it is back, and the log reads
/// whole, each line once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_writer_survives_a_database_restart() {
    let server = Arc::new(PgServer::start());
    let url = server.fresh_database();
    let logs = PgLogs::new(connect(&url).await);
    let key = LogKey {
        tenant: tenant("acme"),
        run_id: "report@20260301T000000.000Z".into(),
        attempt: 1,
    };
    let line = |i: i64| LogLine {
        ts: at_ms(i),
        stream: LogStream::Stdout,
        line: format!("line {i}"),
    };
    let mut writer = logs.writer(&key).await.unwrap();
    writer.append(line(0)).await.unwrap();
    // Wait for the first line to land before the database goes away.
    let deadline = Instant::now() + HANG;
    while logs.read(&key, &LogQuery::default()).await.is_err() {
        assert!(Instant::now() < deadline, "the first line never landed");
        tokio::task::yield_now().await;
    }
    let down = {
        let server = server.clone();
        tokio::task::spawn_blocking(move || server.stop())
    };
    down.await.unwrap();
    writer.append(line(1)).await.unwrap();
    writer.append(line(2)).await.unwrap();
    let up = {
        let server = server.clone();
        tokio::task::spawn_blocking(move || server.start_again())
    };
    up.await.unwrap();
    let summary = tokio::time::timeout(HANG, writer.finish())
        .await
        .expect("finish hung")
        .expect("the lines appended while the database was down are kept");
    assert_eq!(summary.bytes, 18);
    let page = logs.read(&key, &LogQuery::default()).await.unwrap();
    assert_eq!(page.lines, vec![line(0), line(1), line(2)]);
}
