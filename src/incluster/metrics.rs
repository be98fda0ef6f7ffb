//! `run`'s Prometheus metrics, in the text exposition format (version 0.0.4).
//!
//! Counted from the engine's event bus (the events `dev -o json` prints) by [`Metrics::spawn`],
//! plus gauges read from the runner's [`Status`] when scraped:
//!
//! - `metacontroller_<hook>_requests_total{controller_name,controller_type,url,code,method}`
//!   and `metacontroller_<hook>_request_duration_histogram_seconds{controller_name,
//!   controller_type,url,method}`: Metacontroller's hook metrics under their names and labels
//!   (hook `sync`, `finalize`, `customize`, and MapController's `map`, `tombstone`). Webhooks:
//!   `method="post"`, `code` the HTTP status (`"none"` when no answer came); exec hooks:
//!   `method="exec"`, `url` `exec:` and the command, `code` `"0"` or `"1"` (failed).
//! - `kubectl_meta_syncs_total{controller,result}` (`result`: `ok` or the failed sync's error
//!   layer: `hook`, `parent`, `api`, `internal`), `kubectl_meta_sync_duration_seconds{controller}`.
//! - `kubectl_meta_writes_total{controller,verb}` and
//!   `kubectl_meta_write_errors_total{controller,verb}`.
//! - `kubectl_meta_hot_loop_trips_total{controller}`.
//! - `kubectl_meta_queue_depth{controller,state}` (`ready`, `in_flight`, `scheduled`).
//! - `kubectl_meta_lease_held{controller}` (1: this replica holds the Lease and syncs it),
//!   `kubectl_meta_controller_started{controller}`.
//! - `kubectl_meta_events_dropped_total`: events the collector missed (it fell behind), so
//!   the counters above undercount by at most that much.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use super::Status;
use crate::engine::HookSpec;
use crate::engine::error::Layer;
use crate::engine::events::{ActionVerb, EngineEvent, EventBus};
use crate::hooks::HookTarget;
use crate::k8s::election::Role;
use crate::spec::ControllerDef;

/// Prometheus' default buckets (client_golang `DefBuckets`), which Metacontroller uses.
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Label pairs, in order.
type Labels = Vec<(&'static str, String)>;

/// A histogram's buckets (cumulative when rendered), sum and count.
#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        if let Some(i) = BUCKETS.iter().position(|b| v <= *b) {
            self.counts[i] += 1;
        }
        self.sum += v;
        self.count += 1;
    }
}

/// One metric family.
#[derive(Debug, Default)]
struct Family {
    help: String,
    histogram: bool,
    counters: BTreeMap<Labels, f64>,
    histograms: BTreeMap<Labels, Histogram>,
}

/// What a hook metric is labelled with: the controller's kind and the hook's address.
#[derive(Debug, Clone)]
struct HookLabels {
    kind: &'static str,
    url: String,
    exec: bool,
}

#[derive(Debug, Default)]
struct Inner {
    families: BTreeMap<String, Family>,
    /// (controller, hook) -> labels.
    hooks: BTreeMap<(String, String), HookLabels>,
    dropped: u64,
}

impl Inner {
    fn family(&mut self, name: &str, help: &str, histogram: bool) -> &mut Family {
        self.families
            .entry(name.to_string())
            .or_insert_with(|| Family {
                help: help.to_string(),
                histogram,
                ..Family::default()
            })
    }

    fn count(&mut self, name: &str, help: &str, labels: Labels) {
        *self
            .family(name, help, false)
            .counters
            .entry(labels)
            .or_insert(0.0) += 1.0;
    }

    fn observe(&mut self, name: &str, help: &str, labels: Labels, v: f64) {
        self.family(name, help, true)
            .histograms
            .entry(labels)
            .or_default()
            .observe(v);
    }

