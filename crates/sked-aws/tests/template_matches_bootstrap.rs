//! `template.yaml` ⇄ [`sked_aws::bootstrap`]: the resources a deployment gets from the SAM
//! template and the ones `make local-aws` and the tests get from the bootstrap must be the same
//! where the code depends on them — the table's keys, attribute definitions, indexes
//! (names, keys, projections), billing mode and TTL attribute; the queues' redrive
//! (maxReceiveCount, all three into the one DLQ) and the DLQ's retention; the log bucket's
//! expiry rule and the log group's retention. So the two cannot drift.
//!
//! The bootstrap side is not read from constants: it is created on moto and described back
//! (`DescribeTable`, `DescribeTimeToLive`, `GetQueueAttributes`,
//! `GetBucketLifecycleConfiguration`, `DescribeLogGroups`), so whatever the bootstrap
//! code does is what is compared. The template side is parsed with serde_yaml; CloudFormation
//! intrinsics may be written either as tags (`!Ref X`, `!GetAtt X.Arn`) or as maps
//! (`Ref: X`, `Fn::GetAtt: [X, Arn]`).
//!
//! Also checked without moto: the environment the template gives the functions and the worker
//! names each resource the code expects under the variable `sked_aws::env` reads, and the
//! template's parameter defaults equal [`AwsConfig`]'s documented defaults.

use aws_sdk_sqs::types::QueueAttributeName;
use serde_yaml::Value;
use sked_aws::env;
use sked_aws::testing::{fresh_config, fresh_resources, repo_root, unique};
use sked_aws::{AwsConfig, LogsConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

// ------------------------------------------------------------------ the shapes compared

/// One key element: attribute name and `HASH` / `RANGE`.
type Key = (String, String);

/// A global secondary index, as far as the code depends on it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IndexShape {
    keys: Vec<Key>,
    projection: String,
    non_key_attributes: BTreeSet<String>,
}

/// The table, as far as the code depends on it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TableShape {
    keys: Vec<Key>,
    attributes: BTreeSet<(String, String)>,
    /// Global and local secondary indexes, a local one's name prefixed `local:`.
    indexes: BTreeMap<String, IndexShape>,
    billing_mode: String,
    ttl_attribute: String,
}

/// A queue's dead-letter setting: `None` for the DLQ itself.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Redrive {
    max_receive_count: u32,
    /// Which of the four queues it dead-letters into (`"dlq"` when right).
    target: String,
}

/// Where attempt logs are kept, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LogsShape {
    /// The bucket's expiring lifecycle rule: id, key prefix, days.
    rule: (String, String, u32),
    /// The log group's retention in days.
    group_retention_days: u32,
}

/// The four queues by role (high, normal, low, dlq).
#[derive(Debug, Clone, PartialEq, Eq)]
struct QueuesShape {
    redrive: BTreeMap<&'static str, Option<Redrive>>,
    dlq_retention_secs: u32,
}

// ------------------------------------------------------------------ template side

/// template.yaml, parsed.
struct Template(Value);

/// An intrinsic function call in the template, whichever way it is written.
#[derive(Debug, PartialEq)]
enum Intrinsic {
    /// `!Ref X` / `Ref: X`.
    Ref(String),
    /// `!GetAtt X.Attr` / `Fn::GetAtt: [X, Attr]`.
    GetAtt(String, String),
    /// `!Sub "..."` / `Fn::Sub: "..."` (the string form).
    Sub(String),
}

