//! Firings written together: the firings of one `fire` call that cancel no run are grouped by
//! tenant and written in shared `TransactWriteItems` of up to [`MAX_TRANSACTION`] items — each
//! firing's job update (conditional, as alone), its skip records and its new runs
//! (`attribute_not_exists`), and one write of the tenant's active-jobs counter for those that
//! end their job (with their sum, where alone each wrote its own). One request where each
//! firing made its own: a sweep of 20 one-shots is one transaction, not 20.
//!
//! A transaction is all or nothing. One refused — a job moved on, a run exists, a conflict
//! with another writer, a failure — wrote nothing, and each of its firings is then written
//! alone (`fire_job`), which answers it exactly as it did before this module. DynamoDB bills
//! a transaction's items the same whatever their number, so the units do not change; the
//! requests do (measured in `crates/sked/tests/aws_requests.rs`).

use super::codec::{StoredRun, truncated};
use super::firing::ends_its_job;
use super::plumbing::MAX_TRANSACTION;
use super::quotas::TenantLimits;
use super::store::DynamoStore;
use aws_sdk_dynamodb::types::TransactWriteItem;
use futures::stream::{self, StreamExt};
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::store::{Firing, StoreError};
use sked_core::quota::counts_as_active;
use sked_core::run::Run;
use std::collections::{BTreeMap, HashSet};

/// Where a firing's writes go: with others of its tenant, or alone.
fn writes_of(firing: &Firing) -> usize {
    1 + firing.skipped.len() + firing.runs.len()
}

/// The firings (by index, among `among`) to write together, in groups of one tenant whose
/// writes fit one transaction with the tenant's counter: those that cancel nothing, in their
/// order; groups of one are left out (a firing alone is written as before).
pub(super) fn groups(firings: &[Firing], among: &[usize]) -> Vec<Vec<usize>> {
    let room = MAX_TRANSACTION - 1; // the counter's write
    let mut by_tenant: BTreeMap<&TenantId, Vec<Vec<usize>>> = BTreeMap::new();
    let mut filled: BTreeMap<&TenantId, usize> = BTreeMap::new();
    for &i in among {
        let firing = &firings[i];
        let writes = writes_of(firing);
        if !firing.cancel.is_empty() || writes > room {
            continue;
        }
        let groups = by_tenant.entry(&firing.tenant).or_default();
        let used = filled.entry(&firing.tenant).or_default();
        match groups.last_mut() {
            Some(group) if *used + writes <= room => group.push(i),
            _ => {
                groups.push(vec![i]);
                *used = 0;
            }
        }
        *used += writes;
    }
    by_tenant
        .into_values()
        .flatten()
        .filter(|group| group.len() > 1)
        .collect()
}

/// What a group of firings wrote: each firing (by index) with the runs it inserted.
type Written = Vec<(usize, Vec<Run>)>;

