//! A simulated kubelet: pods that are Pending become Running with every container ready after
//! a short delay, so controllers that wait on readiness (rolling updates with status checks)
//! can be developed without nodes.
//!
//! A running pod that is deleted is `Terminating` (`deletionTimestamp`,
//! `deletionGracePeriodSeconds`) while its containers stop: they exit on SIGTERM after the
//! same short delay (or the seconds of the Pod annotation `sandbox.kubectl-meta.io/stop-seconds`),
//! or are killed (exit code 137) when the grace period runs out first. The kubelet then reports
//! them terminated with a terminal phase (a watch sees that update), and deletes the pod for
//! good, as a kubelet does once a pod's containers have stopped. Turned off with `--no-kubelet`.
//!
//! Pods are first bound to a Node by the simulated scheduler ([`super::node`]); without a
//! Node that fits they stay Pending. Run-to-completion Pods (`restartPolicy` `Never` or
//! `OnFailure`, as Jobs' Pods are) finish after [`Tunables::pod_run`](crate::Tunables)
//! (or the seconds of the Pod annotation `sandbox.kubectl-meta.io/run-seconds`): `Succeeded`
//! with exit code 0, or `Failed` with the exit code of the annotation
//! `sandbox.kubectl-meta.io/exit-code` when it is not 0.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::node;
use crate::ops;
use crate::state::{State, now_rfc3339, random_u64};
use crate::store::{ObjKey, Stored};

/// Tracks pods already scheduled to start, so each is started once.
#[derive(Debug, Default)]
pub struct Kubelet {
    starting: Arc<Mutex<HashSet<String>>>,
}

impl Kubelet {
    /// Look at a pod; schedule it to start if it is pending, to finish if it is terminating.
    pub fn observe(&self, state: &Arc<State>, pod: &Arc<Stored>) {
        let Some(delay) = state.tunables.kubelet_delay else {
            return;
        };
        let Ok(v) = pod.value() else {
            return;
        };
        let uid = pod.uid.clone();
        if pod.deleting {
            self.terminate(state, pod, &v, delay);
            return;
        }
        let phase = v["status"]["phase"].as_str().unwrap_or("Pending");
        if phase == "Running" && runs_to_completion(&v) {
            let run = v["metadata"]["annotations"][RUN_SECONDS]
                .as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map_or(state.tunables.pod_run, std::time::Duration::from_secs_f64);
            self.after(state, pod, format!("{uid}/finish"), run, move |state, key| {
                if let Err(e) = ops::mutate(state, key, |p: &mut Value| finish(p, &uid)) {
                    tracing::warn!(pod = %key.name, error = %e, "simulated kubelet could not finish pod");
                }
            });
            return;
        }
        if phase != "Pending" {
            return;
        }
        if v["spec"]["nodeName"].is_null() {
            // Bound first; the binding's own event brings the pod back here.
            node::schedule(state, pod, &v);
            return;
        }
        self.after(state, pod, uid.clone(), delay, move |state, key| {
            let r = ops::mutate(state, key, |p: &mut Value| start(p, &uid));
            if let Err(e) = r {
                tracing::warn!(pod = %key.name, error = %e, "simulated kubelet could not start pod");
            }
        });
    }

    /// A pod being deleted gracefully: stop its containers (SIGTERM; they exit after
    /// [`STOP_SECONDS`] or the kubelet delay, killed at the end of the grace period if that is
    /// shorter), report them terminated, then delete the pod for good (grace period 0), as the
    /// kubelet does once a pod's containers have stopped.
    fn terminate(&self, state: &Arc<State>, pod: &Arc<Stored>, v: &Value, delay: Duration) {
        let Some(grace) = v["metadata"]["deletionGracePeriodSeconds"]
            .as_u64()
            .filter(|g| *g > 0)
        else {
            return;
        };
        let uid = pod.uid.clone();
        if containers_stopped(v) {
            self.after(state, pod, format!("{uid}/remove"), Duration::ZERO, move |state, key| {
                let opts = ops::DeleteOpts {
                    uid: Some(uid),
                    grace_period: Some(0),
                    ..Default::default()
                };
                let r = state
                    .def_for_gr(&key.gr)
                    .and_then(|def| ops::delete(state, &def, key, &opts));
                match r {
                    Ok(_) => {}
                    Err(e) if e.code == 404 || e.code == 409 => {}
                    Err(e) => tracing::warn!(pod = %key.name, error = %e, "simulated kubelet could not remove terminated pod"),
                }
            });
            return;
        }
        let grace = Duration::from_secs(grace);
        let stop = v["metadata"]["annotations"][STOP_SECONDS]
            .as_str()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(delay, Duration::from_secs_f64);
        // Exited on SIGTERM (0), or killed when the grace period ran out (137).
        let (after, code) = if stop <= grace {
            (stop, 0)
        } else {
            (grace, 137)
        };
        self.after(state, pod, format!("{uid}/terminating"), after, move |state, key| {
            if let Err(e) = ops::mutate(state, key, |p: &mut Value| stopped(p, &uid, code)) {
                tracing::warn!(pod = %key.name, error = %e, "simulated kubelet could not stop pod");
            }
        });
    }