fn intrinsic(v: &Value) -> Option<Intrinsic> {
    let (name, arg) = match v {
        Value::Tagged(t) => (t.tag.to_string().trim_start_matches('!').to_string(), &t.value),
        Value::Mapping(m) if m.len() == 1 => {
            let (k, v) = m.iter().next()?;
            (k.as_str()?.trim_start_matches("Fn::").to_string(), v)
        }
        _ => return None,
    };
    match (name.as_str(), arg) {
        ("Ref", Value::String(s)) => Some(Intrinsic::Ref(s.clone())),
        ("GetAtt", Value::String(s)) => {
            let (res, attr) = s.split_once('.')?;
            Some(Intrinsic::GetAtt(res.into(), attr.into()))
        }
        ("GetAtt", Value::Sequence(parts)) if parts.len() == 2 => {
            Some(Intrinsic::GetAtt(parts[0].as_str()?.into(), parts[1].as_str()?.into()))
        }
        ("Sub", Value::String(s)) => Some(Intrinsic::Sub(s.clone())),
        _ => None,
    }
}

/// A scalar as text (numbers and booleans too: CloudFormation takes either).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn text(v: &Value, what: &str) -> String {
    scalar(v).unwrap_or_else(|| panic!("{what}: expected a scalar, found {v:?}"))
}

fn list<'a>(v: &'a Value, what: &str) -> &'a [Value] {
    v.as_sequence()
        .map(Vec::as_slice)
        .unwrap_or_else(|| panic!("{what}: expected a list, found {v:?}"))
}

impl Template {
    fn load() -> Template {
        let path = repo_root().join("template.yaml");
        let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        Template(serde_yaml::from_str(&body).unwrap_or_else(|e| panic!("parse {}: {e}", path.display())))
    }

    fn resource(&self, id: &str) -> &Value {
        let r = &self.0["Resources"][id];
        assert!(!r.is_null(), "template.yaml has no resource {id}");
        r
    }

    /// Logical ids of the resources of type `ty`.
    fn of_type(&self, ty: &str) -> Vec<String> {
        let resources = self.0["Resources"].as_mapping().expect("Resources");
        resources
            .iter()
            .filter(|(_, r)| r["Type"].as_str() == Some(ty))
            .map(|(id, _)| id.as_str().expect("logical id").to_string())
            .collect()
    }

    /// The one resource of type `ty`.
    fn only(&self, ty: &str) -> String {
        let ids = self.of_type(ty);
        assert_eq!(ids.len(), 1, "expected one {ty} in template.yaml, found {ids:?}");
        ids.into_iter().next().unwrap()
    }

    /// The environment every function gets (`Globals.Function.Environment.Variables`).
    fn function_env(&self) -> BTreeMap<String, Value> {
        let vars = self.0["Globals"]["Function"]["Environment"]["Variables"]
            .as_mapping()
            .expect("Globals.Function.Environment.Variables");
        vars.iter()
            .map(|(k, v)| (k.as_str().expect("variable name").to_string(), v.clone()))
            .collect()
    }

    /// The environment of the worker container (`sked worker --backend aws`).
    fn worker_env(&self) -> BTreeMap<String, Value> {
        let def = &self.resource("WorkerTaskDefinition")["Properties"]["ContainerDefinitions"];
        let container = list(def, "WorkerTaskDefinition.ContainerDefinitions")
            .iter()
            .find(|c| c["Name"].as_str() == Some("worker"))
            .expect("a container named worker");
        list(&container["Environment"], "worker Environment")
            .iter()
            .map(|e| (text(&e["Name"], "Environment.Name"), e["Value"].clone()))
            .collect()
    }

    /// The logical id a variable of `env` refers to with `!Ref`.
    fn referenced(env: &BTreeMap<String, Value>, var: &str) -> String {
        let v = env.get(var).unwrap_or_else(|| panic!("{var} is not set"));
        match intrinsic(v) {
            Some(Intrinsic::Ref(id)) => id,
            other => panic!("{var} should be `!Ref <resource>`, is {other:?}"),
        }
    }

    fn parameter_default(&self, name: &str) -> String {
        text(
            &self.0["Parameters"][name]["Default"],
            &format!("Parameters.{name}.Default"),
        )
    }

    /// A value with a `!Ref` to a parameter replaced by the parameter's default.
    fn resolved(&self, v: &Value, what: &str) -> String {
        match intrinsic(v) {
            Some(Intrinsic::Ref(p)) => self.parameter_default(&p),
            _ => text(v, what),
        }
    }

