//! Errors of the SQLite adapters: what opening a file can answer ([`OpenError`]), and the
//! internal error of one transaction (`TxError`), mapped onto the ports' error enums.
//!
//! Owns the classification of SQLite result codes: `SQLITE_BUSY`/`SQLITE_LOCKED` (another
//! connection or process holds the lock past the busy timeout) and `SQLITE_FULL`/`SQLITE_IOERR`
//! (the disk is full or failing writes) are transient; the rest is not. Sources are always kept.

use rusqlite::ErrorCode;
use sked_core::ports::{QueueError, StoreError};
use std::path::PathBuf;

/// Why [`super::SqliteDb::open`] failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The directory that should hold the file could not be created.
    #[error("cannot create directory {}: {source}", .path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The file exists but is not an SQLite database, is corrupted, or is another
    /// application's database.
    #[error("{} is not a sked database: {reason}", .path.display())]
    NotSked {
        /// The file.
        path: PathBuf,
        /// What gave it away.
        reason: String,
        /// SQLite's error, when it reported one.
        #[source]
        source: Option<rusqlite::Error>,
    },
    /// Another process holds a lock on the file for longer than the busy timeout.
    #[error("{} is locked by another process (waited {waited_ms} ms): {source}", .path.display())]
    Locked {
        /// The file.
        path: PathBuf,
        /// How long we waited for the lock.
        waited_ms: u128,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The file was written by a newer sked whose schema this build does not know.
    #[error("{} has schema version {found}, newer than this sked supports ({supported}); upgrade sked", .path.display())]
    TooNew {
        /// The file.
        path: PathBuf,
        /// `PRAGMA user_version` found in the file.
        found: i64,
        /// The newest schema version this build knows.
        supported: i64,
    },
    /// The file could not be put in the mode sked needs (WAL journal).
    #[error("cannot set up {}: {reason}", .path.display())]
    Setup {
        /// The file.
        path: PathBuf,
        /// What did not work.
        reason: String,
    },
    /// Any other SQLite failure while opening (permissions, I/O).
    #[error("cannot open {}: {source}", .path.display())]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
}

/// A value read from the database that does not decode (unknown state name, bad JSON
/// shape): the file was edited by hand or written by an incompatible build.
#[derive(Debug, thiserror::Error)]
#[error("bad value in sked database: {0}")]
pub struct BadRow(pub String);

/// What the closure of one read or write can fail with. Domain outcomes (conflict,
/// fenced, stale receipt) travel as `Store`/`Queue` and abort the transaction like any
/// other error, so a refused write changes nothing.
#[derive(Debug)]
pub(crate) enum TxError {
    /// SQLite failed.
    Sql(rusqlite::Error),
    /// A JSON column did not (de)serialize.
    Json(serde_json::Error),
    /// A row held an impossible value.
    Bad(BadRow),
    /// A store outcome decided inside the transaction.
    Store(StoreError),
    /// A queue outcome decided inside the transaction.
    Queue(QueueError),
    /// The blocking task was cancelled (runtime shutting down).
    Join(tokio::task::JoinError),
}

impl From<rusqlite::Error> for TxError {
    fn from(e: rusqlite::Error) -> Self {
        TxError::Sql(e)
    }
}

impl From<serde_json::Error> for TxError {
    fn from(e: serde_json::Error) -> Self {
        TxError::Json(e)
    }
}

impl From<StoreError> for TxError {
    fn from(e: StoreError) -> Self {
        TxError::Store(e)
    }
}

impl From<QueueError> for TxError {
    fn from(e: QueueError) -> Self {
        TxError::Queue(e)
    }
}

impl TxError {
    /// A [`BadRow`] error.
    pub(crate) fn bad(msg: impl Into<String>) -> Self {
        TxError::Bad(BadRow(msg.into()))
    }

    /// As the store port's error.
    pub(crate) fn into_store(self) -> StoreError {
        match self {
            TxError::Sql(e) if is_transient(&e) => StoreError::Transient(Box::new(e)),
            TxError::Sql(e) => StoreError::Other(Box::new(e)),
            TxError::Json(e) => StoreError::Other(Box::new(e)),
            TxError::Bad(e) => StoreError::Other(Box::new(e)),
            TxError::Store(e) => e,
            TxError::Queue(e) => StoreError::Other(Box::new(e)),
            TxError::Join(e) => StoreError::Other(Box::new(e)),
        }
    }

    /// As the queue port's error.
    pub(crate) fn into_queue(self) -> QueueError {
        match self {
            TxError::Sql(e) if is_transient(&e) => QueueError::Transient(Box::new(e)),
            TxError::Sql(e) => QueueError::Other(Box::new(e)),
            TxError::Json(e) => QueueError::Other(Box::new(e)),
            TxError::Bad(e) => QueueError::Other(Box::new(e)),
            TxError::Store(e) => QueueError::Other(Box::new(e)),
            TxError::Queue(e) => e,
            TxError::Join(e) => QueueError::Other(Box::new(e)),
        }
    }
}

/// Whether a failed statement is worth retrying later: the file is busy or locked by another
/// connection, or the disk is full or failing writes (space may be freed; the API answers 503
/// rather than 500, and nothing was written).
pub(crate) fn is_transient(e: &rusqlite::Error) -> bool {
    is_busy(e)
        || matches!(
            e.sqlite_error_code(),
            Some(ErrorCode::DiskFull | ErrorCode::SystemIoFailure)
        )
}

/// Whether SQLite answered "busy" or "locked": another connection holds the lock.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Whether SQLite says the file is not a database or is corrupted.
pub(crate) fn is_not_a_database(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
    )
}
