//! [`MemWork`]: the [`WorkPort`] in its one-transaction shape over a [`MemStore`] and a
//! [`MemQueue`] — the steps of [`sked_core::work::one_transaction`] (the same code SQLite's
//! port runs in its transactions), each under both locks (the store's, then the queue's), so
//! a step is atomic against every other call to either. What the simulation drives to check
//! the one-transaction shape; a memory "transaction" has no rollback, which the steps do not
//! need: a refusal comes before any write of its step.

use super::queue::{MemQueue, State as QueueState};
use super::store::{Locked, MemStore, State as StoreState, complete_locked, fire_locked};
use async_trait::async_trait;
use sked_core::duration::Dur;
use sked_core::ids::{JobId, RunId, TenantId, WorkerId};
use sked_core::job::Job;
use sked_core::lifecycle::ClaimTx;
use sked_core::ports::{
    ClaimBatch, ClaimOutcome, Clock, Completion, Delivery, Dispatch, Ended, Firing, Receipt, ReceiveRequest, Received,
    Settlement, StoreError, WorkError, WorkPort,
};
use sked_core::run::Run;
use sked_core::timestamp::{Timestamp, trunc_ms};
use sked_core::work::{WorkTx, one_transaction};
use std::sync::Arc;

/// The one-transaction work port over an in-memory store and queue.
pub struct MemWork {
    store: Arc<MemStore>,
    queue: Arc<MemQueue>,
    /// Time of claims, leases and visibility (the worker's).
    clock: Arc<dyn Clock>,
}

impl MemWork {
    /// The work port over `store` and `queue`, timed by `clock`.
    pub fn new(store: Arc<MemStore>, queue: Arc<MemQueue>, clock: Arc<dyn Clock>) -> Self {
        MemWork { store, queue, clock }
    }

    /// Runs `step` with both locks held.
    fn step<T>(&self, step: impl FnOnce(&mut MemTx<'_>) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut store = self.store.lock_state();
        let mut queue = self.queue.lock_state();
        step(&mut MemTx {
            store: &mut store,
            queue: &mut queue,
        })
    }
}

/// Both states, locked: one step's transaction.
struct MemTx<'a> {
    store: &'a mut StoreState,
    queue: &'a mut QueueState,
}

impl ClaimTx for MemTx<'_> {
    type Error = StoreError;

    fn job(&mut self, tenant: &TenantId, id: &JobId) -> Result<Option<Job>, StoreError> {
        Locked(self.store).job(tenant, id)
    }

    fn active_runs(&mut self, tenant: &TenantId, job_id: &JobId) -> Result<Vec<Run>, StoreError> {
        Locked(self.store).active_runs(tenant, job_id)
    }

    fn run(&mut self, tenant: &TenantId, run_id: &RunId) -> Result<Option<Run>, StoreError> {
        Locked(self.store).run(tenant, run_id)
    }

    fn claim_run(
        &mut self,
        tenant: &TenantId,
        run_id: &RunId,
        owner: &WorkerId,
        batch: &ClaimBatch,
    ) -> Result<Result<ClaimOutcome, StoreError>, StoreError> {
        Locked(self.store).claim_run(tenant, run_id, owner, batch)
    }
}

impl WorkTx for MemTx<'_> {
    /// Its runs are enqueued in the same step: a firing left unwritten is sent with it.
    fn fire(&mut self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, StoreError> {
        let answers = firings.iter().map(|firing| fire_locked(self.store, firing)).collect();
        for firing in firings {
            self.store.mark_sending(&(firing.tenant.clone(), firing.job_id.clone()));
        }
        Ok(answers)
    }

    fn take(&mut self, max: usize, visibility: Dur, now: Timestamp) -> Result<Vec<Delivery>, StoreError> {
        Ok(self.queue.take(now, max, visibility).0)
    }

    fn enqueue(&mut self, items: &[Dispatch]) -> Result<(), StoreError> {
        self.queue.enqueue(items);
        Ok(())
    }

    fn ack(&mut self, receipt: &Receipt) -> Result<bool, StoreError> {
        Ok(self.queue.ack(receipt))
    }

    fn extend(&mut self, receipt: &Receipt, until: Timestamp) -> Result<bool, StoreError> {
        Ok(self.queue.extend(receipt, until))
    }

    fn renew_lease(
        &mut self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Run, StoreError> {
        let run = self.run_mut(tenant, run_id)?;
        run.renew_lease(token, now, trunc_ms(lease_until))?;
        Ok(run.clone())
    }

    fn complete(&mut self, done: &Completion) -> Result<Ended, StoreError> {
        complete_locked(self.store, done)
    }

    /// Every error of the memory store is a refusal (it has nothing else that can fail).
    fn refusal(error: StoreError) -> Result<StoreError, StoreError> {
        Ok(error)
    }

    fn park(&mut self, receipt: &Receipt, key: &str, fallback: Timestamp) -> Result<bool, StoreError> {
        Ok(self.queue.park(receipt, key, fallback))
    }

    fn wake(&mut self, tenant: &TenantId, key: &str, n: usize, now: Timestamp) -> Result<usize, StoreError> {
        Ok(self.queue.wake(tenant, key, n, now))
    }
}

impl MemTx<'_> {
    fn run_mut(&mut self, tenant: &TenantId, run_id: &RunId) -> Result<&mut Run, StoreError> {
        self.store.run_mut(tenant, run_id).ok_or(StoreError::NotFound)
    }
}

#[async_trait]
impl WorkPort for MemWork {
    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, WorkError> {
        let answers = self.step(|tx| one_transaction::fire(tx, firings))?;
        self.queue.notify_enqueued();
        Ok(answers)
    }

    async fn receive(&self, request: &ReceiveRequest) -> Result<Vec<Received>, WorkError> {
        let mut failed = None;
        // A step is one critical section, so dropping the poll between two never drops a
        // take under way: stopping it is stopping its wait.
        let poll = self.queue.poll(request.max, request.wait, |_| {
            // The worker's clock, as SQLite's port uses its process's.
            let now = trunc_ms(self.clock.now());
            let took = self.step(|tx| {
                let received = one_transaction::receive(tx, request, now)?;
                Ok((received, tx.queue.next_ready()))
            });
            took.unwrap_or_else(|e| {
                failed = Some(e);
                (Vec::new(), None)
            })
        });
        let received = tokio::select! {
            biased;
            _ = request.stop.cancelled() => Vec::new(),
            received = poll => received,
        };
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(received),
        }
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        receipt: &Receipt,
        lease: Dur,
    ) -> Result<(Run, Timestamp), WorkError> {
        let now = trunc_ms(self.clock.now());
        let until = now + lease.to_chrono();
        let run = self.step(|tx| one_transaction::heartbeat(tx, (tenant, run_id, token), receipt, now, until))?;
        Ok((run, until))
    }

    async fn complete(&self, settlement: &Settlement) -> Result<Ended, WorkError> {
        let (ended, _) = self.step(|tx| one_transaction::complete(tx, settlement))?;
        self.queue.notify_enqueued();
        Ok(ended)
    }
}
