//! Garbage collection (background, foreground, orphan, dangling owners, several owners, chains),
//! namespace deletion, finalizers, the simulated kubelet and the simulated StatefulSet controller.

use crate::common;

use axum::http;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Client, Resource, ResourceExt};
use kube_sandbox::SandboxConfig;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::common::TIMEOUT;

const HOLD: &str = "example.com/hold";

fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone().expect("owner name"),
        uid: owner.meta().uid.clone().expect("owner uid"),
        controller: None,
        block_owner_deletion: block.then_some(true),
    }
}

fn cm(name: &str, owners: Vec<OwnerReference>, finalizers: &[&str]) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    if !owners.is_empty() {
        c.metadata.owner_references = Some(owners);
    }
    if !finalizers.is_empty() {
        c.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    }
    c
}

async fn create_cm(
    api: &Api<ConfigMap>,
    name: &str,
    owners: Vec<OwnerReference>,
    fins: &[&str],
) -> ConfigMap {
    api.create(&PostParams::default(), &cm(name, owners, fins))
        .await
        .unwrap_or_else(|e| panic!("create configmap {name}: {e}"))
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    }))
    .expect("pod deserializes")
}

fn api_err(r: kube::Result<impl std::fmt::Debug>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    common::wait_for(&format!("{name} to be deleted"), TIMEOUT, || async move {
        match api.get(name).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Some(()),
            _ => None,
        }
    })
    .await
}

/// Remove every finalizer from a ConfigMap.
async fn release(api: &Api<ConfigMap>, name: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap_or_else(|e| panic!("remove finalizers of {name}: {e}"));
}

#[tokio::test]
async fn background_deletion_deletes_dependents() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let owner = create_cm(&api, "owner", vec![], &[]).await;
    for i in 0..3 {
        create_cm(
            &api,
            &format!("dep-{i}"),
            vec![owner_ref(&owner, false)],
            &[],
        )
        .await;
    }
    let bystander = create_cm(&api, "bystander", vec![], &[]).await;
    api.delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    let s = api_err(api.get("owner").await);
    assert_eq!(s.code, 404, "background deletion removes the owner at once");
    for i in 0..3 {
        wait_gone(&api, &format!("dep-{i}")).await;
    }
    let still = api.get("bystander").await.expect("bystander kept");
    assert_eq!(still.metadata.uid, bystander.metadata.uid);
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let owner = create_cm(&api, "owner", vec![], &[]).await;
    // The blocking dependent has its own finalizer, so it stays while being deleted.
    create_cm(&api, "blocker", vec![owner_ref(&owner, true)], &[HOLD]).await;
    create_cm(&api, "plain", vec![owner_ref(&owner, false)], &[]).await;

    api.delete("owner", &DeleteParams::foreground())
        .await
        .expect("delete owner");
    let o = api.get("owner").await.expect("owner still there");
    assert!(o.metadata.deletion_timestamp.is_some());
    assert!(
        o.finalizers().iter().any(|f| f == "foregroundDeletion"),
        "{:?}",
        o.finalizers()
    );

    common::wait_for("the blocker to be marked for deletion", TIMEOUT, || async {
        let b = api.get("blocker").await.ok()?;
        b.metadata.deletion_timestamp.is_some().then_some(())
    })
    .await;
    wait_gone(&api, "plain").await;
    let o = api
        .get("owner")
        .await
        .expect("owner waits for its blocking dependent");
    assert!(o.finalizers().iter().any(|f| f == "foregroundDeletion"));

    release(&api, "blocker").await;
    wait_gone(&api, "blocker").await;
    wait_gone(&api, "owner").await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_owner_references() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let owner = create_cm(&api, "owner", vec![], &[]).await;
    let dep = create_cm(&api, "dep", vec![owner_ref(&owner, true)], &[]).await;
    api.delete("owner", &DeleteParams::orphan())
        .await
        .expect("delete owner");
    wait_gone(&api, "owner").await;
    let kept = api.get("dep").await.expect("orphaned dependent kept");
    assert_eq!(kept.metadata.uid, dep.metadata.uid);
    assert!(
        kept.metadata
            .owner_references
            .as_deref()
            .unwrap_or_default()
            .is_empty(),
        "{:?}",
        kept.metadata.owner_references
    );
}

