//! [`FileLogStore`]: attempt logs as files, `<root>/<tenant>/<run_id>/<attempt>.log`, one
//! JSON object per line (see the `record` module).
//!
//! Writing: the folder and file of an attempt are created with its first line — an attempt
//! that prints nothing leaves no file, and reads as [`LogError::NotFound`] (which core shows
//! as an empty log). Creating a folder and a file per attempt was half the time of a burst of
//! silent runs on ext4 (BENCHMARKS.md, optimisation 4). Each [`LogWriter`] hands its lines to
//! a task that owns the file and writes
//! whatever has queued up in one go, so a reader sees a line as soon as that write lands
//! (well within 100 ms), and a chatty payload costs one write per batch, not per line. The
//! writer counts the bytes of line text; the line that would pass the cap is replaced by one
//! marker line (stream stderr, `"truncated": true`) and every later line is dropped.
//!
//! Reading: see the `read` module; it works while a writer is appending.
//!
//! What it must not do: build a path from an unchecked key. Tenants and run ids are checked
//! to be single, harmless path components before any file is touched.

use super::{read, record};
use async_trait::async_trait;
use sked_core::ports::logs::DEFAULT_LOG_CAP_BYTES;
use sked_core::ports::{LogError, LogKey, LogLine, LogPage, LogQuery, LogStore, LogSummary, LogWriter};
use std::io;
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Lines a writer may have queued before `append` waits for the file.
const QUEUE: usize = 1024;

/// Most bytes gathered into one write.
const BATCH_BYTES: usize = 256 * 1024;

/// Attempt logs under one directory.
#[derive(Debug, Clone)]
pub struct FileLogStore {
    /// The directory holding one folder per tenant.
    root: PathBuf,
    /// Bytes of line text kept per attempt.
    cap_bytes: u64,
}

impl FileLogStore {
    /// A store under `root` (created on first write), capping each attempt's log at
    /// [`DEFAULT_LOG_CAP_BYTES`].
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FileLogStore {
            root: root.into(),
            cap_bytes: DEFAULT_LOG_CAP_BYTES,
        }
    }

    /// Caps each attempt's log at `bytes` of line text instead.
    pub fn with_cap(mut self, bytes: u64) -> Self {
        self.cap_bytes = bytes;
        self
    }

    /// The directory the logs are under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file of `key`'s log, or `None` if the key cannot name a file safely.
    pub fn path(&self, key: &LogKey) -> Option<PathBuf> {
        let tenant = key.tenant.as_str();
        let run = key.run_id.as_str();
        let tenant_ok = is_component(tenant, |b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        let run_ok = is_component(run, |b| b.is_ascii_alphanumeric() || b"_.-@".contains(&b));
        (tenant_ok && run_ok).then(|| self.root.join(tenant).join(run).join(format!("{}.log", key.attempt)))
    }
}

/// Whether `s` is a name safe to use as one path component: 1 to 255 allowed bytes, and
/// not `.` or `..`.
fn is_component(s: &str, allowed: impl Fn(u8) -> bool) -> bool {
    (1..=255).contains(&s.len()) && s != "." && s != ".." && s.bytes().all(allowed)
}

#[async_trait]
impl LogStore for FileLogStore {
    async fn writer(&self, key: &LogKey) -> Result<Box<dyn LogWriter>, LogError> {
        let path = self.path(key).ok_or_else(|| {
            io_error(io::Error::new(
                io::ErrorKind::InvalidInput,
                "tenant or run id is not a safe file name",
            ))
        })?;
        // The folder and file are made on the first line (see [`FileLogWriter::open`]): an
        // attempt that prints nothing costs no file-system work at all.
        Ok(Box::new(FileLogWriter {
            path,
            sink: None,
            cap: self.cap_bytes,
            bytes: 0,
            truncated: false,
        }))
    }

    async fn read(&self, key: &LogKey, query: &LogQuery) -> Result<LogPage, LogError> {
        // A key that cannot name a file has no log.
        let path = self.path(key).ok_or(LogError::NotFound)?;
        let query = query.clone();
        tokio::task::spawn_blocking(move || read::read(&path, &query))
            .await
            .map_err(|e| io_error(io::Error::other(e)))?
    }
}

/// The channel to an attempt's writing task, and the task (its error, if it failed).
type Sink = (mpsc::Sender<Vec<u8>>, JoinHandle<io::Result<()>>);

