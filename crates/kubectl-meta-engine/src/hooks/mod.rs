//! Calling hooks: webhooks (HTTP POST) and local programs (exec), with one call record per call.
//!
//! The engine turns a definition's hook into a [`HookTarget`] (see [`resolve`] for webhook
//! addresses) and calls it through a [`HookClient`]. Every call returns a [`HookCall`], success or
//! not, so status, latency, the raw answer and (for programs) stderr can be shown either way; a
//! failed call carries a [`HookError`] whose message says what happened, to which hook, and how
//! to fix it. The request body is the caller's: it keeps it for display and replay.
//!
//! - [`webhook`]: the HTTP transport (one pooled client, per-call timeout, size limit).
//! - [`exec`]: one process per call, request on stdin, answer on stdout, process-group cleanup.
//! - [`resolve`]: webhook URL from `url` / `service` + `path` and `--hook-base-url`.
//! - [`endpoint`]: `caBundle`, `clientTLS`, `authorization`, `basicAuth` and
//!   `spec.endpointConfigs`, resolved from Secrets and ConfigMaps into a client per hook.
//! - [`record`]: hook exchanges written as test cases (`--record`, `kubectl meta test`).
//!
//! Running a managed hook server is the plugin's (`kubectl-meta`'s `hooks::server`).

pub(crate) mod dump;
pub mod endpoint;
pub(crate) mod exec;
pub mod record;
pub(crate) mod resolve;
pub(crate) mod webhook;

pub use webhook::error_chain;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::Value;

/// Largest answer accepted from a hook (HTTP body or program stdout).
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// How much of an answer is kept in [`HookCall::raw_response`] for display.
pub const RAW_RESPONSE_KEEP: usize = 1 << 20;

/// How many characters of an answer error messages quote.
const SNIPPET_CHARS: usize = 500;

/// Where a hook is and how long one call may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookTarget {
    /// An HTTP endpoint that receives the request as a JSON POST.
    Webhook {
        /// Full URL (already resolved against `--hook-base-url`).
        url: String,
        /// Limit for the whole exchange (connect, send, answer).
        timeout: Duration,
    },
    /// A local program run once per call: request on stdin, answer on stdout.
    Exec {
        /// Program and arguments.
        command: Vec<String>,
        /// Limit for the run; on expiry the whole process group is killed.
        timeout: Duration,
        /// Directory the program runs in (the current one when `None`).
        working_dir: Option<PathBuf>,
        /// Extra environment variables, on top of the inherited ones.
        env: Vec<(String, String)>,
    },
}

impl HookTarget {
    /// The URL, or the command line, for messages.
    pub fn describe(&self) -> String {
        match self {
            HookTarget::Webhook { url, .. } => url.clone(),
            HookTarget::Exec { command, .. } => exec::command_line(command),
        }
    }

    /// How long one call may take.
    pub fn timeout(&self) -> Duration {
        match self {
            HookTarget::Webhook { timeout, .. } | HookTarget::Exec { timeout, .. } => *timeout,
        }
    }
}

/// Which hook is called, and for whom (exec hooks receive it as environment variables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallInfo {
    /// `sync`, `finalize`, `customize`, `map` or `tombstone`.
    pub hook: String,
    /// `CompositeController`, `DecoratorController` or `MapController`.
    pub controller_kind: String,
    /// The controller definition's name.
    pub controller: String,
    /// What the call is for, as engine events name it: the parent (or decorator target)
    /// `namespace/name`, or `name` when cluster-scoped (never with the map key).
    pub parent: String,
    /// The map key of a MapController's map or tombstone call.
    pub map_key: Option<String>,
}

impl CallInfo {
    /// The parent followed by a space and the map key, if any (`ns/p KEY`): one name for
    /// the call's subject (`--dump-requests` folders, messages).
    pub fn label(&self) -> String {
        match &self.map_key {
            Some(k) => format!("{} {k}", self.parent),
            None => self.parent.clone(),
        }
    }
}

/// The record of one hook call, returned whether it succeeded or not.
#[derive(Debug, Clone)]
pub struct HookCall {
    /// The answer (always a JSON object), or what went wrong.
    pub result: Result<Value, HookError>,
    /// HTTP status, when an HTTP answer arrived (`None` for exec hooks).
    pub status: Option<u16>,
    /// Time from the start of the call to its end (including a timeout).
    pub latency: Duration,
    /// What an exec hook wrote to stderr (its last 64 KiB); empty for webhooks.
    pub stderr: String,
    /// The answer as received (HTTP body or stdout), truncated at 1 MiB, for display.
    pub raw_response: Option<String>,
}

