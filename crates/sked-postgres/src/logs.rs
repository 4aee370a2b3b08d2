//! [`PgLogs`]: attempts' logs in the `log_lines` table (migration 4), one row per line keyed by
//! (tenant, run, attempt, seq), so any API server reads any run's log — also while the
//! worker that runs it, on another host, is still appending.
//!
//! Writing: a [`LogWriter`] counts the bytes of line text against the cap (the line that would
//! pass it is replaced by one marker line, stream stderr, at that line's instant, and every
//! later line is dropped) and hands the lines to a task of its own, which inserts whatever
//! has queued up in one statement (up to [`BATCH_LINES`] lines or [`BATCH_BYTES`] bytes): a
//! quiet payload's line is readable one round trip after it was printed, and a chatty one
//! costs one insert per batch, not per line. `finish` waits for the last batch. Nothing is
//! written before the first line: an attempt that prints nothing reads as
//! [`LogError::NotFound`], which core shows as an empty log. A writer opened on an attempt
//! that has lines already appends after them.
//!
//! Reading: the attempt's last line is read first; its `seq` is the page's cursor and bounds
//! the lines read, so a line committed meanwhile is left for the next read rather than
//! skipped, and its `marker` says whether the log was truncated. Both statements read one
//! snapshot (a read-only `REPEATABLE READ` transaction), so lines deleted meanwhile (by
//! retention, or by an archive that took the finished log over: `log_archive`) never leave a
//! page whose cursor passes lines it does not hold.
//!
//! PostgreSQL's text cannot hold NUL: a NUL in a line is stored as U+FFFD, as invalid UTF-8
//! already is. What this module must not do: decide what a log means for a run (sked-core
//! records the summary on the attempt).

use crate::db::PgDb;
use crate::tx::TxError;
use async_trait::async_trait;
use sked_core::log_record::marker_text;
use sked_core::ports::logs::DEFAULT_LOG_CAP_BYTES;
use sked_core::ports::{
    LogError, LogKey, LogLine, LogPage, LogQuery, LogStore, LogStream, LogSummary, LogWriter, StoreError,
};
use sked_core::timestamp;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::IsolationLevel;
use tokio_postgres::error::SqlState;

/// Lines a writer may have queued before `append` waits for the database.
const QUEUE: usize = 1024;

/// Most lines inserted by one statement.
pub const BATCH_LINES: usize = 500;

/// Most bytes of line text inserted by one statement (a batch holds at least one line).
pub const BATCH_BYTES: usize = 256 * 1024;

/// How long one batch's insert is retried while its failures are worth retrying (a database
/// restarting or failing over): the writer's queue holds the lines meanwhile.
pub const RETRY_FOR: Duration = Duration::from_secs(30);

/// The longest pause between two tries of a batch.
const MOST_BACKOFF: Duration = Duration::from_secs(2);

/// Attempt logs in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgLogs {
    /// The shared pool.
    pub(crate) db: PgDb,
    /// Bytes of line text kept per attempt.
    cap_bytes: u64,
}

impl PgLogs {
    /// Logs in `db`, capping each attempt's at [`DEFAULT_LOG_CAP_BYTES`].
    pub fn new(db: PgDb) -> Self {
        PgLogs {
            db,
            cap_bytes: DEFAULT_LOG_CAP_BYTES,
        }
    }

    /// Caps each attempt's log at `bytes` of line text instead.
    pub fn with_cap(mut self, bytes: u64) -> Self {
        self.cap_bytes = bytes;
        self
    }
}

/// A failure of the database as a log error, keeping its source.
pub(crate) fn db_error(e: impl std::error::Error + Send + Sync + 'static) -> LogError {
    LogError::Io(Box::new(e))
}

/// The attempt as the key's columns.
pub(crate) fn key_params(key: &LogKey) -> (String, String, i64) {
    (key.tenant.0.clone(), key.run_id.0.clone(), i64::from(key.attempt))
}

#[async_trait]
impl LogStore for PgLogs {
    async fn writer(&self, key: &LogKey) -> Result<Box<dyn LogWriter>, LogError> {
        Ok(Box::new(PgLogWriter {
            db: self.db.clone(),
            key: key.clone(),
            sink: None,
            cap: self.cap_bytes,
            bytes: 0,
            truncated: false,
        }))
    }

    async fn read(&self, key: &LogKey, query: &LogQuery) -> Result<LogPage, LogError> {
        let mut conn = self.db.get().await.map_err(db_error)?;
        // One snapshot for both statements: lines deleted between them (by retention, or by
        // an archive taking over the finished log) must not leave a page whose cursor claims
        // lines it does not hold.
        let tx = conn
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db_error)?;
        let page = read_lines(&tx, key, query).await;
        tx.commit().await.map_err(db_error)?;
        page
    }
}

