//! Trace spans of the engine: one per sync, under it one per hook call and one per write.
//!
//! The engine emits plain `tracing` spans under the target [`TARGET`] and depends on no
//! OpenTelemetry crate: a program that wants them exported installs a layer for that target
//! (the plugin's OTLP exporter), and one that does not leaves the target disabled, so each
//! span costs one cached callsite check and nothing is formatted or recorded.
//!
//! - `sync` (controller, parent, map key, every coalesced trigger; then the plan's counts,
//!   writes, result and error);
//! - `hook` (controller, hook, parent; then status, latency, answer size, error), a child of
//!   `sync`;
//! - `write` (verb, resource, object, result, error), a child of `sync`.
//!
//! A webhook call carries the trace context of its `hook` span as HTTP headers (W3C
//! `traceparent`) when the program installed a [`Propagator`] with [`set_propagator`]; without
//! one no header is added.

use std::sync::OnceLock;

/// The `tracing` target of every engine span (the one to enable to export them).
pub const TARGET: &str = "kubectl_meta_trace";

/// Returns the headers (name, value) carrying the current span's trace context, e.g.
/// `traceparent`; empty when there is nothing to carry.
pub type Propagator = fn() -> Vec<(String, String)>;

static PROPAGATOR: OnceLock<Propagator> = OnceLock::new();

/// Install the function that gives a webhook call its trace-context headers (once per
/// process; later calls are ignored). Returns false when one was already installed.
pub fn set_propagator(propagator: Propagator) -> bool {
    PROPAGATOR.set(propagator).is_ok()
}

/// The trace-context headers of the current span (none without a propagator).
pub(crate) fn headers() -> Vec<(String, String)> {
    match PROPAGATOR.get() {
        Some(p) => p(),
        None => Vec::new(),
    }
}

/// The span of one write, its fields filled in when the write is published
/// ([`record_write`]).
pub(crate) fn write_span() -> tracing::Span {
    tracing::info_span!(
        target: TARGET,
        "write",
        otel.kind = "client",
        verb = tracing::field::Empty,
        resource = tracing::field::Empty,
        object = tracing::field::Empty,
        result = tracing::field::Empty,
        error = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// Fill the current write span (if any) with what was written and how it went.
pub(crate) fn record_write(
    verb: &impl std::fmt::Display,
    resource: &str,
    object: &str,
    error: Option<&str>,
) {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    span.record("verb", verb.to_string().as_str());
    span.record("resource", resource);
    span.record("object", object);
    match error {
        None => {
            span.record("result", "ok");
        }
        Some(e) => {
            span.record("result", "error");
            span.record("error", e);
            span.record("otel.status_code", "ERROR");
        }
    }
}
