//! Retention of [`PgObjectLogs`]: the [`LogRetention`] port over both places a log may be —
//! rows older than the cutoff first (a batch, as [`sked_postgres::PgLogs`] removes them:
//! lines read before it), then objects last written before it, with what the batch has room
//! for. A log left in both places (a process died between its upload and its delete) is
//! removed from both in time.
//!
//! What it must not do: decide the period (sked-core's pass does).

use crate::store::PgObjectLogs;
use async_trait::async_trait;
use sked_core::Timestamp;
use sked_core::ports::{LogError, LogRetention};

#[async_trait]
impl LogRetention for PgObjectLogs {
    async fn remove_before(&self, cutoff: Timestamp, limit: usize) -> Result<u64, LogError> {
        let rows = self.rows.remove_before(cutoff, limit).await?;
        let room = limit.saturating_sub(usize::try_from(rows).unwrap_or(usize::MAX));
        if room == 0 {
            return Ok(rows);
        }
        let objects = self.objects.remove_before(cutoff, room).await?;
        Ok(rows + objects)
    }
}
