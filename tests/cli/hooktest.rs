//! `kubectl meta dev --record` and `kubectl meta test`, with the real binary: cases recorded
//! from `dev --sandbox --once` on the examples (composite, decorator, map with tombstones,
//! customize, exec hooks and a managed webhook server) replay green; a changed hook fails with
//! the field path and exit 1, `--update` fixes it; re-ordered requests and re-spelled
//! quantities still pass; an invalid child fails only with `--validate`; Secret values never
//! reach a file unless asked; bad input and unreachable hooks have their own exit codes.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::cli::{example, meta, repo, text};
use crate::common::schema::validate;
use serde_json::Value;

/// The snapshot-schedule example's hook reads the time from here when set, so its answers
/// (snapshot names, resyncAfterSeconds) are the same at recording and at replay.
const PINNED_NOW: (&str, &str) = ("SNAPSHOT_SCHEDULE_NOW", "2026-11-24T10:00:00Z");

/// Run the binary to completion.
fn km(home: &Path, args: &[&str]) -> Output {
    meta(home, args)
        .env(PINNED_NOW.0, PINNED_NOW.1)
        .output()
        .expect("kubectl-meta runs")
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn show(out: &Output) -> String {
    let (o, e) = text(out);
    format!("exit {:?}\nstdout:\n{o}\nstderr:\n{e}", out.status.code())
}

/// Every case file below `dir`.
fn case_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A copy of example `name` (and the shared hookkit.py) in `root`, to edit its hook.
fn copy_example(root: &Path, name: &str) -> PathBuf {
    let dst = root.join("examples").join(name);
    std::fs::create_dir_all(dst.join("webhook")).unwrap();
    std::fs::copy(
        repo().join("examples/hookkit.py"),
        root.join("examples/hookkit.py"),
    )
    .unwrap();
    for e in std::fs::read_dir(example(name)).unwrap().flatten() {
        if e.path().is_file() {
            std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
        }
    }
    dst
}

/// `dev --sandbox --apply -f DIR --once --record REC` (plus `extra`), which must succeed.
fn record(home: &Path, defs: &[&str], rec: &Path, extra: &[&str]) {
    let mut args = vec!["dev", "--sandbox", "--apply", "--once", "--timeout", "120"];
    for d in defs {
        args.extend(["-f", d]);
    }
    let rec = rec.display().to_string();
    args.extend(["--record", &rec]);
    args.extend(extra);
    let out = km(home, &args);
    assert_eq!(code(&out), 0, "recording failed: {}", show(&out));
}

/// `test REC -f DEFS...` (plus `extra`).
fn replay(home: &Path, rec: &Path, defs: &[&str], extra: &[&str]) -> Output {
    let rec = rec.display().to_string();
    let mut args = vec!["test", rec.as_str()];
    for d in defs {
        args.extend(["-f", d]);
    }
    args.extend(extra);
    km(home, &args)
}

/// The examples recorded from real syncs replay green: composite with exec hooks
/// (hello-world), customize + sync (configmap-propagation), a decorator with finalize
/// (service-per-pod), a map controller with tombstones (snapshot-schedule).
#[test]
fn cases_recorded_from_the_examples_replay_green() {
    let home = tempfile::tempdir().unwrap();
    for (name, hooks) in [
        ("hello-world", &["sync"][..]),
        ("configmap-propagation", &["customize", "sync"][..]),
        ("service-per-pod", &["sync"][..]),
        ("snapshot-schedule", &["map"][..]),
    ] {
        let rec = home.path().join(format!("rec-{name}"));
        let dir = example(name);
        record(home.path(), &[&dir], &rec, &[]);
        let files = case_files(&rec);
        assert!(!files.is_empty(), "{name}: nothing recorded");
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for h in hooks {
            assert!(
                names.iter().any(|n| n.starts_with(&format!("{h}-"))),
                "{name}: no {h} case in {names:?}"
            );
        }
        let out = replay(home.path(), &rec, &[&dir], &[]);
        assert_eq!(code(&out), 0, "{name}: {}", show(&out));
        let (stdout, _) = text(&out);
        assert!(
            stdout.contains(&format!("{} passed, 0 failed", files.len())),
            "{name}: {stdout}"
        );
        assert_eq!(
            stdout.lines().filter(|l| l.starts_with("ok ")).count(),
            files.len(),
            "{name}: a line per case: {stdout}"
        );
    }
}

/// The tombstone hook: a map key whose input is deleted. Recorded by hand from the example's
/// own hook (its answer), then replayed.
#[test]
fn tombstone_cases_replay() {
    let home = tempfile::tempdir().unwrap();
    let rec = home.path().join("rec");
    let dir = example("snapshot-schedule");
    record(home.path(), &[&dir], &rec, &[]);
    let map_case = case_files(&rec)
        .into_iter()
        .find(|f| f.file_name().unwrap().to_string_lossy().starts_with("map-"))
        .expect("a map case");
    // The same key after its input is gone: the tombstone request is the map request without
    // the input.
    let body = std::fs::read_to_string(&map_case).unwrap();
    let mut case: Value = serde_saphyr::from_str(&body).unwrap();
    case["hook"] = "tombstone".into();
    case["request"].as_object_mut().unwrap().remove("input");
    case["response"] = serde_json::json!({"outputs": []});
    let file = rec.join("tombstone-by-hand.yaml");
    std::fs::write(&file, serde_json::to_string_pretty(&case).unwrap()).unwrap();
    // Whatever the hook keeps, --update takes its answer as the expected one; a second run
    // replays that tombstone answer green.
    let out = replay(home.path(), &file, &[&dir], &["--update"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = replay(home.path(), &file, &[&dir], &["-o", "json"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let (stdout, _) = text(&out);
    let first: Value = serde_json::from_str(stdout.lines().next().unwrap_or("{}")).unwrap();
    assert_eq!(first["result"], "pass", "{stdout}");
    assert!(
        first["title"]
            .as_str()
            .unwrap_or_default()
            .starts_with("tombstone hook of MapController"),
        "{stdout}"
    );
}

/// A changed hook fails with the field path (exit 1); `--update` shows the change and makes
/// the run pass; -o json, --junit and -k follow.
#[test]
fn a_changed_hook_fails_with_the_field_path_and_update_fixes_it() {
    let home = tempfile::tempdir().unwrap();
    let dir = copy_example(home.path(), "hello-world");
    let d = dir.display().to_string();
    let rec = home.path().join("rec");
    record(home.path(), &[&d], &rec, &[]);
    let n = case_files(&rec).len();
    let out = replay(home.path(), &rec, &[&d], &[]);
    assert_eq!(code(&out), 0, "{}", show(&out));

    let hook = dir.join("hook.py");
    let src = std::fs::read_to_string(&hook).unwrap();
    std::fs::write(&hook, src.replace("\"busybox\"", "\"busybox:1.37\"")).unwrap();
    let junit = home.path().join("junit.xml");
    let out = replay(
        home.path(),
        &rec,
        &[&d],
        &["--junit", &junit.display().to_string()],
    );
    assert_eq!(code(&out), 1, "{}", show(&out));
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains(
            "~ children[Pod/hello].spec.containers[name=hello].image: \"busybox\" -> \"busybox:1.37\""
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("0 passed, {n} failed")),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l.starts_with("FAIL ")), "{stdout}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(&format!("failures=\"{n}\"")), "{xml}");
    assert!(xml.contains("busybox:1.37"), "{xml}");

    // -o json: a line per case, then the summary; data only on stdout.
    let out = replay(home.path(), &rec, &[&d], &["-o", "json"]);
    assert_eq!(code(&out), 1);
    let (stdout, _) = text(&out);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("NDJSON"))
        .collect();
    assert_eq!(lines.len(), n + 1, "{stdout}");
    assert_eq!(lines[0]["result"], "fail");
    assert_eq!(
        lines[0]["differences"][0]["path"],
        "children[Pod/hello].spec.containers[name=hello].image"
    );
    assert_eq!(lines[n]["type"], "summary");
    assert_eq!(lines[n]["failed"], n);

    // -k: a filter that matches nothing is not a pass.
    let out = replay(home.path(), &rec, &[&d], &["-k", "no-such-case"]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(show(&out).contains("no test cases found"), "{}", show(&out));

    // --update: rewritten, the change shown; then green.
    let out = replay(home.path(), &rec, &[&d], &["--update"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let (stdout, _) = text(&out);
    assert!(stdout.contains("UPDATE"), "{stdout}");
    assert!(
        stdout.contains("\"busybox\" -> \"busybox:1.37\""),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("{n} updated")), "{stdout}");
    let out = replay(home.path(), &rec, &[&d], &[]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    for f in case_files(&rec) {
        let t = std::fs::read_to_string(&f).unwrap();
        assert!(t.contains("busybox:1.37"), "{}: {t}", f.display());
    }
}

/// An exec hook answering with quantities spelled its own way, and a case whose request keys
/// are re-ordered and whose expected answer spells the quantities differently, with nulls and
/// empty maps: the same to the engine, so it passes. A real difference still fails.
#[test]
fn reordered_requests_and_respelled_quantities_still_pass() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("ctl");
    std::fs::create_dir_all(&dir).unwrap();
    common::cli::exec_hook_controller(
        &dir,
        "quantities",
        r#"import json, sys
req = json.load(sys.stdin)
name = req["parent"]["metadata"]["name"]
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
       "spec": {"containers": [{"name": "c", "image": "busybox",
           "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}]}}
json.dump({"status": {"replicas": 1}, "children": [pod]}, sys.stdout)
"#,
    );
    let d = dir.display().to_string();
    let cases = home.path().join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    let case = r#"# written by hand
kind: HookTest
apiVersion: kubectl-meta.dev/v1
hook: sync
controller: quantities
parent: default/hello
response:
  children:
  - kind: Pod
    metadata: {name: hello, annotations: null, labels: {}}
    apiVersion: v1
    spec:
      containers:
      - resources: {limits: {memory: 1024Mi, cpu: 0.5}}
        image: busybox
        name: c
  status: {replicas: 1.0, gone: null}
request:
  parent:
    spec: {who: World}
    metadata: {uid: u-1, namespace: default, name: hello}
    kind: HelloWorld
    apiVersion: example.kubectl-meta.dev/v1
  children: {Pod.v1: {}}
  controller: {}
"#;
    std::fs::write(cases.join("quantities.yaml"), case).unwrap();
    let out = replay(home.path(), &cases, &[&d], &[]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(
        text(&out).0.contains("1 passed, 0 failed"),
        "{}",
        show(&out)
    );

    std::fs::write(
        cases.join("quantities.yaml"),
        case.replace("cpu: 0.5", "cpu: 0.25"),
    )
    .unwrap();
    let out = replay(home.path(), &cases, &[&d], &[]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert!(
        text(&out).0.contains(
            "children[Pod/hello].spec.containers[name=c].resources.limits.cpu: \"250m\" -> \"500m\""
        ),
        "{}",
        show(&out)
    );
    // Ignored, per case or with --ignore, it passes.
    let out = replay(
        home.path(),
        &cases,
        &[&d],
        &["--ignore", "children[*].spec.containers"],
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
}

/// A child the API server would reject (a Greeting whose spec.count is a string, against its
/// CRD's schema) passes a plain replay of the same answer, and fails with --validate.
#[test]
fn an_invalid_child_fails_only_with_validate() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("ctl");
    std::fs::create_dir_all(&dir).unwrap();
    common::cli::exec_hook_controller(
        &dir,
        "invalid",
        r#"import json, sys
req = json.load(sys.stdin)
child = {"apiVersion": "example.kubectl-meta.dev/v1", "kind": "Greeting",
         "metadata": {"name": "child"}, "spec": {"count": "many"}}
json.dump({"children": [child]}, sys.stdout)
"#,
    );
    std::fs::write(
        dir.join("01-child-crd.yaml"),
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: greetings.example.kubectl-meta.dev}
spec:
  group: example.kubectl-meta.dev
  scope: Namespaced
  names: {plural: greetings, singular: greeting, kind: Greeting}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              count: {type: integer}
"#,
    )
    .unwrap();
    let ctl = dir.join("10-controller.yaml");
    let t = std::fs::read_to_string(&ctl).unwrap();
    std::fs::write(
        &ctl,
        t.replace(
            "childResources: [{apiVersion: v1, resource: pods}]",
            "childResources: [{apiVersion: example.kubectl-meta.dev/v1, resource: greetings}]",
        ),
    )
    .unwrap();
    let d = dir.display().to_string();
    let cases = home.path().join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    std::fs::write(
        cases.join("invalid.yaml"),
        r#"apiVersion: kubectl-meta.dev/v1
kind: HookTest
controller: invalid
hook: sync
parent: default/hello
request:
  parent: {apiVersion: example.kubectl-meta.dev/v1, kind: HelloWorld, metadata: {name: hello, namespace: default, uid: u-1}}
response:
  children:
  - {apiVersion: example.kubectl-meta.dev/v1, kind: Greeting, metadata: {name: child}, spec: {count: many}}
"#,
    )
    .unwrap();
    let out = replay(home.path(), &cases, &[&d], &[]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = replay(home.path(), &cases, &[&d], &["--validate"]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let (stdout, _) = text(&out);
    assert!(stdout.contains("--validate"), "{stdout}");
    assert!(stdout.contains("children[Greeting/child]"), "{stdout}");
    assert!(stdout.contains("spec.count"), "{stdout}");
}

/// A hook that makes a Secret child from a password: the recorded files never hold the value
/// (nor its base64) unless --record-secrets, and the redacted cases still replay green.
#[test]
fn secrets_never_reach_recorded_files_unless_asked() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("ctl");
    std::fs::create_dir_all(&dir).unwrap();
    common::cli::exec_hook_controller(
        &dir,
        "secrets",
        r#"import json, sys
req = json.load(sys.stdin)
s = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
     "stringData": {"password": "hunter2-top-secret"}}
json.dump({"children": [s]}, sys.stdout)
"#,
    );
    let ctl = dir.join("10-controller.yaml");
    let t = std::fs::read_to_string(&ctl).unwrap();
    std::fs::write(&ctl, t.replace("resource: pods", "resource: secrets")).unwrap();
    let d = dir.display().to_string();
    let rec = home.path().join("rec");
    record(home.path(), &[&d], &rec, &[]);
    let files = case_files(&rec);
    assert!(
        files.len() >= 2,
        "the second sync sees the Secret: {files:?}"
    );
    let b64 = "aHVudGVyMi10b3Atc2VjcmV0"; // base64 of the password
    for f in &files {
        let t = std::fs::read_to_string(f).unwrap();
        assert!(!t.contains("hunter2"), "{}: {t}", f.display());
        assert!(!t.contains(b64), "{}: {t}", f.display());
        assert!(t.contains("secrets: redacted"), "{t}");
    }
    let out = replay(home.path(), &rec, &[&d], &[]);
    assert_eq!(code(&out), 0, "{}", show(&out));

    let kept = home.path().join("kept");
    record(home.path(), &[&d], &kept, &["--record-secrets"]);
    let all: String = case_files(&kept)
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert!(all.contains("hunter2-top-secret"), "{all}");
    assert!(all.contains("secrets: recorded"), "{all}");
}

/// The examples' own recorded cases (examples/*/hook-tests) pass, and each is valid against the
/// documented schema (docs/hook-test-case.schema.json).
#[test]
fn shipped_example_cases_validate_against_the_schema_and_pass() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/hook-test-case.schema.json")).unwrap(),
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut total = 0;
    for name in [
        "hello-world",
        "service-per-pod",
        "snapshot-schedule",
        "configmap-propagation",
    ] {
        let cases = repo().join("examples").join(name).join("hook-tests");
        let files = case_files(&cases);
        assert!(!files.is_empty(), "{name} ships no cases");
        for f in &files {
            let v: Value = serde_saphyr::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            if let Err(e) = validate(&schema, &schema, &v, "$") {
                panic!("{}: {e}", f.display());
            }
        }
        total += files.len();
        let dir = example(name);
        let out = replay(home.path(), &cases, &[&dir], &[]);
        assert_eq!(code(&out), 0, "{name}: {}", show(&out));
    }
    assert!(total >= 4);
    // The schema rejects what the reader rejects.
    let bad: Value = serde_json::json!({"apiVersion": "kubectl-meta.dev/v1", "kind": "HookTest",
        "controller": "c", "hook": "sink", "parent": "p", "request": {}, "response": {}});
    assert!(validate(&schema, &schema, &bad, "$").is_err());
}

/// Bad input: an empty or mistyped directory is never a silent pass (exit 2), a malformed case
/// names its file and field, a case for an unknown controller or hook names both.
#[test]
fn bad_input_is_exit_2_naming_file_and_field() {
    let home = tempfile::tempdir().unwrap();
    let dir = example("hello-world");
    let empty = home.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = replay(home.path(), &empty, &[&dir], &[]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(show(&out).contains("no test cases found"), "{}", show(&out));
    let out = replay(home.path(), &home.path().join("tpyo"), &[&dir], &[]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(
        show(&out).contains("tpyo: no such directory"),
        "{}",
        show(&out)
    );

    let cases = home.path().join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    let good = "apiVersion: kubectl-meta.dev/v1\nkind: HookTest\ncontroller: hello-world-controller\nhook: sync\nparent: default/hello\nrequest: {}\nresponse: {}\n";
    std::fs::write(cases.join("a.yaml"), good.replace("hook: sync\n", "")).unwrap();
    let out = replay(home.path(), &cases, &[&dir], &[]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(
        show(&out).contains("a.yaml: not a valid test case: missing field `hook`"),
        "{}",
        show(&out)
    );

    std::fs::write(
        cases.join("a.yaml"),
        good.replace("hello-world-controller", "nope"),
    )
    .unwrap();
    let out = replay(home.path(), &cases, &[&dir], &[]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    let s = show(&out);
    assert!(s.contains("a.yaml: controller: \"nope\" is not among the definitions given (hello-world-controller)"), "{s}");

    std::fs::write(
        cases.join("a.yaml"),
        good.replace("hook: sync", "hook: finalize"),
    )
    .unwrap();
    let out = replay(home.path(), &cases, &[&dir], &[]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    let s = show(&out);
    assert!(
        s.contains("hook: CompositeController \"hello-world-controller\" has no finalize hook"),
        "{s}"
    );

    let out = km(
        home.path(),
        &["test", &cases.display().to_string(), "-f", &dir, "-j", "0"],
    );
    assert_eq!(code(&out), 2, "{}", show(&out));
}

/// A webhook nobody listens on cannot be called: exit 4 (not a failure, not a pass). A hook
/// that times out fails that case only; the others run and pass.
#[test]
fn an_unreachable_hook_is_exit_4_and_a_timeout_fails_one_case() {
    let home = tempfile::tempdir().unwrap();
    let cases = home.path().join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    let case = |controller: &str, parent: &str| {
        format!(
            "apiVersion: kubectl-meta.dev/v1\nkind: HookTest\ncontroller: {controller}\nhook: sync\nparent: default/{parent}\nrequest:\n  parent: {{apiVersion: example.kubectl-meta.dev/v1, kind: HelloWorld, metadata: {{name: {parent}, namespace: default, uid: u-1}}, spec: {{who: {parent}}}}}\nresponse:\n  status: {{who: {parent}}}\n"
        )
    };
    std::fs::write(cases.join("fast.yaml"), case("slow", "fast")).unwrap();
    std::fs::write(cases.join("slow.yaml"), case("slow", "slow")).unwrap();
    let dir = home.path().join("ctl");
    std::fs::create_dir_all(&dir).unwrap();
    common::cli::exec_hook_controller(
        &dir,
        "slow",
        r#"import json, sys, time
req = json.load(sys.stdin)
who = req["parent"]["spec"]["who"]
if who == "slow":
    time.sleep(30)
json.dump({"status": {"who": who}}, sys.stdout)
"#,
    );
    let ctl = dir.join("10-controller.yaml");
    let t = std::fs::read_to_string(&ctl).unwrap();
    std::fs::write(
        &ctl,
        t.replace(
            "command: [python3, hook.py]}",
            "command: [python3, hook.py], timeout: 2s}",
        ),
    )
    .unwrap();
    let d = dir.display().to_string();
    let out = replay(home.path(), &cases, &[&d], &["-j", "2"]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let (stdout, _) = text(&out);
    assert!(stdout.contains("ok     fast"), "{stdout}");
    assert!(stdout.contains("FAIL   slow"), "{stdout}");
    assert!(stdout.contains("did not answer within 2s"), "{stdout}");
    assert!(stdout.contains("1 passed, 1 failed"), "{stdout}");

    // The webhook form of hello-world, pointed at a port nobody listens on.
    let port = common::free_port();
    let web = example("hello-world");
    let rec_case = case("hello-world-controller", "hello");
    std::fs::remove_file(cases.join("slow.yaml")).unwrap();
    std::fs::write(cases.join("fast.yaml"), rec_case).unwrap();
    let out = replay(
        home.path(),
        &cases,
        &[&format!("{web}/webhook/controller.yaml")],
        &["--hook-base-url", &format!("http://127.0.0.1:{port}")],
    );
    assert_eq!(code(&out), 4, "{}", show(&out));
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("ERROR  fast"), "{stdout}");
    assert!(stderr.contains("could not call their hook"), "{stderr}");
}

/// The webhook form, with the hook server started and stopped by `test` itself
/// (`--hook-server`, as in dev), replays cases recorded from the exec form, sequentially and
/// with -j 4.
#[test]
fn a_managed_hook_server_answers_the_recorded_cases() {
    let home = tempfile::tempdir().unwrap();
    let dir = example("hello-world");
    let rec = home.path().join("rec");
    record(home.path(), &[&dir], &rec, &[]);
    let port = common::free_port();
    let server = format!(
        "python3 {} --port {port}",
        repo().join("examples/hello-world/server.py").display()
    );
    for jobs in ["1", "4"] {
        let out = replay(
            home.path(),
            &rec,
            &[&format!("{dir}/webhook/controller.yaml")],
            &[
                "--hook-base-url",
                &format!("http://127.0.0.1:{port}"),
                "--hook-server",
                &server,
                "-j",
                jobs,
            ],
        );
        assert_eq!(code(&out), 0, "-j {jobs}: {}", show(&out));
        assert!(text(&out).0.contains(" passed, 0 failed"), "{}", show(&out));
        // Stopped at the end: the port is free again.
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "the hook server was left running"
        );
    }
}

/// `dryrun --record` writes the exchanges of its plan as cases too (against a cluster where
/// `dev` ran the example), and they replay green.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dryrun_records_cases_too() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = example("hello-world");
    let kc = common::cli::kc(&sb);
    let h = home.path().to_path_buf();
    let (d, k) = (dir.clone(), kc.clone());
    let out = tokio::task::spawn_blocking(move || {
        km(
            &h,
            &["--kubeconfig", &k, "dev", "--apply", "-f", &d, "--once"],
        )
    })
    .await
    .unwrap();
    assert_eq!(code(&out), 0, "{}", show(&out));
    let rec = home.path().join("rec");
    let (h, d, k, r) = (
        home.path().to_path_buf(),
        dir.clone(),
        kc.clone(),
        rec.display().to_string(),
    );
    let out = tokio::task::spawn_blocking(move || {
        km(
            &h,
            &["--kubeconfig", &k, "dryrun", "-f", &d, "--record", &r],
        )
    })
    .await
    .unwrap();
    assert!(matches!(code(&out), 0 | 1), "{}", show(&out));
    let files = case_files(&rec);
    assert_eq!(files.len(), 1, "one sync planned, one case: {files:?}");
    let t = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        t.contains("recorded by kubectl meta dryrun --record"),
        "{t}"
    );
    let h = home.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || replay(&h, &rec, &[&dir], &[]))
        .await
        .unwrap();
    assert_eq!(code(&out), 0, "{}", show(&out));
}

/// `--perturb` names are checked before anything runs: an unknown class is exit 2 listing the
/// classes; `--seed` needs `--perturb`; without e2e tests to perturb (a directory of recorded
/// hook cases only), exit 2 saying so.
#[test]
fn perturb_flags_are_checked_before_anything_runs() {
    let home = tempfile::tempdir().unwrap();
    let dir = example("hello-world");
    let out = km(
        home.path(),
        &["test", "-f", &dir, "--perturb=restart,stale"],
    );
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(
        show(&out).contains("--perturb: unknown class \"stale\"; the classes are: stale-read, missed-state, restart, conflict, throttle, hook-timeout, hook-restart, reorder"),
        "{}",
        show(&out)
    );
    let out = km(home.path(), &["test", "-f", &dir, "--seed", "3"]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(show(&out).contains("--perturb"), "{}", show(&out));
    // A directory with recorded hook cases only: nothing for --perturb to run.
    let cases = format!("{dir}/hook-tests");
    let out = km(
        home.path(),
        &["test", &cases, "-f", &dir, "--perturb", "--seed", "3"],
    );
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(
        show(&out).contains("--perturb runs the e2e tests"),
        "{}",
        show(&out)
    );
}
