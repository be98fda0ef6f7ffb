//! Authentication and RBAC with the real kubectl: `kubectl create token` and a kubeconfig built
//! from it, `auth can-i` (and `--list`), `auth whoami`, `--as`, forbidden lists, watches and
//! creates with kube-apiserver's 403 bodies, the escalation checks, ClusterRole aggregation,
//! legacy token Secrets, client certificates, and the answers a real kube-apiserver gave to the
//! same cases (`fixtures/rbac`, captured with `fixtures/rbac/capture.py`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use base64::Engine;
use serde_json::{Value, json};

use crate::common::{TIMEOUT, TestSandbox, ok_stdout, wait_for};

const NS: &str = "rbac-fid";
/// A Role granting what `bot` does not hold.
const CREATE_GRAB: [&str; 7] = [
    "create",
    "role",
    "grab",
    "--verb=get",
    "--resource=secrets",
    "-n",
    NS,
];
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/rbac");

/// Run kubectl on a blocking thread (the sandbox runs in this process) with `kubeconfig`.
async fn run(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    common::kubectl_async(kubeconfig, args, stdin).await
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Apply the fixtures' setup (namespace, ServiceAccount `bot`, roles and bindings) as admin.
async fn setup(t: &TestSandbox) {
    let yaml = std::fs::read_to_string(format!("{FIXTURES}/setup.yaml")).expect("setup.yaml");
    ok_stdout(&run(&t.kubeconfig(), &["apply", "-f", "-"], Some(&yaml)).await);
}

/// `kubectl create token SA -n NS` (extra args appended) and a kubeconfig using the token.
async fn token_kubeconfig(
    t: &TestSandbox,
    sa: &str,
    ns: &str,
    extra: &[&str],
) -> (String, PathBuf) {
    let mut args = vec!["create", "token", sa, "-n", ns];
    args.extend_from_slice(extra);
    let token = ok_stdout(&run(&t.kubeconfig(), &args, None).await)
        .trim()
        .to_string();
    let kc = t
        .dir
        .path()
        .join(format!("{sa}-{}.kubeconfig", extra.len()));
    std::fs::copy(t.kubeconfig(), &kc).expect("copy kubeconfig");
    ok_stdout(
        &run(
            &kc,
            &["config", "set-credentials", sa, &format!("--token={token}")],
            None,
        )
        .await,
    );
    ok_stdout(
        &run(
            &kc,
            &[
                "config",
                "set-context",
                "--current",
                &format!("--user={sa}"),
            ],
            None,
        )
        .await,
    );
    (token, kc)
}

async fn can_i(kc: &Path, args: &[&str]) -> (i32, String) {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let o = run(kc, &all, None).await;
    (
        o.status.code().unwrap_or(-1),
        text(&o.stdout).trim().to_string(),
    )
}

#[tokio::test]
async fn create_token_can_i_whoami_and_forbidden_requests_with_kubectl() {
    let t = common::start().await;
    setup(&t).await;
    let (token, bot) = token_kubeconfig(&t, "bot", NS, &[]).await;
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");

    // auth can-i per verb and resource, through the Role, the view ClusterRole and resourceNames.
    for (args, want) in [
        (vec!["list", "configmaps", "-n", NS], "yes"),
        (vec!["watch", "configmaps", "-n", NS], "yes"),
        (vec!["delete", "configmaps", "-n", NS], "no"),
        (vec!["list", "configmaps", "-A"], "no"),
        (vec!["get", "pods", "--subresource=log", "-n", NS], "yes"),
        (vec!["create", "pods", "--subresource=exec", "-n", NS], "no"),
        (vec!["get", "secrets/visible", "-n", NS], "yes"),
        (vec!["get", "secrets/hidden", "-n", NS], "no"),
        (vec!["list", "deployments.apps", "-n", NS], "yes"),
        (vec!["update", "deployments.apps", "-n", NS], "no"),
        (vec!["get", "/healthz"], "yes"),
        (vec!["get", "/metrics"], "no"),
    ] {
        let (code, out) = can_i(&bot, &args).await;
        // A denial carries the reason: the binding to a missing ClusterRole.
        assert_eq!(out.split(' ').next(), Some(want), "can-i {args:?}: {out}");
        assert_eq!(
            code,
            if want == "yes" { 0 } else { 1 },
            "exit of can-i {args:?}"
        );
    }

    // auth can-i --list: the rules of every binding, as kubectl compacts and sorts them.
    let list = ok_stdout(&run(&bot, &["auth", "can-i", "--list", "-n", NS], None).await);
    let row = list
        .lines()
        .find(|l| l.starts_with("configmaps "))
        .unwrap_or_else(|| panic!("no configmaps row in\n{list}"));
    assert!(row.contains("[get list watch]"), "{row}");
    assert!(
        list.lines()
            .any(|l| l.starts_with("secrets ") && l.contains("[visible]")),
        "{list}"
    );
    assert!(list.lines().any(|l| l.starts_with("pods/log ")), "{list}");

    // auth whoami.
    let who = ok_stdout(&run(&bot, &["auth", "whoami", "-o", "json"], None).await);
    let who: Value = serde_json::from_str(&who).expect("whoami json");
    assert_eq!(who["kind"], "SelfSubjectReview");
    let info = &who["status"]["userInfo"];
    assert_eq!(info["username"], "system:serviceaccount:rbac-fid:bot");
    assert_eq!(
        info["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:rbac-fid",
            "system:authenticated"
        ])
    );

    // What the token may do works; what it may not is a 403 in kube-apiserver's words.
    ok_stdout(&run(&bot, &["get", "configmaps", "-n", NS], None).await);
    let forbidden = [
        (
            vec!["get", "secrets", "-n", NS],
            "secrets is forbidden: User \"system:serviceaccount:rbac-fid:bot\" cannot list resource \"secrets\" in API group \"\" in the namespace \"rbac-fid\": RBAC: clusterrole.rbac.authorization.k8s.io \"fid-does-not-exist\" not found",
        ),
        (
            vec!["get", "configmaps", "-A"],
            "configmaps is forbidden: User \"system:serviceaccount:rbac-fid:bot\" cannot list resource \"configmaps\" in API group \"\" at the cluster scope",
        ),
        (
            vec!["create", "configmap", "x", "-n", "default"],
            "CREATE configmaps is forbidden: User \"system:serviceaccount:rbac-fid:bot\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\"",
        ),
        (
            vec![
                "get",
                "--raw",
                "/api/v1/namespaces/rbac-fid/secrets?watch=1",
            ],
            "secrets is forbidden: User \"system:serviceaccount:rbac-fid:bot\" cannot watch resource \"secrets\" in API group \"\" in the namespace \"rbac-fid\": RBAC: clusterrole.rbac.authorization.k8s.io \"fid-does-not-exist\" not found",
        ),
    ];
    for (args, msg) in forbidden {
        let o = run(&bot, &args, None).await;
        assert!(!o.status.success(), "{args:?} should fail");
        // kubectl words a failed `create configmap` its own way around the server's message.
        let want = match msg.strip_prefix("CREATE ") {
            Some(m) => format!("error: failed to create configmap: {m}"),
            None => format!("Error from server (Forbidden): {msg}"),
        };
        assert_eq!(text(&o.stderr).trim(), want, "{args:?}");
    }

    // The exact 403 body of a list.
    let body = http(&t, &token, "GET", "/api/v1/configmaps").await;
    assert_eq!(
        body,
        (
            403,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps is forbidden: User \"system:serviceaccount:rbac-fid:bot\" cannot list resource \"configmaps\" in API group \"\" at the cluster scope",
            "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403})
        )
    );

    // --as: the admin may impersonate; the ServiceAccount may not (worded as 1.36's constrained
    // impersonation words it).
    let admin = t.kubeconfig();
    let as_bot = "--as=system:serviceaccount:rbac-fid:bot";
    assert_eq!(
        can_i(&admin, &["list", "configmaps", "-n", NS, as_bot])
            .await
            .1,
        "yes"
    );
    assert!(
        can_i(&admin, &["delete", "configmaps", "-n", NS, as_bot])
            .await
            .1
            .starts_with("no - RBAC")
    );
    let who = ok_stdout(
        &run(
            &admin,
            &[
                "auth",
                "whoami",
                "--as=jane",
                "--as-group=devs",
                "-o",
                "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
            ],
            None,
        )
        .await,
    );
    assert_eq!(who, "jane [\"devs\",\"system:authenticated\"]");
    let o = run(&bot, &["get", "configmaps", "-n", NS, "--as=jane"], None).await;
    assert_eq!(
        text(&o.stderr).trim(),
        "Error from server (Forbidden): configmaps is forbidden: User \"system:serviceaccount:rbac-fid:bot\" cannot impersonate-on:user-info:list resource \"configmaps\" in API group \"\" in the namespace \"rbac-fid\": RBAC: clusterrole.rbac.authorization.k8s.io \"fid-does-not-exist\" not found"
    );

    // A token for another audience, or of a deleted ServiceAccount, is refused with 401.
    let (_, other_aud) = token_kubeconfig(&t, "bot", NS, &["--audience=https://example.com"]).await;
    let o = run(&other_aud, &["get", "configmaps", "-n", NS], None).await;
    assert!(
        text(&o.stderr).contains("Unauthorized"),
        "{}",
        text(&o.stderr)
    );
    ok_stdout(&run(&admin, &["delete", "serviceaccount", "bot", "-n", NS], None).await);
    let o = run(&bot, &["get", "configmaps", "-n", NS], None).await;
    assert!(
        text(&o.stderr).contains("Unauthorized"),
        "{}",
        text(&o.stderr)
    );
}

