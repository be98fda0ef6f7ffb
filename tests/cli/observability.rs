//! `run`'s traces and controller-runtime metrics, against real parts: the sandbox, a webhook
//! server in the test, and a small OTLP/HTTP receiver decoding the OpenTelemetry protocol's own
//! protobuf messages (`opentelemetry-proto`).
//!
//! - traces asked for (`OTEL_EXPORTER_OTLP_ENDPOINT`): a `sync` span naming the parent, a `hook`
//!   span its child, a `write` span its child, and the webhook received a `traceparent` of that
//!   trace and hook span;
//! - traces not asked for (`OTEL_SDK_DISABLED=true`, the endpoint set): the endpoint sees no
//!   connection and the webhook no `traceparent`; `/metrics` has every controller-runtime name,
//!   moving (a failed sync and its retry, a sync held in flight, queue waits).

use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::common;
use crate::common::cli::*;
use crate::common::{TIMEOUT, TestSandbox, wait_for};
use crate::run::{guard, hello_world_crd_and_sample, http_get, parse_prometheus, sample};

const CONTROLLER: &str = "traced";

/// The spans an OTLP receiver got, each with its resource's `service.name`.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// What the webhook saw and how it answers.
#[derive(Default)]
struct Hook {
    /// `traceparent` of each call (None: absent), in call order.
    traceparents: Mutex<Vec<Option<String>>>,
    /// Answer 500 to the first call (a failed sync, retried).
    fail_first: bool,
    /// Hold the second call until a permit is added (a sync in flight).
    hold_second: Option<Arc<Semaphore>>,
}

async fn sync_hook(State(h): State<Arc<Hook>>, headers: HeaderMap, body: Bytes) -> Response {
    let n = {
        let mut t = h.traceparents.lock().unwrap();
        t.push(
            headers
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        );
        t.len()
    };
    if n == 1 && h.fail_first {
        return (StatusCode::INTERNAL_SERVER_ERROR, "first call fails").into_response();
    }
    if n == 2
        && let Some(s) = &h.hold_second
    {
        let _ = s.acquire().await.map(|p| p.forget());
    }
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    let name = req["parent"]["metadata"]["name"].as_str().unwrap_or("x");
    axum::Json(json!({
        "status": {"observed": true},
        "children": [{
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-traced")},
            "data": {"who": "traced"},
        }],
    }))
    .into_response()
}

/// Serve `router` on a free local port.
async fn serve(router: Router) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    port
}

/// The webhook server: its port.
async fn hook_server(h: Arc<Hook>) -> u16 {
    serve(Router::new().route("/sync", post(sync_hook)).with_state(h)).await
}

/// An OTLP/HTTP receiver (`POST /v1/traces`, protobuf): its port and the spans received.
async fn otlp_receiver() -> (u16, Received) {
    let spans: Received = Arc::default();
    async fn traces(State(spans): State<Received>, headers: HeaderMap, body: Bytes) -> Response {
        assert_eq!(
            headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or(""),
            "application/x-protobuf",
            "OTLP over HTTP defaults to protobuf"
        );
        let Ok(req) = ExportTraceServiceRequest::decode(body) else {
            return (StatusCode::BAD_REQUEST, "not an ExportTraceServiceRequest").into_response();
        };
        let mut all = spans.lock().unwrap();
        for rs in req.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                .and_then(|kv| kv.value.as_ref())
                .and_then(|v| match &v.value {
                    Some(AnyValue::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    all.push((service.clone(), s));
                }
            }
        }
        (
            [("content-type", "application/x-protobuf")],
            ExportTraceServiceResponse::default().encode_to_vec(),
        )
            .into_response()
    }
    let port = serve(
        Router::new()
            .route("/v1/traces", post(traces))
            .with_state(Arc::clone(&spans)),
    )
    .await;
    (port, spans)
}

fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| match &v.value {
            Some(AnyValue::StringValue(s)) => Some(s.clone()),
            Some(AnyValue::IntValue(i)) => Some(i.to_string()),
            Some(AnyValue::BoolValue(b)) => Some(b.to_string()),
            Some(AnyValue::DoubleValue(d)) => Some(d.to_string()),
            _ => None,
        })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The hello-world CRD and its sample parent `default/hello`, and a CompositeController file
