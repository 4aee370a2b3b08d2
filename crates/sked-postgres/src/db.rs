//! [`PgDb`]: the pool of connections every adapter of this crate shares, opened from a
//! `postgres://` URL (tokio-postgres through deadpool), with the schema brought up to date by
//! the embedded migrations (`migrations/V<n>__<name>.sql`, refinery: applied in order on
//! connect, each once, recorded in `refinery_schema_history`). Several processes starting at
//! once take turns on a session advisory lock, so only the first applies them.

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use std::time::Duration;
use tokio_postgres::NoTls;

mod embedded {
    refinery::embed_migrations!("./migrations");
}

/// The advisory lock key migrations are applied under ("sked" in ASCII).
const MIGRATION_LOCK: i64 = 0x736B_6564;

/// How to open the pool.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Most connections this process holds.
    pub max_connections: usize,
    /// How long a caller waits for a free connection, or for the database to accept a new
    /// one, before its call fails (the API answers 503 then).
    pub acquire_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
        }
    }
}

/// Opening the database failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The URL is not a PostgreSQL connection string.
    #[error("invalid database URL: {0}")]
    Url(#[source] tokio_postgres::Error),
    /// The database did not answer or refused the connection.
    #[error("could not connect to PostgreSQL: {0}")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A migration failed (or the database holds a newer schema than this build knows).
    #[error("could not migrate the database: {0}")]
    Migrate(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A connection could not be had from the pool (database down, pool exhausted for longer
/// than the acquire timeout).
pub type PoolError = deadpool_postgres::PoolError;

/// The shared pool. Cheap to clone (the pool is reference-counted).
#[derive(Clone)]
pub struct PgDb {
    pool: Pool,
    config: tokio_postgres::Config,
}

impl std::fmt::Debug for PgDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config may hold a password: only the pool's status is shown.
        f.debug_struct("PgDb").field("pool", &self.pool.status()).finish()
    }
}

impl PgDb {
    /// Connects to `url` and applies the migrations this build has and the database has not.
    pub async fn connect(url: &str, options: &PgOptions) -> Result<PgDb, ConnectError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(ConnectError::Url)?;
        config.connect_timeout(options.acquire_timeout);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                // A connection the server closed (a restart) reports itself closed and is
                // dropped rather than handed out.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections)
            .wait_timeout(Some(options.acquire_timeout))
            .create_timeout(Some(options.acquire_timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| ConnectError::Connect(Box::new(e)))?;
        let db = PgDb { pool, config };
        db.migrate().await?;
        Ok(db)
    }

    async fn migrate(&self) -> Result<(), ConnectError> {
        let mut conn = self.get().await.map_err(|e| ConnectError::Connect(Box::new(e)))?;
        let migrate_err = |e: tokio_postgres::Error| ConnectError::Migrate(Box::new(e));
        conn.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(migrate_err)?;
        let client: &mut tokio_postgres::Client = &mut conn;
        let applied = embedded::migrations::runner()
            .run_async(client)
            .await
            .map_err(|e| ConnectError::Migrate(Box::new(e)));
        conn.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(migrate_err)?;
        applied.map(drop)
    }

    /// A connection from the pool.
    pub async fn get(&self) -> Result<Object, PoolError> {
        self.pool.get().await
    }

    /// The connection settings, for a dedicated connection outside the pool (`LISTEN`).
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }
}
