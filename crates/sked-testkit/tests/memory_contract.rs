//! Runs the store, queue, work, key store, quota and log contract suites against the in-memory
//! adapters (the work port in both shapes over them: [`QueueThenStore`] and [`MemWork`]).

mod common;

use sked_core::ports::{DispatchQueue, JobStore, KeyStore, LogStore, QuotaStore, WebhookSecrets};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemKeys, MemLogs, MemQueue, MemStore};
use std::sync::Arc;

sked_testkit::store_contract!(async || Arc::new(MemStore::new()) as Arc<dyn JobStore>);

sked_testkit::concurrency_contract!(async || Arc::new(MemStore::new()) as Arc<dyn JobStore>);
sked_testkit::dependency_contract!(async || Arc::new(MemStore::new()) as Arc<dyn JobStore>);

sked_testkit::queue_contract!(|clock: Arc<ManualClock>| async move {
    Arc::new(MemQueue::new(clock)) as Arc<dyn DispatchQueue>
});

sked_testkit::work_contract!(
    |clock: Arc<ManualClock>| async move { common::work_ports(MemStore::new(), clock, false) }
);

sked_testkit::work_contract!(one_transaction_work_contract, |clock: Arc<ManualClock>| async move {
    common::work_ports(MemStore::new(), clock, true)
});

sked_testkit::keys_contract!(async || Arc::new(MemKeys::new()) as Arc<dyn KeyStore>);

sked_testkit::quota_contract!(async || {
    let store = Arc::new(MemStore::new());
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn QuotaStore>)
});

sked_testkit::alert_contract!(async || {
    let store = Arc::new(MemStore::new());
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn WebhookSecrets>)
});

sked_testkit::log_contract!(|cap: u64| async move { Arc::new(MemLogs::with_cap(cap)) as Arc<dyn LogStore> });