impl HookCall {
    /// The record of a call that was not made because the hook server is not ready.
    pub fn not_ready(target: &HookTarget, reason: String) -> HookCall {
        HookCall {
            result: Err(HookError::NotReady {
                target: target.describe(),
                reason,
            }),
            status: None,
            latency: Duration::ZERO,
            stderr: String::new(),
            raw_response: None,
        }
    }
}

/// Why a hook call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The managed hook server behind the hook is not ready (restarting, crashed, or its new
    /// version does not start).
    #[error("hook {target} was not called: {reason}")]
    NotReady {
        /// URL.
        target: String,
        /// Why, with what the server printed.
        reason: String,
    },
    /// The hook did not answer in time.
    #[error(
        "hook {target} did not answer within {} ({setting}); make it faster or raise the timeout",
        fmt_duration(*after)
    )]
    Timeout {
        /// URL or command line.
        target: String,
        /// The limit that expired.
        after: Duration,
        /// The definition field holding the limit (`webhook.timeout`, `exec.timeout`).
        setting: &'static str,
    },
    /// The webhook's address could not be reached.
    #[error(
        "cannot connect to hook {target}: {message}; is the hook server running and listening \
         there? Start it, or point webhook.url (or --hook-base-url) at where it listens"
    )]
    Connect {
        /// URL.
        target: String,
        /// The underlying network error.
        message: String,
    },
    /// The TLS handshake with the webhook failed (an untrusted or mismatched server
    /// certificate, a client certificate the server wants or rejects).
    #[error("TLS with hook {target} failed: {message}; {hint}")]
    Tls {
        /// URL.
        target: String,
        /// The TLS error.
        message: String,
        /// What to check in the definition.
        hint: String,
    },
    /// The request could not be sent or the answer not read (after connecting).
    #[error("calling hook {target} failed: {message}")]
    Request {
        /// URL or command line.
        target: String,
        /// What went wrong.
        message: String,
    },
    /// The webhook answered with a status other than 200 (and other than 429).
    #[error(
        "hook {target} answered HTTP {status} (only 200 is success): {}; see the hook server's \
         log for the cause",
        or_empty(body)
    )]
    Status {
        /// URL.
        target: String,
        /// HTTP status code.
        status: u16,
        /// The start of the response body (at most 500 characters).
        body: String,
    },
    /// The webhook answered 429: try again later.
    #[error("hook {target} answered 429 Too Many Requests; {}", retry_text(*retry_after))]
    TooManyRequests {
        /// URL.
        target: String,
        /// The `Retry-After` header, when present and valid.
        retry_after: Option<Duration>,
    },
    /// The answer (HTTP body or stdout) is not one JSON object.
    #[error(
        "hook {target} did not answer with a JSON object ({error}); it answered: {}{}. A hook \
         must answer with a single JSON object (exec hooks: only the JSON on stdout, logs on \
         stderr)",
        or_empty(snippet),
        stderr_part(stderr_tail)
    )]
    InvalidJson {
        /// URL or command line.
        target: String,
        /// Why the answer was rejected.
        error: String,
        /// The start of the answer (at most 500 characters).
        snippet: String,
        /// The last lines of stderr (exec hooks; empty for webhooks).
        stderr_tail: String,
    },
    /// An exec hook's program could not be started.
    #[error("cannot start exec hook {command}: {error}")]
    Spawn {
        /// Command line.
        command: String,
        /// Why, with a hint.
        error: String,
    },
    /// An exec hook's program exited unsuccessfully.
    #[error("exec hook {command} failed with {status}{}", stderr_part(stderr_tail))]
    Exit {
        /// Command line.
        command: String,
        /// `exit code 2` or `killed by signal 9`.
        status: String,
        /// The last 20 lines of stderr.
        stderr_tail: String,
    },
    /// The answer is larger than the limit.
    #[error(
        "hook {target} answered with more than {} MiB; a hook answer must stay below that limit",
        limit >> 20
    )]
    ResponseTooLarge {
        /// URL or command line.
        target: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// The HTTP client could not be built (TLS setup).
    #[error("cannot set up the HTTP client for webhooks: {message}")]
    Client {
        /// The underlying error.
        message: String,
    },
}

