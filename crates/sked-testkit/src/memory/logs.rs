//! [`MemLogs`]: the in-memory [`LogStore`], with the per-attempt byte cap.
//!
//! Each attempt's log is a list of lines; a line's index is its cursor position, so
//! [`LogPage::cursor`] is the index of the next line to be written. When a line would take
//! the kept text past the cap, one marker line `[sked: log truncated at N bytes]` (N = the
//! cap, on the dropped line's stream) is kept and every later line is dropped.
//! State sits behind a std `Mutex`, never held across an `.await`.

use async_trait::async_trait;
use sked_core::ports::logs::{
    DEFAULT_LOG_CAP_BYTES, LogError, LogKey, LogLine, LogPage, LogQuery, LogStore, LogSummary, LogWriter,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The marker line written when an attempt's log reaches `cap` bytes.
pub fn truncation_marker(cap: u64) -> String {
    format!("[sked: log truncated at {cap} bytes]")
}

/// Attempt logs in memory.
#[derive(Debug, Clone)]
pub struct MemLogs {
    /// Most bytes of line text kept per attempt.
    cap: u64,
    /// Logs by attempt, shared with open writers.
    logs: Arc<Mutex<HashMap<LogKey, Log>>>,
}

/// One attempt's log.
#[derive(Debug, Default)]
struct Log {
    /// Lines kept, the truncation marker included.
    lines: Vec<LogLine>,
    /// Bytes of line text kept (the marker not counted).
    bytes: u64,
    /// Whether the cap was hit.
    truncated: bool,
}

impl Default for MemLogs {
    fn default() -> Self {
        Self::new()
    }
}

impl MemLogs {
    /// A log store with the default cap ([`DEFAULT_LOG_CAP_BYTES`]).
    pub fn new() -> Self {
        Self::with_cap(DEFAULT_LOG_CAP_BYTES)
    }

    /// A log store keeping at most `cap` bytes of line text per attempt.
    pub fn with_cap(cap: u64) -> Self {
        MemLogs {
            cap,
            logs: Arc::default(),
        }
    }

    /// Every line of an attempt's log (marker included), for assertions.
    pub fn lines(&self, key: &LogKey) -> Vec<LogLine> {
        lock(&self.logs).get(key).map(|l| l.lines.clone()).unwrap_or_default()
    }
}

fn lock(logs: &Mutex<HashMap<LogKey, Log>>) -> MutexGuard<'_, HashMap<LogKey, Log>> {
    logs.lock().unwrap_or_else(|e| e.into_inner())
}

/// Appends to one attempt's log in a [`MemLogs`].
struct MemWriter {
    /// The attempt.
    key: LogKey,
    /// The cap of the store it came from.
    cap: u64,
    /// The store's logs.
    logs: Arc<Mutex<HashMap<LogKey, Log>>>,
}

#[async_trait]
impl LogWriter for MemWriter {
    async fn append(&mut self, line: LogLine) -> Result<(), LogError> {
        let mut logs = lock(&self.logs);
        let log = logs.entry(self.key.clone()).or_default();
        if log.truncated {
            return Ok(());
        }
        let len = line.line.len() as u64;
        if log.bytes + len > self.cap {
            log.truncated = true;
            log.lines.push(LogLine {
                ts: line.ts,
                stream: line.stream,
                line: truncation_marker(self.cap),
            });
        } else {
            log.bytes += len;
            log.lines.push(line);
        }
        Ok(())
    }

    async fn finish(self: Box<Self>) -> Result<LogSummary, LogError> {
        let logs = lock(&self.logs);
        let log = logs.get(&self.key).ok_or(LogError::NotFound)?;
        Ok(LogSummary {
            bytes: log.bytes,
            truncated: log.truncated,
        })
    }
}

#[async_trait]
impl LogStore for MemLogs {
    /// Creates the attempt's log if absent; an existing one is appended to.
    async fn writer(&self, key: &LogKey) -> Result<Box<dyn LogWriter>, LogError> {
        lock(&self.logs).entry(key.clone()).or_default();
        Ok(Box::new(MemWriter {
            key: key.clone(),
            cap: self.cap,
            logs: self.logs.clone(),
        }))
    }

