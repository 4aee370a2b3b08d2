//! Prometheus metrics: the adapter of sked-core's [`Observer`](sked_core::ports::Observer)
//! port, and the exposition `GET /metrics` answers (Prometheus text format 0.0.4, encoded by
//! the `prometheus-client` crate).
//!
//! - [`recorder`]: [`Recorder`], which counts the services' events and the HTTP requests in
//!   memory as they happen — per tenant where a tenant is known.
//! - [`exposition`]: one scrape: what a principal may see ([`Scope`]), the queue depth read
//!   from the queue port, and the text.
//! - `http`: the middleware that counts every request by its matched route template.
//!
//! Nothing here reads the jobs or runs tables: a scrape costs the number of series (tenants ×
//! families) plus one count of the dispatch queue's messages, whatever the number of jobs.
//! The numbers are this process's: a `sked worker` process counts its own starts and ends.

pub mod exposition;
pub(crate) mod http;
pub mod recorder;

pub use exposition::Scope;
pub use recorder::Recorder;
