//! [`SqliteKeys`]: the [`KeyStore`] over the `api_keys` table (see the module header of
//! [`super`] for its layout). Reads use the reader pool; each write is one transaction.

use super::codec::{ms, ts};
use super::db::SqliteDb;
use super::error::TxError;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};
use sked_core::auth::ApiKey;
use sked_core::ids::TenantId;
use sked_core::ports::{KeyStore, StoreError};
use sked_core::timestamp::Timestamp;
use std::sync::Arc;

/// The columns [`key_from_row`] reads, in order.
const KEY_COLS: &str = "id, tenant, role, name, created_at, revoked_at";

/// API keys in the SQLite file.
#[derive(Clone)]
pub struct SqliteKeys {
    db: Arc<SqliteDb>,
}

impl SqliteKeys {
    /// The key store of `db`.
    pub fn new(db: Arc<SqliteDb>) -> Self {
        SqliteKeys { db }
    }
}

fn key_from_row(row: &Row<'_>) -> rusqlite::Result<ApiKey> {
    let role: String = row.get(2)?;
    Ok(ApiKey {
        id: row.get(0)?,
        tenant: TenantId(row.get(1)?),
        role: role
            .parse()
            .map_err(|e: String| rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, e.into()))?,
        name: row.get(3)?,
        created_at: ts(row.get(4)?),
        revoked_at: row.get::<_, Option<i64>>(5)?.map(ts),
    })
}

fn load(conn: &Connection, column: &str, value: &str) -> Result<Option<ApiKey>, TxError> {
    Ok(conn
        .prepare_cached(&format!("SELECT {KEY_COLS} FROM api_keys WHERE {column} = ?1"))?
        .query_row([value], key_from_row)
        .optional()?)
}

#[async_trait]
impl KeyStore for SqliteKeys {
    async fn insert_key(&self, key: &ApiKey, hash: &str) -> Result<(), StoreError> {
        let (key, hash) = (key.clone(), hash.to_string());
        self.db
            .write(move |conn| {
                let inserted = conn
                    .prepare_cached(
                        "INSERT INTO api_keys (id, hash, tenant, role, name, created_at, revoked_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL) ON CONFLICT DO NOTHING",
                    )?
                    .execute(params![
                        key.id,
                        hash,
                        key.tenant.as_str(),
                        key.role.as_str(),
                        key.name,
                        ms(key.created_at)
                    ])?;
                if inserted == 0 {
                    return Err(TxError::Store(StoreError::Conflict(format!("key {} exists", key.id))));
                }
                Ok(())
            })
            .await
            .map_err(TxError::into_store)
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        let hash = hash.to_string();
        self.db
            .read(move |conn| load(conn, "hash", &hash))
            .await
            .map_err(TxError::into_store)
    }

    async fn get_key(&self, id: &str) -> Result<Option<ApiKey>, StoreError> {
        let id = id.to_string();
        self.db
            .read(move |conn| load(conn, "id", &id))
            .await
            .map_err(TxError::into_store)
    }

    async fn list_keys(&self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, StoreError> {
        let tenant = tenant.map(|t| t.0.clone());
        self.db
            .read(move |conn| {
                let sql =
                    format!("SELECT {KEY_COLS} FROM api_keys WHERE ?1 IS NULL OR tenant = ?1 ORDER BY created_at, id");
                let keys = conn
                    .prepare_cached(&sql)?
                    .query_map([tenant], key_from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(keys)
            })
            .await
            .map_err(TxError::into_store)
    }

    async fn revoke_key(&self, id: &str, at: Timestamp) -> Result<ApiKey, StoreError> {
        let id = id.to_string();
        self.db
            .write(move |conn| {
                conn.prepare_cached("UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?2) WHERE id = ?1")?
                    .execute(params![id, ms(at)])?;
                load(conn, "id", &id)?.ok_or(TxError::Store(StoreError::NotFound))
            })
            .await
            .map_err(TxError::into_store)
    }

    async fn any_key(&self) -> Result<bool, StoreError> {
        self.db
            .read(|conn| {
                Ok(conn
                    .prepare_cached("SELECT EXISTS (SELECT 1 FROM api_keys)")?
                    .query_row([], |r| r.get::<_, bool>(0))?)
            })
            .await
            .map_err(TxError::into_store)
    }
}
