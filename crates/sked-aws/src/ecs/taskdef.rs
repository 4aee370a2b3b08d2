//! Which task definition runs a container task's image.
//!
//! ECS cannot override a container's image in `RunTask`, so the configured task definition
//! is a template: a task whose image is the template container's (or empty) runs on the
//! template itself; another image runs on a task definition of family
//! `<template family>-<hash of the image>`, a copy of the template with only that image
//! changed, registered on first use (its latest revision is reused when its image matches,
//! so restarts do not pile up revisions). Answers are cached for the executor's life.
//!
//! Registering needs `ecs:RegisterTaskDefinition` and `iam:PassRole` on the template's
//! roles; a deployment that wants one image only can leave both out.

use super::outcome::Fnv;
use crate::error::classify;
use aws_sdk_ecs::types::{LogDriver, TaskDefinition};
use std::collections::HashMap;
use tokio::sync::Mutex;

/// Where a task definition's container logs go, when it logs with `awslogs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsLogs {
    /// The log group.
    pub group: String,
    /// The stream prefix (streams are `<prefix>/<container>/<task id>`).
    pub prefix: Option<String>,
}

/// A task definition to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Its ARN (with revision).
    pub arn: String,
    /// Its container's `awslogs` configuration, if any.
    pub logs: Option<AwsLogs>,
}

/// Resolves images to task definitions, with a cache.
#[derive(Debug)]
pub struct TaskDefs {
    /// ECS.
    client: aws_sdk_ecs::Client,
    /// The configured task definition.
    template: String,
    /// The container that runs the job.
    container: String,
    /// The template as described, once described.
    described: Mutex<Option<TaskDefinition>>,
    /// Image → task definition, for images other than the template's.
    derived: Mutex<HashMap<String, Resolved>>,
}

impl TaskDefs {
    /// Resolves against the `template` task definition and its `container`.
    pub fn new(client: aws_sdk_ecs::Client, template: String, container: String) -> Self {
        TaskDefs {
            client,
            template,
            container,
            described: Mutex::new(None),
            derived: Mutex::new(HashMap::new()),
        }
    }

    /// The task definition that runs `image`.
    pub async fn resolve(&self, image: &str) -> Result<Resolved, String> {
        let template = self.template().await?;
        let template_image = self.image_of(&template);
        if image.is_empty() || template_image.as_deref() == Some(image) {
            return Ok(self.resolved(&template));
        }
        let mut derived = self.derived.lock().await;
        if let Some(found) = derived.get(image) {
            return Ok(found.clone());
        }
        let family = derived_family(template.family().unwrap_or("sked"), image);
        let existing = match self.describe(&family).await {
            Ok(def) => Some(def).filter(|d| self.image_of(d).as_deref() == Some(image)),
            Err(_) => None, // not registered yet
        };
        let def = match existing {
            Some(def) => def,
            None => self.register(&template, &family, image).await?,
        };
        let found = self.resolved(&def);
        derived.insert(image.to_string(), found.clone());
        Ok(found)
    }

    /// The template, described once.
    async fn template(&self) -> Result<TaskDefinition, String> {
        let mut described = self.described.lock().await;
        if let Some(def) = described.as_ref() {
            return Ok(def.clone());
        }
        let def = self.describe(&self.template).await?;
        if self.image_of(&def).is_none() {
            return Err(format!(
                "task definition {} has no container named {:?}",
                self.template, self.container
            ));
        }
        *described = Some(def.clone());
        Ok(def)
    }

    /// `DescribeTaskDefinition`.
    async fn describe(&self, name: &str) -> Result<TaskDefinition, String> {
        let out = self
            .client
            .describe_task_definition()
            .task_definition(name)
            .send()
            .await
            .map_err(|e| {
                classify("ecs:DescribeTaskDefinition", e, |_| None)
                    .into_call()
                    .to_string()
            })?;
        out.task_definition
            .ok_or_else(|| format!("DescribeTaskDefinition answered no task definition for {name}"))
    }

    /// Registers a copy of `template` as `family` with the job container's image changed.
    async fn register(&self, template: &TaskDefinition, family: &str, image: &str) -> Result<TaskDefinition, String> {
        let containers = template
            .container_definitions()
            .iter()
            .cloned()
            .map(|mut c| {
                if c.name.as_deref() == Some(self.container.as_str()) {
                    c.image = Some(image.to_string());
                }
                c
            })
            .collect();
        let out = self
            .client
            .register_task_definition()
            .family(family)
            .set_container_definitions(Some(containers))
            .set_cpu(template.cpu.clone())
            .set_memory(template.memory.clone())
            .set_network_mode(template.network_mode.clone())
            .set_requires_compatibilities(template.requires_compatibilities.clone())
            .set_execution_role_arn(template.execution_role_arn.clone())
            .set_task_role_arn(template.task_role_arn.clone())
            .set_volumes(template.volumes.clone())
            .set_runtime_platform(template.runtime_platform.clone())
            .set_ephemeral_storage(template.ephemeral_storage.clone())
            .send()
            .await
            .map_err(|e| {
                classify("ecs:RegisterTaskDefinition", e, |_| None)
                    .into_call()
                    .to_string()
            })?;
        out.task_definition
            .ok_or_else(|| "RegisterTaskDefinition answered no task definition".to_string())
    }

    /// The job container's image in `def`.
    fn image_of(&self, def: &TaskDefinition) -> Option<String> {
        def.container_definitions()
            .iter()
            .find(|c| c.name() == Some(self.container.as_str()))
            .and_then(|c| c.image().map(str::to_string))
    }

    /// `def` as something to run.
    fn resolved(&self, def: &TaskDefinition) -> Resolved {
        let logs = def
            .container_definitions()
            .iter()
            .find(|c| c.name() == Some(self.container.as_str()))
            .and_then(|c| c.log_configuration())
            .filter(|l| *l.log_driver() == LogDriver::Awslogs)
            .and_then(|l| {
                let options = l.options()?;
                Some(AwsLogs {
                    group: options.get("awslogs-group")?.clone(),
                    prefix: options.get("awslogs-stream-prefix").cloned(),
                })
            });
        Resolved {
            arn: def
                .task_definition_arn()
                .map_or_else(|| self.template.clone(), str::to_string),
            logs,
        }
    }
}

/// The family of the copy of `family` that runs `image`: letters, digits, `-` and `_`, at
/// most 255 characters.
pub fn derived_family(family: &str, image: &str) -> String {
    let mut hash = Fnv::default();
    hash.write(image.as_bytes());
    let base: String = family.chars().take(200).collect();
    format!("{base}-img-{:016x}", hash.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_families_are_stable_and_valid() {
        let a = derived_family("sked-task", "alpine:3");
        assert_eq!(a, derived_family("sked-task", "alpine:3"));
        assert_ne!(a, derived_family("sked-task", "alpine:4"));
        assert!(a.starts_with("sked-task-img-"));
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert!(derived_family(&"f".repeat(300), "x").len() <= 255);
    }
}
