//! [`PgDb`]: the pool of connections every adapter of this crate shares, opened from a
//! `postgres://` URL (tokio-postgres through deadpool; TLS as the URL's `sslmode` and
//! `sslrootcert` say, see `conninfo` and `tls`), with the schema brought up to date by
//! the embedded migrations (`migrations/V<n>__<name>.sql`, refinery: applied in order on
//! connect, each once, recorded in `refinery_schema_history`). Several processes starting at
//! once take turns on a session advisory lock, so only the first applies them.

use crate::conninfo::{self, ConnInfoError};
use crate::tls::{TlsConnector, TlsError};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// The URL is not a PostgreSQL connection string (or its TLS settings are wrong).
    #[error("invalid database URL")]
    Url(#[source] ConnInfoError),
    /// The URL's TLS settings cannot be put to use (an unreadable CA file).
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The database did not answer or refused the connection (the cause, TLS handshake
    /// failures included, is the source).
    #[error("could not connect to PostgreSQL")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A migration failed (or the database holds a newer schema than this build knows).
    #[error("could not migrate the database: {0}")]
    Migrate(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A connection could not be had from the pool (database down, pool exhausted for longer
/// than the acquire timeout).
pub type PoolError = deadpool_postgres::PoolError;

/// How to open one more connection: the settings, and TLS as they ask.
#[derive(Clone)]
pub struct ConnectConfig {
    /// Host, port, user, database, `sslmode` as tokio-postgres knows it…
    pub(crate) pg: tokio_postgres::Config,
    /// The TLS connector (used unless `sslmode=disable`).
    pub(crate) tls: TlsConnector,
}

/// The shared pool. Cheap to clone (the pool is reference-counted).
#[derive(Clone)]
pub struct PgDb {
    pool: Pool,
    config: ConnectConfig,
    /// The tenant a receive on this pool last found alone in the queue (a hint only: see
    /// [`crate::queue`]'s `take_visible`).
    pub(crate) alone_in_queue: Arc<Mutex<Option<String>>>,
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
        let conninfo::ConnInfo { config: mut pg, tls } = conninfo::parse(url).map_err(ConnectError::Url)?;
        pg.connect_timeout(options.acquire_timeout);
        let config = ConnectConfig {
            pg,
            tls: TlsConnector::new(tls)?,
        };
        let manager = Manager::from_config(
            config.pg.clone(),
            config.tls.clone(),
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
        let db = PgDb {
            pool,
            config,
            alone_in_queue: Arc::default(),
        };
        db.migrate().await?;
        Ok(db)
    }

    async fn migrate(&self) -> Result<(), ConnectError> {
        let mut conn = self.get().await.map_err(|e| match e {
            // The database's own error, not deadpool's wrapper (which repeats it).
            deadpool_postgres::PoolError::Backend(e) => ConnectError::Connect(Box::new(e)),
            e => ConnectError::Connect(Box::new(e)),
        })?;
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
    pub fn config(&self) -> &ConnectConfig {
        &self.config
    }
}
