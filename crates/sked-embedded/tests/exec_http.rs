//! The HTTP executor against a real server on 127.0.0.1: status rules, headers (the task's
//! and the `Sked-*` context), body capture, connection errors, and aborting on stop.

use sked_core::duration::Dur;
use sked_core::ports::{ExecRequest, ExecResult, Executor, LogLine, LogStream, StopReason};
use sked_core::task::{HttpTask, Task};
use sked_core::timestamp;
use sked_embedded::exec::{HttpExecutor, TaskExecutor};
use sked_testkit::clock::ManualClock;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// A request as the test server saw it.
#[derive(Debug)]
struct Received {
    method: String,
    path: String,
    /// Lower-case names.
    headers: BTreeMap<String, String>,
    body: String,
}

/// How the test server answers.
#[derive(Clone)]
enum Reply {
    /// Status and body, then close.
    With(u16, String),
    /// Never answer; report when the client goes away.
    Hang(mpsc::UnboundedSender<()>),
}

/// Serves on 127.0.0.1 (a fresh port): every request is reported on the returned channel,
/// then answered with `reply`.
async fn serve(reply: Reply) -> (SocketAddr, mpsc::UnboundedReceiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (seen, requests) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::spawn(handle(socket, reply.clone(), seen.clone()));
        }
    });
    (addr, requests)
}

async fn handle(socket: TcpStream, reply: Reply, seen: mpsc::UnboundedSender<Received>) {
    let mut socket = BufReader::new(socket);
    let mut head = String::new();
    socket.read_line(&mut head).await.unwrap();
    let mut parts = head.split_whitespace();
    let (method, path) = (parts.next().unwrap().to_string(), parts.next().unwrap().to_string());
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        socket.read_line(&mut line).await.unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let len: usize = headers.get("content-length").map_or(0, |l| l.parse().unwrap());
    let mut body = vec![0; len];
    socket.read_exact(&mut body).await.unwrap();
    let _ = seen.send(Received {
        method,
        path,
        headers,
        body: String::from_utf8(body).unwrap(),
    });
    match reply {
        Reply::With(status, body) => {
            let response = format!(
                "HTTP/1.1 {status} Whatever\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            // The client may stop reading (and close) before the end.
            let _ = socket.get_mut().write_all(response.as_bytes()).await;
            let _ = socket.get_mut().shutdown().await;
        }
        Reply::Hang(gone) => {
            // Reading returns 0 (or fails) once the client has closed the connection.
            let mut rest = Vec::new();
            let _ = socket.read_to_end(&mut rest).await;
            let _ = gone.send(());
        }
    }
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(timestamp::parse("2026-12-01T09:00:00.250Z").unwrap()))
}

fn task(url: String) -> HttpTask {
    HttpTask {
        method: "GET".into(),
        url,
        headers: BTreeMap::new(),
        body: None,
        expect_status: None,
    }
}

fn request(task: HttpTask) -> ExecRequest {
    let context = [
        ("SKED_JOB_ID", "ping"),
        ("SKED_RUN_ID", "ping@20261201T090000.000Z"),
        ("SKED_ATTEMPT", "1"),
        ("SKED_SCHEDULED_FOR", "2026-12-01T09:00:00.000Z"),
        ("SKED_FENCING_TOKEN", "42"),
    ];
    ExecRequest {
        task: Task::Http(task),
        context: context
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        grace: Dur::millis(200),
        lease_lost_grace: Dur::millis(200),
    }
}

/// Runs `task` with nobody asking for a stop; returns the result and all output.
async fn run(task: HttpTask) -> (ExecResult, Vec<LogLine>) {
    let executor = HttpExecutor::new(clock());
    let (output, mut lines) = mpsc::channel(1024);
    let (_stop, stop_rx) = watch::channel(None);
    // Collect while it runs: the executor waits when the channel is full.
    let collect = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Some(line) = lines.recv().await {
            all.push(line);
        }
        all
    });
    let result = executor.execute(request(task), output, stop_rx).await;
    (result, collect.await.unwrap())
}

#[tokio::test]
async fn a_2xx_succeeds_and_the_body_is_captured_as_stdout_lines() {
    let (addr, _requests) = serve(Reply::With(200, "first\nsecond\n".into())).await;
    let (result, lines) = run(task(format!("http://{addr}/ping"))).await;
    assert_eq!(
        result,
        ExecResult {
            success: true,
            http_status: Some(200),
            ..Default::default()
        }
    );
    let texts: Vec<_> = lines.iter().map(|l| (l.stream, l.line.as_str())).collect();
    assert_eq!(texts, [(LogStream::Stdout, "first"), (LogStream::Stdout, "second")]);
    assert!(
        lines
            .iter()
            .all(|l| l.ts == timestamp::parse("2026-12-01T09:00:00.250Z").unwrap())
    );
}

