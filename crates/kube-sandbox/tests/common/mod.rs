//! Shared helpers for the sandbox's integration tests (the plugin's tests include this file too): start a sandbox in-process, build kube clients for it,
//! run the real `kubectl` against it, and wait on conditions (never on fixed sleeps).
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sandbox::{Sandbox, SandboxConfig};

/// Generous timeout for conditions on a busy 2-core machine.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A running sandbox with a client and a kubeconfig file.
pub struct TestSandbox {
    /// The server.
    pub sandbox: Sandbox,
    /// A kube-rs client for it.
    pub client: kube::Client,
    /// Temp dir holding the kubeconfig (kept alive as long as the sandbox).
    pub dir: tempfile::TempDir,
}

impl TestSandbox {
    /// Path of the kubeconfig file.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// Run the real kubectl against this sandbox.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        kubectl(&self.kubeconfig(), args, None)
    }

    /// Run kubectl with `stdin` as standard input.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        kubectl(&self.kubeconfig(), args, Some(stdin))
    }
}

/// Start an ephemeral sandbox with a fast simulated kubelet.
pub async fn start() -> TestSandbox {
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = Some(Duration::from_millis(50));
    start_with(cfg).await
}

/// Start a sandbox with `cfg` (its kubeconfig is always written to a temp dir).
pub async fn start_with(mut cfg: SandboxConfig) -> TestSandbox {
    let dir = tempfile::tempdir().expect("tempdir");
    cfg.kubeconfig = Some(dir.path().join("kubeconfig"));
    let sandbox = Sandbox::start(cfg).await.expect("sandbox starts");
    let client = client_for(&sandbox).await;
    TestSandbox {
        sandbox,
        client,
        dir,
    }
}

/// [`kubectl`] on a blocking thread (for tests whose sandbox runs on the test's own runtime),
/// failing the test if it has not finished within 60 s.
pub async fn kubectl_async(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let kc = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let stdin = stdin.map(String::from);
    let what = args.join(" ");
    let task = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl(&kc, &refs, stdin.as_deref())
    });
    tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .unwrap_or_else(|_| panic!("kubectl {what} hung"))
        .expect("kubectl thread")
}

/// One raw HTTPS request with the admin token: status code and JSON body (null when the body
/// is not JSON).
pub async fn admin_request(
    t: &TestSandbox,
    method: &str,
    path: &str,
    body: &serde_json::Value,
    content_type: &str,
) -> (u16, serde_json::Value) {
    request_as(t, t.sandbox.token(), method, path, body, content_type).await
}

/// Like [`admin_request`], with the bearer token `token`.
pub async fn request_as(
    t: &TestSandbox,
    token: &str,
    method: &str,
    path: &str,
    body: &serde_json::Value,
    content_type: &str,
) -> (u16, serde_json::Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut rb = https_client(t)
        .request(method, format!("{}{path}", t.sandbox.url()))
        .bearer_auth(token)
        .header("accept", "application/json");
    if !body.is_null() {
        rb = rb
            .header("content-type", content_type)
            .body(body.to_string());
    }
    let r = rb.send().await.expect("request");
    let code = r.status().as_u16();
    let bytes = r.bytes().await.expect("body");
    (
        code,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

/// A listener on a free port of 127.0.0.1, and the port.
pub async fn listen_local() -> (tokio::net::TcpListener, u16) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    (listener, port)
}

/// A TLS acceptor serving `cert` with `key` (a test's stand-in HTTPS server).
pub fn tls_acceptor(cert: &rcgen::Certificate, key: &rcgen::KeyPair) -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .expect("server config");
    tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(cfg))
}

/// A reqwest client trusting the sandbox's CA.
pub fn https_client(t: &TestSandbox) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(t.sandbox.ca_pem().as_bytes()).expect("ca");
    reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client")
}

/// Read one HTTP/1.1 request from `io` (a test's stand-in server): its head (request line
/// and headers) and its body (`Content-Length` bytes); None if the peer went away first.
pub async fn read_http_request<S>(io: &mut S) -> Option<(String, Vec<u8>)>
where
    S: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = io.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        let len: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap_or(0))
            })
            .unwrap_or(0);
        if buf.len() >= end + 4 + len {
            return Some((head, buf[end + 4..end + 4 + len].to_vec()));
        }
    }
}

/// A JSON file of a fixture directory (`cases.json`, or the `expected.json` its capture script
/// wrote from a real kube-apiserver's answers).
pub fn fixture(dir: &str, file: &str) -> serde_json::Value {
    let path = format!("{dir}/{file}");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (run the directory's capture script)"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The cases whose sandbox answer differs from the real server's (fixture tests).
#[derive(Default)]
pub struct Differences {
    cases: usize,
    differ: Vec<String>,
}

impl Differences {
    /// Compare one case's answer with the real server's.
    pub fn check(&mut self, name: &str, real: &serde_json::Value, sandbox: &serde_json::Value) {
        self.cases += 1;
        if real != sandbox {
            self.differ
                .push(format!("{name}:\n  real:    {real}\n  sandbox: {sandbox}"));
        }
    }

    /// Fail, listing every differing case, unless there is none.
    pub fn assert_none(self) {
        assert!(
            self.differ.is_empty(),
            "{} of {} cases differ from the real server:\n{}",
            self.differ.len(),
            self.cases,
            self.differ.join("\n")
        );
    }
}

/// A kube-rs client built from the sandbox's kubeconfig, exactly as users' tools would.
pub async fn client_for(sandbox: &Sandbox) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&sandbox.kubeconfig_yaml()).expect("kubeconfig parses");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    kube::Client::try_from(cfg).expect("kube client")
}

/// Run `kubectl --kubeconfig KC ARGS...`.
pub fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new("kubectl");
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--request-timeout=30s")
        .args(args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .expect("kubectl runs (is /usr/bin/kubectl installed?)");
    if let Some(s) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(s.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("kubectl finishes")
}

/// Poll `f` until it returns Some, or panic after `timeout` naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut delay = Duration::from_millis(10);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(250));
    }
}

/// stdout of a kubectl run, asserting success.
pub fn ok_stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}\nstdout: {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Permission bits (`0o600`, ...) of a file.
pub fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("stat {}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Column names of a server-side `Table` response.
pub fn table_columns(table: &serde_json::Value) -> Vec<&str> {
    table["columnDefinitions"]
        .as_array()
        .expect("columnDefinitions")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect()
}

/// A free port, never the same one twice in this test process: tests run in parallel, and the
/// kernel may hand a released port out again, so two tests could otherwise share one (and a
/// "never listens" test would see another test's server as ready).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        let mut given = GIVEN.lock().expect("port list");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}
