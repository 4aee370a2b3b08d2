//! Attempt logs on AWS: [`CloudWatchLogStore`], the `LogStore` of the AWS deployment.
//!
//! - While an attempt runs, its lines go to one CloudWatch Logs stream,
//!   `<tenant>/<run_id>/<attempt>` in the configured group (created with the first line), so
//!   `follow` works from any process (the API Lambda reads what a worker on ECS writes).
//! - When the attempt ends (`finish`), the whole log is written once — the same JSON lines
//!   the local file store writes — as one item of the table when it is small
//!   ([`crate::LogsConfig::inline_bytes`], 4 KiB by default; in a worker, the smallest go in
//!   the run's own item with the write that ends it), else to S3 as
//!   `logs/<tenant>/<run_id>/<attempt>.jsonl`, and reads are served from there. An attempt
//!   that printed nothing gets neither, and no stream, as it gets no file locally. The
//!   table's TTL, the bucket's lifecycle rule and the group's retention policy (set by the
//!   bootstrap and `template.yaml`) bound how long each is kept.
//!
//! Modules:
//! - `record`: one line's stored form (JSON of `LogLine`, plus `"truncated": true` on the
//!   marker), shared by the stream's events and the object's lines.
//! - `inline`: small finished logs as table items.
//! - `folded`: the smallest, handed to the completion that ends their run and kept in the
//!   run's own item.
//! - `store`: the store, its writer (batching to CloudWatch, the cap, the finished log) and
//!   reads (from the table or S3, else from CloudWatch).
//!
//! What this module must not do: decide what a log means for a run (sked-core records the
//! summary on the attempt).

mod folded;
mod inline;
mod record;
mod store;

pub use folded::{FOLD_MAX_BYTES, FoldedLogs};
pub(crate) use inline::InlineLog;
pub use record::marker_text;
pub use store::{CloudWatchLogStore, LOG_PREFIX, object_key, stream_name};
