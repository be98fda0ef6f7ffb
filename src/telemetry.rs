//! Logging and OpenTelemetry traces of the process.
//!
//! [`init`] installs the log lines (stderr, `-v`/`KUBECTL_META_LOG`) and, for `run` and `dev`
//! when the standard OpenTelemetry environment asks for traces ([`TraceConfig::from_env`]), an
//! OTLP exporter of the engine's spans ([`kubectl_meta_engine::trace`]: a span per sync, per
//! hook call, per write) plus the W3C `traceparent` header on every webhook call. When the
//! environment does not ask for traces no exporter is built, no connection is attempted and the
//! engine's spans stay disabled (a cached callsite check each).
//!
//! The environment read (the OpenTelemetry specification's names):
//! - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used verbatim) or `OTEL_EXPORTER_OTLP_ENDPOINT`
//!   (`/v1/traces` appended over HTTP): setting either asks for traces; so does
//!   `OTEL_TRACES_EXPORTER=otlp` (to the default `http://localhost:4318`).
//! - `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` (the
//!   default), `http/json` or `grpc`.
//! - `OTEL_SERVICE_NAME` (default `kubectl-meta`), `OTEL_RESOURCE_ATTRIBUTES`,
//!   `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_*`,
//!   `OTEL_EXPORTER_OTLP_*HEADERS`/`*TIMEOUT`: read by the OpenTelemetry SDK and exporter.
//! - `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`: no traces, whatever else is set.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

use crate::engine::trace::TARGET;

/// The service name when `OTEL_SERVICE_NAME` (or `service.name` in
/// `OTEL_RESOURCE_ATTRIBUTES`) does not say one.
pub const DEFAULT_SERVICE_NAME: &str = "kubectl-meta";

/// Why traces cannot be exported as the environment asks.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A protocol this build does not speak.
    #[error(
        "{var}={value}: not an OTLP protocol kubectl-meta speaks (http/protobuf, http/json or grpc); set one of those or unset it"
    )]
    Protocol {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// The exporter could not be built (a malformed endpoint, ...).
    #[error("OpenTelemetry OTLP exporter: {0} (check OTEL_EXPORTER_OTLP_*ENDPOINT)")]
    Exporter(String),
}

/// What the environment asks of traces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceConfig {
    /// The transport.
    pub protocol: OtlpProtocol,
    /// The service name to set (None: the environment names it).
    pub service_name: Option<String>,
    /// The traces endpoint to send to (None: the exporter reads the environment's).
    pub endpoint: Option<String>,
}

/// The OTLP transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `http/protobuf` (the default).
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
    /// `grpc`.
    Grpc,
}

impl TraceConfig {
    /// Read the environment through `var`: None when it does not ask for traces.
    pub fn from_env(
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<TraceConfig>, TelemetryError> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let exporter = set("OTEL_TRACES_EXPORTER").map(|v| v.trim().to_ascii_lowercase());
        if exporter.as_deref() == Some("none") {
            return Ok(None);
        }
        let asked = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
            || set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || exporter.as_deref() == Some("otlp");
        if !asked {
            return Ok(None);
        }
        let (pvar, pvalue) = match set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
            Some(v) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", Some(v)),
            None => (
                "OTEL_EXPORTER_OTLP_PROTOCOL",
                set("OTEL_EXPORTER_OTLP_PROTOCOL"),
            ),
        };
        let protocol = match pvalue.as_deref().map(str::trim) {
            None | Some("http/protobuf") => OtlpProtocol::HttpProtobuf,
            Some("http/json") => OtlpProtocol::HttpJson,
            Some("grpc") => OtlpProtocol::Grpc,
            Some(other) => {
                return Err(TelemetryError::Protocol {
                    var: pvar,
                    value: other.to_string(),
                });
            }
        };
        let named = set("OTEL_SERVICE_NAME").is_some()
            || set("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| {
                a.split(',')
                    .any(|kv| kv.trim_start().starts_with("service.name="))
            });
        Ok(Some(TraceConfig {
            protocol,
            service_name: (!named).then(|| DEFAULT_SERVICE_NAME.to_string()),
            endpoint: None,
        }))
    }
}

