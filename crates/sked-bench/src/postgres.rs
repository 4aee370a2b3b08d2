//! The PostgreSQL cluster of a `--backend postgres` run: one private server for the whole
//! run, on a free 127.0.0.1 port, in the run's temporary directory, with durability on
//! (`scripts/postgres-server.sh`: `fsync=on`, `synchronous_commit=on`; full-page writes and
//! everything else at PostgreSQL's defaults), and a fresh database per case.
//!
//! It owns the server process only: it stops it (fast shutdown) when dropped, and the run's
//! temporary directory, which holds the cluster, goes after it. It must not borrow the test
//! fixture's settings (`sked_postgres::testing` runs without durability): figures measured
//! there would not be a user's.

use anyhow::Context as _;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The repository's `scripts/` directory (this crate lives in `crates/sked-bench`).
fn scripts() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts")
}

/// Server options from `SKED_BENCH_PG_OPTIONS` (`name=value` pairs separated by spaces), each
/// passed as `-c name=value`: for looking inside a run (`shared_preload_libraries=pg_stat_statements`,
/// `log_min_duration_statement=0`), never for the figures BENCHMARKS.md reports.
fn extra_options() -> Vec<String> {
    std::env::var("SKED_BENCH_PG_OPTIONS")
        .unwrap_or_default()
        .split_whitespace()
        .flat_map(|option| ["-c".to_string(), option.to_string()])
        .collect()
}

/// A running cluster; stopped on drop.
pub struct Cluster {
    /// The port on 127.0.0.1 it listens on.
    port: u16,
    /// PostgreSQL's server binaries (`scripts/postgres-env.sh`).
    bin: PathBuf,
    /// The server log.
    log: PathBuf,
    /// `scripts/postgres-server.sh`, which execs `postgres` (so this is the server itself).
    server: Mutex<Option<Child>>,
    /// Databases created so far, in order (for the abort counts at the end of each case).
    databases: Mutex<Vec<String>>,
}

/// What [`Cluster::settings`] reads back from the server.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `SHOW server_version`.
    pub version: String,
    /// `SHOW shared_buffers`.
    pub shared_buffers: String,
    /// `SHOW synchronous_commit`.
    pub synchronous_commit: String,
    /// `SHOW fsync`.
    pub fsync: String,
    /// `SHOW full_page_writes`.
    pub full_page_writes: String,
    /// `SHOW max_connections`.
    pub max_connections: String,
}

/// Commits and rollbacks of one database (`pg_stat_database`).
#[derive(Debug, Clone)]
pub struct Aborts {
    /// The database.
    pub database: String,
    /// `xact_commit`.
    pub commits: i64,
    /// `xact_rollback`: transactions that ended in ROLLBACK, the store's serialization
    /// failures (retried) among them.
    pub rollbacks: i64,
}

impl Cluster {
    /// Creates the cluster in `dir/postgres` (`dir` is made traversable for the `postgres`
    /// user, who runs the server when this process is root), starts it and waits until it
    /// accepts connections.
    pub fn start(dir: &Path) -> anyhow::Result<Cluster> {
        let bin = pg_bin()?;
        set_traversable(dir)?;
        let data = dir.join("postgres");
        let log = dir.join("postgres.log");
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log_file = std::fs::File::create(&log)?;
        let child = Command::new("bash")
            .arg(scripts().join("postgres-server.sh"))
            .arg(&data)
            .arg(port.to_string())
            .args(extra_options())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .context("starting scripts/postgres-server.sh")?;
        let cluster = Cluster {
            port,
            bin,
            log,
            server: Mutex::new(Some(child)),
            databases: Mutex::new(Vec::new()),
        };
        cluster.wait_ready()?;
        Ok(cluster)
    }

    fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(child) = self.server.lock().unwrap().as_mut()
                && let Some(status) = child.try_wait()?
            {
                anyhow::bail!("PostgreSQL exited ({status}); log in {}", self.log.display());
            }
            let open =
                TcpStream::connect_timeout(&([127, 0, 0, 1], self.port).into(), Duration::from_millis(200)).is_ok();
            if open && self.tool("pg_isready").args(["-q", "-t", "2"]).status()?.success() {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "PostgreSQL did not accept connections in 120 s; log in {}",
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A client tool of the cluster's bin dir, pointed at the server as user `sked`.
    fn tool(&self, name: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(name));
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "sked"]);
        cmd
    }

    /// The URL of database `name` (user `sked`, trust authentication, 127.0.0.1 only).
    pub fn url(&self, name: &str) -> String {
        format!("postgres://sked@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates a new, empty database (`createdb`) and returns its URL.
    pub fn fresh_database(&self) -> anyhow::Result<String> {
        let mut databases = self.databases.lock().unwrap();
        let name = format!("case{}", databases.len() + 1);
        let status = self.tool("createdb").arg(&name).status().context("running createdb")?;
        anyhow::ensure!(status.success(), "createdb {name} failed: {status}");
        databases.push(name.clone());
        Ok(self.url(&name))
    }

    /// How many databases [`Self::fresh_database`] has created.
    pub fn databases(&self) -> usize {
        self.databases.lock().unwrap().len()
    }

    /// One `SELECT` through `psql` (unaligned, no headers): its rows, fields split on `|`.
    fn psql(&self, sql: &str) -> anyhow::Result<Vec<Vec<String>>> {
        let out = self
            .tool("psql")
            .args(["-d", "postgres", "-X", "-A", "-t", "-c", sql])
            .output()
            .context("running psql")?;
        anyhow::ensure!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.split('|').map(str::to_string).collect())
            .collect())
    }

    /// The server's version and the settings that decide its write cost.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let row = self
            .psql(
                "SELECT current_setting('server_version'), current_setting('shared_buffers'), \
                 current_setting('synchronous_commit'), current_setting('fsync'), \
                 current_setting('full_page_writes'), current_setting('max_connections')",
            )?
            .pop()
            .context("no settings")?;
        let field = |i: usize| row.get(i).cloned().unwrap_or_default();
        Ok(Settings {
            version: field(0),
            shared_buffers: field(1),
            synchronous_commit: field(2),
            fsync: field(3),
            full_page_writes: field(4),
            max_connections: field(5),
        })
    }

    /// Commits and rollbacks of the databases created after the first `skip`. Backends
    /// report their counts when idle for a while or when they end, so read this after the
    /// case's connections are closed (a later reading may still add a few).
    pub fn aborts(&self, skip: usize) -> anyhow::Result<Vec<Aborts>> {
        let names: Vec<String> = self.databases.lock().unwrap().iter().skip(skip).cloned().collect();
        let mut out = Vec::new();
        for name in names {
            let row = self
                .psql(&format!(
                    "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = '{name}'"
                ))?
                .pop()
                .context("no pg_stat_database row")?;
            let num = |i: usize| row.get(i).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
            out.push(Aborts {
                database: name,
                commits: num(0),
                rollbacks: num(1),
            });
        }
        Ok(out)
    }
}

impl Drop for Cluster {
    /// Fast shutdown (SIGINT: open connections are closed), SIGKILL after 30 s.
    fn drop(&mut self) {
        let Some(mut child) = self.server.lock().unwrap().take() else {
            return;
        };
        let _ = Command::new("kill").arg("-INT").arg(child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// PostgreSQL's server binaries, from `scripts/postgres-env.sh` (which installs them if
/// missing).
fn pg_bin() -> anyhow::Result<PathBuf> {
    let out = Command::new("bash")
        .arg(scripts().join("postgres-env.sh"))
        .stderr(Stdio::inherit())
        .output()
        .context("running scripts/postgres-env.sh")?;
    anyhow::ensure!(out.status.success(), "scripts/postgres-env.sh failed: {}", out.status);
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Lets other users pass through `dir` (a temporary directory is private, 0700): the server
/// runs as `postgres` when the bench runs as root.
fn set_traversable(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut perms = std::fs::metadata(dir)?.permissions();
    perms.set_mode(perms.mode() | 0o711);
    std::fs::set_permissions(dir, perms).with_context(|| format!("chmod {}", dir.display()))
}