    /// The log bucket's expiring rule and the run log group's retention, with default parameters.
    fn logs(&self) -> LogsShape {
        let env = self.function_env();
        let bucket = self.resource(&Template::referenced(&env, env::LOG_BUCKET));
        let rules = &bucket["Properties"]["LifecycleConfiguration"]["Rules"];
        let expiring: Vec<&Value> = list(rules, "LifecycleConfiguration.Rules")
            .iter()
            .filter(|r| !r["ExpirationInDays"].is_null())
            .collect();
        assert_eq!(expiring.len(), 1, "one expiring lifecycle rule on the log bucket");
        let r = expiring[0];
        let group = self.resource(&Template::referenced(&env, env::LOG_GROUP));
        LogsShape {
            rule: (
                text(&r["Id"], "rule Id"),
                text(&r["Prefix"], "rule Prefix"),
                self.resolved(&r["ExpirationInDays"], "ExpirationInDays")
                    .parse()
                    .expect("days"),
            ),
            group_retention_days: self
                .resolved(&group["Properties"]["RetentionInDays"], "RetentionInDays")
                .parse()
                .expect("days"),
        }
    }

    fn table(&self) -> TableShape {
        let id = self.only("AWS::DynamoDB::Table");
        let p = &self.resource(&id)["Properties"];
        let keys = |v: &Value, what: &str| -> Vec<Key> {
            list(v, what)
                .iter()
                .map(|k| (text(&k["AttributeName"], what), text(&k["KeyType"], what)))
                .collect()
        };
        let index = |g: &Value, prefix: &str| {
            let name = text(&g["IndexName"], "IndexName");
            let non_key = match &g["Projection"]["NonKeyAttributes"] {
                Value::Null => BTreeSet::new(),
                v => list(v, "NonKeyAttributes")
                    .iter()
                    .map(|a| text(a, "NonKeyAttributes"))
                    .collect(),
            };
            let shape = IndexShape {
                keys: keys(&g["KeySchema"], &format!("{name}.KeySchema")),
                projection: text(&g["Projection"]["ProjectionType"], "ProjectionType"),
                non_key_attributes: non_key,
            };
            (format!("{prefix}{name}"), shape)
        };
        let mut indexes: BTreeMap<String, IndexShape> = list(&p["GlobalSecondaryIndexes"], "GlobalSecondaryIndexes")
            .iter()
            .map(|g| index(g, ""))
            .collect();
        if !p["LocalSecondaryIndexes"].is_null() {
            indexes.extend(
                list(&p["LocalSecondaryIndexes"], "LocalSecondaryIndexes")
                    .iter()
                    .map(|g| index(g, "local:")),
            );
        }
        let ttl = &p["TimeToLiveSpecification"];
        assert_eq!(
            scalar(&ttl["Enabled"]).as_deref(),
            Some("true"),
            "the template's table must enable TTL"
        );
        TableShape {
            keys: keys(&p["KeySchema"], "KeySchema"),
            attributes: list(&p["AttributeDefinitions"], "AttributeDefinitions")
                .iter()
                .map(|a| {
                    (
                        text(&a["AttributeName"], "AttributeName"),
                        text(&a["AttributeType"], "AttributeType"),
                    )
                })
                .collect(),
            indexes,
            billing_mode: text(&p["BillingMode"], "BillingMode"),
            ttl_attribute: text(&ttl["AttributeName"], "TimeToLiveSpecification.AttributeName"),
        }
    }

