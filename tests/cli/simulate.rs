//! `kubectl meta dryrun --simulate` against a sandbox standing for the live cluster: every
//! sync until convergence runs on a private in-process copy, with the real engine and hooks;
//! the live cluster's resourceVersion is checked unchanged after every run.

use crate::common;

use crate::common::cli::*;
use serde_json::{Value, json};

/// The document checked against docs/dryrun-simulate.schema.json.
fn check_schema(doc: &Value) {
    let path = repo().join("docs/dryrun-simulate.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    if let Err(e) = common::schema::validate(&schema, &schema, doc, "$") {
        panic!("{e}\n{doc:#}");
    }
}

/// `dryrun --simulate ARGS -o json`: exit code, the document (checked against its schema),
/// stderr.
async fn simulate(
    sb: &common::TestSandbox,
    home: &std::path::Path,
    args: &[&str],
) -> (i32, Value, String) {
    let mut all = vec!["--simulate", "-o", "json"];
    all.extend_from_slice(args);
    let (code, out, err) = dryrun(sb, home, &all).await;
    let doc = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    check_schema(&doc);
    (code, doc, err)
}

/// A catset image change: the simulation replaces the 3 Pods one at a time (each once the
/// one before is Ready, as the sandbox's kubelet makes it), converges, and the end state
/// against live is 3 replacements; nothing is written to the live cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catset_image_change_simulates_to_three_replacements_and_converges() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let catset = example("catset");
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--apply",
            "-f",
            &catset,
            "--once",
        ],
    ))
    .await;
    assert_ok(&out);
    let patched = sb.kubectl(&[
        "patch",
        "catset",
        "nginx-backend",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.28"}]"#,
    ]);
    assert!(patched.status.success(), "{patched:?}");
    let before = global_rv(&sb).await;

    let (code, doc, err) = simulate(&sb, home.path(), &["-f", &catset]).await;
    assert_eq!(code, 1, "changes found: {doc:#}\n{err}");
    assert_eq!(
        global_rv(&sb).await,
        before,
        "--simulate wrote to the cluster"
    );
    let parent = &doc["parents"][0];
    assert_eq!(parent["converged"], json!(true), "{doc:#}");
    let replaced: Vec<&str> = parent["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["action"] == "recreate" && o["type"] == "Pod.v1")
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        replaced,
        ["nginx-backend-0", "nginx-backend-1", "nginx-backend-2"],
        "{doc:#}"
    );
    for o in parent["objects"].as_array().unwrap() {
        if o["action"] == "recreate" {
            assert_eq!(o["live"]["spec"]["containers"][0]["image"], "nginx:1.27");
            assert_eq!(o["planned"]["spec"]["containers"][0]["image"], "nginx:1.28");
        }
    }
    // One Pod at a time: no step replaces two.
    let steps = parent["steps"].as_array().unwrap();
    let replacing: Vec<usize> = steps
        .iter()
        .map(|s| {
            s["actions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| a.as_str().unwrap().starts_with("-/+ replace Pod"))
                .count()
        })
        .collect();
    assert!(replacing.iter().all(|n| *n <= 1), "{replacing:?}");
    assert_eq!(replacing.iter().sum::<usize>(), 3, "{steps:#?}");
    assert_eq!(doc["summary"]["replace"], json!(3), "{doc:#}");
    assert_eq!(doc["summary"]["converged"], json!(true));
    assert!(doc["summary"]["steps"].as_u64().unwrap() >= 3, "{doc:#}");

    // The human output: collapsed steps, the end state, the summary.
    let (code, out, err) = dryrun(&sb, home.path(), &["--simulate", "-f", &catset]).await;
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("  step 1: "), "{out}");
    assert!(
        out.contains("-/+ replace Pod default/nginx-backend-2"),
        "{out}"
    );
    assert!(out.contains("simulated kubelet"), "{out}");
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("Plan: ")
            && last.contains("(3 replaced)")
            && last.contains("; converged in "),
        "{last}"
    );
    assert_eq!(
        global_rv(&sb).await,
        before,
        "--simulate wrote to the cluster"
    );
}