/// Appends to one attempt's file through its writing task, both made on the first line.
struct FileLogWriter {
    /// The attempt's file.
    path: PathBuf,
    /// Once a line came: the channel to the writing task, and the task (its error, if it
    /// failed).
    sink: Option<Sink>,
    /// Bytes of line text kept at most.
    cap: u64,
    /// Bytes of line text kept so far.
    bytes: u64,
    /// Whether the marker was written (and lines are dropped).
    truncated: bool,
}

impl FileLogWriter {
    /// Creates the folder and the file and starts the writing task. Done before the first
    /// line is queued, so the file exists (readers find the log) once `append` returns.
    async fn open(&self) -> Result<Sink, LogError> {
        if let Some(dir) = self.path.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(io_error)?;
        }
        // Append: a log is never overwritten, even if an attempt were opened twice.
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .await
            .map_err(io_error)?;
        let (lines, queue) = mpsc::channel(QUEUE);
        Ok((lines, tokio::spawn(write_batches(file, queue))))
    }

    /// Queues `record` for writing; a failed writing task reports here.
    async fn queue(&mut self, record: Vec<u8>) -> Result<(), LogError> {
        if self.sink.is_none() {
            self.sink = Some(self.open().await?);
        }
        if let Some((lines, _)) = &self.sink
            && lines.send(record).await.is_ok()
        {
            return Ok(());
        }
        // The task stopped early: it failed. Its error is reported by `finish`.
        Err(io_error(io::Error::other(
            "the log file's writer stopped after an error",
        )))
    }
}

#[async_trait]
impl LogWriter for FileLogWriter {
    async fn append(&mut self, line: LogLine) -> Result<(), LogError> {
        if self.truncated {
            return Ok(());
        }
        let len = line.line.len() as u64;
        if self.bytes + len > self.cap {
            self.truncated = true;
            return self.queue(record::encode_marker(line.ts, self.cap)).await;
        }
        self.bytes += len;
        self.queue(record::encode(&line)).await
    }

    async fn finish(self: Box<Self>) -> Result<LogSummary, LogError> {
        let FileLogWriter {
            sink, bytes, truncated, ..
        } = *self;
        let summary = LogSummary { bytes, truncated };
        // No line came: there is no file, and readers see no log (which core reads as empty).
        let Some((lines, task)) = sink else {
            return Ok(summary);
        };
        drop(lines); // the task writes what is queued, then ends
        match task.await {
            Ok(Ok(())) => Ok(summary),
            Ok(Err(e)) => Err(io_error(e)),
            Err(e) => Err(io_error(io::Error::other(e))),
        }
    }
}

/// Writes queued records until the writer is gone: everything queued at a time goes out in
/// one write (up to [`BATCH_BYTES`]), and is in the file (visible to readers) before the next
/// wait.
async fn write_batches(mut file: tokio::fs::File, mut queue: mpsc::Receiver<Vec<u8>>) -> io::Result<()> {
    let mut batch = Vec::new();
    while let Some(first) = queue.recv().await {
        batch.clear();
        batch.extend_from_slice(&first);
        while batch.len() < BATCH_BYTES {
            match queue.try_recv() {
                Ok(record) => batch.extend_from_slice(&record),
                Err(_) => break,
            }
        }
        file.write_all(&batch).await?;
        // tokio's File completes writes in the background; flush waits until it has.
        file.flush().await?;
    }
    Ok(())
}

/// An I/O failure as a log error, keeping its source.
fn io_error(e: io::Error) -> LogError {
    LogError::Io(Box::new(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tenant: &str, run: &str) -> LogKey {
        LogKey {
            tenant: tenant.into(),
            run_id: run.into(),
            attempt: 2,
        }
    }

    #[test]
    fn path_is_tenant_run_attempt() {
        let store = FileLogStore::new("/data/logs");
        assert_eq!(
            store.path(&key("acme", "backup.nightly@20261201T090000.250Z")),
            Some(PathBuf::from(
                "/data/logs/acme/backup.nightly@20261201T090000.250Z/2.log"
            ))
        );
    }

    #[test]
    fn keys_that_could_escape_the_root_name_no_file() {
        let store = FileLogStore::new("/data/logs");
        for (tenant, run) in [
            ("..", "r"),
            (".", "r"),
            ("a/b", "r"),
            ("", "r"),
            ("t", ".."),
            ("t", "a/../b"),
            ("t", ""),
        ] {
            assert_eq!(store.path(&key(tenant, run)), None, "{tenant:?} {run:?}");
        }
        assert_eq!(store.path(&key("t@x", "r")), None, "tenants have no @");
    }
}