/// A raw request with a bearer token: status code and JSON body.
async fn http(t: &TestSandbox, token: &str, method: &str, path: &str) -> (u16, Value) {
    http_body(t, token, method, path, None).await
}

/// Like [`http`], with a JSON body.
async fn http_body(
    t: &TestSandbox,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let body = body.unwrap_or(Value::Null);
    common::request_as(t, token, method, path, &body, "application/json").await
}

#[tokio::test]
async fn escalation_is_refused_and_bind_or_held_rules_allow_writes() {
    let t = common::start().await;
    setup(&t).await;
    let (_, bot) = token_kubeconfig(&t, "bot", NS, &[]).await;
    let groups =
        "[\"system:serviceaccounts\" \"system:serviceaccounts:rbac-fid\" \"system:authenticated\"]";
    let o = run(&bot, &CREATE_GRAB, None).await;
    assert_eq!(
        text(&o.stderr).trim(),
        format!(
            "Error from server (Forbidden): roles.rbac.authorization.k8s.io \"grab\" is forbidden: user \"system:serviceaccount:rbac-fid:bot\" (groups={groups}) is attempting to grant RBAC permissions not currently held:\n{{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}}; resolution errors: [roles.rbac.authorization.k8s.io \"fid-does-not-exist\" not found]"
        )
    );
    // Rules it holds may be granted.
    ok_stdout(
        &run(
            &bot,
            &[
                "create",
                "role",
                "held",
                "--verb=get,list",
                "--resource=configmaps",
                "-n",
                NS,
            ],
            None,
        )
        .await,
    );
    // A binding to a role it does not hold, without `bind`: refused.
    let o = run(
        &bot,
        &[
            "create",
            "rolebinding",
            "rb-secrets",
            "--clusterrole=fid-secret-reader",
            "--serviceaccount=rbac-fid:bot",
            "-n",
            NS,
        ],
        None,
    )
    .await;
    assert!(
        text(&o.stderr).contains("rolebindings.rbac.authorization.k8s.io \"rb-secrets\" is forbidden: user \"system:serviceaccount:rbac-fid:bot\""),
        "{}",
        text(&o.stderr)
    );
    assert!(
        can_i(&bot, &["create", "configmaps", "-n", NS])
            .await
            .1
            .starts_with("no")
    );
    // `bind` on that one ClusterRole allows binding it, and the binding applies at once.
    ok_stdout(
        &run(
            &bot,
            &[
                "create",
                "rolebinding",
                "rb-cm",
                "--clusterrole=fid-cm-writer",
                "--serviceaccount=rbac-fid:bot",
                "-n",
                NS,
            ],
            None,
        )
        .await,
    );
    assert_eq!(
        can_i(&bot, &["create", "configmaps", "-n", NS]).await.1,
        "yes"
    );
    ok_stdout(
        &run(
            &bot,
            &["create", "configmap", "made-by-bot", "-n", NS],
            None,
        )
        .await,
    );
    // A patch that would add rules it does not hold is refused too.
    let o = run(&bot, &["patch", "role", "held", "-n", NS, "--type=json", "-p", r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["secrets"],"verbs":["list"]}}]"#], None).await;
    assert!(
        text(&o.stderr).contains("is attempting to grant RBAC permissions not currently held"),
        "{}",
        text(&o.stderr)
    );
    // system:masters may grant anything.
    ok_stdout(&run(&t.kubeconfig(), &CREATE_GRAB, None).await);
}

