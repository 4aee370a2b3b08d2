//! [`Faulty`] over a [`WorkPort`] (the one-transaction shape): a step fails before it takes
//! effect (throttled, or its process cut off from the database), or takes effect and its
//! reply is lost — a receive whose messages were leased and runs claimed, a heartbeat, a
//! completion with its ack. A firing meets conflicts one by one, as with the store, and no
//! lost reply (see [`super::store`]).

use super::Faulty;
use async_trait::async_trait;
use sked_core::duration::Dur;
use sked_core::ids::{RunId, TenantId};
use sked_core::ports::{Ended, Firing, Receipt, ReceiveRequest, Received, Settlement, StoreError, WorkError, WorkPort};
use sked_core::run::Run;
use sked_core::timestamp::Timestamp;

#[async_trait]
impl<P: WorkPort + ?Sized> WorkPort for Faulty<P> {
    async fn fire(&self, firings: &[Firing]) -> Result<Vec<Result<Vec<Run>, StoreError>>, WorkError> {
        self.before("work fire").await?;
        self.fire_each(firings, async |written: &[Firing]| self.inner.fire(written).await)
            .await
    }

    async fn receive(&self, request: &ReceiveRequest) -> Result<Vec<Received>, WorkError> {
        self.before("work receive").await?;
        let received = self.inner.receive(request).await?;
        if received.is_empty() {
            return Ok(received);
        }
        Ok(self.after("work receive", Ok(received))?)
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        run_id: &RunId,
        token: u64,
        receipt: &Receipt,
        lease: Dur,
    ) -> Result<(Run, Timestamp), WorkError> {
        self.before("work heartbeat").await?;
        let renewed = self.inner.heartbeat(tenant, run_id, token, receipt, lease).await?;
        Ok(self.after("work heartbeat", Ok(renewed))?)
    }

    async fn complete(&self, settlement: &Settlement) -> Result<Ended, WorkError> {
        self.before("work complete").await?;
        let run = self.inner.complete(settlement).await?;
        Ok(self.after("work complete", Ok(run))?)
    }
}
