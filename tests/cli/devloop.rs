//! The dev loop with real processes and real file edits: a managed Python hook server restarted
//! on save (old process gone, port reused, every parent resynced, the answer diff replayed), a
//! broken edit that changes nothing until it is fixed, an exec hook edit (no restart), a
//! definition edit with a mistake (refused, the old one keeps running), rapid saves (one
//! restart), and resync/pause/resume through `kubectl meta dev --resync/--pause/--resume` and
//! SIGUSR1.

use crate::common;

use std::path::Path;

use crate::common::cli::*;
use crate::common::engine::core_ar;
use crate::common::{TIMEOUT, TestSandbox, wait_for};
use serde_json::Value;

/// A copy of the examples (hookkit.py and hello-world) in a temp dir, safe to edit.
fn examples_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = repo().join("examples");
    std::fs::copy(src.join("hookkit.py"), dir.path().join("hookkit.py")).unwrap();
    let hw = dir.path().join("hello-world");
    std::fs::create_dir_all(hw.join("webhook")).unwrap();
    for f in [
        "00-crd.yaml",
        "10-controller.yaml",
        "20-sample.yaml",
        "hook.py",
        "server.py",
        "exec_hook.py",
        "webhook/controller.yaml",
    ] {
        std::fs::copy(src.join("hello-world").join(f), hw.join(f)).unwrap();
    }
    dir
}

/// Replace `from` with `to` in a file (as an editor save would: write in place).
fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} has no {from:?}", path.display());
    std::fs::write(path, text.replace(from, to)).unwrap();
}

