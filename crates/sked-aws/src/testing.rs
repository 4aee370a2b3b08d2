//! Test fixture (feature `testing`): one real moto server per test binary on 127.0.0.1, and
//! fresh, uniquely named AWS resources per test. Used by this crate's tests and by the Lambda
//! functions' handler tests.
//!
//! The server comes from `.venv-moto/` at the repository root (pinned, installed by
//! `scripts/moto-env.sh`, run here if needed) and is started through `scripts/moto-server.py`,
//! which handles DynamoDB requests one at a time: moto's transactions are not isolated under
//! concurrent requests, DynamoDB's are serializable, so without it a test that races
//! conditional writes would prove nothing and flake. It is started on a free port once, on
//! first use, by a small shell wrapper that kills it when the wrapper's stdin closes — which
//! happens when the fixture is dropped or when the test process exits, however it exits. No
//! hand-written SDK mocks: every call goes over HTTP to moto.

use crate::{AwsClients, AwsConfig, QueueUrls, connect};
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

/// The repository root (this crate lives in `crates/sked-aws`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The moto venv's python, installing the pinned moto first if needed (the script does
/// nothing when it is installed).
fn moto_python() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/moto-env.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/moto-env.sh");
    assert!(out.status.success(), "scripts/moto-env.sh failed: {}", out.status);
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
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
        let python = moto_python();
        let port = free_port();
        let log = std::env::temp_dir().join(format!("sked-moto-{port}.log"));
        let script = r#"
            "$0" "$3" -H 127.0.0.1 -p "$1" >"$2" 2>&1 </dev/null &
            pid=$!
            read -r _ || true
            kill "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            exit 0
        "#;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(&python)
            .arg(port.to_string())
            .arg(&log)
            .arg(repo_root().join("scripts/moto-server.py"))
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
    crate::bootstrap::create_table(&clients.dynamodb, &config)
        .await
        .expect("create table");
    (clients, config)
}

/// The item of `key` in `table` as stored, read consistently past the store's own reads.
pub async fn stored_item(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    key: crate::dynamo::codec::Item,
) -> Option<crate::dynamo::codec::Item> {
    let read = client.get_item().table_name(table).set_key(Some(key));
    read.consistent_read(true).send().await.expect("get item").item
}

/// Clients and a config whose table and queues exist (queue URLs as SQS answered them).
pub async fn fresh_resources() -> (AwsClients, AwsConfig) {
    let mut config = fresh_config();
    let clients = connect(&config).await;
    config.queues = crate::create_resources(&clients, &config)
        .await
        .expect("create resources");
    (clients, config)
}

// ---- Logs and ECS: the log bucket and group, the default network, ECS task transitions ----

/// A config naming fresh resources (not created) on `server`, which need not be the shared
/// one (the ECS stop tests freeze task transitions on a server of their own).
pub fn fresh_config_on(server: &MotoServer) -> AwsConfig {
    let name = unique("sked");
    let url = |suffix: &str| format!("{}/{ACCOUNT}/{name}-{suffix}", server.endpoint);
    let queues = QueueUrls {
        high: url("high"),
        normal: url("normal"),
        low: url("low"),
        dlq: url("dlq"),
    };
    AwsConfig::local(&server.endpoint, "test", "test", name.clone(), queues)
}

/// `config` with fresh log names: bucket `<table>-logs`, group `/sked/<table>`.
pub fn with_logs(mut config: AwsConfig) -> AwsConfig {
    let bucket = format!("{}-logs", config.table);
    let group = format!("/sked/{}", config.table);
    config.logs = Some(crate::LogsConfig::new(bucket, group));
    config
}

/// Clients and a config whose log bucket, group and table (small finished logs are items)
/// exist (queues not created).
pub async fn fresh_logs() -> (AwsClients, AwsConfig) {
    let config = with_logs(fresh_config());
    let clients = connect(&config).await;
    crate::bootstrap::create_table(&clients.dynamodb, &config)
        .await
        .expect("create table");
    let logs = config.logs.as_ref().expect("logs config");
    crate::bootstrap::create_log_resources(&clients, &config.region, logs)
        .await
        .expect("create log resources");
    (clients, config)
}

/// Clients and a config on `server` whose ECS cluster and task definition exist (family
/// `<table>-task`, container `main`), on the default VPC's first subnet and default
/// security group; the log bucket and group exist too (the task definition logs there).
pub async fn fresh_ecs_on(server: &MotoServer) -> (AwsClients, AwsConfig) {
    let mut config = with_logs(fresh_config_on(server));
    let (subnets, groups) = default_network(&server.endpoint);
    let mut ecs = crate::EcsConfig::new(
        format!("{}-cluster", config.table),
        format!("{}-task", config.table),
        "main",
        subnets.into_iter().take(1).collect(),
        groups,
    );
    ecs.poll_interval = Duration::from_millis(50);
    ecs.stop_wait = Duration::from_secs(5);
    config.ecs = Some(ecs);
    let clients = connect(&config).await;
    let logs = config.logs.as_ref().expect("logs config");
    crate::bootstrap::create_log_resources(&clients, &config.region, logs)
        .await
        .expect("create log resources");
    let ecs = config.ecs.as_ref().expect("ecs config");
    crate::bootstrap::create_ecs_resources(&clients.ecs, &config.region, ecs, Some(logs))
        .await
        .expect("create ECS resources");
    (clients, config)
}

/// One HTTP/1.0 request to moto (no client library: the fixture needs two calls that the
/// SDK crates sked uses do not cover); the status and body.
pub fn moto_request(endpoint: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let addr = endpoint.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).expect("connect to moto");
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("read timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).expect("send to moto");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read moto's answer");
    let status = answer
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:.200}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
    (status, body)
}

/// Every `<tag>…</tag>` text in `xml`, in order (enough for moto's EC2 answers).
fn xml_values(xml: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut found = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find(&open) {
        rest = &rest[i + open.len()..];
        let Some(j) = rest.find(&close) else { break };
        found.push(rest[..j].to_string());
        rest = &rest[j + close.len()..];
    }
    found
}

/// An EC2 query-API call to moto; the XML answer.
fn ec2_query(endpoint: &str, action: &str) -> String {
    // moto routes by the service named in the credential scope.
    let auth = "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=0";
    let (status, body) = moto_request(
        endpoint,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Authorization", auth),
        ],
        &format!("Action={action}&Version=2016-11-15"),
    );
    assert_eq!(status, 200, "EC2 {action}: {body}");
    body
}

/// The default VPC's subnets and security groups on moto (what awsvpc tasks need).
pub fn default_network(endpoint: &str) -> (Vec<String>, Vec<String>) {
    let subnets = xml_values(&ec2_query(endpoint, "DescribeSubnets"), "subnetId");
    let groups = xml_values(&ec2_query(endpoint, "DescribeSecurityGroups"), "groupId");
    assert!(!subnets.is_empty() && !groups.is_empty(), "moto has no default VPC");
    (subnets, groups)
}

/// Freezes ECS task transitions on `server`: a task stays RUNNING until stopped (by default
/// moto advances it one status per DescribeTasks). For the whole server: use a server of
/// the test's own.
pub fn freeze_ecs_tasks(server: &MotoServer) {
    let (status, body) = moto_request(
        &server.endpoint,
        "POST",
        "/moto-api/state-manager/set-transition",
        &[("Content-Type", "application/json")],
        r#"{"model_name":"ecs::task","transition":{"progression":"manual","times":1000}}"#,
    );
    assert!((200..300).contains(&status), "set-transition: {status} {body}");
}
