//! `deploy --grafana-dashboard` and `deploy --prometheus-rule`: a Grafana dashboard (a
//! ConfigMap labelled `grafana_dashboard: "1"`, as Grafana's dashboard sidecar discovers them)
//! and a PrometheusRule (the Prometheus Operator's) of alerts, over `run`'s `/metrics`:
//! controller-runtime's names, the workqueue's, the hook latency and the hot-loop guard.
//!
//! Every query selects the deployment's series by `namespace="<namespace>"`, the label the
//! Prometheus Operator and the usual annotation-based scrape configurations give each target,
//! so other operators' `controller_runtime_*` series in the cluster are not mixed in.

use serde_json::{Value, json};

use super::{APP, meta};

/// The dashboard's ConfigMap name (and its uid in Grafana).
pub const DASHBOARD: &str = "kubectl-meta-dashboard";

/// One time-series panel at (x, y), 12 columns wide and 8 rows high.
fn panel(id: u32, title: &str, unit: &str, targets: &[(&str, &str)]) -> Value {
    let x = if id % 2 == 1 { 0 } else { 12 };
    let y = (id - 1) / 2 * 8;
    let targets: Vec<Value> = targets
        .iter()
        .zip('A'..)
        .map(|((expr, legend), ref_id)| {
            json!({"expr": expr, "legendFormat": legend, "refId": ref_id.to_string(),
                   "datasource": {"type": "prometheus", "uid": "${datasource}"}})
        })
        .collect();
    json!({
        "id": id, "type": "timeseries", "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": 12, "h": 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": targets,
    })
}

/// The dashboard's JSON model for the deployment in `namespace`.
pub fn dashboard(namespace: &str) -> Value {
    let ns = format!("namespace=\"{namespace}\"");
    let c = format!("{ns},controller=~\"$controller\"");
    let q = format!("{ns},name=~\"$controller\"");
    let quantile = |q: f64, metric: &str, sel: &str, by: &str| {
        format!("histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{sel}}}[5m])))")
    };
    let p99 = |metric: &str, sel: &str, by: &str| quantile(0.99, metric, sel, by);
    let panels = vec![
        panel(
            1,
            "Reconciles by result",
            "ops",
            &[(
                &format!(
                    "sum by (controller, result) (rate(controller_runtime_reconcile_total{{{c}}}[5m]))"
                ),
                "{{controller}} {{result}}",
            )],
        ),
        panel(
            2,
            "Reconcile errors",
            "ops",
            &[(
                &format!(
                    "sum by (controller) (rate(controller_runtime_reconcile_errors_total{{{c}}}[5m]))"
                ),
                "{{controller}}",
            )],
        ),
        panel(
            3,
            "Reconcile time (p50, p99)",
            "s",
            &[
                (
                    &quantile(
                        0.5,
                        "controller_runtime_reconcile_time_seconds",
                        &c,
                        "controller",
                    ),
                    "{{controller}} p50",
                ),
                (
                    &p99(
                        "controller_runtime_reconcile_time_seconds",
                        &c,
                        "controller",
                    ),
                    "{{controller}} p99",
                ),
            ],
        ),
        panel(
            4,
            "Work queue depth",
            "short",
            &[(
                &format!("sum by (name) (workqueue_depth{{{q}}})"),
                "{{name}}",
            )],
        ),
        panel(
            5,
            "Queue wait p99 (added to picked up)",
            "s",
            &[(
                &p99("workqueue_queue_duration_seconds", &q, "name"),
                "{{name}}",
            )],
        ),
        panel(
            6,
            "Work duration p99",
            "s",
            &[(
                &p99("workqueue_work_duration_seconds", &q, "name"),
                "{{name}}",
            )],
        ),
        panel(
            7,
            "Workers busy / max",
            "short",
            &[
                (
                    &format!("sum by (controller) (controller_runtime_active_workers{{{c}}})"),
                    "{{controller}} busy",
                ),
                (
                    &format!(
                        "max by (controller) (controller_runtime_max_concurrent_reconciles{{{c}}})"
                    ),
                    "{{controller}} max",
                ),
            ],
        ),
        panel(
            8,
            "Retries and longest running sync",
            "short",
            &[
                (
                    &format!("sum by (name) (rate(workqueue_retries_total{{{q}}}[5m]))"),
                    "{{name}} retries/s",
                ),
                (
                    &format!("max by (name) (workqueue_longest_running_processor_seconds{{{q}}})"),
                    "{{name}} longest running (s)",
                ),
            ],
        ),
        panel(
            9,
            "Hook latency p99",
            "s",
            &[(
                &p99("kubectl_meta_hook_latency_seconds", &c, "controller, hook"),
                "{{controller}} {{hook}}",
            )],
        ),
        panel(
            10,
            "Writes by verb, hot-loop guard trips",
            "ops",
            &[
                (
                    &format!(
                        "sum by (controller, verb) (rate(kubectl_meta_writes_total{{{c}}}[5m]))"
                    ),
                    "{{controller}} {{verb}}",
                ),
                (
                    &format!(
                        "sum by (controller) (rate(kubectl_meta_hot_loop_trips_total{{{c}}}[5m]))"
                    ),
                    "{{controller}} hot-loop trips",
                ),
            ],
        ),
    ];
    json!({
        "uid": DASHBOARD,
        "title": "kubectl-meta",
        "tags": ["kubectl-meta", "controller-runtime"],
        "timezone": "browser",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
            {"name": "controller", "type": "query", "label": "Controller",
             "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "query": format!("label_values(controller_runtime_reconcile_total{{{ns}}}, controller)"),
             "refresh": 2, "multi": true, "includeAll": true, "allValue": ".*",
             "current": {"text": "All", "value": "$__all"}},
        ]},
        "panels": panels,
    })
}

