//! Runs' read–decide–put loop on DynamoDB: a run is read (strongly consistent), changed by
//! sked-core's lifecycle functions, and put back on condition that its item version `rv` has
//! not moved; a lost race reads and decides again. So claims (`claim`), heartbeats,
//! completions, cancels and deferrals ([`super::store`]) follow exactly the rules the SQLite
//! store follows, one run at a time. A run that ends releases its downstream occurrences in
//! the transaction that ends it (`dependencies`), unless it is lone (`lone`).

use super::codec::{Item, StoredRun, ms, n, run_from_item, run_item, run_key, s};
use super::keys::*;
use super::plumbing::QuerySpec;
use super::store::DynamoStore;
use super::unwritten::ABSENT_RV;
use crate::error::Failure;
use aws_sdk_dynamodb::types::TransactWriteItem;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::ports::store::StoreError;
use sked_core::run::Run;
use sked_core::timestamp::Timestamp;

/// Read-modify-write attempts before a run that keeps changing is reported as transient.
pub(super) const MAX_RMW_ATTEMPTS: usize = 16;

impl DynamoStore {
    pub(super) fn stored_run_item(&self, stored: &StoredRun) -> Result<Item, StoreError> {
        run_item(stored, &self.run_layout())
    }

    /// The run as stored — or, where no item holds it, as a firing left unwritten shows it
    /// (`super::unwritten`, item version [`ABSENT_RV`]).
    pub(super) async fn load_run(&self, tenant: &TenantId, run_id: &RunId) -> Result<Option<StoredRun>, StoreError> {
        self.load_run_as(tenant, run_id, false).await
    }

    /// [`DynamoStore::load_run`] for a claim (`claiming`), whose message proves the firing: in
    /// the send window too.
    pub(super) async fn load_run_as(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        claiming: bool,
    ) -> Result<Option<StoredRun>, StoreError> {
        let Some(k) = run_key(tenant, run_id) else {
            return Ok(None);
        };
        match self.get_item(k).await? {
            Some(item) => {
                let stored = run_from_item(&item)?;
                Ok((stored.run.tenant == *tenant && stored.run.run_id == *run_id).then_some(stored))
            }
            None => self.shown_run(tenant, run_id, claiming).await,
        }
    }

