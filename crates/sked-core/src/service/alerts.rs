//! Failure alerts at work ([`crate::alert`]): the [`Notifier`], which posts the alerts that are
//! due and records each try on its run, and [`WebhookSecretService`], which makes a tenant's
//! webhook secret and shows it once.
//!
//! The notifier never holds up a run: runs end with their alert armed in the same write, and
//! the notifier finds them later from the store's index of due alerts. Any number of notifiers
//! may run (in every `sked server` and `sked worker`, local or AWS): each try is taken by
//! a conditional save of the alert's lease first, so one delivery is posted by one of them at a
//! time; a notifier that dies mid-try leaves the lease to expire
//! ([`crate::alert::DELIVERY_LEASE`]) and the try is made again (at least once).

use super::keys::require;
use crate::alert::{self, Answer, DueAlert, WebhookSecret};
use crate::auth::{Principal, Role};
use crate::duration::Dur;
use crate::error::CoreError;
use crate::ports::{Clock, JobStore, WebhookPost, WebhookSecrets, WebhookSender};
use crate::timestamp::{self, Timestamp};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Notifier settings.
#[derive(Debug, Clone, Copy)]
pub struct NotifierConfig {
    /// Time between passes.
    pub interval: Dur,
    /// Alerts tried per pass, at once.
    pub batch: usize,
    /// The pause after a first failed try, doubled per later try.
    pub backoff_base: Duration,
}

impl Default for NotifierConfig {
    fn default() -> Self {
        NotifierConfig {
            interval: Dur::secs(1),
            batch: 32,
            backoff_base: Duration::from_secs(5),
        }
    }
}

/// Posts due alerts.
pub struct Notifier {
    store: Arc<dyn JobStore>,
    secrets: Arc<dyn WebhookSecrets>,
    sender: Arc<dyn WebhookSender>,
    clock: Arc<dyn Clock>,
    config: NotifierConfig,
}

/// What [`Notifier::new`] needs.
pub struct NotifierPorts {
    /// Where runs and their alerts are.
    pub store: Arc<dyn JobStore>,
    /// The tenants' secrets.
    pub secrets: Arc<dyn WebhookSecrets>,
    /// How events are posted.
    pub sender: Arc<dyn WebhookSender>,
    /// Time.
    pub clock: Arc<dyn Clock>,
}

impl Notifier {
    /// A notifier over `ports`.
    pub fn new(ports: NotifierPorts, config: NotifierConfig) -> Self {
        Notifier {
            store: ports.store,
            secrets: ports.secrets,
            sender: ports.sender,
            clock: ports.clock,
            config,
        }
    }

    /// Runs passes every `interval` until `shutdown` is cancelled; at once again after a pass
    /// that found a whole batch due (a backlog drains at the receivers' pace, not a batch a
    /// second).
    pub async fn run(self, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            match self.deliver_due().await {
                Ok(tries) if tries >= self.config.batch => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "alert pass failed"),
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                _ = self.clock.sleep_until(self.clock.now() + self.config.interval.to_chrono()) => {}
            }
        }
    }

    /// One pass: tries every alert due now (up to `batch`, at once); answers how many tries
    /// were made.
    pub async fn deliver_due(&self) -> Result<usize, CoreError> {
        let now = timestamp::trunc_ms(self.clock.now());
        let due = self.store.due_alerts(now, self.config.batch).await?;
        let tries = futures::future::join_all(due.into_iter().map(|d| self.try_once(d, now))).await;
        let mut made = 0;
        for t in tries {
            made += usize::from(t?);
        }
        Ok(made)
    }

    /// Takes `due`'s alert (a conditional save of its lease), posts it, and records the
    /// answer. `false` when another notifier took it first.
    async fn try_once(&self, due: DueAlert, now: Timestamp) -> Result<bool, CoreError> {
        let Some(mut alert) = due.alert().cloned() else {
            return Ok(false);
        };
        let (key, Some(was_due)) = (due.key(), alert.due) else {
            return Ok(false);
        };
        if !alert.lease(now) || !self.store.save_alert(&key, was_due, &alert).await? {
            return Ok(false);
        }
        let leased_until = alert.due.unwrap_or(now);
        let body = due.body(&alert);
        let answer = match self.secrets.webhook_secret(due.tenant()).await? {
            None => Answer::Failed("the tenant has no webhook secret: make one with POST /v1/webhook-secret".into()),
            Some(secret) => {
                let post = WebhookPost {
                    url: alert.notify.webhook.clone(),
                    headers: vec![
                        (alert::SIGNATURE_HEADER, alert::signature(&secret.secret, now, &body)),
                        (
                            alert::EVENT_HEADER,
                            alert.event.map(|e| e.to_string()).unwrap_or_default(),
                        ),
                        (alert::DELIVERY_HEADER, due.delivery_id()),
                    ],
                    body,
                };
                match self.sender.post(&post).await {
                    Ok(status) => Answer::Status(status),
                    Err(e) => Answer::Failed(e),
                }
            }
        };
        alert.record(self.clock.now(), answer, self.config.backoff_base);
        let last = alert.deliveries.last();
        match &due {
            DueAlert::Run(run) => tracing::info!(
                tenant = %run.tenant, job_id = %run.job_id, run_id = %run.run_id,
                attempt = run.attempt_count(), delivery = alert.deliveries.len(),
                status = last.and_then(|d| d.status), error = last.and_then(|d| d.error.as_deref()),
                state = %alert.state, "alert try"
            ),
            DueAlert::Skipped { tenant, job_id, record } => tracing::info!(
                %tenant, %job_id, skipped_from = %timestamp::format(&record.from), count = record.count,
                delivery = alert.deliveries.len(), status = last.and_then(|d| d.status),
                error = last.and_then(|d| d.error.as_deref()), state = %alert.state, "alert try"
            ),
        }
        // Not saved if the lease ran out and another notifier took the alert meanwhile: its
        // try stands, and this one was one more (at least once).
        self.store.save_alert(&key, leased_until, &alert).await?;
        Ok(true)
    }
}

/// Makes tenants' webhook secrets.
#[derive(Clone)]
pub struct WebhookSecretService {
    secrets: Arc<dyn WebhookSecrets>,
    clock: Arc<dyn Clock>,
}

impl WebhookSecretService {
    /// A service keeping secrets in `secrets`.
    pub fn new(secrets: Arc<dyn WebhookSecrets>, clock: Arc<dyn Clock>) -> Self {
        WebhookSecretService { secrets, clock }
    }

    /// Makes a new secret for the caller's tenant, replacing the one before, and answers it:
    /// the only time it is shown. Needs an admin or operator key.
    pub async fn rotate(&self, caller: &Principal) -> Result<WebhookSecret, CoreError> {
        require(
            caller,
            Role::Admin,
            "making the webhook secret needs an admin or operator key",
        )?;
        let secret = WebhookSecret {
            secret: alert::new_secret(),
            created_at: timestamp::trunc_ms(self.clock.now()),
        };
        self.secrets.put_webhook_secret(&caller.tenant, &secret).await?;
        tracing::info!(tenant = %caller.tenant, "webhook secret made");
        Ok(secret)
    }

    /// When the caller's tenant's secret was made (`None`: never); never the secret.
    pub async fn created_at(&self, caller: &Principal) -> Result<Option<Timestamp>, CoreError> {
        require(
            caller,
            Role::Admin,
            "reading the webhook secret's date needs an admin or operator key",
        )?;
        Ok(self.secrets.webhook_secret(&caller.tenant).await?.map(|s| s.created_at))
    }
}
