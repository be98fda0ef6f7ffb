//! `kubectl meta dryrun`, the real binary against an in-process sandbox with real hooks (HTTP
//! on 127.0.0.1, exec programs): the printed plan (colors off), the JSON plan, the exit code,
//! and that nothing was written (the sandbox's global resourceVersion does not move).

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use crate::common::cli::*;
use crate::common::engine::{
    GROUP, HookServer, Reply, core_ar, install_crd, parent_ar, related_seen, sync_fn,
};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

/// Create `obj` (of `ar`) in the sandbox; returns it as stored.
async fn create(sb: &common::TestSandbox, ar: &ApiResource, obj: Value) -> Value {
    let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
    let api: Api<DynamicObject> = match &ns {
        Some(ns) => Api::namespaced_with(sb.client.clone(), ns, ar),
        None => Api::all_with(sb.client.clone(), ar),
    };
    let o: DynamicObject = serde_json::from_value(obj).expect("object");
    serde_json::to_value(
        api.create(&PostParams::default(), &o)
            .await
            .expect("create"),
    )
    .expect("json")
}

/// Install the test CRD of `kind` and create parent `default/<name>` with `spec`.
async fn new_parent(sb: &common::TestSandbox, kind: &str, name: &str, spec: Value) -> Value {
    install_crd(&sb.client, kind, true).await;
    create(
        sb,
        &parent_ar(kind),
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": kind,
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}),
    )
    .await
}

fn owner(parent: &Value) -> Value {
    json!([{"apiVersion": parent["apiVersion"], "kind": parent["kind"],
        "name": parent["metadata"]["name"], "uid": parent["metadata"]["uid"],
        "controller": true, "blockOwnerDeletion": true}])
}

fn write_def(dir: &Path, def: &Value) -> String {
    let path = dir.join("controller.json");
    std::fs::write(&path, serde_json::to_string_pretty(def).unwrap()).unwrap();
    path.display().to_string()
}

/// `(action, type, namespace/name)` of every object of a JSON plan.
fn actions(doc: &Value) -> BTreeSet<(String, String, String)> {
    doc["parents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["objects"].as_array().unwrap().iter())
        .map(|o| {
            (
                o["action"].as_str().unwrap().to_string(),
                o["type"].as_str().unwrap().to_string(),
                format!(
                    "{}/{}",
                    o["namespace"].as_str().unwrap_or(""),
                    o["name"].as_str().unwrap()
                ),
            )
        })
        .collect()
}

fn cm(name: &str, labels: Value, data: Value, owners: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "ownerReferences": owners},
        "data": data})
}

/// A parent `p` (kind Thing, selector app=a) with: a ConfigMap to update (InPlace), one to
/// delete, an orphan to adopt, an owned one to release, a Secret to update (masked), and a
/// ServiceAccount whose annotation changed (Recreate). The hook wants `cm-new` created too.
async fn composite_world(sb: &common::TestSandbox, recreate: bool) -> Value {
    install_crd(&sb.client, "Thing", true).await;
    let parent = create(
        sb,
        &parent_ar("Thing"),
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Thing",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "value": "new"}}),
    )
    .await;
    let cms = core_ar("ConfigMap", "configmaps");
    let own = owner(&parent);
    for (name, labels, data, owners) in [
        (
            "cm-update",
            json!({"app": "a"}),
            json!({"k": "old"}),
            own.clone(),
        ),
        (
            "cm-delete",
            json!({"app": "a"}),
            json!({"k": "x"}),
            own.clone(),
        ),
        (
            "cm-adopt",
            json!({"app": "a"}),
            json!({"k": "new"}),
            json!([]),
        ),
        (
            "cm-release",
            json!({"app": "b"}),
            json!({"k": "x"}),
            own.clone(),
        ),
    ] {
        create(sb, &cms, cm(name, labels, data, owners)).await;
    }
    create(
        sb,
        &core_ar("Secret", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "default", "labels": {"app": "a"}, "ownerReferences": own},
            "data": {"password": "b2xk", "user": "YWRtaW4="}}),
    )
    .await;
    if recreate {
        create(
            sb,
            &core_ar("ServiceAccount", "serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "sa", "namespace": "default", "labels": {"app": "a"},
                    "annotations": {"note": "old"}, "ownerReferences": own}}),
        )
        .await;
    }
    parent
}

