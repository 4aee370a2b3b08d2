//! `sked runs list|get|cancel`.
//!
//! Exit codes follow the outcome for `get`: 1 when the run ended FAILED, TIMED_OUT,
//! CANCELLED or SKIPPED, 0 otherwise; with `--wait` it first waits for the run to end, so 0 means
//! SUCCEEDED.

use super::Client;
use crate::cli::{ClientArgs, RunsCommand};
use crate::output;
use serde_json::Value;
use std::process::ExitCode;
use std::time::Duration;

/// How often `runs get --wait` looks again.
const WAIT_POLL: Duration = Duration::from_millis(250);

/// Runs one `sked runs` command.
pub async fn run(args: &ClientArgs, command: RunsCommand) -> anyhow::Result<ExitCode> {
    let client = Client::new(args)?;
    let json = args.json;
    match command {
        RunsCommand::List {
            job,
            state,
            since,
            until,
            limit,
        } => {
            let mut query = Vec::new();
            for (key, value) in [("state", state), ("since", since), ("until", until)] {
                if let Some(v) = value {
                    query.push((key, v));
                }
            }
            let segments: Vec<&str> = match &job {
                Some(id) => vec!["jobs", id, "runs"],
                None => vec!["runs"],
            };
            if json {
                query.push(("limit", limit.to_string()));
                println!("{}", client.get(&segments, &query).await?.text);
            } else {
                output::print_runs(&client.list_all(&segments, &query, Some(limit)).await?);
            }
            Ok(ExitCode::SUCCESS)
        }
        RunsCommand::Get { run_id, wait } => {
            let mut answer = client.get(&["runs", &run_id], &[]).await?;
            while wait && !is_terminal(&answer.json) {
                tokio::time::sleep(WAIT_POLL).await;
                answer = client.get(&["runs", &run_id], &[]).await?;
            }
            if json {
                println!("{}", answer.text);
            } else {
                output::print_run(&answer.json);
            }
            Ok(outcome_code(&answer.json, wait))
        }
        RunsCommand::Cancel { run_id } => {
            let answer = client.post(&["runs", &run_id, "cancel"], &[], None).await?;
            if json {
                println!("{}", answer.text);
            } else {
                output::print_run(&answer.json);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn state(run: &Value) -> &str {
    run.get("state").and_then(Value::as_str).unwrap_or("")
}

fn is_terminal(run: &Value) -> bool {
    !matches!(state(run), "PENDING" | "RUNNING")
}

/// 0 for SUCCEEDED (and, unless `waited`, for a run still going); 1 otherwise.
fn outcome_code(run: &Value, waited: bool) -> ExitCode {
    match state(run) {
        "SUCCEEDED" => ExitCode::SUCCESS,
        "PENDING" | "RUNNING" if !waited => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exit_code_follows_the_outcome() {
        assert_eq!(outcome_code(&json!({"state": "SUCCEEDED"}), false), ExitCode::SUCCESS);
        assert_eq!(outcome_code(&json!({"state": "RUNNING"}), false), ExitCode::SUCCESS);
        assert_eq!(outcome_code(&json!({"state": "FAILED"}), false), ExitCode::FAILURE);
        assert_eq!(outcome_code(&json!({"state": "TIMED_OUT"}), true), ExitCode::FAILURE);
        assert!(is_terminal(&json!({"state": "CANCELLED"})));
        assert!(!is_terminal(&json!({"state": "PENDING"})));
    }
}
