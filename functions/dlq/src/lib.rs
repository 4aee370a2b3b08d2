//! The DLQ function: the SQS event source on the dead-letter queue, the last backstop of
//! dispatch. SQS moves a dispatch message there after `maxReceiveCount` receives that did not
//! end in an ack (a worker that keeps dying on it, a run that could not be claimed); this
//! handler ends its run FAILED with the reason `dead-lettered after N receives`, through
//! [`sked_core::service::dead_letter`] (which leaves alone a run that is not abandoned).
//!
//! Batches report partial failures ([`SqsBatchResponse`]; the event source mapping needs
//! `FunctionResponseTypes: [ReportBatchItemFailures]`): a record whose run could not be
//! updated (a store error), or whose body is not a sked dispatch, is named as a failure and
//! stays in the DLQ — the first to be tried again, the second for a person to look at (the
//! "DLQ not empty" alarm keeps ringing while it is there). Every other record is deleted.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::LambdaEvent;
use sked_aws::sqs::decode_body;
use sked_core::service::Ports;
use sked_core::service::dead_letter::{DeadLetterOutcome, dead_letter, dead_letter_reason};
use std::convert::Infallible;

/// The DLQ function's handler.
pub struct DlqFn {
    ports: Ports,
    max_receive_count: u32,
}

/// What became of one record.
#[derive(Debug)]
enum Handled {
    /// Done with: delete it.
    Done,
    /// Keep it in the DLQ.
    Failed,
}

impl DlqFn {
    /// A handler over `ports`. `max_receive_count` is the redrive policy's (the N of the
    /// reason: SQS dead-letters a message after exactly that many receives).
    pub fn new(ports: Ports, max_receive_count: u32) -> Self {
        DlqFn {
            ports,
            max_receive_count,
        }
    }

    /// Handles a batch; never fails as a whole (failures are per record).
    pub async fn handle(&self, event: LambdaEvent<SqsEvent>) -> Result<SqsBatchResponse, Infallible> {
        let mut response = SqsBatchResponse::default();
        for record in &event.payload.records {
            if let Handled::Failed = self.handle_record(record).await {
                // A record without an id cannot be named; nothing in SQS sends one.
                if let Some(id) = &record.message_id {
                    response.add_failure(id.clone());
                }
            }
        }
        Ok(response)
    }

    async fn handle_record(&self, record: &SqsMessage) -> Handled {
        let message_id = record.message_id.as_deref().unwrap_or_default();
        let receives = record.attributes.get("ApproximateReceiveCount");
        let dispatch = match decode_body(record.body.as_deref().unwrap_or_default()) {
            Ok(d) => d,
            Err(e) => {
                tracing::error!(message_id, error = %e, "dead letter is not a sked dispatch; left in the DLQ");
                return Handled::Failed;
            }
        };
        let (tenant, run_id) = (&dispatch.tenant, &dispatch.run_id);
        let reason = dead_letter_reason(self.max_receive_count);
        match dead_letter(&self.ports, tenant, run_id, &reason).await {
            Ok(outcome) => {
                let what = match &outcome {
                    DeadLetterOutcome::Failed(_) => "run failed",
                    DeadLetterOutcome::AlreadyEnded(_) => "run had ended",
                    DeadLetterOutcome::StillRunning(_) => "run is running under a live lease; left to its worker",
                    DeadLetterOutcome::Waiting(_) => "run waits for its retry; left to its own dispatch",
                    DeadLetterOutcome::Gone => "run no longer exists",
                };
                tracing::info!(message_id, %tenant, %run_id, ?receives, what, "dead letter handled");
                Handled::Done
            }
            Err(e) => {
                tracing::warn!(message_id, %tenant, %run_id, error = %e, "dead letter not handled; it stays in the DLQ");
                Handled::Failed
            }
        }
    }
}
