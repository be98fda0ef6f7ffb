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
//! - `run --sharded`: `kubectl_meta_shard_parents{controller}` (parents owned and synced
//!   here), `kubectl_meta_shard_members{controller}`, `kubectl_meta_shard_moves_total` and
//!   `kubectl_meta_shard_move_seconds_total{controller}` (ring changes and their durations).
//! - `kubectl_meta_cached_objects{controller,resource}`: objects the caches the controller
//!   reads hold on this replica (with `--sharded`, about this replica's share).
//! - `kubectl_meta_watch_objects_total{controller,resource}`: objects the server sent those
//!   caches (lists, changes, deletes), before a sharded controller's client-side filter.
//! - `run --sharded`: `kubectl_meta_shard_cache_mode{controller,mode}` (1; `server`: the
//!   caches hold this replica's share, parents listed and watched with a KEP-5866
//!   `shardSelector`; `label`: the same, parents filtered as they arrive (a server without the
//!   gate); `server-except-inputs`, `label-except-inputs`: a MapController's parents and
//!   outputs narrowed so, its inputs not; `all`: not narrowed for this kind).
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
use crate::engine::{DurationHistogram, QueueMetrics, WORKQUEUE_BUCKETS};
use crate::hooks::HookTarget;
use crate::k8s::election::Role;
use crate::spec::ControllerDef;

