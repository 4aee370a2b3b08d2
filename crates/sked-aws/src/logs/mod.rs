//! Attempt logs on AWS: [`CloudWatchLogStore`], the `LogStore` of the AWS deployment.
//!
//! - While an attempt runs, its lines go to one CloudWatch Logs stream,
//!   `<tenant>/<run_id>/<attempt>` in the configured group, so `follow` works from any
//!   process (the API Lambda reads what a worker on ECS writes).
//! - When the attempt ends (`finish`), the whole log is written once to S3 as
//!   `logs/<tenant>/<run_id>/<attempt>.jsonl` — the same JSON lines the local file store
//!   writes — and reads are served from there. An attempt that printed nothing gets no
//!   object, as it gets no file locally. The bucket's lifecycle rule and the group's
//!   retention policy (both set by the bootstrap and `template.yaml`) bound how long either
//!   is kept.
//!
//! Modules:
//! - `record`: one line's stored form (JSON of `LogLine`, plus `"truncated": true` on the
//!   marker), shared by the stream's events and the object's lines.
//! - `store`: the store, its writer (batching to CloudWatch, the cap, the S3 object) and
//!   reads (from S3, else from CloudWatch).
//!
//! What this module must not do: decide what a log means for a run (sked-core records the
//! summary on the attempt).

mod record;
mod store;

pub use record::marker_text;
pub use store::{CloudWatchLogStore, LOG_PREFIX, object_key, stream_name};
