//! sked's self-hosted adapters on PostgreSQL (≥ 14): what lets API servers, sweepers and
//! workers on many hosts share one database.
//!
//! - [`PgDb`] (`db`): the connection pool and the versioned migrations (`migrations/`,
//!   embedded at build time, applied on connect); `conninfo` reads the connection string's
//!   TLS settings (libpq's `sslmode`, `sslrootcert`), `tls` turns them into a rustls connector.
//! - [`Tx`] (`tx`): transactions run on a blocking thread, so `sked-core`'s synchronous
//!   transaction traits drive them; `SERIALIZABLE` with retries by default, `READ
//!   COMMITTED` under the lock discipline of `locks` for a run's hand-over (claims,
//!   completions, heartbeats, firings, cancels, releases).
//! - [`PgStore`] (`store`): the [`sked_core::ports::JobStore`], with its sibling modules
//!   `codec` (rows ↔ domain values), `dependencies` (`after` edges and waits, the
//!   `DependencyTx`), `ledger` (skip records), `quotas` (the
//!   [`sked_core::ports::QuotaStore`] and the checks in creates and claims) and `alerts`
//!   (due alerts, the [`sked_core::ports::WebhookSecrets`]).
//! - [`PgKeys`] (`keys`): the [`sked_core::ports::KeyStore`].
//! - [`PgQueue`] (`queue`): the dispatch queue, received with `FOR UPDATE SKIP LOCKED`,
//!   tenants in turns, waiting receives woken by `LISTEN`/`NOTIFY` (`listen`).
//! - [`PgLogs`] (`logs`): attempts' logs, a row per line, readable from any server while
//!   they are written; `log_retention` deletes lines past the retention period;
//!   `log_archive` hands a finished log's rows to an archive and removes them once it holds
//!   them (`sked-objectlogs`, when logs go to S3-compatible storage).
//! - [`PgWork`] (`work`): the [`sked_core::ports::WorkPort`] whose every step is one
//!   transaction over the store's tables and the queue's (as SQLite's work port); `group`
//!   writes the completions that come at once in one transaction (group commit), and
//!   `receive_group` takes and claims the receives that come at once in one; `grouping` is
//!   the mechanism both use.
//! - `testing` (feature `testing`): a private cluster per test binary on 127.0.0.1.
//!
//! Everything that must hold across processes is a condition checked inside one transaction
//! (row locks, advisory transaction locks, `FOR UPDATE SKIP LOCKED`), never an in-process
//! lock; the rules themselves stay in `sked-core`.

mod alerts;
mod codec;
pub mod conninfo;
pub mod db;
mod dependencies;
mod group;
mod grouping;
pub mod keys;
mod ledger;
mod listen;
mod locks;
pub mod log_archive;
mod log_retention;
pub mod logs;
pub mod queue;
mod quotas;
mod receive_group;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;
pub mod tx;
pub mod work;

pub use conninfo::{ConnInfoError, SslMode};
pub use db::{ConnectError, PgDb, PgOptions};
pub use keys::PgKeys;
pub use log_archive::ArchivedRows;
pub use logs::PgLogs;
pub use queue::PgQueue;
pub use store::PgStore;
pub use tls::TlsError;
pub use tx::{Isolation, Tx, TxError};
pub use work::PgWork;
