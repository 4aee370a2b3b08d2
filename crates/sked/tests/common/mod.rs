//! Shared helpers for the end-to-end tests: each test gets its own temporary data dir,
//! starts the real `sked` binary (`sked server --listen 127.0.0.1:0`, `sked worker`), talks
//! to it over HTTP, and waits on conditions by polling with a deadline — never by sleeping
//! a fixed time. Child processes are killed when their handle drops; if the test is
//! failing, the tail of each child's log is printed to help.
//!
//! Start lags (`started_at − scheduled_for`) are printed as `e2e-start-lag` lines and, when
//! `SKED_E2E_LAGS` names a file, appended to it, so a run of the suite can report p50/p99.

#![allow(dead_code, missing_docs)] // Each test binary uses a different part of this module.

#[cfg(feature = "aws")]
pub mod aws;
pub mod soak;
pub mod webhook;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The binary under test.
pub const SKED: &str = env!("CARGO_BIN_EXE_sked");

/// Lease and grace for test processes: short, so failures are noticed quickly.
pub const LEASE: &str = "3";
pub const GRACE: &str = "1";

/// A test's sandbox: a temporary directory holding the data dir and child logs, and the
/// PostgreSQL database its processes share instead of the data dir's SQLite file, if any.
pub struct Sandbox {
    dir: tempfile::TempDir,
    database_url: Option<String>,
}

impl Sandbox {
    pub fn new() -> Self {
        Sandbox {
            dir: tempfile::Builder::new().prefix("sked-e2e-").tempdir().expect("tempdir"),
            database_url: None,
        }
    }

    /// A sandbox whose processes store everything in the PostgreSQL database at `url`
    /// (`--database-url`); the data dir then holds only the first operator key.
    #[allow(dead_code)] // only the PostgreSQL tests use it
    pub fn on_postgres(url: &str) -> Self {
        Sandbox {
            database_url: Some(url.to_string()),
            ..Sandbox::new()
        }
    }

    /// `--data-dir <dir>`, and `--database-url <url>` on PostgreSQL.
    fn store_args(&self) -> Vec<String> {
        let mut args = vec!["--data-dir".to_string(), self.data_dir().to_str().unwrap().to_string()];
        if let Some(url) = &self.database_url {
            args.extend(["--database-url".to_string(), url.clone()]);
        }
        args
    }

    /// The root of the sandbox.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The data dir every process of this test shares.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Starts `sked server` on a free port, with test lease and grace, plus `extra` flags.
    pub fn server(&self, extra: &[&str]) -> Proc {
        self.server_after("", extra)
    }

    /// The arguments of `sked server` on this sandbox's data dir (free port, test lease and
    /// grace) plus `extra`.
    pub fn server_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args = vec!["server".to_string()];
        args.extend(self.store_args());
        args.extend(["--listen", "127.0.0.1:0", "--lease", LEASE, "--grace", GRACE].map(String::from));
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    }

    /// Starts `sked server` like [`Self::server`], after the shell commands `prelude` (e.g.
    /// `ulimit -f 2048`): through `sh -c '<prelude>; exec sked server …'` when it is not
    /// empty.
    pub fn server_after(&self, prelude: &str, extra: &[&str]) -> Proc {
        let args = self.server_args(extra);
        let mut proc = Proc::spawn_command("server", through_shell(prelude, &args), &self.path().join("server.log"));
        let line = proc.wait_for_line("sked listening on ", Duration::from_secs(30));
        proc.url = Some(line.trim_start_matches("sked listening on ").trim().to_string());
        // The first operator key the server wrote into its data dir (every API call needs a key).
        proc.key = std::fs::read_to_string(self.data_dir().join("admin.key"))
            .ok()
            .map(|k| k.trim().to_string());
        proc
    }

    /// Runs `sked server` (with `extra` flags) expecting it to refuse to start: waits for
    /// its exit, at most `timeout`, and answers its exit code and stderr. Panics if it
    /// started serving or did not exit in time.
    pub fn server_refusing(&self, extra: &[&str], timeout: Duration) -> (i32, String) {
        run_to_exit(self.server_args(extra), timeout)
    }

    /// Runs `sked worker` on the sandbox's data dir expecting it to refuse to start, like
    /// [`Self::server_refusing`].
    pub fn worker_refusing(&self, timeout: Duration) -> (i32, String) {
        let mut args = vec!["worker".to_string()];
        args.extend(self.store_args());
        run_to_exit(args, timeout)
    }

    /// Starts `sked worker` on the sandbox's data dir, plus `extra` flags.
    pub fn worker(&self, extra: &[&str]) -> Proc {
        let mut args = vec!["worker".to_string()];
        args.extend(self.store_args());
        args.extend(["--lease", LEASE, "--grace", GRACE].map(String::from));
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut proc = Proc::spawn("worker", &args, &self.path().join("worker.log"));
        if extra.contains(&"--metrics-listen") {
            let line = proc.wait_for_line("sked worker metrics on ", Duration::from_secs(30));
            proc.url = Some(line.trim_start_matches("sked worker metrics on ").trim().to_string());
        }
        proc.wait_for_line("sked worker ready", Duration::from_secs(30));
        proc
    }

    /// Starts `sked sweeper` on the sandbox's data dir (its log `sweeper-<n>.log`), serving its
    /// `/metrics`, `/healthz` and `/readyz` on a free port (its `url`).
    pub fn sweeper(&self, n: usize) -> Proc {
        let mut args = vec!["sweeper".to_string()];
        args.extend(self.store_args());
        args.extend(["--metrics-listen", "127.0.0.1:0"].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let log = self.path().join(format!("sweeper-{n}.log"));
        let mut proc = Proc::spawn(&format!("sweeper-{n}"), &args, &log);
        let line = proc.wait_for_line("sked sweeper metrics on ", Duration::from_secs(30));
        proc.url = Some(line.trim_start_matches("sked sweeper metrics on ").trim().to_string());
        proc.wait_for_line("sked sweeper ready", Duration::from_secs(30));
        proc
    }
}