impl HookError {
    /// How long the hook asked to wait before the next call (429 with `Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            HookError::TooManyRequests { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether the hook said "too many requests" (retry later, not a sync error).
    pub fn is_rate_limited(&self) -> bool {
        matches!(self, HookError::TooManyRequests { .. })
    }
}

/// Decode a hook's answer: it must be one JSON object (integers stay integers).
fn parse_answer(target: &str, bytes: &[u8], stderr_tail: &str) -> Result<Value, HookError> {
    let invalid = |error: String| HookError::InvalidJson {
        target: target.to_string(),
        error,
        snippet: snippet(bytes),
        stderr_tail: stderr_tail.to_string(),
    };
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(invalid(format!(
            "expected a JSON object, got {}",
            json_kind(&other)
        ))),
        Err(e) => Err(invalid(e.to_string())),
    }
}

/// `an array`, `a string`, ... for messages.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The answer as text for display, cut at [`RAW_RESPONSE_KEEP`] bytes.
fn raw_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(RAW_RESPONSE_KEEP)]).into_owned()
}

/// The start of an answer for an error message (at most 500 characters, trimmed).
fn snippet(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(SNIPPET_CHARS * 4)];
    let text = String::from_utf8_lossy(head);
    let text = text.trim();
    let mut out: String = text.chars().take(SNIPPET_CHARS).collect();
    if out.len() < text.len() || head.len() < bytes.len() {
        out.push_str("...");
    }
    out
}

/// `10s`, `1.5s`, `300ms`: the way timeouts are written in definitions.
pub fn fmt_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        let secs = format!("{:.3}", d.as_secs_f64());
        format!("{}s", secs.trim_end_matches('0').trim_end_matches('.'))
    }
}

fn or_empty(s: &str) -> &str {
    if s.is_empty() { "(nothing)" } else { s }
}

fn stderr_part(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("\nstderr (last lines):\n{tail}")
    }
}

fn retry_text(after: Option<Duration>) -> String {
    match after {
        Some(d) => format!("retrying after {} (Retry-After)", fmt_duration(d)),
        None => "retrying after a short backoff (no valid Retry-After header)".to_string(),
    }
}

/// A client that calls hooks; cheap to clone (one shared HTTP connection pool).
///
/// Webhooks with connection settings (see [`endpoint`]) are called through their own client
/// and `Authorization` header, registered per controller with [`HookClient::set_endpoints`]
/// and found by the call's controller kind, controller and hook name ([`CallInfo`]).
#[derive(Debug, Clone)]
pub struct HookClient {
    http: reqwest::Client,
    endpoints: Arc<RwLock<EndpointMap>>,
}

/// (controller kind, controller, hook) -> the hook's connection settings.
type EndpointMap = HashMap<(String, String, String), Arc<endpoint::WebhookEndpoint>>;

