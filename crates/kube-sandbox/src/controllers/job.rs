//! A simulated Job controller, as kube-controller-manager runs one. A Job gets up to
//! `parallelism` active Pods from its template (with the `batch.kubernetes.io/job-tracking`
//! finalizer, removed once a finished Pod is counted); with `completionMode: Indexed` each Pod
//! carries its index (`<job>-<index>-` names, the `batch.kubernetes.io/job-completion-index`
//! label and annotation, `JOB_COMPLETION_INDEX`, hostname `<job>-<index>`). The simulated
//! kubelet finishes the Pods (see `kubelet`), so `status` moves as upstream's does:
//! `startTime`, `active`, `ready`, `terminating`, `succeeded`, `failed`, `completedIndexes`,
//! `uncountedTerminatedPods`, then `SuccessCriteriaMet` + `Complete` with `completionTime`, or,
//! past `backoffLimit` failures, `FailureTarget` + `Failed` (`BackoffLimitExceeded`).
//! Failed Pods are replaced after upstream's exponential back-off (10 s doubling per failure
//! since the last success, capped at 10 minutes; the base is a tunable); past
//! `activeDeadlineSeconds` the Job fails with `DeadlineExceeded`; `suspend` deletes its active
//! Pods and sets the `Suspended` condition (`JobSuspended`, then `JobResumed`, which restarts
//! `startTime`). Simplified: no pod failure or success policies, no `backoffLimitPerIndex`.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use std::time::Duration;

use super::gc;
use super::pods;
use crate::state::{State, now_rfc3339, now_unix};
use crate::store::Stored;

/// Storage key of Jobs.
pub const GR: &str = "batch/jobs";
const WHO: &str = "Job";
/// The finalizer that keeps a finished Pod until the Job has counted it.
pub const TRACKING: &str = "batch.kubernetes.io/job-tracking";
const INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// A Pod changed: sync the Job that controls it.
pub fn pod_changed(state: &Arc<State>, pod: &Stored) {
    if let Some(job) = pods::controller_of(state, pod, GR) {
        sync(state, &job);
    }
}

fn finished(v: &Value) -> bool {
    ["Complete", "Failed"]
        .iter()
        .any(|t| pods::condition(v, t).is_some_and(|c| c["status"] == "True"))
}

fn index_of(p: &Value) -> Option<i64> {
    p["metadata"]["annotations"][INDEX]
        .as_str()
        .and_then(|i| i.parse().ok())
}

