//! Test fixture (feature `testing`): a private PostgreSQL cluster per test binary on a free
//! 127.0.0.1 port, and a fresh database per test. Used by this crate's tests and by the
//! end-to-end tests of the `sked` binary.
//!
//! The server binaries come from Debian's `postgresql` package (installed by
//! `scripts/postgres-env.sh` if missing); `scripts/postgres-server.sh` creates the cluster in a
//! temporary directory and serves it. As with the moto fixture, a small shell wrapper stops
//! the server (fast shutdown) when its stdin closes — when the fixture is dropped or the test
//! process exits, however it exits — and then removes the cluster's directory (a process's
//! `static` fixture is never dropped, so the wrapper is what cleans up). [`PgServer::stop`]
//! and [`PgServer::start_again`] restart it on the same port and data, for tests of a
//! database restart.
//!
//! [`PgServer::start_with_tls`] serves TLS too (`ssl=on`) with a certificate and key the test
//! made; the key file is the server user's and private (`0600`), as PostgreSQL demands.
//!
//! Durability is off (`fsync`, `synchronous_commit`, full-page writes) and the WAL kept small:
//! the tests stop the server only cleanly, never crash the machine under it, so nothing they
//! check depends on it, and each test's fresh database costs no flush. Benchmarks run their
//! own cluster with durability on.

use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// `postgres -c` settings of the tests' clusters (see the module's header).
const TEST_SETTINGS: &str = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c wal_level=minimal \
     -c max_wal_senders=0 -c max_wal_size=64MB -c min_wal_size=32MB -c shared_buffers=32MB";

/// The repository root (this crate lives in `crates/sked-postgres`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

/// A running private cluster; stopped on drop (its directory is removed with it).
pub struct PgServer {
    /// `127.0.0.1`'s port it listens on.
    pub port: u16,
    /// `postgres -c` settings: [`TEST_SETTINGS`] and any of this server's own.
    settings: String,
    dir: tempdir::Dir,
    running: Mutex<Option<(Child, Option<ChildStdin>)>>,
}

