//! [`PgObjectLogs`]: the `LogStore` of a PostgreSQL deployment whose finished logs go to a
//! bucket.
//!
//! Writing: lines go to PostgreSQL as with [`PgLogs`] alone (its cap, marker and batching),
//! so a follower on any API server sees them while the attempt runs. `finish` waits for the
//! last rows, then archives: the rows are read back as one body of records, uploaded as the
//! attempt's object, and deleted only once the upload succeeded (up to the last row uploaded).
//! An upload that fails (the bucket missing, the storage unreachable) is logged and the rows
//! stay: the log is still complete and readable, from PostgreSQL, and retention removes it
//! there in time. `finish` fails only as [`PgLogs`]' does; the attempt's log summary does not
//! depend on the bucket. An attempt that printed nothing uploads nothing (a PUT per silent
//! run would be most of what its log costs).
//!
//! Reading: the rows if the attempt has any (it is running; or its upload failed; or the
//! process died between upload and delete, when both exist and the rows are the same lines),
//! else the object, else [`LogError::NotFound`] (sked-core shows an empty log). The rows are
//! read in one snapshot and uploaded before they are deleted, so a read never finds the log in
//! neither place. Cursors mean the same in both: the rows are numbered from 1 and a cursor is
//! the last number read; in the object a cursor is the number of records before it
//! ([`log_record::select`]), so a follower that started on the rows continues on the object
//! without a gap or a repeat.
//!
//! A log whose tenant or run id cannot name an object safely ([`log_record::key_is_safe`];
//! sked's own ids always can) stays in PostgreSQL.
//!
//! What it must not do: decide what a log means for a run (sked-core records the summary on
//! the attempt).

use crate::error::ObjectLogError;
use crate::objects::{ObjectLogs, ObjectMeta};
use async_trait::async_trait;
use sked_core::log_record;
use sked_core::ports::{LogError, LogKey, LogLine, LogPage, LogQuery, LogStore, LogSummary, LogWriter};
use sked_postgres::PgLogs;

/// Attempt logs in PostgreSQL while they are written, in a bucket once finished.
#[derive(Debug, Clone)]
pub struct PgObjectLogs {
    /// The rows (its cap is the store's).
    pub(crate) rows: PgLogs,
    /// The bucket.
    pub(crate) objects: ObjectLogs,
}

/// What archiving a log did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archived {
    /// The attempt has no rows: nothing to upload.
    Nothing,
    /// The tenant or run id cannot name an object: the rows stay.
    KeptInDatabase,
    /// One object of this many lines; the rows are gone.
    Uploaded {
        /// Lines uploaded, the marker included.
        lines: u64,
    },
}

impl PgObjectLogs {
    /// Logs in `rows`' database while written, in `objects`' bucket once finished.
    pub fn new(rows: PgLogs, objects: ObjectLogs) -> Self {
        PgObjectLogs { rows, objects }
    }

    /// The bucket's side.
    pub fn objects(&self) -> &ObjectLogs {
        &self.objects
    }

    /// Uploads `key`'s rows as its object, then deletes them. An error leaves the rows (and
    /// any object already there) as they were, or both in place if only the delete failed.
    pub async fn archive(&self, key: &LogKey) -> Result<Archived, LogError> {
        if !log_record::key_is_safe(key) {
            return Ok(Archived::KeptInDatabase);
        }
        let Some(rows) = self.rows.rows_to_archive(key).await? else {
            return Ok(Archived::Nothing);
        };
        let meta = ObjectMeta {
            lines: rows.lines,
            truncated: rows.truncated,
        };
        self.objects.put(key, rows.body, meta).await?;
        self.rows.remove_archived(key, rows.through).await?;
        Ok(Archived::Uploaded { lines: rows.lines })
    }
}

#[async_trait]
impl LogStore for PgObjectLogs {
    async fn writer(&self, key: &LogKey) -> Result<Box<dyn LogWriter>, LogError> {
        Ok(Box::new(ArchivingWriter {
            rows: self.rows.writer(key).await?,
            store: self.clone(),
            key: key.clone(),
            wrote: false,
        }))
    }

    async fn read(&self, key: &LogKey, query: &LogQuery) -> Result<LogPage, LogError> {
        match self.rows.read(key, query).await {
            Err(LogError::NotFound) => {}
            answer => return answer,
        }
        if !log_record::key_is_safe(key) {
            return Err(LogError::NotFound);
        }
        match self.objects.get(key).await? {
            Some(body) => Ok(log_record::select(log_record::parse(&body), query)),
            None => Err(LogError::NotFound),
        }
    }
}

/// Writes rows through [`PgLogs`]' writer and archives them on `finish`.
struct ArchivingWriter {
    /// The rows' writer.
    rows: Box<dyn LogWriter>,
    /// Where to archive.
    store: PgObjectLogs,
    /// The attempt.
    key: LogKey,
    /// Whether a line was appended (a silent attempt archives nothing).
    wrote: bool,
}

#[async_trait]
impl LogWriter for ArchivingWriter {
    async fn append(&mut self, line: LogLine) -> Result<(), LogError> {
        self.wrote = true;
        self.rows.append(line).await
    }

    async fn finish(self: Box<Self>) -> Result<LogSummary, LogError> {
        let ArchivingWriter {
            rows,
            store,
            key,
            wrote,
        } = *self;
        let summary = rows.finish().await?;
        if !wrote {
            return Ok(summary);
        }
        match store.archive(&key).await {
            Ok(archived) => {
                tracing::debug!(tenant = %key.tenant, run_id = %key.run_id, attempt = key.attempt, ?archived, "log archived");
            }
            Err(error) => {
                let error = match &error {
                    LogError::Io(e) => match e.downcast_ref::<ObjectLogError>() {
                        Some(e) => e.chain(),
                        None => error.to_string(),
                    },
                    LogError::NotFound => error.to_string(),
                };
                tracing::warn!(tenant = %key.tenant, run_id = %key.run_id, attempt = key.attempt, %error, "log not archived to the bucket: it stays in PostgreSQL, readable, until retention removes it");
            }
        }
        Ok(summary)
    }
}
