//! Secured webhooks (Metacontroller's `caBundle`, `authorization`, `basicAuth`, `clientTLS`,
//! `spec.endpointConfigs`) as users run them: the real binary against a sandbox, a real HTTPS
//! hook server on 127.0.0.1 with a private CA and client certificates made in the test, the
//! Secrets and ConfigMaps read from the API server. Secret values never show in the output, the
//! `--dump-requests` files or the Events.

use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::common::cli::*;
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

const TOKEN: &str = "tok-5f0c2e9a1b7d";
const PASSWORD: &str = "pw-9d41c7e2aa03";
/// The host the definitions name; the server certificate is made for it only.
const HOST: &str = "hooks.secure.test";

/// A private CA, a server certificate for [`HOST`] and a client certificate, all PEM.
struct Pki {
    ca: String,
    server: (String, String),
    client: (String, String),
}

fn pki() -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "hook test CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().unwrap();
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    Pki {
        ca: ca_pem,
        server: leaf(vec![HOST.to_string()]),
        client: leaf(vec!["kubectl-meta".to_string()]),
    }
}

/// What the hook server saw: one `Authorization` header per request.
type Seen = Arc<Mutex<Vec<String>>>;

/// An HTTPS hook server on 127.0.0.1 (client certificates required when `mtls`) that answers
/// 401 unless the `Authorization` header is `expected`; returns its port.
async fn serve(pki: &Pki, mtls: bool, expected: String) -> (u16, Seen) {
    serve_rotating(pki, mtls, Arc::new(Mutex::new(expected))).await
}

/// [`serve`], with the expected `Authorization` header changeable while it runs (a rotated
/// token).
async fn serve_rotating(pki: &Pki, mtls: bool, expected: Arc<Mutex<String>>) -> (u16, Seen) {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pki.server.0.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_slice(pki.server.1.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if mtls {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(
            CertificateDer::pem_slice_iter(pki.ca.as_bytes()).map(Result::unwrap),
        );
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder.with_single_cert(certs, key).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let seen: Seen = Arc::default();
    let answer = {
        let seen = Arc::clone(&seen);
        move |path: &'static str| {
            let (seen, expected) = (Arc::clone(&seen), Arc::clone(&expected));
            move |headers: HeaderMap| async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                seen.lock().unwrap().push(auth.clone());
                if auth != *expected.lock().unwrap() {
                    return (StatusCode::UNAUTHORIZED, "bad credentials").into_response();
                }
                let body = match path {
                    "sync" => json!({"status": {"auth": "accepted"}, "children": []}),
                    _ => json!({"relatedResources": []}),
                };
                axum::Json(body).into_response()
            }
        }
    };
    let app: Router = Router::new()
        .route("/sync", post(answer("sync")))
        .route("/customize", post(answer("customize")));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = TowerToHyperService::new(app);
                let _ = Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (port, seen)
}

fn indent(pem: &str) -> String {
    pem.lines().map(|l| format!("    {l}\n")).collect()
}

/// The hello-world CRD and sample, the Secrets and ConfigMap of the credentials (applied with
/// `--apply`, as in Metacontroller's webhook-auth example), and `controller` as the definition.
fn setup(dir: &Path, pki: &Pki, controller: &str) {
    for f in ["00-crd.yaml", "20-sample.yaml"] {
        std::fs::copy(repo().join("examples/hello-world").join(f), dir.join(f)).unwrap();
    }
    std::fs::write(
        dir.join("05-credentials.yaml"),
        format!(
            "apiVersion: v1
kind: Secret
metadata: {{name: hook-token, namespace: default}}
stringData:
  token: {TOKEN}
---
apiVersion: v1
kind: Secret
metadata: {{name: hook-basic, namespace: default}}
stringData: {{username: meta, password: {PASSWORD}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: hook-client, namespace: default}}
type: kubernetes.io/tls
stringData:
  tls.crt: |
{}  tls.key: |
{}---
apiVersion: v1
kind: ConfigMap
metadata: {{name: hook-ca, namespace: default}}
data:
  ca.crt: |
{}",
            indent(&pki.client.0),
            indent(&pki.client.1),
            indent(&pki.ca)
        ),
    )
    .unwrap();
    std::fs::write(dir.join("10-controller.yaml"), controller).unwrap();
}