/// A running `sked` child process. Killed (SIGKILL) on drop.
pub struct Proc {
    name: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    log: PathBuf,
    /// The API's base URL (servers), or the metrics listener's (workers started with
    /// `--metrics-listen`).
    pub url: Option<String>,
    /// The operator key of the server's data dir (servers only).
    pub key: Option<String>,
}

impl Proc {
    fn spawn(name: &str, args: &[&str], log: &Path) -> Proc {
        let mut command = Command::new(SKED);
        command.args(args);
        Proc::spawn_command(name, command, log)
    }

    /// Starts `command` (the sked binary, or a shell that execs it) with stdout piped and
    /// stderr appended to `log`.
    fn spawn_command(name: &str, mut command: Command, log: &Path) -> Proc {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("child log file");
        if !command.get_envs().any(|(k, _)| k == "SKED_LOG") {
            command.env("SKED_LOG", std::env::var("SKED_LOG").unwrap_or_else(|_| "info".into()));
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
            .expect("spawning sked");
        // Read stdout on a thread for the whole life of the child, so its pipe never fills.
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Proc {
            name: name.into(),
            child,
            lines,
            log: log.to_path_buf(),
            url: None,
            key: None,
        }
    }

    /// Waits for a stdout line that `wanted` accepts, skipping the others; panics (with the
    /// log) at the deadline, naming `what`.
    #[allow(dead_code)] // not every test binary reads a child's stdout
    pub fn wait_for_stdout(&mut self, what: &str, timeout: Duration, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if wanted(&line) => return line,
                Ok(_) => continue,
                Err(_) => panic!("{} printed no {what} on stdout\n{}", self.name, self.log_tail(40)),
            }
        }
    }

    /// Waits for a stdout line starting with `prefix`; panics (with the log) at the deadline.
    fn wait_for_line(&mut self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => continue,
                Err(_) => {
                    let status = self.child.try_wait().ok().flatten();
                    panic!(
                        "{} did not print {prefix:?} (exit: {status:?})\n{}",
                        self.name,
                        self.log_tail(40)
                    );
                }
            }
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited (reaping it if so).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// An API client for this server, with its operator key.
    pub fn api(&self) -> Api {
        Api::new(self.url.as_deref().expect("not a server")).with_key(self.key.as_deref())
    }

    /// Runs the `sked` CLI against this server with its operator key.
    pub fn cli(&self, args: &[&str]) -> Output {
        cli_with_key(self.url.as_deref().expect("not a server"), self.key.as_deref(), args)
    }

    /// `kill -9`, and reap it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits up to `timeout` for the exit; returns its status code.
    pub fn terminate(&mut self, timeout: Duration) -> Option<i32> {
        let _ = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// The last `n` lines of the child's log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "--- last {n} lines of {} ---\n{}",
            self.log.display(),
            lines[lines.len().saturating_sub(n)..].join("\n")
        )
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("{}", self.log_tail(60));
        }
    }
}

/// A minimal client for the sked API (status and JSON, nothing hidden).
#[derive(Clone)]
pub struct Api {
    pub base: String,
    http: reqwest::Client,
    key: Option<String>,
}

impl Api {
    pub fn new(base: &str) -> Self {
        Api {
            base: base.trim_end_matches('/').to_string(),
            http: reqwest::Client::new(),
            key: None,
        }
    }

