//! Creates sked's AWS resources: the table (keys, both indexes, on-demand billing, TTL) and the
//! four queues (high, normal, low, each redriving to the DLQ after `max_receive_count`
//! receives); and, when the config names them, the log bucket (with a lifecycle rule expiring
//! `logs/` after the retention) and log group (with the same retention), and the ECS cluster
//! and a Fargate task definition for `container` tasks. Used by tests and by `make
//! local-aws`; on AWS itself, `template.yaml` creates the same resources. Idempotent: what
//! exists is left as it is.
//!
//! This module must not be needed at run time: the store and queue only use what exists.

use crate::config::{AwsClients, AwsConfig, EcsConfig, LogsConfig, QueueUrls};
use crate::dynamo::codec::{key, n};
use crate::dynamo::keys::*;
use crate::error::{CallError, classify};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, LocalSecondaryIndex, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_sqs::types::QueueAttributeName;
use std::collections::HashMap;

/// Attributes listings filter on without reading the full item (projected into `list`).
pub const LIST_PROJECTED: &[&str] = &["state", "labels"];

/// DLQ retention: the longest SQS allows (14 days), so failures can be inspected.
const DLQ_RETENTION_SECS: u32 = 14 * 24 * 3600;

/// A bootstrap failure.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// An AWS call failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// A request could not be built (a bug here).
    #[error("cannot build request: {0}")]
    Build(#[from] aws_sdk_dynamodb::error::BuildError),
    /// A queue URL that does not end in a queue name.
    #[error("queue url {0:?} does not end in a queue name")]
    QueueUrl(String),
    /// An answer without a field it must have.
    #[error("{0}")]
    Missing(String),
}

/// Creates the table and the queues named in `config`, and the log and ECS resources when
/// `config.logs` / `config.ecs` are set; returns the queue URLs SQS answered (equal to the
/// configured ones when the account and endpoint match).
pub async fn create_resources(clients: &AwsClients, config: &AwsConfig) -> Result<QueueUrls, BootstrapError> {
    create_table(&clients.dynamodb, config).await?;
    let urls = create_queues(&clients.sqs, config).await?;
    if let Some(logs) = &config.logs {
        create_log_resources(clients, &config.region, logs).await?;
    }
    if let Some(ecs) = &config.ecs {
        create_ecs_resources(&clients.ecs, &config.region, ecs, config.logs.as_ref()).await?;
    }
    Ok(urls)
}

fn key_elem(name: &str, kind: KeyType) -> Result<KeySchemaElement, BootstrapError> {
    Ok(KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()?)
}

fn string_attr(name: &str) -> Result<AttributeDefinition, BootstrapError> {
    Ok(AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()?)
}

/// Creates the table with its indexes and TTL, and the sweeper's watermark; waits until the
/// table is ACTIVE.
pub async fn create_table(client: &aws_sdk_dynamodb::Client, config: &AwsConfig) -> Result<(), BootstrapError> {
    let sched = GlobalSecondaryIndex::builder()
        .index_name(SCHED_INDEX)
        .key_schema(key_elem(GSI1_PK, KeyType::Hash)?)
        .key_schema(key_elem(GSI1_SK, KeyType::Range)?)
        .projection(Projection::builder().projection_type(ProjectionType::All).build())
        .build()?;
    let mut list_projection = Projection::builder().projection_type(ProjectionType::Include);
    for a in LIST_PROJECTED {
        list_projection = list_projection.non_key_attributes(*a);
    }
    let list = GlobalSecondaryIndex::builder()
        .index_name(LIST_INDEX)
        .key_schema(key_elem(GSI2_PK, KeyType::Hash)?)
        .key_schema(key_elem(GSI2_SK, KeyType::Range)?)
        .projection(list_projection.build())
        .build()?;
    // Active runs by their not_before (running ones, past 5 minutes, by their lease's step):
    // keys only, so a claim on time and a heartbeat that keeps the key write nothing here (the
    // reaper and the repair pass read the runs themselves).
    let live = GlobalSecondaryIndex::builder()
        .index_name(LIVE_INDEX)
        .key_schema(key_elem(GSI3_PK, KeyType::Hash)?)
        .key_schema(key_elem(GSI3_SK, KeyType::Range)?)
        .projection(Projection::builder().projection_type(ProjectionType::KeysOnly).build())
        .build()?;
    // A job's active runs: keys only (a claim reads the runs themselves, consistent), so only
    // a run's insert and its end write to it.
    let active = LocalSecondaryIndex::builder()
        .index_name(ACTIVE_INDEX)
        .key_schema(key_elem(PK, KeyType::Hash)?)
        .key_schema(key_elem(ACTIVE_SK, KeyType::Range)?)
        .projection(Projection::builder().projection_type(ProjectionType::KeysOnly).build())
        .build()?;
    let mut req = client
        .create_table()
        .table_name(&config.table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key_elem(PK, KeyType::Hash)?)
        .key_schema(key_elem(SK, KeyType::Range)?)
        .global_secondary_indexes(sched)
        .global_secondary_indexes(list)
        .global_secondary_indexes(live)
        .local_secondary_indexes(active);
    for a in [PK, SK, GSI1_PK, GSI1_SK, GSI2_PK, GSI2_SK, GSI3_PK, GSI3_SK, ACTIVE_SK] {
        req = req.attribute_definitions(string_attr(a)?);
    }
    match req.send().await {
        Ok(_) => {}
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => {}
        Err(e) => return Err(classify("dynamodb:CreateTable", e, |_| None).into_call().into()),
    }
    for _ in 0..600 {
        let d = client
            .describe_table()
            .table_name(&config.table)
            .send()
            .await
            .map_err(|e| classify("dynamodb:DescribeTable", e, |_| None).into_call())?;
        let status = d.table().and_then(|t| t.table_status()).map(|s| s.as_str().to_string());
        if status.as_deref() == Some("ACTIVE") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let ttl = client
        .update_time_to_live()
        .table_name(&config.table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(TTL)
                .build()?,
        )
        .send()
        .await;
    if let Err(e) = ttl {
        // Enabling TTL twice is refused ("already enabled"); anything else is an error.
        let already = e
            .as_service_error()
            .and_then(|s| aws_sdk_dynamodb::error::ProvideErrorMetadata::message(s))
            .is_some_and(|m| m.contains("already enabled"));
        if !already {
            return Err(classify("dynamodb:UpdateTimeToLive", e, |_| None).into_call().into());
        }
    }
    // The due watermark starts at the table's birth: nothing can be filed earlier.
    let now_minute = epoch_minute(chrono::Utc::now().timestamp_millis());
    let mut item = key(SWEEP_PK.into(), WATERMARK_SK.into());
    item.insert("minute".into(), n(now_minute));
    let put = client
        .put_item()
        .table_name(&config.table)
        .set_item(Some(item))
        .condition_expression("attribute_not_exists(pk)")
        .send()
        .await;
    match put {
        Ok(_) => Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
        {
            Ok(())
        }
        Err(e) => Err(classify("dynamodb:PutItem", e, |_| None).into_call().into()),
    }
}

fn queue_name(url: &str) -> Result<&str, BootstrapError> {
    url.rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| BootstrapError::QueueUrl(url.to_string()))
}

