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

use super::codec::StoredRun;
use sked_core::ids::{RunId, TenantId};
use std::collections::HashMap;
use std::sync::Mutex;

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

    /// Keeps `written`, the run as its item now stands after this process's write; a run that
    /// ended is not kept.
    pub(super) fn keep(&self, written: &StoredRun) {
        let key = (written.run.tenant.clone(), written.run.run_id.clone());
        let mut runs = self.lock();
        if written.run.state.is_terminal() {
            runs.remove(&key);
            return;
        }
        if runs.len() >= MAX_WRITTEN_RUNS {
            runs.clear();
        }
        runs.insert(key, written.clone());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(TenantId, RunId), StoredRun>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }
}
