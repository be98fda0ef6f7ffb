//! The pod proxy (`pods/NAME/proxy/PATH`) against a real HTTP and HTTPS server on 127.0.0.1
//! standing in for a pod (its `status.podIPs` patched to 127.0.0.1, the kubelet off): every
//! verb, the `POD:PORT` and `https:POD:PORT` forms, the path and query passed on, the
//! caller's credentials not; kube-apiserver's errors (400 bad name, 404 no pod, 400 no
//! address, 503 nothing listening); RBAC on `pods/proxy`; `kubectl get --raw` through it.

use crate::common;

use rcgen::{CertificateParams, KeyPair};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::common::{TestSandbox, admin_request, ok_stdout, request_as};

const NS: &str = "px";

/// A sandbox without the simulated kubelet: Pods keep the status the test gives them.
async fn no_kubelet() -> TestSandbox {
    let mut cfg = kube_sandbox::SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    common::start_with(cfg).await
}

/// Answer one HTTP/1.1 request on `io` with JSON describing it (method, target, whether an
/// Authorization header came, the `x-test` header, the body), then close.
async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, scheme: &str) {
    let Some((head, body)) = common::read_http_request(&mut io).await else {
        return;
    };
    let mut words = head.split_whitespace();
    let method = words.next().unwrap_or_default().to_string();
    let target = words.next().unwrap_or_default().to_string();
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let answer = json!({
        "scheme": scheme, "method": method, "target": target,
        "authorization": header("authorization").is_some(),
        "xTest": header("x-test"), "body": String::from_utf8_lossy(&body),
    })
    .to_string();
    let msg = format!(
        "HTTP/1.1 207 Multi-Status\r\nContent-Type: application/json\r\nX-Pod: yes\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        answer.len(),
        if method == "HEAD" {
            ""
        } else {
            answer.as_str()
        }
    );
    let _ = io.write_all(msg.as_bytes()).await;
    let _ = io.shutdown().await;
}

/// An echo server over plain HTTP on 127.0.0.1: its port.
async fn http_pod() -> u16 {
    let (listener, port) = common::listen_local().await;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(echo(tcp, "http"));
        }
    });
    port
}

/// An echo server over HTTPS (a self-signed certificate no one trusts): its port.
async fn https_pod() -> u16 {
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec!["pod.invalid".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("cert");
    let acceptor = common::tls_acceptor(&cert, &key);
    let (listener, port) = common::listen_local().await;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    echo(tls, "https").await;
                }
            });
        }
    });
    port
}

/// Create Pod `name` in [`NS`] declaring container port `port` (if any), and give it `ip`
/// (if any) as the kubelet would.
async fn pod(t: &TestSandbox, name: &str, port: Option<u16>, ip: Option<&str>) {
    let ports = port.map_or(json!([]), |p| json!([{"name": "http", "containerPort": p}]));
    let (code, body) = admin_request(
        t,
        "POST",
        &format!("/api/v1/namespaces/{NS}/pods"),
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "x", "ports": ports}]}}),
        "application/json",
    )
    .await;
    assert_eq!(code, 201, "{body}");
    if let Some(ip) = ip {
        let (code, body) = admin_request(
            t,
            "PATCH",
            &format!("/api/v1/namespaces/{NS}/pods/{name}/status"),
            &json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}}),
            "application/merge-patch+json",
        )
        .await;
        assert_eq!(code, 200, "{body}");
    }
}

/// A raw request through the proxy with the admin token and an `x-test` header: status,
/// the `x-pod` header the pod set, and the body.
async fn through(
    t: &TestSandbox,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, Option<String>, String) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut rb = common::https_client(t)
        .request(method, format!("{}{path}", t.sandbox.url()))
        .bearer_auth(t.sandbox.token())
        .header("x-test", "passed on");
    if let Some(b) = body {
        rb = rb.body(b.to_string());
    }
    let r = rb.send().await.expect("request");
    let code = r.status().as_u16();
    let pod = r
        .headers()
        .get("x-pod")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    (code, pod, r.text().await.expect("body"))
}

