//! Fault injection for tests: make a running sandbox misbehave the way a real API server does
//! under load or trouble (429 with `Retry-After`, 409, 500, slow answers, expired watches).
//!
//! The switch is a [`FaultInjector`] handle on the in-process [`Sandbox`](super::Sandbox) value,
//! reachable only from Rust code that started the sandbox: no request, header, kubeconfig or
//! environment variable can arm it, and with no rule armed every request passes untouched (one
//! atomic load). Rules match on method and a path fragment, optionally only watches that resume
//! from a resourceVersion, and fire a chosen number of times. [`FaultInjector::cut_watches`]
//! ends every open watch, as a server restart or a watch timeout does.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::status::ApiError;

/// What a matching request gets.
#[derive(Debug, Clone)]
pub enum FaultAction {
    /// An error `Status` with this code (`429` gets `Retry-After` when `retry_after` is set).
    Status {
        /// HTTP status code.
        code: u16,
        /// Seconds for `Retry-After` (and `details.retryAfterSeconds`).
        retry_after: Option<u64>,
    },
    /// Wait this long, then serve the request normally.
    Delay(Duration),
    /// For a watch: a 200 stream with one `ERROR` event carrying 410 Expired ("too old resource
    /// version"), as kube-apiserver answers a watch whose resourceVersion was compacted.
    ExpireWatch,
    /// Wait until [`FaultInjector::release_held`] (or [`FaultInjector::clear`]), then serve the
    /// request normally: lets a test change things while a client waits for an answer.
    Hold,
}

/// One rule: which requests, what they get, how many times.
#[derive(Debug, Clone)]
pub struct Fault {
    method: Option<String>,
    path_contains: String,
    resumed_watch_only: bool,
    action: FaultAction,
    times: Option<usize>,
}

impl Fault {
    /// Requests with `method` (`GET`, `PUT`, ...; `*` for any) whose path contains `path`.
    pub fn on(method: &str, path: &str) -> Fault {
        Fault {
            method: (method != "*").then(|| method.to_ascii_uppercase()),
            path_contains: path.to_string(),
            resumed_watch_only: false,
            action: FaultAction::Status {
                code: 500,
                retry_after: None,
            },
            times: None,
        }
    }

    /// Answer with an error status.
    pub fn status(mut self, code: u16) -> Fault {
        self.action = FaultAction::Status {
            code,
            retry_after: None,
        };
        self
    }

    /// Answer 429 TooManyRequests with `Retry-After: secs`.
    pub fn too_many_requests(mut self, secs: u64) -> Fault {
        self.action = FaultAction::Status {
            code: 429,
            retry_after: Some(secs),
        };
        self
    }

    /// Answer slowly.
    pub fn delay(mut self, d: Duration) -> Fault {
        self.action = FaultAction::Delay(d);
        self
    }

    /// Hold matching requests until released.
    pub fn hold(mut self) -> Fault {
        self.action = FaultAction::Hold;
        self
    }

    /// Expire watches that resume from a resourceVersion (410 in the stream).
    pub fn expire_watch(mut self) -> Fault {
        self.action = FaultAction::ExpireWatch;
        self.resumed_watch_only = true;
        self
    }

    /// Fire at most `n` times (default: until cleared).
    pub fn times(mut self, n: usize) -> Fault {
        self.times = Some(n);
        self
    }

    fn matches(&self, method: &str, path: &str, query: &str) -> bool {
        if self.method.as_deref().is_some_and(|m| m != method) {
            return false;
        }
        if !path.contains(&self.path_contains) {
            return false;
        }
        !self.resumed_watch_only || is_resumed_watch(query)
    }
}

/// `watch=true|1` with a `resourceVersion` other than empty or `0`.
fn is_resumed_watch(query: &str) -> bool {
    let mut watch = false;
    let mut resumed = false;
    for (k, v) in query.split('&').filter_map(|kv| kv.split_once('=')) {
        match k {
            "watch" => watch = v == "true" || v == "1",
            "resourceVersion" => resumed = !v.is_empty() && v != "0",
            _ => {}
        }
    }
    watch && resumed
}

#[derive(Debug)]
struct Armed {
    fault: Fault,
    fired: Arc<AtomicUsize>,
}

/// The handle tests use to make one sandbox misbehave. Cloning shares the rules.
#[derive(Debug, Clone)]
pub struct FaultInjector {
    any: Arc<AtomicBool>,
    rules: Arc<Mutex<Vec<Armed>>>,
    /// Cancelled to end every open watch stream (then replaced by a fresh token).
    cut: Arc<Mutex<CancellationToken>>,
    /// Bumped to release held requests.
    release: Arc<watch::Sender<u64>>,
}

impl Default for FaultInjector {
    fn default() -> Self {
        FaultInjector {
            any: Arc::default(),
            rules: Arc::default(),
            cut: Arc::default(),
            release: Arc::new(watch::channel(0).0),
        }
    }
}

/// How often an injected fault fired.
#[derive(Debug, Clone)]
pub struct FaultCounter(Arc<AtomicUsize>);

