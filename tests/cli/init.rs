//! `kubectl meta init`: a generated project works as generated. Per language and kind (issue
//! 37: python x composite, decorator, map; javascript, go, rust x composite), in an empty
//! directory with a private HOME and no kubeconfig: `init`, then the end-to-end run on an
//! in-process sandbox (`dev --once`) and the hook tests (`test`) pass. Also `--from-example`
//! (the inferred CRD accepts the example, rejects a wrong type with a 422 naming the field,
//! prunes an unknown field) and bad input (exit 2, nothing written).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use crate::common::cli::{assert_fails, assert_ok, meta, run, text};
use crate::common::{TIMEOUT, kubectl_async, start, wait_for};

/// `kubectl meta init ARGS` with `cwd` as the working directory.
async fn init(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    let mut all = vec!["init"];
    all.extend_from_slice(args);
    let mut cmd = meta(home, &all);
    cmd.current_dir(cwd);
    run(cmd).await
}

/// Where the generated Go and Rust hooks build (shared by the tests, so serde and Go's
/// standard library are compiled once).
fn hook_build_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("init-hooks")
}

/// The environment the project's `hooks[].build` steps need (caches shared by the tests).
fn with_build_env(cmd: &mut Command) {
    crate::common::hook_build_env::hook_build_env(cmd, &hook_build_cache());
}

/// Run the project with no flags, as a newcomer does in its directory: `dev-once`
/// (`kubectl meta dev --once`: the project file's sandbox, CRD and sample applied, hooks
/// built, the controller run until converged) or `test` (`kubectl meta test`: the project's
/// hook tests).
async fn run_project(home: &Path, dir: &Path, what: &str) -> Output {
    let args: &[&str] = match what {
        "dev-once" => &["dev", "--once"],
        "test" => &["test"],
        other => panic!("run_project: unknown step {other}"),
    };
    let mut cmd = meta(home, args);
    cmd.current_dir(dir);
    with_build_env(&mut cmd);
    run(cmd).await
}