    /// The same client sending `key` as its bearer token.
    pub fn with_key(mut self, key: Option<&str>) -> Self {
        self.key = key.map(str::to_string);
        self
    }

    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> (u16, Value) {
        let mut request = self.http.request(method.clone(), format!("{}{path}", self.base));
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status().as_u16();
        let text = response.text().await.expect("reading body");
        let json = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: answer is not JSON ({e}): {text}"))
        };
        (status, json)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    /// GET that must answer 200.
    pub async fn get_ok(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// `POST /v1/jobs` that must answer 201.
    pub async fn create_job(&self, job: Value) -> Value {
        let (status, body) = self.post("/v1/jobs", &job).await;
        assert_eq!(status, 201, "creating {job}: {body}");
        body
    }

    /// One run.
    pub async fn run(&self, run_id: &str) -> Value {
        self.get_ok(&format!("/v1/runs/{run_id}")).await
    }

    /// A job's runs, newest first (one page of up to 1,000).
    pub async fn runs_of(&self, job_id: &str) -> Vec<Value> {
        items(&self.get_ok(&format!("/v1/jobs/{job_id}/runs?limit=1000")).await)
    }

    /// Every run across jobs matching `query` (e.g. `state=SUCCEEDED`), following cursors.
    pub async fn all_runs(&self, query: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/v1/runs?limit=1000&{query}");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let page = self.get_ok(&path).await;
            out.extend(items(&page));
            cursor = page["next_cursor"].as_str().map(str::to_string);
            if cursor.is_none() {
                return out;
            }
        }
    }