#[tokio::test]
async fn bootstrap_roles_exist_and_cluster_roles_aggregate() {
    let t = common::start().await;
    let admin = t.kubeconfig();
    let names = ok_stdout(
        &run(
            &admin,
            &"get clusterroles cluster-admin admin edit view system:discovery system:basic-user system:public-info-viewer -o name"
                .split(' ')
                .collect::<Vec<_>>(),
            None,
        )
        .await,
    );
    assert_eq!(names.lines().count(), 7, "{names}");
    let crb = ok_stdout(
        &run(
            &admin,
            &[
                "get",
                "clusterrolebinding",
                "cluster-admin",
                "-o",
                "jsonpath={.subjects[0].name}",
            ],
            None,
        )
        .await,
    );
    assert_eq!(crb, "system:masters");
    // view already holds the aggregated rules of system:aggregate-to-view.
    let view = ok_stdout(&run(&admin, &["get", "clusterrole", "view", "-o", "json"], None).await);
    let view: Value = serde_json::from_str(&view).expect("json");
    assert!(
        view["rules"].as_array().is_some_and(|r| r.len() > 5),
        "{view}"
    );

    // A new ClusterRole labelled for view is aggregated into view (and so into edit and admin),
    // and a custom aggregated role follows its selector.
    let manifest = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true", "team": "a"}},
         "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "team-a"},
         "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"team": "a"}}]}}
    ]});
    ok_stdout(&run(&admin, &["apply", "-f", "-"], Some(&manifest.to_string())).await);
    let has_widgets = |role: &'static str| {
        let admin = admin.clone();
        async move {
            let o = run(&admin, &["get", "clusterrole", role, "-o", "json"], None).await;
            let v: Value = serde_json::from_slice(&o.stdout).ok()?;
            v["rules"]
                .as_array()?
                .iter()
                .any(|r| r["resources"] == json!(["widgets"]))
                .then_some(v)
        }
    };
    for role in ["view", "edit", "admin"] {
        wait_for(&format!("{role} aggregates widgets-view"), TIMEOUT, || {
            has_widgets(role)
        })
        .await;
    }
    let team = wait_for("team-a aggregates", TIMEOUT, || has_widgets("team-a")).await;
    assert_eq!(team["rules"].as_array().map(Vec::len), Some(1), "{team}");
    // Dropping the label takes the rules out again.
    ok_stdout(
        &run(
            &admin,
            &["label", "clusterrole", "widgets-view", "team-"],
            None,
        )
        .await,
    );
    wait_for("team-a emptied", TIMEOUT, || {
        let admin = admin.clone();
        async move {
            let o = run(
                &admin,
                &["get", "clusterrole", "team-a", "-o", "json"],
                None,
            )
            .await;
            let v: Value = serde_json::from_slice(&o.stdout).ok()?;
            v["rules"]
                .as_array()
                .is_none_or(Vec::is_empty)
                .then_some(())
        }
    })
    .await;
    // Only someone with full authority may create an aggregated ClusterRole.
    for cmd in [
        "create namespace agg",
        "create serviceaccount maker -n agg",
        "create clusterrole role-maker --verb=create --resource=clusterroles",
        "create clusterrolebinding maker --clusterrole=role-maker --serviceaccount=agg:maker",
    ] {
        let args: Vec<&str> = cmd.split(' ').collect();
        ok_stdout(&run(&admin, &args, None).await);
    }
    let (_, maker) = token_kubeconfig(&t, "maker", "agg", &[]).await;
    let agg = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "sneaky"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"team": "a"}}]}});
    let o = run(&maker, &["create", "-f", "-"], Some(&agg.to_string())).await;
    assert_eq!(
        text(&o.stderr).trim(),
        "Error from server (Forbidden): error when creating \"STDIN\": clusterroles.rbac.authorization.k8s.io \"sneaky\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
    );
}