fn composite_answer(recreate: bool) -> impl Fn(&Value) -> Value + Send + Sync + 'static {
    move |req: &Value| {
        let value = req["parent"]["spec"]["value"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let mut children = vec![
            cm(
                "cm-new",
                json!({"app": "a"}),
                json!({"k": value}),
                Value::Null,
            ),
            cm(
                "cm-update",
                json!({"app": "a"}),
                json!({"k": value}),
                Value::Null,
            ),
            cm(
                "cm-adopt",
                json!({"app": "a"}),
                json!({"k": "new"}),
                Value::Null,
            ),
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "creds", "labels": {"app": "a"}},
                "data": {"password": "bmV3", "user": "YWRtaW4="}}),
        ];
        if recreate {
            children.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "sa", "labels": {"app": "a"}, "annotations": {"note": "new"}}}));
        }
        for c in &mut children {
            if let Some(m) = c["metadata"].as_object_mut() {
                m.remove("ownerReferences");
                m.remove("namespace");
            }
        }
        json!({"status": {"ready": true}, "children": children, "resyncAfterSeconds": 30})
    }
}

fn composite_def(hooks: &HookServer, recreate: bool) -> Value {
    let mut children = vec![
        json!({"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}),
        json!({"apiVersion": "v1", "resource": "secrets", "updateStrategy": {"method": "InPlace"}}),
    ];
    if recreate {
        children.push(json!({"apiVersion": "v1", "resource": "serviceaccounts",
            "updateStrategy": {"method": "Recreate"}}));
    }
    common::engine::composite(
        "things",
        "Thing",
        Value::Array(children),
        json!({"sync": {"webhook": {"url": hooks.url("sync")}}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_plan_creates_updates_recreates_deletes_adopts_and_releases_writing_nothing() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    composite_world(&sb, true).await;
    let hooks = HookServer::start(sync_fn(composite_answer(true))).await;
    let file = write_def(home.path(), &composite_def(&hooks, true));
    let before = global_rv(&sb).await;

    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file]).await;
    assert_eq!(
        code, 1,
        "changes found exits 1\nstdout:\n{out}\nstderr:\n{err}"
    );
    for line in [
        "CompositeController things: Thing default/p",
        "adopt ConfigMap default/cm-adopt (selector matches)",
        "release ConfigMap default/cm-release (selector no longer matches)",
        "- delete ConfigMap default/cm-delete (not desired)",
        "-/+ replace ServiceAccount default/sa (changed: metadata.annotations.note)",
        "  metadata.annotations.note: \"old\" -> \"new\"",
        "+ create ConfigMap default/cm-new (desired, absent)",
        "~ update ConfigMap default/cm-update (changed: data.k)",
        "  -  k: old",
        "  +  k: new",
        "~ update Secret default/creds (changed: data.password)",
        "  +  password: (changed)",
        "~ status Thing default/p",
        "  +  ready: true",
        "  resyncAfterSeconds: 30 (the next sync comes after 30s)",
        "Plan: 1 to create, 3 to update, 2 to delete (1 replaced), 1 to adopt, 1 to release; status changes",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    // Secret values never show; noise is stripped.
    assert!(!out.contains("bmV3") && !out.contains("b2xk"), "{out}");
    assert!(
        !out.contains("resourceVersion") && !out.contains("managedFields"),
        "{out}"
    );
    assert!(
        !out.lines()
            .any(|l| l.starts_with("  ") && l.contains("last-applied-configuration:")),
        "the last-applied annotation is noise: {out}"
    );
    assert!(!out.contains('\x1b'), "colors off: {out:?}");
    // The diff context is 3 lines by default; -C 0 shows only the changed lines.
    let (_, narrow, _) = dryrun(&sb, home.path(), &["-f", &file, "-C", "0"]).await;
    assert!(narrow.lines().count() < out.lines().count(), "{narrow}");

    let (code, json_out, err) = dryrun(&sb, home.path(), &["-f", &file, "-o", "json"]).await;
    assert_eq!(code, 1, "{err}");
    let doc: Value = serde_json::from_str(&json_out).expect("stdout is one JSON document");
    let got = actions(&doc);
    let want: BTreeSet<(String, String, String)> = [
        ("adopt", "ConfigMap.v1", "default/cm-adopt"),
        ("release", "ConfigMap.v1", "default/cm-release"),
        ("delete", "ConfigMap.v1", "default/cm-delete"),
        ("recreate", "ServiceAccount.v1", "default/sa"),
        ("create", "ConfigMap.v1", "default/cm-new"),
        ("update", "ConfigMap.v1", "default/cm-update"),
        ("update", "ConfigMap.v1", "default/cm-adopt"),
        ("update", "Secret.v1", "default/creds"),
        ("status", "Thing.test.kubectl-meta.dev/v1", "default/p"),
    ]
    .into_iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(got, want, "{json_out}");
    assert_eq!(doc["summary"]["create"], json!(1));
    assert_eq!(doc["summary"]["changes"], json!(true));
    assert_eq!(doc["parents"][0]["resyncAfterSeconds"], json!(30.0));
    assert_eq!(doc["parents"][0]["status"]["ready"], json!(true));
    let secret = doc["parents"][0]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["type"] == "Secret.v1")
        .unwrap();
    assert_eq!(secret["planned"]["data"]["password"], json!("(changed)"));
    assert_eq!(secret["planned"]["data"]["user"], json!("(hidden)"));

    // --show-secrets shows the values.
    let (_, shown, _) = dryrun(&sb, home.path(), &["-f", &file, "--show-secrets"]).await;
    assert!(shown.contains("password: bmV3"), "{shown}");

    assert_eq!(global_rv(&sb).await, before, "dryrun wrote something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_plan_is_what_a_following_dev_once_does() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    composite_world(&sb, false).await;
    let hooks = HookServer::start(sync_fn(composite_answer(false))).await;
    let file = write_def(home.path(), &composite_def(&hooks, false));
    let before = global_rv(&sb).await;
    let (code, json_out, err) = dryrun(&sb, home.path(), &["-f", &file, "-o", "json"]).await;
    assert_eq!(code, 1, "{err}");
    assert_eq!(global_rv(&sb).await, before, "dryrun wrote something");
    let planned = actions(&serde_json::from_str(&json_out).unwrap());

    let kubeconfig = kc(&sb);
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kubeconfig,
            "dev",
            "--once",
            "-o",
            "json",
            "-f",
            &file,
        ],
    ))
    .await;
    let stdout = assert_ok(&out);
    let done: BTreeSet<(String, String, String)> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "action" && e["parent"] == "default/p")
        .map(|e| {
            (
                e["verb"].as_str().unwrap().to_string(),
                e["resource"].as_str().unwrap().to_string(),
                e["object"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(planned, done, "dryrun planned vs dev --once did:\n{stdout}");

    // Converged: nothing left to do, exit 0.
    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("Plan: 0 to create, 0 to update, 0 to delete, 0 to adopt, 0 to release\n"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalize_plan_for_a_terminating_parent() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    install_crd(&sb.client, "Thing", true).await;
    let finalizer = "metacontroller.io/compositecontroller-things";
    let parent = create(
        &sb,
        &parent_ar("Thing"),
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Thing",
            "metadata": {"name": "p", "namespace": "default", "finalizers": [finalizer]},
            "spec": {"selector": {"matchLabels": {"app": "a"}}}}),
    )
    .await;
    create(
        &sb,
        &core_ar("ConfigMap", "configmaps"),
        cm(
            "child",
            json!({"app": "a"}),
            json!({"k": "v"}),
            owner(&parent),
        ),
    )
    .await;
    Api::<DynamicObject>::namespaced_with(sb.client.clone(), "default", &parent_ar("Thing"))
        .delete("p", &DeleteParams::default())
        .await
        .expect("delete");
    let hooks = HookServer::start(sync_fn(|req| {
        assert_eq!(req["finalizing"], json!(true));
        json!({"children": [], "finalized": true})
    }))
    .await;
    let def = common::engine::composite(
        "things",
        "Thing",
        json!([{"apiVersion": "v1", "resource": "configmaps"}]),
        json!({"sync": {"webhook": {"url": hooks.url("sync")}},
            "finalize": {"webhook": {"url": hooks.url("finalize")}}}),
    );
    let file = write_def(home.path(), &def);
    let before = global_rv(&sb).await;
    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file, "default/p"]).await;
    assert_eq!(code, 1, "{out}\n{err}");
    for line in [
        "CompositeController things: Thing default/p (finalizing)",
        "- delete ConfigMap default/child (not desired)",
        &format!("~ finalizer Thing default/p (remove {finalizer})"),
        &format!("  -  - {finalizer}"),
        "Plan: 0 to create, 0 to update, 1 to delete, 0 to adopt, 0 to release; status changes, finalizer changes",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    assert_eq!(hooks.calls_of("finalize").len(), 1);
    assert!(hooks.calls_of("sync").is_empty());
    assert_eq!(global_rv(&sb).await, before, "dryrun wrote something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_hook_is_an_error_with_its_stderr_and_changes_nothing() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    exec_hook_controller(
        home.path(),
        "hello",
        "import sys\nsys.stderr.write('boom: cannot parse the parent\\n')\nsys.exit(3)\n",
    );
    let dir = home.path().display().to_string();
    let kubeconfig = kc(&sb);
    // The CRD and the sample first (dev --apply would write them; here kubectl does).
    let out = sb.kubectl(&["apply", "-f", &format!("{dir}/00-crd.yaml")]);
    assert!(out.status.success());
    common::wait_for("the CRD", common::TIMEOUT, || async {
        sb.kubectl(&["apply", "-f", &format!("{dir}/20-sample.yaml")])
            .status
            .success()
            .then_some(())
    })
    .await;
    let before = global_rv(&sb).await;
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kubeconfig,
            "dryrun",
            "-f",
            &format!("{dir}/10-controller.yaml"),
        ],
    ))
    .await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("sync(s) would fail (nothing was written)"),
        "{stderr}"
    );
    assert!(stderr.contains("sync hook failed"), "{stderr}");
    assert!(
        stderr.contains("boom: cannot parse the parent"),
        "stderr tail: {stderr}"
    );
    assert_eq!(global_rv(&sb).await, before, "dryrun wrote something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_dry_run_catches_a_validation_error_the_local_plan_cannot_see() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    install_crd(&sb.client, "Thing", true).await;
    create(
        &sb,
        &parent_ar("Thing"),
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Thing",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}}}),
    )
    .await;
    // A ConfigMap key with a space: valid JSON, refused by the API server's validation.
    let hooks = HookServer::start(sync_fn(|_| {
        json!({"children": [
            {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "ok", "labels": {"app": "a"}}, "data": {"k": "v"}},
            {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "bad", "labels": {"app": "a"}}, "data": {"not a key": "v"}}]})
    }))
    .await;
    let def = common::engine::composite(
        "things",
        "Thing",
        json!([{"apiVersion": "v1", "resource": "configmaps"}]),
        json!({"sync": {"webhook": {"url": hooks.url("sync")}}}),
    );
    let file = write_def(home.path(), &def);
    let before = global_rv(&sb).await;

    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file]).await;
    assert_eq!(code, 1, "the local plan sees nothing wrong: {out}\n{err}");
    assert!(out.contains("+ create ConfigMap default/bad"), "{out}");

    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file, "--server"]).await;
    assert_eq!(code, 4, "{out}\n{err}");
    assert!(
        out.contains("+ create ConfigMap default/ok (desired, absent)\n  server dry run: accepted"),
        "{out}"
    );
    assert!(
        out.contains(
            "+ create ConfigMap default/bad (desired, absent)\n  server dry run: rejected: "
        ),
        "{out}"
    );
    assert!(err.contains("not a key"), "{err}");
    assert!(err.contains("ConfigMap default/bad"), "{err}");
    assert_eq!(
        global_rv(&sb).await,
        before,
        "dryrun (--server) wrote something"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_key_with_a_new_output_and_a_detached_one() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    install_crd(&sb.client, "Fanout", true).await;
    let parent = create(
        &sb,
        &parent_ar("Fanout"),
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Fanout",
            "metadata": {"name": "f", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"role": "in"}}}}),
    )
    .await;
    let cms = core_ar("ConfigMap", "configmaps");
    create(
        &sb,
        &cms,
        cm("in-a", json!({"role": "in"}), json!({"x": "1"}), json!([])),
    )
    .await;
    create(
        &sb,
        &cms,
        cm("other", json!({"role": "no"}), json!({}), json!([])),
    )
    .await;
    // An output of a key whose input is gone.
    create(
        &sb,
        &core_ar("Secret", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "out-gone", "namespace": "default",
                "labels": {"metacontroller.k8s.io/map-key": "configmap-gone-0000000000000000"},
                "ownerReferences": owner(&parent)},
            "data": {"x": "MQ=="}}),
    )
    .await;
    let hooks = HookServer::start(sync_fn(|req| {
        let name = req["input"]["metadata"]["name"].as_str().unwrap_or("");
        json!({"outputs": [{"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("out-{name}")}, "stringData": {"x": "1"}}]})
    }))
    .await;
    let def = json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "MapController",
        "metadata": {"name": "fanout"},
        "spec": {
            "parentResource": {"apiVersion": format!("{GROUP}/v1"), "resource": "fanouts"},
            "inputResources": [{"apiVersion": "v1", "resource": "configmaps"}],
            "outputResources": [{"apiVersion": "v1", "resource": "secrets"}],
            "hooks": {"map": {"webhook": {"url": hooks.url("map")}}}}});
    let file = write_def(home.path(), &def);
    let before = global_rv(&sb).await;

    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file]).await;
    assert_eq!(code, 1, "{out}\n{err}");
    for line in [
        "MapController fanout: Fanout default/f map key configmap-in-a-",
        "(input v1/ConfigMap/default/in-a)",
        "+ create Secret default/out-in-a (desired, absent)",
        "MapController fanout: Fanout default/f map key configmap-gone-0000000000000000 (detached: its input is gone)",
        "- delete Secret default/out-gone (detached; not kept by the tombstone hook)",
        "~ status Fanout default/f",
        "Plan: 1 to create, 0 to update, 1 to delete, 0 to adopt, 0 to release; status changes",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    // The output's values are masked, its engine label and annotation shown.
    assert!(out.contains("x: (added)"), "{out}");
    assert!(
        out.contains("metacontroller.k8s.io/map-input: v1/ConfigMap/default/in-a"),
        "{out}"
    );
    assert_eq!(hooks.calls_of("map").len(), 1, "one input, one map call");

    // One key.
    let (code, json_out, err) = dryrun(
        &sb,
        home.path(),
        &[
            "-f",
            &file,
            "default/f",
            "--key",
            "configmap-gone-0000000000000000",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(code, 1, "{err}");
    let doc: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(doc["parents"].as_array().unwrap().len(), 1, "{json_out}");
    assert_eq!(
        doc["parents"][0]["mapKey"],
        json!("configmap-gone-0000000000000000")
    );
    assert_eq!(doc["parents"][0]["mapInput"], Value::Null);
    assert_eq!(
        actions(&doc),
        [(
            "delete".to_string(),
            "Secret.v1".to_string(),
            "default/out-gone".to_string()
        )]
        .into_iter()
        .collect()
    );
    let (code, _, err) = dryrun(
        &sb,
        home.path(),
        &["-f", &file, "default/f", "--key", "nope"],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--key nope: no such map key"), "{err}");
    assert_eq!(global_rv(&sb).await, before, "dryrun wrote something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decorator_target_gets_labels_an_attachment_and_a_finalizer() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let cms = core_ar("ConfigMap", "configmaps");
    create(
        &sb,
        &cms,
        cm("web", json!({"decorate": "yes"}), json!({}), json!([])),
    )
    .await;
    create(&sb, &cms, cm("plain", json!({}), json!({}), json!([]))).await;
    let hooks = HookServer::start(sync_fn(|req| {
        let name = req["object"]["metadata"]["name"].as_str().unwrap_or("");
        json!({"labels": {"decorated": "true"}, "annotations": {"by": "deco"},
            "attachments": [{"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("{name}-token")}, "stringData": {"t": "s3cr3t"}}]})
    }))
    .await;
    let def = json!({
        "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
        "metadata": {"name": "deco"},
        "spec": {
            "resources": [{"apiVersion": "v1", "resource": "configmaps",
                "labelSelector": {"matchLabels": {"decorate": "yes"}}}],
            "attachments": [{"apiVersion": "v1", "resource": "secrets"}],
            "hooks": {"sync": {"webhook": {"url": hooks.url("sync")}},
                "finalize": {"webhook": {"url": hooks.url("finalize")}}}}});
    let file = write_def(home.path(), &def);
    let before = global_rv(&sb).await;
    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file]).await;
    assert_eq!(code, 1, "{out}\n{err}");
    for line in [
        "DecoratorController deco: ConfigMap default/web",
        "~ metadata ConfigMap default/web (labels decorated=true; annotations by=deco)",
        "  +    decorated: \"true\"",
        "~ finalizer ConfigMap default/web (add metacontroller.io/decoratorcontroller-deco)",
        "+ create Secret default/web-token (desired, absent)",
        "  +    metacontroller.k8s.io/decorator-controller: deco",
        "  +  t: (added)",
        "Plan: 1 to create, 0 to update, 0 to delete, 0 to adopt, 0 to release; finalizer changes, label/annotation changes",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    assert!(!out.contains("plain"), "not a target: {out}");
    assert!(!out.contains("s3cr3t"), "{out}");
    assert_eq!(global_rv(&sb).await, before, "dryrun wrote something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_flags_are_refused_before_anything_starts() {
    let home = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["dryrun"], "nothing to plan"),
        (vec!["dryrun", "-f", "/nonexistent"], "no such file"),
        (
            vec!["dryrun", "-f", "/", "--hook-base-url", "ftp://x"],
            "--hook-base-url ftp://x",
        ),
        (
            vec!["dryrun", "-f", "/", "--key", "k"],
            "exactly one PARENT",
        ),
        (vec!["dryrun", "-f", "/", "a/b/c"], "NAMESPACE/NAME or NAME"),
        (
            vec!["dryrun", "-f", "/", "--color", "sometimes"],
            "invalid value",
        ),
    ] {
        let out = run(meta(home.path(), &args)).await;
        let stderr = assert_fails(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_shows_how_another_hook_version_answers_the_same_requests() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    composite_world(&sb, false).await;
    let current = HookServer::start(sync_fn(composite_answer(false))).await;
    let previous = HookServer::start(sync_fn(|req| {
        let mut answer = composite_answer(false)(req);
        answer["children"][1]["data"]["k"] = json!("old");
        answer["status"] = json!({"ready": false});
        answer
    }))
    .await;
    let file = write_def(home.path(), &composite_def(&current, false));
    let other = home.path().join("previous");
    std::fs::create_dir(&other).unwrap();
    let other_file = write_def(&other, &composite_def(&previous, false));
    let before = global_rv(&sb).await;
    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file, "--against", &other_file]).await;
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains(
            "--against things default/p: sync hook answers differently (against -> current):"
        ),
        "{err}"
    );
    assert!(err.contains("status.ready: false -> true"), "{err}");
    assert!(err.contains("data.k: \"old\" -> \"new\""), "{err}");
    // The plan shown is the current version's, and both hooks got the same request.
    assert!(
        out.contains("~ update ConfigMap default/cm-update (changed: data.k)"),
        "{out}"
    );
    let (a, b) = (current.calls_of("sync"), previous.calls_of("sync"));
    assert_eq!((a.len(), b.len()), (1, 1));
    assert_eq!(a[0].request, b[0].request);
    assert_eq!(global_rv(&sb).await, before, "dryrun wrote something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_plans_only_the_matching_controller_definitions() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    composite_world(&sb, false).await;
    let hooks = HookServer::start(sync_fn(composite_answer(false))).await;
    let mut def = composite_def(&hooks, false);
    def["metadata"]["labels"] = json!({"team": "a"});
    let file = write_def(home.path(), &def);
    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file, "-l", "team=a"]).await;
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("CompositeController things"), "{out}");
    let (code, _, err) = dryrun(&sb, home.path(), &["-f", &file, "-l", "team=b"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("matches none of the 1 controller definition(s)"),
        "{err}"
    );
    let (code, _, err) = dryrun(&sb, home.path(), &["-f", &file, "-l", "team in (a"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not a valid label selector"), "{err}");
    assert!(
        hooks.calls_of("sync").len() == 1,
        "only the matching run calls the hook"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_shows_the_order_and_the_next_child() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let spec = json!({"selector": {"matchLabels": {"app": "r"}}, "value": "v1"});
    new_parent(&sb, "Roll", "r", spec).await;
    // Three ConfigMaps, listed in reverse name order (the rollout goes in hook order).
    let hooks = HookServer::start(sync_fn(|req| {
        let value = req["parent"]["spec"]["value"].as_str().unwrap_or("");
        let children: Vec<Value> = (0..3)
            .rev()
            .map(|i| {
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("r-{i}"), "labels": {"app": "r"}},
                    "data": {"v": value}})
            })
            .collect();
        json!({"children": children})
    }))
    .await;
    let def = common::engine::composite(
        "rolls",
        "Roll",
        json!([{"apiVersion": "v1", "resource": "configmaps",
            "updateStrategy": {"method": "RollingInPlace"}}]),
        json!({"sync": {"webhook": {"url": hooks.url("sync")}}}),
    );
    let file = write_def(home.path(), &def);
    let kubeconfig = kc(&sb);
    assert_ok(
        &run(meta(
            home.path(),
            &["--kubeconfig", &kubeconfig, "dev", "--once", "-f", &file],
        ))
        .await,
    );
    // A new revision of the parent: the rollout starts with the first child in hook order.
    let out = sb.kubectl(&[
        "patch",
        "rolls.test.kubectl-meta.dev",
        "r",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"value":"v2"}}"#,
    ]);
    assert!(out.status.success(), "{out:?}");
    let before = global_rv(&sb).await;
    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file]).await;
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("  rollout: "), "{out}");
    let update = out
        .lines()
        .find(|l| l.starts_with("~ update ConfigMap default/r-2"))
        .unwrap_or_else(|| panic!("r-2 is rolled first:\n{out}"));
    assert!(update.contains("rollout 1/3 of revision"), "{update}");
    for waiting in [
        "w waiting ConfigMap default/r-1",
        "w waiting ConfigMap default/r-0",
    ] {
        assert!(out.contains(waiting), "missing {waiting:?}:\n{out}");
    }
    assert!(
        out.contains("+ create ControllerRevision default/r-"),
        "{out}"
    );
    assert!(
        out.contains(
            "Plan: 1 to create, 2 to update, 0 to delete, 0 to adopt, 0 to release; status changes"
        ),
        "{out}"
    );
    // The old revision gives up the child being rolled: the diff is against the stored
    // revision (its claims change), not the whole object shown as added.
    let (code, json_out, err) = dryrun(&sb, home.path(), &["-f", &file, "-o", "json"]).await;
    assert_eq!(code, 1, "{json_out}\n{err}");
    let doc: Value = serde_json::from_str(&json_out).unwrap();
    let objects = doc["parents"][0]["objects"].as_array().unwrap();
    let revision = objects
        .iter()
        .find(|o| {
            o["action"] == "update"
                && o["type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("ControllerRevision."))
        })
        .unwrap_or_else(|| panic!("a ControllerRevision update:\n{json_out}"));
    assert_eq!(
        revision["live"]["metadata"],
        revision["planned"]["metadata"]
    );
    assert_ne!(
        revision["live"]["children"],
        revision["planned"]["children"]
    );
    assert_eq!(
        revision["live"]["parentPatch"],
        revision["planned"]["parentPatch"]
    );
    let (code, diff_out, err) = dryrun(&sb, home.path(), &["-f", &file, "-v"]).await;
    assert_eq!(code, 1, "{diff_out}\n{err}");
    let section = diff_out
        .split("~ update ControllerRevision ")
        .nth(1)
        .unwrap_or_else(|| panic!("a ControllerRevision update:\n{diff_out}"));
    let hunk = section
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with("@@"))
        .unwrap_or_else(|| panic!("a diff:\n{section}"));
    assert!(
        !hunk.starts_with("@@ -0,0 "),
        "diffed as all added:\n{section}"
    );
    assert!(section.contains("-  - r-"), "a claim moves:\n{section}");
    assert_eq!(global_rv(&sb).await, before, "dryrun wrote something");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customize_related_objects_reach_the_sync_request_as_in_dev() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let spec = json!({"selector": {"matchLabels": {"app": "a"}}, "role": "web"});
    new_parent(&sb, "Thing", "p", spec).await;
    let cms = core_ar("ConfigMap", "configmaps");
    for (name, labels, k) in [
        ("rel-web", json!({"role": "web"}), "one"),
        ("rel-db", json!({"role": "db"}), "two"),
        ("named-1", json!({}), "three"),
    ] {
        create(&sb, &cms, cm(name, labels, json!({"k": k}), json!([]))).await;
    }
    // customize: ConfigMaps labelled role=<spec.role>, plus named-1 by name; sync: one child
    // listing `key=data.k` of every related object it was shown.
    let answer = |hook: &str, req: &Value| {
        let p = &req["parent"];
        if hook == "customize" {
            return json!({"relatedResources": [
                {"apiVersion": "v1", "resource": "configmaps",
                 "labelSelector": {"matchLabels": {"role": p["spec"]["role"]}}},
                {"apiVersion": "v1", "resource": "configmaps", "names": ["named-1"]}]});
        }
        let seen = json!({"seen": related_seen(req)});
        json!({"children": [cm("p-copy", json!({"app": "a"}), seen, Value::Null)]})
    };
    let hooks = HookServer::start(Arc::new(move |hook, req| Reply::json(answer(hook, req)))).await;
    let def = common::engine::composite(
        "things",
        "Thing",
        json!([{"apiVersion": "v1", "resource": "configmaps"}]),
        json!({"sync": {"webhook": {"url": hooks.url("sync")}},
            "customize": {"webhook": {"url": hooks.url("customize")}}}),
    );
    let file = write_def(home.path(), &def);
    let before = global_rv(&sb).await;
    // --against the same definition: every exchange (customize included) is sent again.
    let (code, out, err) = dryrun(&sb, home.path(), &["-f", &file, "--against", &file]).await;
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("+ create ConfigMap default/p-copy"), "{out}");
    assert!(
        out.contains("named-1=three") && out.contains("rel-web=one"),
        "the related objects reach the sync request: {out}"
    );
    assert!(!out.contains("rel-db=two"), "not related: {out}");
    assert!(
        err.contains("--against things default/p: customize hook answers the same"),
        "{err}"
    );
    assert!(
        err.contains("--against things default/p: sync hook answers the same"),
        "{err}"
    );
    // Once for the plan, once for --against.
    assert_eq!(hooks.calls_of("customize").len(), 2);
    assert_eq!(global_rv(&sb).await, before, "dryrun wrote something");
}
