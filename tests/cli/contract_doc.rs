//! docs/hook-contract.md says what the engine really sends and accepts.
//!
//! Each request example (a ```json block after `<!-- contract-request: CONTROLLER HOOK -->`) is
//! compared with the requests `kubectl meta dev --record` records while running the document's
//! controllers (docs/hook-contract/) on a sandbox: its set of field paths must be the set of
//! one real request of that controller and hook. The paths are the envelope's fields, the map
//! keys literally (`ConfigMap.v1`, `Deployment.apps/v1`, `default/shop`: the keys' form), and
//! every embedded Kubernetes object's top-level and `metadata` fields (their deeper contents
//! are the API server's, shortened in the document). A field the engine sends that the example
//! lacks, or a documented field it does not send, fails, naming the example's line. Each
//! answer example (`<!-- contract-answer: KIND HOOK -->`) must pass the engine's strict (v2)
//! decoding.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject};
use kubectl_meta::engine::plan::hookapi::{self, Version};
use serde_json::Value;

use crate::common::cli::{Background, ar, kc, meta, repo};
use crate::common::engine::core_ar;
use crate::common::{self, TIMEOUT};

/// One JSON example of the document.
struct Example {
    /// 1-based line of the example's marker.
    line: usize,
    /// `request` or `answer`.
    role: String,
    /// The controller's name (requests) or kind (answers).
    subject: String,
    /// The hook.
    hook: String,
    /// The JSON.
    body: Value,
}

/// The marked examples of `doc` (a marker line, then a ```json fence).
fn examples(doc: &str) -> Vec<Example> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line
            .trim()
            .strip_prefix("<!-- contract-")
            .and_then(|r| r.strip_suffix("-->"))
        else {
            continue;
        };
        let (role, args) = rest.split_once(':').expect("marker: ROLE: SUBJECT HOOK");
        let args: Vec<&str> = args.split_whitespace().collect();
        assert_eq!(args.len(), 2, "line {}: marker needs SUBJECT HOOK", i + 1);
        assert_eq!(
            lines.get(i + 1).map(|l| l.trim()),
            Some("```json"),
            "line {}: the marker must be followed by a ```json block",
            i + 1
        );
        let end = (i + 2..lines.len())
            .find(|&j| lines[j].trim() == "```")
            .unwrap_or_else(|| panic!("line {}: unterminated ```json block", i + 1));
        let text = lines[i + 2..end].join("\n");
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("line {}: the example is not JSON: {e}", i + 1));
        out.push(Example {
            line: i + 1,
            role: role.to_string(),
            subject: args[0].to_string(),
            hook: args[1].to_string(),
            body,
        });
    }
    out
}

/// A JSON object that is a Kubernetes object (apiVersion, kind, metadata).
fn is_object(v: &Value) -> bool {
    v.get("apiVersion").is_some_and(Value::is_string)
        && v.get("kind").is_some_and(Value::is_string)
        && v.get("metadata").is_some_and(Value::is_object)
}

