//! The contract suites against [`DynamoStore`] in its lean configuration: one-shots' plain
//! firings left unwritten (`AwsConfig::unwritten_one_shots`, `docs/lean-layout.md`), no
//! succeeded run carrying its state for the `list` index (`RunListedState::Unsuccessful`), and
//! jobs keyed by tenant shards (`JobKeys::TenantShards`: listed by the table's own keys, the
//! layout marker checked first, as every process does): each case on a fresh table of a real
//! moto server, as `dynamo_contract` runs them on the store that writes every firing.

mod common;

use sked_aws::{DynamoStore, JobKeys, RunListedState};
use sked_core::ports::{JobStore, QuotaStore, SystemClock, WebhookSecrets};
use std::sync::Arc;

async fn fresh_dynamo() -> Arc<DynamoStore> {
    let (clients, mut config) = common::fresh_table().await;
    config.unwritten_one_shots = true;
    config.run_listed_state = RunListedState::Unsuccessful;
    config.job_keys = JobKeys::TenantShards;
    sked_aws::check_table_layout(&clients, &config)
        .await
        .expect("a fresh table takes the layout");
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
