//! What an archive of finished logs needs of [`PgLogs`] (`sked-objectlogs` keeps them as one
//! object each in S3-compatible storage): a log's rows as records of the shared format
//! ([`sked_core::log_record`]), and removing those rows once the archive holds them.
//!
//! The archive copies first and removes after, so a log is never in neither place; a process
//! that dies in between leaves it in both, and reads keep answering from the rows (the store
//! reads rows first) until retention removes both. Rows are removed only up to the last one
//! copied: a line appended meanwhile (a writer opened again on the attempt) stays.
//!
//! What this module must not do: talk to the archive, or decide when a log is finished (the
//! archive's writer does, on `finish`).

use crate::logs::{PgLogs, db_error, key_params, line_of};
use sked_core::log_record;
use sked_core::ports::{LogError, LogKey};

/// A log's rows, as the archive keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArchivedRows {
    /// The records, one a line, each ending in a newline, oldest first.
    pub body: Vec<u8>,
    /// How many lines (the marker included).
    pub lines: u64,
    /// Whether the last line is the truncation marker.
    pub truncated: bool,
    /// The `seq` of the last line: [`PgLogs::remove_archived`] removes up to it.
    pub through: i64,
}

impl PgLogs {
    /// `key`'s rows as one body of records, or `None` when it has none.
    pub async fn rows_to_archive(&self, key: &LogKey) -> Result<Option<ArchivedRows>, LogError> {
        let (tenant, run_id, attempt) = key_params(key);
        let conn = self.db.get().await.map_err(db_error)?;
        let rows = conn
            .query(
                "SELECT seq, ts, stream, line, marker FROM log_lines
                 WHERE tenant = $1 AND run_id = $2 AND attempt = $3 ORDER BY seq",
                &[&tenant, &run_id, &attempt],
            )
            .await
            .map_err(db_error)?;
        let Some(last) = rows.last() else {
            return Ok(None);
        };
        let mut archived = ArchivedRows {
            through: last.get(0),
            ..ArchivedRows::default()
        };
        for row in &rows {
            let line = line_of(row.get(1), row.get(2), row.get(3))?;
            let marker: bool = row.get(4);
            archived
                .body
                .extend_from_slice(log_record::encode_record(&line, marker).as_bytes());
            archived.body.push(b'\n');
            archived.lines += 1;
            archived.truncated = marker;
        }
        Ok(Some(archived))
    }

    /// Removes `key`'s rows up to `through` (the archive holds them now); returns how many.
    pub async fn remove_archived(&self, key: &LogKey, through: i64) -> Result<u64, LogError> {
        let (tenant, run_id, attempt) = key_params(key);
        let conn = self.db.get().await.map_err(db_error)?;
        conn.execute(
            "DELETE FROM log_lines WHERE tenant = $1 AND run_id = $2 AND attempt = $3 AND seq <= $4",
            &[&tenant, &run_id, &attempt, &through],
        )
        .await
        .map_err(db_error)
    }
}