    fn on_event(&mut self, ev: &EngineEvent) {
        match ev {
            EngineEvent::HookCalled {
                controller,
                hook,
                status,
                latency,
                error,
                ..
            } => {
                let l = self
                    .hooks
                    .get(&(controller.clone(), hook.clone()))
                    .cloned()
                    .unwrap_or(HookLabels {
                        kind: "",
                        url: String::new(),
                        exec: false,
                    });
                let (method, code) = if l.exec {
                    ("exec", if error.is_some() { "1" } else { "0" }.to_string())
                } else {
                    ("post", status.map_or("none".to_string(), |s| s.to_string()))
                };
                let base = || -> Labels {
                    vec![
                        ("controller_name", controller.clone()),
                        ("controller_type", l.kind.to_string()),
                        ("url", l.url.clone()),
                    ]
                };
                let mut with_code = base();
                with_code.push(("code", code));
                with_code.push(("method", method.to_string()));
                self.count(
                    &format!("metacontroller_{hook}_requests_total"),
                    "A counter for outgoing requests to the hook.",
                    with_code,
                );
                let mut with_method = base();
                with_method.push(("method", method.to_string()));
                self.observe(
                    &format!("metacontroller_{hook}_request_duration_histogram_seconds"),
                    "A histogram of outgoing request latencies to the hook.",
                    with_method,
                    latency.as_secs_f64(),
                );
            }
            EngineEvent::SyncFinished {
                controller,
                duration,
                error,
                error_layer,
                ..
            } => {
                let result = match (error, error_layer) {
                    (None, _) => "ok",
                    (Some(_), Some(Layer::Hook)) => "hook",
                    (Some(_), Some(Layer::Parent)) => "parent",
                    (Some(_), Some(Layer::Api)) => "api",
                    (Some(_), Some(Layer::Internal) | None) => "internal",
                };
                self.count(
                    "kubectl_meta_syncs_total",
                    "Syncs by result: ok, or the failed sync's error layer (hook, parent, api, internal).",
                    vec![
                        ("controller", controller.clone()),
                        ("result", result.to_string()),
                    ],
                );
                self.observe(
                    "kubectl_meta_sync_duration_seconds",
                    "Wall time of a sync.",
                    vec![("controller", controller.clone())],
                    duration.as_secs_f64(),
                );
            }
            EngineEvent::Action {
                controller,
                verb,
                error,
                ..
            } if *verb != ActionVerb::NoOp => {
                let labels = vec![
                    ("controller", controller.clone()),
                    ("verb", verb.to_string()),
                ];
                if error.is_some() {
                    self.count(
                        "kubectl_meta_write_errors_total",
                        "Writes the API server refused or failed, by verb.",
                        labels,
                    );
                } else {
                    self.count(
                        "kubectl_meta_writes_total",
                        "Writes made, by verb.",
                        labels,
                    );
                }
            }
            EngineEvent::HotLoop { controller, .. } => self.count(
                "kubectl_meta_hot_loop_trips_total",
                "Times the hot-loop guard stopped rewriting a field the server keeps rewriting back.",
                vec![("controller", controller.clone())],
            ),
            _ => {}
        }
    }
}

/// The metrics of one `run` process.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl Metrics {
    /// Count the events of `bus` from now on, until the bus closes.
    pub fn spawn(bus: &EventBus) -> Arc<Metrics> {
        let metrics = Arc::new(Metrics::default());
        let mut rx = bus.subscribe();
        let m = Arc::clone(&metrics);
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(ev) => m.on_event(&ev),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        if let Ok(mut i) = m.inner.lock() {
                            i.dropped += n;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        metrics
    }

    /// Count one event.
    pub fn on_event(&self, ev: &EngineEvent) {
        if let Ok(mut i) = self.inner.lock() {
            i.on_event(ev);
        }
    }

    /// Learn a definition's hook addresses and kind (the hook metrics' labels).
    pub fn describe(&self, def: &ControllerDef) {
        let Ok(mut i) = self.inner.lock() else {
            return;
        };
        for (hook, spec) in def.hooks() {
            let Ok(h) = HookSpec::from_spec(hook, spec, None, def.base_dir(), true) else {
                continue;
            };
            let (url, exec) = match h.target {
                HookTarget::Webhook { url, .. } => (url, false),
                HookTarget::Exec { command, .. } => (format!("exec:{}", command.join(" ")), true),
            };
            i.hooks.insert(
                (def.name().to_string(), hook.to_string()),
                HookLabels {
                    kind: def.kind(),
                    url,
                    exec,
                },
            );
        }
    }

    /// Everything, in the text format, with the gauges of `status`.
    pub fn render(&self, status: &Status) -> String {
        let mut out = String::new();
        let Ok(i) = self.inner.lock() else {
            return out;
        };
        for (name, f) in &i.families {
            let _ = writeln!(out, "# HELP {name} {}", f.help);
            if f.histogram {
                let _ = writeln!(out, "# TYPE {name} histogram");
                for (labels, h) in &f.histograms {
                    let mut cumulative = 0;
                    for (b, n) in BUCKETS.iter().zip(h.counts) {
                        cumulative += n;
                        let mut l = labels.clone();
                        l.push(("le", format_float(*b)));
                        let _ = writeln!(out, "{name}_bucket{} {cumulative}", render_labels(&l));
                    }
                    let mut l = labels.clone();
                    l.push(("le", "+Inf".into()));
                    let _ = writeln!(out, "{name}_bucket{} {}", render_labels(&l), h.count);
                    let _ = writeln!(
                        out,
                        "{name}_sum{} {}",
                        render_labels(labels),
                        format_float(h.sum)
                    );
                    let _ = writeln!(out, "{name}_count{} {}", render_labels(labels), h.count);
                }
            } else {
                let _ = writeln!(out, "# TYPE {name} counter");
                for (labels, v) in &f.counters {
                    let _ = writeln!(out, "{name}{} {}", render_labels(labels), format_float(*v));
                }
            }
        }
        let _ = writeln!(
            out,
            "# HELP kubectl_meta_events_dropped_total Engine events the metrics collector missed (it fell behind).\n# TYPE kubectl_meta_events_dropped_total counter\nkubectl_meta_events_dropped_total {}",
            i.dropped
        );
        drop(i);
        render_gauges(&mut out, status);
        out
    }
}

