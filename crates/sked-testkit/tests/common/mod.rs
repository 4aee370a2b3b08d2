//! What the memory contract tests share: the work port's two shapes over a memory store.

use sked_core::ports::{DispatchQueue, JobStore};
use sked_core::work::QueueThenStore;
use sked_testkit::clock::ManualClock;
use sked_testkit::contract::work::WorkPorts;
use sked_testkit::memory::{MemQueue, MemStore, MemWork};
use std::sync::Arc;

/// The work contract's ports over `store` and a fresh queue on `clock`: the store and the
/// queue in turn ([`QueueThenStore`], as DynamoDB with SQS), or, with `one_transaction`,
/// each step under both their locks ([`MemWork`], as SQLite).
pub fn work_ports(store: MemStore, clock: Arc<ManualClock>, one_transaction: bool) -> WorkPorts {
    let (store, queue) = (Arc::new(store), Arc::new(MemQueue::new(clock.clone())));
    let work: Arc<dyn sked_core::ports::WorkPort> = match one_transaction {
        true => Arc::new(MemWork::new(store.clone(), queue.clone(), clock.clone())),
        false => {
            let (store, queue): (Arc<dyn JobStore>, Arc<dyn DispatchQueue>) = (store.clone(), queue.clone());
            Arc::new(QueueThenStore::new(store, queue, clock.clone()))
        }
    };
    WorkPorts {
        store,
        queue,
        work,
        clock,
    }
}
