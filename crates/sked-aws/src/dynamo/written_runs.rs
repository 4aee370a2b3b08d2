//! [`WrittenRuns`]: the runs this process wrote last, each as it wrote it (item version
//! included), so the next read–decide–put of the same run can start from that copy instead of
//! reading the item again. A worker's heartbeats and its completion follow its own claim: each
//! saves a strongly consistent `GetItem` (one request and one read unit).
//!
//! The copy is only a guess. Every write of a run item bumps its version `rv` (puts, the
//! claim's and release's transactions, the alert update), and a write decided on the copy is
//! conditional on the copy's version: if anything else wrote the run meanwhile the condition
//! fails and the caller reads the item and decides again, exactly as after a lost race. An
//! answer decided on the copy without a write (nothing to change, or a refusal) is not trusted
//! either: the caller reads and decides again. A copy is used once (taken out), forgotten once
//! its run ended (no later write follows), and the map is emptied when it reaches
//! [`MAX_WRITTEN_RUNS`] (a process writing many runs it never touches again, such as the
//! sweeper's, keeps no more than that).
//!
//! The copies also travel ([`RunCopies`]): a run this process fired or wrote back PENDING goes
//! out with its message (taken from here), and a copy received with a message is kept here for
//! the claim — unless a later version of the run is kept already. A copy whose item names
//! another run, or that is too large for a message ([`MAX_COPY_BYTES`]), does not travel.

use super::codec::{StoredRun, run_from_item};
use super::item_json;
use super::store::DynamoStore;
use crate::run_copies::RunCopies;
use sked_core::ids::{RunId, TenantId};
use std::collections::HashMap;
use std::sync::Mutex;

/// Largest copy sent with a message (SQS takes 256 KiB; a run with a long attempt history is
/// read by its claim instead).
pub const MAX_COPY_BYTES: usize = 32 * 1024;

/// Most runs kept; a worker holds one per attempt it runs.
pub const MAX_WRITTEN_RUNS: usize = 4096;

/// The runs this process wrote last (see the module's header).
#[derive(Debug, Default)]
pub(super) struct WrittenRuns {
    runs: Mutex<HashMap<(TenantId, RunId), StoredRun>>,
}

impl WrittenRuns {
    /// The copy of the run as this process last wrote it, if kept; it is kept no longer.
    pub(super) fn take(&self, tenant: &TenantId, run_id: &RunId) -> Option<StoredRun> {
        self.lock().remove(&(tenant.clone(), run_id.clone()))
    }

    /// Whether a copy of the run is kept.
    pub(super) fn holds(&self, tenant: &TenantId, run_id: &RunId) -> bool {
        self.lock().contains_key(&(tenant.clone(), run_id.clone()))
    }

    /// Keeps `written`, the run as its item now stands after this process's write; a run that
    /// ended is not kept.
    pub(super) fn keep(&self, written: &StoredRun) {
        self.insert(written.clone(), false);
    }

    /// Keeps `received` (a copy from a message) unless a later version of the run is kept.
    fn keep_unless_older(&self, received: StoredRun) {
        self.insert(received, true);
    }

    fn insert(&self, stored: StoredRun, unless_older: bool) {
        let key = (stored.run.tenant.clone(), stored.run.run_id.clone());
        let mut runs = self.lock();
        if stored.run.state.is_terminal() {
            runs.remove(&key);
            return;
        }
        if unless_older && runs.get(&key).is_some_and(|kept| kept.rv >= stored.rv) {
            return;
        }
        if runs.len() >= MAX_WRITTEN_RUNS {
            runs.clear();
        }
        runs.insert(key, stored);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(TenantId, RunId), StoredRun>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RunCopies for DynamoStore {
    fn outgoing(&self, tenant: &TenantId, run_id: &RunId) -> Option<serde_json::Value> {
        let stored = self.written_runs.take(tenant, run_id)?;
        let copy = item_json::to_json(&self.stored_run_item(&stored).ok()?)?;
        (copy.to_string().len() <= MAX_COPY_BYTES).then_some(copy)
    }

    fn incoming(&self, tenant: &TenantId, run_id: &RunId, copy: &serde_json::Value) {
        let Some(stored) = item_json::from_json(copy).and_then(|item| run_from_item(&item).ok()) else {
            return;
        };
        if stored.run.tenant == *tenant && stored.run.run_id == *run_id {
            self.written_runs.keep_unless_older(stored);
        }
    }
}