    /// The condition of a put of `stored` (as read): its item version still `rv` — or, for a
    /// run shown but not written, no item yet.
    fn put_condition(
        stored: &StoredRun,
    ) -> (
        &'static str,
        Vec<(&'static str, aws_sdk_dynamodb::types::AttributeValue)>,
    ) {
        match stored.rv {
            ABSENT_RV => ("attribute_not_exists(pk)", Vec::new()),
            rv => ("rv = :rv", vec![(":rv", n(rv))]),
        }
    }

    /// Keeps `saved` (just written as `rv + 1` on condition of its `rv`) as the next
    /// read–decide–put's first guess.
    pub(super) fn remember_written(&self, saved: &StoredRun) {
        self.written_runs.keep(&StoredRun {
            rv: saved.rv + 1,
            ..saved.clone()
        });
    }

    /// The transaction write of `stored` with `rv + 1`, on condition its item still has `rv`.
    pub(super) fn versioned_put(&self, stored: &StoredRun) -> Result<TransactWriteItem, StoreError> {
        let next = StoredRun {
            rv: stored.rv + 1,
            ..stored.clone()
        };
        let (condition, values) = Self::put_condition(stored);
        self.put(self.stored_run_item(&next)?, condition, values)
    }

    /// Puts `stored` with `rv + 1` if its item still has version `rv`. `Ok(false)` if it moved.
    /// A run that ends here releases its downstream occurrences in the same transaction.
    pub(super) async fn save_run(&self, stored: &StoredRun) -> Result<bool, StoreError> {
        Ok(self.save_run_releasing(stored).await?.is_some())
    }

    /// [`DynamoStore::save_run`], answering what the run's end released (`None`: it moved).
    async fn save_run_releasing(&self, stored: &StoredRun) -> Result<Option<Vec<Run>>, StoreError> {
        // A lone run releases nothing: no edge to read (`super::lone`; a mark taken off
        // meanwhile moved `rv`, and this put is refused).
        if stored.run.state.is_terminal() && !stored.lone {
            let plan = self.plan_release(&stored.run).await?;
            if !plan.writes.is_empty() {
                let mut items = vec![self.versioned_put(stored)?];
                items.extend(plan.writes);
                return match self.transact(items).await {
                    Ok(()) => Ok(Some(plan.released)),
                    Err(Failure::Condition { .. }) => Ok(None),
                    Err(f) => Err(f.into_store(String::new)),
                };
            }
        }
        Ok(self.put_run(stored).await?.then(Vec::new))
    }

    /// The plain write of [`DynamoStore::save_run`]: one conditional `PutItem`.
    pub(super) async fn put_run(&self, stored: &StoredRun) -> Result<bool, StoreError> {
        let next = StoredRun {
            rv: stored.rv + 1,
            ..stored.clone()
        };
        let (condition, values) = Self::put_condition(stored);
        match self.put_if(self.stored_run_item(&next)?, condition, values).await {
            Ok(()) => Ok(true),
            Err(Failure::Condition { .. }) => Ok(false),
            Err(f) => Err(f.into_store(String::new)),
        }
    }

    /// Read-modify-write of one run: `decide` changes a fresh copy and says whether it changed
    /// and what to answer; a changed run is saved on condition of its item version, and a lost
    /// race decides again on a fresh read. The first copy may be the one this process wrote
    /// last ([`super::written_runs`]): only a successful write decided on it is trusted.
    pub(super) async fn modify_run<T>(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        decide: impl FnMut(&mut StoredRun) -> Result<(bool, T), StoreError>,
    ) -> Result<T, StoreError> {
        Ok(self.modify_run_releasing(tenant, run_id, decide).await?.0)
    }

    /// [`DynamoStore::modify_run`], answering also what the run's end released.
    pub(super) async fn modify_run_releasing<T>(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        decide: impl FnMut(&mut StoredRun) -> Result<(bool, T), StoreError>,
    ) -> Result<(T, Vec<Run>), StoreError> {
        self.modify_run_as(tenant, run_id, false, decide).await
    }

    /// [`DynamoStore::modify_run_releasing`], reading the run as a claim does with `claiming`
    /// ([`DynamoStore::load_run_as`]).
    pub(super) async fn modify_run_as<T>(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        claiming: bool,
        mut decide: impl FnMut(&mut StoredRun) -> Result<(bool, T), StoreError>,
    ) -> Result<(T, Vec<Run>), StoreError> {
        let mut guess = self.written_runs.take(tenant, run_id);
        for _ in 0..MAX_RMW_ATTEMPTS {
            let (mut stored, guessed) = match guess.take() {
                Some(written) => (written, true),
                None => (
                    self.load_run_as(tenant, run_id, claiming)
                        .await?
                        .ok_or(StoreError::NotFound)?,
                    false,
                ),
            };
            let (changed, answer) = match decide(&mut stored) {
                Ok(decided) => decided,
                // Refused on this process's last copy: the item may have moved since.
                Err(_) if guessed => continue,
                Err(e) => return Err(e),
            };
            if !changed {
                if guessed {
                    continue;
                }
                return Ok((answer, Vec::new()));
            }
            if let Some(released) = self.save_run_releasing(&stored).await? {
                self.remember_written(&stored);
                return Ok((answer, released));
            }
        }
        Err(StoreError::Transient(
            format!("run {run_id} kept changing under {MAX_RMW_ATTEMPTS} read-modify-writes").into(),
        ))
    }

    /// The job's PENDING and RUNNING runs (scheduled at or before `scheduled_by`, if given)
    /// with their item versions, oldest nominal time first: the job's entries in the sparse
    /// local index `active` (a run is there while it is PENDING or RUNNING, and after, if it
    /// ended its job: `codec::ENDS_ITS_JOB`; its sort key is the run's, so `scheduled_by`
    /// bounds the range read), read strongly consistent, then those runs' items (a consistent
    /// `BatchGetItem`), kept if still active. Small reads however long the job's history (a
    /// per-second job keeps 86,400 runs a day in its partition) and, bounded, however far
    /// ahead it is fired (600 runs at ten minutes). Where firings are left unwritten, with
    /// the runs read by key (`codec::KEYED`, [`DynamoStore::keyed_runs_of`]).
    pub(super) async fn active_stored_runs(
        &self,
        tenant: &TenantId,
        job_id: &JobId,
        scheduled_by: Option<Timestamp>,
    ) -> Result<Vec<StoredRun>, StoreError> {
        let pk = s(job_pk(tenant.as_str(), job_id.as_str()));
        let mut q = match scheduled_by {
            Some(by) => QuerySpec::new(Some(ACTIVE_INDEX), "#pk = :pk AND #act <= :by")
                .name("#act", ACTIVE_SK)
                .value(":by", s(run_sk(ms(by)))),
            None => QuerySpec::new(Some(ACTIVE_INDEX), "#pk = :pk"),
        }
        .name("#pk", PK)
        .value(":pk", pk);
        q.consistent = true;
        let keys: Vec<Item> = self
            .query(&q, usize::MAX)
            .await?
            .into_iter()
            .map(|entry| entry.into_iter().filter(|(name, _)| name == PK || name == SK).collect())
            .collect();
        // Runs of firings left unwritten are read by key (`super::unwritten`, `codec::KEYED`).
        let mut runs: Vec<StoredRun> = self
            .keyed_runs_of(tenant, job_id)
            .await?
            .into_iter()
            .filter(|stored| scheduled_by.is_none_or(|by| stored.run.scheduled_for <= by))
            .collect();
        if !keys.is_empty() {
            for item in self.batch_get(keys).await? {
                let stored = run_from_item(&item)?;
                if !stored.run.state.is_terminal() {
                    runs.push(stored);
                }
            }
        }
        runs.sort_by(|a, b| (a.run.scheduled_for, &a.run.run_id).cmp(&(b.run.scheduled_for, &b.run.run_id)));
        Ok(runs)
    }
}
