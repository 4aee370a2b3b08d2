//! The ports failure alerts need besides the store ([`crate::alert`]): where each tenant's
//! webhook secret is kept ([`WebhookSecrets`]), and how an event is posted
//! ([`WebhookSender`]).

use super::StoreError;
use crate::alert::WebhookSecret;
use crate::ids::TenantId;
use async_trait::async_trait;

/// Keeps each tenant's webhook secret (the key its alerts are signed with). Unlike API keys
/// the secret itself is kept: signing needs it.
#[async_trait]
pub trait WebhookSecrets: Send + Sync + 'static {
    /// The tenant's secret; `None` until one was made.
    async fn webhook_secret(&self, tenant: &TenantId) -> Result<Option<WebhookSecret>, StoreError>;

    /// Makes `secret` the tenant's, replacing the one before (alerts posted from then on are
    /// signed with it).
    async fn put_webhook_secret(&self, tenant: &TenantId, secret: &WebhookSecret) -> Result<(), StoreError>;
}

/// One HTTP POST of an alert.
#[derive(Debug, Clone)]
pub struct WebhookPost {
    /// Where.
    pub url: String,
    /// Headers besides `Content-Type: application/json`.
    pub headers: Vec<(&'static str, String)>,
    /// The JSON body.
    pub body: Vec<u8>,
}

/// Posts alerts.
#[async_trait]
pub trait WebhookSender: Send + Sync + 'static {
    /// Posts `post`; the receiver's status, or why there was none (refused, timed out, …).
    /// An implementation bounds the time it waits.
    async fn post(&self, post: &WebhookPost) -> Result<u16, String>;
}
