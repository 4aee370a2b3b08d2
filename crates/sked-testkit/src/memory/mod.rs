//! In-memory adapters: real implementations of the ports (not mocks) that keep the same
//! contracts as SQLite and AWS, for fast tests and deterministic simulations.
//!
//! - [`store::MemStore`]: jobs and runs ([`sked_core::ports::JobStore`]).
//! - [`queue::MemQueue`]: the dispatch queue, timed by an injected clock.
//! - [`logs::MemLogs`]: attempt logs with a byte cap.
//! - [`executor::FakeExecutor`]: a scripted executor for service tests.
//!
//! State is guarded by std `Mutex`es that are never held across an `.await`.

pub mod executor;
pub mod logs;
pub mod queue;
pub mod store;

pub use executor::FakeExecutor;
pub use logs::MemLogs;
pub use queue::MemQueue;
pub use store::MemStore;
