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
