//! sked-core's [`Ports`] on AWS, from a config and its clients: what every AWS main (the
//! Lambda functions, `sked worker --backend aws`) hands to core. Wiring only.
//!
//! Logs are [`CloudWatchLogStore`] when the config names a bucket and group; otherwise
//! [`NoLogs`], for processes that neither read nor write logs (the sweeper and DLQ
//! functions): reads find nothing, and a writer is refused. Where logs are kept at least as
//! long as runs, the store and the log store share [`FoldedLogs`]: a worker's smallest finished
//! logs go in the write that ends their run.

use crate::config::{AwsClients, AwsConfig};
use crate::dynamo::DynamoStore;
use crate::logs::{CloudWatchLogStore, FoldedLogs};
use crate::sqs::SqsQueue;
use async_trait::async_trait;
use sked_core::ports::queue::EARLY_DELIVERY;
use sked_core::ports::{Clock, LogError, LogKey, LogPage, LogQuery, LogStore, LogWriter, QuotaStore, WebhookSecrets};
use sked_core::service::Ports;
use sked_core::work::QueueThenStore;
use std::sync::Arc;

/// Store on DynamoDB, queue on SQS (the work port over the two in turn), logs on CloudWatch
/// Logs and S3 (or [`NoLogs`]).
pub fn ports(clients: &AwsClients, config: &AwsConfig, clock: Arc<dyn Clock>) -> Ports {
    ports_and_tenants(clients, config, clock).0
}

/// Checks, before a process uses the table, that the table keys its jobs as `config` says
/// (recording the setting on a table's first use: `dynamo::layout`). Every AWS main calls it
/// once at start; a mismatch is an error naming both settings.
pub async fn check_table_layout(clients: &AwsClients, config: &AwsConfig) -> Result<(), sked_core::ports::StoreError> {
    crate::dynamo::layout::check_job_keys(&clients.dynamodb, &config.table, config.job_keys).await
}

/// What the store keeps per tenant besides its jobs and runs.
#[derive(Clone)]
pub struct TenantStores {
    /// Quotas (one quota cache for the process).
    pub quotas: Arc<dyn QuotaStore>,
    /// Webhook secrets ([`sked_core::alert`]).
    pub webhook_secrets: Arc<dyn WebhookSecrets>,
}

/// [`ports`], and the tenants' quotas and webhook secrets kept by the same store.
pub fn ports_and_tenants(clients: &AwsClients, config: &AwsConfig, clock: Arc<dyn Clock>) -> (Ports, TenantStores) {
    let mut store = DynamoStore::new(clients.dynamodb.clone(), config, clock.clone());
    let logs: Arc<dyn LogStore> = match &config.logs {
        Some(logs) => {
            let mut log_store = CloudWatchLogStore::new(clients, &config.table, logs.clone());
            // The smallest finished logs go in their run's item (they then live as long as
            // the run): only where logs are kept at least as long as runs.
            let log_retention = std::time::Duration::from_secs(u64::from(logs.retention_days) * 86_400);
            if log_retention >= config.run_retention {
                let folded = Arc::new(FoldedLogs::new(
                    clients.dynamodb.clone(),
                    &config.table,
                    logs.retention_days,
                ));
                log_store = log_store.with_folded_logs(folded.clone());
                store = store.with_folded_logs(folded);
            }
            Arc::new(log_store)
        }
        None => Arc::new(NoLogs),
    };
    let store = Arc::new(store);
    // Runs travel with their messages: a worker claims from the copy (`crate::run_copies`).
    let queue = Arc::new(SqsQueue::new(clients.sqs.clone(), config, clock.clone()).with_run_copies(store.clone()));
    // The store and the queue are two services: one call to each in turn; SQS may deliver a
    // message up to EARLY_DELIVERY before its time (its delays are whole seconds).
    let work = QueueThenStore::new(store.clone(), queue.clone(), clock.clone()).with_early_delivery(EARLY_DELIVERY);
    let ports = Ports {
        store: store.clone(),
        queue,
        work: Arc::new(work),
        logs,
        clock,
        observer: Arc::new(sked_core::ports::NoObserver),
    };
    let tenants = TenantStores {
        quotas: store.clone(),
        webhook_secrets: store,
    };
    (ports, tenants)
}

/// The log store of a process configured without logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLogs;

/// Why [`NoLogs`] refuses a writer.
#[derive(Debug, thiserror::Error)]
#[error("this process has no log store: set SKED_LOG_BUCKET and SKED_LOG_GROUP")]
pub struct NoLogStore;

#[async_trait]
impl LogStore for NoLogs {
    async fn writer(&self, _key: &LogKey) -> Result<Box<dyn LogWriter>, LogError> {
        Err(LogError::Io(Box::new(NoLogStore)))
    }

    async fn read(&self, _key: &LogKey, _query: &LogQuery) -> Result<LogPage, LogError> {
        Err(LogError::NotFound)
    }
}