    /// The queues by role, the roles found through the variables the code reads their URLs from.
    fn queues(&self) -> QueuesShape {
        let env = self.function_env();
        let ids: BTreeMap<&'static str, String> = lanes()
            .map(|(role, var)| (role, Template::referenced(&env, var)))
            .collect();
        let role_of = |id: &str| {
            ids.iter()
                .find(|(_, v)| v.as_str() == id)
                .map(|(r, _)| r.to_string())
                .unwrap_or_else(|| format!("{id} (not one of the four queues)"))
        };
        let redrive = ids
            .iter()
            .map(|(role, id)| {
                let r = self.resource(id);
                assert_eq!(r["Type"].as_str(), Some("AWS::SQS::Queue"), "{id}");
                let policy = &r["Properties"]["RedrivePolicy"];
                let shape = (!policy.is_null()).then(|| {
                    let target = match intrinsic(&policy["deadLetterTargetArn"]) {
                        Some(Intrinsic::GetAtt(q, attr)) if attr == "Arn" => role_of(&q),
                        other => panic!("{id}: deadLetterTargetArn should be a queue's Arn, is {other:?}"),
                    };
                    Redrive {
                        max_receive_count: text(&policy["maxReceiveCount"], "maxReceiveCount")
                            .parse()
                            .expect("maxReceiveCount is a number"),
                        target,
                    }
                });
                (*role, shape)
            })
            .collect();
        let dlq = self.resource(&ids["dlq"]);
        QueuesShape {
            redrive,
            dlq_retention_secs: text(&dlq["Properties"]["MessageRetentionPeriod"], "MessageRetentionPeriod")
                .parse()
                .expect("MessageRetentionPeriod is a number"),
        }
    }
}

/// The queue roles and the variables their URLs are read from.
fn lanes() -> impl Iterator<Item = (&'static str, &'static str)> {
    [
        ("high", env::QUEUE_HIGH),
        ("normal", env::QUEUE_NORMAL),
        ("low", env::QUEUE_LOW),
        ("dlq", env::QUEUE_DLQ),
    ]
    .into_iter()
}

// ------------------------------------------------------------------ bootstrap side (on moto)

async fn bootstrap_table() -> TableShape {
    let (clients, config) = fresh_resources().await;
    let ddb = &clients.dynamodb;
    let described = ddb
        .describe_table()
        .table_name(&config.table)
        .send()
        .await
        .expect("DescribeTable");
    let t = described.table().expect("a table");
    let keys = |ks: &[aws_sdk_dynamodb::types::KeySchemaElement]| -> Vec<Key> {
        ks.iter()
            .map(|k| (k.attribute_name().to_string(), k.key_type().as_str().to_string()))
            .collect()
    };
    let shape = |name: Option<&str>,
                 key_schema: &[aws_sdk_dynamodb::types::KeySchemaElement],
                 projection: Option<&aws_sdk_dynamodb::types::Projection>| {
        let projection = projection.expect("a projection");
        let shape = IndexShape {
            keys: keys(key_schema),
            projection: projection
                .projection_type()
                .map(|p| p.as_str().to_string())
                .unwrap_or_default(),
            non_key_attributes: projection.non_key_attributes().iter().cloned().collect(),
        };
        (name.unwrap_or_default().to_string(), shape)
    };
    let mut indexes: BTreeMap<String, IndexShape> = t
        .global_secondary_indexes()
        .iter()
        .map(|g| shape(g.index_name(), g.key_schema(), g.projection()))
        .collect();
    indexes.extend(t.local_secondary_indexes().iter().map(|l| {
        let (name, index) = shape(l.index_name(), l.key_schema(), l.projection());
        (format!("local:{name}"), index)
    }));
    let ttl = ddb
        .describe_time_to_live()
        .table_name(&config.table)
        .send()
        .await
        .expect("DescribeTimeToLive");
    let ttl = ttl.time_to_live_description().expect("a TTL description");
    assert_eq!(
        ttl.time_to_live_status().map(|s| s.as_str()),
        Some("ENABLED"),
        "the bootstrap must enable TTL"
    );
    TableShape {
        keys: keys(t.key_schema()),
        attributes: t
            .attribute_definitions()
            .iter()
            .map(|a| (a.attribute_name().to_string(), a.attribute_type().as_str().to_string()))
            .collect(),
        indexes,
        billing_mode: t
            .billing_mode_summary()
            .and_then(|b| b.billing_mode())
            .map(|b| b.as_str().to_string())
            .unwrap_or_default(),
        ttl_attribute: ttl.attribute_name().unwrap_or_default().to_string(),
    }
}

