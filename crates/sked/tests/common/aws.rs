//! sked's AWS deployment on moto, for the `aws_*` tests (feature `aws`): fresh resources on a
//! moto server, the API function's router ([`sked_fn_api::app`]) served in-process on
//! 127.0.0.1 — so the same [`Api`] client as the local tests talks to it —, the sweeper
//! function's handler ([`SweeperFn`]) invoked in-process as EventBridge Scheduler would, and
//! real `sked worker --backend aws` processes configured through the environment, as
//! `template.yaml` configures the ECS service.

use super::{Api, GRACE, LEASE, Proc, SKED};
use lambda_runtime::{Context, LambdaEvent};
use sked_aws::{AwsClients, AwsConfig, Settings, SweepLease};
use sked_core::duration::Dur;
use sked_core::ports::{Clock, SystemClock};
use sked_core::service::Ports;
use sked_fn_sweeper::{SweepOutcome, SweeperFn};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The sample Scheduler event every tick sends (its content does not matter to the handler).
const TICK: &str = include_str!("../../../../events/eventbridge-scheduler.json");

/// `SKED_LOG` of the workers: the SQS adapter's debug lines name the queue of each delivery.
pub const WORKER_LOG: &str = "info,sked_aws::sqs=debug";

/// One deployment: resources, the API, the sweeper, and the workers started for it.
pub struct Deployment {
    /// Clients on the deployment's endpoint.
    pub clients: AwsClients,
    /// The settings every process of the deployment gets.
    pub settings: Settings,
    /// The ports the in-process functions use.
    pub ports: Ports,
    /// A client of the API function.
    pub api: Api,
    sweeper: Arc<SweeperFn>,
    serving: tokio::task::JoinHandle<()>,
    dir: tempfile::TempDir,
    workers_started: AtomicUsize,
    ticks: AtomicUsize,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

impl Deployment {
    /// Creates the resources `config` names (table, queues, and its logs and ECS parts) and
    /// starts the API, which fires jobs due within `api_lookahead` itself, and a sweeper
    /// firing `sweep_lookahead` ahead (the template gives both the same `SKED_LOOKAHEAD`;
    /// tests that must see the sweeper fire give the API less).
    pub async fn start(mut config: AwsConfig, api_lookahead: Dur, sweep_lookahead: Dur) -> Deployment {
        let clients = sked_aws::connect(&config).await;
        config.queues = sked_aws::create_resources(&clients, &config)
            .await
            .expect("create the resources");
        Deployment::on(clients, config, api_lookahead, sweep_lookahead).await
    }

    /// [`Self::start`] on resources that exist, with `clients` (which may carry an
    /// interceptor or a fault-injecting HTTP client).
    pub async fn on(clients: AwsClients, config: AwsConfig, api_lookahead: Dur, sweep_lookahead: Dur) -> Deployment {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let settings = Settings {
            aws: config,
            lookahead: api_lookahead,
        };
        let ports = sked_aws::ports(&clients, &settings.aws, clock.clone());
        let lease = SweepLease::new(clients.dynamodb.clone(), &settings.aws, clock);
        let sweeper = Arc::new(SweeperFn::new(ports.clone(), lease, sweep_lookahead));

        let app = sked_fn_api::app(ports.clone(), &settings);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the API");
        let addr = listener.local_addr().expect("API address");
        let serving = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve the API");
        });
        Deployment {
            clients,
            settings,
            ports,
            api: Api::new(&format!("http://{addr}")),
            sweeper,
            serving,
            dir: tempfile::Builder::new()
                .prefix("sked-aws-e2e-")
                .tempdir()
                .expect("tempdir"),
            workers_started: AtomicUsize::new(0),
            ticks: AtomicUsize::new(0),
        }
    }

    /// The deployment's scratch directory (worker logs, side-effect files).
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// One sweeper tick, as EventBridge Scheduler invokes the function.
    pub async fn sweep(&self) -> SweepOutcome {
        self.sweep_until(0).await
    }

    /// A tick whose invocation deadline is `deadline_ms` (ms since the epoch; 0: none, the
    /// handler's default budget). The sweep lease lasts until the deadline, so a deadline
    /// about now gives a lease that has expired while the invocation still sweeps — as for
    /// an invocation frozen past its time — and another tick can take it meanwhile.
    pub async fn sweep_until(&self, deadline_ms: u64) -> SweepOutcome {
        let n = self.ticks.fetch_add(1, Ordering::Relaxed);
        let payload: serde_json::Value = serde_json::from_str(TICK).expect("the sample tick is JSON");
        let mut context = Context::default();
        context.request_id = format!("tick-{n}");
        context.deadline = deadline_ms;
        self.sweeper
            .handle(LambdaEvent::new(payload, context))
            .await
            .unwrap_or_else(|e| panic!("sweeper tick {n} failed: {e}"))
    }

    /// The sweeper handler, for ticks run from a spawned task.
    pub fn sweeper(&self) -> Arc<SweeperFn> {
        self.sweeper.clone()
    }

    /// Starts `sked worker --backend aws` (test lease and grace, plus `extra` flags) with the
    /// deployment's settings in its environment, and `vars` on top; waits until it is ready.
    pub fn worker_with(&self, extra: &[&str], vars: &[(&str, &str)]) -> Proc {
        let n = self.workers_started.fetch_add(1, Ordering::Relaxed) + 1;
        let mut command = Command::new(SKED);
        command
            .args(["worker", "--backend", "aws", "--lease", LEASE, "--grace", GRACE])
            .args(extra)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("SKED_LOG", WORKER_LOG)
            .env_remove("AWS_PROFILE");
        for (name, value) in self.settings.to_vars() {
            command.env(name, value);
        }
        for (name, value) in vars {
            command.env(name, value);
        }
        let log = self.path().join(format!("worker-{n}.log"));
        let mut proc = Proc::spawn_command(&format!("aws worker {n}"), command, &log);
        proc.wait_for_line("sked worker ready", Duration::from_secs(60));
        proc
    }

    /// [`Self::worker_with`] without extra variables.
    pub fn worker(&self, extra: &[&str]) -> Proc {
        self.worker_with(extra, &[])
    }

    /// Every worker log line of this deployment saying a run was received, as
    /// `(queue, run_id)`.
    pub fn received(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.path()) else {
            return out;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if !name.starts_with("worker-") {
                continue;
            }
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            for line in text.lines().map(strip_ansi).filter(|l| l.contains(" received ")) {
                let line = line.as_str();
                if let (Some(queue), Some(run)) = (field(line, "queue"), field(line, "run_id")) {
                    out.push((queue, run));
                }
            }
        }
        out
    }

    /// Messages on `queue` (visible, delayed and in flight), per SQS's approximate counts.
    pub async fn messages_on(&self, queue_url: &str) -> u64 {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let out = self
            .clients
            .sqs
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesDelayed)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .expect("GetQueueAttributes");
        let attrs = out.attributes.unwrap_or_default();
        [
            A::ApproximateNumberOfMessages,
            A::ApproximateNumberOfMessagesDelayed,
            A::ApproximateNumberOfMessagesNotVisible,
        ]
        .iter()
        .map(|a| attrs.get(a).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0))
        .sum()
    }
}

/// `line` without terminal colour sequences (`ESC [ … m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The value of `name=value` (quotes removed) in a tracing text line.
fn field(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!(" {name}="))? + name.len() + 2;
    let rest = &line[start..];
    let end = rest.find(' ').unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"').to_string())
}