impl HookClient {
    /// Build the client: HTTP/1.1, pooled connections, no system proxy, no redirects.
    ///
    /// Redirects are not followed so that a POST is never silently turned into a GET; a 3xx
    /// answer is reported as a [`HookError::Status`].
    pub fn new() -> Result<Self, HookError> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .http1_only()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| HookError::Client {
                message: webhook::error_chain(&e),
            })?;
        Ok(HookClient {
            http,
            endpoints: Arc::default(),
        })
    }

    /// Use `resolved`'s settings for the webhooks of that controller from now on (replacing
    /// what was set for it before; hooks it does not name use the shared client).
    pub fn set_endpoints(&self, resolved: &endpoint::ResolvedController) {
        let Ok(mut map) = self.endpoints.write() else {
            return;
        };
        map.retain(|(kind, name, _), _| !(kind == &resolved.kind && name == &resolved.name));
        for (hook, ep) in &resolved.hooks {
            map.insert(
                (resolved.kind.clone(), resolved.name.clone(), hook.clone()),
                Arc::clone(ep),
            );
        }
    }

    /// The settings registered for the hook `info` calls.
    fn endpoint_for(&self, info: &CallInfo) -> Option<Arc<endpoint::WebhookEndpoint>> {
        let map = self.endpoints.read().ok()?;
        map.get(&(
            info.controller_kind.clone(),
            info.controller.clone(),
            info.hook.clone(),
        ))
        .cloned()
    }

    /// Call `target` with `request`; always returns a record, success or not.
    pub async fn call(&self, target: &HookTarget, info: &CallInfo, request: &Value) -> HookCall {
        match target {
            HookTarget::Webhook { url, timeout } => match self.endpoint_for(info) {
                Some(ep) => {
                    let auth = ep.authorization.as_ref();
                    webhook::call(&ep.http, url, *timeout, request, auth).await
                }
                None => webhook::call(&self.http, url, *timeout, request, None).await,
            },
            HookTarget::Exec {
                command,
                timeout,
                working_dir,
                env,
            } => {
                let run = exec::ExecRun {
                    command,
                    timeout: *timeout,
                    working_dir: working_dir.as_deref(),
                    env,
                    info,
                };
                exec::call(&run, request).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn describe_and_timeout() {
        let w = HookTarget::Webhook {
            url: "http://127.0.0.1:8080/sync".into(),
            timeout: Duration::from_secs(10),
        };
        assert_eq!(w.describe(), "http://127.0.0.1:8080/sync");
        assert_eq!(w.timeout(), Duration::from_secs(10));
        let x = HookTarget::Exec {
            command: vec!["python3".into(), "hooks/my sync.py".into()],
            timeout: Duration::from_millis(1500),
            working_dir: None,
            env: vec![],
        };
        assert_eq!(x.describe(), "python3 'hooks/my sync.py'");
        assert_eq!(x.timeout(), Duration::from_millis(1500));
    }

    #[test]
    fn durations_print_like_definitions() {
        assert_eq!(fmt_duration(Duration::from_secs(10)), "10s");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(fmt_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(fmt_duration(Duration::from_millis(2250)), "2.25s");
    }

    #[test]
    fn answers_must_be_objects_and_keep_integers() {
        let v = parse_answer("h", br#"{"a": 3, "b": 3.0}"#, "").unwrap();
        assert!(v["a"].is_i64());
        assert!(v["b"].is_f64());
        assert_eq!(v, json!({"a": 3, "b": 3.0}));

        let e = parse_answer("h", b"[1, 2]", "").unwrap_err();
        assert!(matches!(&e, HookError::InvalidJson { error, .. } if error.contains("an array")));
        let e = parse_answer("h", b"hello world", "boom\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("it answered: hello world"), "{e}");
        assert!(e.contains("stderr (last lines):\nboom"), "{e}");
        let e = parse_answer("h", b"", "").unwrap_err().to_string();
        assert!(e.contains("it answered: (nothing)"), "{e}");
    }

    #[test]
    fn snippets_are_bounded() {
        let long = "x".repeat(10_000);
        let s = snippet(long.as_bytes());
        assert_eq!(s, format!("{}...", "x".repeat(500)));
        // Multi-byte characters are not cut in the middle.
        let s = snippet("é".repeat(1000).as_bytes());
        assert_eq!(s.chars().count(), 503);
        assert_eq!(
            raw_text(&vec![b'a'; RAW_RESPONSE_KEEP + 10]).len(),
            RAW_RESPONSE_KEEP
        );
    }

    #[test]
    fn rate_limit_accessors() {
        let e = HookError::TooManyRequests {
            target: "u".into(),
            retry_after: Some(Duration::from_secs(7)),
        };
        assert!(e.is_rate_limited());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        assert!(e.to_string().contains("retrying after 7s"));
        let e = HookError::TooManyRequests {
            target: "u".into(),
            retry_after: None,
        };
        assert!(e.is_rate_limited());
        assert_eq!(e.retry_after(), None);
        let e = HookError::Status {
            target: "u".into(),
            status: 500,
            body: "boom".into(),
        };
        assert!(!e.is_rate_limited());
        assert_eq!(e.retry_after(), None);
    }

    #[tokio::test]
    async fn call_future_is_send() {
        fn assert_send<T: Send>(_: &T) {}
        let client = HookClient::new().unwrap();
        let info = CallInfo {
            hook: "sync".into(),
            controller_kind: "CompositeController".into(),
            controller: "c".into(),
            parent: "p".into(),
            map_key: None,
        };
        let target = HookTarget::Exec {
            command: vec!["true".into()],
            timeout: Duration::from_secs(1),
            working_dir: None,
            env: vec![],
        };
        let request = json!({});
        assert_send(&client.call(&target, &info, &request));
    }

    #[test]
    fn timeout_message_names_target_limit_and_field() {
        let e = HookError::Timeout {
            target: "http://127.0.0.1:8080/sync".into(),
            after: Duration::from_secs(10),
            setting: "webhook.timeout",
        };
        assert_eq!(
            e.to_string(),
            "hook http://127.0.0.1:8080/sync did not answer within 10s (webhook.timeout); make \
             it faster or raise the timeout"
        );
    }
}
