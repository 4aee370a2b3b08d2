//! In-memory adapters: real implementations of the ports (not mocks) that keep the same
//! contracts as SQLite and AWS, for fast tests and deterministic simulations.
//!
//! - [`store::MemStore`]: jobs and runs ([`sked_core::ports::JobStore`]).
//! - [`queue::MemQueue`]: the dispatch queue, timed by an injected clock.
//! - [`logs::MemLogs`]: attempt logs with a byte cap.
//! - [`keys::MemKeys`]: API keys ([`sked_core::ports::KeyStore`]).
//! - [`work::MemWork`]: the work port's one-transaction shape over a [`MemStore`] and a
//!   [`MemQueue`] (each step under both their locks), as SQLite has it.
//! - [`executor::FakeExecutor`]: a scripted executor for service tests.
//! - [`MemPorts`]: the first three on a [`ManualClock`], with the work port over the store
//!   and the queue ([`sked_core::work::QueueThenStore`]), as a service test wires them.
//!
//! State is guarded by std `Mutex`es that are never held across an `.await`.

pub mod executor;
pub mod keys;
pub mod logs;
pub mod queue;
pub mod store;
mod unwritten;
pub mod work;

pub use executor::FakeExecutor;
pub use keys::MemKeys;
pub use logs::MemLogs;
pub use queue::MemQueue;
pub use store::MemStore;
pub use work::MemWork;

use crate::clock::ManualClock;
use serde_json::json;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::ports::store::{PageRequest, RunFilter};
use sked_core::service::jobs::NewJob;
use sked_core::service::sweeper::{Sweeper, SweeperConfig};
use sked_core::service::{Ports, Sked, SkedConfig, SweepSignal};
use sked_core::timestamp;
use std::sync::Arc;

/// In-memory store, queue and logs on a manual clock: the ports of a service test, with the
/// clock and the store kept typed so the test can move the one and look inside the other.
pub struct MemPorts {
    /// The ports to hand to core services.
    pub ports: Ports,
    /// The clock every port reads.
    pub clock: Arc<ManualClock>,
    /// The store behind `ports.store`.
    pub store: Arc<MemStore>,
}

impl MemPorts {
    /// Fresh ports on a manual clock set to `start` (RFC 3339).
    pub fn at(start: &str) -> MemPorts {
        Self::over(start, MemStore::new())
    }

    /// [`MemPorts::at`] over a store that leaves one-shots' plain firings unwritten
    /// ([`MemStore::lean`]).
    pub fn lean_at(start: &str) -> MemPorts {
        Self::over(start, MemStore::lean())
    }

    fn over(start: &str, store: MemStore) -> MemPorts {
        let start = sked_core::timestamp::parse(start).expect("an RFC 3339 start time");
        let clock = Arc::new(ManualClock::new(start));
        let store = Arc::new(store);
        let ports = Ports::new(
            store.clone(),
            Arc::new(MemQueue::new(clock.clone())),
            Arc::new(MemLogs::new()),
            clock.clone(),
        );
        MemPorts { ports, clock, store }
    }
}

/// Creates the one-shot `job` of the default tenant, due at the clock's now (a `true` command,
/// with `extra`'s fields added to its spec), and fires it with one sweep: its run PENDING, its
/// message queued. Returns the run's id.
pub async fn fire_one_shot_now(ports: &Ports, extra: serde_json::Value) -> RunId {
    let sked = Sked::new(ports.clone(), SkedConfig::default(), SweepSignal::default());
    let at = timestamp::format(&ports.clock.now());
    let mut spec = json!({"schedule": {"at": at}, "task": {"command": {"argv": ["true"]}}});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    let new = NewJob {
        id: Some(JobId::from("job")),
        spec: serde_json::from_value(spec).expect("a valid one-shot spec"),
    };
    let tenant = TenantId::default();
    let job = sked.create_job(&tenant, new, None).await.expect("created").job;
    let sweeper = Sweeper::new(ports.clone(), SweepSignal::default(), SweeperConfig::default());
    assert_eq!(sweeper.sweep_once().await.expect("swept").fired, 1);
    let its_runs = RunFilter {
        job_id: Some(job.id),
        ..Default::default()
    };
    let page = PageRequest { cursor: None, limit: 1 };
    let runs = ports
        .store
        .list_runs(&tenant, &its_runs, &page)
        .await
        .expect("its runs");
    runs.items[0].run_id.clone()
}