/// A CompositeController of the hello-world parents with sync and customize hooks at
/// `https://HOST/...` and `spec` lines `extra`.
fn controller(extra: &str, sync_extra: &str) -> String {
    format!(
        "apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {{name: secured}}
spec:
  generateSelector: true
  parentResource: {{apiVersion: example.kubectl-meta.dev/v1, resource: helloworlds}}
  childResources: [{{apiVersion: v1, resource: configmaps}}]
{extra}
  hooks:
    sync:
      webhook:
        url: https://{HOST}/sync
{sync_extra}
    customize:
      webhook: {{url: 'https://{HOST}/customize'}}
"
    )
}

/// The webhook-auth example's endpointConfigs entry: CA from a ConfigMap, bearer token and
/// client certificate from Secrets.
const ENDPOINT_CONFIG: &str = "  endpointConfigs:
  - host: HOST
    caBundle: {configMapRef: {name: hook-ca, namespace: default, key: ca.crt}}
    authorization:
      type: Bearer
      secretRef: {name: hook-token, namespace: default, key: token}
    clientTLS:
      secretRef: {name: hook-client, namespace: default}
      certKey: tls.crt
      privateKeyKey: tls.key";

fn dev(
    sb: &common::TestSandbox,
    home: &Path,
    dir: &Path,
    port: u16,
    extra: &[&str],
) -> std::process::Command {
    let (kubeconfig, dir, base) = (
        kc(sb),
        dir.display().to_string(),
        format!("https://127.0.0.1:{port}"),
    );
    let mut args = vec![
        "--kubeconfig",
        &kubeconfig,
        "dev",
        "--apply",
        "-f",
        &dir,
        "--hook-base-url",
        &base,
        "--once",
    ];
    args.extend_from_slice(extra);
    meta(home, &args)
}

fn no_secret_in(what: &str, text: &str, pki: &Pki) {
    let key_body: Vec<&str> = pki
        .client
        .1
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    for secret in [TOKEN, PASSWORD].into_iter().chain(key_body) {
        assert!(
            !text.contains(secret),
            "{what} shows a secret value {secret:?}:\n{text}"
        );
    }
}

fn files_text(dir: &Path) -> String {
    let mut out = String::new();
    for entry in walk(dir) {
        out.push_str(&std::fs::read_to_string(entry).unwrap_or_default());
    }
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Metacontroller's webhook-auth flow: one endpointConfigs entry gives both hooks the CA (from
/// a ConfigMap), a bearer token and a client certificate (from Secrets); the server requires
/// all three. Secret values are nowhere in stdout, stderr, the dump files or the Events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_config_gives_every_hook_ca_token_and_client_certificate() {
    let pki = pki();
    let (port, seen) = serve(&pki, true, format!("Bearer {TOKEN}")).await;
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dump = tempfile::tempdir().unwrap();
    setup(
        dir.path(),
        &pki,
        &controller(&ENDPOINT_CONFIG.replace("HOST", HOST), ""),
    );
    let dump_arg = dump.path().display().to_string();
    let extra = ["-o", "json", "--dump-requests", &dump_arg, "-vvv"];
    let out = run(dev(&sb, home.path(), dir.path(), port, &extra)).await;
    let stdout = assert_ok(&out);
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("CompositeController secured: hook(s) customize, sync use spec.endpointConfigs[0]: CA bundle (key ca.crt of ConfigMap default/hook-ca), client certificate from Secret default/hook-client, Authorization: Bearer from key token of Secret default/hook-token"),
        "{stderr}"
    );
    let parent = get(
        &sb,
        &ar("example.kubectl-meta.dev", "HelloWorld", "helloworlds"),
        Some("default"),
        "hello",
    )
    .await
    .expect("the sample parent");
    assert_eq!(parent["status"]["auth"], "accepted", "{parent}");
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 2, "sync and customize calls: {seen:?}");
    assert!(seen.iter().all(|a| a == &format!("Bearer {TOKEN}")));
    no_secret_in("stdout", &stdout, &pki);
    no_secret_in("stderr", &stderr, &pki);
    let dumped = files_text(dump.path());
    assert!(dumped.contains("\"parent\""), "the dump has the requests");
    no_secret_in("the --dump-requests files", &dumped, &pki);
}

