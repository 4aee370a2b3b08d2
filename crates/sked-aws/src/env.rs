//! The environment of sked's AWS processes — the Lambda functions and `sked worker --backend
//! aws` — in one place: every variable's name (set by `template.yaml` and by `make
//! local-aws`), its default, and [`Settings::from_env`], which a main calls once. Nothing
//! below a main reads the environment: the settings are passed in.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `AWS_REGION` | region (Lambda and ECS set it) | `us-east-1` |
//! | `AWS_ENDPOINT_URL` | one endpoint for every service (moto, LocalStack) | AWS itself |
//! | `SKED_TABLE` | the DynamoDB table | required |
//! | `SKED_QUEUE_HIGH`, `SKED_QUEUE_NORMAL`, `SKED_QUEUE_LOW` | dispatch queue URLs | required |
//! | `SKED_QUEUE_DLQ` | dead-letter queue URL | required by the worker and DLQ function; else empty |
//! | `SKED_SHARDS` | shards of the sharded index keys (fixed for a table's life) | 4 |
//! | `SKED_RUN_RETENTION` | how long ended runs are kept (TTL), e.g. `30d` | `30d` |
//! | `SKED_IDEMPOTENCY_RETENTION` | how long idempotency keys are kept | `24h` |
//! | `SKED_RUN_LISTED_STATE` | which run items carry `state`, the attribute the `list` index projects: `ended`; `always` while processes older than 2026-12-04 may still read the table; `unsuccessful`, only runs that did not succeed: a success's end then writes no index entry, and a listing filtered on SUCCEEDED or an active state reads the items of the succeeded runs it passes ([`crate::RunListedState`]) | `ended` |
//! | `SKED_UNWRITTEN_ONE_SHOTS` | leave one-shots' plain firings unwritten (`true`/`false`; the same in every process: [`crate::AwsConfig::unwritten_one_shots`]) | `false` |
//! | `SKED_JOB_KEYS` | where a job's item is keyed: `per-job`, or `tenant-shards` (no `list` index entry per job); a property of the table, chosen by its first process and refused otherwise after ([`crate::JobKeys`], [`crate::check_table_layout`]) | `per-job` |
//! | `SKED_MAX_RECEIVE_COUNT` | receives before SQS dead-letters a message (the redrive policy's) | 5 |
//! | `SKED_LOOKAHEAD` | how far ahead the sweeper fires, and the API fires directly (≤ `15m`) | `10m` |
//! | `SKED_LOG_BUCKET`, `SKED_LOG_GROUP` | S3 bucket and CloudWatch Logs group of attempt logs ([`LogsConfig`]); both or neither | none: no logs |
//! | `SKED_LOG_RETENTION_DAYS` | days logs are kept (bootstrap only) | 30 |
//! | `SKED_LOG_STREAM_AFTER` | how long an attempt runs before its lines go to CloudWatch ([`LogsConfig::stream_after`]; `0s`: from the first line) | `1s` |
//! | `SKED_ECS_CLUSTER` | ECS cluster for `container` tasks ([`EcsConfig`]) | none: container tasks unsupported |
//! | `SKED_ECS_TASK_DEFINITION` | task definition used as the template | required with a cluster |
//! | `SKED_ECS_CONTAINER` | its container that runs the job's command | `payload` |
//! | `SKED_ECS_SUBNETS`, `SKED_ECS_SECURITY_GROUPS` | comma-separated awsvpc network of container tasks | subnets required with a cluster |
//! | `SKED_ECS_ASSIGN_PUBLIC_IP` | `true` to give tasks a public IP | `false` |
//! | `SKED_TENANT_CLAIM`, `SKED_ROLE_CLAIM` | API function (read by its main): the JWT claims naming the caller's tenant and role | `custom:sked_tenant`, `custom:sked_role` |
//! | `SKED_IAM_PRINCIPALS` | API function (read by its main), IAM mode: `<principal ARN>=<tenant>:<role>,…`, the IAM roles and users allowed and who they act as (template parameter `IamPrincipals`) | empty: no IAM caller is allowed |
//! | `SKED_AUTH_MODE` | API function: `JWT` or `IAM`, informational (the function goes by what the authorizer verified: JWT claims or an IAM caller) | `JWT` |
//! | `SKED_LOCAL_IDENTITY` | `make local-aws` only (no gateway verifies anything there): `<tenant>:<role>` of every request with nothing verified | none: such requests are refused |
//! | `SKED_AWS_FAULT_THROTTLE` | chaos tests only: fraction of AWS requests answered with a throttling error instead of being sent ([`crate::fault`]) | `0`: none |
//! | `SKED_AWS_FAULT_LOST_ANSWER` | chaos tests only: fraction of AWS requests sent whose answer is replaced by a 500 | `0`: none |
//! | `SKED_AWS_FAULT_SEED` | seed of the fault draw | `1` |
//!
//! Credentials are not read here: the SDK's default chain finds them (the function's or
//! task's role on AWS; `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` against moto).

