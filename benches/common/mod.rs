//! What the benchmarks share: arguments, a kube client for an in-process sandbox, and a
//! schema-less CRD in the group `bench.kubectl-meta.dev`.

#![allow(dead_code)] // each bench uses its own subset

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::ApiResource;
use kube_sandbox::Sandbox;
use serde_json::json;

/// Group of the bench CRDs.
pub const GROUP: &str = "bench.kubectl-meta.dev";

/// The value of `--name N` on the command line, or `default`.
pub fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A client for the sandbox, as users' kube-rs code would build it from its kubeconfig.
pub async fn client_for(sb: &Sandbox) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&sb.kubeconfig_yaml()).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

/// An ApiResource (`group` empty for core).
pub fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Create a namespaced CRD `<plural>.bench.kubectl-meta.dev` of `kind` (v1, status subresource,
/// any fields) and wait until it is served; returns its ApiResource.
pub async fn install_crd(client: &kube::Client, kind: &str, plural: &str) -> ApiResource {
    let crd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("crd");
    let crds = ar(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    Api::<DynamicObject>::all_with(client.clone(), &crds)
        .create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let res = ar(GROUP, "v1", kind, plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &res);
    let deadline = Instant::now() + Duration::from_secs(30);
    while api.list(&ListParams::default()).await.is_err() {
        assert!(Instant::now() < deadline, "CRD {plural} not served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    res
}

/// `dev`'s client for `sb`: `k8s::client::connect_limited` on its kubeconfig, as `dev` builds it.
pub async fn dev_client(sb: &Sandbox, qps: f64, dir: &std::path::Path) -> kube::Client {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, sb.kubeconfig_yaml()).expect("kubeconfig");
    let limits = kubectl_meta::k8s::client::ClientLimits {
        qps,
        ..Default::default()
    };
    kubectl_meta::k8s::client::connect_limited(Some(&path), Some("sandbox"), None, limits)
        .await
        .expect("connect")
        .client
}

/// Resident set size of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
