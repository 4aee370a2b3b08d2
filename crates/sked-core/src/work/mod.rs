//! The two shapes of the [`WorkPort`](crate::ports::WorkPort), written once here:
//!
//! - [`QueueThenStore`]: over any store and any queue, one call to each in turn (DynamoDB
//!   with SQS, the in-memory ports). Safe across a crash between calls by their order.
//! - [`one_transaction`]: each step (a firing, a receive and its claims, a heartbeat, a
//!   completion and its ack) as one transaction of a database that holds both the store and
//!   the queue, through [`WorkTx`]: the SQLite adapter runs these steps in its transactions,
//!   and the in-memory one (for simulations) under its locks.

pub mod one_transaction;
mod queue_then_store;

pub use one_transaction::WorkTx;
pub use queue_then_store::QueueThenStore;
pub(crate) use queue_then_store::{hand_back, ignore_stale};
