//! What RBAC costs the sandbox's write rate: creates/s of ConfigMaps by the admin
//! (`system:masters`, no RBAC evaluation) and by a ServiceAccount that holds `create
//! configmaps` through a RoleBinding (a bound token checked on every request, rules resolved
//! from its bindings), with 1 and with 8 concurrent kube-rs clients over HTTPS. The rounds
//! alternate admin and ServiceAccount so machine load hits both alike; the best round of each
//! is reported, and the overhead must stay under 10%.
//!
//! Run: `cargo bench -p kube-sandbox --bench rbac` (`-- COUNT` for creates per round,
//! default 8000: shorter rounds are dominated by the machine's load). With
//! `RBAC_BENCH_REAL_KUBECONFIG` set to an admin kubeconfig of a real cluster
//! (`../shared/real-apiserver/start.sh` prints one), the same rounds run there too, in a fresh
//! namespace, for comparison (a smaller COUNT keeps that part short).

use std::time::Instant;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sandbox::{Sandbox, SandboxConfig};
use serde_json::{Value, json};

async fn client(yaml: &str) -> kube::Client {
    let kc = Kubeconfig::from_yaml(yaml).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

async fn post(c: &kube::Client, path: &str, body: Value) -> Value {
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .expect("request");
    c.request::<Value>(req).await.expect("POST")
}

/// Create `count` ConfigMaps named `prefix-W-N` in `ns` with `clients` concurrent clients; creates/s.
async fn creates(c: &kube::Client, ns: &str, prefix: &str, count: usize, clients: usize) -> f64 {
    let per = count / clients;
    let t = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..clients {
        let api: Api<ConfigMap> = Api::namespaced(c.clone(), ns);
        let prefix = prefix.to_string();
        tasks.push(tokio::spawn(async move {
            for i in 0..per {
                let mut cm = ConfigMap::default();
                cm.metadata.name = Some(format!("{prefix}-{w}-{i}"));
                cm.data = Some([("k".to_string(), "v".to_string())].into());
                api.create(&PostParams::default(), &cm)
                    .await
                    .expect("create");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    (per * clients) as f64 / t.elapsed().as_secs_f64()
}

/// Set up namespace `ns` with ServiceAccount `writer` bound to a Role that may create
/// ConfigMaps there; returns a client using a token of that ServiceAccount.
async fn service_account_client(admin: &kube::Client, admin_yaml: &str, ns: &str) -> kube::Client {
    post(
        admin,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .await;
    let base = format!("/api/v1/namespaces/{ns}");
    let rbac = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}");
    post(
        admin,
        &format!("{base}/serviceaccounts"),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "writer"}}),
    )
    .await;
    post(admin, &format!("{rbac}/roles"), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "cm-writer"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "list"]}]})).await;
    post(admin, &format!("{rbac}/rolebindings"), json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-writer"},
        "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": ns}]})).await;
    let tr = post(
        admin,
        &format!("{base}/serviceaccounts/writer/token"),
        json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await;
    let token = tr["status"]["token"].as_str().expect("token");
    // The admin's kubeconfig with the ServiceAccount's token instead of its credentials.
    let mut kc: Value =
        serde_json::to_value(Kubeconfig::from_yaml(admin_yaml).expect("kubeconfig")).expect("json");
    kc["users"][0]["user"] = json!({"token": token});
    let kc: Kubeconfig = serde_json::from_value(kc).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

/// Alternate admin and ServiceAccount rounds in `ns`; print the best of each and the cost.
async fn measure(label: &str, admin: &kube::Client, sa: &kube::Client, ns: &str, count: usize) {
    let mut best = [[0f64; 2]; 2]; // [clients 1|8][admin|sa]
    for round in 0..3 {
        for (ci, clients) in [1usize, 8].into_iter().enumerate() {
            for (ui, (who, c)) in [("admin", admin), ("sa", sa)].into_iter().enumerate() {
                let r = creates(c, ns, &format!("{who}-{clients}-{round}"), count, clients).await;
                eprintln!(
                    "[{label}] round {round}: {who:>5}, {clients} client(s): {r:>7.0} creates/s"
                );
                best[ci][ui] = best[ci][ui].max(r);
            }
        }
    }
    for (ci, clients) in [1, 8].into_iter().enumerate() {
        let [a, s] = best[ci];
        let cost = (1.0 - s / a) * 100.0;
        println!(
            "[{label}] creates/s, {clients} client(s): admin (system:masters) {a:>7.0}   ServiceAccount via RoleBinding {s:>7.0}   RBAC cost {cost:>5.1}%"
        );
    }
}

#[tokio::main]
async fn main() {
    let count: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(8000);
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    let sandbox = Sandbox::start(cfg).await.expect("sandbox");
    let admin_yaml = sandbox.kubeconfig_yaml();
    let admin = client(&admin_yaml).await;
    let sa = service_account_client(&admin, &admin_yaml, "bench").await;
    measure("sandbox", &admin, &sa, "bench", count).await;
    sandbox.shutdown().await;

    if let Ok(path) = std::env::var("RBAC_BENCH_REAL_KUBECONFIG") {
        let yaml = std::fs::read_to_string(&path).expect("real kubeconfig");
        let admin = client(&yaml).await;
        let ns = format!("bench-rbac-{}", std::process::id());
        let sa = service_account_client(&admin, &yaml, &ns).await;
        measure("real kube-apiserver", &admin, &sa, &ns, count).await;
    }
}
