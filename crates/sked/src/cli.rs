//! The command line: every subcommand, flag and default of `sked`, as clap definitions.
//!
//! This module only describes the interface; what each command does lives in
//! [`crate::server`], [`crate::worker`] and [`crate::client`].

use clap::{Args, Parser, Subcommand};
use sked_core::service::log_retention::Retention;
use std::net::SocketAddr;
use std::path::PathBuf;

/// sked: a job scheduler. Run `sked server` locally, then drive it with the client commands.
#[derive(Debug, Parser)]
#[command(name = "sked", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs everything in one process: the REST API, the sweeper, a reaper and N workers.
    Server(ServerArgs),
    /// Runs workers only (plus a reaper), on the SQLite file of a running `sked server`.
    Worker(WorkerArgs),
    /// Runs the sweeper only (it fires due jobs), on the SQLite file of a `sked server
    /// --no-sweeper`; any number may run at once.
    Sweeper(SweeperArgs),
    /// Creates, lists and changes jobs.
    Jobs {
        /// Where the API is and how to print.
        #[command(flatten)]
        client: ClientArgs,
        /// The action.
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// Lists, inspects and cancels runs.
    Runs {
        /// Where the API is and how to print.
        #[command(flatten)]
        client: ClientArgs,
        /// The action.
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Creates, lists and revokes API keys (an admin key: its tenant's; an operator key: all).
    Keys {
        /// Where the API is and how to print.
        #[command(flatten)]
        client: ClientArgs,
        /// The action.
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Reads and sets tenants' quotas (an operator key).
    Tenants {
        /// Where the API is and how to print.
        #[command(flatten)]
        client: ClientArgs,
        /// The action.
        #[command(subcommand)]
        command: TenantsCommand,
    },
    /// Prints a run's log (the latest attempt unless `--attempt`).
    Logs {
        /// Where the API is and how to print.
        #[command(flatten)]
        client: ClientArgs,
        /// What to read.
        #[command(flatten)]
        args: LogsArgs,
    },
}

/// Where the data is and how to log: what every process on a data directory needs.
#[derive(Debug, Args, Clone)]
pub struct StoreArgs {
    /// Data directory: `sked.db` (jobs, runs, queue) and `logs/` live here; with
    /// `--database-url`, only the first operator key (`admin.key`).
    #[arg(long, env = "SKED_DATA_DIR", default_value = "./sked-data")]
    pub data_dir: PathBuf,
    /// A PostgreSQL database (`postgres://user:password@host:port/db`) instead of the data
    /// dir's SQLite file: jobs, runs, the queue, run logs and keys, shared by every process
    /// given the same URL on any host. The schema is migrated on start. Never logged. TLS as
    /// libpq: `?sslmode=disable|prefer|require|verify-ca|verify-full` (default `prefer`) and
    /// `sslrootcert=<CA file>`; a client certificate with `sslcert=<file>&sslkey=<file>`.
    #[arg(long, env = "SKED_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// With `--database-url`: keep finished attempts' logs in this S3-compatible bucket
    /// (`s3://bucket` or `s3://bucket/prefix`, as `<prefix>logs/<tenant>/<run>/<attempt>.jsonl`)
    /// instead of the database. Lines are rows of the database while the attempt runs (any
    /// server follows them) and move to one object when it ends. Credentials and region from
    /// the standard AWS chain (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
    /// profiles, roles). Not with the SQLite file. Needs a build with `--features s3-logs`
    /// (or `aws`).
    #[arg(long, env = "SKED_LOG_BUCKET", value_name = "s3://BUCKET[/PREFIX]")]
    pub log_bucket: Option<String>,
    /// The S3-compatible server of `--log-bucket` (`http://minio:9000`); buckets are then
    /// addressed by path. Default: `AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL`, else AWS's S3.
    #[arg(long, env = "SKED_LOG_ENDPOINT", value_name = "URL")]
    pub log_endpoint: Option<String>,
    /// How log lines are written on stderr: `text` for people, or `json`, one object a line
    /// (every line of a run's life carries `job_id`, `run_id` and `attempt`, as fields or in
    /// its `span`). The filter comes from `SKED_LOG`.
    #[arg(long, value_enum, env = "SKED_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The same as `--log-format json`.
    #[arg(long)]
    pub log_json: bool,
}

impl StoreArgs {
    /// The log format asked for, `--log-json` included.
    pub fn log_format(&self) -> LogFormat {
        if self.log_json {
            LogFormat::Json
        } else {
            self.log_format
        }
    }
}

/// Settings shared by `sked server` and `sked worker`.
#[derive(Debug, Args, Clone)]
pub struct RuntimeArgs {
    /// Storage and logging.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Worker tasks to run in this process.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Attempts each worker runs at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Lease length in seconds; workers heartbeat every third of it. A worker that dies is
    /// noticed about one lease later.
    #[arg(long, default_value_t = 15)]
    pub lease: u64,
    /// A longer lease, in seconds, for attempts that have run `--long-lease-after`: their
    /// heartbeats (a store write and a queue request each) come every third of it instead, and
    /// a worker that dies during one is noticed about this long later. 0 or absent: off.
    #[arg(long)]
    pub long_lease: Option<u64>,
    /// Seconds an attempt runs on `--lease` before it moves to `--long-lease`.
    #[arg(long, default_value_t = 300)]
    pub long_lease_after: u64,
    /// Seconds between SIGTERM and SIGKILL when a payload is stopped (timeout, cancel).
    #[arg(long, default_value_t = 5)]
    pub grace: u64,
    /// The operating assumption on clocks, in ms: no host's clock is further than this from
    /// the true time. A worker that cannot renew its lease stops its payload twice this
    /// (plus a share of the grace) before the lease ends, so no other worker can have taken
    /// the run over meanwhile. One host (the local deployment) has no skew.
    #[arg(long, default_value_t = 100)]
    pub max_clock_skew_ms: u64,
}

impl RuntimeArgs {
    /// The log format asked for, `--log-json` included.
    pub fn log_format(&self) -> LogFormat {
        self.store.log_format()
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (colours on a terminal).
    #[default]
    Text,
    /// One JSON object a line.
    Json,
}

/// `sked server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Storage, workers and logging.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Address for the REST API (`127.0.0.1:0` picks a free port; the line printed on
    /// stdout names the actual one).
    #[arg(long, env = "SKED_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Runs no sweeper in this process: `sked sweeper` processes fire the jobs instead (the
    /// API, sweepers and workers as separate processes). Log retention goes with the sweeper.
    #[arg(long)]
    pub no_sweeper: bool,
    /// How long attempts' logs are kept.
    #[command(flatten)]
    pub retention: RetentionArgs,
}

/// Housekeeping of the process that fires the jobs (`sked sweeper`, or `sked server` with its
/// sweeper).
#[derive(Debug, Args, Clone)]
pub struct RetentionArgs {
    /// How long attempts' logs are kept: a duration (`30d`, `12h`, `1d12h`), or `off` (or `0`)
    /// to keep them forever. Older ones are removed at start and then hourly, a batch at a
    /// time. Runs and their attempts' records are kept; a removed log reads as empty.
    #[arg(long, env = "SKED_LOG_RETENTION", default_value_t = Retention::DEFAULT)]
    pub log_retention: Retention,
}

/// `sked sweeper`.
#[derive(Debug, Args)]
pub struct SweeperArgs {
    /// Serve this process's `GET /metrics`, `/healthz` and `/readyz` on this address (port 0
    /// picks one, printed as `sked sweeper metrics on http://<addr>`).
    #[arg(long, env = "SKED_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Storage and logging.
    #[command(flatten)]
    pub store: StoreArgs,
    /// How long attempts' logs are kept.
    #[command(flatten)]
    pub retention: RetentionArgs,
}

/// Where `sked worker` takes its work from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Backend {
    /// The SQLite file of a running `sked server` (`--data-dir`).
    #[default]
    Local,
    /// sked's AWS deployment (DynamoDB, SQS, CloudWatch Logs and S3, ECS), configured by the
    /// environment: `SKED_TABLE`, `SKED_QUEUE_HIGH`/`_NORMAL`/`_LOW`, `SKED_LOG_BUCKET`,
    /// `SKED_LOG_GROUP`, `SKED_ECS_*`, `AWS_ENDPOINT_URL`. Needs a build with `--features aws`.
    Aws,
}

/// `sked worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Where the work comes from.
    #[arg(long, value_enum, env = "SKED_BACKEND", default_value_t = Backend::Local)]
    pub backend: Backend,
    /// Serve this process's `GET /metrics` (and `/healthz`) on this address, behind an API key
    /// as on `sked server` (local backend; port 0 picks one, printed as
    /// `sked worker metrics on http://<addr>`).
    #[arg(long, env = "SKED_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Storage, workers and logging.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// How a client command reaches the API and prints its answer.
#[derive(Debug, Args, Clone)]
pub struct ClientArgs {
    /// Base URL of the sked API.
    #[arg(long, global = true, env = "SKED_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// API key, sent as `Authorization: Bearer <key>`; it decides the tenant and what is
    /// allowed. Without it the key is read from `--key-file`.
    #[arg(long, global = true, env = "SKED_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// File holding the API key, read when `--api-key` is not given and the file exists:
    /// by default the first operator key `sked server` wrote into its data directory.
    #[arg(long, global = true, env = "SKED_KEY_FILE", default_value = "./sked-data/admin.key")]
    pub key_file: PathBuf,
    /// Print the API's JSON as is instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// Sign requests with AWS SigV4, for an API deployed with `AuthMode: IAM`, with the
    /// credentials of the AWS SDK's default chain (environment, profile, SSO, role); no API
    /// key is sent. Needs a sked built with the `aws` feature.
    #[arg(long, global = true, env = "SKED_SIGV4")]
    pub sigv4: bool,
    /// The service the signature is for: `execute-api` (the HTTP API) or `lambda` (a function
    /// URL). Default: from the `--url`'s host.
    #[arg(long, global = true, env = "SKED_SIGV4_SERVICE")]
    pub sigv4_service: Option<String>,
    /// The region the signature is for. Default: from the `--url`'s host.
    #[arg(long, global = true, env = "SKED_SIGV4_REGION")]
    pub sigv4_region: Option<String>,
}

/// `sked keys …`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Creates a key and prints it: the only time it is shown.
    Create {
        /// What it may do: read, write, admin or operator.
        #[arg(long, default_value = "write")]
        role: String,
        /// A label for people.
        #[arg(long)]
        name: String,
        /// The tenant it acts for (an operator may name any; default: the caller's).
        #[arg(long = "for-tenant")]
        tenant: Option<String>,
    },
    /// Lists keys (never their secrets).
    List,
    /// Revokes a key: refused from then on.
    Revoke {
        /// The key's id (`key_…`, from `keys list`).
        id: String,
    },
}

/// `sked tenants …`.
#[derive(Debug, Subcommand)]
pub enum TenantsCommand {
    /// Shows a tenant's quota; with any limit flag (or `--unlimited`), sets it: the limits
    /// given replace the whole quota, and a limit not given is none.
    Quota(QuotaArgs),
    /// Shows since when your tenant has the secret that signs its alerts; with `--rotate`,
    /// makes a new one and prints it (the only time it is shown). An admin key.
    WebhookSecret {
        /// Makes a new secret, replacing the one before.
        #[arg(long)]
        rotate: bool,
    },
}

/// `sked tenants quota`.
#[derive(Debug, Args)]
pub struct QuotaArgs {
    /// The tenant.
    pub tenant: String,
    /// Most jobs ACTIVE or PAUSED at once.
    #[arg(long)]
    pub max_active_jobs: Option<u64>,
    /// Most runs RUNNING at once, across every worker.
    #[arg(long)]
    pub max_concurrent_runs: Option<u64>,
    /// Most submissions (jobs created, runs triggered) per second, sustained.
    #[arg(long, requires = "burst")]
    pub submit_rate: Option<f64>,
    /// Submissions allowed at once (with `--submit-rate`).
    #[arg(long, requires = "submit_rate")]
    pub burst: Option<u32>,
    /// Sets a quota with no limits.
    #[arg(long, conflicts_with_all = ["max_active_jobs", "max_concurrent_runs", "submit_rate"])]
    pub unlimited: bool,
}

/// `sked jobs …`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Creates a job from a JSON file (`--file`, `-` for stdin; a `{"jobs": [...]}` file
    /// creates them all in one batch) or from flags and the command after `--`, e.g.
    /// `sked jobs create --every 5m -- /usr/bin/backup --fast`.
    Create(Box<CreateArgs>),
    /// Lists jobs.
    List {
        /// Only jobs in this state (ACTIVE, PAUSED, COMPLETED, DELETED).
        #[arg(long)]
        state: Option<String>,
        /// Only jobs with this label (`key=value`; repeatable).
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        /// At most this many (all pages are followed otherwise).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Shows one job.
    Get {
        /// Job id.
        id: String,
    },
    /// Replaces a job's definition with the JSON in `--file` (`-` for stdin).
    Update {
        /// Job id.
        id: String,
        /// The new definition.
        #[arg(long, short)]
        file: PathBuf,
        /// Merge the file into the job (PATCH) instead of replacing it (PUT).
        #[arg(long)]
        patch: bool,
    },
    /// Deletes a job: no new runs; running attempts finish unless `--cancel-running`.
    Delete {
        /// Job id.
        id: String,
        /// Also cancel its running attempts.
        #[arg(long)]
        cancel_running: bool,
        /// Delete it even though other jobs run `--after` it.
        #[arg(long)]
        force: bool,
    },
    /// Stops a job firing until resumed.
    Pause {
        /// Job id.
        id: String,
    },
    /// Resumes a paused job.
    Resume {
        /// Job id.
        id: String,
    },
    /// Runs a job once now, outside its schedule; prints the new run.
    Trigger {
        /// Job id.
        id: String,
    },
    /// Runs a job's past occurrences in [--from, --to) that have no run yet (at most 1000);
    /// prints the ids of the runs created. Under any overlap policy but `allow` they run one
    /// after another.
    Backfill {
        /// Job id.
        id: String,
        /// First nominal time covered, RFC 3339 (included).
        #[arg(long)]
        from: String,
        /// End of the range, RFC 3339 (excluded); not later than now.
        #[arg(long)]
        to: String,
    },
    /// Prints what became of each nominal time of a job: fired (its run, how late) or
    /// skipped and why, newest first.
    Occurrences {
        /// Job id.
        id: String,
        /// Occurrences at or after this instant (RFC 3339; the job's creation by default).
        #[arg(long)]
        since: Option<String>,
        /// Occurrences before this instant (RFC 3339; now by default).
        #[arg(long)]
        until: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Explains in one sentence what happened to the occurrence of a job nearest an instant.
    Why {
        /// Job id.
        id: String,
        /// The instant (RFC 3339).
        #[arg(long)]
        at: String,
    },
    /// Prints a job's next fire times (DST applied).
    Preview {
        /// Job id.
        id: String,
        /// How many.
        #[arg(long, default_value_t = 10)]
        count: usize,
    },
}

/// `sked jobs create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// A JSON job definition (`-` for stdin); the flags below are then not allowed.
    #[arg(long, short, conflicts_with_all = ["cron", "every", "at", "after", "command"])]
    pub file: Option<PathBuf>,
    /// Job id (`[A-Za-z0-9_.-]{1,128}`); generated if absent.
    #[arg(long)]
    pub id: Option<String>,
    /// Display name.
    #[arg(long)]
    pub name: Option<String>,
    /// Cron expression (5 or 6 fields, or `@daily`-style).
    #[arg(long, group = "schedule")]
    pub cron: Option<String>,
    /// IANA time zone of `--cron`.
    #[arg(long, requires = "cron")]
    pub tz: Option<String>,
    /// Interval (`90s`, `5m`, `1h30m`).
    #[arg(long, group = "schedule")]
    pub every: Option<String>,
    /// One instant: RFC 3339, `now`, or `+DURATION` from now (e.g. `+30s`).
    #[arg(long, group = "schedule")]
    pub at: Option<String>,
    /// Run after these jobs (comma-separated ids), at each nominal time they run at, once
    /// their runs at that time ended as `--on` asks.
    #[arg(long, group = "schedule", value_delimiter = ',', value_name = "JOB,...")]
    pub after: Option<Vec<String>>,
    /// With `--after`: `success` (default), `failure` or `any`.
    #[arg(long, requires = "after")]
    pub on: Option<String>,
    /// With `--after`: give an occurrence up if its upstreams have not all ended this long
    /// after the first did (`30m`, `1h`).
    #[arg(long, requires = "after")]
    pub within: Option<String>,
    /// Random start delay (< interval).
    #[arg(long)]
    pub jitter: Option<String>,
    /// 0..=9, 9 highest.
    #[arg(long)]
    pub priority: Option<u8>,
    /// Retries after the first attempt.
    #[arg(long)]
    pub max_retries: Option<u32>,
    /// Delay before the first retry (exponential after).
    #[arg(long)]
    pub backoff: Option<String>,
    /// Per-attempt timeout.
    #[arg(long)]
    pub timeout: Option<String>,
    /// What a timeout does: `fail`, `retry`, or a job id to trigger.
    #[arg(long)]
    pub on_timeout: Option<String>,
    /// `allow`, `forbid`, `replace` or `queue_one`.
    #[arg(long)]
    pub overlap: Option<String>,
    /// `fire_once`, `fire_all` or `skip`.
    #[arg(long)]
    pub misfire: Option<String>,
    /// A concurrency key: at most `--concurrency-limit` runs of the tenant's jobs naming it
    /// run at once (`[A-Za-z0-9_.:-]{1,64}`).
    #[arg(long)]
    pub concurrency_key: Option<String>,
    /// Most runs holding `--concurrency-key` at once (default 1).
    #[arg(long, requires = "concurrency_key")]
    pub concurrency_limit: Option<u32>,
    /// Posts an alert to this URL when a run ends as `--notify-on` says, signed with the
    /// tenant's webhook secret (`sked tenants webhook-secret --rotate`).
    #[arg(long, value_name = "URL")]
    pub notify_webhook: Option<String>,
    /// Which ends to post, comma-separated: `succeeded`, `failed`, `timed_out`, `cancelled`,
    /// `skipped` (default `failed,timed_out`).
    #[arg(long, value_delimiter = ',', requires = "notify_webhook")]
    pub notify_on: Vec<String>,
    /// A label (`key=value`; repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// An environment variable for the command (`KEY=VALUE`; repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Working directory of the command.
    #[arg(long)]
    pub cwd: Option<String>,
    /// The command to run (program and arguments, exec'd without a shell).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `sked runs …`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Lists runs, newest first (one job's with `--job`, else across jobs).
    List {
        /// Only this job's runs.
        #[arg(long)]
        job: Option<String>,
        /// Only runs in this state (PENDING, RUNNING, SUCCEEDED, FAILED, TIMED_OUT, CANCELLED, SKIPPED).
        #[arg(long)]
        state: Option<String>,
        /// Only runs scheduled at or after this instant (RFC 3339).
        #[arg(long)]
        since: Option<String>,
        /// Only runs scheduled before this instant (RFC 3339).
        #[arg(long)]
        until: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Shows one run and its attempts. Exit code: 1 if the run ended FAILED, TIMED_OUT,
    /// CANCELLED or SKIPPED, else 0 (so a PENDING or RUNNING run exits 0 unless `--wait`).
    Get {
        /// Run id.
        run_id: String,
        /// Wait until the run has ended, then exit 0 only if it SUCCEEDED.
        #[arg(long)]
        wait: bool,
    },
    /// Cancels a run: a PENDING one never starts, a RUNNING one is stopped.
    Cancel {
        /// Run id.
        run_id: String,
    },
}

/// `sked logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Run id.
    pub run_id: String,
    /// Attempt number (1-based); the latest if absent.
    #[arg(long)]
    pub attempt: Option<u32>,
    /// Only `stdout` or `stderr`.
    #[arg(long)]
    pub stream: Option<String>,
    /// Only the last N lines.
    #[arg(long)]
    pub tail: Option<usize>,
    /// Keep printing lines as they are written, until the attempt ends.
    #[arg(long, short)]
    pub follow: bool,
    /// Prefix each line with its timestamp and stream.
    #[arg(long, short)]
    pub timestamps: bool,
}
