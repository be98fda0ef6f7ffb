//! `kubectl meta dev` as users run it: the real binary against a sandbox, the shipped examples
//! with their real Python hooks (exec and HTTP server forms), `--once` exit codes, `-o json`,
//! bad definitions rejected before any write, the write guard, the lease, and the in-cluster
//! Metacontroller check.

use crate::common;

use std::process::{Command, Stdio};

use crate::common::cli::*;
use crate::common::engine::core_ar;
use crate::common::{TIMEOUT, wait_for};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

/// Run `dev --apply -f examples/<name> --once` against `sb`.
async fn apply_example_once(
    sb: &common::TestSandbox,
    home: &std::path::Path,
    name: &str,
) -> std::process::Output {
    run(meta(
        home,
        &[
            "--kubeconfig",
            &kc(sb),
            "dev",
            "--apply",
            "-f",
            &example(name),
            "--once",
        ],
    ))
    .await
}

/// Run `dev -f examples/<name> --once -o json` again (without `--apply`) and assert that it
/// converges without a single write; returns the run's output.
async fn rerun_writes_nothing(
    sb: &common::TestSandbox,
    home: &std::path::Path,
    name: &str,
) -> std::process::Output {
    let out = run(meta(
        home,
        &[
            "--kubeconfig",
            &kc(sb),
            "dev",
            "-f",
            &example(name),
            "--once",
            "-o",
            "json",
        ],
    ))
    .await;
    let stdout = assert_ok(&out);
    let events: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "syncFinished" && e["error"].is_null()),
        "{stdout}"
    );
    let writes: Vec<&Value> = events.iter().filter(|e| e["event"] == "action").collect();
    assert!(writes.is_empty(), "restart wrote: {writes:?}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_world_example_exec_hook_once_creates_the_pod_and_status() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let out = apply_example_once(&sb, home.path(), "hello-world").await;
    let stdout = assert_ok(&out);
    let (_, stderr) = text(&out);
    assert!(stderr.contains("context sandbox ("), "{stderr}");
    assert!(
        stderr.contains("applied CustomResourceDefinition helloworlds.example.kubectl-meta.dev"),
        "{stderr}"
    );
    assert!(
        stdout.contains("create    Pod.v1 default/hello"),
        "{stdout}"
    );

    let pod = get(&sb, &pods(), Some("default"), "hello")
        .await
        .expect("pod hello");
    let parent_ar = ar("example.kubectl-meta.dev", "HelloWorld", "helloworlds");
    let parent = get(&sb, &parent_ar, Some("default"), "hello")
        .await
        .expect("parent");
    let uid = parent["metadata"]["uid"].as_str().unwrap();
    assert_eq!(pod["metadata"]["labels"]["controller-uid"], json!(uid));
    assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], json!(uid));
    assert_eq!(
        pod["spec"]["containers"][0]["command"],
        json!(["echo", "Hello, World!"])
    );
    assert_eq!(parent["status"]["replicas"], json!(1));
    assert_eq!(parent["status"]["observedGeneration"], json!(1));

    // A second run with nothing changed converges without a single write.
    let out = rerun_writes_nothing(&sb, home.path(), "hello-world").await;
    // The non-controller documents are reported, not applied, without --apply.
    let (_, stderr) = text(&out);
    assert!(stderr.contains("pass --apply"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catset_example_rolls_out_pods_and_volumes_in_order() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let out = apply_example_once(&sb, home.path(), "catset").await;
    assert_ok(&out);
    // The hook creates each Pod once the one before is Ready: --once ends only when every
    // child is Current (kstatus), not at the first sync that writes nothing.
    let pod_names = names(&sb, &pods(), "default").await;
    assert_eq!(
        pod_names,
        ["nginx-backend-0", "nginx-backend-1", "nginx-backend-2"]
    );
    for name in &pod_names {
        let pod = get(&sb, &pods(), Some("default"), name).await.unwrap();
        let ready = pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(ready, "{name} is Ready when --once exits: {pod:#}");
    }
    let pvcs = names(
        &sb,
        &core_ar("PersistentVolumeClaim", "persistentvolumeclaims"),
        "default",
    )
    .await;
    assert_eq!(
        pvcs,
        [
            "www-nginx-backend-0",
            "www-nginx-backend-1",
            "www-nginx-backend-2"
        ]
    );
    let parent = get(
        &sb,
        &ar("example.kubectl-meta.dev", "CatSet", "catsets"),
        Some("default"),
        "nginx-backend",
    )
    .await
    .expect("catset");
    assert_eq!(parent["status"]["readyReplicas"], json!(3), "{parent:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_propagation_example_copies_into_every_target_namespace() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let out = apply_example_once(&sb, home.path(), "configmap-propagation").await;
    assert_ok(&out);
    let cm = core_ar("ConfigMap", "configmaps");
    let source = get(&sb, &cm, Some("config-source"), "app-settings")
        .await
        .expect("source configmap");
    for ns in ["team-a", "team-b"] {
        let copy = get(&sb, &cm, Some(ns), "app-settings")
            .await
            .unwrap_or_else(|| panic!("no copy in {ns}"));
        assert_eq!(copy["data"], source["data"], "{ns}");
    }
}

/// service-per-pod (DecoratorController on built-in StatefulSets): one Service per ordinal,
/// each selecting exactly the Pod of that name, attached to the StatefulSet; a second run
/// writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_per_pod_example_gives_each_pod_its_service_and_is_idempotent() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let out = apply_example_once(&sb, home.path(), "service-per-pod").await;
    assert_ok(&out);
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("applied StatefulSet default/nginx"),
        "{stderr}"
    );

    let sts_ar = ApiResource {
        group: "apps".into(),
        version: "v1".into(),
        api_version: "apps/v1".into(),
        kind: "StatefulSet".into(),
        plural: "statefulsets".into(),
    };
    let sts = get(&sb, &sts_ar, Some("default"), "nginx")
        .await
        .expect("statefulset nginx");
    let uid = sts["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        sts["metadata"]["labels"]["service-per-pod/services"],
        json!("3"),
        "{sts:#}"
    );
    assert_eq!(
        sts["metadata"]["finalizers"],
        json!(["metacontroller.io/decoratorcontroller-service-per-pod"])
    );

    // The sandbox's StatefulSet controller makes the Pods (label
    // statefulset.kubernetes.io/pod-name); one more Pod belongs to no ordinal.
    let pod_api: Api<DynamicObject> = Api::namespaced_with(sb.client.clone(), "default", &pods());
    let other: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "other", "labels": {"app": "nginx",
            "statefulset.kubernetes.io/pod-name": "other"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
    }))
    .unwrap();
    pod_api
        .create(&PostParams::default(), &other)
        .await
        .unwrap();
    wait_for("the StatefulSet's Pods", TIMEOUT, || {
        let sb = &sb;
        async move {
            let n = names(sb, &pods(), "default").await;
            (n == ["nginx-0", "nginx-1", "nginx-2", "other"]).then_some(())
        }
    })
    .await;

    let svc_ar = core_ar("Service", "services");
    let mut services = names(&sb, &svc_ar, "default").await;
    // `kubernetes` is the API server's own Service, in `default` on every cluster.
    assert_eq!(services, ["kubernetes", "nginx-0", "nginx-1", "nginx-2"]);
    services.remove(0);
    for name in &services {
        let svc = get(&sb, &svc_ar, Some("default"), name).await.unwrap();
        let refs = svc["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(refs.len(), 1, "{svc:#}");
        assert_eq!(refs[0]["kind"], json!("StatefulSet"));
        assert_eq!(refs[0]["name"], json!("nginx"));
        assert_eq!(refs[0]["uid"], json!(uid));
        assert_eq!(refs[0]["controller"], json!(true));
        assert_eq!(
            svc["metadata"]["annotations"]["metacontroller.k8s.io/decorator-controller"],
            json!("service-per-pod")
        );
        assert_eq!(
            svc["spec"]["selector"],
            json!({"statefulset.kubernetes.io/pod-name": name})
        );
        assert_eq!(svc["spec"]["ports"][0]["port"], json!(80), "{svc:#}");
        assert_eq!(
            svc["spec"]["ports"][0]["targetPort"],
            json!(8080),
            "{svc:#}"
        );
        // The selector picks exactly the Pod of the same name.
        let selector = svc["spec"]["selector"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
            .collect::<Vec<_>>()
            .join(",");
        let selected: Vec<String> = pod_api
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        assert_eq!(
            selected,
            [name.as_str()],
            "Service {name} selects {selected:?}"
        );
    }

    // A second run with nothing changed converges without a single write.
    rerun_writes_nothing(&sb, home.path(), "service-per-pod").await;
    assert_eq!(
        names(&sb, &svc_ar, "default").await,
        ["kubernetes", "nginx-0", "nginx-1", "nginx-2"]
    );
}

/// The HTTP form: the example's Python server on a free port, reached through --hook-base-url.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_world_webhook_form_through_hook_base_url() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let mut server = Command::new("python3")
        .arg(repo().join("examples/hello-world/server.py"))
        .args(["--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs");
    let health = format!("127.0.0.1:{port}");
    wait_for("the example hook server to listen", TIMEOUT, || {
        let h = health.clone();
        async move { tokio::net::TcpStream::connect(h).await.ok().map(|_| ()) }
    })
    .await;
    let dir = example("hello-world");
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--apply",
            "-f",
            &format!("{dir}/00-crd.yaml"),
            "-f",
            &format!("{dir}/20-sample.yaml"),
            "-f",
            &format!("{dir}/webhook/controller.yaml"),
            "--hook-base-url",
            &format!("http://127.0.0.1:{port}"),
            "--once",
        ],
    ))
    .await;
    let _ = server.kill();
    let _ = server.wait();
    let stdout = assert_ok(&out);
    assert!(stdout.contains("hook      sync 200"), "{stdout}");
    assert!(get(&sb, &pods(), Some("default"), "hello").await.is_some());
}