/// Without the CA the server's certificate is refused; without the client certificate the
/// server refuses the handshake; a wrong token gets 401. Each fails the sync with a hint, and no
/// secret value shows in the output or the parent's Events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_ca_client_certificate_or_right_token_fail_the_sync_and_say_why() {
    let pki = pki();
    let (mtls_port, _) = serve(&pki, true, format!("Bearer {TOKEN}")).await;
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let cases = [
        (
            "no caBundle",
            ENDPOINT_CONFIG.replace("HOST", HOST).replace(
                "    caBundle: {configMapRef: {name: hook-ca, namespace: default, key: ca.crt}}\n",
                "",
            ),
            "not signed by a trusted CA",
        ),
        (
            "no clientTLS",
            ENDPOINT_CONFIG
                .replace("HOST", HOST)
                .split("    clientTLS:")
                .next()
                .unwrap()
                .trim_end()
                .to_string(),
            "asks for a client certificate",
        ),
        (
            "wrong token",
            ENDPOINT_CONFIG.replace("HOST", HOST).replace(
                "name: hook-token, namespace: default, key: token",
                "name: hook-basic, namespace: default, key: password",
            ),
            "answered HTTP 401",
        ),
    ];
    for (case, config, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path(), &pki, &controller(&config, ""));
        let out = run(dev(
            &sb,
            home.path(),
            dir.path(),
            mtls_port,
            &["--timeout", "4"],
        ))
        .await;
        let stderr = assert_fails(&out);
        assert_eq!(out.status.code(), Some(4), "{case}: {stderr}");
        assert!(stderr.contains(expected), "{case}: {stderr}");
        no_secret_in(case, &stderr, &pki);
    }
    let events = sb.kubectl(&["get", "events", "-A", "-o", "json"]);
    let events = String::from_utf8_lossy(&events.stdout);
    assert!(events.contains("SyncError"), "{events}");
    no_secret_in("the Events", &events, &pki);
}

/// Settings on the hook itself replace the matching endpointConfigs entry entirely (basic auth
/// and an inline CA bundle on sync), while customize uses the entry (`host:443` matches the
/// URL without a port; CA from the ConfigMap's default key ca.crt, basic auth).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_level_basic_auth_and_inline_ca_bundle_override_the_entry() {
    let pki = pki();
    let basic = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("meta:{PASSWORD}"),
    );
    let (port, seen) = serve(&pki, false, format!("Basic {basic}")).await;
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let entry = format!(
        "  endpointConfigs:
  - host: {HOST}:443
    caBundle: {{configMapRef: {{name: hook-ca, namespace: default}}}}
    basicAuth:
      secretRef: {{name: hook-basic, namespace: default}}"
    );
    let sync_extra = format!(
        "        basicAuth:
          secretRef: {{name: hook-basic, namespace: default}}
          usernameKey: username
        caBundle:
          inline: |
{}",
        pki.ca
            .lines()
            .map(|l| format!("            {l}\n"))
            .collect::<String>()
    );
    setup(dir.path(), &pki, &controller(&entry, &sync_extra));
    let out = run(dev(&sb, home.path(), dir.path(), port, &["-o", "json"])).await;
    let stdout = assert_ok(&out);
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("hook(s) sync use spec.hooks.sync.webhook: CA bundle (inline), basic auth from keys username, password of Secret default/hook-basic"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hook(s) customize use spec.endpointConfigs[0]"),
        "{stderr}"
    );
    assert!(seen.lock().unwrap().len() >= 2);
    no_secret_in("stdout", &stdout, &pki);
    no_secret_in("stderr", &stderr, &pki);
}

