//! sked-testkit: test doubles and shared test suites.
//!
//! - [`clock`]: [`ManualClock`](clock::ManualClock), a clock tests set and advance by hand.
//! - [`memory`]: in-memory store, queue and log store (real implementations of the ports,
//!   not mocks: they keep the same contract as SQLite and AWS), and a scripted
//!   [`FakeExecutor`](memory::FakeExecutor).
//! - [`faults`]: [`Faulty`](faults::Faulty) wrappers that inject faults into any port from a
//!   seeded generator.
//! - [`sim`]: the deterministic simulation of the whole scheduler, with invariant checks.
//! - [`eventually`](eventually::eventually): a bounded real-time wait for what other tasks
//!   make true.
//! - [`contract`]: the contract suites every adapter runs, through [`store_contract!`],
//!   [`queue_contract!`], [`work_contract!`], [`keys_contract!`], [`quota_contract!`] and
//!   [`log_contract!`].
//!
//! Nothing here reads the wall clock except the real-time timeouts that turn a hung
//! contract case into a failure.

pub mod clock;
pub mod contract;
pub mod eventually;
pub mod faults;
pub mod memory;
pub mod sim;
