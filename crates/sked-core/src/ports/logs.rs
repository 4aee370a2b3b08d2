//! The `LogStore` port: an attempt's stdout/stderr, appended line by line while it runs
//! and read back by range, tail, or from a cursor (for follow); and the `LogRetention` port,
//! removing what is past the deployment's retention.

use crate::ids::{RunId, TenantId};
use crate::job::wire_enum;
use crate::timestamp::{self, Timestamp};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Default cap on one attempt's log: 10 MiB.
pub const DEFAULT_LOG_CAP_BYTES: u64 = 10 * 1024 * 1024;

wire_enum!(
    /// Which output a line came from.
    LogStream {
        /// Standard output.
        Stdout = "stdout",
        /// Standard error.
        Stderr = "stderr",
    }
);

/// Names one attempt's log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LogKey {
    /// Owner.
    pub tenant: TenantId,
    /// The run.
    pub run_id: RunId,
    /// 1-based attempt.
    pub attempt: u32,
}

/// One captured line (without its newline), with the instant it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct LogLine {
    /// When the worker read it.
    #[serde(with = "timestamp::serde_ms")]
    #[cfg_attr(feature = "utoipa", schema(value_type = String, format = DateTime))]
    pub ts: Timestamp,
    /// Which output.
    pub stream: LogStream,
    /// The text (invalid UTF-8 replaced).
    pub line: String,
}

/// What to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogQuery {
    /// Only this stream; both if `None`.
    pub stream: Option<LogStream>,
    /// Only the last `n` matching lines (ignored when `after` is set).
    pub tail: Option<usize>,
    /// Only lines after this cursor (from an earlier [`LogPage::cursor`]).
    pub after: Option<u64>,
}

/// Lines read, and where to continue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogPage {
    /// Matching lines, oldest first.
    pub lines: Vec<LogLine>,
    /// Whether the log hit its cap (a truncation marker was written).
    pub truncated: bool,
    /// Pass as `after` to read only what comes next.
    pub cursor: u64,
}

/// What a finished log amounted to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogSummary {
    /// Bytes of line text kept.
    pub bytes: u64,
    /// Whether lines were dropped at the cap.
    pub truncated: bool,
}

/// Log failures.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// No log for that attempt.
    #[error("no log for that attempt")]
    NotFound,
    /// I/O or backend failure.
    #[error("log storage error: {0}")]
    Io(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Appends to one attempt's log. Once the cap is reached, one marker line saying so is kept
/// and later lines are dropped; `finish` reports it.
#[async_trait]
pub trait LogWriter: Send {
    /// Appends one line.
    async fn append(&mut self, line: LogLine) -> Result<(), LogError>;
    /// Flushes and closes the log.
    async fn finish(self: Box<Self>) -> Result<LogSummary, LogError>;
}

/// Where attempts' logs live.
#[async_trait]
pub trait LogStore: Send + Sync + 'static {
    /// Opens the log of one attempt for appending. A store may create it lazily, on the
    /// first line: a log that never got a line may then read as [`LogError::NotFound`],
    /// which readers treat as empty.
    async fn writer(&self, key: &LogKey) -> Result<Box<dyn LogWriter>, LogError>;
    /// Reads an attempt's log, also while it is being written.
    async fn read(&self, key: &LogKey, query: &LogQuery) -> Result<LogPage, LogError>;
}

/// Removes attempts' logs past their retention, a bounded batch at a time (the pass in
/// [`crate::service::log_retention`] decides the cutoff and calls again while batches come
/// back full). A store that keeps a log as one object removes whole logs last written before
/// the cutoff; one that keeps lines (PostgreSQL) removes lines read before it, so a log written
/// across the cutoff loses its older lines first. Removing what another process removes at the
/// same time is no error.
#[async_trait]
pub trait LogRetention: Send + Sync + 'static {
    /// Removes at most `limit` logs (or lines, as the store keeps them) older than `cutoff`;
    /// returns how many. Fewer than `limit` means nothing older is left.
    async fn remove_before(&self, cutoff: Timestamp, limit: usize) -> Result<u64, LogError>;
}