/// A reference to a Secret that exists nowhere (neither in the cluster nor among the --apply
/// documents): `dev --once` waits for it until `--timeout`, then exits 4 naming it and how to
/// create it; `dryrun` exits 2 at once, naming the controller, the field, the hooks and the
/// fix, and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_secret_reference_is_waited_for_by_once_and_refused_by_dryrun() {
    let pki = pki();
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = ENDPOINT_CONFIG.replace("HOST", HOST).replace(
        "name: hook-token, namespace: default",
        "name: no-such-token, namespace: hooks",
    );
    setup(dir.path(), &pki, &controller(&config, ""));
    let hint = "Secret hooks/no-such-token not found; create it (kubectl create secret generic no-such-token -n hooks --from-literal=token=TOKEN)";

    let dir_arg = dir.path().display().to_string();
    let rv_before = global_rv(&sb).await;
    let (code, stdout, stderr) = dryrun(&sb, home.path(), &["-f", &dir_arg]).await;
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("CompositeController \"secured\""),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "spec.endpointConfigs[0].authorization.secretRef (used by hook(s) sync, customize): {hint}"
        )),
        "{stderr}"
    );
    assert_eq!(global_rv(&sb).await, rv_before, "dryrun wrote something");

    let out = run(dev(&sb, home.path(), dir.path(), 9, &["--timeout", "3"])).await;
    let stderr = assert_fails(&out);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("not converged after 3s"), "{stderr}");
    assert!(
        stderr.contains("secured: not started: waiting for Secret hooks/no-such-token"),
        "{stderr}"
    );
    assert!(stderr.contains(hint), "{stderr}");
}

/// Secrets created after `dev` started (as Metacontroller's webhook-auth `test.sh` does, and
/// GitOps tools applying in any order): `dev` says once what is missing and how to create it,
/// runs the other controllers meanwhile, starts the secured one when the objects appear, and
/// uses a rotated token from the next call on without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secured_controller_starts_when_its_secrets_appear_and_follows_their_rotation() {
    const ROTATED: &str = "tok-rotated-77b1";
    let pki = pki();
    let expected = Arc::new(Mutex::new(format!("Bearer {TOKEN}")));
    let (port, seen) = serve_rotating(&pki, true, Arc::clone(&expected)).await;
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    setup(
        dir.path(),
        &pki,
        &controller(&ENDPOINT_CONFIG.replace("HOST", HOST), ""),
    );
    // The credentials are applied later, not by dev.
    let creds = tempfile::tempdir().unwrap();
    let creds_file = creds.path().join("credentials.yaml");
    std::fs::rename(dir.path().join("05-credentials.yaml"), &creds_file).unwrap();
    // Another controller, with no secured hook: it runs while the secured one waits.
    std::fs::write(
        dir.path().join("11-plain.yaml"),
        r#"apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: plain}
spec:
  resources:
  - apiVersion: v1
    resource: configmaps
    labelSelector: {matchLabels: {decorate: "yes"}}
  hooks:
    sync:
      exec:
        command: [python3, -c, 'import json,sys; json.load(sys.stdin); print(json.dumps({"annotations": {"decorated": "yes"}}))']
"#,
    )
    .unwrap();
    let applied = sb.kubectl(&[
        "create",
        "configmap",
        "plain",
        "-n",
        "default",
        "--from-literal=a=b",
    ]);
    assert!(applied.status.success(), "{applied:?}");
    let labelled = sb.kubectl(&[
        "label",
        "configmap",
        "plain",
        "-n",
        "default",
        "decorate=yes",
    ]);
    assert!(labelled.status.success(), "{labelled:?}");

    let (kubeconfig, dir_arg, base) = (
        kc(&sb),
        dir.path().display().to_string(),
        format!("https://127.0.0.1:{port}"),
    );
    let dev = Background::start(meta(
        home.path(),
        &[
            "--kubeconfig",
            &kubeconfig,
            "dev",
            "--apply",
            "-f",
            &dir_arg,
            "--hook-base-url",
            &base,
            "--no-tui",
            "--no-watch",
        ],
    ));
    dev.wait_output("not started: waiting for Secret default/hook-client, Secret default/hook-token, ConfigMap default/hook-ca")
        .await;
    dev.wait_output("kubectl create secret generic hook-token -n default")
        .await;
    // The other controller runs meanwhile.
    let cms = ar("", "ConfigMap", "configmaps");
    common::wait_for(
        "the plain controller decorates",
        common::TIMEOUT,
        || async {
            let cm = get(&sb, &cms, Some("default"), "plain").await?;
            (cm["metadata"]["annotations"]["decorated"] == "yes").then_some(())
        },
    )
    .await;
    let hello = ar("example.kubectl-meta.dev", "HelloWorld", "helloworlds");
    let parent = get(&sb, &hello, Some("default"), "hello").await.unwrap();
    assert!(parent["status"]["auth"].is_null(), "{parent}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "no call before the Secrets exist"
    );

    let created = sb.kubectl(&["apply", "-f", &creds_file.display().to_string()]);
    assert!(created.status.success(), "{created:?}");
    common::wait_for("the secured controller syncs", common::TIMEOUT, || async {
        let p = get(&sb, &hello, Some("default"), "hello").await?;
        (p["status"]["auth"] == "accepted").then_some(())
    })
    .await;

    // Rotation: the server now wants the new token, the Secret holds it, a sync uses it.
    *expected.lock().unwrap() = format!("Bearer {ROTATED}");
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ROTATED);
    let patch = format!(r#"{{"data":{{"token":"{encoded}"}}}}"#);
    let patched = sb.kubectl(&[
        "patch",
        "secret",
        "hook-token",
        "-n",
        "default",
        "-p",
        &patch,
    ]);
    assert!(patched.status.success(), "{patched:?}");
    dev.wait_output("read the webhooks' connection settings again")
        .await;
    let touched = sb.kubectl(&[
        "annotate",
        "helloworld",
        "hello",
        "-n",
        "default",
        "touched=1",
    ]);
    assert!(touched.status.success(), "{touched:?}");
    common::wait_for("a call with the rotated token", common::TIMEOUT, || async {
        seen.lock()
            .unwrap()
            .iter()
            .any(|a| a == &format!("Bearer {ROTATED}"))
            .then_some(())
    })
    .await;
    let out = dev.output();
    // Said once (then again only when what it waits for changes, as the objects appear one
    // by one).
    assert_eq!(
        out.matches("not started: waiting for Secret default/hook-client, Secret default/hook-token, ConfigMap default/hook-ca").count(),
        1,
        "said once:\n{out}"
    );
    let (ok, stderr) = dev.interrupt().await;
    assert!(ok, "{stderr}");
    no_secret_in("stdout", &out, &pki);
    assert!(!out.contains(ROTATED), "{out}");
    no_secret_in("stderr", &stderr, &pki);
}

