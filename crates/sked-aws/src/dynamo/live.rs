//! The `live` index (layout in [`super`]): a run's entry from its firing to its end, under
//! `RUNNING#<shard>`, keys only. A PENDING run is filed under its `not_before`, exactly; a
//! RUNNING run keeps that key while its lease expires less than a 5-minute step after it (a
//! run claimed on time, and its first heartbeats: the claim writes no index), then moves to the
//! start of the step its lease expires in ([`super::keys::live_sk`]) — so a heartbeat that
//! leaves its run in the same step writes nothing to any index. Here the reaper's reads of it:
//! every entry filed at or before a bound, oldest first, and the runs' items (consistent
//! `BatchGetItem`s, a few at a time) until `limit` runs it asks for are found. A RUNNING entry's
//! key is a lower bound of its run's expiry, never above it, so a lease is found expired at
//! the first pass after it expires; the runs still alive that are filed before now are read
//! and left (reads are a fifth of a write's price, and at most one pass's worth).

use super::codec::{Item, Reader, key, ms, run_from_item, s};
use super::keys::{GSI3_PK, GSI3_SK, LIVE_INDEX, PK, SK, pad_ms, running_pk};
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
        let expired = |run: &Run| run.state == RunState::Running && run.lease_expired(now);
        self.live_runs_filed_by(ms(now), limit, expired).await
    }

    /// Up to `limit` PENDING runs ready by `ready_before` (and possibly a few more), oldest
    /// `not_before` first.
    pub(super) async fn pending_runs_ready_by(
        &self,
        ready_before: Timestamp,
        limit: usize,
    ) -> Result<Vec<Run>, StoreError> {
        let ready = |run: &Run| run.state == RunState::Pending && run.not_before <= ready_before;
        self.live_runs_filed_by(ms(ready_before), limit, ready).await
    }

    /// The runs filed in `live` at or before `bound_ms` that `wanted` picks, read oldest entry
    /// first until `limit` are found.
    async fn live_runs_filed_by(
        &self,
        bound_ms: i64,
        limit: usize,
        wanted: impl Fn(&Run) -> bool,
    ) -> Result<Vec<Run>, StoreError> {
        let bound = pad_ms(bound_ms);
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
        // Oldest entries first, a few batches at a time, until `limit` are found.
        let batches: Vec<Vec<Item>> = entries
            .chunks(MAX_BATCH_GET)
            .map(|batch| batch.iter().map(run_key).collect())
            .collect();
        let mut batches = stream::iter(batches)
            .map(|batch| self.batch_get(batch))
            .buffered(PARALLEL_BATCH_GETS);
        let mut found = Vec::new();
        while found.len() < limit
            && let Some(items) = batches.next().await
        {
            for item in items? {
                let run = run_from_item(&item)?.run;
                if wanted(&run) {
                    found.push(run);
                }
            }
        }
        Ok(found)
    }
}
