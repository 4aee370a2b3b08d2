//! The `KeyStore` port: API keys by the hash of their secret. Stores never see a secret.

use super::StoreError;
use crate::auth::ApiKey;
use crate::ids::TenantId;
use crate::timestamp::Timestamp;
use async_trait::async_trait;

/// Keeps API keys.
#[async_trait]
pub trait KeyStore: Send + Sync + 'static {
    /// Stores `key` under `hash` (the SHA-256 of its secret). `Conflict` if the id or the
    /// hash exists.
    async fn insert_key(&self, key: &ApiKey, hash: &str) -> Result<(), StoreError>;

    /// The key whose secret hashes to `hash`, revoked or not.
    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError>;

    /// The key `id`, revoked or not.
    async fn get_key(&self, id: &str) -> Result<Option<ApiKey>, StoreError>;

    /// Every key of `tenant` (every key at all when `None`), oldest first, revoked ones too.
    async fn list_keys(&self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, StoreError>;

    /// Marks key `id` revoked at `at` (a revoked key stays revoked, at its first time);
    /// returns it. `NotFound` if absent.
    async fn revoke_key(&self, id: &str, at: Timestamp) -> Result<ApiKey, StoreError>;

    /// Whether any key exists (revoked ones count): a store without keys gets its first
    /// operator key when the server starts.
    async fn any_key(&self) -> Result<bool, StoreError>;
}
