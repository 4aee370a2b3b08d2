//! sked-embedded: the adapters of the local deployment.
//!
//! - [`sqlite`]: the store and the dispatch queue in one SQLite file (WAL, one writer).
//! - [`logs`]: attempt logs as files under the data directory.
//! - [`exec`]: process and HTTP executors, and the router that picks one per task kind.
//! - [`webhook`]: failure alerts posted over HTTP (also used by `sked worker` on AWS).
//!
//! Nothing here decides scheduling behaviour: that is sked-core's.

pub mod exec;
pub mod logs;
pub mod sqlite;
pub mod webhook;
