//! Smoke test: the sandbox starts in-process and kube-rs can talk to it over TLS.

use crate::common;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};

#[tokio::test]
async fn kube_client_lists_builtin_namespaces_and_creates_a_configmap() {
    let t = common::start().await;
    let ns: Api<Namespace> = Api::all(t.client.clone());
    let names: Vec<String> = ns
        .list(&Default::default())
        .await
        .expect("list namespaces")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(
        names.contains(&"default".to_string()) && names.contains(&"kube-system".to_string()),
        "{names:?}"
    );
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("smoke".into());
    cm.data = Some([("k".to_string(), "v".to_string())].into());
    let created = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some());
    let got = cms.get("smoke").await.expect("get");
    assert_eq!(
        got.data.and_then(|d| d.get("k").cloned()).as_deref(),
        Some("v")
    );
}
