//! A store's reads and writes through a one-shot's firing left unwritten, for
//! [`MemStore::lean`](super::MemStore::lean) ([`sked_core::unwritten_firing`]): the marks of
//! such firings (unsent, sending — the send window — and sent, passed by a sweep), the job
//! and the run every read shows for them, the run a claim in the send window puts, and the
//! settling of a firing before another write touches what it left unwritten.

use super::store::State;
use sked_core::ids::{JobId, RunId, TenantId};
use sked_core::job::Job;
use sked_core::ports::StoreError;
use sked_core::run::Run;
use sked_core::unwritten_firing;

impl State {
    /// The stored job whose firing was left unwritten, while it is unchanged since: marked
    /// by a sweep, or a one-shot still due whose run is stored (claimed in the send window).
    fn sent_job(&self, key: &(TenantId, JobId)) -> Option<&Job> {
        let job = self.jobs.get(key)?;
        let marked = self.sent.get(key) == Some(job);
        (marked || self.claimed_in_window(job)).then_some(job)
    }

    /// Whether `job` (as stored) is a one-shot still due whose occurrence's run is stored.
    fn claimed_in_window(&self, job: &Job) -> bool {
        self.lean
            && unwritten_firing::due_run(job)
                .is_some_and(|run| self.runs.contains_key(&(run.tenant.clone(), run.run_id.clone())))
    }

    /// What a claim of `run_id` puts when no run of that id is stored or shown: in the send
    /// window, the occurrence of a one-shot still due ([`unwritten_firing::due_run`]).
    pub(super) fn claimed_from_job(&self, tenant: &TenantId, run_id: &RunId) -> Option<Run> {
        let (job_id, _) = run_id.parts()?;
        let job = self.jobs.get(&(tenant.clone(), job_id))?;
        unwritten_firing::due_run(job).filter(|run| run.run_id == *run_id)
    }

    /// The unwritten firing of `key`'s job has its run in the queue
    /// ([`JobStore::firings_sent`](sked_core::ports::JobStore::firings_sent)).
    pub(crate) fn mark_sending(&mut self, key: &(TenantId, JobId)) {
        if let Some(job) = self.unsent.remove(key) {
            self.sending.insert(key.clone(), job);
        }
    }

    /// A sweep passes the firings left unwritten so far (DynamoDB: its watermark passes their
    /// due buckets): those whose job is unchanged since are marked sent.
    pub(super) fn pass_sent(&mut self) {
        for (key, job) in std::mem::take(&mut self.sending) {
            if self.jobs.get(&key) == Some(&job) {
                self.sent.insert(key, job);
            }
        }
    }

    /// A job as read: as its unwritten firing leaves it, if it has one.
    pub(super) fn job_view(&self, key: &(TenantId, JobId)) -> Option<Job> {
        match self.sent_job(key) {
            Some(job) => Some(unwritten_firing::job_after(job)),
            None => self.jobs.get(key).cloned(),
        }
    }

    /// Every job as read.
    pub(super) fn job_views(&self) -> impl Iterator<Item = Job> + '_ {
        self.jobs.keys().filter_map(|key| self.job_view(key))
    }

    /// The run an unwritten firing of the job stands for, while no run of its id is stored.
    pub(super) fn unwritten_run(&self, key: &(TenantId, JobId)) -> Option<Run> {
        let run = unwritten_firing::pending_run(self.sent_job(key)?)?;
        let stored = self.runs.contains_key(&(run.tenant.clone(), run.run_id.clone()));
        (!stored).then_some(run)
    }

    /// Every run that an unwritten firing stands for.
    pub(super) fn unwritten_runs(&self) -> impl Iterator<Item = Run> + '_ {
        self.sent.keys().filter_map(|key| self.unwritten_run(key))
    }

    /// A run as read: stored, or stood for by its job's unwritten firing.
    pub(super) fn run_view(&self, tenant: &TenantId, run_id: &RunId) -> Option<Run> {
        if let Some(run) = self.runs.get(&(tenant.clone(), run_id.clone())) {
            return Some(run.clone());
        }
        let (job_id, _) = run_id.parts()?;
        self.unwritten_run(&(tenant.clone(), job_id))
            .filter(|run| &run.run_id == run_id)
    }

    /// Every run as read.
    pub(super) fn run_views(&self) -> impl Iterator<Item = Run> + '_ {
        self.runs.values().cloned().chain(self.unwritten_runs())
    }

    /// Writes what the job's unwritten firing left unwritten (its run, unless one of its id
    /// is stored, and the job as the firing leaves it): before any other write touches them.
    pub(super) fn settle(&mut self, key: &(TenantId, JobId)) {
        let Some(job) = self.sent_job(key).cloned() else {
            self.sent.remove(key);
            return;
        };
        if let Some(run) = self.unwritten_run(key) {
            self.carried.insert((run.tenant.clone(), run.run_id.clone()));
            self.runs.insert((run.tenant.clone(), run.run_id.clone()), run);
        }
        self.jobs.insert(key.clone(), unwritten_firing::job_after(&job));
        self.sent.remove(key);
    }

    /// The refusal of a write to an attempt of `run_id`, which no item holds: fenced if an
    /// unwritten firing shows the run (PENDING, it holds no lease), else not found.
    pub(super) fn no_stored_attempt(&self, tenant: &TenantId, run_id: &RunId) -> StoreError {
        match self.run_view(tenant, run_id) {
            Some(_) => StoreError::Fenced,
            None => StoreError::NotFound,
        }
    }

    /// [`State::settle`] for the job of `run_id`.
    pub(super) fn settle_job_of(&mut self, tenant: &TenantId, run_id: &RunId) {
        if let Some((job_id, _)) = run_id.parts() {
            self.settle(&(tenant.clone(), job_id));
        }
    }
}