/// Bring one Job's Pods and status forward.
pub fn sync(state: &Arc<State>, job: &Stored) {
    let Some(job) = pods::current(state, job) else {
        return;
    };
    let job = &*job;
    let Ok(v) = job.value() else { return };
    let indexed = v["spec"]["completionMode"] == "Indexed";
    let completions = v["spec"]["completions"].as_i64();
    let parallelism = v["spec"]["parallelism"].as_i64().unwrap_or(1).max(0);
    let backoff = v["spec"]["backoffLimit"].as_i64().unwrap_or(6);
    let owned: Vec<(Arc<Stored>, Value)> = pods::controlled_pods(state, &job.uid);
    let old = v["status"].clone();
    let mut succeeded = old["succeeded"].as_i64().unwrap_or(0);
    let mut failed = old["failed"].as_i64().unwrap_or(0);
    let mut done: BTreeSet<i64> = parse_indexes(old["completedIndexes"].as_str().unwrap_or(""));
    // Count finished Pods that still carry the tracking finalizer, then release them.
    let mut counted = Vec::new();
    for (p, pv) in &owned {
        let phase = pv["status"]["phase"].as_str().unwrap_or("");
        let terminal = phase == "Succeeded" || phase == "Failed";
        let tracked = p.finalizers.iter().any(|f| f == TRACKING);
        if tracked && (terminal || p.deleting) {
            if phase == "Succeeded" {
                match index_of(pv).filter(|_| indexed) {
                    Some(i) if done.insert(i) => succeeded += 1,
                    Some(_) => {}
                    None => succeeded += 1,
                }
            } else {
                failed += 1;
            }
            counted.push(p.clone());
        }
    }
    let active: Vec<&(Arc<Stored>, Value)> =
        owned.iter().filter(|(p, pv)| pods::active(p, pv)).collect();
    let terminating = owned
        .iter()
        .filter(|(p, pv)| {
            p.deleting && !matches!(pv["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
        })
        .count() as i64;
    let was_finished = finished(&v);
    let suspended = v["spec"]["suspend"] == true;
    let failure = failure(&v, failed > backoff, suspended);
    let failing = failure.is_some();
    let success = match completions {
        Some(c) => succeeded >= c,
        None => succeeded > 0 && active.is_empty(),
    };
    if !was_finished {
        if failing || success || suspended {
            for (p, _) in &active {
                pods::delete(state, p, WHO);
            }
        } else if let Some(wait) = backoff_left(state, &owned) {
            // `manageJob`: no replacement before the pod failure back-off has passed.
            state.requeue.after(&job.key, wait);
        } else {
            create_missing(
                state,
                job,
                &v,
                indexed,
                completions,
                parallelism,
                succeeded,
                &done,
                &active,
            );
        }
        if !failing && !success && !suspended {
            // Look again when the active deadline passes.
            if let Some(left) = deadline_left(&v) {
                state
                    .requeue
                    .after(&job.key, Duration::from_secs(left.unsigned_abs() + 1));
            }
        }
    }
    let ready = active.iter().filter(|(_, pv)| pods::ready(pv)).count() as i64;
    let n_active = if was_finished || failing || success {
        0
    } else {
        active.len() as i64
    };
    let Some(fresh) = state.store.get(GR, &job.key.ns, &job.key.name) else {
        return;
    };
    let now = now_rfc3339();
    pods::write_status(state, &fresh, WHO, |cur| {
        let mut s: Map<String, Value> = cur["status"].as_object().cloned().unwrap_or_default();
        if finished(cur) {
            return Value::Object(s);
        }
        if !suspended {
            s.entry("startTime").or_insert_with(|| json!(now));
        }
        let resumed = ensure_suspended(&mut s, suspended, &now);
        if resumed {
            // A resumed Job's active deadline counts from now.
            s.insert("startTime".into(), json!(now));
        }
        pods::put_nonzero(&mut s, "active", n_active);
        s.insert("ready".into(), json!(ready));
        s.insert("terminating".into(), json!(terminating));
        pods::put_nonzero(&mut s, "succeeded", succeeded);
        pods::put_nonzero(&mut s, "failed", failed);
        if indexed {
            s.insert("completedIndexes".into(), json!(format_indexes(&done)));
        }
        s.insert("uncountedTerminatedPods".into(), json!({}));
        let all_gone = active.is_empty() && terminating == 0;
        if let Some((reason, msg)) = &failure {
            add_condition(&mut s, "FailureTarget", reason, msg, &now);
            if all_gone {
                add_condition(&mut s, "Failed", reason, msg, &now);
            }
        } else if success {
            let msg = "Reached expected number of succeeded pods";
            add_condition(
                &mut s,
                "SuccessCriteriaMet",
                "CompletionsReached",
                msg,
                &now,
            );
            if all_gone {
                add_condition(&mut s, "Complete", "CompletionsReached", msg, &now);
                s.insert("completionTime".into(), json!(now));
            }
        }
        Value::Object(s)
    });
    for p in counted {
        gc::drop_finalizer(state, &p, TRACKING);
    }
}

/// Why the Job fails, if it does (`syncJob`): an earlier `FailureTarget`, failures past
/// `backoffLimit`, or `activeDeadlineSeconds` passed since `startTime` (not while suspended).
fn failure(v: &Value, past_backoff: bool, suspended: bool) -> Option<(String, String)> {
    if let Some(c) = pods::condition(v, "FailureTarget").filter(|c| c["status"] == "True") {
        let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
        return Some((text("reason"), text("message")));
    }
    if past_backoff {
        return Some((
            "BackoffLimitExceeded".into(),
            "Job has reached the specified backoff limit".into(),
        ));
    }
    if !suspended && deadline_left(v).is_some_and(|left| left <= 0) {
        return Some((
            "DeadlineExceeded".into(),
            "Job was active longer than specified deadline".into(),
        ));
    }
    None
}

/// Seconds left before `activeDeadlineSeconds` passes (`pastActiveDeadline`), if it is set
/// and the Job has started.
fn deadline_left(v: &Value) -> Option<i64> {
    let deadline = v["spec"]["activeDeadlineSeconds"].as_i64()?;
    let start = v["status"]["startTime"]
        .as_str()?
        .parse::<jiff::Timestamp>()
        .ok()?;
    Some(start.as_second() + deadline - now_unix())
}

/// How long replacements must still wait after the last failed Pod (`getRemainingTime`): the
/// back-off doubles from [`Tunables::job_backoff`](crate::Tunables) (10 s, as
/// kube-controller-manager) with each failure since the last success, capped at 10 minutes.
fn backoff_left(state: &State, owned: &[(Arc<Stored>, Value)]) -> Option<Duration> {
    let finished_at = |pv: &Value| {
        pv["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["state"]["terminated"]["finishedAt"].as_str())
            .filter_map(|t| t.parse::<jiff::Timestamp>().ok())
            .max()
    };
    let mut finished: Vec<(jiff::Timestamp, bool)> = owned
        .iter()
        .filter_map(|(_, pv)| match pv["status"]["phase"].as_str() {
            Some("Failed") => Some((finished_at(pv)?, false)),
            Some("Succeeded") => Some((finished_at(pv)?, true)),
            _ => None,
        })
        .collect();
    finished.sort();
    let failures = finished.iter().rev().take_while(|(_, ok)| !ok).count();
    let (last, _) = finished.last().filter(|(_, ok)| !ok)?;
    let base = state.tunables.job_backoff;
    let max = base.saturating_mul(60);
    let mut delay = base;
    for _ in 1..failures {
        delay = delay.saturating_mul(2).min(max);
    }
    let since = jiff::Timestamp::now().duration_since(*last);
    let since = Duration::try_from(since).unwrap_or_default();
    delay.checked_sub(since).filter(|d| !d.is_zero())
}

/// The `Suspended` condition (`ensureJobConditionStatus`): True `JobSuspended` while
/// suspended, False `JobResumed` once resumed (never added as False). Returns whether the Job
/// was just resumed.
fn ensure_suspended(s: &mut Map<String, Value>, suspended: bool, now: &str) -> bool {
    let (st, reason, msg) = if suspended {
        ("True", "JobSuspended", "Job suspended")
    } else {
        ("False", "JobResumed", "Job resumed")
    };
    let conds = s.entry("conditions").or_insert_with(|| json!([]));
    let Some(list) = conds.as_array_mut() else {
        return false;
    };
    let cond = json!({"type": "Suspended", "status": st, "reason": reason, "message": msg,
        "lastProbeTime": now, "lastTransitionTime": now});
    let changed = match list.iter_mut().find(|c| c["type"] == "Suspended") {
        Some(c) if c["status"] == st => false,
        Some(c) => {
            *c = cond;
            true
        }
        None if suspended => {
            list.push(cond);
            true
        }
        None => false,
    };
    if list.is_empty() {
        s.remove("conditions");
    }
    if changed && suspended {
        // MutableSchedulingDirectivesForSuspendedJobs (beta, on in 1.36).
        s.remove("startTime");
    }
    changed && !suspended
}

fn add_condition(s: &mut Map<String, Value>, t: &str, reason: &str, msg: &str, now: &str) {
    let conds = s
        .entry("conditions")
        .or_insert_with(|| json!([]))
        .as_array_mut();
    let Some(conds) = conds else { return };
    if conds.iter().any(|c| c["type"] == t) {
        return;
    }
    conds.push(
        json!({"type": t, "status": "True", "reason": reason, "message": msg,
        "lastProbeTime": now, "lastTransitionTime": now}),
    );
}

#[allow(clippy::too_many_arguments)]
fn create_missing(
    state: &State,
    job: &Stored,
    v: &Value,
    indexed: bool,
    completions: Option<i64>,
    parallelism: i64,
    succeeded: i64,
    done: &BTreeSet<i64>,
    active: &[&(Arc<Stored>, Value)],
) {
    let name = &job.key.name;
    let mut want = parallelism;
    if let Some(c) = completions {
        want = want.min(c - succeeded);
    }
    let mut missing = (want - active.len() as i64).max(0);
    if missing == 0 {
        return;
    }
    let running: BTreeSet<i64> = active.iter().filter_map(|(_, pv)| index_of(pv)).collect();
    let mut next = 0;
    while missing > 0 {
        let mut pod = pods::from_template(
            &v["spec"]["template"],
            v,
            &job.uid,
            "batch/v1",
            "Job",
            &format!("{name}-"),
        );
        pod["metadata"]["finalizers"] = json!([TRACKING]);
        if indexed {
            let Some(c) = completions else { return };
            while next < c && (done.contains(&next) || running.contains(&next)) {
                next += 1;
            }
            if next >= c {
                return;
            }
            set_index(&mut pod, name, next);
            next += 1;
        }
        pods::create(state, &job.key.ns, pod, WHO);
        missing -= 1;
    }
}

/// What upstream adds to an Indexed Job's Pod.
fn set_index(pod: &mut Value, job: &str, i: i64) {
    let idx = i.to_string();
    pod["metadata"]["generateName"] = json!(format!("{job}-{i}-"));
    pod["metadata"]["annotations"][INDEX] = json!(idx);
    pod["metadata"]["labels"][INDEX] = json!(idx);
    pod["spec"]["hostname"] = json!(format!("{job}-{i}"));
    let env = json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef":
        {"apiVersion": "v1", "fieldPath": format!("metadata.labels['{INDEX}']")}}});
    for list in ["initContainers", "containers"] {
        if let Some(cs) = pod["spec"][list].as_array_mut() {
            for c in cs {
                match c["env"].as_array_mut() {
                    Some(e) => e.push(env.clone()),
                    None => c["env"] = json!([env.clone()]),
                }
            }
        }
    }
}

