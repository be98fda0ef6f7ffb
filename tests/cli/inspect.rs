//! `kubectl meta inspect` end to end: the real binary against an in-process sandbox holding
//! real objects (created with the real kubectl). Covers a CompositeController parent (children,
//! adoption candidate, child to be released, terminating child, NotSynced + stale status), a
//! MapController parent (two keys and a detached output), a DecoratorController attachment,
//! several owners, a cluster-scoped parent with namespaced children, and the errors. The tree
//! output is compared with snapshots (colors off, AGE normalised) and `-o json` is checked
//! against docs/inspect-graph.schema.json.

use crate::common;

use std::path::Path;

use crate::common::cli::{assert_fails, assert_ok, kc, meta, repo, run, text};
use crate::common::{TIMEOUT, TestSandbox};
use serde_json::Value;

/// Apply `yaml` with kubectl, retrying while a just-created CRD is not served yet.
async fn apply(sb: &TestSandbox, yaml: &str) {
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let out = sb.kubectl_stdin(&["apply", "-f", "-"], yaml);
        if out.status.success() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "kubectl apply kept failing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

fn kubectl_ok(sb: &TestSandbox, args: &[&str]) -> String {
    common::ok_stdout(&sb.kubectl(args))
}

fn uid(sb: &TestSandbox, what: &str, ns: Option<&str>) -> String {
    let mut args = vec!["get", what, "-o", "jsonpath={.metadata.uid}"];
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    kubectl_ok(sb, &args)
}

fn crd(plural: &str, kind: &str, scope: &str, short: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.accept.example.com}}
spec:
  group: accept.example.com
  scope: {scope}
  names: {{plural: {plural}, singular: {singular}, kind: {kind}, shortNames: [{short}]}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}
"#,
        singular = kind.to_ascii_lowercase()
    )
}

fn owner(kind: &str, name: &str, uid: &str, controller: bool) -> String {
    let api_version = if kind == "ConfigMap" {
        "v1"
    } else {
        "accept.example.com/v1"
    };
    format!(
        "{{apiVersion: {api_version}, kind: {kind}, name: {name}, uid: {uid}, controller: {controller}}}"
    )
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write");
    p.display().to_string()
}

async fn inspect(sb: &TestSandbox, home: &Path, args: &[&str]) -> std::process::Output {
    let kubeconfig = kc(sb);
    let mut all = vec!["inspect", "--kubeconfig", kubeconfig.as_str()];
    all.extend_from_slice(args);
    run(meta(home, &all)).await
}

/// The tree with every AGE value replaced by `<age>` (the last column of non-header rows).
fn normalise(tree: &str) -> String {
    tree.lines()
        .map(|l| {
            let Some((head, last)) = l.rsplit_once(' ') else {
                return l.to_string();
            };
            let is_age = last.chars().next().is_some_and(|c| c.is_ascii_digit())
                && last.chars().all(|c| c.is_ascii_alphanumeric());
            if is_age {
                format!("{head} <age>")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Check `v` against the inspect graph schema (panics naming what does not validate).
fn check_schema(schema: &Value, v: &Value, at: &str) {
    if let Err(e) = common::schema::validate(schema, schema, v, at) {
        panic!("{e}");
    }
}

fn schema() -> Value {
    let text = std::fs::read_to_string(repo().join("docs/inspect-graph.schema.json"))
        .expect("docs/inspect-graph.schema.json");
    serde_json::from_str(&text).expect("schema is JSON")
}

fn node<'a>(g: &'a Value, kind: &str, name: &str) -> &'a Value {
    g["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["kind"] == kind && n["name"] == name)
        .unwrap_or_else(|| panic!("no node {kind}/{name} in {g:#}"))
}

fn edge_kinds(g: &Value, to: &Value) -> Vec<String> {
    let mut v: Vec<String> = g["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .filter(|e| e["to"] == to["id"])
        .map(|e| e["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    v.sort();
    v
}

const COMPOSITE: &str = r#"apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: greeter}
spec:
  parentResource: {apiVersion: accept.example.com/v1, resource: greetings}
  childResources:
  - {apiVersion: v1, resource: configmaps}
  - {apiVersion: v1, resource: secrets}
  hooks:
    sync:
      webhook: {url: "http://127.0.0.1:1/sync"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_parent_children_adoption_release_and_status() {
    let sb = common::start().await;
    let home = tempfile::tempdir().expect("home");
    apply(&sb, &crd("greetings", "Greeting", "Namespaced", "gr")).await;
    apply(
        &sb,
        "apiVersion: accept.example.com/v1\nkind: Greeting\nmetadata: {name: hello, namespace: default}\nspec: {selector: {matchLabels: {app: hello}}}\n",
    )
    .await;
    let p = uid(&sb, "greeting/hello", None);
    let own = owner("Greeting", "hello", &p, true);
    apply(
        &sb,
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hello-a, namespace: default, labels: {{app: hello}}, ownerReferences: [{own}]}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hello-old, namespace: default, labels: {{app: other}}, ownerReferences: [{own}]}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hello-orphan, namespace: default, labels: {{app: hello}}}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: hello-fin, namespace: default, labels: {{app: hello}}, finalizers: [example.com/hold], ownerReferences: [{own}]}}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata: {{name: hello-s, namespace: default, labels: {{app: hello}}, ownerReferences: [{own}]}}\n"
        ),
    )
    .await;
    kubectl_ok(&sb, &["delete", "cm", "hello-fin", "--wait=false"]);
    kubectl_ok(
        &sb,
        &[
            "patch",
            "greeting",
            "hello",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"observedGeneration":0,"conditions":[{"type":"Synced","status":"False","reason":"HookFailed","message":"hook unreachable"}]}}"#,
        ],
    );
    let dir = tempfile::tempdir().expect("dir");
    let ctl = write(dir.path(), "ctl.yaml", COMPOSITE);

    let out = inspect(
        &sb,
        home.path(),
        &["cm/hello-a", "-f", &ctl, "--color", "never"],
    )
    .await;
    let tree = normalise(&assert_ok(&out));
    let expected = "\
NAMESPACE  NAME                        READY  STATUS                                                                    AGE
default    Greeting/hello              -      NotSynced: hook unreachable; Stale (observedGeneration 0 < generation 1)  <age>
           ├─configmaps (4)
