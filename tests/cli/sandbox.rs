//! The real `kubectl-meta sandbox` binary: the start-up line, the private kubeconfig it writes,
//! the real kubectl against it, clean exit on SIGTERM/SIGINT, `--state` across restarts, clear
//! errors for bad `--listen` values, `--help`, 401 for a wrong token, and `--token-auth-file`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-meta");

/// A running `kubectl-meta sandbox` process (killed if the test fails).
struct Running {
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: tokio::task::JoinHandle<String>,
    /// The start-up line.
    line: String,
}

/// Start `kubectl-meta sandbox ARGS` with its data directory under `home`, and read its first line.
async fn start(home: &Path, args: &[&str]) -> Running {
    let mut child = Command::new(BIN)
        .arg("sandbox")
        .args(args)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl-meta starts");
    let mut err = child.stderr.take().expect("stderr");
    let stderr = tokio::spawn(async move {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s).await;
        s
    });
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = match tokio::time::timeout(common::TIMEOUT, stdout.next_line()).await {
        Ok(Ok(Some(l))) => l,
        Ok(Ok(None)) => {
            let status = child.wait().await.expect("wait");
            let err = stderr.await.unwrap_or_default();
            panic!("sandbox exited ({status}) before printing its line; stderr:\n{err}");
        }
        Ok(Err(e)) => panic!("reading the sandbox's stdout: {e}"),
        Err(_) => panic!("the sandbox printed nothing within {:?}", common::TIMEOUT),
    };
    Running {
        child,
        stdout,
        stderr,
        line,
    }
}

impl Running {
    fn pid(&self) -> u32 {
        self.child.id().expect("child still running")
    }

    /// Send `signal` (e.g. "TERM") with the `kill` command and wait (up to 15 s) for a clean exit.
    /// Returns everything else the process printed on stdout, and its stderr.
    async fn stop(mut self, signal: &str) -> (Vec<String>, String) {
        let pid = self.pid().to_string();
        let st = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(&pid)
            .status()
            .expect("kill runs");
        assert!(st.success(), "kill -{signal} {pid}");
        let status = match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(s) => s.expect("wait"),
            Err(_) => panic!("the sandbox did not exit within 15 s of SIG{signal}"),
        };
        let mut rest = Vec::new();
        while let Ok(Ok(Some(l))) =
            tokio::time::timeout(Duration::from_secs(5), self.stdout.next_line()).await
        {
            rest.push(l);
        }
        let err = self.stderr.await.unwrap_or_default();
        assert!(
            status.success(),
            "exit status after SIG{signal}: {status}; stderr:\n{err}"
        );
        (rest, err)
    }
}

/// A copy of kubeconfig `kc` (next to it, named after the token) with its token replaced by
/// `token`.
fn with_token(kc: &Path, token: &str) -> PathBuf {
    let yaml = std::fs::read_to_string(kc).expect("kubeconfig");
    let token_line = yaml
        .lines()
        .find(|l| l.trim_start().starts_with("token: "))
        .expect("token line")
        .to_string();
    let out = kc.with_file_name(format!("{token}.kubeconfig"));
    std::fs::write(
        &out,
        yaml.replace(&token_line, &format!("    token: {token}")),
    )
    .expect("write kubeconfig");
    out
}

