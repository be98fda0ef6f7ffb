//! Whether an object has reached the state its spec asks for, by the rules the ecosystem
//! agrees on (kstatus, `sigs.k8s.io/cli-utils/pkg/kstatus`, as kpt, Flux and `kubectl wait`
//! use them): [`Status::Current`], [`Status::InProgress`] (still moving: a Pod not Ready yet, a
//! workload whose controller has not caught up) or [`Status::Failed`].
//!
//! - Every object: being deleted is in progress; `status.observedGeneration` behind
//!   `metadata.generation` is in progress; a `Stalled=True` condition is failed, a
//!   `Reconciling=True` condition in progress.
//! - Pod: `Succeeded` is current, `Failed` failed, otherwise current once `Ready=True`.
//! - Deployment, ReplicaSet, StatefulSet: replicas updated, ready and available caught up with
//!   `spec.replicas` (a Deployment past its progress deadline is failed); DaemonSet: every
//!   scheduled Pod updated, ready and available.
//! - Job: failed with `Failed=True`, in progress until it started.
//! - PersistentVolumeClaim: current (kstatus waits for `Bound`, but binding needs a volume
//!   provisioner, which the sandbox does not have, and a `WaitForFirstConsumer` class binds only
//!   once a Pod uses the claim: waiting for it would never end there).
//! - Anything else (custom resources included): the generic rules, then a `Ready` condition
//!   when it has one (`False` or `Unknown` is in progress). An object without status is current.
//!
//! Pure functions: no I/O.

use serde_json::Value;

/// Where an object stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// As its spec asks.
    Current,
    /// Still moving (why).
    InProgress(String),
    /// Will not get there without a change (why).
    Failed(String),
}

/// The status of `obj` (a full object with `apiVersion`, `kind`, `metadata`, `status`).
pub fn compute(obj: &Value) -> Status {
    if let Some(s) = generic(obj) {
        return s;
    }
    let kind = obj["kind"].as_str().unwrap_or_default();
    let group = obj["apiVersion"]
        .as_str()
        .and_then(|a| a.rsplit_once('/').map(|(g, _)| g))
        .unwrap_or("");
    match (group, kind) {
        ("", "Pod") => pod(obj),
        ("apps", "Deployment") => deployment(obj),
        ("apps", "ReplicaSet") => replicas(obj, &["readyReplicas", "availableReplicas"]),
        ("apps", "StatefulSet") => statefulset(obj),
        ("apps", "DaemonSet") => daemonset(obj),
        ("batch", "Job") => job(obj),
        ("", "PersistentVolumeClaim") => Status::Current,
        _ => ready_condition(obj),
    }
}

