//! [`MemKeys`]: API keys in memory ([`KeyStore`]), keyed by id with an index by hash.

use async_trait::async_trait;
use sked_core::auth::ApiKey;
use sked_core::ids::TenantId;
use sked_core::ports::{KeyStore, StoreError};
use sked_core::timestamp::Timestamp;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Keys in memory.
#[derive(Debug, Default)]
pub struct MemKeys {
    /// Keys by id, each with its hash.
    keys: Mutex<BTreeMap<String, (ApiKey, String)>>,
}

impl MemKeys {
    /// No keys.
    pub fn new() -> Self {
        MemKeys::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, (ApiKey, String)>> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl KeyStore for MemKeys {
    async fn insert_key(&self, key: &ApiKey, hash: &str) -> Result<(), StoreError> {
        let mut keys = self.lock();
        if keys.contains_key(&key.id) || keys.values().any(|(_, h)| h == hash) {
            return Err(StoreError::Conflict(format!("key {} exists", key.id)));
        }
        keys.insert(key.id.clone(), (key.clone(), hash.to_string()));
        Ok(())
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        Ok(self.lock().values().find(|(_, h)| h == hash).map(|(k, _)| k.clone()))
    }

    async fn get_key(&self, id: &str) -> Result<Option<ApiKey>, StoreError> {
        Ok(self.lock().get(id).map(|(k, _)| k.clone()))
    }

    async fn list_keys(&self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, StoreError> {
        let mut keys: Vec<ApiKey> = self
            .lock()
            .values()
            .map(|(k, _)| k.clone())
            .filter(|k| tenant.is_none_or(|t| &k.tenant == t))
            .collect();
        keys.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(keys)
    }

    async fn revoke_key(&self, id: &str, at: Timestamp) -> Result<ApiKey, StoreError> {
        let mut keys = self.lock();
        let (key, _) = keys.get_mut(id).ok_or(StoreError::NotFound)?;
        key.revoked_at.get_or_insert(at);
        Ok(key.clone())
    }

    async fn any_key(&self) -> Result<bool, StoreError> {
        Ok(!self.lock().is_empty())
    }
}
