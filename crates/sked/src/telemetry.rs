//! Optional export of spans over OTLP (OpenTelemetry), off unless configured by the standard
//! environment variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL, e.g.
//! `http://127.0.0.1:4318/v1/traces`) or `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL, to which
//! `/v1/traces` is added); `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL` `http/protobuf` (default) or
//! `http/json` (gRPC is not built in: use an OpenTelemetry Collector's HTTP receiver);
//! `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, `OTEL_SERVICE_NAME` (default `sked-server` or
//! `sked-worker`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_SCHEDULE_DELAY` and the other batch
//! settings; `OTEL_SDK_DISABLED=true` turns it off.
//!
//! What is exported: the spans sked's code opens, chiefly one `attempt` span per attempt a
//! worker runs, with `job_id`, `run_id`, `attempt` and the tenant as attributes and the
//! attempt's log lines (started, ended, retried, …) as its events. Spans leave from the batch
//! processor's own thread, so a slow or absent collector never delays a run; what cannot be
//! sent is dropped.

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;

/// The running exporter; dropping it flushes the spans still buffered, then stops it.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            tracing::warn!(error = %e, "flushing the last spans to the OTLP endpoint failed");
        }
    }
}

/// A tracing layer for a subscriber `S`, boxed.
pub type BoxedLayer<S> = Box<dyn Layer<S> + Send + Sync>;

/// A configuration value: the traces-specific variable, else the general one.
fn otlp_env(traces: &str, general: &str) -> Option<String> {
    [traces, general]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
}

/// The tracing layer that exports spans over OTLP, and its guard, when an OTLP endpoint is
/// configured (see the module header); `service` names this process unless
/// `OTEL_SERVICE_NAME` does.
pub fn otlp_layer<S>(service: &str) -> anyhow::Result<(Option<BoxedLayer<S>>, Telemetry)>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span> + Send + Sync,
{
    let off = Telemetry { provider: None };
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    let configured = otlp_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
    if disabled || !configured {
        return Ok((None, off));
    }
    let protocol = match otlp_env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL").as_deref() {
        None | Some("http/protobuf") => Protocol::HttpBinary,
        Some("http/json") => Protocol::HttpJson,
        Some(other) => {
            anyhow::bail!("OTEL_EXPORTER_OTLP_PROTOCOL={other} is not supported: use http/protobuf or http/json")
        }
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .build()
        .context("configuring the OTLP span exporter")?;
    let resource = match std::env::var("OTEL_SERVICE_NAME") {
        Ok(_) => Resource::builder().build(),
        Err(_) => Resource::builder().with_service_name(service.to_string()).build(),
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("sked"));
    Ok((
        Some(Box::new(layer)),
        Telemetry {
            provider: Some(provider),
        },
    ))
}
