//! sked's AWS deployment on moto, for the `aws_*` tests (feature `aws`): fresh resources on a
//! moto server, the API function's router ([`sked_fn_api::app`]) served in-process on
//! 127.0.0.1 — so the same [`Api`] client as the local tests talks to it —, the sweeper
//! function's handler ([`SweeperFn`]) invoked in-process as EventBridge Scheduler would, and
//! real `sked worker --backend aws` processes configured through the environment, as
//! `template.yaml` configures the ECS service.

use super::{Api, GRACE, LEASE, Proc, SKED};
use lambda_runtime::{Context, LambdaEvent};
use sked_aws::{AwsClients, AwsConfig, Settings, SweepLease};
use sked_core::auth::{Principal, Role};
use sked_core::duration::Dur;
use sked_core::ids::TenantId;
use sked_core::ports::{Clock, SystemClock};
use sked_core::service::Ports;
use sked_fn_api::identity::ClaimNames;
use sked_fn_sweeper::{SweepError, SweepOutcome, SweeperFn};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The sample Scheduler event every tick sends (its content does not matter to the handler).
const TICK: &str = include_str!("../../../../events/eventbridge-scheduler.json");

/// `SKED_LOG` of the workers: the SQS adapter's debug lines name the queue of each delivery,
/// and the fault injector's each fault.
pub const WORKER_LOG: &str = "info,sked_aws::sqs=debug,sked_aws::fault=debug";

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
    /// A client of the same API over clients without the config's request counter and
    /// faults: what the test reads to check the outcome.
    pub observer: Api,
    sweeper: Arc<SweeperFn>,
    sweep_lookahead: Dur,
    serving: [tokio::task::JoinHandle<()>; 2],
    dir: tempfile::TempDir,
    workers_started: AtomicUsize,
    ticks: AtomicUsize,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        self.serving.iter().for_each(|s| s.abort());
        // A failed test keeps its workers' whole logs (a tail is printed as they stop).
        if std::thread::panicking() {
            self.dir.disable_cleanup(true);
            eprintln!("the deployment's directory is kept: {}", self.dir.path().display());
        }
    }
}

impl Deployment {
    /// Creates the resources `config` names (table, queues, and its logs and ECS parts) and
    /// starts the API, which fires jobs due within `api_lookahead` itself, and a sweeper
    /// firing `sweep_lookahead` ahead (the template gives both the same `SKED_LOOKAHEAD`;
    /// tests that must see the sweeper fire give the API less).
    /// The resources are created through clients without the config's request counter and
    /// faults; everything after goes through clients with them.
    pub async fn start(mut config: AwsConfig, api_lookahead: Dur, sweep_lookahead: Dur) -> Deployment {
        let plain = sked_aws::connect(&plain(&config)).await;
        config.queues = sked_aws::create_resources(&plain, &config)
            .await
            .expect("create the resources");
        let clients = sked_aws::connect(&config).await;
        Deployment::on(clients, config, api_lookahead, sweep_lookahead).await
    }

