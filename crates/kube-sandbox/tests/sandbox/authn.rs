//! Authentication beyond the admin token and ServiceAccounts: requests without credentials
//! (`system:anonymous`, 403 from RBAC except what `system:public-info-viewer` grants, compared
//! case by case with a real kube-apiserver's answers in `fixtures/anonymous`, captured by
//! `fixtures/anonymous/capture.py`), tokens nobody knows (401), `--anonymous-auth=false`, and
//! static token files (`--token-auth-file`).

use crate::common;

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{TestSandbox, ok_stdout};
use kube_sandbox::{Sandbox, SandboxConfig, SandboxError};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/anonymous");

/// Run kubectl on a blocking thread (the sandbox runs in this process).
async fn run(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    common::kubectl_async(kubeconfig, args, None).await
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// klog's line prefix (time and pid) reduced to the level, as capture.py does.
fn klog_normalized(stderr: &str) -> String {
    let re = regex::Regex::new(r"(?m)^([EIW])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ ").expect("regex");
    re.replace_all(stderr, "$1 ").into_owned()
}

/// A copy of the sandbox's kubeconfig whose user is `user` with `creds` (kubectl
/// `set-credentials` flags), and a fresh discovery cache dir next to it.
async fn kubeconfig_as(t: &TestSandbox, user: &str, creds: &[&str]) -> std::path::PathBuf {
    let kc = t.dir.path().join(format!("{user}.kubeconfig"));
    std::fs::copy(t.kubeconfig(), &kc).expect("copy kubeconfig");
    let mut args = vec!["config", "set-credentials", user];
    args.extend_from_slice(creds);
    ok_stdout(&run(&kc, &args).await);
    let ctx = format!("--user={user}");
    ok_stdout(&run(&kc, &["config", "set-context", "--current", &ctx]).await);
    kc
}

/// A raw HTTPS request: status code and body (JSON when it is JSON, else text).
async fn http(t: &TestSandbox, case: &Value) -> (u16, Value) {
    let h = &case["http"];
    let ca = reqwest::Certificate::from_pem(t.sandbox.ca_pem().as_bytes()).expect("ca");
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .expect("client");
    let method = reqwest::Method::from_bytes(h["method"].as_str().unwrap_or("GET").as_bytes())
        .expect("method");
    let path = h["path"].as_str().unwrap_or("/");
    let mut rb = client
        .request(method, format!("{}{path}", t.sandbox.url()))
        .header("accept", "application/json");
    if let Some(a) = h["authorization"].as_str() {
        rb = rb.header("authorization", a);
    }
    if let Some(u) = h["impersonate_user"].as_str() {
        rb = rb.header("impersonate-user", u);
    }
    if !h["body"].is_null() {
        rb = rb
            .header("content-type", "application/json")
            .body(h["body"].to_string());
    }
    let r = rb.send().await.expect("request");
    let code = r.status().as_u16();
    let body = r.bytes().await.expect("body");
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    (code, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_answers_match_the_real_server() {
    let cases: Value = common::fixture(FIXTURES, "cases.json");
    let expected: Value = common::fixture(FIXTURES, "expected.json");
    let t = common::start().await;
    let anon = kubeconfig_as(&t, "nobody", &["--username=nobody", "--password=x"]).await;
    let cache = t.dir.path().join("cache");
    let cache = cache.to_str().expect("utf-8 path");
    let mut differ = common::Differences::default();
    for case in cases.as_array().expect("a list") {
        let name = case["name"].as_str().expect("name");
        let got = if let Some(args) = case["kubectl"].as_array() {
            let mut full = vec!["--cache-dir", cache, "--request-timeout=20s"];
            full.extend(args.iter().filter_map(Value::as_str));
            let o = run(&anon, &full).await;
            json!({"exit": o.status.code().unwrap_or(-1), "stdout": text(&o.stdout),
                "stderr": klog_normalized(&text(&o.stderr))})
        } else {
            let (code, body) = http(&t, case).await;
            if case["code_only"] == true {
                json!({"code": code})
            } else {
                json!({"code": code, "body": body})
            }
        };
        differ.check(name, &expected[name], &got);
    }
    differ.assert_none();
    // Nothing was created by the refused writes.
    let cms = ok_stdout(&t.kubectl(&["get", "configmaps", "-A", "-o", "name"]));
    assert!(!cms.contains("configmap/a\n"), "{cms}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_anonymous_auth_requests_without_credentials_are_401() {
    let t = common::start_with(SandboxConfig {
        anonymous_auth: false,
        ..SandboxConfig::ephemeral()
    })
    .await;
    for path in ["/healthz", "/version", "/api/v1/namespaces"] {
        let (code, body) = http(&t, &json!({"http": {"path": path}})).await;
        assert_eq!(code, 401, "{path}: {body}");
        assert_eq!(body["reason"], "Unauthorized", "{path}: {body}");
    }
    // The admin's token still works.
    ok_stdout(&t.kubectl(&["get", "--raw", "/healthz"]));
}

const TOKENS: &str = "\
alice-token,alice,uid-alice,\"devs,ops\"
bob-token,bob,uid-bob
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_token_file_users_authenticate_with_their_groups_and_rbac_applies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, TOKENS).expect("write tokens");
    let t = common::start_with(SandboxConfig {
        token_auth_file: Some(tokens),
        ..SandboxConfig::ephemeral()
    })
    .await;
    ok_stdout(&t.kubectl(&["create", "namespace", "team"]));
    let alice = kubeconfig_as(&t, "alice", &["--token=alice-token"]).await;
    let bob = kubeconfig_as(&t, "bob", &["--token=bob-token"]).await;
    let who: Value = serde_json::from_str(&ok_stdout(
        &run(&alice, &["auth", "whoami", "-o", "json"]).await,
    ))
    .expect("whoami json");
    assert_eq!(
        who["status"]["userInfo"],
        json!({"username": "alice", "uid": "uid-alice",
            "groups": ["devs", "ops", "system:authenticated"]}),
        "{who}"
    );
    // RBAC applies to the file's users and groups: `devs` may view in `team`, bob may not.
    ok_stdout(&t.kubectl(&[
        "create",
        "rolebinding",
        "devs-view",
        "--clusterrole=view",
        "--group=devs",
        "-n",
        "team",
    ]));
    ok_stdout(&run(&alice, &["get", "configmaps", "-n", "team"]).await);
    let o = run(&bob, &["get", "configmaps", "-n", "team"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "Error from server (Forbidden): configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team\"\n"
    );
    // A TokenReview of a static token names its user.
    let review = ok_stdout(&t.kubectl_stdin(
        &["create", "-o", "json", "-f", "-"],
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"bob-token"}}"#,
    ));
    let review: Value = serde_json::from_str(&review).expect("review json");
    assert_eq!(review["status"]["authenticated"], true, "{review}");
    assert_eq!(review["status"]["user"]["username"], "bob", "{review}");
    // A token that is not in the file is 401.
    let (code, _) = http(
        &t,
        &json!({"http": {"path": "/api", "authorization": "Bearer carol-token"}}),
    )
    .await;
    assert_eq!(code, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_token_file_stops_the_start_with_where_and_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "alice-token,alice,uid-alice\nbob-token,bob\n").expect("write");
    let Err(err) = Sandbox::builder().token_auth_file(&tokens).start().await else {
        panic!("a token file with 2 columns was accepted");
    };
    assert!(matches!(err, SandboxError::TokenFile(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "token file '{}' must have at least 3 columns (token, user name, user uid), found 2 (line 2)",
            tokens.display()
        )
    );
    let missing = dir.path().join("missing.csv");
    let Err(err) = Sandbox::builder().token_auth_file(&missing).start().await else {
        panic!("a missing token file was accepted");
    };
    assert!(
        err.to_string()
            .starts_with(&format!("reading token file {}:", missing.display())),
        "{err}"
    );
}

/// The review APIs (`authentication.k8s.io`, `authorization.k8s.io`) are in discovery as the
/// real server lists them (`fixtures/discovery_auth`, captured by its `capture.py`), so
/// `kubectl api-resources` shows them and `kubectl create -f` finds a TokenReview's resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_groups_are_listed_in_discovery_as_the_real_server_lists_them() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/discovery_auth");
    let cases: Vec<Vec<String>> =
        serde_json::from_value(common::fixture(dir, "cases.json")).expect("a list of commands");
    let expected: Value = common::fixture(dir, "expected.json");
    let t = common::start().await;
    let cache = t.dir.path().join("cache");
    let cache = cache.to_str().expect("utf-8 path");
    let mut differ = common::Differences::default();
    for args in &cases {
        let mut full = vec!["--cache-dir", cache];
        full.extend(args.iter().map(String::as_str));
        let o = run(&t.kubeconfig(), &full).await;
        let mut stdout = text(&o.stdout);
        if args == &["api-versions"] {
            stdout = stdout
                .lines()
                .filter(|l| {
                    l.starts_with("authentication.k8s.io/")
                        || l.starts_with("authorization.k8s.io/")
                })
                .map(|l| format!("{l}\n"))
                .collect();
        }
        let got = json!({"exit": o.status.code().unwrap_or(-1), "stdout": stdout});
        let name = args.join(" ");
        differ.check(&name, &expected[&name], &got);
    }
    differ.assert_none();
    // A review's resource is found by kubectl; reading one is 405 as upstream (create only).
    let o = run(&t.kubeconfig(), &["get", "tokenreviews"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("the server does not allow this method on the requested resource"),
        "{}",
        text(&o.stderr)
    );
}