/// The gauges read from the runner's state.
fn render_gauges(out: &mut String, status: &Status) {
    let _ = writeln!(
        out,
        "# HELP kubectl_meta_queue_depth Keys in the controller's work queue, by state.\n# TYPE kubectl_meta_queue_depth gauge"
    );
    for (name, c) in &status.controllers {
        for (state, v) in [
            ("ready", c.queue.ready),
            ("in_flight", c.queue.in_flight),
            ("scheduled", c.queue.scheduled),
        ] {
            let l = vec![("controller", name.clone()), ("state", state.to_string())];
            let _ = writeln!(out, "kubectl_meta_queue_depth{} {v}", render_labels(&l));
        }
    }
    let _ = writeln!(
        out,
        "# HELP kubectl_meta_lease_held 1 when this replica holds the controller's Lease (and syncs it), else 0.\n# TYPE kubectl_meta_lease_held gauge"
    );
    for (name, c) in &status.controllers {
        let l = vec![("controller", name.clone())];
        let v = u8::from(c.role == Role::Leader);
        let _ = writeln!(out, "kubectl_meta_lease_held{} {v}", render_labels(&l));
    }
    let _ = writeln!(
        out,
        "# HELP kubectl_meta_controller_started 1 when the controller runs here with its caches synced, else 0.\n# TYPE kubectl_meta_controller_started gauge"
    );
    for (name, c) in &status.controllers {
        let l = vec![("controller", name.clone())];
        let _ = writeln!(
            out,
            "kubectl_meta_controller_started{} {}",
            render_labels(&l),
            u8::from(c.started)
        );
    }
}

/// `{a="x",b="y"}` with the text format's escapes (backslash, double quote, newline).
fn render_labels(labels: &[(&'static str, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// A float as Prometheus writes it (`1`, `0.005`, `+Inf`).
fn format_float(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn hook_calls_sync_results_and_writes_are_counted_under_their_names() {
        let m = Metrics::default();
        m.on_event(&EngineEvent::HookCalled {
            controller: "c\"1".into(),
            parent: "default/p".into(),
            hook: "sync".into(),
            status: Some(200),
            latency: Duration::from_millis(30),
            error: None,
            map_key: None,
            request: None,
            response: None,
            stderr: None,
        });
        m.on_event(&EngineEvent::SyncFinished {
            controller: "c".into(),
            parent: "default/p".into(),
            map_key: None,
            status_only: false,
            duration: Duration::from_millis(2),
            writes: 1,
            error: Some("boom".into()),
            error_layer: Some(Layer::Hook),
            retry_in: None,
        });
        let text = m.render(&Status::default());
        assert!(
            text.contains("# TYPE metacontroller_sync_requests_total counter"),
            "{text}"
        );
        assert!(
            text.contains(
                r#"metacontroller_sync_requests_total{controller_name="c\"1",controller_type="",url="",code="200",method="post"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"metacontroller_sync_request_duration_histogram_seconds_bucket{controller_name="c\"1",controller_type="",url="",method="post",le="0.05"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"metacontroller_sync_request_duration_histogram_seconds_bucket{controller_name="c\"1",controller_type="",url="",method="post",le="0.025"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"kubectl_meta_syncs_total{controller="c",result="hook"} 1"#),
            "{text}"
        );
    }
}