    /// [`Self::start`] on resources that exist, with `clients` (which may carry an
    /// interceptor or a fault-injecting HTTP client).
    pub async fn on(clients: AwsClients, config: AwsConfig, api_lookahead: Dur, sweep_lookahead: Dur) -> Deployment {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        // The test's own view: the same API over clients without counter or faults.
        let observer_config = plain(&config);
        let observer_clients = sked_aws::connect(&observer_config).await;
        // As every process does at start (its requests not counted).
        sked_aws::check_table_layout(&observer_clients, &observer_config)
            .await
            .expect("the table keys jobs as configured");
        let (observer_ports, observer_tenants) =
            sked_aws::ports_and_tenants(&observer_clients, &observer_config, clock.clone());
        let observer_settings = Settings {
            aws: observer_config,
            lookahead: Dur::ZERO,
        };
        let (observer, observing) = serve(behind_gateway(sked_fn_api::app(
            observer_ports,
            observer_tenants,
            &observer_settings,
            ClaimNames::default(),
        )))
        .await;
        let settings = Settings {
            aws: config,
            lookahead: api_lookahead,
        };
        let (ports, tenants) = sked_aws::ports_and_tenants(&clients, &settings.aws, clock.clone());
        let lease = SweepLease::new(clients.dynamodb.clone(), &settings.aws, clock);
        let sweeper = Arc::new(SweeperFn::new(ports.clone(), lease, sweep_lookahead));

        let (api, serving) = serve(behind_gateway(sked_fn_api::app(
            ports.clone(),
            tenants,
            &settings,
            ClaimNames::default(),
        )))
        .await;
        Deployment {
            clients,
            settings,
            ports,
            api,
            observer,
            sweeper,
            sweep_lookahead,
            serving: [serving, observing],
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
        tick(&self.sweeper, &format!("tick-{n}"), deadline_ms)
            .await
            .unwrap_or_else(|e| panic!("sweeper tick {n} failed: {e}"))
    }

    /// Replaces the sweeper handler by one ticked every `tick` (the test's own schedule)
    /// whose repair pass enqueues PENDING runs again after `stale_after` instead of a minute.
    pub fn set_tick(&mut self, tick: Dur, stale_after: Dur) {
        let lease = SweepLease::new(
            self.clients.dynamodb.clone(),
            &self.settings.aws,
            self.ports.clock.clone(),
        );
        let sweeper = SweeperFn::new(self.ports.clone(), lease, self.sweep_lookahead).with_tick(tick, stale_after);
        self.sweeper = Arc::new(sweeper);
    }

    /// The sweeper handler, for ticks run from a spawned task.
    pub fn sweeper(&self) -> Arc<SweeperFn> {
        self.sweeper.clone()
    }

    /// Starts `sked worker --backend aws` (test lease and grace, plus `extra` flags) with the
    /// deployment's settings in its environment, and `vars` on top; waits until it is ready.
    pub fn worker_with(&self, extra: &[&str], vars: &[(&str, &str)]) -> Proc {
        self.spawn_worker(&["--lease", LEASE, "--grace", GRACE], extra, vars)
    }

    /// [`Self::worker`] with `sked worker`'s own lease and grace (15 s and 5 s), as
    /// `template.yaml` and `make local-aws` run it, instead of the tests' short ones.
    pub fn worker_with_default_lease(&self, extra: &[&str]) -> Proc {
        self.spawn_worker(&[], extra, &[])
    }

    fn spawn_worker(&self, lease: &[&str], extra: &[&str], vars: &[(&str, &str)]) -> Proc {
        let n = self.workers_started.fetch_add(1, Ordering::Relaxed) + 1;
        let mut command = Command::new(SKED);
        command
            .args(["worker", "--backend", "aws"])
            .args(lease)
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
        self.worker_log_lines()
            .iter()
            .filter(|l| l.contains(" received "))
            .filter_map(|l| Some((field(l, "queue")?, field(l, "run_id")?)))
            .collect()
    }

    /// Every worker log line of this deployment containing `needle`, without colours.
    pub fn worker_lines_with(&self, needle: &str) -> Vec<String> {
        self.worker_log_lines()
            .into_iter()
            .filter(|l| l.contains(needle))
            .collect()
    }

    /// Faults the workers' HTTP clients injected, from their logs: `(throttled, lost answers)`.
    pub fn worker_faults(&self) -> (usize, usize) {
        let (mut throttled, mut lost) = (0, 0);
        for line in self.worker_log_lines() {
            if line.contains("fault injected") {
                match field(&line, "kind").as_deref() {
                    Some("throttle") => throttled += 1,
                    Some("lost_answer") => lost += 1,
                    _ => {}
                }
            }
        }
        (throttled, lost)
    }

    /// Every line of every worker log of this deployment, without colours.
    fn worker_log_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.path()) else {
            return out;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("worker-") {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                out.extend(text.lines().map(strip_ansi));
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

/// One invocation of the sweeper function with the sample Scheduler event, request id
/// `request_id` and deadline `deadline_ms` (ms since the epoch; 0: none).
pub async fn tick(sweeper: &SweeperFn, request_id: &str, deadline_ms: u64) -> Result<SweepOutcome, SweepError> {
    let payload: serde_json::Value = serde_json::from_str(TICK).expect("the sample tick is JSON");
    let mut context = Context::default();
    context.request_id = request_id.to_string();
    context.deadline = deadline_ms;
    sweeper.handle(LambdaEvent::new(payload, context)).await
}

/// `config` without its request counter and faults.
fn plain(config: &AwsConfig) -> AwsConfig {
    AwsConfig {
        request_counter: None,
        faults: None,
        ..config.clone()
    }
}

/// `app` as API Gateway hands it requests: with a verified identity on each (here tenant
/// `default` with the write role, as a JWT authorizer's claims would say; the claims
/// themselves are tested in functions/api).
fn behind_gateway(app: axum::Router) -> axum::Router {
    app.layer(axum::Extension(Principal::new(TenantId::default(), Role::Write)))
}

/// Serves `app` on a free port of 127.0.0.1; a client of it and the serving task.
async fn serve(app: axum::Router) -> (Api, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the API");
    let addr = listener.local_addr().expect("API address");
    let serving = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve the API");
    });
    (Api::new(&format!("http://{addr}")), serving)
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
