//! What RBAC costs the sandbox's write rate: creates/s of ConfigMaps by the admin
//! (`system:masters`, no RBAC evaluation) and by a ServiceAccount that holds `create
//! configmaps` through a RoleBinding (a bound token checked on every request, rules resolved
//! from its bindings), with 1 and with 8 concurrent kube-rs clients over HTTPS. The rounds
//! alternate admin and ServiceAccount so machine load hits both alike; the best round of each
//! is reported, and the overhead must stay under 10%.
//!
//! Run: `cargo bench -p kube-sandbox --bench rbac` (`-- COUNT` for creates per round,
//! default 3000).

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

/// Create `count` ConfigMaps named `prefix-N` with `clients` concurrent clients; creates/s.
async fn creates(c: &kube::Client, prefix: &str, count: usize, clients: usize) -> f64 {
    let per = count / clients;
    let t = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..clients {
        let api: Api<ConfigMap> = Api::namespaced(c.clone(), "bench");
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

#[tokio::main]
async fn main() {
    let count: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3000);
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    let sandbox = Sandbox::start(cfg).await.expect("sandbox");
    let admin_yaml = sandbox.kubeconfig_yaml();
    let admin = client(&admin_yaml).await;
    post(
        &admin,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}),
    )
    .await;
    post(
        &admin,
        "/api/v1/namespaces/bench/serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "writer"}}),
    )
    .await;
    post(&admin, "/apis/rbac.authorization.k8s.io/v1/namespaces/bench/roles", json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "cm-writer"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "list"]}]})).await;
    post(&admin, "/apis/rbac.authorization.k8s.io/v1/namespaces/bench/rolebindings", json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-writer"},
        "subjects": [{"kind": "ServiceAccount", "name": "writer", "namespace": "bench"}]})).await;
    let tr = post(
        &admin,
        "/api/v1/namespaces/bench/serviceaccounts/writer/token",
        json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await;
    let token = tr["status"]["token"].as_str().expect("token");
    let sa = client(&admin_yaml.replace(sandbox.token(), token)).await;

    let mut best = [[0f64; 2]; 2]; // [clients 1|8][admin|sa]
    for round in 0..3 {
        for (ci, clients) in [1usize, 8].into_iter().enumerate() {
            for (ui, (who, c)) in [("admin", &admin), ("sa", &sa)].into_iter().enumerate() {
                let r = creates(c, &format!("{who}-{clients}-{round}"), count, clients).await;
                eprintln!("round {round}: {who:>5}, {clients} client(s): {r:>7.0} creates/s");
                best[ci][ui] = best[ci][ui].max(r);
            }
        }
    }
    for (ci, clients) in [1, 8].into_iter().enumerate() {
        let [a, s] = best[ci];
        let cost = (1.0 - s / a) * 100.0;
        println!(
            "creates/s, {clients} client(s): admin (system:masters) {a:>7.0}   ServiceAccount via RoleBinding {s:>7.0}   RBAC cost {cost:>5.1}%"
        );
    }
    sandbox.shutdown().await;
}