    /// Every job matching `query` (e.g. `state=ACTIVE`), following cursors.
    pub async fn all_jobs(&self, query: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/v1/jobs?limit=1000&{query}");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let page = self.get_ok(&path).await;
            out.extend(items(&page));
            cursor = page["next_cursor"].as_str().map(str::to_string);
            if cursor.is_none() {
                return out;
            }
        }
    }

    /// The text of every line of a run's log (`query` e.g. `attempt=2`).
    pub async fn log_lines(&self, run_id: &str, query: &str) -> Vec<String> {
        let body = self.get_ok(&format!("/v1/runs/{run_id}/logs?{query}")).await;
        items_at(&body, "lines")
            .iter()
            .map(|l| l["line"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

/// `sked` with `args`, or `sh -c '<prelude>; exec sked "$@"'` when `prelude` is not empty.
fn through_shell(prelude: &str, args: &[String]) -> Command {
    if prelude.is_empty() {
        let mut command = Command::new(SKED);
        command.args(args);
        return command;
    }
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("{prelude}\nexec \"$0\" \"$@\""))
        .arg(SKED)
        .args(args);
    command
}

/// Runs `sked args` until it exits (at most `timeout`; panics if it announces it is
/// serving or outlives the timeout); answers its exit code and stderr.
fn run_to_exit(args: Vec<String>, timeout: Duration) -> (i32, String) {
    let mut child = Command::new(SKED)
        .args(&args)
        .env("SKED_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning sked");
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(_status) = child.try_wait().expect("waiting for sked") {
            let out = child.wait_with_output().expect("reading sked's output");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                !stdout.contains("sked listening on") && !stdout.contains("sked worker ready"),
                "sked {args:?} started although it should have refused: {stdout}"
            );
            let code = out.status.code().unwrap_or(-1);
            return (code, String::from_utf8_lossy(&out.stderr).into_owned());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("reading sked's output");
            panic!(
                "sked {args:?} still running after {timeout:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `v.items` as a vec.
pub fn items(v: &Value) -> Vec<Value> {
    items_at(v, "items")
}

fn items_at(v: &Value, key: &str) -> Vec<Value> {
    v[key].as_array().cloned().unwrap_or_default()
}

/// Polls `check` every 50 ms until it answers `Some`, or panics naming `what` at the
/// deadline.
pub async fn wait_until<T>(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls a run until it reaches a terminal state.
pub async fn wait_terminal(api: &Api, run_id: &str, timeout: Duration) -> Value {
    wait_until(&format!("run {run_id} to end"), timeout, async || {
        let run = api.run(run_id).await;
        is_terminal(&run).then_some(run)
    })
    .await
}

/// Polls a job until it has a run, and returns the newest one.
pub async fn wait_first_run(api: &Api, job_id: &str, timeout: Duration) -> Value {
    wait_until(&format!("a run of {job_id}"), timeout, async || {
        api.runs_of(job_id).await.into_iter().next()
    })
    .await
}

pub fn is_terminal(run: &Value) -> bool {
    !matches!(run["state"].as_str(), Some("PENDING" | "RUNNING") | None)
}

/// RFC 3339 UTC with milliseconds, as the API writes it.
pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses an RFC 3339 field of `v`.
pub fn time(v: &Value, key: &str) -> DateTime<Utc> {
    let s = v[key].as_str().unwrap_or_else(|| panic!("{key} missing in {v}"));
    DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("{key}={s}: {e}"))
        .with_timezone(&Utc)
}

/// `now + secs` (fractional allowed).
pub fn in_secs(secs: f64) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::milliseconds((secs * 1000.0) as i64)
}

/// An attempt's duration (`finished_at − started_at`) in ms.
pub fn duration_ms(attempt: &Value) -> i64 {
    (time(attempt, "finished_at") - time(attempt, "started_at")).num_milliseconds()
}

/// Records and returns a run's start lag (`started_at − scheduled_for`, ms).
pub fn report_lag(test: &str, run: &Value) -> i64 {
    let lag = (time(run, "started_at") - time(run, "scheduled_for")).num_milliseconds();
    println!(
        "e2e-start-lag test={test} run={} lag_ms={lag}",
        run["run_id"].as_str().unwrap_or("?")
    );
    if let Ok(path) = std::env::var("SKED_E2E_LAGS")
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path)
    {
        let _ = writeln!(f, "{test} {lag}");
    }
    lag
}

/// A command task running `script` with `sh -c`.
pub fn sh(script: &str) -> Value {
    json!({"command": {"argv": ["sh", "-c", script]}})
}

/// Runs the `sked` CLI against `url` with `key` (none: no key at all) and returns its output.
pub fn cli_with_key(url: &str, key: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(SKED);
    command
        .args(args)
        .env("SKED_URL", url)
        .env_remove("SKED_API_KEY")
        .env("SKED_KEY_FILE", "/nonexistent/sked-test-no-key-file");
    if let Some(key) = key {
        command.env("SKED_API_KEY", key);
    }
    command.output().expect("running sked")
}

/// The payload of the worker-kill tests: it appends `<attempt> <shell pid> <child pid>` to
/// `pids`, sleeps in a child of the shell — on attempt 1 far longer than any test waits, so
/// only its worker's death ends it; 1 s on later attempts — and prints `done`.
pub fn killable_payload(pids: &Path) -> Value {
    sh(&format!(
        "sleep $((SKED_ATTEMPT == 1 ? 120 : 1)) & echo \"$SKED_ATTEMPT $$ $!\" >> {}; wait; echo done",
        pids.display()
    ))
}

/// Waits until attempt 1 of a [`killable_payload`] runs; its shell's and its child's pids.
pub async fn attempt_one_pids(pids: &Path, timeout: Duration) -> (u32, u32) {
    wait_until("attempt 1's payload to start", timeout, async || {
        let text = std::fs::read_to_string(pids).ok()?;
        let line = text.lines().find_map(|l| l.strip_prefix("1 "))?;
        let (shell, child) = line.trim().split_once(' ')?;
        Some((shell.parse().ok()?, child.parse().ok()?))
    })
    .await
}

/// Waits until a killed worker's payload — its shell and the shell's child — is gone.
pub async fn wait_payload_gone((shell, child): (u32, u32)) {
    wait_until(
        "attempt 1's payload to die with its worker",
        Duration::from_secs(5),
        async || process_gone(shell).then_some(()),
    )
    .await;
    wait_until(
        "the payload's own child to die with the worker",
        Duration::from_secs(5),
        async || process_gone(child).then_some(()),
    )
    .await;
}

/// Asserts that `run` of a [`killable_payload`] whose first worker was killed ended as it
/// must: SUCCEEDED in two attempts, the first closed as worker lost, the second succeeded on
/// another worker, started after the first was closed, its log ending in `done`.
pub async fn assert_retried_after_worker_loss(api: &Api, run: &Value) {
    let run_id = run["run_id"].as_str().unwrap();
    assert_eq!(run["state"], "SUCCEEDED", "{run}");
    let attempts = run["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{run}");
    assert_eq!(attempts[0]["outcome"], "worker_lost", "{run}");
    assert_eq!(attempts[1]["outcome"], "succeeded", "{run}");
    assert_ne!(attempts[0]["worker"], attempts[1]["worker"], "{run}");
    assert!(
        time(&attempts[1], "started_at") >= time(&attempts[0], "finished_at"),
        "attempts overlap: {run}"
    );
    let lines = api.log_lines(run_id, "attempt=2").await;
    assert!(lines.iter().any(|l| l == "done"), "attempt 2 log: {lines:?}");
}

/// Whether process `pid` is gone (absent, or a zombie nobody reaped yet).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state is the field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}