async fn bootstrap_queues() -> QueuesShape {
    let (clients, config) = fresh_resources().await;
    let q = &config.queues;
    let url = |role: &str| match role {
        "high" => &q.high,
        "normal" => &q.normal,
        "low" => &q.low,
        _ => &q.dlq,
    };
    let mut attributes = BTreeMap::new();
    for (role, _) in lanes() {
        let out = clients
            .sqs
            .get_queue_attributes()
            .queue_url(url(role))
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .expect("GetQueueAttributes");
        attributes.insert(role, out.attributes.unwrap_or_default());
    }
    let arn = |role: &str| attributes[role][&QueueAttributeName::QueueArn].clone();
    let role_of = |target: &str| {
        lanes()
            .map(|(role, _)| role)
            .find(|role| arn(role) == target)
            .map(String::from)
            .unwrap_or_else(|| format!("{target} (not one of the four queues)"))
    };
    let redrive = lanes()
        .map(|(role, _)| {
            let shape = attributes[role].get(&QueueAttributeName::RedrivePolicy).map(|p| {
                let p: serde_json::Value = serde_json::from_str(p).expect("RedrivePolicy is JSON");
                // SQS answers the count as a number or as a string, depending on the sender.
                let count = &p["maxReceiveCount"];
                let count = count
                    .as_u64()
                    .or_else(|| count.as_str().and_then(|s| s.parse().ok()))
                    .expect("maxReceiveCount");
                Redrive {
                    max_receive_count: u32::try_from(count).expect("a small count"),
                    target: role_of(p["deadLetterTargetArn"].as_str().expect("deadLetterTargetArn")),
                }
            });
            (role, shape)
        })
        .collect();
    QueuesShape {
        redrive,
        dlq_retention_secs: attributes["dlq"][&QueueAttributeName::MessageRetentionPeriod]
            .parse()
            .expect("MessageRetentionPeriod"),
    }
}

async fn bootstrap_logs() -> LogsShape {
    let mut config = fresh_config();
    let name = unique("sked-logs");
    config.logs = Some(LogsConfig::new(&name, format!("/sked/{name}/runs")));
    let clients = sked_aws::connect(&config).await;
    sked_aws::create_resources(&clients, &config)
        .await
        .expect("create resources");
    let logs = config.logs.as_ref().expect("logs");
    let lifecycle = clients
        .s3
        .get_bucket_lifecycle_configuration()
        .bucket(&logs.bucket)
        .send()
        .await
        .expect("GetBucketLifecycleConfiguration");
    let expiring: Vec<_> = lifecycle
        .rules()
        .iter()
        .filter(|r| r.expiration().and_then(|e| e.days()).is_some())
        .collect();
    assert_eq!(expiring.len(), 1, "one expiring lifecycle rule on the log bucket");
    let r = expiring[0];
    let groups = clients
        .logs
        .describe_log_groups()
        .log_group_name_prefix(&logs.log_group)
        .send()
        .await
        .expect("DescribeLogGroups");
    let group = groups
        .log_groups()
        .iter()
        .find(|g| g.log_group_name() == Some(logs.log_group.as_str()))
        .expect("the log group");
    LogsShape {
        rule: (
            r.id().unwrap_or_default().to_string(),
            r.filter().and_then(|f| f.prefix()).unwrap_or_default().to_string(),
            u32::try_from(r.expiration().and_then(|e| e.days()).unwrap_or_default()).expect("days"),
        ),
        group_retention_days: u32::try_from(group.retention_in_days().unwrap_or_default()).expect("days"),
    }
}

// ------------------------------------------------------------------ the tests