#[tokio::test]
async fn dependent_of_a_missing_owner_is_collected() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let ghost = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "ghost".into(),
        uid: "6a1ef7c4-0000-4000-8000-000000000000".into(),
        ..Default::default()
    };
    create_cm(&api, "dangling", vec![ghost], &[]).await;
    wait_gone(&api, "dangling").await;
}

#[tokio::test]
async fn dependent_with_two_owners_loses_only_the_deleted_reference() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let a = create_cm(&api, "owner-a", vec![], &[]).await;
    let b = create_cm(&api, "owner-b", vec![], &[]).await;
    create_cm(
        &api,
        "shared",
        vec![owner_ref(&a, false), owner_ref(&b, false)],
        &[],
    )
    .await;
    api.delete("owner-a", &DeleteParams::background())
        .await
        .expect("delete owner-a");
    let remaining = common::wait_for(
        "the reference to owner-a to be removed",
        TIMEOUT,
        || async {
            let s = api.get("shared").await.expect("shared survives");
            let refs = s.metadata.owner_references.unwrap_or_default();
            (refs.len() == 1).then_some(refs)
        },
    )
    .await;
    assert_eq!(remaining[0].uid, b.metadata.uid.clone().expect("uid"));
    assert_eq!(remaining[0].name, "owner-b");

    api.delete("owner-b", &DeleteParams::background())
        .await
        .expect("delete owner-b");
    wait_gone(&api, "shared").await;
}

#[tokio::test]
async fn chained_ownership_collects_grandchildren_across_types() {
    let t = common::start().await;
    install_crd(&t.client).await;
    let things = things_api(&t.client, "default");
    let root: DynamicObject = things
        .create(&PostParams::default(), &thing("root"))
        .await
        .expect("create root");
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let root_ref = OwnerReference {
        api_version: "example.com/v1".into(),
        kind: "Thing".into(),
        name: "root".into(),
        uid: root.uid().expect("uid"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let child = create_cm(&cms, "child", vec![root_ref], &[]).await;
    let mut grandchild = pod("grandchild");
    grandchild.metadata.owner_references = Some(vec![owner_ref(&child, true)]);
    pods.create(&PostParams::default(), &grandchild)
        .await
        .expect("create grandchild");

    things
        .delete("root", &DeleteParams::background())
        .await
        .expect("delete root");
    wait_gone(&cms, "child").await;
    wait_gone(&pods, "grandchild").await;
    wait_gone(&things, "root").await;
}

async fn install_crd(client: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .expect("CRD deserializes");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    common::wait_for("CRD things.example.com established", TIMEOUT, || async {
        let c = api.get("things.example.com").await.ok()?;
        c.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
    })
    .await;
}

fn things_api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Thing"),
        "things",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn thing(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": name}, "spec": {"n": 1}
    }))
    .expect("thing deserializes")
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_contents_then_the_namespace() {
    let t = common::start().await;
    install_crd(&t.client).await;
    let nss: Api<Namespace> = Api::all(t.client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("doomed".into());
    nss.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "doomed");
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "doomed");
    let things = things_api(&t.client, "doomed");
    for i in 0..3 {
        create_cm(&cms, &format!("cm-{i}"), vec![], &[]).await;
    }
    // Holds the namespace in Terminating until released.
    create_cm(&cms, "held", vec![], &[HOLD]).await;
    things
        .create(&PostParams::default(), &thing("t1"))
        .await
        .expect("create thing");
    for i in 0..2 {
        pods.create(&PostParams::default(), &pod(&format!("pod-{i}")))
            .await
            .expect("create pod");
    }
    let outside = create_cm(
        &Api::namespaced(t.client.clone(), "default"),
        "outside",
        vec![],
        &[],
    )
    .await;

    nss.delete("doomed", &DeleteParams::default())
        .await
        .expect("delete namespace");
    let terminating = nss.get("doomed").await.expect("namespace still there");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );

    let s = api_err(
        cms.create(&PostParams::default(), &cm("late", vec![], &[]))
            .await,
    );
    assert_eq!(s.code, 403, "{s:?}");
    assert_eq!(s.reason, "Forbidden", "{s:?}");
    assert!(s.message.contains("being terminated"), "{s:?}");

    common::wait_for(
        "everything but the held configmap to be deleted",
        TIMEOUT,
        || async {
            let c = cms.list(&ListParams::default()).await.ok()?.items;
            let p = pods.list(&ListParams::default()).await.ok()?.items;
            let th = things.list(&ListParams::default()).await.ok()?.items;
            (c.len() == 1 && p.is_empty() && th.is_empty()).then_some(())
        },
    )
    .await;
    let held = cms.get("held").await.expect("held configmap");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(
        nss.get("doomed").await.is_ok(),
        "namespace waits for its contents"
    );

    release(&cms, "held").await;
    wait_gone(&nss, "doomed").await;
    let sas: Api<ServiceAccount> = Api::namespaced(t.client.clone(), "doomed");
    let left = sas
        .list(&ListParams::default())
        .await
        .map(|l| l.items.len())
        .unwrap_or(0);
    assert_eq!(left, 0, "service accounts of the namespace are gone too");
    let kept = Api::<ConfigMap>::namespaced(t.client.clone(), "default")
        .get("outside")
        .await
        .expect("objects in other namespaces are kept");
    assert_eq!(kept.metadata.uid, outside.metadata.uid);
}