/// `dryrun` reads the same connection settings as `dev`: after `dev --apply --once` has set
/// everything up, a dry run calls the secured hooks (CA, bearer token and client certificate
/// from the Secrets and ConfigMap), finds nothing to change (exit 0), writes nothing and shows
/// no secret value, even at `-vvv`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dryrun_calls_secured_hooks_with_the_same_settings_and_writes_nothing() {
    let pki = pki();
    let (port, seen) = serve(&pki, true, format!("Bearer {TOKEN}")).await;
    let sb = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    setup(
        dir.path(),
        &pki,
        &controller(&ENDPOINT_CONFIG.replace("HOST", HOST), ""),
    );
    assert_ok(&run(dev(&sb, home.path(), dir.path(), port, &[])).await);
    let calls_before = seen.lock().unwrap().len();
    let before = global_rv(&sb).await;
    let (dir_arg, base) = (
        dir.path().display().to_string(),
        format!("https://127.0.0.1:{port}"),
    );
    let args = ["-f", &dir_arg, "--hook-base-url", &base, "-vvv"];
    let (code, stdout, stderr) = dryrun(&sb, home.path(), &args).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            "CompositeController secured: hook(s) customize, sync use spec.endpointConfigs[0]"
        ),
        "{stderr}"
    );
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.len() > calls_before,
        "dryrun called the secured hook: {seen:?}"
    );
    assert!(seen.iter().all(|a| a == &format!("Bearer {TOKEN}")));
    assert_eq!(global_rv(&sb).await, before, "dryrun wrote something");
    no_secret_in("dryrun stdout", &stdout, &pki);
    no_secret_in("dryrun stderr", &stderr, &pki);
}