#[tokio::test]
async fn the_template_table_is_the_bootstrap_table() {
    let template = Template::load().table();
    let bootstrap = bootstrap_table().await;
    assert_eq!(
        template, bootstrap,
        "template.yaml's table (left) differs from what sked_aws::bootstrap creates (right)"
    );
    // Not vacuous: the indexes the store queries are there.
    assert!(template.indexes.contains_key("sched") && template.indexes.contains_key("list"));
    assert!(template.indexes.contains_key("local:active"));
}

#[tokio::test]
async fn the_template_queues_redrive_like_the_bootstrap_queues() {
    let template = Template::load().queues();
    let bootstrap = bootstrap_queues().await;
    assert_eq!(
        template, bootstrap,
        "template.yaml's queues (left) differ from what sked_aws::bootstrap creates (right)"
    );
    let into_dlq = Redrive {
        max_receive_count: AwsConfig::new("r", "t", fresh_config().queues).max_receive_count,
        target: "dlq".into(),
    };
    for lane in ["high", "normal", "low"] {
        assert_eq!(template.redrive[lane].as_ref(), Some(&into_dlq), "{lane}");
    }
    assert_eq!(template.redrive["dlq"], None, "the DLQ must not redrive");
}

/// With default parameters, attempt logs are kept as long in a deployment as the bootstrap's
/// defaults keep them, under the prefix the log store writes.
#[tokio::test]
async fn the_template_log_retention_is_the_bootstrap_log_retention() {
    let template = Template::load().logs();
    let bootstrap = bootstrap_logs().await;
    assert_eq!(
        template, bootstrap,
        "template.yaml's log bucket rule and group retention (left) differ from the bootstrap's (right)"
    );
    assert_eq!(template.rule.1, sked_aws::logs::LOG_PREFIX);
}