/// `--sandbox`: zero setup; the kubeconfig path is printed and points at the running server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_flag_runs_an_example_with_zero_setup_and_json_output() {
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("dev.kubeconfig");
    let out = run(meta(
        home.path(),
        &[
            "dev",
            "--sandbox",
            "--write-kubeconfig",
            &kubeconfig.display().to_string(),
            "--apply",
            "-f",
            &example("hello-world"),
            "--once",
            "-o",
            "json",
        ],
    ))
    .await;
    let stdout = assert_ok(&out);
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains(&format!("kubeconfig: {}", kubeconfig.display())),
        "{stderr}"
    );
    assert!(kubeconfig.exists());
    let events: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    let created: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "action" && e["verb"] == "create")
        .collect();
    assert_eq!(created.len(), 1, "{stdout}");
    assert_eq!(created[0]["resource"], "Pod.v1");
    assert_eq!(created[0]["object"], "default/hello");
    let hook = events
        .iter()
        .find(|e| e["event"] == "hookCalled")
        .expect("a hookCalled event");
    assert_eq!(hook["hook"], "sync");
    assert!(hook["latencyMs"].as_f64().unwrap() > 0.0);
}

/// A definition with a mistake: the error names the file, the document and the field, and
/// nothing at all is written (not even the CRD next to it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_definition_is_rejected_before_anything_is_written() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let crd = std::fs::read_to_string(repo().join("examples/hello-world/00-crd.yaml")).unwrap();
    std::fs::write(dir.path().join("00-crd.yaml"), crd).unwrap();
    std::fs::write(
        dir.path().join("10-controller.yaml"),
        "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: broken
spec:
  parentResource: {apiVersion: example.kubectl-meta.dev/v1, resource: helloworlds}
  childResources:
  - apiVersion: v1
    resource: pods
    updateStrategy: {method: Rolling}
  hooks:
    sync: {webhook: {url: 'http://127.0.0.1:9/sync'}}
",
    )
    .unwrap();
    let rv_before = global_rv(&sb).await;
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--apply",
            "-f",
            &dir.path().display().to_string(),
            "--once",
        ],
    ))
    .await;
    let stderr = assert_fails(&out);
    assert!(stderr.contains("10-controller.yaml"), "{stderr}");
    assert!(
        stderr.contains("spec.childResources[0].updateStrategy.method"),
        "{stderr}"
    );
    assert!(stderr.contains("Rolling"), "{stderr}");
    assert_eq!(global_rv(&sb).await, rv_before, "something was written");
    let crds = ar(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    assert!(
        get(&sb, &crds, None, "helloworlds.example.kubectl-meta.dev")
            .await
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_definitions_and_missing_files_are_clear_errors() {
    let home = tempfile::tempdir().unwrap();
    let out = run(meta(home.path(), &["dev"])).await;
    let stderr = assert_fails(&out);
    assert!(stderr.contains("-f FILE|DIR"), "{stderr}");
    let out = run(meta(
        home.path(),
        &["dev", "-f", "/nonexistent/controller.yaml", "--once"],
    ))
    .await;
    let stderr = assert_fails(&out);
    assert!(stderr.contains("/nonexistent/controller.yaml"), "{stderr}");
}

/// A context that is neither on loopback nor a known local name is refused before any request;
/// the message says how to allow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_context_needs_allow_context() {
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("remote.kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: 'https://prod.example.invalid:6443'}
users:
- name: admin
  user: {token: not-a-real-token}
contexts:
- name: prod
  context: {cluster: prod, user: admin, namespace: default}
current-context: prod
",
    )
    .unwrap();
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "dev",
            "-f",
            &example("hello-world"),
            "--once",
        ],
    ))
    .await;
    let stderr = assert_fails(&out);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("refusing to write to context \"prod\""),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-context prod"), "{stderr}");
    assert!(
        stderr.contains("https://prod.example.invalid:6443"),
        "{stderr}"
    );
}

