//! The store's contract suites (sked-testkit) against PostgreSQL: each case gets a fresh
//! database on this test binary's private cluster, migrated by `PgDb::connect`, and the same
//! store as every port it implements (jobs, quotas, webhook secrets), as a deployment shares
//! it. The concurrency, quota and dependency suites race claims and ends on several threads,
//! each through its own pooled connection.

use sked_core::ports::{JobStore, KeyStore, QuotaStore, WebhookSecrets};
use sked_postgres::testing::postgres;
use sked_postgres::{PgDb, PgKeys, PgOptions, PgStore};
use std::sync::Arc;

/// A fresh, migrated database.
async fn fresh_db() -> PgDb {
    PgDb::connect(&postgres().fresh_database(), &PgOptions::default())
        .await
        .expect("connect to a fresh database")
}

async fn fresh_store() -> Arc<PgStore> {
    Arc::new(PgStore::new(fresh_db().await))
}

sked_testkit::store_contract!(async || fresh_store().await as Arc<dyn JobStore>);

sked_testkit::concurrency_contract!(async || fresh_store().await as Arc<dyn JobStore>);

sked_testkit::dependency_contract!(async || fresh_store().await as Arc<dyn JobStore>);

sked_testkit::keys_contract!(async || Arc::new(PgKeys::new(fresh_db().await)) as Arc<dyn KeyStore>);

sked_testkit::quota_contract!(async || {
    let store = fresh_store().await;
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn QuotaStore>)
});

sked_testkit::alert_contract!(async || {
    let store = fresh_store().await;
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn WebhookSecrets>)
});