/// [`through`], answered by the echo server (207): what it saw.
async fn echoed(t: &TestSandbox, method: &str, path: &str, body: Option<&str>) -> Value {
    let (code, from_pod, text) = through(t, method, path, body).await;
    assert_eq!(
        (code, from_pod.as_deref()),
        (207, Some("yes")),
        "{method} {path}: {text}"
    );
    serde_json::from_str(&text).expect("echo JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_proxy_passes_requests_on_as_kube_apiserver_does() {
    let t = no_kubelet().await;
    ok_stdout(&t.kubectl(&["create", "namespace", NS]));
    let port = http_pod().await;
    let tls_port = https_pod().await;
    pod(&t, "web", Some(port), Some("127.0.0.1")).await;
    let base = format!("/api/v1/namespaces/{NS}/pods");

    // GET with a path and a query: passed on as sent, the caller's token not.
    let v = echoed(
        &t,
        "GET",
        &format!("{base}/web:{port}/proxy/debug/flight?a=1&b=two%20words"),
        None,
    )
    .await;
    assert_eq!(v["method"], "GET");
    assert_eq!(v["target"], "/debug/flight?a=1&b=two%20words");
    assert_eq!(v["authorization"], false, "the caller's token stays here");
    assert_eq!(v["xTest"], "passed on");
    // Without a port: the first container port; a trailing slash stays; no path is /.
    for (path, target) in [("web/proxy/a/b/", "/a/b/"), ("web/proxy", "/")] {
        let v = echoed(&t, "GET", &format!("{base}/{path}"), None).await;
        assert_eq!(v["target"], target, "{path}");
    }
    // The other verbs, with their bodies.
    for method in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        let v = echoed(
            &t,
            method,
            &format!("{base}/web:{port}/proxy/x"),
            Some("payload"),
        )
        .await;
        assert_eq!(
            (v["method"].as_str(), v["body"].as_str()),
            (Some(method), Some("payload"))
        );
    }
    let (code, from_pod, body) =
        through(&t, "HEAD", &format!("{base}/web:{port}/proxy/x"), None).await;
    assert_eq!(
        (code, from_pod.as_deref(), body.as_str()),
        (207, Some("yes"), "")
    );
    // https:POD:PORT: TLS to the pod, its certificate not verified.
    let v = echoed(
        &t,
        "GET",
        &format!("{base}/https:web:{tls_port}/proxy/secure?q=1"),
        None,
    )
    .await;
    assert_eq!(
        (v["scheme"].as_str(), v["target"].as_str()),
        (Some("https"), Some("/secure?q=1"))
    );

    // kubectl get --raw goes the same way.
    let out = t.kubectl(&["get", "--raw", &format!("{base}/web:{port}/proxy/raw?x=y")]);
    let v: Value = serde_json::from_str(&ok_stdout(&out)).expect("echo JSON");
    // (kubectl adds its own `timeout`; the query goes on whole, as on kube-apiserver.)
    let target = v["target"].as_str().unwrap_or_default();
    assert!(
        target.starts_with("/raw?") && target.contains("x=y"),
        "{target}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_proxy_errors_are_kube_apiservers() {
    let t = no_kubelet().await;
    ok_stdout(&t.kubectl(&["create", "namespace", NS]));
    let closed = common::free_port();
    pod(&t, "no-ip", Some(8080), None).await;
    pod(&t, "closed", Some(closed), Some("127.0.0.1")).await;
    pod(&t, "link-local", Some(8080), Some("169.254.1.1")).await;
    let base = format!("/api/v1/namespaces/{NS}/pods");
    let status = |v: &Value| {
        (
            v["kind"].as_str().map(String::from),
            v["reason"].as_str().map(String::from),
            v["code"].as_u64(),
            v["message"].as_str().unwrap_or_default().to_string(),
        )
    };
    let get = |path: String| {
        let t = &t;
        async move { admin_request(t, "GET", &path, &Value::Null, "").await }
    };

    let cases = [
        ("missing:80", 404, "NotFound", "pods \"missing\" not found"),
        ("no-ip", 400, "BadRequest", "address not allowed"),
        ("link-local", 400, "BadRequest", "address not allowed"),
    ];
    for (id, code_want, reason, message) in cases {
        let (code, v) = get(format!("{base}/{id}/proxy/x")).await;
        assert_eq!(u64::from(code), code_want, "{id}: {v}");
        let want = (
            Some("Status".into()),
            Some(reason.into()),
            Some(code_want),
            message.into(),
        );
        assert_eq!(status(&v), want, "{id}");
    }
    let (code, v) = get(format!("{base}/a:b:c:d/proxy/x")).await;
    assert_eq!(code, 400);
    assert_eq!(status(&v).3, "invalid pod request \"a:b:c:d\"");
    let (code, v) = get(format!("{base}/ftp:closed:21/proxy/x")).await;
    assert_eq!(
        (code, status(&v).3.as_str()),
        (400, "invalid pod request \"ftp:closed:21\"")
    );
    let (code, v) = get(format!("{base}/closed/proxy/x")).await;
    assert_eq!(code, 503, "{v}");
    let (_, reason, c, message) = status(&v);
    assert_eq!(
        (reason.as_deref(), c),
        (Some("ServiceUnavailable"), Some(503))
    );
    assert_eq!(
        message,
        format!(
            "error trying to reach service: dial tcp 127.0.0.1:{closed}: connect: connection refused"
        )
    );
    // Another subresource with a path after it is not served.
    let (code, _) = get(format!("{base}/closed/status/x")).await;
    assert_eq!(code, 404);
}

/// A Role `name` granting `get` on `resource` in [`NS`], bound to ServiceAccount `viewer`.
fn grant(t: &TestSandbox, name: &str, resource: &str) {
    let sa = format!("--serviceaccount={NS}:viewer");
    let role = format!("--role={name}");
    let res = format!("--resource={resource}");
    ok_stdout(&t.kubectl(&["create", "role", name, "--verb=get", &res, "-n", NS]));
    ok_stdout(&t.kubectl(&["create", "rolebinding", name, &role, &sa, "-n", NS]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_proxy_needs_get_on_pods_proxy() {
    let t = no_kubelet().await;
    ok_stdout(&t.kubectl(&["create", "namespace", NS]));
    let port = http_pod().await;
    pod(&t, "web", Some(port), Some("127.0.0.1")).await;
    ok_stdout(&t.kubectl(&["create", "serviceaccount", "viewer", "-n", NS]));
    grant(&t, "pods", "pods");
    let token = ok_stdout(&t.kubectl(&["create", "token", "viewer", "-n", NS]))
        .trim()
        .to_string();
    let path = format!("/api/v1/namespaces/{NS}/pods/web:{port}/proxy/x");
    let (code, v) = request_as(&t, &token, "GET", &path, &Value::Null, "").await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        format!(
            "pods \"web:{port}\" is forbidden: User \"system:serviceaccount:{NS}:viewer\" cannot get resource \"pods/proxy\" in API group \"\" in the namespace \"{NS}\""
        )
    );
    grant(&t, "proxy", "pods/proxy");
    common::wait_for("the binding to apply", common::TIMEOUT, || async {
        let (code, _) = request_as(&t, &token, "GET", &path, &Value::Null, "").await;
        (code == 207).then_some(())
    })
    .await;
    // get does not grant create: a POST through the proxy is refused.
    let (code, _) = request_as(&t, &token, "POST", &path, &json!({}), "application/json").await;
    assert_eq!(code, 403);
}
