//! The project file (`kubectl-meta.yaml`, docs/project-file.md), as a user writes it by hand:
//! hello-world's files copied into an empty directory (exec form, and the webhook form with
//! its server.py), where `kubectl meta dev --once` and `kubectl meta test` pass with no flags,
//! from the project directory and from a subdirectory, with a private HOME and no kubeconfig;
//! flags override it; bad input (malformed, unknown field, a hook program that does not exist,
//! sandbox and context, a failing build) exits 2 naming file, line and field, starting nothing;
//! in `dev`, a change rebuilds before the reload and a change under the record directory
//! reloads nothing.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common;
use crate::common::cli::{Background, meta, repo, text};

/// A project like one written by hand: `root/hookkit.py` (the examples import `../hookkit.py`)
/// and `root/hello/` with hello-world's CRD, controllers (exec and webhook), sample, hooks and
/// recorded cases, plus `project_file` as `kubectl-meta.yaml` and an empty `sub/` directory.
fn hello_project(root: &Path, project_file: &str) -> PathBuf {
    let ex = repo().join("examples");
    std::fs::copy(ex.join("hookkit.py"), root.join("hookkit.py")).unwrap();
    let dir = root.join("hello");
    copy_dir(&ex.join("hello-world"), &dir);
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("kubectl-meta.yaml"), project_file).unwrap();
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

const EXEC_PROJECT: &str = "# kubectl-meta project file; schema: docs/project-file.md
apiVersion: kubectl-meta.dev/v1alpha1
kind: Project
name: hello
controllers: [10-controller.yaml]
apply: [00-crd.yaml, 20-sample.yaml]
tests: [hook-tests]
";

fn webhook_project(port: u16) -> String {
    format!(
        "apiVersion: kubectl-meta.dev/v1alpha1
kind: Project
name: hello-web
controllers: [webhook/controller.yaml]
apply: [00-crd.yaml, 20-sample.yaml]
hooks:
- name: hello
  build: python3 -c 'import ast; ast.parse(open(\"hook.py\").read())'
  server: python3 server.py --port {port}
  url: http://127.0.0.1:{port}
  ready: http://127.0.0.1:{port}/healthz
tests: [hook-tests]
"
    )
}

/// `kubectl meta ARGS` in `cwd`, private HOME, no KUBECONFIG.
fn km(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    let mut c = meta(home, args);
    c.current_dir(cwd);
    c.output().expect("kubectl-meta runs")
}

fn show(out: &Output) -> String {
    let (o, e) = text(out);
    format!("exit {:?}\nstdout:\n{o}\nstderr:\n{e}", out.status.code())
}

/// `dev --once` and `test`, no flags, pass from `cwd`; both say which project file they use.
fn dev_and_test_pass(home: &Path, cwd: &Path, using: &str) {
    let out = km(home, cwd, &["dev", "--once"]);
    assert_eq!(out.status.code(), Some(0), "dev --once: {}", show(&out));
    let (_, stderr) = text(&out);
    assert!(stderr.contains(using), "{stderr}");
    assert!(stderr.contains("sandbox listening on"), "{stderr}");
    let out = km(home, cwd, &["test"]);
    assert_eq!(out.status.code(), Some(0), "test: {}", show(&out));
    let (stdout, stderr) = text(&out);
    assert!(stderr.contains(using), "{stderr}");
    assert!(stdout.contains("5 passed, 0 failed"), "{stdout}");
}