default    │ ├─ConfigMap/hello-a ◀     -      -                                                                         <age>
default    │ ├─ConfigMap/hello-fin     -      Terminating (finalizers pending: example.com/hold)                        <age>
default    │ ├─ConfigMap/hello-old     -      ToBeReleased (owned, the selector no longer matches)                      <age>
default    │ └─ConfigMap/hello-orphan  -      AdoptionCandidate (matches the selector, no ControllerRef)                <age>
           └─secrets (1)
default      └─Secret/hello-s          -      -                                                                         <age>
";
    assert_eq!(tree, expected, "actual:\n{tree}");

    // Same object through other spellings of the type; -o wide adds RELATION and MAP-KEY.
    for spelling in [
        "configmap/hello-a",
        "configmaps/hello-a",
        "ConfigMap/hello-a",
    ] {
        let out = inspect(&sb, home.path(), &[spelling, "-f", &ctl, "-o", "wide"]).await;
        let tree = assert_ok(&out);
        assert!(tree.starts_with("NAMESPACE  NAME"), "{tree}");
        assert!(
            tree.lines()
                .next()
                .unwrap_or_default()
                .ends_with("RELATION            MAP-KEY")
                || tree.contains("RELATION"),
            "{tree}"
        );
        assert!(
            tree.contains("to-be-released") && tree.contains("adoption-candidate"),
            "{tree}"
        );
    }
    // Colors when asked (the inspected row highlighted), none with NO_COLOR and auto.
    let out = inspect(
        &sb,
        home.path(),
        &["cm/hello-a", "-f", &ctl, "--color", "always"],
    )
    .await;
    assert!(
        assert_ok(&out).contains("\u{1b}[1;36m"),
        "bold cyan inspected row"
    );
    let out = inspect(&sb, home.path(), &["cm/hello-a", "-f", &ctl]).await;
    assert!(
        !assert_ok(&out).contains('\u{1b}'),
        "NO_COLOR (set by meta()) and no terminal"
    );
    // --depth 0: no owner levels, nothing below.
    let out = inspect(
        &sb,
        home.path(),
        &["cm/hello-a", "-f", &ctl, "--depth", "0"],
    )
    .await;
    assert_eq!(
        assert_ok(&out).lines().count(),
        2,
        "header + the object itself"
    );

    // The parent by its short name, down only.
    for spelling in [
        vec!["gr", "hello"],
        vec!["greetings.accept.example.com/hello"],
        vec!["greeting.v1.accept.example.com/hello"],
        vec!["Greeting/hello"],
    ] {
        let mut args = spelling.clone();
        args.extend(["-f", ctl.as_str(), "--down", "--color", "never"]);
        let out = inspect(&sb, home.path(), &args).await;
        assert!(assert_ok(&out).contains("Greeting/hello ◀"), "{spelling:?}");
    }

    // -o json: the schema, and what only the controller knows.
    let out = inspect(&sb, home.path(), &["cm/hello-a", "-f", &ctl, "-o", "json"]).await;
    let g: Value = serde_json::from_str(&assert_ok(&out)).expect("json");
    check_schema(&schema(), &g, "$");
    assert_eq!(
        g["governing"],
        serde_json::json!(["CompositeController/greeter"])
    );
    assert_eq!(
        g["listedAllTypes"], false,
        "the controller says which types matter"
    );
    let orphan = node(&g, "ConfigMap", "hello-orphan");
    assert_eq!(orphan["relation"], "adoption-candidate");
    assert_eq!(edge_kinds(&g, orphan), ["adoption-candidate"]);
    assert_eq!(
        node(&g, "ConfigMap", "hello-old")["relation"],
        "to-be-released"
    );
    assert_eq!(node(&g, "ConfigMap", "hello-a")["inspected"], true);
    assert_eq!(
        edge_kinds(&g, node(&g, "ConfigMap", "hello-a")),
        ["controller"]
    );
    let parent = node(&g, "Greeting", "hello");
    assert_eq!(parent["synced"]["status"], "False");
    assert_eq!(parent["observedGeneration"], 0);
    assert_eq!(
        node(&g, "ConfigMap", "hello-fin")["finalizers"],
        serde_json::json!(["example.com/hold"])
    );

    // -o yaml carries the same graph.
    let out = inspect(&sb, home.path(), &["cm/hello-a", "-f", &ctl, "-o", "yaml"]).await;
    let y = assert_ok(&out);
    assert!(
        y.contains("kind: InspectGraph") && y.contains("adoption-candidate"),
        "{y}"
    );

    // --up: only the chain; without -f and no controllers in the cluster: plain ownership.
    let out = inspect(
        &sb,
        home.path(),
        &["cm/hello-a", "--up", "--color", "never"],
    )
    .await;
    let up = normalise(&assert_ok(&out));
    assert_eq!(
        up,
        "\
NAMESPACE  NAME                   READY  STATUS                                       AGE
default    Greeting/hello         -      Stale (observedGeneration 0 < generation 1)  <age>
default    └─ConfigMap/hello-a ◀  -      -                                            <age>
"
    );
    sb.sandbox.shutdown().await;
}