/// Run kubectl off the async threads.
async fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let kc = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let stdin = stdin.map(String::from);
    tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        common::kubectl(&kc, &a, stdin.as_deref())
    })
    .await
    .expect("kubectl task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_sandbox_announces_itself_serves_kubectl_and_exits_on_sigterm() {
    let home = tempfile::tempdir().expect("tempdir");
    let kc: PathBuf = home.path().join("out").join("sandbox.kubeconfig");
    let kc_s = kc.to_str().expect("utf-8 path");
    let r = start(
        home.path(),
        &[
            "--ephemeral",
            "--write-kubeconfig",
            kc_s,
            "--listen",
            "127.0.0.1:0",
        ],
    )
    .await;
    assert!(
        r.line.contains("listening on https://127.0.0.1:"),
        "line: {}",
        r.line
    );
    assert!(
        r.line.contains(kc_s),
        "line names the kubeconfig: {}",
        r.line
    );
    let port: u16 = r
        .line
        .split("https://127.0.0.1:")
        .nth(1)
        .and_then(|s| {
            s.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|p| p.parse().ok())
        })
        .expect("port in the line");
    assert_ne!(port, 0, "a real port was picked");

    // The kubeconfig exists (it was written before the line), is private and points at that port.
    assert_eq!(common::mode(&kc), 0o600, "kubeconfig mode");
    let yaml = std::fs::read_to_string(&kc).expect("read kubeconfig");
    assert!(
        yaml.contains(&format!("server: https://127.0.0.1:{port}")),
        "{yaml}"
    );
    assert!(yaml.contains("current-context: sandbox"), "{yaml}");

    let out = kubectl(&kc, &["get", "ns", "-o", "name"], None).await;
    let names = common::ok_stdout(&out);
    for ns in ["namespace/default", "namespace/kube-system"] {
        assert!(names.lines().any(|l| l == ns), "{ns} in {names}");
    }

    let (rest, stderr) = r.stop("TERM").await;
    assert!(
        rest.is_empty(),
        "exactly one line on stdout; also got {rest:?} (stderr: {stderr})"
    );
    // Nothing listens any more.
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "port {port} closed after exit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_directory_keeps_a_configmap_across_restarts() {
    let home = tempfile::tempdir().expect("tempdir");
    let state = home.path().join("state");
    let state_s = state.to_str().expect("utf-8 path");
    let kc = state.join("kubeconfig");

    let r = start(home.path(), &["--state", state_s]).await;
    assert!(
        r.line.contains(kc.to_str().expect("utf-8")),
        "default kubeconfig is DIR/kubeconfig: {}",
        r.line
    );
    let manifest = r#"{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "durable", "namespace": "default"}, "data": {"answer": "42"}}"#;
    common::ok_stdout(&kubectl(&kc, &["apply", "-f", "-"], Some(manifest)).await);
    let uid = common::ok_stdout(
        &kubectl(
            &kc,
            &["get", "cm", "durable", "-o", "jsonpath={.metadata.uid}"],
            None,
        )
        .await,
    );
    assert!(!uid.is_empty());
    r.stop("INT").await;
    assert_eq!(common::mode(&state), 0o700, "state dir mode");
    assert_eq!(common::mode(&kc), 0o600, "kubeconfig mode");

    let r = start(home.path(), &["--state", state_s]).await;
    assert!(
        r.line.contains("listening on https://127.0.0.1:"),
        "{}",
        r.line
    );
    let got = common::ok_stdout(
        &kubectl(
            &kc,
            &[
                "get",
                "cm",
                "durable",
                "-o",
                "jsonpath={.data.answer} {.metadata.uid}",
            ],
            None,
        )
        .await,
    );
    assert_eq!(got, format!("42 {uid}"));
    r.stop("TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_listen_addresses_fail_with_a_clear_message() {
    let home = tempfile::tempdir().expect("tempdir");
    let kc = home.path().join("kc");
    let run = |listen: String| {
        let home = home.path().to_path_buf();
        let kc = kc.clone();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(BIN)
                .args(["sandbox", "--ephemeral", "--write-kubeconfig"])
                .arg(&kc)
                .arg("--listen")
                .arg(&listen)
                .env("XDG_DATA_HOME", home.join("data"))
                .env("HOME", &home)
                .stdin(Stdio::null())
                .output()
                .expect("kubectl-meta runs")
        })
    };

    let out = run("999.1.1.1:0".into()).await.expect("task");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "999.1.1.1 must fail");
    assert!(
        err.contains("999.1.1.1") && err.contains("--listen"),
        "stderr names the value and the flag: {err}"
    );
    assert!(out.stdout.is_empty(), "no start-up line on failure");

    // A port that is already taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = run(addr.clone()).await.expect("task");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a taken port must fail: {err}");
    assert!(
        err.contains(&addr) && err.contains("--listen"),
        "stderr names the address and the way out: {err}"
    );
    assert_eq!(
        err.matches("in use").count(),
        1,
        "the cause is printed once: {err}"
    );
    assert!(out.stdout.is_empty(), "no start-up line on failure");
    drop(taken);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_documents_state_and_ephemeral() {
    let out = tokio::task::spawn_blocking(|| {
        std::process::Command::new(BIN)
            .args(["sandbox", "--help"])
            .output()
            .expect("kubectl-meta runs")
    })
    .await
    .expect("task");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--state",
        "--ephemeral",
        "--listen",
        "--write-kubeconfig",
        "--no-kubelet",
        "--token-auth-file",
    ] {
        assert!(help.contains(flag), "{flag} in help:\n{help}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_with_a_wrong_token_is_unauthorized() {
    let home = tempfile::tempdir().expect("tempdir");
    let kc = home.path().join("kubeconfig");
    let r = start(
        home.path(),
        &[
            "--ephemeral",
            "--write-kubeconfig",
            kc.to_str().expect("utf-8"),
        ],
    )
    .await;
    let bad = with_token(&kc, "wrong-token");

    let out = kubectl(&bad, &["get", "ns"], None).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "wrong token must fail");
    assert!(
        err.contains("Unauthorized") || err.contains("provide credentials"),
        "stderr: {err}"
    );
    // The right one still works.
    common::ok_stdout(&kubectl(&kc, &["get", "ns", "default"], None).await);
    r.stop("TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_auth_file_users_can_use_the_sandbox_and_a_bad_file_is_a_usage_error() {
    let home = tempfile::tempdir().expect("tempdir");
    let tokens = home.path().join("tokens.csv");
    std::fs::write(&tokens, "dev-token,dev,uid-dev,\"system:masters\"\n").expect("tokens");
    let kc = home.path().join("kubeconfig");
    let r = start(
        home.path(),
        &[
            "--ephemeral",
            "--write-kubeconfig",
            kc.to_str().expect("utf-8"),
            "--token-auth-file",
            tokens.to_str().expect("utf-8"),
        ],
    )
    .await;
    let dev = with_token(&kc, "dev-token");
    let who = common::ok_stdout(&kubectl(&dev, &["auth", "whoami"], None).await);
    assert!(who.contains("dev") && who.contains("uid-dev"), "{who}");
    common::ok_stdout(&kubectl(&dev, &["get", "ns", "default"], None).await);
    r.stop("TERM").await;

    // A record with 2 columns: refused before anything starts, exit 2, naming the file.
    std::fs::write(&tokens, "dev-token,dev\n").expect("tokens");
    let out = tokio::task::spawn_blocking({
        let tokens = tokens.clone();
        let home = home.path().to_path_buf();
        move || {
            std::process::Command::new(BIN)
                .args(["sandbox", "--ephemeral", "--token-auth-file"])
                .arg(&tokens)
                .env("XDG_DATA_HOME", home.join("data"))
                .env("HOME", &home)
                .output()
                .expect("kubectl-meta runs")
        }
    })
    .await
    .expect("task");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(
        err.contains(&format!(
            "token file '{}' must have at least 3 columns (token, user name, user uid), found 2 (line 1)",
            tokens.display()
        )),
        "stderr: {err}"
    );
    assert!(out.stdout.is_empty(), "nothing announced: {:?}", out.stdout);
}
