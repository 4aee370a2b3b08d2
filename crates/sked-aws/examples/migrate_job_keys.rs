//! Moves the jobs of the table the environment names ([`sked_aws::env`]: `SKED_TABLE`, and
//! `SKED_RUN_RETENTION` for the TTLs) from per-job keys to tenant shards
//! ([`sked_aws::migrate_to_tenant_shards`]; `docs/lean-layout.md`, step 5). Stop every process
//! of the stack first (disable the API's and the sweeper's triggers, scale the workers to
//! zero); then deploy with `JobKeys: tenant-shards`. Safe to run again after a failure: it
//! moves what is left.
//!
//! ```sh
//! SKED_TABLE=sked SKED_QUEUE_HIGH=x SKED_QUEUE_NORMAL=x SKED_QUEUE_LOW=x \
//! cargo run -p sked-aws --example migrate_job_keys
//! ```

use sked_aws::{Settings, connect, migrate_to_tenant_shards};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Settings::from_env()?.aws;
    let clients = connect(&config).await;
    let moved = migrate_to_tenant_shards(&clients.dynamodb, &config, chrono::Utc::now()).await?;
    eprintln!("table {}: {moved} jobs moved to tenant shards", config.table);
    Ok(())
}