/// The dashboard as a ConfigMap Grafana's sidecar loads (`grafana_dashboard: "1"`).
pub fn dashboard_configmap(namespace: &str) -> Value {
    let mut metadata = meta(DASHBOARD, Some(namespace));
    metadata["labels"]["grafana_dashboard"] = json!("1");
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": metadata,
        "data": {
            "kubectl-meta.json": serde_json::to_string_pretty(&dashboard(namespace)).unwrap_or_default(),
        },
    })
}

/// One alert.
fn alert(name: &str, expr: String, wait: &str, severity: &str, summary: &str) -> Value {
    json!({
        "alert": name, "expr": expr, "for": wait,
        "labels": {"severity": severity},
        "annotations": {"summary": summary},
    })
}

/// The PrometheusRule of alerts for the deployment in `namespace`.
pub fn prometheus_rule(namespace: &str) -> Value {
    let ns = format!("namespace=\"{namespace}\"");
    let rules = vec![
        alert(
            "KubectlMetaReconcileErrors",
            format!(
                "sum by (controller) (rate(controller_runtime_reconcile_errors_total{{{ns}}}[5m])) / sum by (controller) (rate(controller_runtime_reconcile_total{{{ns}}}[5m])) > 0.1"
            ),
            "15m",
            "warning",
            "{{ $labels.controller }}: more than 10% of syncs fail (see the syncFinished errors in the logs, or the hook's)",
        ),
        alert(
            "KubectlMetaQueueWaitHigh",
            format!(
                "histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{{{ns}}}[5m]))) > 10"
            ),
            "15m",
            "warning",
            "{{ $labels.name }}: p99 wait in the work queue above 10 s (too few --workers, a slow hook, or API pacing)",
        ),
        alert(
            "KubectlMetaHotLoop",
            format!(
                "sum by (controller) (increase(kubectl_meta_hot_loop_trips_total{{{ns}}}[15m])) > 0"
            ),
            "0m",
            "warning",
            "{{ $labels.controller }}: the hot-loop guard is holding a field something keeps setting back",
        ),
        alert(
            "KubectlMetaSustainedWrites",
            format!("sum by (controller) (rate(kubectl_meta_writes_total{{{ns}}}[15m])) > 1"),
            "30m",
            "info",
            "{{ $labels.controller }}: more than one write a second for 30 minutes (a possible fight with another writer)",
        ),
        alert(
            "KubectlMetaStuckSync",
            format!("max by (name) (workqueue_longest_running_processor_seconds{{{ns}}}) > 300"),
            "5m",
            "warning",
            "{{ $labels.name }}: a sync has run for more than 5 minutes",
        ),
        alert(
            "KubectlMetaNoLeaseHolder",
            format!("sum by (controller) (kubectl_meta_lease_held{{{ns}}}) == 0"),
            "10m",
            "critical",
            "{{ $labels.controller }}: no replica holds its Lease: nothing syncs it",
        ),
    ];
    json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
        "metadata": meta(APP, Some(namespace)),
        "spec": {"groups": [{"name": "kubectl-meta", "rules": rules}]},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dashboard_and_the_rules_query_the_exported_names_in_the_namespace() {
        let cm = dashboard_configmap("ops");
        assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
        assert_eq!(cm["metadata"]["namespace"], "ops");
        let text = cm["data"]["kubectl-meta.json"].as_str().unwrap();
        let board: Value = serde_json::from_str(text).unwrap();
        let exprs: Vec<String> = board["panels"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["targets"].as_array().unwrap().clone())
            .map(|t| t["expr"].as_str().unwrap().to_string())
            .collect();
        for name in [
            "controller_runtime_reconcile_total",
            "controller_runtime_reconcile_errors_total",
            "controller_runtime_reconcile_time_seconds_bucket",
            "controller_runtime_active_workers",
            "controller_runtime_max_concurrent_reconciles",
            "workqueue_depth",
            "workqueue_queue_duration_seconds_bucket",
            "workqueue_work_duration_seconds_bucket",
            "workqueue_retries_total",
            "workqueue_longest_running_processor_seconds",
            "kubectl_meta_hook_latency_seconds_bucket",
            "kubectl_meta_hot_loop_trips_total",
        ] {
            assert!(
                exprs.iter().any(|e| e.contains(&format!("{name}{{"))),
                "no panel queries {name}"
            );
        }
        assert!(exprs.iter().all(|e| e.contains("namespace=\"ops\"")));
        let ids: Vec<u64> = board["panels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_u64().unwrap())
            .collect();
        let mut unique = ids.clone();
        unique.dedup();
        assert_eq!(ids, unique);

        let rule = prometheus_rule("ops");
        assert_eq!(rule["kind"], "PrometheusRule");
        let alerts = rule["spec"]["groups"][0]["rules"].as_array().unwrap();
        for a in alerts {
            let expr = a["expr"].as_str().unwrap();
            assert!(expr.contains("namespace=\"ops\""), "{expr}");
            assert!(a["labels"]["severity"].is_string());
        }
        let names: Vec<&str> = alerts
            .iter()
            .map(|a| a["alert"].as_str().unwrap())
            .collect();
        for want in [
            "KubectlMetaReconcileErrors",
            "KubectlMetaQueueWaitHigh",
            "KubectlMetaHotLoop",
        ] {
            assert!(names.contains(&want), "{names:?}");
        }
    }
}
