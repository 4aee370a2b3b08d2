//! The store and quota contract suites (sked-testkit) against [`DynamoStore`] on a real moto
//! server: each case gets its own freshly created table. moto answers DynamoDB requests one
//! at a time (scripts/moto-server.py), so its transactions are atomic as DynamoDB's are, and
//! the racing-claims case checks the real condition expressions.

mod common;

use sked_aws::DynamoStore;
use sked_core::ports::{JobStore, QuotaStore, SystemClock, WebhookSecrets};
use std::sync::Arc;

async fn fresh_dynamo() -> Arc<DynamoStore> {
    let (clients, config) = common::fresh_table().await;
    Arc::new(DynamoStore::new(clients.dynamodb, &config, Arc::new(SystemClock)))
}

async fn fresh_store() -> Arc<dyn JobStore> {
    fresh_dynamo().await
}

sked_testkit::store_contract!(fresh_store);
sked_testkit::concurrency_contract!(fresh_store);
sked_testkit::dependency_contract!(fresh_store);
sked_testkit::quota_contract!(async || {
    let store = fresh_dynamo().await;
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn QuotaStore>)
});

sked_testkit::alert_contract!(async || {
    let store = fresh_dynamo().await;
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn WebhookSecrets>)
});