/// The field paths of a request (see the module doc): `children["ConfigMap.v1"].a.metadata.uid`.
fn paths(v: &Value) -> BTreeSet<String> {
    fn walk(v: &Value, at: &str, out: &mut BTreeSet<String>) {
        let step = |k: &str| {
            if k.chars().all(|c| c.is_ascii_alphanumeric()) {
                if at.is_empty() {
                    k.to_string()
                } else {
                    format!("{at}.{k}")
                }
            } else {
                format!("{at}[{k:?}]")
            }
        };
        match v {
            Value::Object(m) if !at.is_empty() && is_object(v) => {
                for k in m.keys() {
                    out.insert(step(k));
                }
                for k in v["metadata"].as_object().into_iter().flat_map(|m| m.keys()) {
                    out.insert(format!("{}.{k}", step("metadata")));
                }
            }
            Value::Object(m) => {
                for (k, x) in m {
                    let p = step(k);
                    out.insert(p.clone());
                    walk(x, &p, out);
                }
            }
            Value::Array(items) => {
                for x in items {
                    walk(x, &format!("{at}[]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(v, "", &mut out);
    out
}

/// The recorded requests under `dir`, by (controller, hook).
fn recorded(dir: &Path) -> BTreeMap<(String, String), Vec<Value>> {
    let mut out: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            // A case being written may be cut short: read it again on the next poll.
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            let Ok(case) = serde_saphyr::from_str::<Value>(&text) else {
                continue;
            };
            if let (Some(c), Some(h)) = (case["controller"].as_str(), case["hook"].as_str()) {
                out.entry((c.to_string(), h.to_string()))
                    .or_default()
                    .push(case["request"].clone());
            }
        }
    }
    out
}

/// `paths` without those below another of them (a missing map names its key, not every field).
fn roots(paths: Vec<String>) -> Vec<String> {
    let below = |p: &str, q: &str| {
        p.len() > q.len() && p.starts_with(q) && matches!(p.as_bytes()[q.len()], b'.' | b'[')
    };
    paths
        .iter()
        .filter(|p| !paths.iter().any(|q| below(p, q)))
        .cloned()
        .collect()
}

/// Why `example` matches no real request (None: it matches one): against the closest one, the
/// paths only the engine sends and those only the document has.
fn mismatch(example: &Example, real: &[Value]) -> Option<String> {
    let want = paths(&example.body);
    let closest = real
        .iter()
        .map(|r| {
            let got = paths(r);
            let missing = roots(got.difference(&want).cloned().collect());
            let extra = roots(want.difference(&got).cloned().collect());
            (missing.len() + extra.len(), missing, extra)
        })
        .min_by_key(|(n, _, _)| *n);
    match closest {
        Some((0, _, _)) => None,
        None => Some(format!(
            "docs/hook-contract.md:{}: no {} request of {} was recorded",
            example.line, example.hook, example.subject
        )),
        Some((_, missing, extra)) => Some(format!(
            "docs/hook-contract.md:{}: the {} request example of {} differs from every real one \
             ({} recorded); closest: the engine sends {missing:?} which the example lacks, the \
             example has {extra:?} which the engine does not send",
            example.line,
            example.hook,
            example.subject,
            real.len()
        )),
    }
}

/// Wait until every example in `which` matches a recorded request (after [`TIMEOUT`] x 2:
/// fail with what differs).
async fn wait_matching(rec: &Path, which: &[&Example], dev: &Background) {
    let deadline = tokio::time::Instant::now() + TIMEOUT * 2;
    loop {
        let real = recorded(rec);
        let problems: Vec<String> = which
            .iter()
            .filter_map(|e| {
                let key = (e.subject.clone(), e.hook.clone());
                mismatch(e, real.get(&key).map(Vec::as_slice).unwrap_or_default())
            })
            .collect();
        if problems.is_empty() {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("{}\n\ndev's stderr:\n{}", problems.join("\n"), dev.errors());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The answer examples pass the engine's strict decoding.
fn check_answer(e: &Example) {
    let v2 = Version::V2;
    let decoded = match (e.subject.as_str(), e.hook.as_str()) {
        ("CompositeController", "sync" | "finalize") => {
            hookapi::decode_sync(&e.hook, v2, &e.body).map(drop)
        }
        ("DecoratorController", "sync" | "finalize") => {
            hookapi::decode_decorator(&e.hook, v2, &e.body).map(drop)
        }
        (_, "customize") => hookapi::decode_customize(v2, &e.body).map(drop),
        ("MapController", "map" | "tombstone") => {
            hookapi::decode_map(&e.hook, v2, &e.body).map(drop)
        }
        other => panic!("docs/hook-contract.md:{}: unknown answer {other:?}", e.line),
    };
    if let Err(err) = decoded {
        panic!(
            "docs/hook-contract.md:{}: the engine refuses the {} {} answer example: {err}",
            e.line, e.subject, e.hook
        );
    }
}

#[test]
fn contract_doc_paths_are_checked_by_form() {
    // The comparison itself: the keys' form counts, values do not, objects' insides are cut.
    let a = serde_json::json!({"children": {"Deployment.apps/v1": {"web": {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1}}}}, "finalizing": false});
    let mut b = a.clone();
    b["children"]["Deployment.apps/v1"]["web"]["spec"] = serde_json::json!({"paused": true});
    b["finalizing"] = serde_json::json!(true);
    assert_eq!(paths(&a), paths(&b));
    let wrong_key = serde_json::json!({"children": {"Deployment.v1": {"web": {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {}}}}, "finalizing": false});
    assert_ne!(paths(&a), paths(&wrong_key));
    let mut no_uid = a.clone();
    no_uid["children"]["Deployment.apps/v1"]["web"]["metadata"]["uid"] = serde_json::json!("u");
    assert_ne!(paths(&a), paths(&no_uid));
    assert!(paths(&a).contains("children"));
    assert!(paths(&a).contains("children[\"Deployment.apps/v1\"].web.metadata.name"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contract_doc_examples_are_what_the_engine_sends() {
    let doc = std::fs::read_to_string(repo().join("docs/hook-contract.md")).unwrap();
    let all = examples(&doc);
    for e in all.iter().filter(|e| e.role == "answer") {
        check_answer(e);
    }
    let requests: Vec<&Example> = all.iter().filter(|e| e.role == "request").collect();
    let documented: BTreeSet<(&str, &str)> = requests
        .iter()
        .map(|e| (e.subject.as_str(), e.hook.as_str()))
        .collect();
    let expected: BTreeSet<(&str, &str)> = [
        ("website-controller", "sync"),
        ("website-controller", "finalize"),
        ("website-controller", "customize"),
        ("expose-controller", "sync"),
        ("expose-controller", "finalize"),
        ("configbackup-controller", "map"),
        ("configbackup-controller", "tombstone"),
    ]
    .into();
    assert_eq!(
        documented, expected,
        "docs/hook-contract.md: one request example per controller and hook"
    );
    let answers: BTreeSet<(&str, &str)> = all
        .iter()
        .filter(|e| e.role == "answer")
        .map(|e| (e.subject.as_str(), e.hook.as_str()))
        .collect();
    assert_eq!(
        answers.len(),
        7,
        "an answer example per request: {answers:?}"
    );

    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let rec = home.path().join("requests");
    let dir = |d: &str| {
        repo()
            .join("docs/hook-contract")
            .join(d)
            .display()
            .to_string()
    };
    let (composite, decorator, map) = (dir("composite"), dir("decorator"), dir("map"));
    let rec_arg = rec.display().to_string();
    let dev = Background::start(meta(
        home.path(),
        &[
            "dev",
            "--kubeconfig",
            &kc(&sb),
            "--apply",
            "-f",
            &composite,
            "-f",
            &decorator,
            "-f",
            &map,
            "--no-tui",
            "--no-watch",
            "--record",
            &rec_arg,
        ],
    ));
    let (first, teardown): (Vec<&Example>, Vec<&Example>) = requests
        .iter()
        .partition(|e| !matches!(e.hook.as_str(), "finalize" | "tombstone"));
    wait_matching(&rec, &first, &dev).await;

    // Delete what the finalize and tombstone hooks are about.
    let dp = DeleteParams::default();
    let website = ar("demo.example.com", "Website", "websites");
    let website = kube::discovery::ApiResource {
        version: "v1alpha1".into(),
        api_version: "demo.example.com/v1alpha1".into(),
        ..website
    };
    let deployments = kube::discovery::ApiResource {
        group: "apps".into(),
        version: "v1".into(),
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        plural: "deployments".into(),
    };
    for (res, name) in [
        (website, "mysite"),
        (deployments, "shop"),
        (core_ar("ConfigMap", "configmaps"), "settings"),
    ] {
        let api: Api<DynamicObject> = Api::namespaced_with(sb.client.clone(), "default", &res);
        api.delete(name, &dp).await.expect("delete");
    }
    wait_matching(&rec, &teardown, &dev).await;
    let (status, stderr) = dev.interrupt_status().await;
    assert!(status.success(), "{stderr}");
}