const MAP: &str = r#"apiVersion: metacontroller.k8s.io/v1alpha1
kind: MapController
metadata: {name: mapper}
spec:
  parentResource: {apiVersion: accept.example.com/v1, resource: mappers}
  inputResources:
  - {apiVersion: v1, resource: configmaps}
  outputResources:
  - {apiVersion: v1, resource: secrets}
  hooks:
    map:
      webhook: {url: "http://127.0.0.1:1/map"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_parent_keys_inputs_and_tombstone() {
    use kubectl_meta::engine::plan::map_plan::{input_ref, map_key};
    let sb = common::start().await;
    let home = tempfile::tempdir().expect("home");
    apply(&sb, &crd("mappers", "Mapper", "Namespaced", "mp")).await;
    apply(
        &sb,
        "apiVersion: accept.example.com/v1\nkind: Mapper\nmetadata: {name: m, namespace: default}\nspec: {selector: {matchLabels: {in: \"yes\"}}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default, labels: {in: \"yes\"}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: default, labels: {in: \"yes\"}}\n",
    )
    .await;
    let p = uid(&sb, "mapper/m", None);
    let own = owner("Mapper", "m", &p, true);
    let input = |name: &str| -> Value {
        serde_json::from_str(&kubectl_ok(&sb, &["get", "cm", name, "-o", "json"])).expect("json")
    };
    let (a, b) = (input("a"), input("b"));
    let (ka, kb) = (map_key(&a), map_key(&b));
    let gone_key = "configmap-gone-0123456789abcdef";
    let out = |name: &str, key: &str, inp: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: default, labels: {{metacontroller.k8s.io/map-key: {key}}}, annotations: {{metacontroller.k8s.io/map-input: {inp}}}, ownerReferences: [{own}]}}\n"
        )
    };
    apply(
        &sb,
        &[
            out("out-a", &ka, &input_ref(&a)),
            out("out-b", &kb, &input_ref(&b)),
            out("out-gone", gone_key, "v1/ConfigMap/default/gone"),
        ]
        .join("---\n"),
    )
    .await;
    let dir = tempfile::tempdir().expect("dir");
    let ctl = write(dir.path(), "map.yaml", MAP);
    let o = inspect(
        &sb,
        home.path(),
        &["secret/out-a", "-f", &ctl, "--color", "never"],
    )
    .await;
    let tree = normalise(&assert_ok(&o));
    // Keys sort by name: configmap-a-…, configmap-b-…, configmap-gone-….
    let expected = format!(
        "\
NAMESPACE  NAME                                   READY  STATUS                                              AGE
default    Mapper/m                               -      NotSynced (no sync yet: no observedGeneration)      <age>
           ├─key {ka}            input v1/ConfigMap/default/a
default    │ └─Secret/out-a ◀                     -      -                                                   <age>
           ├─key {kb}            input v1/ConfigMap/default/b
default    │ └─Secret/out-b                       -      -                                                   <age>
           └─key {gone_key}         Tombstone: input v1/ConfigMap/default/gone is gone
default      └─Secret/out-gone                    -      Tombstone (input gone)                              <age>
"
    );
    assert_eq!(tree, expected, "actual:\n{tree}");

    let o = inspect(
        &sb,
        home.path(),
        &["secret/out-a", "-f", &ctl, "-o", "json"],
    )
    .await;
    let g: Value = serde_json::from_str(&assert_ok(&o)).expect("json");
    check_schema(&schema(), &g, "$");
    let gone = node(&g, "Secret", "out-gone");
    assert_eq!(
        (gone["tombstone"].as_bool(), gone["relation"].as_str()),
        (Some(true), Some("output"))
    );
    let out_a = node(&g, "Secret", "out-a");
    assert_eq!(out_a["mapKey"], ka.as_str());
    assert_eq!(edge_kinds(&g, out_a), ["controller", "map-input"]);
    assert_eq!(node(&g, "ConfigMap", "a")["relation"], "input");
    sb.sandbox.shutdown().await;
}

