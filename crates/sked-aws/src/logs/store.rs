//! [`CloudWatchLogStore`]: the writer that batches lines to an attempt's CloudWatch stream
//! and keeps the finished log where it is cheapest, and reads from whichever holds the log.
//!
//! Writing: [`LogWriter::append`] applies the cap (the line that would pass it becomes one
//! marker line, later lines are dropped), keeps the record for the finished log, and hands it
//! to a task that sends `PutLogEvents` batches: as soon as [`LogsConfig::flush_lines`] lines
//! are waiting, else [`LogsConfig::flush_interval`] after the first waiting line — but not
//! before the attempt has run [`LogsConfig::stream_after`]. The stream is created with the
//! first batch, and what is still waiting when the attempt ends is left to the finished log:
//! an attempt that prints nothing, or ends within `stream_after`, makes no CloudWatch request
//! at all (most scheduled payloads are short: their stream was two requests and an ingestion
//! that no one could follow in time). Events carry the instant they are sent (never going backwards), not the
//! line's own `ts` (that is in the message): CloudWatch refuses events too far in the past or
//! future and orders a stream by timestamp, and the stream must hold the lines in the order
//! they were appended so that a line's index means the same in the stream and in the finished
//! log. A line too long for one CloudWatch event is cut in the stream (the finished log keeps
//! it whole).
//!
//! A CloudWatch failure does not fail the attempt's log: it is logged, the batch is dropped
//! from the stream (followers miss it), and the finished log still gets every line. `finish`
//! fails only if the finished log cannot be written. It is built in memory, so a writer holds
//! up to the cap (plus JSON framing) until `finish`.
//!
//! The finished log: nothing for an attempt that printed nothing (a PUT per silent run would
//! be most of what its log costs); in a worker whose store folds logs, the smallest handed to
//! the completion that ends the run, kept in the run's item ([`super::folded`]); one table
//! item ([`super::inline`]) when its JSON lines fit in [`LogsConfig::inline_bytes`]; else one
//! S3 object.
//!
//! Reading: the run's item, else the log's table item, else the S3 object, else the stream
//! from its start; `NotFound`
//! when none exists (an attempt that has printed nothing yet, or never will: sked-core shows
//! that as an empty log). A cursor is a line index (the number of records before it, marker
//! included), the same in the stream and the finished log, so a follower that started on the
//! stream continues on the finished log without a gap or a repeat.

use super::folded::{FOLD_MAX_BYTES, FoldedLogs};
use super::inline::{InlineLog, InlineLogs};
use super::record;
use crate::config::{AwsClients, LogsConfig};
use crate::error::classify;
use async_trait::async_trait;
use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use aws_sdk_s3::primitives::ByteStream;
use sked_core::log_record;
use sked_core::ports::{LogError, LogKey, LogLine, LogPage, LogQuery, LogStore, LogSummary, LogWriter};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Where the objects live in the bucket (the lifecycle rule filters on it), and each one's
/// key: the shared naming of [`sked_core::log_record`].
pub use sked_core::log_record::{LOG_PREFIX, object_key};

/// Largest message of one CloudWatch event (256 KiB less the 26 bytes counted per event,
/// less some room).
const MAX_EVENT_BYTES: usize = 256 * 1024 - 64;

/// Largest `PutLogEvents` batch: 1 MiB counting 26 bytes per event; kept below it.
const MAX_BATCH_BYTES: usize = 1_000_000;

/// Most events in one `PutLogEvents`.
const MAX_BATCH_EVENTS: usize = 10_000;

/// Bytes counted per event on top of its message.
const EVENT_OVERHEAD: usize = 26;

/// Records a writer may have queued before `append` waits for CloudWatch.
const QUEUE: usize = 4096;

/// Tries of one `PutLogEvents` batch whose failure is transient.
const PUT_TRIES: u32 = 4;

/// Most `GetLogEvents` pages read for one request (10 000 events each: far beyond the cap).
const MAX_PAGES: usize = 1000;

/// The CloudWatch stream of `key`'s log: `<tenant>/<run_id>/<attempt>`.
pub fn stream_name(key: &LogKey) -> String {
    format!("{}/{}/{}", key.tenant, key.run_id, key.attempt)
}

/// Whether `key` names a log safely (no two keys share a stream or an object, no stream name
/// holds the `:` or `*` CloudWatch refuses).
fn key_ok(key: &LogKey) -> bool {
    log_record::key_is_safe(key)
}

