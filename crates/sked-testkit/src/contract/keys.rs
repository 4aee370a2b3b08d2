//! The key store contract: what every [`KeyStore`] must do, one `pub async fn` per case; run
//! them all with [`keys_contract!`](crate::keys_contract).

pub use sked_core::ports::KeyStore;

use super::fixtures::t0;
use sked_core::auth::{ApiKey, Role};
use sked_core::ids::TenantId;
use sked_core::ports::StoreError;
use std::sync::Arc;

fn key(id: &str, tenant: &str, role: Role, secs: i64) -> ApiKey {
    ApiKey {
        id: id.into(),
        tenant: TenantId::from(tenant),
        role,
        name: format!("{id} of {tenant}"),
        created_at: t0() + chrono::Duration::seconds(secs),
        revoked_at: None,
    }
}

/// A key reads back, by its hash and by its id, as it was stored.
pub async fn insert_key_reads_back_by_hash_and_id(store: Arc<dyn KeyStore>) {
    assert!(!store.any_key().await.unwrap());
    let k = key("key_a", "acme", Role::Write, 0);
    store.insert_key(&k, "hash-a").await.unwrap();
    assert!(store.any_key().await.unwrap());
    assert_eq!(store.key_by_hash("hash-a").await.unwrap(), Some(k.clone()));
    assert_eq!(store.get_key("key_a").await.unwrap(), Some(k));
    assert_eq!(store.key_by_hash("hash-b").await.unwrap(), None);
    assert_eq!(store.get_key("key_b").await.unwrap(), None);
}

/// A second key with the same id or the same hash is a conflict, and changes nothing.
pub async fn insert_key_refuses_a_taken_id_or_hash(store: Arc<dyn KeyStore>) {
    let k = key("key_a", "acme", Role::Read, 0);
    store.insert_key(&k, "hash-a").await.unwrap();
    let same_id = key("key_a", "other", Role::Admin, 1);
    assert!(matches!(
        store.insert_key(&same_id, "hash-b").await,
        Err(StoreError::Conflict(_))
    ));
    let same_hash = key("key_b", "other", Role::Admin, 1);
    assert!(matches!(
        store.insert_key(&same_hash, "hash-a").await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.list_keys(None).await.unwrap(), vec![k]);
}

/// Keys list oldest first, per tenant or all of them.
pub async fn list_keys_per_tenant_oldest_first(store: Arc<dyn KeyStore>) {
    let a2 = key("key_a2", "acme", Role::Read, 2);
    let a1 = key("key_a1", "acme", Role::Admin, 1);
    let b = key("key_b", "beta", Role::Write, 0);
    for (k, h) in [(&a2, "h1"), (&a1, "h2"), (&b, "h3")] {
        store.insert_key(k, h).await.unwrap();
    }
    let acme = store.list_keys(Some(&TenantId::from("acme"))).await.unwrap();
    assert_eq!(acme, vec![a1.clone(), a2.clone()]);
    assert_eq!(store.list_keys(None).await.unwrap(), vec![b, a1, a2]);
    assert!(store.list_keys(Some(&TenantId::from("none"))).await.unwrap().is_empty());
}

/// A revoked key stays, marked at its first revocation; an unknown one is `NotFound`.
pub async fn revoke_key_marks_it_once(store: Arc<dyn KeyStore>) {
    store
        .insert_key(&key("key_a", "acme", Role::Write, 0), "hash-a")
        .await
        .unwrap();
    let at = t0() + chrono::Duration::seconds(10);
    let revoked = store.revoke_key("key_a", at).await.unwrap();
    assert_eq!(revoked.revoked_at, Some(at));
    let again = store
        .revoke_key("key_a", at + chrono::Duration::seconds(5))
        .await
        .unwrap();
    assert_eq!(again.revoked_at, Some(at), "the first revocation stands");
    assert_eq!(store.key_by_hash("hash-a").await.unwrap().unwrap().revoked_at, Some(at));
    assert!(matches!(store.revoke_key("key_x", at).await, Err(StoreError::NotFound)));
}
