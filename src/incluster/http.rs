//! `run`'s HTTP endpoints on one address (`--http-addr`):
//!
//! - `/healthz`: 200 while the process serves (the liveness probe).
//! - `/readyz`: 200 once the definitions were read, every controller's Lease is decided (this
//!   replica holds it, or knows who does) and every controller held here has synced its caches;
//!   else 503 listing what is missing, one line each (the readiness probe).
//! - `/metrics`: Prometheus' text format ([`super::metrics`]).
//! - `/debug/flight`: the flight recorder's dump (docs/flight-recorder.md); 404 when
//!   `--flight-recorder-size 0` turned it off.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use super::SharedStatus;
use super::metrics::{CONTENT_TYPE, Metrics};
use crate::engine::flight::FlightRecorder;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[error("--http-addr {addr}: cannot listen: {source}")]
pub struct HttpError {
    /// The address asked for.
    pub addr: String,
    /// The bind error.
    #[source]
    pub source: std::io::Error,
}

#[derive(Clone)]
struct AppState {
    status: SharedStatus,
    metrics: Arc<Metrics>,
    flight: Option<Arc<FlightRecorder>>,
}

/// Listen on `addr` and serve until `stop`; returns the address bound (port 0 picks one).
pub async fn serve(
    addr: &str,
    status: SharedStatus,
    metrics: Arc<Metrics>,
    flight: Option<Arc<FlightRecorder>>,
    stop: CancellationToken,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), HttpError> {
    let err = |source| HttpError {
        addr: addr.to_string(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(err)?;
    let bound = listener.local_addr().map_err(err)?;
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/debug/flight", get(flight_dump))
        .with_state(AppState {
            status,
            metrics,
            flight,
        });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
    });
    Ok((bound, task))
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    let why = s
        .status
        .read()
        .map(|st| st.not_ready())
        .unwrap_or_else(|_| vec!["status unavailable".to_string()]);
    if why.is_empty() {
        (StatusCode::OK, "ok\n".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready:\n{}\n", why.join("\n")),
        )
    }
}

async fn metrics_text(State(s): State<AppState>) -> impl IntoResponse {
    let text = match s.status.read() {
        Ok(st) => s.metrics.render(&st),
        Err(_) => String::new(),
    };
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text)
}

async fn flight_dump(State(s): State<AppState>) -> axum::response::Response {
    match &s.flight {
        Some(f) => ([(header::CONTENT_TYPE, "application/json")], f.dump_json()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "the flight recorder is off (--flight-recorder-size 0)\n",
        )
            .into_response(),
    }
}
