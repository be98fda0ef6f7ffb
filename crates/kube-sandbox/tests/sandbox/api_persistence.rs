//! Restart durability with `Storage::Dir`: objects, uids and resourceVersions survive a
//! shutdown and restart, CRDs are served again, new resourceVersions keep increasing (even past
//! deleted objects), a state directory can only be used by one sandbox at a time, and the
//! state files are private.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube_sandbox::persist::PersistError;
use kube_sandbox::{Sandbox, SandboxConfig, SandboxError, Storage};
use serde_json::json;

fn dir_config(dir: &Path) -> SandboxConfig {
    let mut cfg = SandboxConfig::ephemeral();
    cfg.storage = Storage::Dir(dir.to_path_buf());
    cfg
}

fn rv(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

fn gadget_resource() -> ApiResource {
    ApiResource {
        group: "persist.example.com".into(),
        version: "v1".into(),
        api_version: "persist.example.com/v1".into(),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    }
}

fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.persist.example.com"},
        "spec": {
            "group": "persist.example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    }))
    .expect("crd json")
}

async fn wait_served(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &gadget_resource());
    let probe = api.clone();
    common::wait_for("gadgets to be served", common::TIMEOUT, || {
        let probe = probe.clone();
        async move { probe.list(&ListParams::default()).await.ok() }
    })
    .await;
    api
}

/// (uid, resourceVersion) of every object the test created, keyed by a label.
type Snapshot = BTreeMap<&'static str, (String, String)>;

fn id(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.uid.clone().expect("uid"),
        meta.resource_version.clone().expect("resourceVersion"),
    )
}

#[tokio::test]
async fn objects_crds_and_custom_resources_survive_a_restart() {
    let state = tempfile::tempdir().expect("tempdir");
    let dir = state.path().join("state");

    let mut before = Snapshot::new();
    let max_rv;
    {
        let t = common::start_with(dir_config(&dir)).await;
        let c = t.client.clone();
        let nss: Api<Namespace> = Api::all(c.clone());
        let mut ns = Namespace::default();
        ns.metadata.name = Some("team".into());
        let ns = nss
            .create(&PostParams::default(), &ns)
            .await
            .expect("create ns");
        before.insert("ns", id(&ns.metadata));

        let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "team");
        for (label, name) in [("cm1", "one"), ("cm2", "two")] {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(name.into());
            cm.metadata.labels = Some([("keep".to_string(), name.to_string())].into());
            cm.data = Some([("k".to_string(), format!("value-{name}"))].into());
            let cm = cms
                .create(&PostParams::default(), &cm)
                .await
                .expect("create cm");
            before.insert(label, id(&cm.metadata));
        }

        let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
        crds.create(&PostParams::default(), &gadget_crd())
            .await
            .expect("create crd");
        let gadgets = wait_served(&c, "team").await;
        let mut g = DynamicObject::new("g1", &gadget_resource());
        g.data = json!({"spec": {"size": 3}});
        let g = gadgets
            .create(&PostParams::default(), &g)
            .await
            .expect("create gadget");
        before.insert("gadget", id(&g.metadata));
        let mut with_status = g.clone();
        with_status.data["status"] = json!({"phase": "Built"});
        let g = gadgets
            .replace_status("g1", &PostParams::default(), &with_status)
            .await
            .expect("gadget status");
        before.insert("gadget", id(&g.metadata));

        // The CRD last (its conditions are written by the controller after creation).
        let crd = common::wait_for("the CRD to be Established", common::TIMEOUT, || {
            let crds = crds.clone();
            async move {
                let crd = crds.get("gadgets.persist.example.com").await.ok()?;
                let established = crd
                    .status
                    .as_ref()?
                    .conditions
                    .as_ref()?
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                established.then_some(crd)
            }
        })
        .await;
        before.insert("crd", id(&crd.metadata));
        max_rv = before
            .values()
            .map(|(_, rv)| rv.parse::<u64>().expect("rv"))
            .max()
            .expect("some objects");
        t.sandbox.shutdown().await;
    }

    let t = common::start_with(dir_config(&dir)).await;
    let c = t.client.clone();
    let nss: Api<Namespace> = Api::all(c.clone());
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "team");
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let mut after = Snapshot::new();
    after.insert("ns", id(&nss.get("team").await.expect("ns back").metadata));
    for (label, name) in [("cm1", "one"), ("cm2", "two")] {
        let cm = cms.get(name).await.expect("cm back");
        assert_eq!(
            cm.data
                .as_ref()
                .and_then(|d| d.get("k"))
                .map(String::as_str),
            Some(format!("value-{name}").as_str())
        );
        after.insert(label, id(&cm.metadata));
    }
    // Label selectors work on reloaded objects.
    let sel = cms
        .list(&ListParams::default().labels("keep=two"))
        .await
        .expect("list by label");
    assert_eq!(sel.items.len(), 1);
    after.insert(
        "crd",
        id(&crds
            .get("gadgets.persist.example.com")
            .await
            .expect("crd back")
            .metadata),
    );
    // The CRD is served again without anyone touching it.
    let gadgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), "team", &gadget_resource());
    let g = gadgets
        .get("g1")
        .await
        .expect("gadget readable after restart");
    assert_eq!(g.data["spec"]["size"], json!(3));
    assert_eq!(g.data["status"]["phase"], json!("Built"));
    after.insert("gadget", id(&g.metadata));
    assert_eq!(after, before, "uids and resourceVersions are unchanged");

    // New writes continue the counter.
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("three".into());
    let new = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create after restart");
    assert!(
        rv(&new.metadata) > max_rv,
        "new rv {} > old max {max_rv}",
        rv(&new.metadata)
    );
    let mut g2 = g.clone();
    g2.data["spec"]["size"] = json!(4);
    let g2 = gadgets
        .replace("g1", &PostParams::default(), &g2)
        .await
        .expect("custom resource writable after restart");
    assert!(rv(&g2.metadata) > rv(&new.metadata));
    assert_eq!(g2.metadata.generation, Some(2));
    let list = cms.list(&ListParams::default()).await.expect("list");
    assert!(
        list.metadata
            .resource_version
            .as_deref()
            .and_then(|r| r.parse::<u64>().ok())
            .is_some_and(|r| r >= rv(&g2.metadata)),
        "list rv {:?}",
        list.metadata.resource_version
    );
    t.sandbox.shutdown().await;
}