/// The rules every object follows; `None` when they say nothing.
fn generic(obj: &Value) -> Option<Status> {
    if obj["metadata"]["deletionTimestamp"].is_string() {
        return Some(Status::InProgress("being deleted".into()));
    }
    let generation = obj["metadata"]["generation"].as_i64();
    let observed = obj["status"]["observedGeneration"].as_i64();
    if let (Some(g), Some(o)) = (generation, observed)
        && o < g
    {
        return Some(Status::InProgress(format!(
            "status.observedGeneration {o} behind metadata.generation {g}"
        )));
    }
    if let Some(c) = condition(obj, "Stalled")
        && c["status"] == "True"
    {
        return Some(Status::Failed(described("Stalled", c)));
    }
    if let Some(c) = condition(obj, "Reconciling")
        && c["status"] == "True"
    {
        return Some(Status::InProgress(described("Reconciling", c)));
    }
    None
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// `Ready=False (reason: message)`.
fn described(type_: &str, c: &Value) -> String {
    let mut s = format!("{type_}={}", c["status"].as_str().unwrap_or("Unknown"));
    let reason = c["reason"].as_str().unwrap_or_default();
    let message = c["message"].as_str().unwrap_or_default();
    match (reason.is_empty(), message.is_empty()) {
        (true, true) => {}
        (false, true) => s.push_str(&format!(" ({reason})")),
        (true, false) => s.push_str(&format!(" ({message})")),
        (false, false) => s.push_str(&format!(" ({reason}: {message})")),
    }
    s
}

fn ready_condition(obj: &Value) -> Status {
    match condition(obj, "Ready") {
        Some(c) if c["status"] != "True" => Status::InProgress(described("Ready", c)),
        _ => Status::Current,
    }
}

fn pod(obj: &Value) -> Status {
    match obj["status"]["phase"].as_str() {
        Some("Succeeded") => Status::Current,
        Some("Failed") => Status::Failed(format!(
            "phase Failed{}",
            obj["status"]["reason"]
                .as_str()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        )),
        phase => match condition(obj, "Ready") {
            Some(c) if c["status"] == "True" => Status::Current,
            Some(c) => Status::InProgress(described("Ready", c)),
            None => Status::InProgress(format!("not Ready (phase {})", phase.unwrap_or("unset"))),
        },
    }
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// `spec.replicas` (default 1) against each of `fields` of the status (absent is 0), and
/// `status.replicas` not above it (old Pods still going).
fn replicas(obj: &Value, fields: &[&str]) -> Status {
    let want = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    if obj["status"]["observedGeneration"].is_null() && obj["metadata"]["generation"].is_i64() {
        return Status::InProgress("its controller has not observed it yet".into());
    }
    for f in fields {
        let have = int(&obj["status"][f]);
        if have < want {
            return Status::InProgress(format!("status.{f} {have} of {want}"));
        }
    }
    let total = int(&obj["status"]["replicas"]);
    if total > want {
        return Status::InProgress(format!(
            "status.replicas {total}, {want} wanted (old Pods terminating)"
        ));
    }
    Status::Current
}

fn deployment(obj: &Value) -> Status {
    if let Some(c) = condition(obj, "Progressing")
        && c["reason"] == "ProgressDeadlineExceeded"
    {
        return Status::Failed(described("Progressing", c));
    }
    replicas(
        obj,
        &["updatedReplicas", "readyReplicas", "availableReplicas"],
    )
}

fn statefulset(obj: &Value) -> Status {
    let rolling = obj["spec"]["updateStrategy"]["type"]
        .as_str()
        .is_none_or(|t| t == "RollingUpdate");
    let fields: &[&str] = if rolling {
        &["readyReplicas", "currentReplicas", "updatedReplicas"]
    } else {
        &["readyReplicas"]
    };
    match replicas(obj, fields) {
        Status::Current if rolling => {
            let (cur, upd) = (
                obj["status"]["currentRevision"].as_str(),
                obj["status"]["updateRevision"].as_str(),
            );
            if cur != upd {
                Status::InProgress(format!(
                    "status.currentRevision {} is not updateRevision {}",
                    cur.unwrap_or("unset"),
                    upd.unwrap_or("unset")
                ))
            } else {
                Status::Current
            }
        }
        s => s,
    }
}

fn daemonset(obj: &Value) -> Status {
    if obj["status"]["observedGeneration"].is_null() && obj["metadata"]["generation"].is_i64() {
        return Status::InProgress("its controller has not observed it yet".into());
    }
    let want = int(&obj["status"]["desiredNumberScheduled"]);
    for f in [
        "currentNumberScheduled",
        "updatedNumberScheduled",
        "numberAvailable",
        "numberReady",
    ] {
        let have = int(&obj["status"][f]);
        if have < want {
            return Status::InProgress(format!("status.{f} {have} of {want}"));
        }
    }
    Status::Current
}

fn job(obj: &Value) -> Status {
    if let Some(c) = condition(obj, "Failed")
        && c["status"] == "True"
    {
        return Status::Failed(described("Failed", c));
    }
    if obj["status"]["startTime"].is_null() {
        return Status::InProgress("not started".into());
    }
    Status::Current
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cond(t: &str, s: &str) -> Value {
        json!({"type": t, "status": s})
    }

    #[test]
    fn pods_are_current_when_ready_or_succeeded_and_failed_when_failed() {
        let pod = |status: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": status});
        assert_eq!(
            compute(&pod(
                json!({"phase": "Running", "conditions": [cond("Ready", "True")]})
            )),
            Status::Current
        );
        assert_eq!(
            compute(&pod(
                json!({"phase": "Running", "conditions": [cond("Ready", "False")]})
            )),
            Status::InProgress("Ready=False".into())
        );
        assert_eq!(
            compute(&pod(json!({"phase": "Pending"}))),
            Status::InProgress("not Ready (phase Pending)".into())
        );
        assert_eq!(
            compute(&pod(json!({}))),
            Status::InProgress("not Ready (phase unset)".into())
        );
        assert_eq!(
            compute(&pod(json!({"phase": "Succeeded"}))),
            Status::Current
        );
        assert!(matches!(
            compute(&pod(json!({"phase": "Failed"}))),
            Status::Failed(_)
        ));
        let mut deleting = pod(json!({"phase": "Running", "conditions": [cond("Ready", "True")]}));
        deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert_eq!(
            compute(&deleting),
            Status::InProgress("being deleted".into())
        );
    }

    #[test]
    fn workloads_wait_for_observed_generation_and_replicas() {
        let deploy = |generation: i64, status: Value| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d", "generation": generation},
                "spec": {"replicas": 3}, "status": status})
        };
        let caught_up = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
            "readyReplicas": 3, "availableReplicas": 3});
        assert_eq!(compute(&deploy(2, caught_up.clone())), Status::Current);
        assert_eq!(
            compute(&deploy(3, caught_up.clone())),
            Status::InProgress("status.observedGeneration 2 behind metadata.generation 3".into())
        );
        let mut rolling = caught_up.clone();
        rolling["readyReplicas"] = json!(2);
        assert_eq!(
            compute(&deploy(2, rolling)),
            Status::InProgress("status.readyReplicas 2 of 3".into())
        );
        let mut surplus = caught_up.clone();
        surplus["replicas"] = json!(4);
        assert!(matches!(
            compute(&deploy(2, surplus)),
            Status::InProgress(_)
        ));
        let mut stuck = caught_up;
        stuck["conditions"] = json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]);
        assert!(matches!(compute(&deploy(2, stuck)), Status::Failed(_)));
        assert!(matches!(
            compute(&deploy(1, json!({}))),
            Status::InProgress(_)
        ));
        let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "s", "generation": 1}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
                "currentReplicas": 2, "updatedReplicas": 2, "currentRevision": "a",
                "updateRevision": "b"}});
        assert!(matches!(compute(&sts), Status::InProgress(_)));
    }

    #[test]
    fn custom_resources_follow_ready_and_the_generic_conditions() {
        let cr = |status: Value| {
            json!({"apiVersion": "x.io/v1", "kind": "Thing",
            "metadata": {"name": "t", "generation": 1}, "status": status})
        };
        assert_eq!(
            compute(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})),
            Status::Current
        );
        assert_eq!(
            compute(&cr(json!({"conditions": [cond("Ready", "True")]}))),
            Status::Current
        );
        assert_eq!(
            compute(&cr(
                json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Waiting", "message": "db"}]})
            )),
            Status::InProgress("Ready=False (Waiting: db)".into())
        );
        assert!(matches!(
            compute(&cr(json!({"conditions": [cond("Stalled", "True")]}))),
            Status::Failed(_)
        ));
        assert!(matches!(
            compute(&cr(json!({"conditions": [cond("Reconciling", "True")]}))),
            Status::InProgress(_)
        ));
        assert!(matches!(
            compute(&cr(json!({"observedGeneration": 0}))),
            Status::InProgress(_)
        ));
    }
}