/// Every process gets the resources under the names `sked_aws::env` reads, pointing at the
/// same resources, and no `SKED_*` variable the code does not read (a typo would be silently
/// ignored at run time).
#[test]
fn the_template_sets_the_variables_the_code_reads() {
    let t = Template::load();
    let known: BTreeSet<&str> = [
        env::TABLE,
        env::QUEUE_HIGH,
        env::QUEUE_NORMAL,
        env::QUEUE_LOW,
        env::QUEUE_DLQ,
        env::SHARDS,
        env::RUN_RETENTION,
        env::RUN_LISTED_STATE,
        env::UNWRITTEN_ONE_SHOTS,
        env::JOB_KEYS,
        env::IDEMPOTENCY_RETENTION,
        env::MAX_RECEIVE_COUNT,
        env::LOOKAHEAD,
        env::LOG_BUCKET,
        env::LOG_GROUP,
        env::LOG_RETENTION_DAYS,
        env::LOG_STREAM_AFTER,
        env::ECS_CLUSTER,
        env::ECS_TASK_DEFINITION,
        env::ECS_CONTAINER,
        env::ECS_ASSIGN_PUBLIC_IP,
        env::ECS_SUBNETS,
        env::ECS_SECURITY_GROUPS,
        env::METRICS_NAMESPACE,
        env::DEPLOYMENT,
        env::METRICS_INTERVAL,
    ]
    .into();
    let functions = t.function_env();
    let worker = t.worker_env();
    for (who, vars) in [("Globals.Function", &functions), ("the worker", &worker)] {
        for name in vars.keys().filter(|n| n.starts_with("SKED_")) {
            assert!(
                known.contains(name.as_str()),
                "{who} sets {name}, which sked_aws::env does not read"
            );
        }
        for (var, ty) in [
            (env::TABLE, "AWS::DynamoDB::Table"),
            (env::QUEUE_HIGH, "AWS::SQS::Queue"),
            (env::QUEUE_NORMAL, "AWS::SQS::Queue"),
            (env::QUEUE_LOW, "AWS::SQS::Queue"),
            (env::QUEUE_DLQ, "AWS::SQS::Queue"),
            (env::LOG_BUCKET, "AWS::S3::Bucket"),
            (env::LOG_GROUP, "AWS::Logs::LogGroup"),
        ] {
            let id = Template::referenced(vars, var);
            assert_eq!(t.resource(&id)["Type"].as_str(), Some(ty), "{who}: {var} -> {id}");
            assert_eq!(
                id,
                Template::referenced(&functions, var),
                "{who} and the functions disagree on {var}"
            );
        }
        // Every process writes run items alike: the stack's one RunListedState.
        assert_eq!(
            Template::referenced(vars, env::RUN_LISTED_STATE),
            "RunListedState",
            "{who}: {}",
            env::RUN_LISTED_STATE
        );
        // Every process reads a firing left unwritten alike: the stack's one switch.
        assert_eq!(
            Template::referenced(vars, env::UNWRITTEN_ONE_SHOTS),
            "UnwrittenOneShots",
            "{who}: {}",
            env::UNWRITTEN_ONE_SHOTS
        );
        // The redrive count the code is told is the one the queues have.
        let told = text(&vars[env::MAX_RECEIVE_COUNT], env::MAX_RECEIVE_COUNT);
        let queues = t.queues();
        let actual = queues.redrive["high"]
            .as_ref()
            .expect("high redrives")
            .max_receive_count;
        assert_eq!(
            told,
            actual.to_string(),
            "{who}: {} vs the redrive",
            env::MAX_RECEIVE_COUNT
        );
    }
    // The worker runs `container` tasks in the cluster, from a task definition that has the
    // container it is told to override.
    let cluster = Template::referenced(&worker, env::ECS_CLUSTER);
    assert_eq!(t.resource(&cluster)["Type"].as_str(), Some("AWS::ECS::Cluster"));
    let task_def = Template::referenced(&worker, env::ECS_TASK_DEFINITION);
    let task_def = t.resource(&task_def);
    assert_eq!(task_def["Type"].as_str(), Some("AWS::ECS::TaskDefinition"));
    let container = text(&worker[env::ECS_CONTAINER], env::ECS_CONTAINER);
    let names: Vec<String> = list(&task_def["Properties"]["ContainerDefinitions"], "ContainerDefinitions")
        .iter()
        .map(|c| text(&c["Name"], "container Name"))
        .collect();
    assert!(
        names.contains(&container),
        "{container} is not a container of {names:?}"
    );
    // The DLQ function consumes the queue the others dead-letter into.
    let dlq = Template::referenced(&functions, env::QUEUE_DLQ);
    let source = &t.resource("DlqFunction")["Properties"]["Events"]["DeadLetters"]["Properties"];
    assert_eq!(intrinsic(&source["Queue"]), Some(Intrinsic::GetAtt(dlq, "Arn".into())));
    let responses: Vec<String> = list(&source["FunctionResponseTypes"], "FunctionResponseTypes")
        .iter()
        .map(|v| text(v, "FunctionResponseTypes"))
        .collect();
    assert_eq!(responses, ["ReportBatchItemFailures"]);
}

/// The parameters' defaults are the code's documented defaults, so a deployment with default
/// parameters behaves like `make local-aws`.
#[test]
fn the_template_defaults_are_the_config_defaults() {
    let t = Template::load();
    let defaults = AwsConfig::new(
        "r",
        "t",
        sked_aws::QueueUrls {
            high: String::new(),
            normal: String::new(),
            low: String::new(),
            dlq: String::new(),
        },
    );
    assert_eq!(t.parameter_default("ShardCount"), defaults.shards.to_string());
    let days: u64 = t.parameter_default("RunRetentionDays").parse().expect("a number");
    assert_eq!(Duration::from_secs(days * 86_400), defaults.run_retention);
    for (who, vars) in [("Globals.Function", t.function_env()), ("the worker", t.worker_env())] {
        assert_eq!(
            intrinsic(&vars[env::SHARDS]),
            Some(Intrinsic::Ref("ShardCount".into())),
            "{who}"
        );
        assert_eq!(
            intrinsic(&vars[env::RUN_RETENTION]),
            Some(Intrinsic::Sub("${RunRetentionDays}d".into())),
            "{who}"
        );
    }
}