/// Attempt logs in CloudWatch Logs (while running), and in the table or S3 (once finished).
#[derive(Debug, Clone)]
pub struct CloudWatchLogStore {
    /// CloudWatch Logs.
    logs: aws_sdk_cloudwatchlogs::Client,
    /// S3.
    s3: aws_sdk_s3::Client,
    /// Small finished logs.
    inline: InlineLogs,
    /// In a worker, the smallest finished logs go to the completion that ends their run.
    folded: Option<Arc<FoldedLogs>>,
    /// Bucket, group, cap and batching.
    config: LogsConfig,
}

impl CloudWatchLogStore {
    /// A store on the bucket and group of `config` and the DynamoDB `table` (all must exist:
    /// see the bootstrap).
    pub fn new(clients: &AwsClients, table: impl Into<String>, config: LogsConfig) -> Self {
        let inline = InlineLogs {
            client: clients.dynamodb.clone(),
            table: table.into(),
            retention_days: config.retention_days,
        };
        CloudWatchLogStore {
            logs: clients.logs.clone(),
            s3: clients.s3.clone(),
            inline,
            folded: None,
            config,
        }
    }

    /// This store, handing its writers' smallest finished logs to `folded` (the completions of
    /// the same process's store) instead of writing them.
    pub fn with_folded_logs(mut self, folded: Arc<FoldedLogs>) -> Self {
        self.folded = Some(folded);
        self
    }

    /// The store's configuration.
    pub fn config(&self) -> &LogsConfig {
        &self.config
    }

    /// The S3 object's body, or `None` when there is no object.
    async fn object(&self, key: &LogKey) -> Result<Option<Vec<u8>>, LogError> {
        let got = self
            .s3
            .get_object()
            .bucket(&self.config.bucket)
            .key(object_key(key))
            .send()
            .await;
        let out = match got {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => return Ok(None),
            Err(e) => return Err(call_error(classify("s3:GetObject", e, |_| None))),
        };
        let body = out.body.collect().await.map_err(|e| LogError::Io(Box::new(e)))?;
        Ok(Some(body.into_bytes().to_vec()))
    }

    /// Every message of the stream from its start, or `None` when there is no stream.
    async fn stream(&self, key: &LogKey) -> Result<Option<Vec<String>>, LogError> {
        let mut messages = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let got = self
                .logs
                .get_log_events()
                .log_group_name(&self.config.log_group)
                .log_stream_name(stream_name(key))
                .start_from_head(true)
                .set_next_token(token.clone())
                .send()
                .await;
            let out = match got {
                Ok(out) => out,
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_resource_not_found_exception()) =>
                {
                    return Ok(None);
                }
                Err(e) => return Err(call_error(classify("logs:GetLogEvents", e, |_| None))),
            };
            messages.extend(out.events.unwrap_or_default().into_iter().filter_map(|e| e.message));
            // The end of the stream is where the forward token stops changing.
            let next = out.next_forward_token;
            if next.is_none() || next == token {
                break;
            }
            token = next;
        }
        Ok(Some(messages))
    }
}

#[async_trait]
impl LogStore for CloudWatchLogStore {
    async fn writer(&self, key: &LogKey) -> Result<Box<dyn LogWriter>, LogError> {
        if !key_ok(key) {
            return Err(LogError::Io("tenant or run id cannot name a log".into()));
        }
        let (records, queue) = mpsc::channel(QUEUE);
        let sender = Sender {
            logs: self.logs.clone(),
            group: self.config.log_group.clone(),
            stream: stream_name(key),
            created: false,
            last_ms: 0,
        };
        let batching = Batching {
            interval: self.config.flush_interval,
            lines: self.config.flush_lines.clamp(1, MAX_BATCH_EVENTS),
            first_at: Instant::now() + self.config.stream_after,
        };
        Ok(Box::new(CloudWatchLogWriter {
            records,
            task: tokio::spawn(send_batches(sender, batching, queue)),
            s3: self.s3.clone(),
            bucket: self.config.bucket.clone(),
            inline: self.inline.clone(),
            folded: self.folded.clone(),
            inline_bytes: self.config.inline_bytes,
            key: key.clone(),
            body: Vec::new(),
            count: 0,
            cap: self.config.cap_bytes,
            bytes: 0,
            truncated: false,
        }))
    }