use crate::config::{AwsConfig, EcsConfig, LogsConfig, QueueUrls};
use crate::fault::Faults;
use sked_core::duration::Dur;
use std::time::Duration;

/// `AWS_REGION`.
pub const REGION: &str = "AWS_REGION";
/// `AWS_ENDPOINT_URL`.
pub const ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";
/// `SKED_TABLE`.
pub const TABLE: &str = "SKED_TABLE";
/// `SKED_QUEUE_HIGH`.
pub const QUEUE_HIGH: &str = "SKED_QUEUE_HIGH";
/// `SKED_QUEUE_NORMAL`.
pub const QUEUE_NORMAL: &str = "SKED_QUEUE_NORMAL";
/// `SKED_QUEUE_LOW`.
pub const QUEUE_LOW: &str = "SKED_QUEUE_LOW";
/// `SKED_QUEUE_DLQ`.
pub const QUEUE_DLQ: &str = "SKED_QUEUE_DLQ";
/// `SKED_SHARDS`.
pub const SHARDS: &str = "SKED_SHARDS";
/// `SKED_RUN_RETENTION`.
pub const RUN_RETENTION: &str = "SKED_RUN_RETENTION";
/// `SKED_IDEMPOTENCY_RETENTION`.
pub const IDEMPOTENCY_RETENTION: &str = "SKED_IDEMPOTENCY_RETENTION";
/// `SKED_RUN_LISTED_STATE`.
pub const RUN_LISTED_STATE: &str = "SKED_RUN_LISTED_STATE";
/// `SKED_UNWRITTEN_ONE_SHOTS`.
pub const UNWRITTEN_ONE_SHOTS: &str = "SKED_UNWRITTEN_ONE_SHOTS";
/// `SKED_JOB_KEYS`.
pub const JOB_KEYS: &str = "SKED_JOB_KEYS";
/// `SKED_MAX_RECEIVE_COUNT`.
pub const MAX_RECEIVE_COUNT: &str = "SKED_MAX_RECEIVE_COUNT";
/// `SKED_LOOKAHEAD`.
pub const LOOKAHEAD: &str = "SKED_LOOKAHEAD";
/// `SKED_LOG_BUCKET`.
pub const LOG_BUCKET: &str = "SKED_LOG_BUCKET";
/// `SKED_LOG_GROUP`.
pub const LOG_GROUP: &str = "SKED_LOG_GROUP";
/// `SKED_LOG_RETENTION_DAYS`.
pub const LOG_RETENTION_DAYS: &str = "SKED_LOG_RETENTION_DAYS";
/// `SKED_LOG_STREAM_AFTER`.
pub const LOG_STREAM_AFTER: &str = "SKED_LOG_STREAM_AFTER";
/// `SKED_ECS_CLUSTER`.
pub const ECS_CLUSTER: &str = "SKED_ECS_CLUSTER";
/// `SKED_ECS_TASK_DEFINITION`.
pub const ECS_TASK_DEFINITION: &str = "SKED_ECS_TASK_DEFINITION";
/// `SKED_ECS_CONTAINER`.
pub const ECS_CONTAINER: &str = "SKED_ECS_CONTAINER";
/// `SKED_ECS_ASSIGN_PUBLIC_IP`.
pub const ECS_ASSIGN_PUBLIC_IP: &str = "SKED_ECS_ASSIGN_PUBLIC_IP";
/// `SKED_AWS_FAULT_THROTTLE`.
pub const FAULT_THROTTLE: &str = "SKED_AWS_FAULT_THROTTLE";
/// `SKED_AWS_FAULT_LOST_ANSWER`.
pub const FAULT_LOST_ANSWER: &str = "SKED_AWS_FAULT_LOST_ANSWER";
/// `SKED_AWS_FAULT_SEED`.
pub const FAULT_SEED: &str = "SKED_AWS_FAULT_SEED";
/// The default of `SKED_ECS_CONTAINER`.
pub const DEFAULT_ECS_CONTAINER: &str = "payload";
/// `SKED_ECS_SUBNETS`.
pub const ECS_SUBNETS: &str = "SKED_ECS_SUBNETS";
/// `SKED_ECS_SECURITY_GROUPS`.
pub const ECS_SECURITY_GROUPS: &str = "SKED_ECS_SECURITY_GROUPS";
/// Namespace of the embedded-metric-format lines ([`crate::emf`]); `sked` by default.
pub const METRICS_NAMESPACE: &str = "SKED_METRICS_NAMESPACE";
/// The `Deployment` dimension of those lines (the template sets the stack's name).
pub const DEPLOYMENT: &str = "SKED_DEPLOYMENT";
/// Seconds between two EMF flushes of a worker process (default 60).
pub const METRICS_INTERVAL: &str = "SKED_METRICS_INTERVAL";

