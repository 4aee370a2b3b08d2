//! `sked keys create|list|revoke`. `create` prints the new key once (with `--json`, the
//! API's answer, which holds it under `key`); nothing else ever shows a secret.

use super::Client;
use crate::cli::{ClientArgs, KeysCommand};
use crate::output::{self, Table};
use reqwest::Method;
use serde_json::{Value, json};
use std::process::ExitCode;

/// Runs one `sked keys` command.
pub async fn run(args: &ClientArgs, command: KeysCommand) -> anyhow::Result<ExitCode> {
    let client = Client::new(args)?;
    match command {
        KeysCommand::Create { role, name, tenant } => {
            let mut body = json!({"role": role, "name": name});
            if let Some(tenant) = tenant {
                body["tenant"] = Value::String(tenant);
            }
            let answer = client.post(&["keys"], &[], Some(&body)).await?;
            if args.json {
                println!("{}", answer.text);
            } else {
                print_keys(std::slice::from_ref(&answer.json));
                println!("\nkey (shown only now): {}", output::get(&answer.json, "key"));
            }
        }
        KeysCommand::List => {
            let answer = client.get(&["keys"], &[]).await?;
            if args.json {
                println!("{}", answer.text);
            } else {
                print_keys(answer.json["items"].as_array().map_or(&[][..], Vec::as_slice));
            }
        }
        KeysCommand::Revoke { id } => {
            let answer = client.call(Method::DELETE, &["keys", &id], &[], None).await?;
            if args.json {
                println!("{}", answer.text);
            } else {
                print_keys(std::slice::from_ref(&answer.json));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_keys(keys: &[Value]) {
    let mut table = Table::new(&["ID", "TENANT", "ROLE", "NAME", "CREATED", "REVOKED"]);
    for k in keys {
        table.row(vec![
            output::get(k, "id"),
            output::get(k, "tenant"),
            output::get(k, "role"),
            output::get(k, "name"),
            output::get(k, "created_at"),
            output::get(k, "revoked_at"),
        ]);
    }
    table.print();
}
