//! [`Quotas`]: reading and setting tenants' quotas (operators only), and the submit-rate check
//! the API-facing service makes before it writes a job or a manual run.
//!
//! The two count limits are enforced by the store, in its own transactions (see
//! [`crate::quota`]); this service only keeps the rate. Its state is one instant per tenant
//! (GCRA), in this process: with several API processes each admits the rate on its own
//! (say so to operators: set the rate per process). A quota read for the rate check is cached
//! for [`QUOTA_CACHE`]; a change made through this process applies at once.

use super::keys::require;
use crate::auth::{Principal, Role};
use crate::error::CoreError;
use crate::ids::{self, TenantId};
use crate::ports::{Clock, QuotaStore};
use crate::quota::{self, Admission, Quota};
use crate::timestamp::Timestamp;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How long a quota read for the rate check is used before it is read again.
pub const QUOTA_CACHE: chrono::Duration = chrono::Duration::seconds(1);

/// Tenants beyond which the rate state drops the buckets that are full again (idle tenants).
const PRUNE_ABOVE: usize = 10_000;

/// The quota service.
#[derive(Clone)]
pub struct Quotas {
    store: Arc<dyn QuotaStore>,
    clock: Arc<dyn Clock>,
    state: Arc<Mutex<RateState>>,
}

#[derive(Default)]
struct RateState {
    /// Each tenant's quota as last read, and when.
    cached: HashMap<TenantId, (Option<Quota>, Timestamp)>,
    /// Each tenant's theoretical arrival time.
    tat: HashMap<TenantId, Timestamp>,
}

impl Quotas {
    /// Quotas kept in `store`, timed by `clock`.
    pub fn new(store: Arc<dyn QuotaStore>, clock: Arc<dyn Clock>) -> Self {
        Quotas {
            store,
            clock,
            state: Arc::default(),
        }
    }

    /// `PermissionDenied` unless `caller` may read and set quotas (an operator).
    pub fn may_manage(caller: &Principal) -> Result<(), CoreError> {
        require(caller, Role::Operator, "quotas are kept by operators")
    }

    /// The tenant's quota (`{}`, no limits, when none was set). Operators only.
    pub async fn get(&self, caller: &Principal, tenant: &TenantId) -> Result<Quota, CoreError> {
        Self::may_manage(caller)?;
        check_tenant(tenant)?;
        Ok(self.store.get_quota(tenant).await?.unwrap_or_default())
    }

    /// Sets the tenant's quota, replacing the one before. Operators only; invalid limits are
    /// refused, naming the field, and change nothing.
    pub async fn put(&self, caller: &Principal, tenant: &TenantId, quota: Quota) -> Result<Quota, CoreError> {
        Self::may_manage(caller)?;
        check_tenant(tenant)?;
        let problems = quota.problems();
        if !problems.is_empty() {
            return Err(CoreError::Invalid(problems));
        }
        self.store.put_quota(tenant, &quota).await?;
        let mut state = self.lock();
        state
            .cached
            .insert(tenant.clone(), (Some(quota.clone()), self.clock.now()));
        state.tat.remove(tenant);
        Ok(quota)
    }

    /// Admits `n` submissions of `tenant` now, or refuses them with `ResourceExhausted`
    /// (with the wait after which the same request passes).
    pub async fn admit(&self, tenant: &TenantId, n: usize) -> Result<(), CoreError> {
        let now = self.clock.now();
        let rate = match self.cached(tenant, now) {
            Some(quota) => quota.and_then(|q| q.submit_rate),
            None => {
                let quota = self.store.get_quota(tenant).await?;
                let rate = quota.as_ref().and_then(|q| q.submit_rate);
                self.lock().cached.insert(tenant.clone(), (quota, now));
                rate
            }
        };
        let Some(rate) = rate else {
            return Ok(());
        };
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        let mut state = self.lock();
        match quota::admit(&rate, state.tat.get(tenant).copied(), now, n) {
            Admission::Admit(tat) => {
                if state.tat.len() > PRUNE_ABOVE {
                    state.tat.retain(|_, t| *t > now);
                }
                state.tat.insert(tenant.clone(), tat);
                Ok(())
            }
            Admission::RetryAfter(wait) => Err(CoreError::ResourceExhausted {
                message: format!(
                    "tenant {tenant} is over its submit rate ({}/s, burst {}); retry after {wait}",
                    rate.per_second, rate.burst
                ),
                retry_after: Some(wait),
            }),
            Admission::TooMany => Err(CoreError::ResourceExhausted {
                message: format!(
                    "{n} submissions at once exceed tenant {tenant}'s submit burst of {}; send fewer per request",
                    rate.burst
                ),
                retry_after: None,
            }),
        }
    }

    /// The cached quota of `tenant` if it was read within [`QUOTA_CACHE`].
    fn cached(&self, tenant: &TenantId, now: Timestamp) -> Option<Option<Quota>> {
        let state = self.lock();
        let (quota, at) = state.cached.get(tenant)?;
        (now - *at < QUOTA_CACHE && *at <= now).then(|| quota.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RateState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn check_tenant(tenant: &TenantId) -> Result<(), CoreError> {
    if ids::is_valid_id(tenant.as_str()) {
        Ok(())
    } else {
        Err(CoreError::invalid("tenant", "tenant must match [A-Za-z0-9_.-]{1,128}"))
    }
}
