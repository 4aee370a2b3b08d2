//! Run logs of the self-hosted deployment in S3-compatible storage (S3, MinIO, LocalStack,
//! moto …), the option `--log-bucket s3://bucket[/prefix]` turns on beside a PostgreSQL
//! database.
//!
//! While an attempt runs its lines are rows of PostgreSQL ([`sked_postgres::PgLogs`]), so any
//! API server follows the log as it is written; when its writer finishes, the whole log is
//! uploaded as one object, `<prefix>logs/<tenant>/<run_id>/<attempt>.jsonl`, in the records
//! every sked log store shares ([`sked_core::log_record`]), and only then are its rows
//! deleted. The database keeps what is being written; the bucket what is done.
//!
//! Modules:
//! - `bucket`: [`LogBucket`], the `s3://bucket[/prefix]` of `--log-bucket` and the object
//!   keys under it.
//! - `client`: [`connect`], an S3 client from the standard AWS chain (credentials, region)
//!   and an optional endpoint (`--log-endpoint`), path-style when an endpoint is given.
//! - `objects`: [`ObjectLogs`], the bucket's side: put, get, and remove what is older than a
//!   cutoff (listed by prefix, deleted in batches).
//! - `store`: [`PgObjectLogs`], the `LogStore` over both: rows while running, the object once
//!   finished, and the writer that archives on `finish`.
//! - `retention`: the `LogRetention` of [`PgObjectLogs`]: rows, then objects.
//! - `error`: [`ObjectLogError`].
//! - `testing` (feature `testing`): clients and fresh buckets on a test server.
//!
//! What this crate must not do: decide what a log means for a run (sked-core records the
//! summary on the attempt), or keep a log anywhere but the database and the one bucket.

mod bucket;
mod client;
mod error;
mod objects;
mod retention;
mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use bucket::{BucketError, LogBucket};
pub use client::{S3Settings, connect};
pub use error::ObjectLogError;
pub use objects::{ObjectLogs, ObjectMeta};
pub use store::{Archived, PgObjectLogs};