#[tokio::test]
async fn legacy_token_secrets_and_client_certificates_authenticate() {
    let t = common::start().await;
    setup(&t).await;
    let admin = t.kubeconfig();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "bot-token", "namespace": NS, "annotations": {"kubernetes.io/service-account.name": "bot"}}});
    ok_stdout(&run(&admin, &["apply", "-f", "-"], Some(&secret.to_string())).await);
    let token = wait_for("the token controller fills the Secret", TIMEOUT, || {
        let admin = admin.clone();
        async move {
            let o = run(
                &admin,
                &[
                    "get",
                    "secret",
                    "bot-token",
                    "-n",
                    NS,
                    "-o",
                    "jsonpath={.data.token}",
                ],
                None,
            )
            .await;
            let b64 = text(&o.stdout);
            (!b64.is_empty()).then(|| {
                String::from_utf8(
                    base64::engine::general_purpose::STANDARD
                        .decode(b64.trim())
                        .expect("base64"),
                )
                .expect("utf8")
            })
        }
    })
    .await;
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, who) = http_body(
        &t,
        &token,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(review),
    )
    .await;
    assert_eq!(code, 201, "{who}");
    assert_eq!(
        who["status"]["userInfo"]["username"],
        "system:serviceaccount:rbac-fid:bot"
    );
    // SubjectAccessReview (as the admin) answers for the ServiceAccount, naming the binding;
    // LocalSubjectAccessReview must stay in its namespace.
    let admin_token = t.sandbox.token().to_string();
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "system:serviceaccount:rbac-fid:bot", "groups": ["system:serviceaccounts"],
            "resourceAttributes": {"namespace": NS, "verb": "list", "resource": "configmaps"}}});
    let (code, got) = http_body(
        &t,
        &admin_token,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        Some(sar),
    )
    .await;
    assert_eq!(code, 201, "{got}");
    assert_eq!(
        got["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"bot-reads/rbac-fid\" of Role \"cm-reader\" to ServiceAccount \"bot/rbac-fid\""})
    );
    let lsar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
        "spec": {"user": "jane", "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}});
    let (code, got) = http_body(
        &t,
        &admin_token,
        "POST",
        "/apis/authorization.k8s.io/v1/namespaces/rbac-fid/localsubjectaccessreviews",
        Some(lsar),
    )
    .await;
    assert_eq!(
        (code, got["reason"].as_str()),
        (422, Some("Invalid")),
        "{got}"
    );

    // Deleting the Secret revokes its token.
    ok_stdout(&run(&admin, &["delete", "secret", "bot-token", "-n", NS], None).await);
    assert_eq!(
        http(&t, &token, "GET", "/api/v1/namespaces/rbac-fid/configmaps")
            .await
            .0,
        401
    );

    // A client certificate signed by the sandbox CA: CN is the user, O the groups.
    let creds = t
        .sandbox
        .client_certificate("jane", &["devs"])
        .expect("issue");
    let dir = t.dir.path();
    let (crt, key) = (dir.join("jane.crt"), dir.join("jane.key"));
    std::fs::write(&crt, &creds.cert_pem).expect("write");
    std::fs::write(&key, &creds.key_pem).expect("write");
    let kc = dir.join("jane.kubeconfig");
    std::fs::copy(&admin, &kc).expect("copy");
    ok_stdout(
        &run(
            &kc,
            &[
                "config",
                "set-credentials",
                "jane",
                &format!("--client-certificate={}", crt.display()),
                &format!("--client-key={}", key.display()),
                "--embed-certs",
            ],
            None,
        )
        .await,
    );
    ok_stdout(
        &run(
            &kc,
            &["config", "set-context", "--current", "--user=jane"],
            None,
        )
        .await,
    );
    let who = ok_stdout(
        &run(
            &kc,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
            ],
            None,
        )
        .await,
    );
    assert_eq!(who, "jane [\"devs\",\"system:authenticated\"]");
    let o = run(&kc, &["get", "pods"], None).await;
    assert_eq!(
        text(&o.stderr).trim(),
        "Error from server (Forbidden): pods is forbidden: User \"jane\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    ok_stdout(
        &run(
            &admin,
            &[
                "create",
                "rolebinding",
                "devs-view",
                "--clusterrole=view",
                "--group=devs",
                "-n",
                "default",
            ],
            None,
        )
        .await,
    );
    ok_stdout(&run(&kc, &["get", "pods"], None).await);
}