/// `1,3-5` into {1, 3, 4, 5}.
fn parse_indexes(s: &str) -> BTreeSet<i64> {
    let mut out = BTreeSet::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(a) = part.parse() {
                    out.insert(a);
                }
            }
        }
    }
    out
}

/// Upstream's interval form: runs of three or more as `a-b`, pairs as `a,b`.
fn format_indexes(set: &BTreeSet<i64>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut it = set.iter().copied().peekable();
    while let Some(first) = it.next() {
        let mut last = first;
        while it.peek() == Some(&(last + 1)) {
            last += 1;
            it.next();
        }
        parts.push(match last - first {
            0 => first.to_string(),
            1 => format!("{first},{last}"),
            _ => format!("{first}-{last}"),
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes_round_trip_in_upstream_form() {
        let s: BTreeSet<i64> = [0, 1, 3, 4, 5, 7].into_iter().collect();
        assert_eq!(format_indexes(&s), "0,1,3-5,7");
        assert_eq!(parse_indexes("0,1,3-5,7"), s);
        assert_eq!(format_indexes(&BTreeSet::new()), "");
    }

    #[test]
    fn indexed_pods_carry_their_index() {
        let mut p = json!({"metadata": {}, "spec": {"containers": [{"name": "c"}]}});
        set_index(&mut p, "j", 3);
        assert_eq!(p["metadata"]["generateName"], "j-3-");
        assert_eq!(p["metadata"]["labels"][INDEX], "3");
        assert_eq!(p["spec"]["hostname"], "j-3");
        assert_eq!(
            p["spec"]["containers"][0]["env"][0]["name"],
            "JOB_COMPLETION_INDEX"
        );
    }
}