/// init with `args` in a new directory `name`, then the end-to-end run and the hook tests;
/// `created` is what the run must have created (`Kind.version namespace/name`).
async fn init_run_and_test(
    name: &str,
    args: &[&str],
    created: &[&str],
) -> (tempfile::TempDir, PathBuf) {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join(name);
    let mut all = vec![name];
    all.extend_from_slice(args);
    assert_ok(&init(home.path(), root.path(), &all).await);
    assert!(dir.join("kubectl-meta.yaml").is_file());
    assert!(dir.join(".github/workflows/test.yaml").is_file());

    let out = run_project(home.path(), &dir, "dev-once").await;
    let log = assert_ok(&out);
    for c in created {
        assert!(
            log.lines().any(|l| l.contains(" create ") && l.contains(c)),
            "`dev --once` should have created {c}:\n{log}"
        );
    }
    let out = run_project(home.path(), &dir, "test").await;
    let stdout = assert_ok(&out);
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
    (root, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_composite_in_the_current_directory_runs_and_its_test_passes() {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("website");
    std::fs::create_dir(&dir).unwrap();
    // No DIR: the current (empty) directory; the parent kind comes from its name.
    let out = init(home.path(), &dir, &[]).await;
    assert_ok(&out);
    let crd = std::fs::read_to_string(dir.join("crd.yaml")).unwrap();
    assert!(
        crd.contains("kind: Website") && crd.contains("group: example.com"),
        "{crd}"
    );
    let controller = std::fs::read_to_string(dir.join("controller.yaml")).unwrap();
    assert!(
        controller.contains("Metacontroller's default would be OnDelete")
            && controller.contains("method: InPlace"),
        "{controller}"
    );
    let hook = std::fs::read_to_string(dir.join("hook/hook.py")).unwrap();
    assert!(
        hook.contains("child_key(\"ConfigMap\", \"v1\")") && !hook.contains("\"ConfigMap.v1\""),
        "the children key is built by the helper, never typed by hand:\n{hook}"
    );
    let log = assert_ok(&run_project(home.path(), &dir, "dev-once").await);
    assert!(
        log.contains("ConfigMap.v1 default/sample"),
        "the ConfigMap child is created:\n{log}"
    );
    let stdout = assert_ok(&run_project(home.path(), &dir, "test").await);
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");

    // The test compares for real: a hook that answers differently fails it.
    std::fs::write(
        dir.join("hook/hook.py"),
        hook.replace(
            "\"data\": string_fields(spec)",
            "\"data\": {\"changed\": \"yes\"}",
        ),
    )
    .unwrap();
    let out = run_project(home.path(), &dir, "test").await;
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL") && stdout.contains("changed"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_decorator_runs_and_its_test_passes() {
    let (_root, dir) = init_run_and_test(
        "labeler",
        &["--kind", "decorator"],
        &["ConfigMap.v1 default/sample-configmap"],
    )
    .await;
    let controller = std::fs::read_to_string(dir.join("controller.yaml")).unwrap();
    assert!(
        controller.contains("kind: DecoratorController"),
        "{controller}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_decorator_of_an_existing_resource_has_no_crd_and_runs() {
    let (_root, dir) = init_run_and_test(
        "deco",
        &[
            "--kind",
            "decorator",
            "--target",
            "configmaps",
            "--child",
            "secrets",
        ],
        &["Secret.v1 default/sample-secret"],
    )
    .await;
    assert!(
        !dir.join("crd.yaml").exists(),
        "an existing kind needs no CRD"
    );
    let controller = std::fs::read_to_string(dir.join("controller.yaml")).unwrap();
    assert!(
        controller.contains("labelSelector"),
        "only labelled targets are decorated:\n{controller}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_map_runs_and_its_test_passes() {
    init_run_and_test(
        "mapper",
        &["--kind", "map"],
        &["ConfigMap.v1 default/sample-input-sample"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_composite_runs_and_its_test_passes() {
    init_run_and_test(
        "js-site",
        &[
            "--lang",
            "javascript",
            "--child",
            "configmaps",
            "--child",
            "services",
        ],
        &["ConfigMap.v1 default/sample", "Service.v1 default/sample"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_composite_runs_and_its_test_passes() {
    let (_root, dir) = init_run_and_test(
        "go-site",
        &["--lang", "go", "--parent", "Website.demo.example.com"],
        &["ConfigMap.v1 default/sample"],
    )
    .await;
    let gomod = std::fs::read_to_string(dir.join("hook/go.mod")).unwrap();
    assert!(
        !gomod.contains("require"),
        "standard library only:\n{gomod}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_composite_runs_and_its_test_passes() {
    init_run_and_test(
        "rust-site",
        &[
            "--lang",
            "rust",
            "--child",
            "configmaps",
            "--child",
            "deployments.apps",
        ],
        &[
            "ConfigMap.v1 default/sample",
            "Deployment.apps/v1 default/sample",
        ],
    )
    .await;
}

/// A webhook project: `dev --hook-server` starts the generated server (as the project file's
/// `hooks[].server` says), and the same test case passes against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_webhook_form_serves_the_hook() {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    assert_ok(&init(home.path(), root.path(), &["web", "--hook", "webhook"]).await);
    let dir = root.path().join("web");
    let project = std::fs::read_to_string(dir.join("kubectl-meta.yaml")).unwrap();
    assert!(
        project.contains("server: python3 hook/hook.py --serve 8081"),
        "{project}"
    );
    let port = crate::common::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let server = format!("python3 hook/hook.py --serve {port}");
    let mut cmd = meta(
        home.path(),
        &[
            "test",
            "hook-tests",
            "-f",
            "controller.yaml",
            "--hook-base-url",
            &base,
            "--hook-server",
            &server,
        ],
    );
    cmd.current_dir(&dir);
    let stdout = assert_ok(&run(cmd).await);
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
}

const EXAMPLE: &str = "apiVersion: demo.example.com/v1
kind: Website
metadata:
  name: mysite
spec:
  title: My site
  replicas: 2
  ratio: 0.5
  tls: true
  ports:
  - {name: http, port: 80}
  owner: {team: web, oncall: [alice, bob]}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_example_crd_accepts_the_example_rejects_a_wrong_type_and_prunes_unknown_fields() {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("website.yaml"), EXAMPLE).unwrap();
    assert_ok(
        &init(
            home.path(),
            root.path(),
            &["site", "--from-example", "website.yaml"],
        )
        .await,
    );
    let dir = root.path().join("site");
    let crd = std::fs::read_to_string(dir.join("crd.yaml")).unwrap();
    assert!(
        crd.contains("name: websites.demo.example.com") && crd.contains("name: v1"),
        "{crd}"
    );

    let sb = start().await;
    let kc = sb.kubeconfig();
    let f = |p: &str| dir.join(p).display().to_string();
    assert_ok(&kubectl_async(&kc, &["apply", "-f", &f("crd.yaml")], None).await);
    let ar = ApiResource {
        group: "demo.example.com".into(),
        version: "v1".into(),
        api_version: "demo.example.com/v1".into(),
        kind: "Website".into(),
        plural: "websites".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(sb.client.clone(), "default", &ar);
    wait_for("the Website CRD to be served", TIMEOUT, || {
        let api = api.clone();
        async move { api.list(&Default::default()).await.ok().map(|_| ()) }
    })
    .await;
    // The example (the generated sample) is accepted as it is.
    let out = kubectl_async(&kc, &["apply", "-f", &f("sample.yaml")], None).await;
    assert!(out.status.success(), "{:?}", text(&out));
    let got = serde_json::to_value(api.get("mysite").await.unwrap()).unwrap();
    assert_eq!(got["spec"]["ratio"], json!(0.5));
    assert_eq!(got["spec"]["owner"]["oncall"], json!(["alice", "bob"]));

    // A wrong type: 422, naming the field (through kubectl and through the API).
    let bad = EXAMPLE
        .replace("name: mysite", "name: bad")
        .replace("replicas: 2", "replicas: two");
    let out = kubectl_async(&kc, &["apply", "-f", "-"], Some(&bad)).await;
    let (_, stderr) = text(&out);
    assert!(
        !out.status.success() && stderr.contains("spec.replicas"),
        "{stderr}"
    );
    let mut obj: Value = serde_saphyr::from_str(&bad).unwrap();
    obj["metadata"]["namespace"] = json!("default");
    let err = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(obj).unwrap(),
        )
        .await
        .expect_err("a string where the example had an integer is rejected");
    match err {
        kube::Error::Api(e) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(e.message.contains("spec.replicas"), "{e:?}");
        }
        other => panic!("expected a 422, got {other:?}"),
    }

    // An unknown field is pruned (structural schema, no preserve-unknown-fields on spec).
    let mut obj: Value = serde_saphyr::from_str(EXAMPLE).unwrap();
    obj["metadata"] = json!({"name": "pruned", "namespace": "default"});
    obj["spec"]["surprise"] = json!("dropped");
    obj["spec"]["owner"]["pager"] = json!("dropped too");
    api.create(
        &PostParams::default(),
        &serde_json::from_value(obj).unwrap(),
    )
    .await
    .expect("created (the unknown fields pruned)");
    let got = serde_json::to_value(api.get("pruned").await.unwrap()).unwrap();
    assert!(got["spec"].get("surprise").is_none(), "{got:#}");
    assert!(got["spec"]["owner"].get("pager").is_none(), "{got:#}");
    assert_eq!(got["spec"]["title"], json!("My site"));
}

/// Every bad input: exit 2, a message saying what and how to fix, and nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exits_2_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("broken.yaml"), "apiVersion: [unclosed\n").unwrap();
    std::fs::write(
        root.path().join("nulls.yaml"),
        "apiVersion: demo.example.com/v1\nkind: Website\nspec:\n  title: null\n",
    )
    .unwrap();
    std::fs::write(
        root.path().join("core.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nspec: {a: b}\n",
    )
    .unwrap();
    std::fs::write(root.path().join("site.yaml"), EXAMPLE).unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["p", "--lang", "cobol"],
            &["cobol", "python, javascript, go, rust"],
        ),
        (
            &["p", "--kind", "operator"],
            &["operator", "composite, decorator, map"],
        ),
        (
            &["p", "--parent", "website"],
            &["--parent website", "KIND.GROUP"],
        ),
        (
            &["p", "--parent", "Website.Example"],
            &["lowercase DNS name"],
        ),
        (&["p", "--version", "one"], &["--version one"]),
        (
            &["p", "--child", "widgets.acme.io"],
            &["widgets.acme.io", "configmaps", "deployments.apps"],
        ),
        (
            &["p", "--child", "deployments"],
            &["did you mean deployments.apps?"],
        ),
        (
            &["p", "--target", "configmaps"],
            &["--target applies only to --kind decorator"],
        ),
        (
            &["p", "--from-example", "broken.yaml"],
            &["broken.yaml", "not a YAML"],
        ),
        (
            &["p", "--from-example", "nulls.yaml"],
            &["nulls.yaml", "spec.title is null"],
        ),
        (
            &["p", "--from-example", "core.yaml"],
            &["core.yaml", "core API version"],
        ),
        (
            &["p", "--from-example", "missing.yaml"],
            &["missing.yaml", "cannot read"],
        ),
        (
            &[
                "p",
                "--from-example",
                "site.yaml",
                "--parent",
                "Shop.demo.example.com",
            ],
            &[
                "Website.demo.example.com",
                "Shop.demo.example.com",
                "must agree",
            ],
        ),
        (&["9lives"], &["9lives", "--parent KIND.GROUP"]),
    ];
    for (args, wants) in cases {
        let out = init(home.path(), root.path(), args).await;
        let stderr = assert_fails(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        for w in *wants {
            assert!(stderr.contains(w), "{args:?}: expected {w:?} in:\n{stderr}");
        }
        for d in ["p", "9lives"] {
            assert!(!root.path().join(d).exists(), "{args:?} wrote {d}");
        }
    }

    // A non-empty directory: refused without --force, and left as it was.
    let full = root.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("notes.txt"), "mine").unwrap();
    let out = init(home.path(), root.path(), &["full"]).await;
    let stderr = assert_fails(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is not empty")
            && stderr.contains("notes.txt")
            && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), 1);
    // With --force it writes, keeping what is not its own.
    assert_ok(&init(home.path(), root.path(), &["full", "--force"]).await);
    assert!(full.join("kubectl-meta.yaml").is_file() && full.join("notes.txt").is_file());
}