#[tokio::test]
async fn finalizer_holds_deletion_until_removed() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    let created = create_cm(&api, "fin", vec![], &[HOLD]).await;
    // Like kube-apiserver: 200 with the object, now carrying a deletionTimestamp.
    let req = http::Request::delete("/api/v1/namespaces/default/configmaps/fin")
        .body(Vec::new())
        .expect("request");
    let resp = t.client.send(req.map(Into::into)).await.expect("delete");
    assert_eq!(resp.status(), 200);
    let marked = api.get("fin").await.expect("still there");
    assert!(marked.metadata.deletion_timestamp.is_some());
    // Deleting again while it waits changes nothing.
    let again = api
        .delete("fin", &DeleteParams::default())
        .await
        .expect("delete again")
        .left()
        .expect("the object while finalizers remain");
    assert_eq!(
        again.metadata.deletion_timestamp,
        marked.metadata.deletion_timestamp
    );

    let got = api.get("fin").await.expect("still there");
    assert_eq!(got.metadata.uid, created.metadata.uid);
    assert!(got.metadata.deletion_timestamp.is_some());
    assert_eq!(got.finalizers(), [HOLD]);

    let s = api_err(
        api.patch(
            "fin",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [HOLD, "example.com/another"]}})),
        )
        .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    assert!(s.message.contains("no new finalizers"), "{s:?}");
    assert_eq!(api.get("fin").await.expect("get").finalizers(), [HOLD]);

    // Other changes are still allowed while it waits.
    api.patch(
        "fin",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .expect("update while deleting");

    release(&api, "fin").await;
    wait_gone(&api, "fin").await;
}

#[tokio::test]
async fn simulated_kubelet_runs_pods() {
    let t = common::start().await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("runner"))
        .await
        .expect("create pod");
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    let running = common::wait_for("pod Running and Ready", TIMEOUT, || async {
        let p = pods.get("runner").await.ok()?;
        let st = p.status.clone()?;
        let ready = st
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        (st.phase.as_deref() == Some("Running") && ready).then_some(p)
    })
    .await;
    let st = running.status.expect("status");
    assert!(st.pod_ip.is_some());
    let cs = st.container_statuses.expect("container statuses");
    assert_eq!(cs.len(), 1);
    assert!(cs[0].ready && cs[0].name == "main");
}

#[tokio::test]
async fn running_pods_terminate_gracefully_unless_forced() {
    let t = common::start().await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    for name in ["graceful", "forced"] {
        pods.create(&PostParams::default(), &pod(name))
            .await
            .expect("create pod");
        common::wait_for("pod Running", TIMEOUT, || async {
            let p = pods.get(name).await.ok()?;
            (p.status?.phase.as_deref() == Some("Running")).then_some(())
        })
        .await;
    }
    let answer = pods
        .delete("graceful", &DeleteParams::default())
        .await
        .expect("delete");
    let terminating = answer.left().expect("a running pod is not gone at once");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    wait_gone(&pods, "graceful").await;

    let forced = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete("forced", &forced).await.expect("force delete");
    assert!(
        pods.get_opt("forced").await.expect("get").is_none(),
        "grace period 0 deletes at once"
    );
}