impl FaultCounter {
    /// Requests answered by the fault so far.
    pub fn fired(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl FaultInjector {
    /// Arm a rule (rules are tried in the order they were added; the first match fires).
    pub fn inject(&self, fault: Fault) -> FaultCounter {
        let fired = Arc::new(AtomicUsize::new(0));
        if let Ok(mut r) = self.rules.lock() {
            r.push(Armed {
                fault,
                fired: Arc::clone(&fired),
            });
            self.any.store(true, Ordering::SeqCst);
        }
        FaultCounter(fired)
    }

    /// Disarm every rule (and release held requests).
    pub fn clear(&self) {
        if let Ok(mut r) = self.rules.lock() {
            r.clear();
            self.any.store(false, Ordering::SeqCst);
        }
        self.release_held();
    }

    /// Let requests held by [`Fault::hold`] go on.
    pub fn release_held(&self) {
        self.release.send_modify(|n| *n += 1);
    }

    /// End every open watch stream now, as kube-apiserver does when a watch times out or the
    /// server restarts: clients resume from their last resourceVersion.
    pub fn cut_watches(&self) {
        if let Ok(mut c) = self.cut.lock() {
            c.cancel();
            *c = CancellationToken::new();
        }
    }

    fn cut_token(&self) -> CancellationToken {
        self.cut.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The action for a request, counting it as fired.
    fn pick(&self, method: &str, path: &str, query: &str) -> Option<FaultAction> {
        if !self.any.load(Ordering::SeqCst) {
            return None;
        }
        let rules = self.rules.lock().ok()?;
        rules.iter().find_map(|a| {
            if !a.fault.matches(method, path, query) {
                return None;
            }
            let n = a.fired.fetch_add(1, Ordering::SeqCst);
            if a.fault.times.is_some_and(|t| n >= t) {
                a.fired.fetch_sub(1, Ordering::SeqCst);
                return None;
            }
            Some(a.fault.action.clone())
        })
    }
}

/// The middleware: applies the first matching rule, else passes the request on.
pub async fn layer(State(faults): State<FaultInjector>, req: Request, next: Next) -> Response {
    let action = faults.pick(
        req.method().as_str(),
        req.uri().path(),
        req.uri().query().unwrap_or(""),
    );
    let is_watch = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let cut = is_watch.then(|| faults.cut_token());
    let resp = match action {
        None => next.run(req).await,
        Some(FaultAction::Hold) => {
            let mut rx = faults.release.subscribe();
            let _ = rx.changed().await;
            next.run(req).await
        }
        Some(FaultAction::Delay(d)) => {
            tokio::time::sleep(d).await;
            next.run(req).await
        }
        Some(FaultAction::Status { code, retry_after }) => {
            let reason = match code {
                409 => "Conflict",
                429 => "TooManyRequests",
                503 => "ServiceUnavailable",
                504 => "Timeout",
                _ => "InternalError",
            };
            let mut e = ApiError::new(code, reason, format!("injected fault ({code})"));
            e.retry_after = retry_after;
            e.into_response()
        }
        Some(FaultAction::ExpireWatch) => {
            let status = ApiError::gone("too old resource version (injected: history compacted)")
                .to_status();
            let line = format!("{}\n", json!({"type": "ERROR", "object": status}));
            (
                StatusCode::OK,
                [("content-type", "application/json")],
                Body::from(line),
            )
                .into_response()
        }
    };
    match cut {
        Some(cut) => {
            let (parts, body) = resp.into_parts();
            let stream = body.into_data_stream().take_until(cut.cancelled_owned());
            Response::from_parts(parts, Body::from_stream(stream))
        }
        None => resp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_method_path_and_resumed_watches_and_count() {
        let f = FaultInjector::default();
        assert!(f.pick("GET", "/api/v1/pods", "").is_none(), "nothing armed");
        let c = f.inject(Fault::on("PUT", "/configmaps/").status(409).times(2));
        let w = f.inject(Fault::on("GET", "/configmaps").expire_watch());
        assert!(
            f.pick("GET", "/api/v1/namespaces/d/configmaps/x", "")
                .is_none()
        );
        for _ in 0..2 {
            assert!(matches!(
                f.pick("PUT", "/api/v1/namespaces/d/configmaps/x", ""),
                Some(FaultAction::Status { code: 409, .. })
            ));
        }
        assert!(
            f.pick("PUT", "/api/v1/namespaces/d/configmaps/x", "")
                .is_none()
        );
        assert_eq!(c.fired(), 2);
        assert!(f.pick("GET", "/api/v1/configmaps", "watch=true").is_none());
        assert!(
            f.pick("GET", "/api/v1/configmaps", "watch=true&resourceVersion=0")
                .is_none()
        );
        assert!(matches!(
            f.pick("GET", "/api/v1/configmaps", "watch=1&resourceVersion=42"),
            Some(FaultAction::ExpireWatch)
        ));
        assert_eq!(w.fired(), 1);
        f.clear();
        assert!(
            f.pick("GET", "/api/v1/configmaps", "watch=1&resourceVersion=42")
                .is_none()
        );
    }
}