    async fn read(&self, key: &LogKey, query: &LogQuery) -> Result<LogPage, LogError> {
        if !key_ok(key) {
            return Err(LogError::NotFound);
        }
        let finished = match self.inline.get_folded(key).await? {
            Some(body) => Some(body),
            None => match self.inline.get(key).await? {
                Some(body) => Some(body),
                None => self.object(key).await?,
            },
        };
        if let Some(body) = finished {
            return Ok(log_record::select(log_record::parse(&body), query));
        }
        match self.stream(key).await? {
            Some(messages) => Ok(log_record::select(
                messages.iter().map(|m| record::decode(m.as_bytes())).collect(),
                query,
            )),
            None => Err(LogError::NotFound),
        }
    }
}

/// Appends to one attempt's stream through its sending task, and keeps the finished log's
/// body.
struct CloudWatchLogWriter {
    /// Records for the sending task.
    records: mpsc::Sender<String>,
    /// The sending task.
    task: JoinHandle<()>,
    /// S3, for a large finished log.
    s3: aws_sdk_s3::Client,
    /// The bucket.
    bucket: String,
    /// The table, for a small finished log.
    inline: InlineLogs,
    /// The completions of this process, for the smallest.
    folded: Option<Arc<FoldedLogs>>,
    /// Largest body kept in the table.
    inline_bytes: usize,
    /// The attempt.
    key: LogKey,
    /// The finished log's body so far: one record per line.
    body: Vec<u8>,
    /// Records in `body`.
    count: u64,
    /// Bytes of line text kept at most.
    cap: u64,
    /// Bytes of line text kept so far.
    bytes: u64,
    /// Whether the marker was written (and lines are dropped).
    truncated: bool,
}

impl CloudWatchLogWriter {
    /// Adds one record to the body and to the stream (the stream's copy cut to fit).
    async fn push(&mut self, full: String, for_stream: String) {
        self.body.extend_from_slice(full.as_bytes());
        self.body.push(b'\n');
        self.count += 1;
        // A stopped sending task only means the stream misses lines (it logged why).
        let _ = self.records.send(for_stream).await;
    }
}

#[async_trait]
impl LogWriter for CloudWatchLogWriter {
    async fn append(&mut self, line: LogLine) -> Result<(), LogError> {
        if self.truncated {
            return Ok(());
        }
        let len = line.line.len() as u64;
        if self.bytes + len > self.cap {
            self.truncated = true;
            let marker = record::encode_marker(line.ts, self.cap);
            self.push(marker.clone(), marker).await;
            return Ok(());
        }
        self.bytes += len;
        let full = record::encode(&line);
        let for_stream = if full.len() <= MAX_EVENT_BYTES {
            full.clone()
        } else {
            record::encode_within(&line, MAX_EVENT_BYTES)
        };
        self.push(full, for_stream).await;
        Ok(())
    }

    async fn finish(self: Box<Self>) -> Result<LogSummary, LogError> {
        let CloudWatchLogWriter {
            records,
            task,
            s3,
            bucket,
            inline,
            folded,
            inline_bytes,
            key,
            body,
            count,
            bytes,
            truncated,
            ..
        } = *self;
        drop(records); // the task sends what is queued, then ends
        let _ = task.await;
        if count == 0 {
            // Nothing to keep, and nothing was sent: no stream, no item, no object. A read
            // finds nothing, which sked-core shows as an empty log.
            return Ok(LogSummary { bytes, truncated });
        }
        if body.len() <= inline_bytes {
            let mut log = InlineLog { body, bytes, truncated };
            if let Some(folded) = folded.filter(|_| log.body.len() <= FOLD_MAX_BYTES) {
                match folded.hold(key.clone(), log) {
                    Ok(()) => return Ok(LogSummary { bytes, truncated }),
                    Err(full) => log = full,
                }
            }
            inline.put(&key, log).await?;
            return Ok(LogSummary { bytes, truncated });
        }
        s3.put_object()
            .bucket(&bucket)
            .key(object_key(&key))
            .content_type("application/x-ndjson")
            .metadata("sked-truncated", truncated.to_string())
            .metadata("sked-bytes", bytes.to_string())
            .metadata("sked-lines", count.to_string())
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(|e| call_error(classify("s3:PutObject", e, |_| None)))?;
        Ok(LogSummary { bytes, truncated })
    }
}

/// When the sending task sends.
#[derive(Debug, Clone, Copy)]
struct Batching {
    /// Longest wait of a queued record.
    interval: Duration,
    /// Records that are sent without waiting.
    lines: usize,
    /// Before this instant only a full batch is sent (the attempt's start + `stream_after`).
    first_at: Instant,
}