async fn create_queue(
    client: &aws_sdk_sqs::Client,
    url: &str,
    attributes: HashMap<QueueAttributeName, String>,
) -> Result<String, BootstrapError> {
    let out = client
        .create_queue()
        .queue_name(queue_name(url)?)
        .set_attributes(Some(attributes))
        .send()
        .await
        .map_err(|e| classify("sqs:CreateQueue", e, |_| None).into_call())?;
    out.queue_url
        .ok_or_else(|| BootstrapError::Missing("CreateQueue answered no queue url".into()))
}

/// Creates the DLQ, then high, normal and low redriving to it.
pub async fn create_queues(client: &aws_sdk_sqs::Client, config: &AwsConfig) -> Result<QueueUrls, BootstrapError> {
    let q = &config.queues;
    let dlq = create_queue(
        client,
        &q.dlq,
        HashMap::from([(
            QueueAttributeName::MessageRetentionPeriod,
            DLQ_RETENTION_SECS.to_string(),
        )]),
    )
    .await?;
    let attrs = client
        .get_queue_attributes()
        .queue_url(&dlq)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| classify("sqs:GetQueueAttributes", e, |_| None).into_call())?;
    let arn = attrs
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| BootstrapError::Missing("the DLQ has no ARN".into()))?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": arn,
        "maxReceiveCount": config.max_receive_count.to_string(),
    })
    .to_string();
    let mut urls = Vec::new();
    for url in [&q.high, &q.normal, &q.low] {
        let attributes = HashMap::from([(QueueAttributeName::RedrivePolicy, redrive.clone())]);
        urls.push(create_queue(client, url, attributes).await?);
    }
    let [high, normal, low]: [String; 3] = urls
        .try_into()
        .map_err(|_| BootstrapError::Missing("queue urls".into()))?;
    Ok(QueueUrls { high, normal, low, dlq })
}

/// The S3 lifecycle rule that expires attempt logs.
pub const LOG_LIFECYCLE_RULE: &str = "sked-log-retention";

/// Retention periods CloudWatch Logs accepts, in days.
const CLOUDWATCH_RETENTION_DAYS: &[u32] = &[
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
];

/// The retention CloudWatch accepts for `days`: the next accepted value up (the longest for
/// anything longer).
pub fn cloudwatch_retention(days: u32) -> u32 {
    CLOUDWATCH_RETENTION_DAYS
        .iter()
        .copied()
        .find(|&d| d >= days)
        .unwrap_or(3653)
}