/// Reads `key`'s lines as `query` asks through `client` (a snapshot: [`LogStore::read`]).
async fn read_lines(
    client: &tokio_postgres::Transaction<'_>,
    key: &LogKey,
    query: &LogQuery,
) -> Result<LogPage, LogError> {
    let (tenant, run_id, attempt) = key_params(key);
    let last = client
        .query_opt(
            "SELECT seq, marker FROM log_lines WHERE tenant = $1 AND run_id = $2 AND attempt = $3
             ORDER BY seq DESC LIMIT 1",
            &[&tenant, &run_id, &attempt],
        )
        .await
        .map_err(db_error)?;
    let Some(last) = last else {
        return Err(LogError::NotFound);
    };
    let (end, truncated): (i64, bool) = (last.get(0), last.get(1));
    let stream = query.stream.map(|s| s.as_str());
    let columns = "SELECT ts, stream, line FROM log_lines
                   WHERE tenant = $1 AND run_id = $2 AND attempt = $3 AND seq <= $4
                     AND ($5::text IS NULL OR stream = $5)";
    let rows = match (query.after, query.tail) {
        (None, Some(n)) => {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            let mut rows = client
                .query(
                    &format!("{columns} ORDER BY seq DESC LIMIT $6"),
                    &[&tenant, &run_id, &attempt, &end, &stream, &n],
                )
                .await
                .map_err(db_error)?;
            rows.reverse();
            rows
        }
        (after, _) => {
            let after = after.map_or(0, |a| i64::try_from(a).unwrap_or(i64::MAX));
            client
                .query(
                    &format!("{columns} AND seq > $6 ORDER BY seq"),
                    &[&tenant, &run_id, &attempt, &end, &stream, &after],
                )
                .await
                .map_err(db_error)?
        }
    };
    let lines = rows
        .iter()
        .map(|r| line_of(r.get(0), r.get(1), r.get(2)))
        .collect::<Result<Vec<_>, LogError>>()?;
    let end = u64::try_from(end).unwrap_or(0);
    Ok(LogPage {
        lines,
        truncated,
        cursor: query.after.map_or(end, |after| after.max(end)),
    })
}

/// A row's columns as a line.
pub(crate) fn line_of(ts: i64, stream: &str, line: String) -> Result<LogLine, LogError> {
    Ok(LogLine {
        ts: timestamp::from_ms(ts),
        stream: stream.parse().map_err(|e: String| LogError::Io(e.into()))?,
        line,
    })
}

/// One line as the writer's task inserts it.
struct Row {
    /// `LogLine::ts` in ms.
    ts: i64,
    /// Which output.
    stream: LogStream,
    /// The text, NUL replaced.
    line: String,
    /// Whether this is the truncation marker.
    marker: bool,
}

/// The channel to an attempt's writing task, and the task (its error, if it failed).
type Sink = (mpsc::Sender<Row>, JoinHandle<Result<(), LogError>>);

/// Appends to one attempt's log through its writing task, started on the first line.
struct PgLogWriter {
    /// The shared pool.
    db: PgDb,
    /// The attempt.
    key: LogKey,
    /// Once a line came: the channel to the writing task, and the task.
    sink: Option<Sink>,
    /// Bytes of line text kept at most.
    cap: u64,
    /// Bytes of line text kept so far.
    bytes: u64,
    /// Whether the marker was written (and lines are dropped).
    truncated: bool,
}

impl PgLogWriter {
    /// Queues `row` for the writing task (started on the first line); a failed task reports
    /// here, and its error in `finish`.
    async fn queue(&mut self, row: Row) -> Result<(), LogError> {
        let (lines, _) = self.sink.get_or_insert_with(|| {
            let (lines, queue) = mpsc::channel(QUEUE);
            let task = tokio::spawn(insert_batches(self.db.clone(), self.key.clone(), queue));
            (lines, task)
        });
        lines
            .send(row)
            .await
            .map_err(|_| LogError::Io("the log's writer stopped after an error".into()))
    }
}

#[async_trait]
impl LogWriter for PgLogWriter {
    async fn append(&mut self, line: LogLine) -> Result<(), LogError> {
        if self.truncated {
            return Ok(());
        }
        let len = line.line.len() as u64;
        if self.bytes + len > self.cap {
            self.truncated = true;
            let marker = Row {
                ts: line.ts.timestamp_millis(),
                stream: LogStream::Stderr,
                line: marker_text(self.cap),
                marker: true,
            };
            return self.queue(marker).await;
        }
        self.bytes += len;
        let text = if line.line.contains('\0') {
            line.line.replace('\0', "\u{FFFD}")
        } else {
            line.line
        };
        self.queue(Row {
            ts: line.ts.timestamp_millis(),
            stream: line.stream,
            line: text,
            marker: false,
        })
        .await
    }