/// The hello-world CRD, a sample, and a CompositeController whose exec hook is `script`.
fn hello_with_hook(dir: &std::path::Path, script: &str) -> String {
    exec_hook_controller(dir, "hello", script);
    dir.display().to_string()
}

/// `kubectl apply` the CRD and the sample parent [`hello_with_hook`] wrote in `dir` (the live
/// state a simulation starts from).
fn apply_crd_and_sample(sb: &common::TestSandbox, dir: &std::path::Path) {
    for f in ["00-crd.yaml", "20-sample.yaml"] {
        let applied = sb.kubectl(&["apply", "-f", &dir.join(f).display().to_string()]);
        assert!(applied.status.success(), "{applied:?}");
    }
}

/// A hook that writes the time into the status on every sync never converges: named, with
/// the field, exit 4; nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_rewritten_every_sync_is_named_as_not_converging() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = hello_with_hook(
        dir.path(),
        "import json, sys, time\njson.load(sys.stdin)\nprint(json.dumps({\"status\": {\"syncedAt\": time.time_ns()}, \"children\": []}))\n",
    );
    apply_crd_and_sample(&sb, dir.path());
    let before = global_rv(&sb).await;
    let (code, doc, err) = simulate(&sb, home.path(), &["-f", &files, "--max-steps", "5"]).await;
    assert_eq!(code, 4, "{doc:#}\n{err}");
    assert_eq!(
        global_rv(&sb).await,
        before,
        "--simulate wrote to the cluster"
    );
    let parent = &doc["parents"][0];
    assert_eq!(parent["converged"], json!(false));
    assert_eq!(parent["cause"]["cause"], json!("statusFlapping"), "{doc:#}");
    assert_eq!(
        parent["cause"]["fields"],
        json!(["status.syncedAt"]),
        "{doc:#}"
    );
    assert!(err.contains("status.syncedAt"), "{err}");
}

/// `--against`: the two hook versions' end states are compared parent by parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_shows_how_the_end_states_differ() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let hook = |value: &str| {
        format!(
            "import json, sys\nreq = json.load(sys.stdin)\nprint(json.dumps({{\"children\": [{{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {{\"name\": \"hello-cm\"}}, \"data\": {{\"v\": \"{value}\"}}}}]}}))\n"
        )
    };
    let current = hello_with_hook(a.path(), &hook("new"));
    let other = hello_with_hook(b.path(), &hook("old"));
    for f in ["10-controller.yaml"] {
        for d in [a.path(), b.path()] {
            let text = std::fs::read_to_string(d.join(f)).unwrap();
            std::fs::write(
                d.join(f),
                text.replace("resource: pods", "resource: configmaps"),
            )
            .unwrap();
        }
    }
    apply_crd_and_sample(&sb, a.path());
    let before = global_rv(&sb).await;
    let (code, doc, err) = simulate(&sb, home.path(), &["-f", &current, "--against", &other]).await;
    assert_eq!(code, 1, "{doc:#}\n{err}");
    assert!(
        err.contains("--against: 1 object(s) end differently"),
        "{err}"
    );
    assert!(
        err.contains("ConfigMap default/hello-cm: end states differ (against -> current): data.v"),
        "{err}"
    );
    assert_eq!(
        global_rv(&sb).await,
        before,
        "--simulate wrote to the cluster"
    );
}

