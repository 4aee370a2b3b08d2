//! `sked tenants quota TENANT [limits]`: shows a tenant's quota, or with limits (or
//! `--unlimited`) replaces it. Operators only, as the API decides.
//! `sked tenants webhook-secret [--rotate]`: since when the caller's tenant has its webhook
//! secret, or a new one (printed once). Admins, as the API decides.

use super::Client;
use crate::cli::{ClientArgs, QuotaArgs, TenantsCommand};
use crate::output::{self, Table};
use reqwest::Method;
use serde_json::{Value, json};
use std::process::ExitCode;

/// Runs one `sked tenants` command.
pub async fn run(args: &ClientArgs, command: TenantsCommand) -> anyhow::Result<ExitCode> {
    let client = Client::new(args)?;
    let quota = match command {
        TenantsCommand::Quota(quota) => quota,
        TenantsCommand::WebhookSecret { rotate } => return webhook_secret(&client, args, rotate).await,
    };
    let path = ["tenants", quota.tenant.as_str(), "quota"];
    let answer = match requested(&quota) {
        Some(body) => client.call(Method::PUT, &path, &[], Some(&body)).await?,
        None => client.get(&path, &[]).await?,
    };
    if args.json {
        println!("{}", answer.text);
    } else {
        print_quota(&answer.json);
    }
    Ok(ExitCode::SUCCESS)
}

async fn webhook_secret(client: &Client, args: &ClientArgs, rotate: bool) -> anyhow::Result<ExitCode> {
    let answer = if rotate {
        client
            .call(Method::POST, &["webhook-secret"], &[], Some(&json!({})))
            .await?
    } else {
        client.get(&["webhook-secret"], &[]).await?
    };
    if args.json {
        println!("{}", answer.text);
    } else if rotate {
        println!("{}", output::get(&answer.json, "secret"));
        eprintln!("Keep it: it is not shown again. Alerts are signed with it from now on.");
    } else {
        match answer.json["created_at"].as_str() {
            Some(at) => println!(
                "tenant {}: webhook secret made {at}",
                output::get(&answer.json, "tenant")
            ),
            None => println!(
                "tenant {}: no webhook secret (make one with --rotate)",
                output::get(&answer.json, "tenant")
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The body to PUT, when any limit (or `--unlimited`) was given.
fn requested(q: &QuotaArgs) -> Option<Value> {
    let any = q.unlimited || q.max_active_jobs.is_some() || q.max_concurrent_runs.is_some() || q.submit_rate.is_some();
    any.then(|| {
        let rate = q
            .submit_rate
            .zip(q.burst)
            .map(|(per_second, burst)| json!({"per_second": per_second, "burst": burst}));
        json!({
            "max_active_jobs": q.max_active_jobs,
            "max_concurrent_runs": q.max_concurrent_runs,
            "submit_rate": rate,
        })
    })
}

fn print_quota(q: &Value) {
    let limit = |v: &Value| if v.is_null() { "none".to_string() } else { v.to_string() };
    let rate = &q["submit_rate"];
    let rate = if rate.is_null() {
        "none".to_string()
    } else {
        format!("{}/s, burst {}", rate["per_second"], rate["burst"])
    };
    let mut table = Table::new(&["TENANT", "MAX ACTIVE JOBS", "MAX CONCURRENT RUNS", "SUBMIT RATE"]);
    table.row(vec![
        output::get(q, "tenant"),
        limit(&q["max_active_jobs"]),
        limit(&q["max_concurrent_runs"]),
        rate,
    ]);
    table.print();
}
