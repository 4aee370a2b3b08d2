//! [`PgKeys`]: the [`KeyStore`] over the `api_keys` table (one row per key, found by the
//! SHA-256 of its secret; the secret itself is never stored). Reads are plain queries on a
//! pooled connection; each write is one transaction.

use crate::codec::{bad, get, ms, ts};
use crate::db::PgDb;
use crate::store::read_rows;
use crate::tx::{Tx, TxError};
use async_trait::async_trait;
use sked_core::auth::ApiKey;
use sked_core::ids::TenantId;
use sked_core::ports::{KeyStore, StoreError};
use sked_core::timestamp::Timestamp;
use tokio_postgres::Row;

/// The columns [`key_from_row`] reads, in order.
const KEY_COLS: &str = "id, tenant, role, name, created_at, revoked_at";

/// API keys in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgKeys {
    db: PgDb,
}

impl PgKeys {
    /// The key store of `db`.
    pub fn new(db: PgDb) -> Self {
        PgKeys { db }
    }

    /// The key whose `column` is `value`, if any.
    async fn load(&self, column: &str, value: &str) -> Result<Option<ApiKey>, StoreError> {
        let sql = format!("SELECT {KEY_COLS} FROM api_keys WHERE {column} = $1");
        let rows = read_rows(&self.db, &sql, &[&value]).await?;
        rows.first().map(key_from_row).transpose().map_err(TxError::into_store)
    }
}

fn key_from_row(row: &Row) -> Result<ApiKey, TxError> {
    let role: &str = get(row, 2)?;
    Ok(ApiKey {
        id: get(row, 0)?,
        tenant: TenantId(get(row, 1)?),
        role: role.parse().map_err(bad)?,
        name: get(row, 3)?,
        created_at: ts(get(row, 4)?),
        revoked_at: get::<Option<i64>>(row, 5)?.map(ts),
    })
}

fn load_in(tx: &mut Tx, id: &str) -> Result<Option<ApiKey>, TxError> {
    let row = tx.query_opt(&format!("SELECT {KEY_COLS} FROM api_keys WHERE id = $1"), &[&id])?;
    row.as_ref().map(key_from_row).transpose()
}

#[async_trait]
impl KeyStore for PgKeys {
    async fn insert_key(&self, key: &ApiKey, hash: &str) -> Result<(), StoreError> {
        let (key, hash) = (key.clone(), hash.to_string());
        self.db
            .transaction(move |tx| {
                // No conflict target: a taken id or a taken hash alike inserts nothing.
                let inserted = tx.execute(
                    "INSERT INTO api_keys (id, hash, tenant, role, name, created_at, revoked_at)
                     VALUES ($1, $2, $3, $4, $5, $6, NULL) ON CONFLICT DO NOTHING",
                    &[
                        &key.id,
                        &hash,
                        &key.tenant.as_str(),
                        &key.role.as_str(),
                        &key.name,
                        &ms(key.created_at),
                    ],
                )?;
                if inserted == 0 {
                    return Err(TxError::Store(StoreError::Conflict(format!("key {} exists", key.id))));
                }
                Ok(())
            })
            .await
            .map_err(TxError::into_store)
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        self.load("hash", hash).await
    }

    async fn get_key(&self, id: &str) -> Result<Option<ApiKey>, StoreError> {
        self.load("id", id).await
    }

    async fn list_keys(&self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, StoreError> {
        let tenant = tenant.map(|t| t.as_str());
        let rows = read_rows(
            &self.db,
            &format!(
                "SELECT {KEY_COLS} FROM api_keys WHERE $1::text IS NULL OR tenant = $1::text ORDER BY created_at, id"
            ),
            &[&tenant],
        )
        .await?;
        rows.iter()
            .map(key_from_row)
            .collect::<Result<_, _>>()
            .map_err(TxError::into_store)
    }

    async fn revoke_key(&self, id: &str, at: Timestamp) -> Result<ApiKey, StoreError> {
        let id = id.to_string();
        self.db
            .transaction(move |tx| {
                tx.execute(
                    "UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1",
                    &[&id, &ms(at)],
                )?;
                load_in(tx, &id)?.ok_or(TxError::Store(StoreError::NotFound))
            })
            .await
            .map_err(TxError::into_store)
    }

    async fn any_key(&self) -> Result<bool, StoreError> {
        let rows = read_rows(&self.db, "SELECT EXISTS (SELECT 1 FROM api_keys)", &[]).await?;
        let row = rows.first().ok_or_else(|| bad("EXISTS answered no row").into_store())?;
        get(row, 0).map_err(TxError::into_store)
    }
}