/// The default look-ahead: 10 minutes, well inside SQS's 15-minute `DelaySeconds` limit and
/// long enough that a sweeper ticking every minute finds every job several ticks early.
pub const DEFAULT_LOOKAHEAD: Dur = Dur::secs(600);
/// The longest look-ahead: SQS delays a message at most 15 minutes.
pub const MAX_LOOKAHEAD: Dur = Dur::secs(900);

/// A variable that is missing or malformed.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A required variable is not set (or empty).
    #[error("{0} is not set")]
    Missing(&'static str),
    /// A variable's value does not parse.
    #[error("{name}={value:?}: {problem}")]
    Invalid {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        problem: String,
    },
}

/// Everything sked's AWS processes read from the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Region, endpoint, table, queues, logs and ECS.
    pub aws: AwsConfig,
    /// How far ahead the sweeper fires jobs (and the API fires directly).
    pub lookahead: Dur,
}

impl Settings {
    /// Reads the process environment (once, in a main).
    pub fn from_env() -> Result<Settings, EnvError> {
        Settings::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `var` (the environment, or a map in tests). Empty values
    /// count as unset.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Settings, EnvError> {
        let get = |name: &str| var(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let required = |name: &'static str| get(name).ok_or(EnvError::Missing(name));
        let queues = QueueUrls {
            high: required(QUEUE_HIGH)?,
            normal: required(QUEUE_NORMAL)?,
            low: required(QUEUE_LOW)?,
            dlq: get(QUEUE_DLQ).unwrap_or_default(),
        };
        let region = get(REGION).unwrap_or_else(|| "us-east-1".into());
        let mut aws = AwsConfig::new(region, required(TABLE)?, queues);
        aws.endpoint_url = get(ENDPOINT_URL);
        if let Some(v) = get(SHARDS) {
            aws.shards = parse_number(SHARDS, &v).and_then(|n| positive(SHARDS, &v, n))?;
        }
        if let Some(v) = get(MAX_RECEIVE_COUNT) {
            aws.max_receive_count =
                parse_number(MAX_RECEIVE_COUNT, &v).and_then(|n| positive(MAX_RECEIVE_COUNT, &v, n))?;
        }
        if let Some(v) = get(RUN_RETENTION) {
            aws.run_retention = parse_dur(RUN_RETENTION, &v)?.0;
        }
        if let Some(v) = get(IDEMPOTENCY_RETENTION) {
            aws.idempotency_retention = parse_dur(IDEMPOTENCY_RETENTION, &v)?.0;
        }
        if let Some(v) = get(RUN_LISTED_STATE) {
            aws.run_listed_state = v.parse().map_err(|e: String| invalid(RUN_LISTED_STATE, &v, e))?;
        }
        if let Some(v) = get(UNWRITTEN_ONE_SHOTS) {
            aws.unwritten_one_shots = parse_switch(UNWRITTEN_ONE_SHOTS, &v)?;
        }
        if let Some(v) = get(JOB_KEYS) {
            aws.job_keys = v.parse().map_err(|e: String| invalid(JOB_KEYS, &v, e))?;
        }
        let lookahead = match get(LOOKAHEAD) {
            Some(v) => {
                let d = parse_dur(LOOKAHEAD, &v)?;
                if d > MAX_LOOKAHEAD {
                    return Err(invalid(
                        LOOKAHEAD,
                        &v,
                        "at most 15m: SQS delays a message at most 15 minutes",
                    ));
                }
                d
            }
            None => DEFAULT_LOOKAHEAD,
        };
        let list = |name| -> Vec<String> {
            get(name)
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default()
        };
        aws.logs = match (get(LOG_BUCKET), get(LOG_GROUP)) {
            (Some(bucket), Some(group)) => {
                let mut logs = LogsConfig::new(bucket, group);
                if let Some(v) = get(LOG_RETENTION_DAYS) {
                    logs.retention_days = parse_number(LOG_RETENTION_DAYS, &v)?;
                }
                if let Some(v) = get(LOG_STREAM_AFTER) {
                    logs.stream_after = parse_dur(LOG_STREAM_AFTER, &v)?.0;
                }
                Some(logs)
            }
            (None, None) => None,
            (Some(_), None) => return Err(EnvError::Missing(LOG_GROUP)),
            (None, Some(_)) => return Err(EnvError::Missing(LOG_BUCKET)),
        };
        aws.ecs = match get(ECS_CLUSTER) {
            Some(cluster) => {
                let subnets = list(ECS_SUBNETS);
                if subnets.is_empty() {
                    return Err(EnvError::Missing(ECS_SUBNETS));
                }
                let mut ecs = EcsConfig::new(
                    cluster,
                    required(ECS_TASK_DEFINITION)?,
                    get(ECS_CONTAINER).unwrap_or_else(|| DEFAULT_ECS_CONTAINER.into()),
                    subnets,
                    list(ECS_SECURITY_GROUPS),
                );
                if let Some(v) = get(ECS_ASSIGN_PUBLIC_IP) {
                    ecs.assign_public_ip = parse_switch(ECS_ASSIGN_PUBLIC_IP, &v)?;
                }
                Some(ecs)
            }
            None => None,
        };
        let fraction = |name: &'static str| -> Result<f64, EnvError> {
            let Some(v) = get(name) else { return Ok(0.0) };
            match v.parse::<f64>() {
                Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
                _ => Err(invalid(name, &v, "expected a fraction between 0 and 1")),
            }
        };
        let (throttle, lost_answer) = (fraction(FAULT_THROTTLE)?, fraction(FAULT_LOST_ANSWER)?);
        if throttle + lost_answer > 1.0 {
            return Err(invalid(
                FAULT_LOST_ANSWER,
                &lost_answer.to_string(),
                "the two fault fractions exceed 1",
            ));
        }
        if throttle > 0.0 || lost_answer > 0.0 {
            let seed = match get(FAULT_SEED) {
                Some(v) => v
                    .parse()
                    .map_err(|e: std::num::ParseIntError| invalid(FAULT_SEED, &v, e.to_string()))?,
                None => 1,
            };
            aws.faults = Some(Faults {
                throttle,
                lost_answer,
                seed,
                ..Faults::default()
            });
        }
        Ok(Settings { aws, lookahead })
    }

