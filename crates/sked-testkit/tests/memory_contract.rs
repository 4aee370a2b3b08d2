//! Runs the store and queue contract suites against the in-memory adapters.

use sked_core::ports::{DispatchQueue, JobStore};
use sked_testkit::clock::ManualClock;
use sked_testkit::memory::{MemQueue, MemStore};
use std::sync::Arc;

sked_testkit::store_contract!(async || Arc::new(MemStore::new()) as Arc<dyn JobStore>);

sked_testkit::queue_contract!(|clock: Arc<ManualClock>| async move {
    Arc::new(MemQueue::new(clock)) as Arc<dyn DispatchQueue>
});