/// One fixture case's answer, in the form capture.py writes.
async fn answer(t: &TestSandbox, bot: &Path, token: &str, case: &Value) -> Value {
    let kc = if case["user"] == "bot" {
        bot.to_path_buf()
    } else {
        t.kubeconfig()
    };
    if let Some(args) = case["kubectl"].as_array() {
        let args: Vec<&str> = args.iter().filter_map(Value::as_str).collect();
        let o = run(&kc, &args, None).await;
        json!({"exit": o.status.code().unwrap_or(-1), "stdout": text(&o.stdout), "stderr": text(&o.stderr)})
    } else {
        let h = &case["http"];
        let (code, body) = http(
            t,
            token,
            h["method"].as_str().unwrap_or("GET"),
            h["path"].as_str().unwrap_or("/"),
        )
        .await;
        json!({"code": code, "body": body})
    }
}

#[tokio::test]
async fn rbac_answers_match_the_real_server() {
    let cases: Value = common::fixture(FIXTURES, "cases.json");
    let expected: Value = common::fixture(FIXTURES, "expected.json");
    let t = common::start().await;
    setup(&t).await;
    let (token, bot) = token_kubeconfig(&t, "bot", NS, &[]).await;
    let mut differ = common::Differences::default();
    for case in cases.as_array().expect("a list") {
        let name = case["name"].as_str().expect("name");
        let got = answer(&t, &bot, &token, case).await;
        differ.check(name, &expected[name], &got);
    }
    differ.assert_none();
}
