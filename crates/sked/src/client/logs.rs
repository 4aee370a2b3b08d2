//! `sked logs RUN [--attempt N] [--stream S] [--tail N] [--follow]`.
//!
//! Without `--follow` it reads `GET /v1/runs/{id}/logs` once. With `--follow` it reads the
//! same endpoint with `follow=true`, whose body is newline-delimited JSON line objects
//! streamed until the attempt ends, and prints each line as it arrives.

use super::{Client, read_answer};
use crate::cli::{ClientArgs, LogsArgs};
use anyhow::Context as _;
use futures::StreamExt as _;
use reqwest::Method;
use serde_json::Value;
use std::io::Write as _;
use std::process::ExitCode;

/// Runs `sked logs`.
pub async fn run(args: &ClientArgs, logs: LogsArgs) -> anyhow::Result<ExitCode> {
    let client = Client::new(args)?;
    let mut query = Vec::new();
    if let Some(n) = logs.attempt {
        query.push(("attempt", n.to_string()));
    }
    if let Some(s) = &logs.stream {
        query.push(("stream", s.clone()));
    }
    if let Some(n) = logs.tail {
        query.push(("tail", n.to_string()));
    }
    let segments = ["runs", logs.run_id.as_str(), "logs"];
    if !logs.follow {
        let answer = client.get(&segments, &query).await?;
        if args.json {
            println!("{}", answer.text);
            return Ok(ExitCode::SUCCESS);
        }
        let mut out = std::io::stdout().lock();
        for line in answer.json.get("lines").and_then(Value::as_array).into_iter().flatten() {
            writeln!(out, "{}", render(line, logs.timestamps))?;
        }
        out.flush()?;
        if answer.json.get("truncated").and_then(Value::as_bool) == Some(true) {
            eprintln!("(log truncated at its size cap)");
        }
        return Ok(ExitCode::SUCCESS);
    }

    query.push(("follow", "true".into()));
    let url = client.url(&segments, &query);
    let response = client.send(client.request(Method::GET, url)).await?;
    if !response.status().is_success() {
        read_answer(response).await?;
        anyhow::bail!("the log stream was refused");
    }
    let mut body = response.bytes_stream();
    let mut pending: Vec<u8> = Vec::new();
    while let Some(chunk) = body.next().await {
        pending.extend_from_slice(&chunk.context("reading the log stream")?);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let raw: Vec<u8> = pending.drain(..=end).collect();
            emit(&raw, args.json, logs.timestamps)?;
        }
    }
    if !pending.is_empty() {
        emit(&pending, args.json, logs.timestamps)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints one streamed record (an ndjson line; SSE `data:` framing is tolerated).
fn emit(raw: &[u8], json: bool, timestamps: bool) -> anyhow::Result<()> {
    let text = String::from_utf8_lossy(raw);
    let text = text.trim_end_matches(['\r', '\n']);
    let text = text.strip_prefix("data:").map_or(text, str::trim_start);
    if text.is_empty() || text.starts_with(':') || text.starts_with("event:") {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{text}")?;
    } else {
        match serde_json::from_str::<Value>(text) {
            Ok(line) => writeln!(out, "{}", render(&line, timestamps))?,
            Err(_) => writeln!(out, "{text}")?,
        }
    }
    out.flush()?;
    Ok(())
}

/// A log line for people: its text, or `ts stream text` with `--timestamps`.
fn render(line: &Value, timestamps: bool) -> String {
    let text = line.get("line").and_then(Value::as_str).unwrap_or_default();
    if timestamps {
        let ts = line.get("ts").and_then(Value::as_str).unwrap_or("-");
        let stream = line.get("stream").and_then(Value::as_str).unwrap_or("-");
        format!("{ts} {stream:<6} {text}")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_render_with_or_without_timestamps() {
        let line = json!({"ts": "2026-01-01T00:00:00.000Z", "stream": "stdout", "line": "hello"});
        assert_eq!(render(&line, false), "hello");
        assert_eq!(render(&line, true), "2026-01-01T00:00:00.000Z stdout hello");
    }
}