/// Two dev loops never drive the same controller: the second says who holds it. Ctrl-C stops
/// the first cleanly and releases the lease, so the next one runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_dev_loop_is_refused_by_the_lease_and_ctrl_c_releases_it() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let first = Background::start(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--apply",
            "-f",
            &example("hello-world"),
            "--no-tui",
        ],
    ));
    first.wait_output("start     CompositeController").await;
    first.wait_output("create    Pod.v1 default/hello").await;

    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "-f",
            &example("hello-world"),
            "--once",
        ],
    ))
    .await;
    let stderr = assert_fails(&out);
    assert!(stderr.contains("hello-world-controller"), "{stderr}");
    assert!(stderr.contains("held by"), "{stderr}");

    let (ok, stderr) = first.interrupt().await;
    assert!(ok, "the dev loop did not exit cleanly on SIGINT: {stderr}");
    let leases = names(
        &sb,
        &ar("coordination.k8s.io", "Lease", "leases"),
        "default",
    )
    .await;
    // Released = deleted, so the next dev loop starts at once.
    assert!(leases.is_empty(), "lease left behind: {leases:?}");
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "-f",
            &example("hello-world"),
            "--once",
        ],
    ))
    .await;
    assert_ok(&out);
}

/// A CompositeController object of the same name on the cluster means an in-cluster
/// Metacontroller may run it: refused without --force, allowed with it; --from-cluster reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_cluster_controller_of_the_same_name_needs_force_and_from_cluster_reads_it() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    // The Metacontroller CRD and the example's definition as an object on the cluster.
    let cc_api = metacontroller_api(&sb, "CompositeController", "compositecontrollers").await;
    let yaml =
        std::fs::read_to_string(repo().join("examples/hello-world/10-controller.yaml")).unwrap();
    let mut cc: Value = serde_saphyr::from_str(&yaml).unwrap();
    // In a cluster the hook would be a webhook; the exec form works here because --from-cluster
    // definitions run in the current directory, so point it at the script by absolute path.
    cc["spec"]["hooks"]["sync"] = json!({"exec": {"command":
        ["python3", repo().join("examples/hello-world/exec_hook.py").display().to_string()]}});
    let obj: DynamicObject = serde_json::from_value(cc).unwrap();
    cc_api.create(&PostParams::default(), &obj).await.unwrap();

    let files = [example("hello-world")];
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--apply",
            "-f",
            &files[0],
            "--once",
        ],
    ))
    .await;
    let stderr = assert_fails(&out);
    assert!(
        stderr.contains("CompositeController hello-world-controller exists"),
        "{stderr}"
    );
    assert!(stderr.contains("--force"), "{stderr}");
    assert!(
        get(&sb, &pods(), Some("default"), "hello").await.is_none(),
        "wrote before refusing"
    );

    // --from-cluster, with --force: runs the cluster's definition.
    let apply_only: Vec<String> = ["00-crd.yaml", "20-sample.yaml"]
        .iter()
        .map(|f| format!("{}/{f}", files[0]))
        .collect();
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--apply",
            "-f",
            &apply_only[0],
            "-f",
            &apply_only[1],
            "--from-cluster",
            "hello-world-controller",
            "--force",
            "--once",
        ],
    ))
    .await;
    let stdout = assert_ok(&out);
    assert!(
        stdout.contains("create    Pod.v1 default/hello"),
        "{stdout}"
    );
    let (_, stderr) = text(&out);
    assert!(stderr.contains("continuing because of --force"), "{stderr}");

    // A name the cluster does not have.
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--from-cluster",
            "nope",
            "--once",
        ],
    ))
    .await;
    let stderr = assert_fails(&out);
    assert!(
        stderr
            .contains("no CompositeController or DecoratorController or MapController named nope"),
        "{stderr}"
    );
}