    async fn read(&self, key: &LogKey, query: &LogQuery) -> Result<LogPage, LogError> {
        let logs = lock(&self.logs);
        let log = logs.get(key).ok_or(LogError::NotFound)?;
        let start = query
            .after
            .map_or(0, |a| usize::try_from(a).unwrap_or(usize::MAX).min(log.lines.len()));
        let mut lines: Vec<LogLine> = log.lines[start..]
            .iter()
            .filter(|l| query.stream.is_none_or(|s| l.stream == s))
            .cloned()
            .collect();
        if let (None, Some(n)) = (query.after, query.tail) {
            lines.drain(..lines.len().saturating_sub(n));
        }
        Ok(LogPage {
            lines,
            truncated: log.truncated,
            cursor: log.lines.len() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::fixtures::{at, t0};
    use sked_core::ids::RunId;
    use sked_core::ports::logs::LogStream;

    fn key() -> LogKey {
        LogKey {
            tenant: "t1".into(),
            run_id: RunId::from("a@x"),
            attempt: 1,
        }
    }

    fn line(stream: LogStream, text: &str) -> LogLine {
        LogLine {
            ts: t0(),
            stream,
            line: text.into(),
        }
    }

    async fn write(logs: &MemLogs, lines: &[(LogStream, &str)]) -> LogSummary {
        let mut w = logs.writer(&key()).await.unwrap();
        for (s, t) in lines {
            w.append(line(*s, t)).await.unwrap();
        }
        w.finish().await.unwrap()
    }

    fn texts(p: &LogPage) -> Vec<&str> {
        p.lines.iter().map(|l| l.line.as_str()).collect()
    }

    #[tokio::test]
    async fn unknown_log_is_not_found() {
        let res = MemLogs::new().read(&key(), &LogQuery::default()).await;
        assert!(matches!(res, Err(LogError::NotFound)));
    }

    #[tokio::test]
    async fn reads_back_with_stream_filter_tail_and_cursor() {
        use LogStream::{Stderr, Stdout};
        let logs = MemLogs::new();
        let sum = write(&logs, &[(Stdout, "a"), (Stderr, "b"), (Stdout, "c"), (Stdout, "d")]).await;
        assert_eq!(
            sum,
            LogSummary {
                bytes: 4,
                truncated: false
            }
        );
        let all = logs.read(&key(), &LogQuery::default()).await.unwrap();
        assert_eq!(
            (texts(&all), all.cursor, all.truncated),
            (vec!["a", "b", "c", "d"], 4, false)
        );
        let out = logs
            .read(
                &key(),
                &LogQuery {
                    stream: Some(Stdout),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(texts(&out), ["a", "c", "d"]);
        let tail = logs
            .read(
                &key(),
                &LogQuery {
                    tail: Some(2),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(texts(&tail), ["c", "d"]);
        let tail_out = logs
            .read(
                &key(),
                &LogQuery {
                    stream: Some(Stdout),
                    tail: Some(2),
                    after: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(texts(&tail_out), ["c", "d"]);
        let after = logs
            .read(
                &key(),
                &LogQuery {
                    after: Some(1),
                    tail: Some(1),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(texts(&after), ["b", "c", "d"], "tail ignored with after");
        let end = logs
            .read(
                &key(),
                &LogQuery {
                    after: Some(4),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert!(end.lines.is_empty());
        assert_eq!(end.cursor, 4);
    }

    #[tokio::test]
    async fn follow_reads_only_new_lines_while_writing() {
        let logs = MemLogs::new();
        let mut w = logs.writer(&key()).await.unwrap();
        w.append(line(LogStream::Stdout, "one")).await.unwrap();
        let first = logs.read(&key(), &LogQuery::default()).await.unwrap();
        w.append(LogLine {
            ts: at(1),
            stream: LogStream::Stdout,
            line: "two".into(),
        })
        .await
        .unwrap();
        let next = logs
            .read(
                &key(),
                &LogQuery {
                    after: Some(first.cursor),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(texts(&next), ["two"]);
        assert_eq!(next.cursor, 2);
    }

    #[tokio::test]
    async fn cap_keeps_one_marker_and_drops_the_rest() {
        let logs = MemLogs::with_cap(10);
        let s = LogStream::Stdout;
        let sum = write(&logs, &[(s, "12345"), (s, "6789"), (s, "abc"), (s, "x"), (s, "")]).await;
        assert_eq!(
            sum,
            LogSummary {
                bytes: 9,
                truncated: true
            }
        );
        let page = logs.read(&key(), &LogQuery::default()).await.unwrap();
        assert_eq!(texts(&page), ["12345", "6789", "[sked: log truncated at 10 bytes]"]);
        assert!(page.truncated);
    }

    #[tokio::test]
    async fn exactly_at_the_cap_is_not_truncated() {
        let logs = MemLogs::with_cap(4);
        let sum = write(&logs, &[(LogStream::Stdout, "ab"), (LogStream::Stderr, "cd")]).await;
        assert_eq!(
            sum,
            LogSummary {
                bytes: 4,
                truncated: false
            }
        );
    }
}
