//! Who is calling: API keys, the roles they carry, and the [`Principal`] a request acts as.
//!
//! A key is a random token (`sked_` and 48 hex digits: 192 bits) shown once, when it is
//! created; stores keep only its SHA-256 ([`key_hash`]). A fast hash is the right tool for a
//! high-entropy token: nobody can guess one, so there is nothing to slow down, and checking a
//! key costs a hash and a lookup, not a password-hashing round per request.
//!
//! Roles are ordered: `read` (GET), `write` (also changes to jobs and runs), `admin` (also the
//! keys of its own tenant), `operator` (also every tenant's keys and quotas). A principal acts
//! for exactly one tenant: everything it reads or changes is that tenant's, except what an
//! operator does to keys and quotas.

use crate::ids::TenantId;
use crate::timestamp::Timestamp;
use rand::Rng;
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// What every key starts with, so a leaked one is recognisable (secret scanners, logs).
pub const KEY_PREFIX: &str = "sked_";

/// Random bytes in a key (192 bits).
const KEY_BYTES: usize = 24;

/// What a key may do; each role may do everything the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Read jobs, runs and logs.
    Read,
    /// Also create, change, pause, trigger, cancel and delete jobs and runs.
    Write,
    /// Also create, list and revoke its own tenant's keys (up to `admin`).
    Admin,
    /// Also every tenant's keys and quotas.
    Operator,
}

impl Role {
    /// Every role, weakest first.
    pub const ALL: [Role; 4] = [Role::Read, Role::Write, Role::Admin, Role::Operator];

    /// The wire name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
            Role::Operator => "operator",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("role must be one of read, write, admin, operator, not {s:?}"))
    }
}

/// Who a request acts as: a tenant and a role (from a key, or from claims a gateway checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The tenant everything it does belongs to.
    pub tenant: TenantId,
    /// What it may do.
    pub role: Role,
    /// The key it authenticated with, if it used one.
    pub key_id: Option<String>,
}

impl Principal {
    /// A principal of `tenant` with `role`, not tied to a key (claims a gateway verified, the
    /// first start).
    pub fn new(tenant: TenantId, role: Role) -> Self {
        Principal {
            tenant,
            role,
            key_id: None,
        }
    }

    /// Whether it may do what `needed` may.
    pub fn may(&self, needed: Role) -> bool {
        self.role >= needed
    }
}

/// A stored key, without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// Public id (`key_<ULID>`), for listing and revoking.
    pub id: String,
    /// The tenant it acts for.
    pub tenant: TenantId,
    /// What it may do.
    pub role: Role,
    /// A label for people.
    pub name: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was revoked; a revoked key authenticates nothing.
    pub revoked_at: Option<Timestamp>,
}

/// A new random key: its secret (shown once) and the hash stores keep.
pub fn new_secret() -> (String, String) {
    let mut bytes = [0u8; KEY_BYTES];
    // ThreadRng is a CSPRNG (ChaCha) seeded from the operating system.
    rand::rng().fill(&mut bytes);
    let mut secret = String::with_capacity(KEY_PREFIX.len() + 2 * KEY_BYTES);
    secret.push_str(KEY_PREFIX);
    for b in bytes {
        secret.push_str(&format!("{b:02x}"));
    }
    let hash = key_hash(&secret);
    (secret, hash)
}

/// A new key id, made at `now`.
pub fn new_key_id(now: Timestamp) -> String {
    format!(
        "key_{}",
        ulid::Ulid::from_parts(now.timestamp_millis() as u64, rand::random())
    )
}

/// The SHA-256 of a key, in hex: what stores keep and look keys up by.
pub fn key_hash(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Whether `text` has the shape of a key (prefix, 48 lowercase hex digits): anything else is
/// refused without a lookup.
pub fn looks_like_key(text: &str) -> bool {
    text.strip_prefix(KEY_PREFIX).is_some_and(|rest| {
        rest.len() == 2 * KEY_BYTES && rest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_prefixed_and_stored_as_their_hash() {
        let (a, hash_a) = new_secret();
        let (b, _) = new_secret();
        assert_ne!(a, b);
        assert!(looks_like_key(&a), "{a}");
        assert_eq!(hash_a, key_hash(&a));
        assert_eq!(hash_a.len(), 64);
        assert!(!hash_a.contains(&a[KEY_PREFIX.len()..]));
        assert!(!looks_like_key("sked_short"));
        assert!(!looks_like_key(&a.to_uppercase()));
    }

    #[test]
    fn roles_are_ordered_and_read_back_by_name() {
        assert!(Role::Operator > Role::Admin && Role::Admin > Role::Write && Role::Write > Role::Read);
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>(), Ok(r));
        }
        assert!("root".parse::<Role>().is_err());
    }
}
