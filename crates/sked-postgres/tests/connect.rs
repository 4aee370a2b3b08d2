//! Opening the database: migrations applied on connect, once, from several pools at once; a
//! database that is down fails to open with an error, not a hang.

use sked_postgres::testing::postgres;
use sked_postgres::{ConnectError, PgDb, PgOptions};
use std::time::Duration;

#[tokio::test]
async fn connect_migrates_once_from_several_pools() {
    let url = postgres().fresh_database();
    let options = PgOptions::default();
    let (a, b) = tokio::join!(PgDb::connect(&url, &options), PgDb::connect(&url, &options));
    let (a, _b) = (a.unwrap(), b.unwrap());
    let conn = a.get().await.unwrap();
    let marker: String = conn
        .query_one("SELECT value FROM sked_meta WHERE key = 'application'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(marker, "sked");
    PgDb::connect(&url, &options)
        .await
        .expect("connecting again applies nothing");
}

#[tokio::test]
async fn connect_to_nothing_fails() {
    let options = PgOptions {
        acquire_timeout: Duration::from_secs(1),
        ..PgOptions::default()
    };
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = PgDb::connect(&format!("postgres://sked@127.0.0.1:{closed}/x"), &options)
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectError::Connect(_)), "{err}");
}

/// Two transactions that each read a counter and write it plus one, racing: serializable
/// isolation aborts one of each conflicting pair and the closure runs again, so no increment
/// is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_read_then_write_transactions_lose_nothing() {
    let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
        .await
        .unwrap();
    db.get()
        .await
        .unwrap()
        .batch_execute("CREATE TABLE counter (n BIGINT NOT NULL); INSERT INTO counter VALUES (0);")
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                db.transaction(|tx| {
                    let n: i64 = tx.query_one("SELECT n FROM counter", &[])?.get(0);
                    tx.execute("UPDATE counter SET n = $1", &[&(n + 1)])?;
                    Ok(())
                })
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let n: i64 = db
        .get()
        .await
        .unwrap()
        .query_one("SELECT n FROM counter", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 80);
}

/// A refusal decided inside the closure rolls the transaction back and comes back as is.
#[tokio::test]
async fn a_refusal_rolls_back() {
    let db = PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
        .await
        .unwrap();
    db.get()
        .await
        .unwrap()
        .batch_execute("CREATE TABLE t (n BIGINT)")
        .await
        .unwrap();
    let err = db
        .transaction(|tx| {
            tx.execute("INSERT INTO t VALUES (1)", &[])?;
            Err::<(), _>(sked_core::ports::StoreError::NotFound.into())
        })
        .await
        .unwrap_err();
    assert!(matches!(err.into_store(), sked_core::ports::StoreError::NotFound));
    let rows = db.get().await.unwrap().query("SELECT n FROM t", &[]).await.unwrap();
    assert!(rows.is_empty());
}