    /// Run `work` once per `tag` after `delay` (unless the sandbox shuts down first).
    fn after(
        &self,
        state: &Arc<State>,
        pod: &Stored,
        tag: String,
        delay: std::time::Duration,
        work: impl FnOnce(&State, &ObjKey) + Send + 'static,
    ) {
        {
            let mut s = self.starting.lock().unwrap_or_else(|p| p.into_inner());
            if !s.insert(tag.clone()) {
                return;
            }
        }
        let state = state.clone();
        let starting = self.starting.clone();
        let key = pod.key.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = state.shutdown.cancelled() => {}
                _ = tokio::time::sleep(delay) => work(&state, &key),
            }
            starting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&tag);
        });
    }
}

/// Pod annotation: how many seconds a run-to-completion pod runs.
pub const RUN_SECONDS: &str = "sandbox.kubectl-meta.io/run-seconds";
/// Pod annotation: the exit code its containers end with (not 0: the pod fails).
pub const EXIT_CODE: &str = "sandbox.kubectl-meta.io/exit-code";
/// Pod annotation: how many seconds its containers take to stop after SIGTERM (more than the
/// grace period: they are killed when it runs out, exit code 137).
pub const STOP_SECONDS: &str = "sandbox.kubectl-meta.io/stop-seconds";

fn runs_to_completion(pod: &Value) -> bool {
    matches!(
        pod["spec"]["restartPolicy"].as_str(),
        Some("Never" | "OnFailure")
    )
}

/// Mark a running run-to-completion pod Succeeded (or Failed, per [`EXIT_CODE`]), as the
/// kubelet reports a pod whose containers exited.
fn finish(pod: &mut Value, uid: &str) -> bool {
    if pod["metadata"]["uid"].as_str() != Some(uid)
        || !pod["metadata"]["deletionTimestamp"].is_null()
        || pod["status"]["phase"] != "Running"
    {
        return false;
    }
    let code = pod["metadata"]["annotations"][EXIT_CODE]
        .as_str()
        .and_then(|c| c.trim().parse::<i64>().ok())
        .unwrap_or(0);
    terminated(pod, code);
    true
}

/// Has every container of a pod being deleted stopped (or never started)?
fn containers_stopped(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) || !pod["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| !c["state"]["running"].is_null())
}

/// The containers of a pod being deleted stopped with exit code `code` (0: they exited on
/// SIGTERM; 137: killed when the grace period ran out). The kubelet then gives the pod a
/// terminal phase whatever its restart policy (`getPhase` with `podIsTerminal`).
fn stopped(pod: &mut Value, uid: &str, code: i64) -> bool {
    if pod["metadata"]["uid"].as_str() != Some(uid)
        || pod["metadata"]["deletionTimestamp"].is_null()
        || containers_stopped(pod)
    {
        return false;
    }
    terminated(pod, code);
    true
}

/// Every container terminated with `code`: `Succeeded` (0, `Completed`) or `Failed` (`Error`).
fn terminated(pod: &mut Value, code: i64) {
    let now = now_rfc3339();
    let (phase, reason) = if code == 0 {
        ("Succeeded", "Completed")
    } else {
        ("Failed", "Error")
    };
    let cond = |t: &str, st: &str, reason: Option<&str>| {
        let mut c =
            json!({"type": t, "status": st, "lastProbeTime": null, "lastTransitionTime": now});
        if let Some(r) = reason {
            c["reason"] = json!(r);
        }
        c
    };
    let started = pod["status"]["startTime"].clone();
    if let Some(cs) = pod["status"]["containerStatuses"].as_array_mut() {
        for c in cs {
            let started_at = c["state"]["running"]["startedAt"].clone();
            c["ready"] = json!(false);
            c["started"] = json!(false);
            c["state"] = json!({"terminated": {"exitCode": code, "reason": reason,
                "startedAt": started_at, "finishedAt": now,
                "containerID": c["containerID"]}});
        }
    }
    pod["status"]["phase"] = json!(phase);
    pod["status"]["conditions"] = json!([
        cond("PodReadyToStartContainers", "False", None),
        cond("Initialized", "True", Some("PodCompleted")),
        cond("Ready", "False", Some("PodCompleted")),
        cond("ContainersReady", "False", Some("PodCompleted")),
        cond("PodScheduled", "True", None),
    ]);
    pod["status"]["startTime"] = started;
}

/// Mark a pending pod Running and Ready. Returns false if it is no longer the same pending pod.
fn start(pod: &mut Value, uid: &str) -> bool {
    if pod["metadata"]["uid"].as_str() != Some(uid)
        || !pod["metadata"]["deletionTimestamp"].is_null()
        || pod["status"]["phase"]
            .as_str()
            .is_some_and(|p| p != "Pending")
    {
        return false;
    }
    let now = now_rfc3339();
    let ip = format!(
        "10.244.{}.{}",
        (random_u64() >> 8) % 256,
        random_u64() % 254 + 1
    );
    let statuses: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": true,
                        "started": true, "restartCount": 0,
                        "containerID": format!("sandbox://{uid}/{}", c["name"].as_str().unwrap_or_default()),
                        "state": {"running": {"startedAt": now}}})
                })
                .collect()
        })
        .unwrap_or_default();
    let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    pod["status"] = json!({
        "phase": "Running",
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"),
                       cond("ContainersReady"), cond("PodScheduled")],
        "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": now, "qosClass": "BestEffort",
        "containerStatuses": statuses,
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_only_the_same_pending_pod() {
        let mut p = json!({"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Pending"}});
        assert!(!start(&mut p.clone(), "other"));
        assert!(start(&mut p, "u"));
        assert_eq!(p["status"]["phase"], "Running");
        assert_eq!(p["status"]["containerStatuses"][0]["ready"], true);
        assert!(!start(&mut p, "u"), "already running");
    }
}
