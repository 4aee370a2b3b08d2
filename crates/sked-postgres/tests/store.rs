//! What the PostgreSQL store must show beyond the contract suites: a malformed run cursor is
//! the caller's mistake, keys list in byte order whatever the cluster's locale, and claims
//! racing from separate pools (as from separate hosts) never pass a tenant's cap.

use sked_core::ids::TenantId;
use sked_core::ports::store::{ClaimOutcome, JobFilter, JobStoreExt, PageRequest, RunFilter, StoreError};
use sked_core::ports::{JobStore, QuotaStore};
use sked_core::quota::Quota;
use sked_postgres::testing::postgres;
use sked_postgres::{PgDb, PgOptions, PgStore};
use sked_testkit::contract::fixtures::{at, job, run, tenant, worker};
use std::sync::Arc;

async fn store_on(url: &str) -> Arc<PgStore> {
    let db = PgDb::connect(url, &PgOptions::default())
        .await
        .expect("connect to the test database");
    Arc::new(PgStore::new(db))
}

#[tokio::test]
async fn a_malformed_run_cursor_is_bad_cursor() {
    let store = store_on(&postgres().fresh_database()).await;
    for cursor in ["no separator", "soon|j@x"] {
        let page = PageRequest {
            cursor: Some(cursor.into()),
            limit: 10,
        };
        let answer = store.list_runs(&tenant("t1"), &RunFilter::default(), &page).await;
        assert!(
            matches!(answer, Err(StoreError::BadCursor(_))),
            "{cursor:?}: {answer:?}"
        );
    }
}

/// A fresh database whose default collation is ICU's `en-US` (case and punctuation folded),
/// unlike the test cluster's C locale.
async fn database_with_a_locale() -> String {
    let admin = tokio_postgres::connect(&postgres().fresh_database(), tokio_postgres::NoTls)
        .await
        .expect("connect to the test cluster");
    let (client, connection) = admin;
    tokio::spawn(connection);
    let name = format!("icu_{}", std::process::id());
    client
        .batch_execute(&format!(
            "CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"
        ))
        .await
        .expect("create a database collating by ICU's en-US");
    postgres().url(&name)
}

/// Ids compare bytewise (`COLLATE "C"`), as in the other stores, even where the database's own
/// collation is a locale's (which would page differently on another host).
#[tokio::test]
async fn jobs_list_in_byte_order_across_pages() {
    let store = store_on(&database_with_a_locale().await).await;
    let ids = ["b", "B", "a-1", "a1", "_z", "Z", "é", "a"];
    let jobs: Vec<_> = ids.iter().map(|id| job("t1", id)).collect();
    store.create_jobs(&jobs, None).await.unwrap();
    let mut listed = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list_jobs(&tenant("t1"), &JobFilter::default(), &PageRequest { cursor, limit: 3 })
            .await
            .unwrap();
        listed.extend(page.items.into_iter().map(|j| j.id.0));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let mut expected: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(listed, expected);
}

/// Two pools on one database, as two hosts would have: every claim a task of its own, half
/// through each pool, for more due runs than the tenant's `max_concurrent_runs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_racing_from_two_pools_never_pass_the_tenant_cap() {
    const CAP: usize = 3;
    let url = postgres().fresh_database();
    let (a, b) = (store_on(&url).await, store_on(&url).await);
    let t1: TenantId = tenant("t1");
    let cap = Quota {
        max_concurrent_runs: Some(CAP as u64),
        ..Quota::default()
    };
    a.put_quota(&t1, &cap).await.unwrap();
    let runs: Vec<_> = (0..24).map(|i| run("t1", &format!("j{i}"), 0)).collect();
    for r in &runs {
        assert!(a.insert_run(r).await.unwrap());
    }
    let mut racers = tokio::task::JoinSet::new();
    for (i, r) in runs.into_iter().enumerate() {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        racers.spawn(async move {
            store
                .claim_one(&r.tenant, &r.run_id, &worker(&format!("w{i}")), at(1), at(31))
                .await
        });
    }
    let mut started = 0;
    while let Some(answer) = racers.join_next().await {
        match answer.unwrap() {
            Ok(ClaimOutcome::Claimed { .. }) => started += 1,
            Ok(ClaimOutcome::AtCapacity) => {}
            other => panic!("a claim of a due run answered {other:?}"),
        }
    }
    assert_eq!(started, CAP);
}
