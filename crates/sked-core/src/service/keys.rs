//! [`Keys`]: API keys — checking a bearer secret, creating, listing and revoking keys, and the
//! first operator key of a store that has none. Who may manage which keys is decided here:
//! an `admin` manages its own tenant's keys up to `admin`; an `operator` manages every
//! tenant's keys, operators included. Another tenant's key is, to an admin, absent.
//!
//! Checking a key is on every request's path, so a live key, once read from the store, is
//! remembered for [`KEY_CHECK_TTL`]: a request costs a SHA-256 and a map lookup, not a store
//! read. Only live keys are remembered (a stream of unknown keys cannot grow the map), and a
//! key revoked through this service is forgotten at once, so it is refused from the next
//! request. A key revoked by another process on the same store (a second API server) is
//! refused within [`KEY_CHECK_TTL`].

use crate::auth::{self, ApiKey, Principal, Role};
use crate::duration::Dur;
use crate::error::CoreError;
use crate::ids::{self, TenantId};
use crate::ports::{Clock, KeyStore, StoreError};
use crate::timestamp::{Timestamp, trunc_ms};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How long a live key, once read from the store, is taken as live without reading it again.
pub const KEY_CHECK_TTL: Dur = Dur::secs(1);

/// Longest key name.
pub const MAX_KEY_NAME: usize = 128;

/// What `POST /v1/keys` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKey {
    /// The tenant the key acts for.
    pub tenant: TenantId,
    /// What it may do.
    pub role: Role,
    /// A label for people.
    pub name: String,
}

/// A key just created: the only time its secret is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedKey {
    /// The stored key.
    pub key: ApiKey,
    /// The secret to hand to the caller, once.
    pub secret: String,
}

/// The key service. Clones share the keys remembered as live.
#[derive(Clone)]
pub struct Keys {
    store: Arc<dyn KeyStore>,
    clock: Arc<dyn Clock>,
    /// Live keys by the hash of their secret: the principal and when the store was read.
    checked: Arc<Mutex<HashMap<String, (Principal, Timestamp)>>>,
}

impl Keys {
    /// Keys kept in `store`, stamped by `clock`.
    pub fn new(store: Arc<dyn KeyStore>, clock: Arc<dyn Clock>) -> Self {
        Keys {
            store,
            clock,
            checked: Arc::default(),
        }
    }