const DECORATOR: &str = r#"apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: deco}
spec:
  resources:
  - apiVersion: v1
    resource: configmaps
    labelSelector: {matchLabels: {decorate: "yes"}}
  attachments:
  - {apiVersion: v1, resource: secrets}
  hooks:
    sync:
      webhook: {url: "http://127.0.0.1:1/sync"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decorator_attachment_multiple_owners_and_cluster_scoped_parent() {
    let sb = common::start().await;
    let home = tempfile::tempdir().expect("home");
    apply(&sb, &crd("realms", "Realm", "Cluster", "rlm")).await;
    kubectl_ok(&sb, &["create", "namespace", "team-a"]);
    kubectl_ok(&sb, &["create", "namespace", "team-b"]);
    apply(
        &sb,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: target, namespace: default, labels: {decorate: \"yes\"}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owner1, namespace: default}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owner2, namespace: default}\n---\n\
         apiVersion: accept.example.com/v1\nkind: Realm\nmetadata: {name: r1}\n",
    )
    .await;
    let t = uid(&sb, "cm/target", None);
    let (o1, o2) = (uid(&sb, "cm/owner1", None), uid(&sb, "cm/owner2", None));
    let r1 = uid(&sb, "realm/r1", None);
    apply(
        &sb,
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: attached, namespace: default, annotations: {{metacontroller.k8s.io/decorator-controller: deco}}, ownerReferences: [{}]}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: shared, namespace: default, ownerReferences: [{}, {}]}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: in-a, namespace: team-a, ownerReferences: [{}]}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: in-b, namespace: team-b, ownerReferences: [{}]}}\n",
            owner("ConfigMap", "target", &t, true),
            owner("ConfigMap", "owner1", &o1, true),
            owner("ConfigMap", "owner2", &o2, false),
            owner("Realm", "r1", &r1, true),
            owner("Realm", "r1", &r1, true),
        ),
    )
    .await;
    let dir = tempfile::tempdir().expect("dir");
    let ctl = write(dir.path(), "deco.yaml", DECORATOR);

    // Decorator: the attachment under its target, grouped, with an `attachment` edge.
    let o = inspect(
        &sb,
        home.path(),
        &["secret/attached", "-f", &ctl, "--color", "never"],
    )
    .await;
    let tree = normalise(&assert_ok(&o));
    assert_eq!(
        tree,
        "\
NAMESPACE  NAME                                           READY  STATUS  AGE
default    ConfigMap/target                               -      -       <age>
           └─attachments of DecoratorController/deco (1)
default      └─Secret/attached ◀                          -      -       <age>
"
    );
    let o = inspect(
        &sb,
        home.path(),
        &["secret/attached", "-f", &ctl, "-o", "json"],
    )
    .await;
    let g: Value = serde_json::from_str(&assert_ok(&o)).expect("json");
    check_schema(&schema(), &g, "$");
    let att = node(&g, "Secret", "attached");
    assert_eq!(edge_kinds(&g, att), ["attachment"]);
    assert_eq!(att["group"], "attachments of DecoratorController/deco");
    assert_eq!(
        att["relation"], "inspected",
        "the inspected object keeps that relation"
    );

    // Several owners: two roots, the ControllerRef marked as such.
    let o = inspect(&sb, home.path(), &["cm/shared", "-o", "json"]).await;
    let g: Value = serde_json::from_str(&assert_ok(&o)).expect("json");
    check_schema(&schema(), &g, "$");
    assert_eq!(g["roots"].as_array().map(Vec::len), Some(2), "{g:#}");
    assert_eq!(
        g["listedAllTypes"], true,
        "no controller: every listable type"
    );
    assert_eq!(
        edge_kinds(&g, node(&g, "ConfigMap", "shared")),
        ["controller", "owner"]
    );
    let o = inspect(&sb, home.path(), &["cm/shared", "--color", "never"]).await;
    let tree = normalise(&assert_ok(&o));
    assert_eq!(
        tree.matches("ConfigMap/shared ◀").count(),
        2,
        "under each root:\n{tree}"
    );

    // A cluster-scoped parent with namespaced children in two namespaces, from one child.
    let o = inspect(
        &sb,
        home.path(),
        &["cm/in-b", "-n", "team-b", "--color", "never"],
    )
    .await;
    let tree = normalise(&assert_ok(&o));
    assert_eq!(
        tree,
        "\
NAMESPACE  NAME                READY  STATUS  AGE
           Realm/r1            -      -       <age>
team-a     ├─ConfigMap/in-a    -      -       <age>
team-b     └─ConfigMap/in-b ◀  -      -       <age>
"
    );
    // By its short name, cluster-scoped (no -n needed).
    let o = inspect(&sb, home.path(), &["rlm/r1", "--color", "never"]).await;
    assert!(assert_ok(&o).contains("Realm/r1 ◀"));
    sb.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_type_missing_object_and_bad_arguments_fail_in_one_line() {
    let sb = common::start().await;
    let home = tempfile::tempdir().expect("home");
    let cases: [(&[&str], i32, &str); 4] = [
        (
            &["gizmo/x"],
            2,
            "error: the server doesn't have a resource type \"gizmo\"",
        ),
        (
            &["pods/nope"],
            2,
            "error: pods \"nope\" not found in namespace \"default\"",
        ),
        (
            &["deploy/nope", "-n", "team-x"],
            2,
            "error: deployments.apps \"nope\" not found in namespace \"team-x\"",
        ),
        (&["pods"], 2, "error: \"pods\" is not TYPE/NAME"),
    ];
    for (args, code, msg) in cases {
        let o = inspect(&sb, home.path(), args).await;
        let stderr = assert_fails(&o);
        let (stdout, _) = text(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: data only on stdout: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(stderr.starts_with(msg), "{args:?}: {stderr}");
    }
    sb.sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_the_graph_again_when_the_tree_changes() {
    let sb = common::start().await;
    let home = tempfile::tempdir().expect("home");
    apply(
        &sb,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: w-root, namespace: default}\n",
    )
    .await;
    let root = uid(&sb, "cm/w-root", None);
    let kubeconfig = kc(&sb);
    let bg = common::cli::Background::start(meta(
        home.path(),
        &[
            "inspect",
            "--kubeconfig",
            &kubeconfig,
            "cm/w-root",
            "-w",
            "-o",
            "json",
        ],
    ));
    bg.wait_output("\"w-root\"").await;
    assert!(!bg.output().contains("w-kid"));
    apply(
        &sb,
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: w-kid, namespace: default, ownerReferences: [{}]}}\n",
            owner("ConfigMap", "w-root", &root, true)
        ),
    )
    .await;
    bg.wait_output("\"w-kid\"").await;
    // NDJSON: every line is one whole graph.
    for line in bg.output().lines() {
        let g: Value = serde_json::from_str(line).expect("one JSON document per line");
        check_schema(&schema(), &g, "$");
    }
    let (ok, stderr) = bg.interrupt().await;
    assert!(ok, "Ctrl-C ends the watch cleanly: {stderr}");
    sb.sandbox.shutdown().await;
}