/// `dev --apply -f DIR --once --timeout 4` against `sb`, which must fail with 4 at the timeout:
/// the output and stderr.
async fn once_failing_with_4(
    sb: &common::TestSandbox,
    home: &std::path::Path,
    dir: &std::path::Path,
) -> (std::process::Output, String) {
    let dir = dir.display().to_string();
    let args = ["--kubeconfig", &kc(sb), "dev", "--apply", "-f", &dir];
    let out = run(meta(
        home,
        &[&args[..], &["--once", "--timeout", "4"]].concat(),
    ))
    .await;
    let stderr = assert_fails(&out);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("not converged after 4s"), "{stderr}");
    (out, stderr)
}

/// A child the API server rejects as invalid (422: a Pod without containers) is the hook's to
/// fix: the write error is classified Invalid, so `--once` ends with 4 (not converged), not 3
/// (cluster), naming the parent, the object and the server's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_exits_4_when_the_server_rejects_a_child_as_invalid() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    exec_hook_controller(
        dir.path(),
        "invalid-child",
        "import json, sys\nreq = json.load(sys.stdin)\nname = req['parent']['metadata']['name']\nprint(json.dumps({'status': {}, 'children': [{'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': name}, 'spec': {'containers': []}}]}))\n",
    );
    let (_, stderr) = once_failing_with_4(&sb, home.path(), dir.path()).await;
    assert!(stderr.contains("invalid-child default/hello"), "{stderr}");
    assert!(
        stderr.contains("create Pod.v1 default/hello: ") && stderr.contains("(422 Invalid)"),
        "{stderr}"
    );
    assert!(stderr.contains("spec.containers"), "{stderr}");
    assert!(names(&sb, &pods(), "default").await.is_empty());
}