#[test]
fn an_exec_project_runs_with_no_flags_from_its_directory_and_below() {
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = hello_project(root.path(), EXEC_PROJECT);
    dev_and_test_pass(
        home.path(),
        &dir,
        "using project hello (./kubectl-meta.yaml)",
    );
    dev_and_test_pass(
        home.path(),
        &dir.join("sub"),
        "using project hello (../kubectl-meta.yaml)",
    );
    // The sandbox's kubeconfig was the project's, and is gone with the sandbox.
    assert!(dir.join(".kubectl-meta/.gitignore").is_file());
    assert!(!dir.join(".kubectl-meta/sandbox.kubeconfig").exists());
    // With no dev loop running, dryrun and inspect read the project's sandbox as the last dev
    // run left it: the converged parent, nothing to change (exit 0), its Pod in the tree.
    assert!(dir.join(".kubectl-meta/sandbox").is_dir());
    let out = km(home.path(), &dir, &["dryrun"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    stderr_has(
        &out,
        "reading the project's sandbox as the last dev run left it",
    );
    let out = km(home.path(), &dir, &["inspect", "helloworld/hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Pod"),
        "{}",
        show(&out)
    );
    // Nothing left behind by them: no kubeconfig of theirs in .kubectl-meta/.
    let left: Vec<_> = std::fs::read_dir(dir.join(".kubectl-meta"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".kubeconfig"))
        .collect();
    assert!(left.is_empty(), "kubeconfigs left behind: {left:?}");
}

#[test]
fn dryrun_in_a_project_whose_sandbox_never_ran_says_to_run_dev() {
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = hello_project(root.path(), EXEC_PROJECT);
    let out = km(home.path(), &dir, &["dryrun"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    stderr_has(&out, "has no objects yet");
    stderr_has(&out, "run `kubectl meta dev`");
}

#[test]
fn a_webhook_project_builds_and_starts_its_server_with_no_flags() {
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let dir = hello_project(root.path(), &webhook_project(port));
    dev_and_test_pass(
        home.path(),
        &dir.join("sub"),
        "using project hello-web (../kubectl-meta.yaml)",
    );
    let out = km(home.path(), &dir, &["test"]);
    stderr_has(&out, "building hook hello: python3 -c");
    // Stopped at the end: the port is free again.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn flags_override_the_project_file() {
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = hello_project(root.path(), EXEC_PROJECT);
    // deploy renders the project's controllers ...
    let out = km(home.path(), &dir, &["deploy"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    stdout_has(&out, "hello-world-controller");
    // ... and those of -f when it is given.
    let other = root.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let ctl = std::fs::read_to_string(dir.join("10-controller.yaml"))
        .unwrap()
        .replace("name: hello-world-controller", "name: other-controller");
    std::fs::write(other.join("c.yaml"), ctl).unwrap();
    let o = other.display().to_string();
    let out = km(home.path(), &dir, &["deploy", "-f", &o]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let (stdout, _) = text(&out);
    assert!(stdout.contains("other-controller"), "{stdout}");
    assert!(!stdout.contains("hello-world-controller"), "{stdout}");
    // test -f: the recorded cases name hello-world-controller, which -f no longer defines.
    let out = km(home.path(), &dir, &["test", "-f", &o]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    // A DIR given replaces the project's tests.
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = km(home.path(), &dir, &["test", &empty.display().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    stderr_has(&out, "no test cases found in");
}

/// `dev --once` and `test` in a project whose file is `project_file` exit 2 with `expected`
/// on stderr and start nothing.
fn refused(project_file: &str, expected: &[&str]) {
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = hello_project(root.path(), project_file);
    for (cwd, args) in [
        (dir.clone(), &["dev", "--once"][..]),
        (dir.join("sub"), &["test"][..]),
    ] {
        let out = km(home.path(), &cwd, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", show(&out));
        let (_, stderr) = text(&out);
        for e in expected {
            let e = if cwd == dir {
                e.to_string()
            } else {
                e.replace("./kubectl-meta.yaml", "../kubectl-meta.yaml")
            };
            assert!(stderr.contains(&e), "{args:?}: {e:?} not in:\n{stderr}");
        }
        assert!(!stderr.contains("sandbox listening"), "{stderr}");
        assert!(!dir.join(".kubectl-meta").exists(), "{stderr}");
    }
}

#[test]
fn bad_project_files_name_file_line_and_field_and_start_nothing() {
    // Malformed YAML.
    refused(
        &EXEC_PROJECT.replace("[hook-tests]", "[hook-tests"),
        &["error: ./kubectl-meta.yaml:"],
    );
    // An unknown field.
    refused(
        &format!("{EXEC_PROJECT}recrod: hook-tests\n"),
        &["error: ./kubectl-meta.yaml:8:1: ", "unknown field `recrod`"],
    );
    // A hook program that does not exist.
    refused(
        &format!(
            "{EXEC_PROJECT}hooks:\n- name: hello\n  server: pyhton3 server.py\n  url: http://127.0.0.1:1\n"
        ),
        &[
            "error: ./kubectl-meta.yaml:10:11: hooks[0].server: program \"pyhton3\" not found on PATH",
        ],
    );
    // Both sandbox and context.
    refused(
        &format!("{EXEC_PROJECT}target:\n  sandbox: {{}}\n  context: kind-dev\n"),
        &["error: ./kubectl-meta.yaml:10:12: target: names both sandbox and context"],
    );
    // A path that does not exist.
    refused(
        &EXEC_PROJECT.replace("10-controller.yaml", "nosuch.yaml"),
        &["./kubectl-meta.yaml:5:15: controllers[0]: \"nosuch.yaml\": no such file or directory"],
    );
    // A build that fails: its output is shown, nothing starts.
    refused(
        &format!(
            "{EXEC_PROJECT}hooks:\n- name: hello\n  build: \"echo 'hook.py:3: oops' >&2; exit 3\"\n"
        ),
        &[
            "hook hello: build `echo",
            "exit status: 3",
            "hook.py:3: oops",
        ],
    );
}

/// In `dev`, a change of the hook rebuilds it before the reload (and the build's own output
/// does not trigger another build); a failing build is reported as a reload error; a file
/// written under the record directory reloads nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_rebuilds_on_change_and_ignores_the_record_directory() {
    let root = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = hello_project(
        root.path(),
        &format!(
            "{EXEC_PROJECT}hooks:\n- name: hello\n  build: sh build.sh\n  outputs: [built.txt]\n"
        ),
    );
    std::fs::write(dir.join("build.sh"), "echo built >> built.txt\n").unwrap();
    let mut cmd = meta(home.path(), &["dev", "--no-tui", "--debounce", "50"]);
    cmd.current_dir(&dir);
    let dev = Background::start(cmd);
    dev.wait_output("create    Pod.v1 default/hello").await;
    dev.wait_output("watching ").await;
    assert_eq!(
        lines(&dir.join("built.txt")),
        1,
        "built once before the start"
    );

    // A case written under the record directory, then a hook edit: only the edit reloads.
    let case_dir = dir.join("hook-tests/hello-world-controller/default_hello");
    std::fs::write(case_dir.join("new-case.yaml"), "# written by a test\n").unwrap();
    let hook = dir.join("hook.py");
    let t = std::fs::read_to_string(&hook).unwrap();
    std::fs::write(&hook, format!("{t}\n# edited\n")).unwrap();
    dev.wait_output("reload    build (").await;
    dev.wait_output("hook hello: built in").await;
    dev.wait_output("reload    exec-hook (").await;
    assert!(
        !dev.output().contains("new-case.yaml"),
        "a file under the record directory reloaded:\n{}",
        dev.output()
    );

    // A second edit builds once more: the build's output (built.txt) triggers nothing.
    std::fs::write(&hook, format!("{t}\n# edited twice\n")).unwrap();
    common::wait_for("the second build", common::TIMEOUT, || {
        let n = dev.output().matches("hook hello: built in").count();
        async move { (n >= 2).then_some(()) }
    })
    .await;
    assert_eq!(lines(&dir.join("built.txt")), 3, "{}", dev.output());

    // A failing build is a reload error.
    std::fs::write(
        dir.join("build.sh"),
        "echo 'hook.py:1: broken' >&2; exit 1\n",
    )
    .unwrap();
    dev.wait_output("the build failed").await;
    dev.wait_output("hook.py:1: broken").await;
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
    assert!(!dir.join(".kubectl-meta/sandbox.kubeconfig").exists());
}

fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn stderr_has(out: &Output, what: &str) {
    assert!(
        text(out).1.contains(what),
        "{what:?} not on stderr: {}",
        show(out)
    );
}

fn stdout_has(out: &Output, what: &str) {
    assert!(
        text(out).0.contains(what),
        "{what:?} not on stdout: {}",
        show(out)
    );
}