/// whose sync webhook is the test's server on `hook_port`, with ConfigMap children.
async fn setup(sb: &TestSandbox, dir: &Path, hook_port: u16) -> String {
    hello_world_crd_and_sample(sb).await;
    let def = dir.join("controller.yaml");
    std::fs::write(
        &def,
        format!(
            "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: {CONTROLLER}
spec:
  generateSelector: true
  parentResource:
    apiVersion: example.kubectl-meta.dev/v1
    resource: helloworlds
  childResources:
  - apiVersion: v1
    resource: configmaps
  hooks:
    sync:
      webhook:
        url: http://127.0.0.1:{hook_port}/sync
"
        ),
    )
    .unwrap();
    def.display().to_string()
}

/// `run -f DEF` against the sandbox, HTTP on `port`, with `env` set and every other OTEL_*
/// variable of the test's environment removed.
fn run_with(
    sb: &TestSandbox,
    home: &Path,
    def: &str,
    port: u16,
    env: &[(&str, &str)],
) -> Background {
    let kubeconfig = kc(sb);
    let addr = format!("127.0.0.1:{port}");
    let mut cmd = meta(
        home,
        &[
            "--kubeconfig",
            kubeconfig.as_str(),
            "run",
            "-f",
            def,
            "--identity",
            "traced-replica",
            "--http-addr",
            addr.as_str(),
        ],
    );
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    Background::start(cmd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_exports_sync_hook_and_write_spans_and_the_webhook_joins_the_trace() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let hook = Arc::new(Hook::default());
    let hook_port = hook_server(Arc::clone(&hook)).await;
    let (otlp_port, spans) = otlp_receiver().await;
    let def = setup(&sb, home.path(), hook_port).await;
    let endpoint = format!("http://127.0.0.1:{otlp_port}");
    let run = run_with(
        &sb,
        home.path(),
        &def,
        common::free_port(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "meta-under-test"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let _g = guard(&run);

    // A sync of default/hello with its hook call and its ConfigMap create, all exported.
    let (sync, hook_span, write) = wait_for("sync, hook and write spans", TIMEOUT, || async {
        let all = spans.lock().unwrap().clone();
        let sync = all.iter().map(|(_, s)| s).find(|s| {
            s.name == format!("sync {CONTROLLER} default/hello")
                && attr(s, "parent").as_deref() == Some("default/hello")
                && attr(s, "result").as_deref() == Some("ok")
                && attr(s, "plan.create").as_deref() == Some("1")
        })?;
        let child = |name: &str| {
            all.iter()
                .map(|(_, s)| s)
                .find(|s| s.name == name && s.parent_span_id == sync.span_id)
                .cloned()
        };
        Some((sync.clone(), child("hook sync")?, child("write")?))
    })
    .await;
    let services: Vec<String> = spans
        .lock()
        .unwrap()
        .iter()
        .map(|(s, _)| s.clone())
        .collect();
    assert!(
        services.iter().all(|s| s == "meta-under-test"),
        "{services:?}"
    );
    assert_eq!(attr(&sync, "controller").as_deref(), Some(CONTROLLER));
    assert!(
        attr(&sync, "triggers").is_some_and(|t| !t.is_empty()),
        "the coalesced triggers: {:?}",
        sync.attributes
    );
    assert_eq!(hook_span.trace_id, sync.trace_id);
    assert_eq!(attr(&hook_span, "hook").as_deref(), Some("sync"));
    assert_eq!(attr(&hook_span, "status").as_deref(), Some("200"));
    assert!(
        attr(&hook_span, "answer_bytes").is_some_and(|b| b.parse::<u64>().unwrap() > 10),
        "{:?}",
        hook_span.attributes
    );
    assert!(attr(&hook_span, "latency_ms").is_some());
    assert_eq!(write.trace_id, sync.trace_id);
    assert_eq!(attr(&write, "verb").as_deref(), Some("create"));
    assert_eq!(
        attr(&write, "object").as_deref(),
        Some("default/hello-traced")
    );
    assert_eq!(attr(&write, "result").as_deref(), Some("ok"));

    // The webhook received the hook span's context: same trace, the hook span as parent.
    let want = format!(
        "00-{}-{}-01",
        hex(&hook_span.trace_id),
        hex(&hook_span.span_id)
    );
    let seen = hook.traceparents.lock().unwrap().clone();
    assert!(
        seen.iter().any(|t| t.as_deref() == Some(want.as_str())),
        "no call carried {want}: {seen:?}"
    );
    assert!(
        seen.iter().all(Option::is_some),
        "every webhook call carries a traceparent: {seen:?}"
    );
    let (ok, stderr) = run.interrupt().await;
    assert!(ok, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_without_traces_connects_nowhere_and_metrics_have_controller_runtime_names() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let release = Arc::new(Semaphore::new(0));
    let hook = Arc::new(Hook {
        fail_first: true,
        hold_second: Some(Arc::clone(&release)),
        ..Hook::default()
    });
    let hook_port = hook_server(Arc::clone(&hook)).await;
    // The collector address the environment names, though it turns the SDK off: nothing may
    // connect to it.
    let collector = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    collector.set_nonblocking(true).unwrap();
    let endpoint = format!("http://{}", collector.local_addr().unwrap());
    let def = setup(&sb, home.path(), hook_port).await;
    let port = common::free_port();
    let run = run_with(
        &sb,
        home.path(),
        &def,
        port,
        &[
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "10"),
        ],
    );
    let _g = guard(&run);
    let metrics = |port| async move {
        let (_, body) = http_get(port, "/metrics").await?;
        Some(parse_prometheus(&body))
    };
    let c = [("controller", CONTROLLER)];
    let q = [("name", CONTROLLER), ("controller", CONTROLLER)];

    // The first sync failed (500) and was retried; the retry's hook call is held: one worker
    // busy, its work unfinished.
    let busy = wait_for("a sync held in flight after a retry", TIMEOUT, || async {
        let s = metrics(port).await?;
        (sample(&s, "controller_runtime_active_workers", &c)? == 1.0
            && sample(&s, "workqueue_longest_running_processor_seconds", &q)? > 0.0
            && hook.traceparents.lock().unwrap().len() == 2)
            .then_some(s)
    })
    .await;
    assert!(sample(&busy, "workqueue_unfinished_work_seconds", &q).unwrap() > 0.0);
    assert_eq!(sample(&busy, "workqueue_retries_total", &q), Some(1.0));
    assert_eq!(
        sample(
            &busy,
            "controller_runtime_reconcile_total",
            &[("controller", CONTROLLER), ("result", "error")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &busy,
            "controller_runtime_reconcile_total",
            &[("controller", CONTROLLER), ("result", "success")]
        ),
        Some(0.0),
        "shown at 0 before the first success"
    );
    assert_eq!(
        sample(&busy, "controller_runtime_reconcile_errors_total", &c),
        Some(1.0)
    );
    assert_eq!(
        sample(&busy, "controller_runtime_max_concurrent_reconciles", &c),
        Some(kubectl_meta::engine::DEFAULT_WORKERS as f64),
        "--workers' default"
    );
    release.add_permits(1);

    // Released: the sync succeeds, writes, and its confirming sync succeeds too.
    let done = wait_for("two successful syncs", TIMEOUT, || async {
        let s = metrics(port).await?;
        (sample(
            &s,
            "controller_runtime_reconcile_total",
            &[("controller", CONTROLLER), ("result", "success")],
        )? >= 2.0
            && sample(&s, "controller_runtime_active_workers", &c)? == 0.0)
            .then_some(s)
    })
    .await;
    let at_least = |name: &str, labels: &[(&str, &str)], min: f64| {
        let v = sample(&done, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?}"));
        assert!(v >= min, "{name} {labels:?} = {v}, want >= {min}");
    };
    at_least("controller_runtime_reconcile_time_seconds_count", &c, 3.0);
    at_least(
        "controller_runtime_reconcile_time_seconds_bucket",
        &[("controller", CONTROLLER), ("le", "60")],
        3.0,
    );
    at_least("workqueue_adds_total", &q, 3.0);
    at_least("workqueue_queue_duration_seconds_count", &q, 3.0);
    at_least(
        "workqueue_queue_duration_seconds_bucket",
        &[("name", CONTROLLER), ("le", "1000")],
        3.0,
    );
    at_least("workqueue_work_duration_seconds_count", &q, 3.0);
    // The held sync ran for at least as long as the test took to see it.
    at_least("workqueue_work_duration_seconds_sum", &q, 0.0);
    at_least("workqueue_depth", &q, 0.0);
    at_least("workqueue_unfinished_work_seconds", &q, 0.0);
    at_least(
        "kubectl_meta_hook_latency_seconds_count",
        &[("controller", CONTROLLER), ("hook", "sync")],
        3.0,
    );
    // Metacontroller's names are kept.
    at_least(
        "metacontroller_sync_requests_total",
        &[("controller_name", CONTROLLER), ("code", "500")],
        1.0,
    );

    // Tracing off: no connection to the collector, no traceparent on any webhook call.
    let (ok, stderr) = run.interrupt().await;
    assert!(ok, "{stderr}");
    match collector.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the collector saw a connection with traces off: {other:?}"),
    }
    let seen = hook.traceparents.lock().unwrap().clone();
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(seen.iter().all(Option::is_none), "{seen:?}");
}
