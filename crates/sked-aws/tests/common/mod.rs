//! Test fixture: one real moto server per test binary on 127.0.0.1, and fresh, uniquely named
//! AWS resources per test.
//!
//! The server comes from `.venv-moto/` at the repository root (installed by
//! `scripts/moto-env.sh`, run here if needed). It is started on a free port once, on first
//! use, by a small shell wrapper that kills it when the wrapper's stdin closes — which happens
//! when the fixture is dropped or when the test process exits, however it exits. No hand-written
//! SDK mocks: every call goes over HTTP to moto.

#![allow(dead_code)] // each test binary uses part of it

use sked_aws::{AwsClients, AwsConfig, QueueUrls, connect};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The account moto answers with.
pub const ACCOUNT: &str = "123456789012";

/// A running moto server; killed on drop.
pub struct MotoServer {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        // Closing the wrapper's stdin makes it kill moto and exit.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The moto_server executable, installing it first if needed.
fn moto_server_path() -> PathBuf {
    let root = repo_root();
    let server = root.join(".venv-moto/bin/moto_server");
    if !root.join(".venv-moto/.installed").exists() || !server.exists() {
        let status = Command::new("bash")
            .arg(root.join("scripts/moto-env.sh"))
            .stdout(Stdio::null())
            .status()
            .expect("run scripts/moto-env.sh");
        assert!(status.success(), "scripts/moto-env.sh failed: {status}");
    }
    server
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free port")
        .port()
}

/// Whether `GET /moto-api/` answers 200.
fn answers(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /moto-api/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}

impl MotoServer {
    /// Starts moto on a free port of 127.0.0.1 and waits until it answers.
    pub fn start() -> MotoServer {
        let server = moto_server_path();
        let port = free_port();
        let log = std::env::temp_dir().join(format!("sked-moto-{port}.log"));
        let script = r#"
            "$0" -H 127.0.0.1 -p "$1" >"$2" 2>&1 </dev/null &
            pid=$!
            read -r _ || true
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            exit 0
        "#;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(&server)
            .arg(port.to_string())
            .arg(&log)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let stdin = child.stdin.take();
        let mut moto = MotoServer {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
            stdin,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !answers(port) {
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!("moto_server exited ({status}); log in {}", log.display());
            }
            assert!(
                Instant::now() < deadline,
                "moto_server did not answer in 60 s; log in {}",
                log.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }
}

/// The server shared by this test binary's tests (stopped when the process exits).
pub fn moto() -> &'static MotoServer {
    static MOTO: OnceLock<MotoServer> = OnceLock::new();
    MOTO.get_or_init(MotoServer::start)
}

/// A unique resource name for this process.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// A config naming fresh resources (not created yet) on the shared moto server.
pub fn fresh_config() -> AwsConfig {
    let m = moto();
    let name = unique("sked");
    let url = |suffix: &str| format!("{}/{ACCOUNT}/{name}-{suffix}", m.endpoint);
    let queues = QueueUrls {
        high: url("high"),
        normal: url("normal"),
        low: url("low"),
        dlq: url("dlq"),
    };
    AwsConfig::local(&m.endpoint, "test", "test", name.clone(), queues)
}

/// Clients and a config whose table exists (queues not created).
pub async fn fresh_table() -> (AwsClients, AwsConfig) {
    let config = fresh_config();
    let clients = connect(&config).await;
    sked_aws::bootstrap::create_table(&clients.dynamodb, &config)
        .await
        .expect("create table");
    (clients, config)
}

/// Clients and a config whose table and queues exist (queue URLs as SQS answered them).
pub async fn fresh_resources() -> (AwsClients, AwsConfig) {
    let mut config = fresh_config();
    let clients = connect(&config).await;
    config.queues = sked_aws::create_resources(&clients, &config)
        .await
        .expect("create resources");
    (clients, config)
}