    /// The look-ahead as a std duration.
    pub fn lookahead_std(&self) -> Duration {
        self.lookahead.0
    }

    /// The environment a process needs so that [`Settings::from_env`] reads these settings
    /// back (for starting `sked worker --backend aws` from a test or script). Static
    /// credentials become `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, which the SDK's
    /// default chain reads. Settings that have no variable (log flushing, ECS polling, the
    /// bootstrap image) are not carried: the process gets their defaults.
    pub fn to_vars(&self) -> Vec<(&'static str, String)> {
        let aws = &self.aws;
        let mut vars = vec![
            (REGION, aws.region.clone()),
            (TABLE, aws.table.clone()),
            (QUEUE_HIGH, aws.queues.high.clone()),
            (QUEUE_NORMAL, aws.queues.normal.clone()),
            (QUEUE_LOW, aws.queues.low.clone()),
            (QUEUE_DLQ, aws.queues.dlq.clone()),
            (SHARDS, aws.shards.to_string()),
            (RUN_RETENTION, Dur(aws.run_retention).to_string()),
            (IDEMPOTENCY_RETENTION, Dur(aws.idempotency_retention).to_string()),
            (RUN_LISTED_STATE, aws.run_listed_state.to_string()),
            (UNWRITTEN_ONE_SHOTS, aws.unwritten_one_shots.to_string()),
            (JOB_KEYS, aws.job_keys.to_string()),
            (MAX_RECEIVE_COUNT, aws.max_receive_count.to_string()),
            (LOOKAHEAD, self.lookahead.to_string()),
        ];
        if let Some(url) = &aws.endpoint_url {
            vars.push((ENDPOINT_URL, url.clone()));
        }
        if let Some(creds) = &aws.credentials {
            vars.push(("AWS_ACCESS_KEY_ID", creds.access_key_id.clone()));
            vars.push(("AWS_SECRET_ACCESS_KEY", creds.secret_access_key.clone()));
        }
        if let Some(logs) = &aws.logs {
            vars.push((LOG_BUCKET, logs.bucket.clone()));
            vars.push((LOG_GROUP, logs.log_group.clone()));
            vars.push((LOG_RETENTION_DAYS, logs.retention_days.to_string()));
            vars.push((LOG_STREAM_AFTER, Dur(logs.stream_after).to_string()));
        }
        if let Some(ecs) = &aws.ecs {
            vars.push((ECS_CLUSTER, ecs.cluster.clone()));
            vars.push((ECS_TASK_DEFINITION, ecs.task_definition.clone()));
            vars.push((ECS_CONTAINER, ecs.container_name.clone()));
            vars.push((ECS_SUBNETS, ecs.subnets.join(",")));
            vars.push((ECS_SECURITY_GROUPS, ecs.security_groups.join(",")));
            vars.push((ECS_ASSIGN_PUBLIC_IP, ecs.assign_public_ip.to_string()));
        }
        if let Some(faults) = &aws.faults {
            vars.push((FAULT_THROTTLE, faults.throttle.to_string()));
            vars.push((FAULT_LOST_ANSWER, faults.lost_answer.to_string()));
            vars.push((FAULT_SEED, faults.seed.to_string()));
        }
        vars
    }
}