/// What [`init`] installed: flushes and stops the exporter when dropped (or [`shutdown`]).
///
/// [`shutdown`]: Telemetry::shutdown
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Export what is buffered and stop the exporter.
    pub fn shutdown(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Build the tracer provider for `cfg` (inside a tokio runtime: the gRPC transport needs one).
fn provider(cfg: &TraceConfig) -> Result<SdkTracerProvider, TelemetryError> {
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let exporter = match (cfg.protocol, &cfg.endpoint) {
        (OtlpProtocol::Grpc, endpoint) => {
            let b = builder.with_tonic().with_protocol(Protocol::Grpc);
            match endpoint {
                Some(e) => b.with_endpoint(e.clone()).build(),
                None => b.build(),
            }
        }
        (http, endpoint) => {
            let protocol = if http == OtlpProtocol::HttpJson {
                Protocol::HttpJson
            } else {
                Protocol::HttpBinary
            };
            let b = builder.with_http().with_protocol(protocol);
            match endpoint {
                Some(e) => b.with_endpoint(e.clone()).build(),
                None => b.build(),
            }
        }
    }
    .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let mut resource = Resource::builder();
    if let Some(name) = &cfg.service_name {
        resource = resource.with_service_name(name.clone());
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// The `traceparent` (and `tracestate`) headers of the current span: the engine's
/// [`crate::engine::trace::Propagator`].
fn trace_headers() -> Vec<(String, String)> {
    use opentelemetry::propagation::TextMapPropagator as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    struct Headers(Vec<(String, String)>);
    impl opentelemetry::propagation::Injector for Headers {
        fn set(&mut self, key: &str, value: String) {
            self.0.push((key.to_string(), value));
        }
    }
    let cx = tracing::Span::current().context();
    let mut headers = Headers(Vec::new());
    opentelemetry_sdk::propagation::TraceContextPropagator::new().inject_context(&cx, &mut headers);
    headers.0
}

/// Install the log lines (`log_filter`, or `KUBECTL_META_LOG`; stderr, colored when `color`)
/// and, when `traces` (the environment asked, see [`TraceConfig::from_env`]), the OTLP
/// exporter of the engine's spans. Call inside the tokio runtime.
pub fn init(
    log_filter: &str,
    color: bool,
    traces: Option<&TraceConfig>,
) -> Result<Telemetry, TelemetryError> {
    let filter = EnvFilter::try_from_env("KUBECTL_META_LOG")
        .unwrap_or_else(|_| EnvFilter::new(log_filter))
        // The engine's trace spans are for the exporter, not for the log lines.
        .add_directive(format!("{TARGET}=off").parse().unwrap_or_default());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(color)
        .with_filter(filter);
    let provider = traces.map(provider).transpose()?;
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("kubectl-meta"))
            .with_filter(Targets::new().with_target(TARGET, LevelFilter::TRACE))
    });
    if provider.is_some() {
        crate::engine::trace::set_propagator(trace_headers);
    }
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init();
    Ok(Telemetry { provider })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn traces_only_when_the_environment_asks() {
        assert_eq!(TraceConfig::from_env(env(&[])).unwrap(), None);
        assert_eq!(
            TraceConfig::from_env(env(&[("OTEL_SERVICE_NAME", "x")])).unwrap(),
            None
        );
        let on = TraceConfig::from_env(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]))
            .unwrap()
            .unwrap();
        assert_eq!(on.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(on.service_name.as_deref(), Some(DEFAULT_SERVICE_NAME));
        for off in [
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert_eq!(
                TraceConfig::from_env(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"), off]))
                    .unwrap(),
                None
            );
        }
        let grpc = TraceConfig::from_env(env(&[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ("OTEL_SERVICE_NAME", "mine"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(grpc.protocol, OtlpProtocol::Grpc);
        assert_eq!(grpc.service_name, None);
        let bad = TraceConfig::from_env(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(bad.contains("OTEL_EXPORTER_OTLP_PROTOCOL=thrift"), "{bad}");
    }
}
