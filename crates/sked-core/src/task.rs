//! Tasks: what a job runs — a command, an HTTP call, or a container (ECS only).

use crate::secret::Env;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The work a job does at each firing. Exactly one kind, written `{"command": {...}}` etc.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Task {
    /// A program exec'd directly (no shell unless argv asks for one).
    Command(CommandTask),
    /// One HTTP request; success is the expected status.
    Http(HttpTask),
    /// A container image run as an ECS Fargate task (AWS deployment only).
    Container(ContainerTask),
}

/// A child process: `argv[0]` looked up on PATH, the rest its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CommandTask {
    /// Program and arguments; must not be empty.
    #[cfg_attr(feature = "utoipa", schema(min_items = 1))]
    pub argv: Vec<String>,
    /// Extra environment variables (the worker's environment is inherited); values may be
    /// secrets ([`crate::secret`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(feature = "utoipa", schema(schema_with = crate::openapi::env))]
    pub env: Env,
    /// Working directory; the worker's own if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// An HTTP request made by the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HttpTask {
    /// HTTP method, upper case; default `GET`.
    #[serde(default = "default_method")]
    #[cfg_attr(feature = "utoipa", schema(schema_with = crate::openapi::http_method))]
    pub method: String,
    /// Absolute `http://` or `https://` URL.
    pub url: String,
    /// Request headers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Request body, sent as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The status that means success; any 2xx if absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::integer::whole_opt"
    )]
    #[cfg_attr(feature = "utoipa", schema(minimum = 100, maximum = 599))]
    pub expect_status: Option<u16>,
}

fn default_method() -> String {
    "GET".into()
}

/// A container run by the ECS executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ContainerTask {
    /// Image reference.
    pub image: String,
    /// Command override.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Environment overrides; values may be secrets ([`crate::secret`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(feature = "utoipa", schema(schema_with = crate::openapi::env))]
    pub env: Env,
}

impl Task {
    /// The task's environment, if its kind has one.
    pub fn env(&self) -> Option<&Env> {
        match self {
            Task::Command(c) => Some(&c.env),
            Task::Container(c) => Some(&c.env),
            Task::Http(_) => None,
        }
    }

    /// The same, to change.
    pub fn env_mut(&mut self) -> Option<&mut Env> {
        match self {
            Task::Command(c) => Some(&mut c.env),
            Task::Container(c) => Some(&mut c.env),
            Task::Http(_) => None,
        }
    }

    /// The task kind's name as written in JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Task::Command(_) => "command",
            Task::Http(_) => "http",
            Task::Container(_) => "container",
        }
    }
}