impl DynamoStore {
    /// Writes the [`groups`] of `firings` (among `among`), each in one transaction, [`super::firing::PARALLEL_FIRINGS`]
    /// at a time. Answers the firings written; the others (left out, or in a group refused)
    /// are the caller's to write alone.
    pub(super) async fn fire_together(&self, firings: &[Firing], among: &[usize]) -> Written {
        stream::iter(groups(firings, among))
            .map(|group| async move { self.fire_group(firings, &group).await.unwrap_or_default() })
            .buffer_unordered(super::firing::PARALLEL_FIRINGS)
            .collect::<Vec<Written>>()
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// One group's transaction. `None` if it was not written (nothing of it was).
    async fn fire_group(&self, firings: &[Firing], group: &[usize]) -> Option<Written> {
        let tenant = &firings[group[0]].tenant;
        let ending = group.iter().filter(|&&i| !counts_as_active(firings[i].state)).count() as i64;
        let limits = match ending {
            0 => TenantLimits::default(),
            _ => self.tenant_limits(tenant).await.ok()?,
        };
        let mut items: Vec<TransactWriteItem> = Vec::new();
        let mut written: Written = Vec::with_capacity(group.len());
        let mut lone = Vec::with_capacity(group.len());
        for &i in group {
            let firing = &firings[i];
            let fires_lone = self.fires_lone(firing);
            items.push(self.firing_job_write(firing, false, fires_lone).ok()?);
            let (writes, runs) = self.fired_writes(firing, fires_lone, &HashSet::new()).ok()?;
            items.extend(writes);
            written.push((i, runs.into_iter().flatten().collect()));
            lone.push(fires_lone);
        }
        items.extend(self.active_jobs_write(tenant, &limits, -ending).ok()?);
        self.transact(items).await.ok()?;
        for ((i, runs), lone) in written.iter().zip(lone) {
            self.keep_fired(&firings[*i], runs, lone);
        }
        Some(written)
    }

    /// A firing's writes besides its job's: the ledger's records of what its plan skipped
    /// (puts that replace: a retry writes them again), then the insert of each of its runs not
    /// in `skip` (conditional on its absence; `lone`: marked so, `super::lone`; the one run of
    /// a firing that ends its job marked [`ENDS_ITS_JOB`](super::codec::ENDS_ITS_JOB)). With each
    /// write, the run it inserts as inserted, if any.
    pub(super) fn fired_writes(
        &self,
        firing: &Firing,
        lone: bool,
        skip: &HashSet<RunId>,
    ) -> Result<(Vec<TransactWriteItem>, Vec<Option<Run>>), StoreError> {
        let mut writes = self.skip_writes(&firing.tenant, &firing.job_id, &firing.skipped)?;
        let mut runs: Vec<Option<Run>> = vec![None; writes.len()];
        for run in firing.runs.iter().filter(|r| !skip.contains(&r.run_id)) {
            let stored = StoredRun {
                lone,
                ends_its_job: ends_its_job(firing),
                ..StoredRun::new(truncated(run))
            };
            writes.push(self.put(self.stored_run_item(&stored)?, "attribute_not_exists(pk)", vec![])?);
            runs.push(Some(stored.run));
        }
        Ok((writes, runs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sked_core::job::JobState;
    use sked_core::run::Trigger;

    /// Every index of `firings`.
    fn every(firings: &[Firing]) -> Vec<usize> {
        (0..firings.len()).collect()
    }

    fn firing(tenant: &str, job: &str, runs: usize, cancel: usize) -> Firing {
        let alone = super::super::firing::tests::firing(tenant, job, JobState::Completed);
        let run = Run::new_pending(
            tenant.into(),
            job.into(),
            alone.at,
            Trigger::Schedule,
            5,
            alone.at,
            1,
            alone.at,
        );
        Firing {
            runs: vec![run; runs],
            cancel: vec![RunId::from("x@0"); cancel],
            ..alone
        }
    }

    #[test]
    fn firings_are_grouped_by_tenant_up_to_a_transaction_and_those_that_cancel_go_alone() {
        let firings = [
            firing("a", "1", 1, 0),
            firing("b", "2", 1, 0),
            firing("a", "3", 1, 1), // cancels: alone
            firing("a", "4", 1, 0),
            firing("b", "5", 98, 0), // 99 writes: a group of its own, so alone
            firing("a", "6", 0, 0),
        ];
        assert_eq!(groups(&firings, &every(&firings)), vec![vec![0, 3, 5]]);
        // 49 one-run firings fill a transaction with the counter (98 + 1 writes); the 50th
        // starts the next group.
        let many: Vec<Firing> = (0..51).map(|i| firing("a", &i.to_string(), 1, 0)).collect();
        let grouped = groups(&many, &every(&many));
        assert_eq!(grouped.iter().map(Vec::len).collect::<Vec<_>>(), vec![49, 2]);
        assert_eq!(grouped.concat(), (0..51).collect::<Vec<_>>());
    }
}