#[tokio::test]
async fn without_kubelet_pods_stay_pending() {
    let mut cfg = SandboxConfig::ephemeral();
    cfg.tunables.kubelet_delay = None;
    let t = common::start_with(cfg).await;
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("idle"))
        .await
        .expect("create pod");
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    // The controllers handle changes in store order: once the namespace created after the pod
    // has its default service account, the pod has been seen too.
    let nss: Api<Namespace> = Api::all(t.client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("later".into());
    nss.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let sas: Api<ServiceAccount> = Api::namespaced(t.client.clone(), "later");
    common::wait_for(
        "default service account in a later namespace",
        TIMEOUT,
        || async { sas.get("default").await.ok() },
    )
    .await;
    let got = pods.get("idle").await.expect("get pod");
    let st = got.status.expect("status");
    assert_eq!(st.phase.as_deref(), Some("Pending"));
    assert!(
        !st.conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "no kubelet, no readiness"
    );
}

#[tokio::test]
async fn foreground_and_orphan_deletion_pass_through_the_collector_without_dependents() {
    let t = common::start().await;
    let api: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    for (name, dp, fin) in [
        (
            "lonely-fg",
            DeleteParams::foreground(),
            "foregroundDeletion",
        ),
        ("lonely-or", DeleteParams::orphan(), "orphan"),
    ] {
        create_cm(&api, name, vec![], &[]).await;
        let resp = api.delete(name, &dp).await.expect("delete");
        let obj = resp.left().unwrap_or_else(|| {
            panic!("{name}: delete should answer with the object marked for deletion")
        });
        assert!(
            obj.metadata.deletion_timestamp.is_some(),
            "{name}: deletionTimestamp set"
        );
        assert!(
            obj.finalizers().iter().any(|f| f == fin),
            "{name}: {fin} finalizer added, got {:?}",
            obj.finalizers()
        );
        wait_gone(&api, name).await;
    }
}

#[tokio::test]
async fn simulated_statefulset_controller_keeps_one_pod_per_ordinal() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    let t = common::start().await;
    let sts_api: Api<StatefulSet> = Api::namespaced(t.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), "default");
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .expect("statefulset");
    let sts = sts_api
        .create(&PostParams::default(), &sts)
        .await
        .expect("create");
    let uid = sts.uid().expect("uid");
    let names = || async {
        let mut n: Vec<String> = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .expect("list")
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect();
        n.sort();
        n
    };
    // Pods by ordinal, controlled by the StatefulSet, Ready; status counts them.
    common::wait_for("3 ready replicas", TIMEOUT, || async {
        let s = sts_api.get("web").await.ok()?.status?;
        (s.ready_replicas == Some(3)).then_some(())
    })
    .await;
    assert_eq!(names().await, ["web-0", "web-1", "web-2"]);
    let p = pods.get("web-1").await.expect("web-1");
    let labels = p.labels();
    assert_eq!(labels["statefulset.kubernetes.io/pod-name"], "web-1");
    assert_eq!(labels["apps.kubernetes.io/pod-index"], "1");
    let owner = &p.owner_references()[0];
    assert_eq!(
        (owner.uid.as_str(), owner.controller),
        (uid.as_str(), Some(true))
    );

    // Scale down deletes the highest ordinals; a deleted Pod comes back.
    sts_api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .expect("scale");
    common::wait_for("web-2 gone", TIMEOUT, || async {
        (names().await == ["web-0", "web-1"]).then_some(())
    })
    .await;
    let old = pods.get("web-0").await.expect("web-0").uid();
    pods.delete("web-0", &DeleteParams::default())
        .await
        .expect("delete");
    common::wait_for("web-0 recreated", TIMEOUT, || async {
        let p = pods.get("web-0").await.ok()?;
        (p.uid() != old && p.metadata.deletion_timestamp.is_none()).then_some(())
    })
    .await;

    // Deleting the StatefulSet deletes its Pods (garbage collection).
    sts_api
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete sts");
    common::wait_for("pods gone", TIMEOUT, || async {
        names().await.is_empty().then_some(())
    })
    .await;
}