/// A child asking for a field its CRD's schema prunes: the hot-loop guard's finding names the
/// field and the server's value; exit 4; nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_the_server_prunes_is_named_with_the_hot_loop_finding() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_pruning_controller(dir.path());
    let crds = dir.path().join("00-crds.yaml").display().to_string();
    let applied = sb.kubectl(&["apply", "-f", &crds]);
    assert!(applied.status.success(), "{applied:?}");
    let sample = dir.path().join("20-sample.yaml").display().to_string();
    common::wait_for("the Gadget CRD served", common::TIMEOUT, || async {
        sb.kubectl(&["apply", "-f", &sample])
            .status
            .success()
            .then_some(())
    })
    .await;
    let before = global_rv(&sb).await;
    let controller = dir.path().join("10-controller.yaml").display().to_string();
    let (code, doc, err) = simulate(&sb, home.path(), &["-f", &controller]).await;
    assert_eq!(code, 4, "{doc:#}\n{err}");
    assert_eq!(
        global_rv(&sb).await,
        before,
        "--simulate wrote to the cluster"
    );
    let parent = &doc["parents"][0];
    assert_eq!(parent["cause"]["cause"], json!("hotLoop"), "{doc:#}");
    let message = parent["cause"]["message"].as_str().unwrap();
    assert!(message.contains("spec.unknownField"), "{message}");
    assert!(message.contains("prunes"), "{message}");
    assert!(
        err.contains("hot loop") && err.contains("spec.unknownField"),
        "{err}"
    );
}

/// `count` HelloWorld parents `hello-FIRST`.. greeting `who`, as one YAML file in `dir`.
fn hello_parents(dir: &std::path::Path, first: usize, count: usize, who: &str) -> String {
    let docs: Vec<String> = (first..first + count)
        .map(|i| {
            format!(
                "apiVersion: example.kubectl-meta.dev/v1\nkind: HelloWorld\nmetadata: {{name: hello-{i}, namespace: default}}\nspec: {{who: {who}}}\n"
            )
        })
        .collect();
    let path = dir.join(format!("parents-{first}-{who}.yaml"));
    std::fs::write(&path, docs.join("---\n")).unwrap();
    path.display().to_string()
}

/// The summary over 100 hello-world parents: 30 converged by `dev --once`, 10 of those then
/// told to greet someone else (their Pod is replaced: Recreate), 70 new ones (a Pod each, a
/// status). Every parent converges; the counts are exact in `-o json` and on the summary line;
/// nothing is written to the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_over_100_parents_counts_exactly() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let hello = repo().join("examples/hello-world");
    let crd = hello.join("00-crd.yaml").display().to_string();
    let controller = hello.join("10-controller.yaml").display().to_string();
    let applied = sb.kubectl(&["apply", "-f", &crd]);
    assert!(applied.status.success(), "{applied:?}");
    let first = hello_parents(files.path(), 0, 30, "World");
    common::wait_for("the HelloWorld CRD served", common::TIMEOUT, || async {
        sb.kubectl(&["apply", "-f", &first])
            .status
            .success()
            .then_some(())
    })
    .await;
    let out = run(meta(
        home.path(),
        &["--kubeconfig", &kc(&sb), "dev", "-f", &controller, "--once"],
    ))
    .await;
    assert_ok(&out);
    assert_eq!(names(&sb, &pods(), "default").await.len(), 30);
    for f in [
        hello_parents(files.path(), 30, 70, "World"),
        hello_parents(files.path(), 0, 10, "Moon"),
    ] {
        let applied = sb.kubectl(&["apply", "-f", &f]);
        assert!(applied.status.success(), "{applied:?}");
    }
    let before = global_rv(&sb).await;

    let (code, doc, err) = simulate(&sb, home.path(), &["-f", &controller]).await;
    assert_eq!(code, 1, "changes found: {err}");
    assert_eq!(
        global_rv(&sb).await,
        before,
        "--simulate wrote to the cluster"
    );
    let parents = doc["parents"].as_array().unwrap();
    assert_eq!(parents.len(), 100, "{err}");
    assert!(
        parents.iter().all(|p| p["converged"] == json!(true)),
        "{doc:#}"
    );
    let s = &doc["summary"];
    let counts: Vec<(&str, &Value)> = [
        "create", "update", "delete", "replace", "adopt", "release", "status",
    ]
    .into_iter()
    .map(|k| (k, &s[k]))
    .collect();
    assert_eq!(
        counts,
        [
            ("create", &json!(70)),
            ("update", &json!(0)),
            ("delete", &json!(10)),
            ("replace", &json!(10)),
            ("adopt", &json!(0)),
            ("release", &json!(0)),
            // The 70 new parents, and the 10 changed ones: live at generation 2, they will
            // be written `observedGeneration: 2` (the copy's generation 1 used to hide that).
            ("status", &json!(80)),
        ],
        "{s:#}"
    );
    assert_eq!(s["converged"], json!(true));
    // The replaced Pods greet the Moon; the 20 others converged already are as live.
    let replaced: Vec<&str> = parents
        .iter()
        .flat_map(|p| p["objects"].as_array().unwrap())
        .filter(|o| o["action"] == "recreate")
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(replaced.len(), 10, "{replaced:?}");
    assert!(
        replaced
            .iter()
            .all(|n| n.trim_start_matches("hello-").parse::<usize>().unwrap() < 10),
        "{replaced:?}"
    );
    let as_live = parents
        .iter()
        .filter(|p| p["objects"].as_array().unwrap().is_empty())
        .count();
    assert_eq!(as_live, 20, "{doc:#}");

    // The human summary line says the same.
    let (code, out, err) = dryrun(&sb, home.path(), &["--simulate", "-f", &controller]).await;
    assert_eq!(code, 1, "{err}");
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with(
            "Plan: 70 to create, 0 to update, 10 to delete (10 replaced), 0 to adopt, 0 to release; status changes; converged in "
        ),
        "{last}"
    );
    assert_eq!(
        global_rv(&sb).await,
        before,
        "--simulate wrote to the cluster"
    );
}