    fn checked(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Principal, Timestamp)>> {
        self.checked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The principal a bearer `secret` stands for. `Unauthenticated` for anything but a live
    /// key (malformed, unknown, revoked); the answer does not say which.
    pub async fn authenticate(&self, secret: &str) -> Result<Principal, CoreError> {
        let refused = || CoreError::Unauthenticated("unknown or revoked API key".into());
        if !auth::looks_like_key(secret) {
            return Err(refused());
        }
        let hash = auth::key_hash(secret);
        let now = self.clock.now();
        if let Some((principal, read_at)) = self.checked().get(&hash)
            && now >= *read_at
            && now - *read_at < KEY_CHECK_TTL.to_chrono()
        {
            return Ok(principal.clone());
        }
        match self.store.key_by_hash(&hash).await? {
            Some(key) if key.revoked_at.is_none() => {
                let principal = Principal {
                    tenant: key.tenant,
                    role: key.role,
                    key_id: Some(key.id),
                };
                self.checked().insert(hash, (principal.clone(), now));
                Ok(principal)
            }
            _ => {
                self.checked().remove(&hash);
                Err(refused())
            }
        }
    }

    /// Creates a key for `new.tenant` as `caller` asks.
    pub async fn create(&self, caller: &Principal, new: NewKey) -> Result<CreatedKey, CoreError> {
        require(caller, Role::Admin, "managing keys needs an admin or operator key")?;
        if !ids::is_valid_id(new.tenant.as_str()) {
            return Err(CoreError::invalid("tenant", "tenant must match [A-Za-z0-9_.-]{1,128}"));
        }
        let name = new.name.trim();
        if name.is_empty() || name.chars().count() > MAX_KEY_NAME || name.chars().any(char::is_control) {
            return Err(CoreError::invalid(
                "name",
                format!("name must be 1 to {MAX_KEY_NAME} printable characters"),
            ));
        }
        if new.tenant != caller.tenant {
            require(
                caller,
                Role::Operator,
                "only an operator key creates keys for another tenant",
            )?;
        }
        if new.role == Role::Operator {
            require(caller, Role::Operator, "only an operator key creates operator keys")?;
        }
        let now = trunc_ms(self.clock.now());
        let (secret, hash) = auth::new_secret();
        let key = ApiKey {
            id: auth::new_key_id(now),
            tenant: new.tenant,
            role: new.role,
            name: name.to_string(),
            created_at: now,
            revoked_at: None,
        };
        self.store.insert_key(&key, &hash).await?;
        tracing::info!(key_id = %key.id, tenant = %key.tenant, role = %key.role, by = caller.key_id.as_deref().unwrap_or("-"), "API key created");
        Ok(CreatedKey { key, secret })
    }

    /// The keys `caller` may see: its tenant's, or every tenant's for an operator.
    pub async fn list(&self, caller: &Principal) -> Result<Vec<ApiKey>, CoreError> {
        require(caller, Role::Admin, "listing keys needs an admin or operator key")?;
        let tenant = (!caller.may(Role::Operator)).then_some(&caller.tenant);
        Ok(self.store.list_keys(tenant).await?)
    }

    /// Revokes key `id`: refused from then on. Another tenant's key is `NotFound` to an admin.
    pub async fn revoke(&self, caller: &Principal, id: &str) -> Result<ApiKey, CoreError> {
        require(caller, Role::Admin, "revoking keys needs an admin or operator key")?;
        let not_found = || CoreError::NotFound(format!("key {id}"));
        let key = self.store.get_key(id).await?.ok_or_else(not_found)?;
        if key.tenant != caller.tenant && !caller.may(Role::Operator) {
            return Err(not_found());
        }
        if key.role == Role::Operator {
            require(caller, Role::Operator, "only an operator key revokes operator keys")?;
        }
        let revoked = match self.store.revoke_key(id, trunc_ms(self.clock.now())).await {
            Err(StoreError::NotFound) => return Err(not_found()),
            other => other?,
        };
        self.checked()
            .retain(|_, (principal, _)| principal.key_id.as_deref() != Some(revoked.id.as_str()));
        tracing::info!(key_id = %revoked.id, tenant = %revoked.tenant, by = caller.key_id.as_deref().unwrap_or("-"), "API key revoked");
        Ok(revoked)
    }

    /// An operator key chosen outside sked (a deployment's Secret, `SKED_OPERATOR_KEY`) made
    /// known to the store: stored for `tenant` unless a key with that secret exists. Servers
    /// that start at once all adopt it, one of them stores it; a revoked one stays revoked.
    /// The secret must look like a key sked makes (`sked_` and 48 hex digits): `sked keys
    /// create` or `openssl rand -hex 24` make one.
    pub async fn adopt_operator_key(&self, tenant: &TenantId, secret: &str) -> Result<Adopted, CoreError> {
        if !auth::looks_like_key(secret) {
            return Err(CoreError::invalid(
                "SKED_OPERATOR_KEY",
                format!("an operator key is {}<48 hex digits>", auth::KEY_PREFIX),
            ));
        }
        let hash = auth::key_hash(secret);
        let known = |key: ApiKey| match key.revoked_at {
            Some(_) => Adopted::Revoked(key.id),
            None => Adopted::Known(key.id),
        };
        if let Some(key) = self.store.key_by_hash(&hash).await? {
            return Ok(known(key));
        }
        let now = trunc_ms(self.clock.now());
        let key = ApiKey {
            id: auth::new_key_id(now),
            tenant: tenant.clone(),
            role: Role::Operator,
            name: "operator key from SKED_OPERATOR_KEY".into(),
            created_at: now,
            revoked_at: None,
        };
        match self.store.insert_key(&key, &hash).await {
            Ok(()) => {
                tracing::info!(key_id = %key.id, tenant = %key.tenant, "operator key from SKED_OPERATOR_KEY stored");
                Ok(Adopted::Stored(key.id))
            }
            // Another server stored it first.
            Err(StoreError::Conflict(_)) => match self.store.key_by_hash(&hash).await? {
                Some(key) => Ok(known(key)),
                None => Err(CoreError::Store(StoreError::Conflict("key id taken".into()))),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// The first start: when the store holds no key at all, creates an operator key for
    /// `tenant` and returns it (its secret is for the caller to hand over, never to log).
    pub async fn bootstrap(&self, tenant: &TenantId) -> Result<Option<CreatedKey>, CoreError> {
        if self.store.any_key().await? {
            return Ok(None);
        }
        let first = Principal::new(tenant.clone(), Role::Operator);
        let new = NewKey {
            tenant: tenant.clone(),
            role: Role::Operator,
            name: "first operator key".into(),
        };
        self.create(&first, new).await.map(Some)
    }
}

/// What [`Keys::adopt_operator_key`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adopted {
    /// The key was stored now (its id).
    Stored(String),
    /// The store already held it (its id), e.g. from another server's start.
    Known(String),
    /// The store holds it revoked: it stays revoked and authenticates nothing.
    Revoked(String),
}

/// `PermissionDenied` with `why` unless `caller` may do what `needed` may.
pub fn require(caller: &Principal, needed: Role, why: &str) -> Result<(), CoreError> {
    if caller.may(needed) {
        Ok(())
    } else {
        Err(CoreError::PermissionDenied(format!(
            "{why} (this key is {})",
            caller.role
        )))
    }
}
