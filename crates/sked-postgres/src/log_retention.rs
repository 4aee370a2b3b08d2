//! Retention of [`PgLogs`]: the [`LogRetention`] port over `log_lines`, deleting lines read
//! before the cutoff (`ts`, indexed by migration 5) a bounded batch per statement. Lines, not
//! whole logs: an attempt whose lines straddle the cutoff loses its older lines first, the rest
//! in later passes; its last line (the cursor, the truncation marker) goes last.
//!
//! The batch is chosen with `FOR UPDATE SKIP LOCKED`: two processes running passes at once
//! (two sweepers) delete disjoint lines instead of waiting on each other. What it must not do:
//! decide the period (sked-core's pass does) or touch anything but `log_lines`.

use crate::logs::PgLogs;
use async_trait::async_trait;
use sked_core::Timestamp;
use sked_core::ports::{LogError, LogRetention};

#[async_trait]
impl LogRetention for PgLogs {
    async fn remove_before(&self, cutoff: Timestamp, limit: usize) -> Result<u64, LogError> {
        let cutoff = cutoff.timestamp_millis();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let conn = self.db.get().await.map_err(|e| LogError::Io(Box::new(e)))?;
        conn.execute(
            "DELETE FROM log_lines WHERE (tenant, run_id, attempt, seq) IN (
                 SELECT tenant, run_id, attempt, seq FROM log_lines WHERE ts < $1
                 LIMIT $2 FOR UPDATE SKIP LOCKED)",
            &[&cutoff, &limit],
        )
        .await
        .map_err(|e| LogError::Io(Box::new(e)))
    }
}