/// `spec.containers[0].command` of each HelloWorld pod, by name.
async fn commands(sb: &TestSandbox) -> Vec<(String, Value, String)> {
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(sb.client.clone(), "default", &core_ar("Pod", "pods"));
    let mut out: Vec<(String, Value, String)> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            let v = serde_json::to_value(&p).unwrap();
            (
                p.metadata.name.clone().unwrap_or_default(),
                v["spec"]["containers"][0]["command"][1].clone(),
                p.metadata.uid.clone().unwrap_or_default(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

async fn wait_greetings(sb: &TestSandbox, want: &[(&str, &str)]) {
    let want: Vec<(String, Value)> = want
        .iter()
        .map(|(n, g)| (n.to_string(), Value::String(g.to_string())))
        .collect();
    wait_for(&format!("pods greeting {want:?}"), TIMEOUT, || {
        let want = want.clone();
        async move {
            let got: Vec<(String, Value)> = commands(sb)
                .await
                .into_iter()
                .map(|(n, c, _)| (n, c))
                .collect();
            (got == want).then_some(())
        }
    })
    .await;
}

/// Create a second HelloWorld with kubectl.
fn create_second_parent(sb: &TestSandbox) {
    let out = sb.kubectl_stdin(
        &["apply", "-f", "-"],
        "{\"apiVersion\":\"example.kubectl-meta.dev/v1\",\"kind\":\"HelloWorld\",\"metadata\":{\"name\":\"second\",\"namespace\":\"default\"},\"spec\":{\"who\":\"Second\"}}",
    );
    common::ok_stdout(&out);
}

/// `dev --apply -f <hw> <extra>` against `sb` in the background, once it created the Pod of
/// the sample parent.
async fn hello_dev(sb: &TestSandbox, home: &Path, hw: &Path, extra: &[&str]) -> Background {
    let (kc, hw) = (kc(sb), hw.display().to_string());
    let args = ["--kubeconfig", &kc, "dev", "--apply", "-f", &hw];
    let dev = Background::start(meta(home, &[&args[..], extra].concat()));
    dev.wait_output("create    Pod.v1 default/hello").await;
    dev
}

/// Wait until `parent` had a sync that changed nothing (its state settled, so its last
/// exchange is with the current hook).
async fn wait_settled(dev: &Background, parent: &str) {
    wait_for(&format!("{parent} to settle"), TIMEOUT, || {
        let settled = dev
            .output()
            .lines()
            .any(|l| l.contains(parent) && l.contains("sync      no changes"));
        async move { settled.then_some(()) }
    })
    .await;
}

/// Sync lines whose triggers include `manual` (coalesced triggers are listed together).
fn manual_syncs(dev: &Background) -> usize {
    dev.output()
        .lines()
        .filter(|l| l.contains(" sync ") && (l.contains("(manual") || l.contains(", manual")))
        .count()
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The pid in the last `server    ready (pid N)` line.
fn last_ready_pid(out: &str) -> Option<u32> {
    out.lines()
        .rev()
        .find(|l| l.contains("server    ready (pid "))
        .and_then(|l| l.split("(pid ").nth(1))
        .and_then(|r| r.split(')').next())
        .and_then(|n| n.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_the_managed_server_restarts_it_and_resyncs_every_parent() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let ex = examples_copy();
    let hw = ex.path().join("hello-world");
    let port = common::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let server = format!("python3 {} --port {port}", hw.join("server.py").display());
    let dev = Background::start(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--apply",
            "-f",
            &hw.join("00-crd.yaml").display().to_string(),
            "-f",
            &hw.join("20-sample.yaml").display().to_string(),
            "-f",
            &hw.join("webhook").display().to_string(),
            "--hook-base-url",
            &base,
            "--hook-server",
            &server,
            "--no-tui",
        ],
    ));
    dev.wait_output("create    Pod.v1 default/hello").await;
    create_second_parent(&sb);
    wait_greetings(
        &sb,
        &[("hello", "Hello, World!"), ("second", "Hello, Second!")],
    )
    .await;
    wait_settled(&dev, "default/second").await;
    let first_pid = last_ready_pid(&dev.output()).expect("a ready line with the pid");
    assert!(pid_alive(first_pid));

    // Save a new greeting: the server restarts, both parents get the new logic.
    edit(&hw.join("hook.py"), "\"Hello, %s!\"", "\"Howdy, %s!\"");
    wait_greetings(
        &sb,
        &[("hello", "Howdy, World!"), ("second", "Howdy, Second!")],
    )
    .await;
    let out = dev.output();
    assert!(out.contains("server    restarting"), "{out}");
    assert!(out.contains("reload    hook-server ("), "{out}");
    assert!(out.contains("restarted and ready"), "{out}");
    // The replay (after the resync) shows what the edit changes, per parent.
    dev.wait_output("\"Hello, World!\" -> \"Howdy, World!\"")
        .await;
    dev.wait_output("\"Hello, Second!\" -> \"Howdy, Second!\"")
        .await;
    let out = dev.output();
    let second_pid = last_ready_pid(&out).unwrap();
    assert_ne!(first_pid, second_pid);
    // The old process (its whole group) is gone; the new one serves on the same port.
    wait_for(
        "the old server process to be gone",
        TIMEOUT,
        || async move { (!pid_alive(first_pid)).then_some(()) },
    )
    .await;
    assert!(pid_alive(second_pid));
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());

    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
    // Stopping the dev loop stops the server.
    wait_for(
        "the server to stop with the dev loop",
        TIMEOUT,
        || async move { (!pid_alive(second_pid)).then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_server_edit_changes_nothing_and_a_fix_recovers() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let ex = examples_copy();
    let hw = ex.path().join("hello-world");
    let port = common::free_port();
    let dev = Background::start(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kc(&sb),
            "dev",
            "--apply",
            "-f",
            &hw.join("00-crd.yaml").display().to_string(),
            "-f",
            &hw.join("20-sample.yaml").display().to_string(),
            "-f",
            &hw.join("webhook").display().to_string(),
            "--hook-base-url",
            &format!("http://127.0.0.1:{port}"),
            "--hook-server",
            &format!("python3 {} --port {port}", hw.join("server.py").display()),
        ],
    ));
    dev.wait_output("create    Pod.v1 default/hello").await;
    wait_greetings(&sb, &[("hello", "Hello, World!")]).await;
    let before = commands(&sb).await;

    // A syntax error: the server cannot start; the error shows its traceback.
    edit(
        &hw.join("hook.py"),
        "def sync(request):",
        "def sync(request:",
    );
    dev.wait_output("SyntaxError").await;
    dev.wait_output("the new version is not ready").await;
    // A change that needs the hook now fails, and deletes nothing.
    let out = sb.kubectl(&[
        "patch",
        "helloworld",
        "hello",
        "--type",
        "merge",
        "-p",
        "{\"spec\":{\"who\":\"Broken\"}}",
    ]);
    common::ok_stdout(&out);
    dev.wait_output("was not called: hook server").await;
    assert_eq!(
        commands(&sb).await,
        before,
        "a child changed while the hook was down"
    );

    // The fix: the server comes back and the pending change goes through.
    edit(
        &hw.join("hook.py"),
        "def sync(request:",
        "def sync(request):",
    );
    wait_greetings(&sb, &[("hello", "Hello, Broken!")]).await;
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_hook_edit_resyncs_without_a_restart_and_rapid_saves_reload_once() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let ex = examples_copy();
    let hw = ex.path().join("hello-world");
    let dev = hello_dev(&sb, home.path(), &hw, &["--debounce", "400"]).await;
    create_second_parent(&sb);
    wait_greetings(
        &sb,
        &[("hello", "Hello, World!"), ("second", "Hello, Second!")],
    )
    .await;
    wait_settled(&dev, "default/second").await;

    // Ten saves in a row, well inside the debounce: one reload.
    let hook = hw.join("hook.py");
    for i in 0..10 {
        edit(
            &hook,
            "\"Hello, %s!\"",
            if i == 9 {
                "\"Ahoy, %s!\""
            } else {
                "\"Hello, %s!\""
            },
        );
    }
    wait_greetings(
        &sb,
        &[("hello", "Ahoy, World!"), ("second", "Ahoy, Second!")],
    )
    .await;
    let out = dev.output();
    let reloads = out.matches("reload    exec-hook (").count();
    assert_eq!(reloads, 1, "{out}");
    assert!(
        !out.contains("server "),
        "an exec hook has no server: {out}"
    );
    // The replay runs once the resync is done.
    dev.wait_output("-> \"Ahoy, Second!\"").await;
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replay_compares_with_answers_from_before_the_edit_even_when_a_sync_ran_the_new_hook_first()
 {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let ex = examples_copy();
    let hw = ex.path().join("hello-world");
    // A long debounce: the parent edit below is synced by the edited exec hook before the
    // reload (and its replay) happens.
    let dev = hello_dev(&sb, home.path(), &hw, &["--debounce", "3000"]).await;
    wait_settled(&dev, "default/hello").await;

    edit(&hw.join("hook.py"), "\"Hello, %s!\"", "\"Ahoy, %s!\"");
    let out = sb.kubectl(&[
        "patch",
        "helloworld",
        "hello",
        "--type=merge",
        "-p",
        r#"{"spec":{"who":"Third"}}"#,
    ]);
    common::ok_stdout(&out);
    wait_greetings(&sb, &[("hello", "Ahoy, Third!")]).await;
    dev.wait_output("reload    exec-hook (").await;
    // The replay sends the request answered before the edit (who: World) to the new hook.
    dev.wait_output("-> \"Ahoy, World!\"").await;
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_definition_edit_is_refused_and_the_old_one_keeps_running() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let ex = examples_copy();
    let hw = ex.path().join("hello-world");
    let dev = hello_dev(&sb, home.path(), &hw, &[]).await;

    let ctl = hw.join("10-controller.yaml");
    edit(&ctl, "method: Recreate", "method: Sometimes");
    dev.wait_output("reload    definition (").await;
    dev.wait_output("kept the running definitions").await;
    let out = dev.output();
    assert!(
        out.contains("spec.childResources[0].updateStrategy.method"),
        "{out}"
    );
    assert!(out.contains("Sometimes"), "{out}");
    // Still running the old definition: a new parent gets its pod.
    create_second_parent(&sb);
    wait_greetings(
        &sb,
        &[("hello", "Hello, World!"), ("second", "Hello, Second!")],
    )
    .await;

    // A valid edit restarts the controller with it (InPlace cannot change a Pod's command,
    // so switch to OnDelete and check the restart line).
    edit(&ctl, "method: Sometimes", "method: OnDelete");
    dev.wait_output("restarted hello-world-controller").await;
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_pause_and_resume_reach_the_running_loop() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let ex = examples_copy();
    let hw = ex.path().join("hello-world");
    let dev = hello_dev(&sb, home.path(), &hw, &["--no-watch"]).await;
    wait_greetings(&sb, &[("hello", "Hello, World!")]).await;

    let out = run(meta(home.path(), &["dev", "--resync", "default/hello"])).await;
    let stdout = assert_ok(&out);
    assert!(
        stdout.contains("resync of default/hello queued"),
        "{stdout}"
    );
    wait_for("a manual sync", TIMEOUT, || {
        let n = manual_syncs(&dev);
        async move { (n > 0).then_some(()) }
    })
    .await;

    // A parent no running loop knows: a clear message and exit code 6 (docs/guide/dev.md, "Exit codes").
    let out = run(meta(home.path(), &["dev", "--resync", "nope"])).await;
    assert_eq!(out.status.code(), Some(6), "{:?}", text(&out));
    assert!(
        text(&out).1.contains("no parent named nope"),
        "{:?}",
        text(&out)
    );

    // Paused: the change is planned and shown, not written.
    let out = run(meta(home.path(), &["dev", "--pause"])).await;
    assert!(assert_ok(&out).contains("writes paused"));
    let before = commands(&sb).await;
    common::ok_stdout(&sb.kubectl(&[
        "patch",
        "helloworld",
        "hello",
        "--type",
        "merge",
        "-p",
        "{\"spec\":{\"who\":\"Later\"}}",
    ]));
    dev.wait_output("delete Pod.v1 default/hello (recreate)")
        .await;
    assert_eq!(commands(&sb).await, before);

    // Resumed: the held plan is carried out.
    let out = run(meta(home.path(), &["dev", "--resume"])).await;
    assert!(assert_ok(&out).contains("writes resumed"));
    wait_greetings(&sb, &[("hello", "Hello, Later!")]).await;

    // SIGUSR1 resyncs everything.
    let n = manual_syncs(&dev);
    unsafe {
        libc::kill(dev.child.id() as i32, libc::SIGUSR1);
    }
    wait_for("a manual resync after SIGUSR1", TIMEOUT, || {
        let more = manual_syncs(&dev) > n;
        async move { more.then_some(()) }
    })
    .await;

    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
    // With the loop gone, the client says so.
    let out = run(meta(home.path(), &["dev", "--resync"])).await;
    let stderr = assert_fails(&out);
    assert!(
        stderr.contains("no running `kubectl meta dev` found"),
        "{stderr}"
    );
}
