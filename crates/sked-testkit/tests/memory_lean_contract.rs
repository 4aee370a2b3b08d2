//! Runs the store, work, quota, dependency, concurrency and alert contract suites against
//! [`MemStore::lean`]: the store that leaves one-shots' plain firings unwritten, as the lean
//! DynamoDB layout does ([`sked_core::unwritten_firing`]), must keep every promise the port
//! makes.

use sked_core::ports::{DispatchQueue, JobStore, QuotaStore, WebhookSecrets};
use sked_core::work::QueueThenStore;
use sked_testkit::clock::ManualClock;
use sked_testkit::contract::work::WorkPorts;
use sked_testkit::memory::{MemQueue, MemStore, MemWork};
use std::sync::Arc;

sked_testkit::store_contract!(async || Arc::new(MemStore::lean()) as Arc<dyn JobStore>);

sked_testkit::concurrency_contract!(async || Arc::new(MemStore::lean()) as Arc<dyn JobStore>);
sked_testkit::dependency_contract!(async || Arc::new(MemStore::lean()) as Arc<dyn JobStore>);

sked_testkit::work_contract!(|clock: Arc<ManualClock>| async move {
    let store: Arc<dyn JobStore> = Arc::new(MemStore::lean());
    let queue: Arc<dyn DispatchQueue> = Arc::new(MemQueue::new(clock.clone()));
    let work = Arc::new(QueueThenStore::new(store.clone(), queue.clone(), clock.clone()));
    WorkPorts {
        store,
        queue,
        work,
        clock,
    }
});

sked_testkit::work_contract!(one_transaction_work_contract, |clock: Arc<ManualClock>| async move {
    let (store, queue) = (Arc::new(MemStore::lean()), Arc::new(MemQueue::new(clock.clone())));
    let work = Arc::new(MemWork::new(store.clone(), queue.clone(), clock.clone()));
    WorkPorts {
        store,
        queue,
        work,
        clock,
    }
});

sked_testkit::quota_contract!(async || {
    let store = Arc::new(MemStore::lean());
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn QuotaStore>)
});

sked_testkit::alert_contract!(async || {
    let store = Arc::new(MemStore::lean());
    (store.clone() as Arc<dyn JobStore>, store as Arc<dyn WebhookSecrets>)
});
