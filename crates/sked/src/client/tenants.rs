//! `sked tenants quota TENANT [limits]`: shows a tenant's quota, or with limits (or
//! `--unlimited`) replaces it. Operators only, as the API decides.

use super::Client;
use crate::cli::{ClientArgs, QuotaArgs, TenantsCommand};
use crate::output::{self, Table};
use reqwest::Method;
use serde_json::{Value, json};
use std::process::ExitCode;

/// Runs one `sked tenants` command.
pub async fn run(args: &ClientArgs, command: TenantsCommand) -> anyhow::Result<ExitCode> {
    let client = Client::new(args)?;
    let TenantsCommand::Quota(quota) = command;
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
