//! `sked jobs create|list|get|update|delete|pause|resume|trigger|backfill|occurrences|why|preview`.
//!
//! `create` sends either a JSON file as is (`{"jobs": [...]}` goes to `POST /v1/jobs:batch`)
//! or a job built from flags; validation is the API's — this module only shapes requests.

use super::{Client, parse_pairs, read_json_file};
use crate::cli::{ClientArgs, CreateArgs, JobsCommand};
use crate::output;
use anyhow::Context as _;
use reqwest::Method;
use serde_json::{Map, Value, json};
use sked_core::duration::Dur;
use std::process::ExitCode;

/// Runs one `sked jobs` command.
pub async fn run(args: &ClientArgs, command: JobsCommand) -> anyhow::Result<ExitCode> {
    let client = Client::new(args)?;
    let json = args.json;
    match command {
        JobsCommand::Create(create) => {
            let body = match &create.file {
                Some(path) => read_json_file(path)?,
                None => job_from_flags(&create, chrono::Utc::now())?,
            };
            let batch = body.get("jobs").is_some_and(Value::is_array);
            let answer = client
                .post(&[if batch { "jobs:batch" } else { "jobs" }], &[], Some(&body))
                .await?;
            if json {
                println!("{}", answer.text);
            } else if batch {
                let ids = answer
                    .json
                    .get("ids")
                    .or_else(|| answer.json.get("items"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for id in ids {
                    println!(
                        "{}",
                        id.get("id")
                            .map_or_else(|| output::cell(Some(&id)), |v| output::cell(Some(v)))
                    );
                }
            } else {
                output::print_job(&answer.json);
            }
        }
        JobsCommand::List { state, labels, limit } => {
            let mut query = Vec::new();
            if let Some(state) = state {
                query.push(("state", state));
            }
            for (k, v) in parse_pairs("label", &labels)? {
                query.push(("label", format!("{k}={v}")));
            }
            if json {
                if let Some(limit) = limit {
                    query.push(("limit", limit.to_string()));
                }
                println!("{}", client.get(&["jobs"], &query).await?.text);
            } else {
                output::print_jobs(&client.list_all(&["jobs"], &query, limit).await?);
            }
        }
        JobsCommand::Get { id } => show_job(&client.get(&["jobs", &id], &[]).await?, json),
        JobsCommand::Update { id, file, patch } => {
            let body = read_json_file(&file)?;
            let method = if patch { Method::PATCH } else { Method::PUT };
            show_job(&client.call(method, &["jobs", &id], &[], Some(&body)).await?, json);
        }
        JobsCommand::Delete {
            id,
            cancel_running,
            force,
        } => {
            let query: Vec<(&str, String)> = [("cancel_running", cancel_running), ("force", force)]
                .into_iter()
                .filter(|(_, given)| *given)
                .map(|(name, _)| (name, "true".to_string()))
                .collect();
            let answer = client.call(Method::DELETE, &["jobs", &id], &query, None).await?;
            say(&answer, json, &format!("job {id} deleted"));
        }
        JobsCommand::Pause { id } => say(
            &client.post(&["jobs", &id, "pause"], &[], None).await?,
            json,
            &format!("job {id} paused"),
        ),
        JobsCommand::Resume { id } => say(
            &client.post(&["jobs", &id, "resume"], &[], None).await?,
            json,
            &format!("job {id} resumed"),
        ),
        JobsCommand::Trigger { id } => {
            let answer = client.post(&["jobs", &id, "trigger"], &[], None).await?;
            if json {
                println!("{}", answer.text);
            } else {
                output::print_run(&answer.json);
            }
        }
        JobsCommand::Backfill { id, from, to } => {
            let body = serde_json::json!({"from": from, "to": to});
            let answer = client.post(&["jobs", &id, "backfill"], &[], Some(&body)).await?;
            if json {
                println!("{}", answer.text);
            } else {
                let created = fire_times(&answer.json);
                for run_id in &created {
                    println!("{}", run_id.as_str().unwrap_or_default());
                }
                eprintln!("{} run(s) created", created.len());
            }
        }
        JobsCommand::Occurrences {
            id,
            since,
            until,
            limit,
        } => {
            let query: Vec<(&str, String)> = [("since", since), ("until", until)]
                .into_iter()
                .filter_map(|(name, v)| v.map(|v| (name, v)))
                .collect();
            let items = client
                .list_all(&["jobs", &id, "occurrences"], &query, Some(limit))
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                let mut table = output::Table::new(&["SCHEDULED_FOR", "OUTCOME", "REASON", "RUN", "LAG_MS"]);
                for o in &items {
                    table.row(
                        ["scheduled_for", "outcome", "reason", "run_id", "lag_ms"]
                            .iter()
                            .map(|k| output::get(o, k))
                            .collect(),
                    );
                }
                table.print();
            }
        }
        JobsCommand::Why { id, at } => {
            let answer = client.get(&["jobs", &id, "why"], &[("at", at)]).await?;
            if json {
                println!("{}", answer.text);
            } else {
                println!("{}", output::get(&answer.json, "explanation"));
            }
        }
        JobsCommand::Preview { id, count } => {
            let answer = client
                .get(&["jobs", &id, "preview"], &[("count", count.to_string())])
                .await?;
            if json {
                println!("{}", answer.text);
            } else {
                for t in fire_times(&answer.json) {
                    println!("{}", output::cell(Some(t)));
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn show_job(answer: &super::Answer, json: bool) {
    if json {
        println!("{}", answer.text);
    } else {
        output::print_job(&answer.json);
    }
}

fn say(answer: &super::Answer, json: bool, message: &str) {
    if json {
        println!("{}", answer.text);
    } else {
        println!("{message}");
    }
}

/// The times in a preview answer: a bare array, or the first array field of an object
/// (`{"fire_times": [...]}`, `{"items": [...]}`).
fn fire_times(answer: &Value) -> Vec<&Value> {
    match answer {
        Value::Array(items) => items.iter().collect(),
        Value::Object(map) => map
            .values()
            .find_map(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Reads `--at`: RFC 3339, `now`, or `+DURATION` from `now`.
fn parse_at(text: &str, now: chrono::DateTime<chrono::Utc>) -> anyhow::Result<String> {
    let instant = if text == "now" {
        now
    } else if let Some(rel) = text.strip_prefix('+') {
        let d: Dur = rel.parse().with_context(|| format!("--at {text:?}"))?;
        now + d.to_chrono()
    } else {
        return Ok(text.to_string()); // The API validates absolute instants.
    };
    Ok(instant.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// Builds a job definition from `sked jobs create` flags. Values the API validates (cron,
/// durations, priorities) are passed through as written so its error names the field.
fn job_from_flags(a: &CreateArgs, now: chrono::DateTime<chrono::Utc>) -> anyhow::Result<Value> {
    // clap's `requires` does not hold for an argument of a group: checked here.
    for (flag, given, needs, present) in [
        ("--tz", a.tz.is_some(), "--cron", a.cron.is_some()),
        ("--on", a.on.is_some(), "--after", a.after.is_some()),
        ("--within", a.within.is_some(), "--after", a.after.is_some()),
    ] {
        if given && !present {
            anyhow::bail!("{flag} goes with {needs}");
        }
    }
    let schedule = match (&a.cron, &a.every, &a.at) {
        (None, None, None) if a.after.is_some() => {
            let mut after = json!({ "jobs": a.after });
            if let Some(on) = &a.on {
                after["on"] = json!(on);
            }
            if let Some(within) = &a.within {
                after["within"] = json!(within);
            }
            json!({ "after": after })
        }
        (Some(cron), None, None) => {
            let mut s = json!({ "cron": cron });
            if let Some(tz) = &a.tz {
                s["timezone"] = json!(tz);
            }
            s
        }
        (None, Some(every), None) => json!({ "every": every }),
        (None, None, Some(at)) => json!({ "at": parse_at(at, now)? }),
        _ => anyhow::bail!("give one schedule: --cron, --every, --at or --after (or --file)"),
    };
    if a.command.is_empty() {
        anyhow::bail!(
            "give the command to run after `--`, e.g. `sked jobs create --every 5m -- /usr/bin/backup --fast`"
        );
    }
    let mut command = json!({ "argv": a.command });
    let env = parse_pairs("env", &a.env)?;
    if !env.is_empty() {
        command["env"] = Value::Object(env.into_iter().map(|(k, v)| (k, Value::String(v))).collect());
    }
    if let Some(cwd) = &a.cwd {
        command["cwd"] = json!(cwd);
    }

    let mut job = Map::new();
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(v) = value {
            job.insert(key.to_string(), v);
        }
    };
    set("id", a.id.clone().map(Value::String));
    set("name", a.name.clone().map(Value::String));
    set("schedule", Some(schedule));
    set("task", Some(json!({ "command": command })));
    set("jitter", a.jitter.clone().map(Value::String));
    set("priority", a.priority.map(|p| json!(p)));
    set("max_retries", a.max_retries.map(|n| json!(n)));
    set(
        "backoff",
        a.backoff.clone().map(|initial| json!({ "initial": initial })),
    );
    set("timeout", a.timeout.clone().map(Value::String));
    set(
        "on_timeout",
        a.on_timeout.clone().map(|o| {
            if o == "fail" || o == "retry" {
                Value::String(o)
            } else {
                json!({ "run_job": o })
            }
        }),
    );
    set("overlap", a.overlap.clone().map(Value::String));
    set("misfire", a.misfire.clone().map(Value::String));
    set(
        "concurrency",
        a.concurrency_key
            .clone()
            .map(|key| json!({"key": key, "limit": a.concurrency_limit.unwrap_or(1)})),
    );
    set(
        "notify",
        a.notify_webhook.clone().map(|webhook| {
            let on = if a.notify_on.is_empty() {
                vec!["failed".to_string(), "timed_out".to_string()]
            } else {
                a.notify_on.clone()
            };
            json!({"on": on, "webhook": webhook})
        }),
    );
    let labels = parse_pairs("label", &a.labels)?;
    if !labels.is_empty() {
        set(
            "labels",
            Some(Value::Object(
                labels.into_iter().map(|(k, v)| (k, Value::String(v))).collect(),
            )),
        );
    }
    Ok(Value::Object(job))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn create_args(argv: &[&str]) -> CreateArgs {
        let cli = Cli::try_parse_from(argv).unwrap();
        match cli.command {
            Command::Jobs {
                command: JobsCommand::Create(a),
                ..
            } => *a,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn flags_build_a_job() {
        let a = create_args(&[
            "sked",
            "jobs",
            "create",
            "--id",
            "backup",
            "--every",
            "5m",
            "--priority",
            "7",
            "--timeout",
            "90s",
            "--label",
            "team=ops",
            "--env",
            "A=1",
            "--",
            "/usr/bin/backup",
            "--fast",
        ]);
        let job = job_from_flags(&a, chrono::Utc::now()).unwrap();
        assert_eq!(
            job,
            json!({"id": "backup", "schedule": {"every": "5m"}, "priority": 7, "timeout": "90s",
                   "labels": {"team": "ops"},
                   "task": {"command": {"argv": ["/usr/bin/backup", "--fast"], "env": {"A": "1"}}}})
        );
    }

    #[test]
    fn a_notify_webhook_posts_failures_and_timeouts_unless_told_which_ends() {
        let argv = [
            "sked",
            "jobs",
            "create",
            "--every",
            "1h",
            "--notify-webhook",
            "https://h.test/x",
            "--",
            "true",
        ];
        let job = job_from_flags(&create_args(&argv), chrono::Utc::now()).unwrap();
        assert_eq!(
            job["notify"],
            json!({"on": ["failed", "timed_out"], "webhook": "https://h.test/x"})
        );
        let argv = [
            "sked",
            "jobs",
            "create",
            "--every",
            "1h",
            "--notify-webhook",
            "https://h.test/x",
            "--notify-on",
            "skipped,succeeded",
            "--",
            "true",
        ];
        let job = job_from_flags(&create_args(&argv), chrono::Utc::now()).unwrap();
        assert_eq!(job["notify"]["on"], json!(["skipped", "succeeded"]));
        let without_webhook = [
            "sked",
            "jobs",
            "create",
            "--every",
            "1h",
            "--notify-on",
            "failed",
            "--",
            "true",
        ];
        assert!(crate::cli::Cli::try_parse_from(without_webhook).is_err());
    }

    #[test]
    fn after_names_its_upstreams_and_how_they_must_end() {
        let argv = [
            "sked", "jobs", "create", "--after", "a,b", "--on", "any", "--within", "1h", "--", "true",
        ];
        let job = job_from_flags(&create_args(&argv), chrono::Utc::now()).unwrap();
        assert_eq!(
            job["schedule"],
            json!({"after": {"jobs": ["a", "b"], "on": "any", "within": "1h"}})
        );
        let plain = ["sked", "jobs", "create", "--after", "a", "--", "true"];
        let job = job_from_flags(&create_args(&plain), chrono::Utc::now()).unwrap();
        assert_eq!(job["schedule"], json!({"after": {"jobs": ["a"]}}));
        let both = ["sked", "jobs", "create", "--after", "a", "--every", "1m", "--", "true"];
        assert!(Cli::try_parse_from(both).is_err(), "one schedule only");
        let stray = ["sked", "jobs", "create", "--every", "1m", "--on", "any", "--", "true"];
        let refused = job_from_flags(&create_args(&stray), chrono::Utc::now()).unwrap_err();
        assert_eq!(refused.to_string(), "--on goes with --after");
        let stray = ["sked", "jobs", "create", "--every", "1m", "--tz", "UTC", "--", "true"];
        let refused = job_from_flags(&create_args(&stray), chrono::Utc::now()).unwrap_err();
        assert_eq!(refused.to_string(), "--tz goes with --cron");
    }

    #[test]
    fn a_concurrency_key_takes_its_limit_or_one() {
        let argv = |extra: &[&'static str]| {
            let mut argv = vec!["sked", "jobs", "create", "--every", "1m", "--concurrency-key", "db"];
            argv.extend_from_slice(extra);
            argv.extend_from_slice(&["--", "true"]);
            argv
        };
        let job = job_from_flags(&create_args(&argv(&[])), chrono::Utc::now()).unwrap();
        assert_eq!(job["concurrency"], json!({"key": "db", "limit": 1}));
        let job = job_from_flags(&create_args(&argv(&["--concurrency-limit", "3"])), chrono::Utc::now()).unwrap();
        assert_eq!(job["concurrency"], json!({"key": "db", "limit": 3}));
        let no_key = [
            "sked",
            "jobs",
            "create",
            "--every",
            "1m",
            "--concurrency-limit",
            "3",
            "--",
            "true",
        ];
        assert!(Cli::try_parse_from(no_key).is_err(), "a limit without a key is refused");
    }

    #[test]
    fn cron_takes_a_time_zone_and_on_timeout_a_job() {
        let a = create_args(&[
            "sked",
            "jobs",
            "create",
            "--cron",
            "0 9 * * *",
            "--tz",
            "Europe/Berlin",
            "--on-timeout",
            "cleanup",
            "--",
            "true",
        ]);
        let job = job_from_flags(&a, chrono::Utc::now()).unwrap();
        assert_eq!(
            job["schedule"],
            json!({"cron": "0 9 * * *", "timezone": "Europe/Berlin"})
        );
        assert_eq!(job["on_timeout"], json!({"run_job": "cleanup"}));
    }

    #[test]
    fn at_accepts_relative_times() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(parse_at("+90s", now).unwrap(), "2026-01-01T00:01:30.000Z");
        assert_eq!(parse_at("now", now).unwrap(), "2026-01-01T00:00:00.000Z");
        assert_eq!(parse_at("2026-12-01T09:00:00Z", now).unwrap(), "2026-12-01T09:00:00Z");
        assert!(parse_at("+soon", now).is_err());
    }

    #[test]
    fn a_schedule_and_a_command_are_required() {
        let a = create_args(&["sked", "jobs", "create", "--every", "5m"]);
        assert!(job_from_flags(&a, chrono::Utc::now()).is_err());
        let a = create_args(&["sked", "jobs", "create", "--", "true"]);
        assert!(job_from_flags(&a, chrono::Utc::now()).is_err());
        assert!(Cli::try_parse_from(["sked", "jobs", "create", "--every", "5m", "--at", "now", "--", "true"]).is_err());
    }
}