/// Prometheus' default buckets (client_golang `DefBuckets`), which Metacontroller uses.
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets.
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// controller-runtime's reconcile results (`controller_runtime_reconcile_total{result}`), all
/// shown from the start at 0 as controller-runtime does. A sync that failed is `error`; one
/// that succeeded is `success` (the hook's `resyncAfterSeconds` is not told apart).
const RECONCILE_RESULTS: [&str; 4] = ["success", "error", "requeue", "requeue_after"];

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Label pairs, in order.
type Labels = Vec<(&'static str, String)>;

/// A histogram's buckets (per bucket; cumulative when rendered), sum and count.
#[derive(Debug, Clone)]
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|b| v <= *b) {
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

/// controller-runtime's reconcile counters: (name, help).
const RECONCILE_TOTAL: (&str, &str) = (
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
);
const RECONCILE_ERRORS: (&str, &str) = (
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
);

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

    /// Show a counter at 0 until it first counts.
    fn zero(&mut self, name: &str, help: &str, labels: Labels) {
        self.family(name, help, false)
            .counters
            .entry(labels)
            .or_insert(0.0);
    }

    fn observe(&mut self, name: &str, help: &str, labels: Labels, v: f64) {
        self.observe_in(name, help, labels, v, &BUCKETS);
    }

    fn observe_in(
        &mut self,
        name: &str,
        help: &str,
        labels: Labels,
        v: f64,
        bounds: &'static [f64],
    ) {
        self.family(name, help, true)
            .histograms
            .entry(labels)
            .or_insert_with(|| Histogram::new(bounds))
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
                self.observe(
                    "kubectl_meta_hook_latency_seconds",
                    "Hook call latency (webhook or exec), by controller and hook.",
                    vec![("controller", controller.clone()), ("hook", hook.clone())],
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
                let c = || vec![("controller", controller.clone())];
                let mut with_result = c();
                with_result.push((
                    "result",
                    if error.is_some() { "error" } else { "success" }.to_string(),
                ));
                self.count(RECONCILE_TOTAL.0, RECONCILE_TOTAL.1, with_result);
                if error.is_some() {
                    self.count(RECONCILE_ERRORS.0, RECONCILE_ERRORS.1, c());
                }
                self.observe_in(
                    "controller_runtime_reconcile_time_seconds",
                    "Length of time per reconciliation per controller",
                    c(),
                    duration.as_secs_f64(),
                    &RECONCILE_BUCKETS,
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
        let c = || vec![("controller", def.name().to_string())];
        for result in RECONCILE_RESULTS {
            let mut l = c();
            l.push(("result", result.to_string()));
            i.zero(RECONCILE_TOTAL.0, RECONCILE_TOTAL.1, l);
        }
        i.zero(RECONCILE_ERRORS.0, RECONCILE_ERRORS.1, c());
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
                    render_histogram(&mut out, name, labels, h.bounds, &h.counts, h.sum, h.count);
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

/// A queue metric: its name, help, and how to read it from a queue's figures.
type Series<T> = (&'static str, &'static str, fn(&QueueMetrics) -> T);

/// One histogram's series: cumulative buckets, `+Inf`, sum and count.
fn render_histogram(
    out: &mut String,
    name: &str,
    labels: &Labels,
    bounds: &[f64],
    counts: &[u64],
    sum: f64,
    count: u64,
) {
    let mut cumulative = 0;
    for (b, n) in bounds.iter().zip(counts) {
        cumulative += n;
        let mut l = labels.clone();
        l.push(("le", format_float(*b)));
        let _ = writeln!(out, "{name}_bucket{} {cumulative}", render_labels(&l));
    }
    let mut l = labels.clone();
    l.push(("le", "+Inf".into()));
    let _ = writeln!(out, "{name}_bucket{} {count}", render_labels(&l));
    let _ = writeln!(
        out,
        "{name}_sum{} {}",
        render_labels(labels),
        format_float(sum)
    );
    let _ = writeln!(out, "{name}_count{} {count}", render_labels(labels));
}

/// controller-runtime's worker gauges and client-go's workqueue metrics (under
/// controller-runtime's names and labels: `name` and `controller` both the controller's
/// name), read from each controller's queue. They are the queue's figures since its
/// controller last started here: they restart from zero when the controller restarts (a
/// changed definition, a Lease taken again), which Prometheus' `rate()` treats as a counter
/// reset.
fn render_controller_runtime(out: &mut String, status: &Status) {
    let gauge = |out: &mut String, name: &str, help: &str, kind: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    let by_controller = |name: &String| vec![("controller", name.clone())];
    let by_queue = |name: &String| vec![("name", name.clone()), ("controller", name.clone())];
    gauge(
        out,
        "controller_runtime_max_concurrent_reconciles",
        "Maximum number of concurrent reconciles per controller",
        "gauge",
    );
    for (name, c) in &status.controllers {
        let _ = writeln!(
            out,
            "controller_runtime_max_concurrent_reconciles{} {}",
            render_labels(&by_controller(name)),
            c.workers
        );
    }
    gauge(
        out,
        "controller_runtime_active_workers",
        "Number of currently used workers per controller",
        "gauge",
    );
    for (name, c) in &status.controllers {
        let _ = writeln!(
            out,
            "controller_runtime_active_workers{} {}",
            render_labels(&by_controller(name)),
            c.metrics.in_flight
        );
    }
    gauge(
        out,
        "workqueue_depth",
        "Current depth of workqueue by workqueue and priority",
        "gauge",
    );
    for (name, c) in &status.controllers {
        let mut l = by_queue(name);
        l.push(("priority", String::new()));
        let _ = writeln!(
            out,
            "workqueue_depth{} {}",
            render_labels(&l),
            c.metrics.depth
        );
    }
    let counters: [Series<u64>; 2] = [
        (
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            |m| m.adds,
        ),
        (
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            |m| m.retries,
        ),
    ];
    for (metric, help, value) in counters {
        gauge(out, metric, help, "counter");
        for (name, c) in &status.controllers {
            let _ = writeln!(
                out,
                "{metric}{} {}",
                render_labels(&by_queue(name)),
                value(&c.metrics)
            );
        }
    }
    let histograms: [Series<DurationHistogram>; 2] = [
        (
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            |m| m.queue_duration,
        ),
        (
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            |m| m.work_duration,
        ),
    ];
    for (metric, help, value) in histograms {
        gauge(out, metric, help, "histogram");
        for (name, c) in &status.controllers {
            let h = value(&c.metrics);
            render_histogram(
                out,
                metric,
                &by_queue(name),
                &WORKQUEUE_BUCKETS,
                &h.counts,
                h.sum,
                h.count,
            );
        }
    }
    let seconds: [Series<f64>; 2] = [
        (
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            |m| m.unfinished_work.as_secs_f64(),
        ),
        (
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            |m| m.longest_running.as_secs_f64(),
        ),
    ];
    for (metric, help, value) in seconds {
        gauge(out, metric, help, "gauge");
        for (name, c) in &status.controllers {
            let _ = writeln!(
                out,
                "{metric}{} {}",
                render_labels(&by_queue(name)),
                format_float(value(&c.metrics))
            );
        }
    }
}

/// The gauges read from the runner's state.
fn render_gauges(out: &mut String, status: &Status) {
    render_controller_runtime(out, status);
    render_shard(out, status);
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
    let cached: Vec<(&String, &String, String)> = status
        .controllers
        .iter()
        .flat_map(|(name, c)| c.cached.iter().map(move |(r, n)| (name, r, n.to_string())))
        .collect();
    let received: Vec<(&String, &String, String)> = status
        .controllers
        .iter()
        .flat_map(|(name, c)| {
            c.received
                .iter()
                .map(move |(r, n)| (name, r, n.to_string()))
        })
        .collect();
    for (metric, help, rows) in [
        (
            "kubectl_meta_cached_objects",
            "Objects held by the caches the controller reads on this replica, by resource.\n# TYPE kubectl_meta_cached_objects gauge",
            cached,
        ),
        (
            "kubectl_meta_watch_objects_total",
            "Objects the server sent the caches the controller reads on this replica (lists, changes, deletes), by resource, before client-side filters.\n# TYPE kubectl_meta_watch_objects_total counter",
            received,
        ),
    ] {
        let _ = writeln!(out, "# HELP {metric} {help}");
        for (name, resource, n) in rows {
            let l = vec![("controller", name.clone()), ("resource", resource.clone())];
            let _ = writeln!(out, "{metric}{} {n}", render_labels(&l));
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

/// `run --sharded`: each sharded controller's ring as this replica sees it.
fn render_shard(out: &mut String, status: &Status) {
    let sharded: Vec<_> = status
        .controllers
        .iter()
        .filter_map(|(n, c)| c.shard.as_ref().map(|s| (n, s)))
        .collect();
    if sharded.is_empty() {
        return;
    }
    type Read = fn(&(super::shard::MemberState, usize)) -> String;
    let gauges: [(&str, &str, &str, Read); 4] = [
        (
            "kubectl_meta_shard_parents",
            "Parents of the controller this replica owns (by the ring in force) and has synced.",
            "gauge",
            |s| s.1.to_string(),
        ),
        (
            "kubectl_meta_shard_members",
            "Members of the controller's ring in force, as this replica sees it.",
            "gauge",
            |s| s.0.members.len().to_string(),
        ),
        (
            "kubectl_meta_shard_moves_total",
            "Ring changes completed here (members joined or left, every member drained, the new ring in force).",
            "counter",
            |s| s.0.moves.to_string(),
        ),
        (
            "kubectl_meta_shard_move_seconds_total",
            "Time the ring changes took, from seeing the new membership to the new ring in force, summed.",
            "counter",
            |s| format!("{:.3}", s.0.move_seconds),
        ),
    ];
    for (metric, help, kind, read) in gauges {
        let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} {kind}");
        for (name, s) in &sharded {
            let l = vec![("controller", (*name).clone())];
            let _ = writeln!(out, "{metric}{} {}", render_labels(&l), read(s));
        }
    }
    let _ = writeln!(
        out,
        "# HELP kubectl_meta_shard_cache_mode 1 for how this replica narrows the controller's caches to its share: server (parents or targets by a KEP-5866 shardSelector, children or attachments by bucket label), label (parents or targets by uid bucket as they arrive, children or attachments by bucket label), server-except-inputs and label-except-inputs (MapController: the same for parents and outputs, every input) or all (not narrowed).\n# TYPE kubectl_meta_shard_cache_mode gauge"
    );
    for (name, s) in &sharded {
        let l = vec![
            ("controller", (*name).clone()),
            ("mode", s.0.cache_mode.to_string()),
        ];
        let _ = writeln!(out, "kubectl_meta_shard_cache_mode{} 1", render_labels(&l));
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
    use crate::engine::events::{EventParent, EventSubject};
    use std::time::Duration;

    #[test]
    fn hook_calls_sync_results_and_writes_are_counted_under_their_names() {
        let m = Metrics::default();
        m.on_event(&EngineEvent::HookCalled {
            controller: "c\"1".into(),
            subject: EventParent::parent("default/p"),
            hook: "sync".into(),
            status: Some(200),
            latency: Duration::from_millis(30),
            error: None,
            request: None,
            response: None,
            stderr: None,
        });
        m.on_event(&EngineEvent::SyncFinished {
            controller: "c".into(),
            subject: EventSubject::parent("default/p"),
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
