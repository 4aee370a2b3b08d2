//! Attempt logs of the local deployment, as files under the data directory.
//!
//! - [`FileLogStore`] (`file`): the [`LogStore`](sked_core::ports::LogStore) adapter: where
//!   files live, the writer with its cap, and the entry point for reads.
//! - `record`: one line's on-disk form (JSON, as `LogLine` serialises) and the truncation
//!   marker.
//! - `read`: reading a file forwards from a cursor or backwards for a tail.
//! - `retention`: [`FileLogStore::remove_older_than`] and the
//!   [`LogRetention`](sked_core::ports::LogRetention) port: removing logs past the retention.
//!
//! What this module must not do: decide what a log means for a run (sked-core records the
//! summary on the attempt), or expose files outside its root.

pub mod file;
mod read;
mod record;
mod retention;

pub use file::FileLogStore;
pub use record::marker_text;
