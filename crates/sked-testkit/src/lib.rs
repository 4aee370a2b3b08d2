//! sked-testkit: test doubles and shared test suites.
//!
//! - [`clock`]: a manual clock tests advance by hand.
//! - [`memory`]: in-memory store, queue and log store (real implementations of the ports,
//!   not mocks: they keep the same contract as SQLite and AWS).
//! - [`contract`]: the store and queue contract suites; every adapter runs them.

pub mod clock;
pub mod contract;
pub mod memory;
