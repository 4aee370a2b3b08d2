//! The `live` index (layout in [`super`]): running runs, filed under `RUNNING#<shard>` by the
//! 5-minute step their lease expires in ([`super::keys::running_sk`]), keys only — so a
//! heartbeat that leaves its run in the same step writes nothing to any index. Here the
//! reaper's read of it: every entry whose step has begun, oldest step first, and the runs'
//! items (consistent `BatchGetItem`s, a few at a time) until `limit` expired leases are
//! found. An entry's key is a lower bound of its run's expiry, never above it, so a lease is
//! found expired at the first pass after it expires, as with an exact key; the runs still
//! alive in the current step are read and left (reads are a fifth of a write's price, and at
//! most one pass's worth).

use super::codec::{Item, Reader, key, ms, run_from_item, s};
use super::keys::{GSI3_PK, GSI3_SK, LIVE_INDEX, PK, SK, running_pk, running_sk};
use super::plumbing::{MAX_BATCH_GET, QuerySpec};
use super::store::DynamoStore;
use futures::stream::{self, StreamExt};
use sked_core::ports::store::StoreError;
use sked_core::run::{Run, RunState};
use sked_core::timestamp::Timestamp;

/// `BatchGetItem`s of the runs' items out at once.
const PARALLEL_BATCH_GETS: usize = 4;

impl DynamoStore {
    /// Up to `limit` RUNNING runs whose lease expired by `now` (and possibly a few more: the
    /// last batch read is kept whole), in no particular order.
    pub(super) async fn running_runs_expired_by(&self, now: Timestamp, limit: usize) -> Result<Vec<Run>, StoreError> {
        let bound = running_sk(ms(now));
        let specs = (0..self.shards)
            .map(|shard| {
                QuerySpec::new(Some(LIVE_INDEX), "#pk = :pk AND #sk <= :bound")
                    .name("#pk", GSI3_PK)
                    .name("#sk", GSI3_SK)
                    .value(":pk", s(running_pk(shard)))
                    .value(":bound", s(bound.clone()))
            })
            .collect();
        let mut entries = self.query_many(specs, usize::MAX).await?;
        entries.sort_by_cached_key(|e| Reader::new(e).s(GSI3_SK).unwrap_or_default());
        let run_key = |e: &Item| {
            let r = Reader::new(e);
            key(r.s(PK).unwrap_or_default(), r.s(SK).unwrap_or_default())
        };
        // Oldest steps first, a few batches at a time, until `limit` are found.
        let batches: Vec<Vec<Item>> = entries
            .chunks(MAX_BATCH_GET)
            .map(|batch| batch.iter().map(run_key).collect())
            .collect();
        let mut batches = stream::iter(batches)
            .map(|batch| self.batch_get(batch))
            .buffered(PARALLEL_BATCH_GETS);
        let mut expired = Vec::new();
        while expired.len() < limit
            && let Some(items) = batches.next().await
        {
            for item in items? {
                let run = run_from_item(&item)?.run;
                if run.state == RunState::Running && run.lease_expired(now) {
                    expired.push(run);
                }
            }
        }
        Ok(expired)
    }
}