/// A child nothing makes Ready (a Pod whose nodeSelector fits no Node stays Pending): named as
/// waiting on readiness nothing provides, with the Pod, once nothing moved for a while (not at
/// --simulate-timeout); exit 4; nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_nothing_makes_ready_is_named_as_waiting_on_readiness() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = hello_with_hook(
        dir.path(),
        "import json, sys\nreq = json.load(sys.stdin)\nname = req['parent']['metadata']['name']\nprint(json.dumps({'children': [{'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': name}, 'spec': {'nodeSelector': {'disk': 'none-has-it'}, 'containers': [{'name': 'c', 'image': 'busybox'}]}}]}))\n",
    );
    apply_crd_and_sample(&sb, dir.path());
    let before = global_rv(&sb).await;
    let started = std::time::Instant::now();
    let (code, doc, err) = simulate(
        &sb,
        home.path(),
        &["-f", &files, "--simulate-timeout", "60"],
    )
    .await;
    assert_eq!(code, 4, "{doc:#}\n{err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "ended by --simulate-timeout, not by the finding"
    );
    assert_eq!(
        global_rv(&sb).await,
        before,
        "--simulate wrote to the cluster"
    );
    let parent = &doc["parents"][0];
    assert_eq!(parent["converged"], json!(false));
    assert_eq!(
        parent["cause"]["cause"],
        json!("waitingForReadiness"),
        "{doc:#}"
    );
    let message = parent["cause"]["message"].as_str().unwrap();
    assert!(
        message.contains("to become Current") && message.contains("hello"),
        "{message}"
    );
    assert!(err.contains("readiness nothing provides"), "{err}");
}

/// A hook that fails once the Pod it asked for exists: named with the step it failed at and
/// the hook's error; exit 4; nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_error_is_named_with_its_step() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = hello_with_hook(
        dir.path(),
        "import json, sys\nreq = json.load(sys.stdin)\nif req.get('children', {}).get('Pod.v1'):\n    sys.exit('boom: the second sync')\nname = req['parent']['metadata']['name']\nprint(json.dumps({'children': [{'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': name}, 'spec': {'containers': [{'name': 'c', 'image': 'busybox'}]}}]}))\n",
    );
    apply_crd_and_sample(&sb, dir.path());
    let before = global_rv(&sb).await;
    let (code, doc, err) = simulate(&sb, home.path(), &["-f", &files]).await;
    assert_eq!(code, 4, "{doc:#}\n{err}");
    assert_eq!(
        global_rv(&sb).await,
        before,
        "--simulate wrote to the cluster"
    );
    let parent = &doc["parents"][0];
    assert_eq!(parent["cause"]["cause"], json!("syncFailed"), "{doc:#}");
    assert_eq!(parent["cause"]["step"], json!(2), "{doc:#}");
    assert!(
        parent["cause"]["message"]
            .as_str()
            .unwrap()
            .contains("boom: the second sync"),
        "{doc:#}"
    );
    assert!(err.contains("sync failed at step 2"), "{err}");
}