#[tokio::test]
async fn resource_versions_keep_increasing_after_deleting_the_newest_object() {
    let state = tempfile::tempdir().expect("tempdir");
    let dir = state.path().join("state");
    let newest;
    {
        let t = common::start_with(dir_config(&dir)).await;
        let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
        let mut last = 0;
        for n in ["a", "b", "newest"] {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(n.into());
            last = rv(&cms
                .create(&PostParams::default(), &cm)
                .await
                .expect("create")
                .metadata);
        }
        newest = last;
        cms.delete("newest", &DeleteParams::default())
            .await
            .expect("delete newest");
        t.sandbox.shutdown().await;
    }
    let t = common::start_with(dir_config(&dir)).await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    assert!(cms.get_opt("newest").await.expect("get_opt").is_none());
    let listed: Vec<u64> = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .filter(|c| c.metadata.name.as_deref() != Some("kube-root-ca.crt"))
        .map(|c| rv(&c.metadata))
        .collect();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|r| *r < newest));
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("newest".into());
    let again = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("re-create after restart");
    // Strictly greater than the deleted object's version, and past its deletion too.
    assert!(
        rv(&again.metadata) > newest + 1,
        "{} > {} (the deletion itself took {})",
        rv(&again.metadata),
        newest,
        newest + 1
    );
    t.sandbox.shutdown().await;

    // And once more: a restart with no writes in between changes nothing.
    let t = common::start_with(dir_config(&dir)).await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let got = cms.get("newest").await.expect("get");
    assert_eq!(got.metadata.uid, again.metadata.uid);
    assert_eq!(
        got.metadata.resource_version,
        again.metadata.resource_version
    );
    t.sandbox.shutdown().await;
}

#[tokio::test]
async fn a_state_directory_in_use_is_refused_with_a_clear_error() {
    let state = tempfile::tempdir().expect("tempdir");
    let dir = state.path().join("state");
    let first = common::start_with(dir_config(&dir)).await;
    let err = match Sandbox::start(dir_config(&dir)).await {
        Ok(_) => panic!("a second sandbox started on a state directory in use"),
        Err(e) => e,
    };
    assert!(
        matches!(err, SandboxError::Persist(PersistError::Locked(ref p)) if p == &dir),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("in use") && msg.contains(&dir.display().to_string()),
        "message: {msg}"
    );
    // The first one is unaffected.
    let cms: Api<ConfigMap> = Api::namespaced(first.client.clone(), "default");
    cms.list(&ListParams::default())
        .await
        .expect("first sandbox still serves");

    // Once it stops, the directory is free again.
    first.sandbox.shutdown().await;
    let second = Sandbox::start(dir_config(&dir))
        .await
        .expect("starts once the first one stopped");
    second.shutdown().await;
}

#[tokio::test]
async fn state_directory_is_0700_and_its_files_0600() {
    let state = tempfile::tempdir().expect("tempdir");
    let dir = state.path().join("nested").join("state");
    let mut cfg = dir_config(&dir);
    let kubeconfig: PathBuf = dir.join("kubeconfig");
    cfg.kubeconfig = Some(kubeconfig.clone());
    let sandbox = Sandbox::start(cfg).await.expect("start");
    let client = common::client_for(&sandbox).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..5 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm-{i}"));
        cm.data = Some([("secret-ish".to_string(), "value".to_string())].into());
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    assert_eq!(common::mode(&dir), 0o700, "state directory mode");
    let check_files = |when: &str| {
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("read state dir") {
            let p = entry.expect("dir entry").path();
            if p.is_file() {
                assert_eq!(common::mode(&p), 0o600, "{when}: mode of {}", p.display());
                seen.push(
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or_default()
                        .to_string(),
                );
            }
        }
        for f in ["state.db", "token", "kubeconfig"] {
            assert!(
                seen.iter().any(|s| s == f),
                "{when}: {f} exists in {seen:?}"
            );
        }
    };
    check_files("while running");
    sandbox.shutdown().await;
    check_files("after shutdown");

    // A restart keeps the same token, so an old kubeconfig's credentials stay valid.
    let token_before = std::fs::read_to_string(dir.join("token")).expect("token");
    let again = Sandbox::start(dir_config(&dir)).await.expect("restart");
    assert_eq!(again.token(), token_before.trim());
    again.shutdown().await;
    check_files("after restart");
}