    async fn finish(self: Box<Self>) -> Result<LogSummary, LogError> {
        let PgLogWriter {
            sink, bytes, truncated, ..
        } = *self;
        let summary = LogSummary { bytes, truncated };
        // No line came: nothing was written, and readers see no log (which core reads as empty).
        let Some((lines, task)) = sink else {
            return Ok(summary);
        };
        drop(lines); // the task inserts what is queued, then ends
        task.await.map_err(db_error)??;
        Ok(summary)
    }
}

/// Inserts queued rows until the writer is gone: whatever has queued up at a time goes in one
/// statement (up to [`BATCH_LINES`] lines, [`BATCH_BYTES`] bytes), committed (readable) before
/// the next wait. Numbers the lines after those the attempt already has. A batch that fails
/// for a reason worth retrying (the database restarting, a connection lost) is tried again
/// for up to [`RETRY_FOR`], so an outage that short does not cut the log.
async fn insert_batches(db: PgDb, key: LogKey, mut queue: mpsc::Receiver<Row>) -> Result<(), LogError> {
    let attempt = key_params(&key);
    let mut next_seq: Option<i64> = None;
    let mut batch: Vec<Row> = Vec::new();
    while let Some(first) = queue.recv().await {
        batch.clear();
        let mut bytes = first.line.len();
        batch.push(first);
        while batch.len() < BATCH_LINES && bytes < BATCH_BYTES {
            match queue.try_recv() {
                Ok(row) => {
                    bytes += row.line.len();
                    batch.push(row);
                }
                Err(_) => break,
            }
        }
        // Fixed once known, so a retry writes the same lines under the same numbers.
        let mut start = next_seq;
        let mut tries = 0;
        let mut failing_since = None;
        loop {
            tries += 1;
            match insert_batch(&db, &attempt, &mut start, &batch).await {
                Ok(()) => break,
                // A retry that finds its rows there: the try before committed, only its answer
                // was lost.
                Err(e) if tries > 1 && is_duplicate(&e) => break,
                Err(e) => {
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    match e.into_store() {
                        StoreError::Transient(e) if since.elapsed() < RETRY_FOR => {
                            tracing::debug!(error = %e, "a log batch failed; trying again");
                        }
                        e => return Err(LogError::Io(Box::new(e))),
                    }
                }
            }
            // 100, 200, 400 … ms, at most MOST_BACKOFF.
            let pause = Duration::from_millis(50 << tries.min(8)).min(MOST_BACKOFF);
            tokio::time::sleep(pause).await;
        }
        let start = start.ok_or_else(|| LogError::Io("a log batch was inserted without its numbers".into()))?;
        next_seq = Some(start + batch.len() as i64);
    }
    Ok(())
}

/// Inserts `batch` as the lines numbered from `start`, first setting `start` after the
/// attempt's last line if it is `None`.
async fn insert_batch(
    db: &PgDb,
    (tenant, run_id, attempt): &(String, String, i64),
    start: &mut Option<i64>,
    batch: &[Row],
) -> Result<(), TxError> {
    let conn = db.get().await?;
    let first = match *start {
        Some(seq) => seq,
        None => {
            let row = conn
                .query_one(
                    "SELECT coalesce(max(seq), 0) FROM log_lines WHERE tenant = $1 AND run_id = $2 AND attempt = $3",
                    &[tenant, run_id, attempt],
                )
                .await?;
            *start.insert(row.get::<_, i64>(0) + 1)
        }
    };
    let seqs: Vec<i64> = (first..).take(batch.len()).collect();
    let ts: Vec<i64> = batch.iter().map(|r| r.ts).collect();
    let streams: Vec<&str> = batch.iter().map(|r| r.stream.as_str()).collect();
    let lines: Vec<&str> = batch.iter().map(|r| r.line.as_str()).collect();
    let markers: Vec<bool> = batch.iter().map(|r| r.marker).collect();
    conn.execute(
        "INSERT INTO log_lines (tenant, run_id, attempt, seq, ts, stream, line, marker)
         SELECT $1, $2, $3, b.seq, b.ts, b.stream, b.line, b.marker
         FROM unnest($4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::bool[])
              AS b(seq, ts, stream, line, marker)",
        &[tenant, run_id, attempt, &seqs, &ts, &streams, &lines, &markers],
    )
    .await?;
    Ok(())
}

/// Whether `e` is a unique violation (the rows are there already).
fn is_duplicate(e: &TxError) -> bool {
    matches!(e, TxError::Pg(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION))
}
