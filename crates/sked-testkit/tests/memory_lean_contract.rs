//! Runs the store, work, quota, dependency, concurrency and alert contract suites against
//! [`MemStore::lean`]: the store that leaves one-shots' plain firings unwritten, as the lean
//! DynamoDB layout does ([`sked_core::unwritten_firing`]), must keep every promise the port
//! makes.

mod common;

use sked_core::ports::{JobStore, QuotaStore, WebhookSecrets};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::MemStore;
use std::sync::Arc;

sked_testkit::store_contract!(async || Arc::new(MemStore::lean()) as Arc<dyn JobStore>);

sked_testkit::concurrency_contract!(async || Arc::new(MemStore::lean()) as Arc<dyn JobStore>);
sked_testkit::dependency_contract!(async || Arc::new(MemStore::lean()) as Arc<dyn JobStore>);

sked_testkit::work_contract!(
    |clock: Arc<ManualClock>| async move { common::work_ports(MemStore::lean(), clock, false) }
);

sked_testkit::work_contract!(one_transaction_work_contract, |clock: Arc<ManualClock>| async move {
    common::work_ports(MemStore::lean(), clock, true)
});

sked_testkit::quota_contract!(async || {
    let store = Arc::new(MemStore::lean());
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn QuotaStore>)
});

sked_testkit::alert_contract!(async || {
    let store = Arc::new(MemStore::lean());
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn WebhookSecrets>)
});
