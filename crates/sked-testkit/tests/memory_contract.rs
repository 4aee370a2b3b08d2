//! Runs the store, queue, key store and quota contract suites against the in-memory adapters.

use sked_core::ports::{DispatchQueue, JobStore, KeyStore, QuotaStore};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemKeys, MemQueue, MemStore};
use std::sync::Arc;

sked_testkit::store_contract!(async || Arc::new(MemStore::new()) as Arc<dyn JobStore>);

sked_testkit::queue_contract!(|clock: Arc<ManualClock>| async move {
    Arc::new(MemQueue::new(clock)) as Arc<dyn DispatchQueue>
});

sked_testkit::keys_contract!(async || Arc::new(MemKeys::new()) as Arc<dyn KeyStore>);

sked_testkit::quota_contract!(async || {
    let store = Arc::new(MemStore::new());
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn QuotaStore>)
});