/// Sends batches to one stream.
struct Sender {
    /// CloudWatch Logs.
    logs: aws_sdk_cloudwatchlogs::Client,
    /// The group.
    group: String,
    /// The stream.
    stream: String,
    /// Whether the stream exists (it is created before the first batch).
    created: bool,
    /// The timestamp of the last event sent (events never go backwards).
    last_ms: i64,
}

impl Sender {
    /// Sends `batch` as events stamped now; transient failures are retried a few times,
    /// then the batch is dropped from the stream with a warning.
    async fn send(&mut self, batch: Vec<String>) {
        if batch.is_empty() {
            return;
        }
        if !self.created {
            if let Err(error) = self.create().await {
                tracing::warn!(stream = %self.stream, lines = batch.len(), %error, "log stream not created: lines not sent to CloudWatch (the finished log keeps them)");
                return;
            }
            self.created = true;
        }
        let ms = chrono::Utc::now().timestamp_millis().max(self.last_ms);
        self.last_ms = ms;
        let events: Vec<InputLogEvent> = batch
            .into_iter()
            .filter_map(|message| InputLogEvent::builder().timestamp(ms).message(message).build().ok())
            .collect();
        let mut backoff = Duration::from_millis(100);
        for attempt in 1..=PUT_TRIES {
            let put = self
                .logs
                .put_log_events()
                .log_group_name(&self.group)
                .log_stream_name(&self.stream)
                .set_log_events(Some(events.clone()))
                .send()
                .await;
            let failure = match put {
                Ok(out) => {
                    if let Some(rejected) = out.rejected_log_events_info {
                        tracing::warn!(stream = %self.stream, ?rejected, "CloudWatch rejected log events");
                    }
                    return;
                }
                Err(e) => classify("logs:PutLogEvents", e, |_| None),
            };
            let transient = matches!(failure, crate::error::Failure::Transient(_));
            if !transient || attempt == PUT_TRIES {
                let error = failure.into_call();
                tracing::warn!(stream = %self.stream, lines = events.len(), %error, "log lines not sent to CloudWatch (the S3 object keeps them)");
                return;
            }
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }
}

impl Sender {
    /// Creates the stream; one that exists already (a retried attempt's writer opened again)
    /// is appended to.
    async fn create(&self) -> Result<(), crate::error::CallError> {
        let created = self
            .logs
            .create_log_stream()
            .log_group_name(&self.group)
            .log_stream_name(&self.stream)
            .send()
            .await;
        match created {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_already_exists_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(classify("logs:CreateLogStream", e, |_| None).into_call()),
        }
    }
}

/// Sends queued records until the writer is gone: a batch goes out when `lines` records or
/// ~1 MB are waiting, or `interval` after its first record was queued (not before
/// `first_at`). Records still waiting when the writer is gone are not sent if no stream was
/// started: the finished log has them.
async fn send_batches(mut sender: Sender, batching: Batching, mut queue: mpsc::Receiver<String>) {
    let mut open = true;
    while open {
        let Some(first) = queue.recv().await else { break };
        let deadline = (Instant::now() + batching.interval).max(batching.first_at);
        let mut size = first.len() + EVENT_OVERHEAD;
        let mut batch = vec![first];
        while batch.len() < batching.lines {
            match tokio::time::timeout_at(deadline, queue.recv()).await {
                Ok(Some(record)) => {
                    let add = record.len() + EVENT_OVERHEAD;
                    if size + add > MAX_BATCH_BYTES {
                        sender.send(std::mem::take(&mut batch)).await;
                        size = 0;
                    }
                    size += add;
                    batch.push(record);
                }
                Ok(None) => {
                    open = false;
                    break;
                }
                Err(_) => break, // the interval is up
            }
        }
        if open || sender.created {
            sender.send(batch).await;
        }
    }
}

/// A failed call as a log error, keeping the call (and the SDK error) as its source.
pub(super) fn call_error(f: crate::error::Failure) -> LogError {
    LogError::Io(Box::new(f.into_call()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_tenant_run_attempt() {
        let key = LogKey {
            tenant: "acme".into(),
            run_id: "backup.nightly@20261201T090000.250Z".into(),
            attempt: 2,
        };
        assert_eq!(stream_name(&key), "acme/backup.nightly@20261201T090000.250Z/2");
        assert_eq!(
            object_key(&key),
            "logs/acme/backup.nightly@20261201T090000.250Z/2.jsonl"
        );
        assert!(key_ok(&key));
        let unsafe_key = LogKey {
            run_id: "a:b".into(),
            ..key
        };
        assert!(!key_ok(&unsafe_key));
    }
}
