//! The store contract suite (sked-testkit) against [`DynamoStore`] on a real moto server:
//! each case gets its own freshly created table.

mod common;

use sked_aws::DynamoStore;
use sked_core::ports::{JobStore, SystemClock};
use std::sync::Arc;

async fn fresh_store() -> Arc<dyn JobStore> {
    let (clients, config) = common::fresh_table().await;
    Arc::new(DynamoStore::new(clients.dynamodb, &config, Arc::new(SystemClock)))
}

sked_testkit::store_contract!(fresh_store);