/// Creates the log bucket with its lifecycle rule (objects under `logs/` expire after
/// `retention_days`) and the log group with its retention policy.
pub async fn create_log_resources(clients: &AwsClients, region: &str, logs: &LogsConfig) -> Result<(), BootstrapError> {
    use aws_sdk_s3::types::{
        BucketLifecycleConfiguration, BucketLocationConstraint, CreateBucketConfiguration, ExpirationStatus,
        LifecycleExpiration, LifecycleRule, LifecycleRuleFilter,
    };
    let s3 = &clients.s3;
    let mut create = s3.create_bucket().bucket(&logs.bucket);
    if region != "us-east-1" {
        // us-east-1 is the default location and refuses being named.
        create = create.create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(region))
                .build(),
        );
    }
    match create.send().await {
        Ok(_) => {}
        Err(e) if e.as_service_error().is_some_and(|s| s.is_bucket_already_owned_by_you()) => {}
        Err(e) => return Err(classify("s3:CreateBucket", e, |_| None).into_call().into()),
    }
    let rule = LifecycleRule::builder()
        .id(LOG_LIFECYCLE_RULE)
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix(crate::logs::LOG_PREFIX).build())
        .expiration(
            LifecycleExpiration::builder()
                .days(i32::try_from(logs.retention_days.max(1)).unwrap_or(i32::MAX))
                .build(),
        )
        .build()
        .map_err(|e| BootstrapError::Missing(format!("cannot build the lifecycle rule: {e}")))?;
    let lifecycle = BucketLifecycleConfiguration::builder()
        .rules(rule)
        .build()
        .map_err(|e| BootstrapError::Missing(format!("cannot build the lifecycle configuration: {e}")))?;
    s3.put_bucket_lifecycle_configuration()
        .bucket(&logs.bucket)
        .lifecycle_configuration(lifecycle)
        .send()
        .await
        .map_err(|e| classify("s3:PutBucketLifecycleConfiguration", e, |_| None).into_call())?;

    let cw = &clients.logs;
    match cw.create_log_group().log_group_name(&logs.log_group).send().await {
        Ok(_) => {}
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_already_exists_exception()) => {}
        Err(e) => return Err(classify("logs:CreateLogGroup", e, |_| None).into_call().into()),
    }
    cw.put_retention_policy()
        .log_group_name(&logs.log_group)
        .retention_in_days(i32::try_from(cloudwatch_retention(logs.retention_days)).unwrap_or(3653))
        .send()
        .await
        .map_err(|e| classify("logs:PutRetentionPolicy", e, |_| None).into_call())?;
    Ok(())
}

/// Creates the ECS cluster and, unless a task definition of that family exists, registers
/// one for Fargate: awsvpc, 0.25 vCPU / 512 MiB (the smallest tier; runs override it), one
/// essential container named `container_name` running `bootstrap_image`, logging with
/// `awslogs` to the log group (stream prefix `ecs`) when `logs` is given. No roles: enough
/// for moto and LocalStack; `template.yaml` defines the real one with its execution role.
pub async fn create_ecs_resources(
    client: &aws_sdk_ecs::Client,
    region: &str,
    ecs: &EcsConfig,
    logs: Option<&LogsConfig>,
) -> Result<(), BootstrapError> {
    use aws_sdk_ecs::types::{Compatibility, ContainerDefinition, LogConfiguration, LogDriver, NetworkMode};
    // CreateCluster answers the existing cluster when there is one.
    client
        .create_cluster()
        .cluster_name(&ecs.cluster)
        .send()
        .await
        .map_err(|e| classify("ecs:CreateCluster", e, |_| None).into_call())?;
    let exists = client
        .describe_task_definition()
        .task_definition(&ecs.task_definition)
        .send()
        .await
        .is_ok_and(|d| d.task_definition.is_some());
    if exists {
        return Ok(());
    }
    let mut container = ContainerDefinition::builder()
        .name(&ecs.container_name)
        .image(&ecs.bootstrap_image)
        .essential(true)
        // Container-level sizes fit the smallest tier (moto also needs them set).
        .cpu(256)
        .memory(512);
    if let Some(logs) = logs {
        let config = LogConfiguration::builder()
            .log_driver(LogDriver::Awslogs)
            .options("awslogs-group", &logs.log_group)
            .options("awslogs-region", region)
            .options("awslogs-stream-prefix", "ecs")
            .build()
            .map_err(|e| BootstrapError::Missing(format!("cannot build the log configuration: {e}")))?;
        container = container.log_configuration(config);
    }
    client
        .register_task_definition()
        .family(&ecs.task_definition)
        .requires_compatibilities(Compatibility::Fargate)
        .network_mode(NetworkMode::Awsvpc)
        .cpu("256")
        .memory("512")
        .container_definitions(container.build())
        .send()
        .await
        .map_err(|e| classify("ecs:RegisterTaskDefinition", e, |_| None).into_call())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_rounds_up_to_what_cloudwatch_accepts() {
        assert_eq!(cloudwatch_retention(0), 1);
        assert_eq!(cloudwatch_retention(30), 30);
        assert_eq!(cloudwatch_retention(31), 60);
        assert_eq!(cloudwatch_retention(100_000), 3653);
    }
}
