//! Defaults of `batch/v1` (`pkg/apis/batch/v1/defaults.go`): Job and CronJob, with the
//! pod-template defaults. The Job's generated selector and labels are its strategy's
//! (`generate_job_selector`), applied on create once the uid is known.

use serde_json::{Value, json};

use super::core::pod_template;
use super::{obj_at, set};

/// `SetDefaults_Job`.
pub fn job(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if let Some(t) = spec.get_mut("template") {
        pod_template(t);
    }
    job_spec(spec);
    copy_template_labels(obj);
}

/// The job's labels come from its template's when it has none.
fn copy_template_labels(obj: &mut Value) {
    let labels = obj["spec"]["template"]["metadata"]["labels"].clone();
    if labels.as_object().is_some_and(|m| !m.is_empty())
        && obj["metadata"]["labels"]
            .as_object()
            .is_none_or(|m| m.is_empty())
        && let Some(meta) = obj_at(obj, "metadata")
    {
        meta["labels"] = labels;
    }
}

fn job_spec(spec: &mut Value) {
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec["completions"] = json!(1);
    }
    set(spec, "parallelism", json!(1));
    let backoff = if spec
        .get("backoffLimitPerIndex")
        .is_some_and(|v| !v.is_null())
    {
        i64::from(i32::MAX)
    } else {
        6
    };
    set(spec, "backoffLimit", json!(backoff));
    set(spec, "completionMode", json!("NonIndexed"));
    set(spec, "suspend", json!(false));
    let has_failure_policy = spec.get("podFailurePolicy").is_some_and(|v| !v.is_null());
    set(
        spec,
        "podReplacementPolicy",
        json!(if has_failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        }),
    );
    set(spec, "manualSelector", json!(false));
}

/// The Job strategy's generated selector (`generateSelector`): unless `manualSelector` is true,
/// the selector is the job's uid and the template carries the uid and job-name labels.
pub fn generate_job_selector(obj: &mut Value) {
    if obj["spec"]["manualSelector"] == json!(true) || !obj["spec"].is_object() {
        return;
    }
    let uid = obj["metadata"]["uid"].clone();
    let name = obj["metadata"]["name"].clone();
    let Some(t) = obj_at(&mut obj["spec"], "template") else {
        return;
    };
    if let Some(meta) = obj_at(t, "metadata")
        && let Some(labels) = obj_at(meta, "labels")
    {
        for (k, v) in [
            ("batch.kubernetes.io/controller-uid", &uid),
            ("batch.kubernetes.io/job-name", &name),
            ("controller-uid", &uid),
            ("job-name", &name),
        ] {
            set(labels, k, v.clone());
        }
    }
    if obj["spec"]["selector"].is_null() {
        obj["spec"]["selector"] =
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    }
    copy_template_labels(obj);
}

/// `SetDefaults_CronJob`, and the pod-template defaults inside its job template.
pub fn cron_job(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    set(spec, "concurrencyPolicy", json!("Allow"));
    set(spec, "suspend", json!(false));
    set(spec, "successfulJobsHistoryLimit", json!(3));
    set(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(jt) = spec.get_mut("jobTemplate").filter(|j| j.is_object()) {
        obj_at(jt, "metadata");
        if let Some(js) = jt.get_mut("spec")
            && let Some(t) = js.get_mut("template")
        {
            pod_template(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job_obj() -> Value {
        json!({"metadata": {"name": "j", "uid": "u1"}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
    }

    #[test]
    fn job_defaults() {
        let mut j = job_obj();
        job(&mut j);
        let s = &j["spec"];
        for (k, v) in [
            ("completions", json!(1)),
            ("parallelism", json!(1)),
            ("backoffLimit", json!(6)),
            ("completionMode", json!("NonIndexed")),
            ("suspend", json!(false)),
            ("podReplacementPolicy", json!("TerminatingOrFailed")),
            ("manualSelector", json!(false)),
        ] {
            assert_eq!(s[k], v, "{k}");
        }
        let mut j = job_obj();
        j["spec"]["parallelism"] = json!(3);
        job(&mut j);
        assert!(j["spec"].get("completions").is_none());
    }

    #[test]
    fn job_selector_is_generated_and_labels_follow_the_template() {
        let mut j = job_obj();
        job(&mut j);
        generate_job_selector(&mut j);
        assert_eq!(
            j["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}})
        );
        assert_eq!(j["spec"]["template"]["metadata"]["labels"]["job-name"], "j");
        assert_eq!(j["metadata"]["labels"]["controller-uid"], "u1");
        let mut m = job_obj();
        m["spec"]["manualSelector"] = json!(true);
        generate_job_selector(&mut m);
        assert!(m["spec"].get("selector").is_none());
    }

    #[test]
    fn cron_job_defaults_do_not_include_job_defaults() {
        let mut c = json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}}});
        cron_job(&mut c);
        let s = &c["spec"];
        assert_eq!(s["concurrencyPolicy"], "Allow");
        assert_eq!(s["suspend"], false);
        assert_eq!(s["successfulJobsHistoryLimit"], 3);
        assert_eq!(s["failedJobsHistoryLimit"], 1);
        assert_eq!(s["jobTemplate"]["metadata"], json!({}));
        assert_eq!(s["jobTemplate"]["spec"]["template"]["metadata"], json!({}));
        assert!(s["jobTemplate"]["spec"].get("backoffLimit").is_none());
    }
}