impl AwsConfig {
    /// The [`AwsConfig`] part of [`Settings::from_env`].
    pub fn from_env() -> Result<AwsConfig, EnvError> {
        Settings::from_env().map(|s| s.aws)
    }
}

fn invalid(name: &'static str, value: &str, problem: impl Into<String>) -> EnvError {
    EnvError::Invalid {
        name,
        value: value.to_string(),
        problem: problem.into(),
    }
}

/// A switch: `true`, `1`, `yes`, `enabled`, or `false`, `0`, `no`, `disabled`.
fn parse_switch(name: &'static str, value: &str) -> Result<bool, EnvError> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "enabled" => Ok(true),
        "false" | "0" | "no" | "disabled" => Ok(false),
        _ => Err(invalid(name, value, "expected true or false")),
    }
}

fn parse_number(name: &'static str, value: &str) -> Result<u32, EnvError> {
    value
        .parse()
        .map_err(|e: std::num::ParseIntError| invalid(name, value, e.to_string()))
}

fn positive(name: &'static str, value: &str, n: u32) -> Result<u32, EnvError> {
    if n == 0 {
        Err(invalid(name, value, "must be at least 1"))
    } else {
        Ok(n)
    }
}

fn parse_dur(name: &'static str, value: &str) -> Result<Dur, EnvError> {
    value.parse::<Dur>().map_err(|e| invalid(name, value, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, EnvError> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_lookup(|k| map.get(k).cloned())
    }

    const BASE: &[(&str, &str)] = &[
        (TABLE, "sked"),
        (QUEUE_HIGH, "http://q/high"),
        (QUEUE_NORMAL, "http://q/normal"),
        (QUEUE_LOW, "http://q/low"),
    ];

    #[test]
    fn the_minimum_is_a_table_and_three_queues_with_documented_defaults() {
        let s = settings(BASE).unwrap();
        assert_eq!(s.aws.table, "sked");
        assert_eq!(s.aws.queues.high, "http://q/high");
        assert_eq!(s.aws.region, "us-east-1");
        assert_eq!(s.aws.endpoint_url, None);
        assert_eq!(s.aws.credentials, None);
        assert_eq!(s.aws.shards, 4);
        assert_eq!(s.aws.run_listed_state, crate::RunListedState::Ended);
        assert!(!s.aws.unwritten_one_shots);
        assert_eq!(s.aws.job_keys, crate::JobKeys::PerJob);
        assert_eq!(s.lookahead, DEFAULT_LOOKAHEAD);
        assert_eq!((s.aws.logs, s.aws.ecs), (None, None));
    }

    #[test]
    fn every_variable_is_read() {
        let mut vars = BASE.to_vec();
        vars.extend([
            (REGION, "eu-west-1"),
            (ENDPOINT_URL, "http://127.0.0.1:5000"),
            (QUEUE_DLQ, "http://q/dlq"),
            (SHARDS, "8"),
            (RUN_RETENTION, "7d"),
            (RUN_LISTED_STATE, "always"),
            (UNWRITTEN_ONE_SHOTS, "yes"),
            (JOB_KEYS, "tenant-shards"),
            (MAX_RECEIVE_COUNT, "3"),
            (LOOKAHEAD, "5m"),
            (LOG_BUCKET, "logs"),
            (LOG_GROUP, "/sked/runs"),
            (ECS_CLUSTER, "sked"),
            (ECS_TASK_DEFINITION, "sked-payload"),
            (ECS_SUBNETS, "subnet-1, subnet-2"),
            (ECS_ASSIGN_PUBLIC_IP, "true"),
        ]);
        let s = settings(&vars).unwrap();
        assert_eq!(s.aws.region, "eu-west-1");
        assert_eq!(s.aws.endpoint_url.as_deref(), Some("http://127.0.0.1:5000"));
        assert_eq!(s.aws.queues.dlq, "http://q/dlq");
        assert_eq!(s.aws.shards, 8);
        assert_eq!(s.aws.run_retention, Duration::from_secs(7 * 86_400));
        assert_eq!(s.aws.max_receive_count, 3);
        assert_eq!(s.aws.run_listed_state, crate::RunListedState::Always);
        assert!(s.aws.unwritten_one_shots);
        assert_eq!(s.aws.job_keys, crate::JobKeys::TenantShards);
        assert_eq!(s.lookahead, Dur::secs(300));
        let logs = s.aws.logs.unwrap();
        assert_eq!((logs.bucket.as_str(), logs.log_group.as_str()), ("logs", "/sked/runs"));
        let ecs = s.aws.ecs.unwrap();
        assert_eq!(ecs.cluster, "sked");
        assert_eq!(ecs.task_definition, "sked-payload");
        assert_eq!(ecs.container_name, DEFAULT_ECS_CONTAINER);
        assert_eq!(ecs.subnets, vec!["subnet-1", "subnet-2"]);
        assert!(ecs.security_groups.is_empty());
        assert!(ecs.assign_public_ip);
    }

    #[test]
    fn to_vars_reads_back_as_the_same_settings() {
        let mut vars = BASE.to_vec();
        vars.extend([
            (ENDPOINT_URL, "http://127.0.0.1:5000"),
            (QUEUE_DLQ, "http://q/dlq"),
            (SHARDS, "8"),
            (RUN_RETENTION, "7d"),
            (IDEMPOTENCY_RETENTION, "90m"),
            (RUN_LISTED_STATE, "always"),
            (UNWRITTEN_ONE_SHOTS, "true"),
            (JOB_KEYS, "tenant-shards"),
            (LOOKAHEAD, "5m"),
            (LOG_BUCKET, "logs"),
            (LOG_GROUP, "/sked/runs"),
            (LOG_RETENTION_DAYS, "7"),
            (LOG_STREAM_AFTER, "250ms"),
            (ECS_CLUSTER, "sked"),
            (ECS_TASK_DEFINITION, "sked-payload"),
            (ECS_SUBNETS, "subnet-1,subnet-2"),
            (ECS_SECURITY_GROUPS, "sg-1"),
            (FAULT_THROTTLE, "0.05"),
            (FAULT_SEED, "42"),
        ]);
        let original = settings(&vars).unwrap();
        let written: Vec<(String, String)> = original
            .to_vars()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let pairs: Vec<(&str, &str)> = written.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(settings(&pairs).unwrap(), original);
    }

    #[test]
    fn faults_are_off_unless_a_fraction_is_set() {
        assert_eq!(settings(BASE).unwrap().aws.faults, None);
        let mut vars = BASE.to_vec();
        vars.push((FAULT_THROTTLE, "0.1"));
        let faults = settings(&vars).unwrap().aws.faults.unwrap();
        assert_eq!((faults.throttle, faults.lost_answer, faults.seed), (0.1, 0.0, 1));
        vars.push((FAULT_LOST_ANSWER, "0.95"));
        assert!(settings(&vars).unwrap_err().to_string().contains(FAULT_LOST_ANSWER));
        vars.pop();
        vars.push((FAULT_SEED, "x"));
        assert!(settings(&vars).unwrap_err().to_string().contains(FAULT_SEED));
        vars.pop();
        vars[BASE.len()] = (FAULT_THROTTLE, "2");
        assert!(settings(&vars).unwrap_err().to_string().contains(FAULT_THROTTLE));
    }

    #[test]
    fn missing_and_malformed_values_name_the_variable() {
        let err = settings(&BASE[1..]).unwrap_err().to_string();
        assert!(err.contains(TABLE), "{err}");
        let mut vars = BASE.to_vec();
        vars.push((LOOKAHEAD, "20m"));
        let err = settings(&vars).unwrap_err().to_string();
        assert!(err.contains(LOOKAHEAD) && err.contains("15m"), "{err}");
        vars.pop();
        vars.push((SHARDS, "0"));
        assert!(settings(&vars).unwrap_err().to_string().contains(SHARDS));
        vars.pop();
        vars.push((RUN_LISTED_STATE, "sometimes"));
        assert!(settings(&vars).unwrap_err().to_string().contains(RUN_LISTED_STATE));
        vars.pop();
        vars.push((JOB_KEYS, "per-tenant"));
        assert!(settings(&vars).unwrap_err().to_string().contains(JOB_KEYS));
        vars.pop();
        vars.push((LOG_BUCKET, "logs"));
        assert!(settings(&vars).unwrap_err().to_string().contains(LOG_GROUP));
        vars.pop();
        vars.push((ECS_CLUSTER, "sked"));
        assert!(settings(&vars).unwrap_err().to_string().contains(ECS_SUBNETS));
    }
}