mod tempdir {
    //! A directory under the system's temporary directory, removed on drop.
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new(name: &str) -> Dir {
            let path = std::env::temp_dir().join(name);
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("create the cluster's directory");
            Dir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl PgServer {
    /// Creates a cluster in a fresh directory, starts it on a free port and waits until it
    /// accepts connections.
    pub fn start() -> PgServer {
        let server = PgServer::new();
        server.start_again();
        server
    }

    /// As [`PgServer::start`], serving TLS as well as plain connections, with `tls`'s
    /// certificate and key.
    pub fn start_with_tls(tls: &ServerTls) -> PgServer {
        let mut server = PgServer::new();
        let dir = server.dir.path().join("tls");
        std::fs::create_dir_all(&dir).expect("create the TLS directory");
        let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
        std::fs::write(&cert, &tls.cert_pem).expect("write the server certificate");
        write_private_key(&key, &tls.key_pem);
        server.settings = format!(
            "{TEST_SETTINGS} -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
            cert.display(),
            key.display()
        );
        if let Some(client_ca) = &tls.client_ca_pem {
            let file = dir.join("client-ca.crt");
            std::fs::write(&file, client_ca).expect("write the client CA");
            server.settings.push_str(&format!(" -c ssl_ca_file={}", file.display()));
        }
        server.start_again();
        server
    }

    fn new() -> PgServer {
        let port = free_port();
        PgServer {
            port,
            settings: TEST_SETTINGS.to_owned(),
            dir: tempdir::Dir::new(&format!("sked-pg-{}-{port}", std::process::id())),
            running: Mutex::new(None),
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// Starts the server again on the same port and data (after [`PgServer::stop`]); waits
    /// until it accepts connections.
    pub fn start_again(&self) {
        let mut running = self.running.lock().unwrap();
        assert!(running.is_none(), "the server is already running");
        // `$0` server script, `$1` data dir, `$2` port, `$3` log file, `$4` the directory to
        // remove at the end. A line `keep` on stdin stops the server for a restart; the end
        // of stdin (the fixture dropped, the process gone) stops it and removes `$4`.
        let script = r#"
            "$0" "$1" "$2" $TEST_SETTINGS >>"$3" 2>&1 </dev/null &
            pid=$!
            line=""
            read -r line || true
            kill -INT "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            [ "$line" = keep ] || rm -rf "$4"
            exit 0
        "#;
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .arg(repo_root().join("scripts/postgres-server.sh"))
            .arg(self.data_dir())
            .arg(self.port.to_string())
            .arg(self.log_path())
            .arg(self.dir.path())
            .env("TEST_SETTINGS", &self.settings)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start scripts/postgres-server.sh");
        let stdin = child.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.accepts_connections() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("PostgreSQL exited ({status}); log in {}", self.log_path().display());
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not accept connections in 120 s; log in {}",
                self.log_path().display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        *running = Some((child, stdin));
    }

    /// Stops the server (fast shutdown: open connections are closed), keeping its data for
    /// [`PgServer::start_again`], and waits until it has exited.
    pub fn stop(&self) {
        if let Some((mut child, stdin)) = self.running.lock().unwrap().take() {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(b"keep\n");
            }
            let _ = child.wait();
        }
    }

    /// Whether the server completes a startup handshake (`pg_isready`'s test: the port
    /// accepts a connection and the server is not starting up or shutting down).
    fn accepts_connections(&self) -> bool {
        let Some(bin) = pg_bin() else { return false };
        if TcpStream::connect_timeout(&([127, 0, 0, 1], self.port).into(), Duration::from_millis(200)).is_err() {
            return false;
        }
        Command::new(bin.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string(), "-t", "2"])
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The URL of database `name` on this server (user `sked`, trust authentication).
    pub fn url(&self, name: &str) -> String {
        format!("postgres://sked@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates a new, empty, uniquely named database and returns its URL.
    pub fn fresh_database(&self) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!("t{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let bin = pg_bin().expect("PostgreSQL binaries");
        let status = Command::new(bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "sked", &name])
            .status()
            .expect("run createdb");
        assert!(status.success(), "createdb {name} failed: {status}");
        self.url(&name)
    }

    /// The server's log file.
    pub fn log(&self) -> PathBuf {
        self.log_path()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A server certificate (its chain, PEM) and its private key (PEM), for
/// [`PgServer::start_with_tls`].
pub struct ServerTls {
    /// The certificate the server presents, then any intermediates.
    pub cert_pem: String,
    /// The certificate's private key.
    pub key_pem: String,
    /// CA certificates whose client certificates the server asks for and checks
    /// (`ssl_ca_file`; authentication stays `trust`, so a client without one connects too).
    pub client_ca_pem: Option<String>,
}

/// Writes the server's private key readable by its owner only, the owner being the user the
/// server runs as: PostgreSQL refuses a key others can read. As root, `postgres-server.sh`
/// runs the server as `postgres`, so the file is given to that user.
fn write_private_key(path: &Path, pem: &str) {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .expect("create the server's key file");
    file.write_all(pem.as_bytes()).expect("write the server's key");
    if user_id(&["-u"]) == 0 {
        let (uid, gid) = (user_id(&["-u", "postgres"]), user_id(&["-g", "postgres"]));
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("give the key to postgres");
    }
}

/// `id <args>`'s number (`-u`: this process's user; `-u postgres`: that user's).
fn user_id(args: &[&str]) -> u32 {
    let out = Command::new("id").args(args).output().expect("run id");
    assert!(out.status.success(), "id {args:?} failed (no `postgres` user?)");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a numeric id")
}

/// The directory of the server binaries, from `scripts/postgres-env.sh` (which installs them
/// if missing), once per process.
pub fn pg_bin() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/postgres-env.sh"))
            .stderr(Stdio::inherit())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    })
    .as_deref()
}

/// The server shared by this test binary's tests (stopped when the process exits).
pub fn postgres() -> &'static PgServer {
    static SERVER: OnceLock<PgServer> = OnceLock::new();
    SERVER.get_or_init(PgServer::start)
}
