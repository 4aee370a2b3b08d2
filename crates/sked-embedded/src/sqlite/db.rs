//! [`SqliteDb`]: one database file shared by the store, the queue, and every process that
//! opens it (`sked server`, `sked worker`s).
//!
//! - One writer connection behind a mutex; every write is one `BEGIN IMMEDIATE`
//!   transaction, so a write's reads and its conditional update see the same state, in
//!   this process and against other processes (SQLite's file lock serialises writers;
//!   `busy_timeout` makes them wait their turn).
//! - A small pool of read-only connections for plain reads; WAL lets them run beside a
//!   writer.
//! - All SQLite calls run in `tokio::task::spawn_blocking`, never on the async threads.
//!
//! Must not: hold any in-process lock that correctness depends on across processes. The
//! writer mutex only serialises this process's use of its one connection.

use super::error::{OpenError, TxError, is_busy, is_not_a_database};
use super::schema::{self, MigrateError};
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;

/// Settings for opening a database file. `Default` gives the documented defaults.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// How long a statement waits for another connection's lock before failing with a
    /// transient error. Default 5 s.
    pub busy_timeout: Duration,
    /// Read connections kept open for reuse. Default 4.
    pub readers: usize,
    /// Prepared statements cached per connection. Default 64.
    pub statement_cache: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            readers: 4,
            statement_cache: 64,
        }
    }
}

/// An open sked database file. Cheap to share behind an `Arc`; give it to
/// [`super::SqliteStore::new`] and [`super::SqliteQueue::new`].
#[derive(Debug)]
pub struct SqliteDb {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The file.
    path: PathBuf,
    /// Settings it was opened with.
    options: SqliteOptions,
    /// The one connection this process writes with.
    writer: Mutex<Connection>,
    /// Idle read-only connections.
    readers: Mutex<Vec<Connection>>,
    /// Woken after every enqueue in this process, so long polls here return at once.
    enqueued: Notify,
}

impl SqliteDb {
    /// Opens (creating if needed) the database at `path` with default options.
    /// Blocking: call it at startup, or inside `spawn_blocking`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens (creating if needed, with missing parent directories) the database at
    /// `path`: WAL journal, `synchronous = NORMAL`, foreign keys on, schema migrated to the
    /// latest version. Refuses a file that is not a sked database, and reports a file
    /// another process keeps locked.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, OpenError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| OpenError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let classify = |e: rusqlite::Error| classify(&path, &options, e);

        let mut writer = Connection::open(&path).map_err(classify)?;
        configure(&writer, &options).map_err(classify)?;
        let mode: String = writer
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(classify)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(OpenError::Setup {
                path,
                reason: format!("journal mode stayed {mode:?}, WAL is required"),
            });
        }
        writer.pragma_update(None, "synchronous", "NORMAL").map_err(classify)?;
        schema::migrate(&mut writer).map_err(|e| match e {
            MigrateError::Sql(e) => classify(e),
            MigrateError::NotSked(reason) => OpenError::NotSked {
                path: path.clone(),
                reason,
                source: None,
            },
            MigrateError::TooNew(found) => OpenError::TooNew {
                path: path.clone(),
                found,
                supported: schema::LATEST,
            },
        })?;

        let reader = open_reader(&path, &options).map_err(classify)?;
        Ok(SqliteDb {
            inner: Arc::new(Inner {
                path,
                options,
                writer: Mutex::new(writer),
                readers: Mutex::new(vec![reader]),
                enqueued: Notify::new(),
            }),
        })
    }

    /// The file this handle opened.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction on the writer connection, on the
    /// blocking pool. Commits if `f` returns `Ok`, rolls back otherwise.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, TxError>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, TxError> + Send + 'static,
    {
        let inner = self.inner.clone();
        run_blocking(move || {
            let mut conn = inner.writer.lock().unwrap_or_else(PoisonError::into_inner);
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
        .await
    }

    /// Runs `f` on a read-only connection from the pool, on the blocking pool.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, TxError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, TxError> + Send + 'static,
    {
        let inner = self.inner.clone();
        run_blocking(move || {
            let idle = inner.readers.lock().unwrap_or_else(PoisonError::into_inner).pop();
            let conn = match idle {
                Some(conn) => conn,
                None => open_reader(&inner.path, &inner.options)?,
            };
            let out = f(&conn);
            let mut idle = inner.readers.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < inner.options.readers {
                idle.push(conn);
            }
            out
        })
        .await
    }

    /// Wakes this process's long polls: something was just enqueued.
    pub(crate) fn notify_enqueued(&self) {
        self.inner.enqueued.notify_waiters();
    }

    /// The notifier [`Self::notify_enqueued`] wakes.
    pub(crate) fn enqueued(&self) -> &Notify {
        &self.inner.enqueued
    }
}

/// Runs `f` on tokio's blocking pool; a panic inside is resumed here.
async fn run_blocking<T, F>(f: F) -> Result<T, TxError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, TxError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(out) => out,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(TxError::Join(e)),
    }
}

/// Per-connection settings shared by the writer and the readers.
fn configure(conn: &Connection, options: &SqliteOptions) -> rusqlite::Result<()> {
    conn.busy_timeout(options.busy_timeout)?;
    conn.set_prepared_statement_cache_capacity(options.statement_cache);
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}

/// A read-only connection (the writer has already created the file and set WAL).
fn open_reader(path: &Path, options: &SqliteOptions) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    configure(&conn, options)?;
    Ok(conn)
}

/// Turns an SQLite error met while opening into the error people should read.
fn classify(path: &Path, options: &SqliteOptions, e: rusqlite::Error) -> OpenError {
    let path = path.to_path_buf();
    if is_not_a_database(&e) {
        OpenError::NotSked {
            path,
            reason: e.to_string(),
            source: Some(e),
        }
    } else if is_busy(&e) {
        OpenError::Locked {
            path,
            waited_ms: options.busy_timeout.as_millis(),
            source: e,
        }
    } else {
        OpenError::Sqlite { path, source: e }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Let SQLite refresh its planner statistics where they are stale; cheap, and
        // failure (a busy file) only means it happens another time.
        if let Ok(conn) = self.writer.get_mut() {
            let _ = conn.execute_batch("PRAGMA optimize;");
        }
    }
}