#[tokio::test]
async fn the_expected_status_is_success_and_others_are_not() {
    let (addr, _requests) = serve(Reply::With(202, String::new())).await;
    let mut t = task(format!("http://{addr}/"));
    t.expect_status = Some(202);
    let (result, _) = run(t.clone()).await;
    assert!(result.success, "{result:?}");

    t.expect_status = Some(200);
    let (result, _) = run(t).await;
    assert!(!result.success);
    assert_eq!(result.http_status, Some(202));
    assert_eq!(
        result.error.as_deref(),
        Some("unexpected status 202 Accepted (expected 200)")
    );
}

#[tokio::test]
async fn an_error_status_fails_and_keeps_the_body() {
    let (addr, _requests) = serve(Reply::With(503, "try later".into())).await;
    let (result, lines) = run(task(format!("http://{addr}/"))).await;
    assert!(!result.success);
    assert_eq!(result.http_status, Some(503));
    assert_eq!(
        result.error.as_deref(),
        Some("unexpected status 503 Service Unavailable (expected 2xx)")
    );
    assert_eq!(lines[0].line, "try later");
}

#[tokio::test]
async fn method_headers_body_and_sked_headers_reach_the_server() {
    let (addr, mut requests) = serve(Reply::With(201, String::new())).await;
    let mut t = task(format!("http://{addr}/hooks/nightly?x=1"));
    t.method = "post".into();
    t.headers.insert("Content-Type".into(), "application/json".into());
    t.headers.insert("X-Custom".into(), "yes".into());
    // The context wins over a task header of the same name.
    t.headers.insert("Sked-Attempt".into(), "99".into());
    t.body = Some("{\"n\":1}".into());
    let (result, _) = run(t).await;
    assert!(result.success, "{result:?}");

    let seen = requests.recv().await.unwrap();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/hooks/nightly?x=1");
    assert_eq!(seen.body, "{\"n\":1}");
    let h = |name: &str| seen.headers.get(name).map(String::as_str);
    assert_eq!(h("content-type"), Some("application/json"));
    assert_eq!(h("x-custom"), Some("yes"));
    assert_eq!(h("sked-job-id"), Some("ping"));
    assert_eq!(h("sked-run-id"), Some("ping@20261201T090000.000Z"));
    assert_eq!(h("sked-attempt"), Some("1"));
    assert_eq!(h("sked-scheduled-for"), Some("2026-12-01T09:00:00.000Z"));
    assert_eq!(h("sked-fencing-token"), Some("42"));
}

#[tokio::test]
async fn a_huge_body_is_cut_at_one_mebibyte_with_a_note() {
    let body = "x".repeat(1000) + "\n";
    let (addr, _requests) = serve(Reply::With(200, body.repeat(1100))).await;
    let (result, lines) = run(task(format!("http://{addr}/"))).await;
    assert!(result.success, "{result:?}");
    let kept: usize = lines
        .iter()
        .filter(|l| l.stream == LogStream::Stdout)
        .map(|l| l.line.len() + 1)
        .sum();
    assert!(kept <= 1024 * 1024 + 1 && kept > 1024 * 1024 - 1001, "kept {kept}");
    let last = lines.last().unwrap();
    assert_eq!(
        (last.stream, last.line.as_str()),
        (LogStream::Stderr, "[sked: response body truncated at 1048576 bytes]")
    );
}

#[tokio::test]
async fn connection_refused_is_a_failure_with_the_reason() {
    // A port that was just free: nobody listens on it.
    let addr = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let (result, _) = run(task(format!("http://{addr}/"))).await;
    assert!(!result.success);
    assert_eq!(result.http_status, None);
    let error = result.error.unwrap();
    assert!(error.contains("Connection refused"), "{error}");
}

#[tokio::test]
async fn stop_aborts_a_request_to_a_slow_server() {
    let (gone, mut client_left) = mpsc::unbounded_channel();
    let (addr, mut requests) = serve(Reply::Hang(gone)).await;
    let executor = HttpExecutor::new(clock());
    let (output, _lines) = mpsc::channel(16);
    let (stop, stop_rx) = watch::channel(None);
    let call = tokio::spawn(async move {
        executor
            .execute(request(task(format!("http://{addr}/slow"))), output, stop_rx)
            .await
    });

    requests.recv().await.expect("the request arrived");
    let asked = Instant::now();
    stop.send(Some(StopReason::Timeout)).unwrap();
    let result = call.await.unwrap();
    assert!(asked.elapsed() < Duration::from_secs(1));
    assert_eq!(result.stopped, Some(StopReason::Timeout));
    assert!(!result.success);
    // The connection was closed, not left waiting.
    client_left.recv().await.expect("the client closed the connection");
}

#[tokio::test]
async fn the_router_sends_http_tasks_to_the_http_executor() {
    let (addr, _requests) = serve(Reply::With(204, String::new())).await;
    let executor = TaskExecutor::new(clock());
    let (output, _lines) = mpsc::channel(16);
    let (_stop, stop_rx) = watch::channel(None);
    let result = executor
        .execute(request(task(format!("http://{addr}/"))), output, stop_rx)
        .await;
    assert_eq!(result.http_status, Some(204));
    assert!(result.success);
}