/// Issue 37: a pod-template annotation added to the Deployment of a Website (a ConfigMap and
/// a Deployment per parent, the parent live at generation 2) simulates to exactly that
/// update: no `409 Conflict` in the copy (the engine used to start while the sandbox's
/// Deployment controller was still writing the copied Deployment), no ConfigMap update (its
/// last-applied configuration held the live parent's uid), no status change (the copy starts
/// at generation 1: `observedGeneration: 2 -> 1`), and the count says every sync listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_template_annotation_simulates_to_that_update_alone() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    common::website::write(dir.path());
    let files = dir.path().display().to_string();
    let once = || {
        meta(
            home.path(),
            &[
                "--kubeconfig",
                &kc(&sb),
                "dev",
                "--apply",
                "-f",
                &files,
                "--once",
            ],
        )
    };
    assert_ok(&run(once()).await);
    // The parent at generation 2, observed by the engine.
    let patched = sb.kubectl(&[
        "patch",
        "website",
        "mysite",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"message":"hi"}}"#,
    ]);
    assert!(patched.status.success(), "{patched:?}");
    assert_ok(&run(once()).await);
    let live = sb.kubectl(&["get", "website", "mysite", "-o", "json"]);
    let live: Value = serde_json::from_slice(&live.stdout).unwrap();
    assert_eq!(live["metadata"]["generation"], json!(2), "{live:#}");
    assert_eq!(live["status"]["observedGeneration"], json!(2), "{live:#}");

    common::website::write_with(dir.path(), Some("InPlace"), r#"{"rev": "2"}"#);
    let controller = dir.path().join("10-controller.yaml").display().to_string();
    let before = global_rv(&sb).await;
    for _ in 0..2 {
        let (code, doc, err) = simulate(&sb, home.path(), &["-f", &controller]).await;
        assert_eq!(code, 1, "changes found: {doc:#}\n{err}");
        let parent = &doc["parents"][0];
        assert_eq!(parent["converged"], json!(true), "{doc:#}");
        let steps = parent["steps"].as_array().unwrap();
        assert!(
            steps.iter().all(|s| s["error"].is_null()),
            "a step failed in a copy nothing else writes: {doc:#}"
        );
        assert_eq!(
            steps[0]["actions"],
            json!(["~ update Deployment default/mysite"]),
            "{doc:#}"
        );
        assert!(
            steps[1..].iter().all(|s| s["writes"] == json!(0)),
            "{doc:#}"
        );
        let objects: Vec<(&str, &str)> = parent["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["action"].as_str().unwrap(), o["type"].as_str().unwrap()))
            .collect();
        assert_eq!(objects, [("update", "Deployment.apps/v1")], "{doc:#}");
        assert_eq!(parent["writingSteps"], json!(1), "{doc:#}");
    }
    let (code, out, err) = dryrun(&sb, home.path(), &["--simulate", "-f", &controller]).await;
    assert_eq!(code, 1, "{out}\n{err}");
    let syncs = out.lines().filter(|l| l.starts_with("  step")).count();
    assert!(syncs >= 1, "{out}");
    let last = out.lines().last().unwrap();
    assert!(
        last.contains("; converged in ") && last.ends_with(", 1 writing"),
        "{out}"
    );
    assert!(!out.contains("409"), "{out}");
    assert_eq!(
        global_rv(&sb).await,
        before,
        "--simulate wrote to the cluster"
    );
}