/// `--once` retries a failing sync with backoff until `--timeout`, then exits 4 naming the
/// parent and the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_fails_when_a_sync_fails_and_names_the_parent() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    exec_hook_controller(
        dir.path(),
        "failing",
        "import sys\nsys.stdin.read()\nopen('calls', 'a').write('call\\n')\nsys.stderr.write('boom: the hook is broken\\n')\nsys.exit(3)\n",
    );
    let (out, stderr) = once_failing_with_4(&sb, home.path(), dir.path()).await;
    assert!(stderr.contains("failing default/hello"), "{stderr}");
    // It retried (the hook was called more than once) and said what it was waiting for.
    let (stdout, _) = text(&out);
    assert!(stdout.contains("--once: waiting for"), "{stdout}");
    assert!(stderr.contains("boom: the hook is broken"), "{stderr}");
    let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
    assert!(calls.lines().count() >= 2, "retried: {calls:?}");
    assert!(stderr.contains("boom: the hook is broken"), "{stderr}");
    assert!(names(&sb, &pods(), "default").await.is_empty());
}

/// `--from-cluster decoratorcontroller/NAME` runs a DecoratorController read from the cluster;
/// without --force, one of the same name there stops `dev`; a wrong kind prefix is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_cluster_reads_a_decorator_controller() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dc_api = metacontroller_api(&sb, "DecoratorController", "decoratorcontrollers").await;
    let dir = example("service-per-pod");
    let yaml = std::fs::read_to_string(format!("{dir}/10-controller.yaml")).unwrap();
    let mut dc: Value = serde_saphyr::from_str(&yaml).unwrap();
    let script = format!("{dir}/exec_hook.py");
    for h in ["sync", "finalize"] {
        dc["spec"]["hooks"][h] = json!({"exec": {"command": ["python3", script]}});
    }
    let obj: DynamicObject = serde_json::from_value(dc).unwrap();
    dc_api.create(&PostParams::default(), &obj).await.unwrap();

    // The file's definition: refused, an in-cluster Metacontroller may run it.
    let out = run(meta(
        home.path(),
        &["--kubeconfig", &kc(&sb), "dev", "-f", &dir, "--once"],
    ))
    .await;
    let stderr = assert_fails(&out);
    assert!(
        stderr.contains("DecoratorController service-per-pod exists"),
        "{stderr}"
    );

    // The cluster's definition, with --force: the StatefulSet is decorated.
    let sample = format!("{dir}/20-sample.yaml");
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--apply",
            "-f",
            &sample,
            "--from-cluster",
            "decoratorcontroller/service-per-pod",
            "--force",
            "--once",
        ],
    ))
    .await;
    assert_ok(&out);
    let sts_ar = ApiResource {
        group: "apps".into(),
        version: "v1".into(),
        api_version: "apps/v1".into(),
        kind: "StatefulSet".into(),
        plural: "statefulsets".into(),
    };
    let sts = get(&sb, &sts_ar, Some("default"), "nginx")
        .await
        .expect("statefulset nginx");
    assert_eq!(
        sts["metadata"]["finalizers"],
        json!(["metacontroller.io/decoratorcontroller-service-per-pod"])
    );

    // A kind that cannot be read from the cluster.
    let out = run(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--from-cluster",
            "statefulset/x",
            "--once",
        ],
    ))
    .await;
    let stderr = assert_fails(&out);
    assert!(
        stderr.contains(
            "use compositecontroller/NAME, decoratorcontroller/NAME or mapcontroller/NAME"
        ),
        "{stderr}"
    );
}
