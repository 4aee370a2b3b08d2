//! The `QuotaStore` port: each tenant's [`Quota`], kept where the tenant's jobs and runs are,
//! so that the store's create and claim transactions can read it (see [`crate::quota`]).

use super::StoreError;
use crate::ids::TenantId;
use crate::quota::Quota;
use async_trait::async_trait;

/// Keeps tenants' quotas.
#[async_trait]
pub trait QuotaStore: Send + Sync + 'static {
    /// The tenant's quota; `None` when none was ever set (no limits).
    async fn get_quota(&self, tenant: &TenantId) -> Result<Option<Quota>, StoreError>;

    /// Sets the tenant's quota, replacing the one before. It holds for every create and claim
    /// that starts after this returns.
    async fn put_quota(&self, tenant: &TenantId, quota: &Quota) -> Result<(), StoreError>;
}
