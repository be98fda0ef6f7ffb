//! The command-line contract of `kubectl meta dev` and `sandbox`, with the real binary: `-o json`
//! stdout carries NDJSON only, exit codes by class of failure (docs/guide/dev.md, "Exit codes"), every flag
//! checked before anything starts, `--resync` of an unknown parent, one kubeconfig per
//! `dev --sandbox`, `--apply` creating only what is missing, and `-R`.

use crate::common;

use std::path::Path;
use std::process::Output;

use crate::common::cli::*;
use serde_json::Value;

/// The exit code, with the output in the panic message when it is not `want`.
fn assert_code(out: &Output, want: i32) -> (String, String) {
    let (stdout, stderr) = text(out);
    assert_eq!(
        out.status.code(),
        Some(want),
        "exit code\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

/// Copy `examples/<name>`'s YAML and Python files into `dir`.
fn copy_example(name: &str, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for entry in std::fs::read_dir(repo().join("examples").join(name)).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_puts_only_ndjson_on_stdout() {
    let home = tempfile::tempdir().unwrap();
    let out = run(meta(
        home.path(),
        &[
            "dev",
            "--sandbox",
            "--apply",
            "-f",
            &example("hello-world"),
            "--once",
            "-o",
            "json",
        ],
    ))
    .await;
    let (stdout, stderr) = assert_code(&out, 0);
    assert!(!stdout.is_empty());
    for line in stdout.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}\n{stdout}"));
        assert!(v["event"].is_string(), "{line}");
    }
    // What a person reads goes to stderr.
    assert!(stderr.contains("sandbox listening on"), "{stderr}");
    assert!(stderr.contains("context sandbox ("), "{stderr}");
    assert!(
        stderr.contains("applied CustomResourceDefinition"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "no color when not a terminal");
}

/// Each mistake: exit code 2, a message naming the flag, and nothing started (no sandbox).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flag_mistakes_exit_2_before_anything_starts() {
    let home = tempfile::tempdir().unwrap();
    let hello = example("hello-world");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "dev",
                "--sandbox",
                "-f",
                &hello,
                "--hook-base-url",
                "localhost:9999",
            ],
            "--hook-base-url localhost:9999: not an http:// or https:// URL",
        ),
        (
            vec!["dev", "--sandbox", "-f", &hello, "--watch", "/nonexistent"],
            "--watch /nonexistent: no such file or directory",
        ),
        (
            vec!["dev", "--sandbox", "--context", "prod", "-f", &hello],
            "--context",
        ),
        (
            vec!["--context", "prod", "dev", "--sandbox", "-f", &hello],
            "--sandbox starts its own API server and cannot be used with --context",
        ),
        (
            vec!["dev", "--sandbox", "-f", &hello, "--timeout", "5"],
            "--once",
        ),
        (
            vec![
                "dev",
                "--sandbox",
                "-f",
                &hello,
                "--no-watch",
                "--watch",
                &hello,
            ],
            "--no-watch",
        ),
        (
            vec![
                "dev",
                "--sandbox",
                "-f",
                &hello,
                "--once",
                "--watch",
                &hello,
            ],
            "--once",
        ),
        (
            vec!["dev", "--sandbox", "-f", "/nonexistent.yaml"],
            "/nonexistent.yaml",
        ),
        (
            vec!["dev", "--sandbox", "-f", &hello, "--overwrite"],
            "--apply",
        ),
        (
            vec!["--context", "prod", "sandbox", "--ephemeral"],
            "--context do(es) not apply",
        ),
    ];
    for (args, want) in cases {
        let out = run(meta(home.path(), &args)).await;
        let (stdout, stderr) = assert_code(&out, 2);
        assert!(stderr.contains(want), "{args:?}: {want:?} in\n{stderr}");
        assert!(
            !stderr.contains("sandbox listening") && !stdout.contains("sandbox listening"),
            "{args:?} started a sandbox:\n{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_help_lists_only_flags_that_work_there() {
    let home = tempfile::tempdir().unwrap();
    let out = run(meta(home.path(), &["sandbox", "--help"])).await;
    let (help, _) = assert_code(&out, 0);
    for flag in ["--kubeconfig", "--context", "--namespace"] {
        assert!(!help.contains(flag), "{flag} in sandbox --help:\n{help}");
    }
    assert!(help.contains("--listen"), "{help}");
    let out = run(meta(home.path(), &["dev", "--help"])).await;
    let (help, _) = assert_code(&out, 0);
    for flag in [
        "--kubeconfig",
        "--context",
        "--namespace",
        "--recursive",
        "--color",
    ] {
        assert!(
            help.contains(flag),
            "{flag} missing from dev --help:\n{help}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_exits_3() {
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: local\nclusters:\n- name: local\n  cluster: {server: 'http://127.0.0.1:1'}\ncontexts:\n- name: local\n  context: {cluster: local, user: me}\nusers:\n- name: me\n  user: {token: x}\n",
    )
    .unwrap();
    let out = run(meta(
        home.path(),
        &[
            "dev",
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "-f",
            &example("hello-world"),
            "--once",
        ],
    ))
    .await;
    let (_, stderr) = assert_code(&out, 3);
    assert!(
        stderr.contains("cannot reach the API server of context local"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_of_an_unknown_parent_fails_and_a_known_one_succeeds() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    // No dev loop running.
    let out = run(meta(home.path(), &["dev", "--resync", "default/hello"])).await;
    let (_, stderr) = assert_code(&out, 6);
    assert!(stderr.contains("no running `kubectl meta dev`"), "{stderr}");

    let dev = hello_world_loop(home.path(), &sb).await;
    let out = run(meta(home.path(), &["dev", "--resync", "nosuch"])).await;
    let (_, stderr) = assert_code(&out, 6);
    assert!(stderr.contains("no parent named nosuch"), "{stderr}");
    let out = run(meta(home.path(), &["dev", "--resync", "default/hello"])).await;
    let (stdout, _) = assert_code(&out, 0);
    assert!(
        stdout.contains("resync of default/hello queued"),
        "{stdout}"
    );
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
}

/// The arguments of `dev --kubeconfig SB --apply -f examples/hello-world --once EXTRA...`.
fn hello_once_args(sb: &common::TestSandbox, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["dev", "--kubeconfig", &kc(sb), "--apply", "-f"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(example("hello-world"));
    args.push("--once".into());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// `dev --apply -f examples/hello-world --no-watch` in the background, once it created the Pod.
async fn hello_world_loop(home: &Path, sb: &common::TestSandbox) -> Background {
    let dev = Background::start(meta(
        home,
        &[
            "dev",
            "--kubeconfig",
            &kc(sb),
            "--apply",
            "-f",
            &example("hello-world"),
            "--no-watch",
        ],
    ));
    dev.wait_output("create    Pod.v1 default/hello").await;
    dev
}

/// The `dev-sandbox-*.kubeconfig` files in the data directory of `home`.
fn sandbox_kubeconfigs(home: &Path) -> Vec<std::path::PathBuf> {
    let dir = home.join("data/kubectl-meta");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("dev-sandbox") && n.ends_with(".kubeconfig"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sandbox_dev_loops_each_keep_their_own_kubeconfig() {
    let home = tempfile::tempdir().unwrap();
    let start = || {
        Background::start(meta(
            home.path(),
            &[
                "dev",
                "--sandbox",
                "--apply",
                "-f",
                &example("hello-world"),
                "--no-watch",
            ],
        ))
    };
    let first = start();
    first.wait_output("create    Pod.v1 default/hello").await;
    let second = start();
    second.wait_output("create    Pod.v1 default/hello").await;
    let files = sandbox_kubeconfigs(home.path());
    assert_eq!(files.len(), 2, "{files:?}");
    let servers: Vec<String> = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            text.lines()
                .find(|l| l.trim_start().starts_with("server:"))
                .unwrap()
                .to_string()
        })
        .collect();
    assert_ne!(servers[0], servers[1]);
    // Each one reaches its own sandbox, also after the other stopped.
    let (ok, stderr) = first.interrupt().await;
    assert!(ok, "{stderr}");
    let left = sandbox_kubeconfigs(home.path());
    assert_eq!(
        left.len(),
        1,
        "the first removed its own file only: {left:?}"
    );
    let out = common::kubectl(&left[0], &["get", "helloworlds", "-o", "name"], None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "helloworld.example.kubectl-meta.dev/hello"
    );
    let (ok, stderr) = second.interrupt().await;
    assert!(ok, "{stderr}");
    assert!(sandbox_kubeconfigs(home.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_creates_what_is_missing_and_overwrite_reapplies() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let apply = |extra: &'static [&'static str]| {
        let args = hello_once_args(&sb, extra);
        let home = home.path().to_path_buf();
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            run(meta(&home, &refs)).await
        }
    };
    let who = |sb: &common::TestSandbox| {
        let out = sb.kubectl(&["get", "helloworld", "hello", "-o", "jsonpath={.spec.who}"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = apply(&[]).await;
    let (_, stderr) = assert_code(&out, 0);
    assert!(
        stderr.contains("applied HelloWorld default/hello"),
        "{stderr}"
    );
    // The user edits the sample with kubectl; a restart with --apply keeps the edit.
    let out = sb.kubectl(&[
        "patch",
        "helloworld",
        "hello",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"who":"Edited"}}"#,
    ]);
    assert!(out.status.success(), "{out:?}");
    let out = apply(&[]).await;
    let (_, stderr) = assert_code(&out, 0);
    assert!(
        stderr.contains("exists  HelloWorld default/hello (kept as it is)"),
        "{stderr}"
    );
    assert!(stderr.contains("pass --overwrite"), "{stderr}");
    assert_eq!(who(&sb), "Edited");
    // --overwrite re-applies the file.
    let out = apply(&["--overwrite"]).await;
    let (_, stderr) = assert_code(&out, 0);
    assert!(
        stderr.contains("applied HelloWorld default/hello"),
        "{stderr}"
    );
    assert_eq!(who(&sb), "World");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recursive_reads_definitions_in_subdirectories() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    copy_example("hello-world", &dir.path().join("nested/hello"));
    // The example's hooks import the shared plumbing from the directory above them.
    std::fs::copy(
        repo().join("examples/hookkit.py"),
        dir.path().join("nested/hookkit.py"),
    )
    .unwrap();
    let path = dir.path().display().to_string();
    let out = run(meta(
        home.path(),
        &[
            "dev",
            "--kubeconfig",
            &kc(&sb),
            "--apply",
            "-f",
            &path,
            "--once",
        ],
    ))
    .await;
    let (_, stderr) = assert_code(&out, 2);
    assert!(stderr.contains(&path), "{stderr}");
    let out = run(meta(
        home.path(),
        &[
            "dev",
            "--kubeconfig",
            &kc(&sb),
            "--apply",
            "-R",
            "-f",
            &path,
            "--once",
            "--timeout",
            "60",
        ],
    ))
    .await;
    let (stdout, _) = assert_code(&out, 0);
    assert!(
        stdout.contains("create    Pod.v1 default/hello"),
        "{stdout}"
    );
}

/// The long flags (`--name`) in `text`.
fn long_flags(text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let name: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if name.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
            out.insert(format!("--{name}"));
        }
    }
    out
}

/// The first column of the flag table of the guide page `page` (docs/guide/PAGE).
fn guide_table_flags(page: &str) -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join("docs/guide").join(page))
        .unwrap_or_else(|e| panic!("docs/guide/{page}: {e}"));
    let first_column: String = text
        .lines()
        .filter(|l| l.starts_with("| `-"))
        .map(|l| l.split(" | ").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    long_flags(&first_column)
}

/// The long flags `<args> --help` lists (its own `--help` and `--version` aside).
async fn help_flags(args: &[&str]) -> std::collections::BTreeSet<String> {
    let home = tempfile::tempdir().unwrap();
    let mut with_help = args.to_vec();
    with_help.push("--help");
    let out = run(meta(home.path(), &with_help)).await;
    let (help, _) = assert_code(&out, 0);
    // Only the option lines of the Options section: "  -x, --name <V>  text".
    let options = &help[help.find("Options:").expect("an Options section")..];
    let options = &options[..options.find("\nExamples:").unwrap_or(options.len())];
    let options: String = options
        .lines()
        .filter(|l| l.trim_start().starts_with('-'))
        .map(|l| {
            let l = l.trim_start();
            l.split("  ").next().unwrap_or("").to_string()
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut flags = long_flags(&options);
    flags.remove("--help");
    flags.remove("--version");
    flags
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guide_flag_tables_match_help() {
    for (args, page) in [
        (vec!["dev"], "dev.md"),
        (vec!["sandbox"], "sandbox.md"),
        (vec!["dryrun"], "dryrun.md"),
        (vec!["test"], "test.md"),
        (vec!["run"], "run.md"),
        (vec!["deploy"], "deploy.md"),
        (vec!["replay"], "replay.md"),
        (vec!["flight", "dump"], "flight.md"),
    ] {
        let help = help_flags(&args).await;
        let documented = guide_table_flags(page);
        let missing: Vec<_> = help.difference(&documented).collect();
        let stale: Vec<_> = documented.difference(&help).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "{args:?}: docs/guide/{page}'s flag table lacks {missing:?} and documents flags --help does not list: {stale:?}"
        );
    }
}

/// `dev` on the hello-world webhook example with `server` as its managed hook server on `port`.
fn webhook_dev(home: &Path, sb: &common::TestSandbox, port: u16, server: &str) -> Background {
    Background::start(meta(
        home,
        &[
            "dev",
            "--kubeconfig",
            &kc(sb),
            "-f",
            &example("hello-world/webhook"),
            "--hook-base-url",
            &format!("http://127.0.0.1:{port}"),
            "--hook-server",
            server,
            "--no-watch",
        ],
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_says_what_it_does_and_a_second_ctrl_c_exits_at_once() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    // A clean stop says each step, promptly.
    let dev = hello_world_loop(home.path(), &sb).await;
    let (status, stderr) = dev.interrupt_status().await;
    assert!(status.success(), "{stderr}");
    for step in [
        "stopping: finishing in-flight syncs and stopping the hook server (Ctrl-C again to exit at once)",
        "stopping: releasing 1 Lease(s)",
        "stopping: done",
    ] {
        assert!(stderr.contains(step), "{step:?} in\n{stderr}");
    }

    // A hook server that ignores SIGTERM holds the stop up (the grace period); a second
    // Ctrl-C exits at once with 130.
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("stubborn.py");
    let server = repo().join("examples/hello-world/server.py");
    std::fs::write(
        &wrapper,
        format!(
            "import os, runpy, signal, sys, threading\n\
             signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
             threading.Timer(60, lambda: os._exit(0)).start()  # never outlive the test\n\
             sys.argv = [{server:?}] + sys.argv[1:]\n\
             sys.path.insert(0, os.path.dirname({server:?}))\n\
             runpy.run_path({server:?}, run_name='__main__')\n",
            server = server.display().to_string()
        ),
    )
    .unwrap();
    let port = common::free_port();
    let dev = webhook_dev(
        home.path(),
        &sb,
        port,
        &format!("python3 {} --port {port}", wrapper.display()),
    );
    dev.wait_output("server    ready (pid").await;
    dev.sigint();
    dev.wait_errors("Ctrl-C again to exit at once").await;
    let (status, stderr) = dev.interrupt_status().await;
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("exiting at once"), "{stderr}");
}

/// A Ctrl-C while the engine starts (here: a hook server that never gets ready) is not lost and
/// does not kill the process mid-way: dev says where it was, stops the hook server, releases the
/// Lease it took and exits 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_start_up_stops_the_hook_server_and_releases_the_lease() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dev = webhook_dev(
        home.path(),
        &sb,
        common::free_port(),
        "python3 -u -c 'import os, time; print(\"booting\", os.getpid()); time.sleep(120)'",
    );
    dev.wait_output("booting ").await;
    let pid: i32 = dev
        .output()
        .split("booting ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .expect("the hook server's pid");
    let lease_ar = ar("coordination.k8s.io", "Lease", "leases");
    assert_eq!(names(&sb, &lease_ar, "default").await.len(), 1);

    let (status, stderr) = dev.interrupt_status().await;
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted while starting the controllers"),
        "{stderr}"
    );
    assert!(
        names(&sb, &lease_ar, "default").await.is_empty(),
        "the Lease is released"
    );
    // Killed as dev exits; init reaps it soon after (signal 0 only asks whether it exists).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while unsafe { libc::kill(pid, 0) } == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the hook server (pid {pid}) outlived dev"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colors_only_on_a_terminal_unless_asked() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let run_with = |extra: &'static [&'static str], no_color: bool| {
        let args = hello_once_args(&sb, extra);
        let home = home.path().to_path_buf();
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut cmd = meta(&home, &refs);
            cmd.env("KUBECTL_META_LOG", "debug");
            if !no_color {
                cmd.env_remove("NO_COLOR");
            }
            run(cmd).await
        }
    };
    // Redirected, no NO_COLOR: neither the event log nor the log lines carry ANSI codes.
    let out = run_with(&[], false).await;
    let (stdout, stderr) = assert_code(&out, 0);
    assert!(stderr.contains("DEBUG"), "log lines: {stderr}");
    assert!(!stdout.contains('\u{1b}'), "{stdout}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    // --color always: colored although redirected; NO_COLOR does not override an explicit flag.
    let out = run_with(&["--color", "always"], true).await;
    let (stdout, _) = assert_code(&out, 0);
    assert!(stdout.contains('\u{1b}'), "{stdout}");
    let out = run_with(&["--color", "never"], false).await;
    let (stdout, stderr) = assert_code(&out, 0);
    assert!(!stdout.contains('\u{1b}') && !stderr.contains('\u{1b}'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_hooks_stderr_is_shown_with_v_and_in_json_events_when_it_succeeds() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    exec_hook_controller(
        dir.path(),
        "chatty",
        "import json, sys\nreq = json.load(sys.stdin)\nprint('debug: hello from the hook', file=sys.stderr)\nprint(json.dumps({'status': {'seen': True}, 'children': []}))\n",
    );
    let path = dir.path().display().to_string();
    let base = [
        "dev",
        "--kubeconfig",
        &kc(&sb),
        "--apply",
        "-f",
        &path,
        "--once",
    ];
    let mut json = base.to_vec();
    json.extend(["-o", "json"]);
    let out = run(meta(home.path(), &json)).await;
    let (stdout, _) = assert_code(&out, 0);
    let calls: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "hookCalled")
        .collect();
    assert!(!calls.is_empty(), "{stdout}");
    assert!(
        calls
            .iter()
            .all(|c| c["stderr"] == "debug: hello from the hook\n" && c["error"].is_null()),
        "{calls:?}"
    );
    let mut verbose = base.to_vec();
    verbose.push("-v");
    let out = run(meta(home.path(), &verbose)).await;
    let (stdout, _) = assert_code(&out, 0);
    assert!(stdout.contains("debug: hello from the hook"), "{stdout}");
    let out = run(meta(home.path(), &base)).await;
    let (stdout, _) = assert_code(&out, 0);
    assert!(!stdout.contains("debug: hello from the hook"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_requests_writes_each_hook_call_to_files() {
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dump = home.path().join("calls");
    let mut args = hello_once_args(&sb, &[]);
    args.extend(["--dump-requests".to_string(), dump.display().to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(meta(home.path(), &refs)).await;
    assert_code(&out, 0);
    let folder = dump.join("hello-world-controller/default_hello");
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let request = names
        .iter()
        .find(|n| n.ends_with("-sync.request.json"))
        .unwrap_or_else(|| panic!("{names:?}"));
    let req: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join(request)).unwrap()).unwrap();
    assert_eq!(req["parent"]["metadata"]["name"], "hello");
    let response = request.replace(".request.json", ".response.json");
    let resp: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join(&response)).unwrap()).unwrap();
    assert_eq!(resp["children"][0]["kind"], "Pod", "{resp}");
}
