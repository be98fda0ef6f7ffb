//! Object semantics through kube-rs, typed (k8s-openapi) and `DynamicObject`: CRUD, server-owned
//! metadata, conflicts, validation, generation, the status subresource, every patch flavour,
//! dry runs, delete preconditions, deletecollection, selectors, pagination, metadata-only lists
//! and server-side tables.

use crate::common;

use std::collections::{BTreeMap, HashSet};

use axum::http;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ReplicationController, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions,
};
use kube::core::Status;
use serde_json::{Value, json};

const NS: &str = "default";
/// The ConfigMap kube-controller-manager keeps in every namespace.
const ROOT_CA: &str = "kube-root-ca.crt";

/// The API error Status of a failed call, panicking (with the call's result) if it did not fail that way.
fn api_status<T: std::fmt::Debug>(what: &str, r: Result<T, kube::Error>) -> Box<Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("{what}: expected an API error Status, got {other:?}"),
    }
}

fn assert_status(what: &str, s: &Status, code: u16, reason: &str) {
    assert_eq!(
        (s.code, s.reason.as_str()),
        (code, reason),
        "{what}: unexpected Status {s:?}"
    );
}

fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some(
        data.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    cm
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = configmap(name, &[]);
    cm.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    cm
}

fn rv_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .expect("resourceVersion set")
        .parse()
        .expect("resourceVersion is a decimal counter")
}

fn deployment(name: &str, containers: &[(&str, &str)]) -> Deployment {
    let containers: Vec<Value> = containers
        .iter()
        .map(|(n, i)| json!({"name": n, "image": i}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": containers}
            }
        }
    }))
    .expect("deployment json")
}

fn replication_controller(name: &str) -> ReplicationController {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"app": name},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1"}]}
            }
        }
    }))
    .expect("replication controller json")
}

/// The sorted names of `items`, leaving out the `kube-root-ca.crt` ConfigMap that every
/// namespace has (on a real cluster too).
fn names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    let mut v: Vec<String> = items
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .filter(|n| n != ROOT_CA)
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn typed_crud_create_get_list_update_delete() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams::default();
    let created = cms
        .create(&pp, &configmap("crud", &[("a", "1")]))
        .await
        .expect("create");
    assert_eq!(created.metadata.namespace.as_deref(), Some(NS));

    let got = cms.get("crud").await.expect("get");
    assert_eq!(got.metadata.uid, created.metadata.uid);
    assert_eq!(
        got.data
            .as_ref()
            .and_then(|d| d.get("a"))
            .map(String::as_str),
        Some("1")
    );

    let listed = cms.list(&ListParams::default()).await.expect("list");
    assert_eq!(names(&listed.items), vec!["crud".to_string()]);

    let mut changed = got.clone();
    changed
        .data
        .get_or_insert_with(BTreeMap::new)
        .insert("b".into(), "2".into());
    let updated = cms.replace("crud", &pp, &changed).await.expect("update");
    assert!(rv_of(&updated.metadata) > rv_of(&got.metadata));
    assert_eq!(
        cms.get("crud").await.expect("get after update").data,
        updated.data
    );

    cms.delete("crud", &DeleteParams::default())
        .await
        .expect("delete");
    let s = api_status("get after delete", cms.get("crud").await);
    assert_status("get after delete", &s, 404, "NotFound");
    assert!(
        names(
            &cms.list(&ListParams::default())
                .await
                .expect("list after delete")
                .items
        )
        .is_empty()
    );
}

#[tokio::test]
async fn dynamic_object_crud_interoperates_with_typed_clients() {
    let t = common::start().await;
    let ar = ApiResource::erase::<Deployment>(&());
    let dyn_api: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), NS, &ar);
    let typed: Api<Deployment> = Api::namespaced(t.client.clone(), NS);

    let mut obj = DynamicObject::new("dyn", &ar);
    obj.data = serde_json::to_value(deployment("dyn", &[("app", "nginx:1")]))
        .expect("to json")
        .as_object()
        .map(|m| {
            let mut m = m.clone();
            m.remove("metadata");
            m.remove("apiVersion");
            m.remove("kind");
            Value::Object(m)
        })
        .expect("object");
    let created = dyn_api
        .create(&PostParams::default(), &obj)
        .await
        .expect("dynamic create");
    assert_eq!(
        created.types.as_ref().map(|t| t.kind.as_str()),
        Some("Deployment")
    );
    assert_eq!(created.data["spec"]["replicas"], json!(1));

    let via_typed = typed.get("dyn").await.expect("typed get");
    assert_eq!(via_typed.metadata.uid, created.metadata.uid);
    assert_eq!(
        via_typed
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .map(|p| p.containers[0].image.clone()),
        Some(Some("nginx:1".to_string()))
    );

    let mut got = dyn_api.get("dyn").await.expect("dynamic get");
    got.data["spec"]["replicas"] = json!(4);
    let replaced = dyn_api
        .replace("dyn", &PostParams::default(), &got)
        .await
        .expect("dynamic replace");
    assert_eq!(replaced.data["spec"]["replicas"], json!(4));
    assert_eq!(
        typed
            .get("dyn")
            .await
            .expect("typed get")
            .spec
            .and_then(|s| s.replicas),
        Some(4)
    );

    let listed = dyn_api
        .list(&ListParams::default())
        .await
        .expect("dynamic list");
    assert_eq!(names(&listed.items), vec!["dyn".to_string()]);
    dyn_api
        .delete("dyn", &DeleteParams::default())
        .await
        .expect("dynamic delete");
    assert!(typed.get_opt("dyn").await.expect("get_opt").is_none());
}

#[tokio::test]
async fn uid_creation_timestamp_and_one_global_resource_version_counter() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams::default();

    let a = cms
        .create(&pp, &configmap("a", &[]))
        .await
        .expect("create a");
    let mut s = Secret::default();
    s.metadata.name = Some("s".into());
    let b = secrets.create(&pp, &s).await.expect("create secret");
    let c = cms
        .create(&pp, &configmap("c", &[]))
        .await
        .expect("create c");

    // One counter across resource types: strictly increasing in write order.
    let (ra, rb, rc) = (rv_of(&a.metadata), rv_of(&b.metadata), rv_of(&c.metadata));
    assert!(ra < rb && rb < rc, "resourceVersions {ra} {rb} {rc}");

    let uids: HashSet<String> = [&a, &c]
        .iter()
        .filter_map(|o| o.metadata.uid.clone())
        .chain(b.metadata.uid.clone())
        .collect();
    assert_eq!(uids.len(), 3, "uids are distinct: {uids:?}");
    for u in &uids {
        assert_eq!(u.len(), 36, "uid {u} looks like a UUID");
        assert_eq!(u.matches('-').count(), 4, "uid {u} looks like a UUID");
    }
    let ts = a
        .metadata
        .creation_timestamp
        .as_ref()
        .expect("creationTimestamp");
    let age = k8s_openapi::jiff::Timestamp::now().as_second() - ts.0.as_second();
    assert!(
        age.abs() < 300,
        "creationTimestamp {ts:?} is about now ({age}s)"
    );

    // The list's resourceVersion is at least the latest write; an update moves past all of them.
    let list = cms.list(&ListParams::default()).await.expect("list");
    let list_rv: u64 = list
        .metadata
        .resource_version
        .as_deref()
        .expect("list rv")
        .parse()
        .expect("list rv numeric");
    assert!(list_rv >= rc);
    let mut a2 = cms.get("a").await.expect("get a");
    a2.data = Some([("k".to_string(), "v".to_string())].into());
    let a3 = cms.replace("a", &pp, &a2).await.expect("update a");
    assert!(rv_of(&a3.metadata) > rc);
    assert_eq!(a3.metadata.uid, a.metadata.uid, "uid survives updates");
    assert_eq!(
        a3.metadata.creation_timestamp, a.metadata.creation_timestamp,
        "creationTimestamp survives updates"
    );
}

#[tokio::test]
async fn update_with_stale_resource_version_is_a_409_conflict() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams::default();
    let stale = cms
        .create(&pp, &configmap("c", &[("v", "0")]))
        .await
        .expect("create");
    let mut fresh = stale.clone();
    fresh.data = Some([("v".to_string(), "1".to_string())].into());
    cms.replace("c", &pp, &fresh).await.expect("first update");

    let mut late = stale.clone();
    late.data = Some([("v".to_string(), "2".to_string())].into());
    let s = api_status("stale update", cms.replace("c", &pp, &late).await);
    assert_status("stale update", &s, 409, "Conflict");
    assert!(
        s.message.contains("has been modified"),
        "message: {}",
        s.message
    );
    assert_eq!(
        cms.get("c")
            .await
            .expect("get")
            .data
            .and_then(|d| d.get("v").cloned())
            .as_deref(),
        Some("1"),
        "the stale write changed nothing"
    );
}

#[tokio::test]
async fn creating_an_existing_object_is_409_already_exists() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams::default();
    let first = cms
        .create(&pp, &configmap("dup", &[("v", "1")]))
        .await
        .expect("create");
    let s = api_status(
        "second create",
        cms.create(&pp, &configmap("dup", &[("v", "2")])).await,
    );
    assert_status("second create", &s, 409, "AlreadyExists");
    assert!(s.message.contains("\"dup\" already exists"), "{s:?}");
    assert_eq!(
        s.details.as_ref().map(|d| d.name.as_str()),
        Some("dup"),
        "{s:?}"
    );
    let now = cms.get("dup").await.expect("get");
    assert_eq!(now.metadata.uid, first.metadata.uid);
    assert_eq!(now.data, first.data);
}

#[tokio::test]
async fn generate_name_appends_a_five_character_suffix() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let mut cm = ConfigMap::default();
    cm.metadata.generate_name = Some("gen-".into());
    let mut seen = HashSet::new();
    for _ in 0..3 {
        let c = cms
            .create(&PostParams::default(), &cm)
            .await
            .expect("create with generateName");
        let name = c.metadata.name.clone().expect("name generated");
        let suffix = name.strip_prefix("gen-").expect("prefix kept");
        assert_eq!(suffix.len(), 5, "suffix of {name}");
        assert!(
            suffix
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit()),
            "suffix of {name} is lowercase alphanumeric"
        );
        assert_eq!(c.metadata.generate_name.as_deref(), Some("gen-"));
        cms.get(&name).await.expect("generated object is stored");
        seen.insert(name);
    }
    assert_eq!(seen.len(), 3, "generated names differ: {seen:?}");
}

#[tokio::test]
async fn invalid_name_is_422_invalid_naming_the_field() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let s = api_status(
        "create Bad_Name",
        cms.create(&PostParams::default(), &configmap("Bad_Name", &[]))
            .await,
    );
    assert_status("create Bad_Name", &s, 422, "Invalid");
    assert!(
        s.message.contains("metadata.name") && s.message.contains("Bad_Name"),
        "message names the field and value: {}",
        s.message
    );
    let causes = s
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert!(
        causes.iter().any(|c| c.field == "metadata.name"),
        "causes: {causes:?}"
    );
    assert!(names(&cms.list(&ListParams::default()).await.expect("list").items).is_empty());
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_404() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "does-not-exist");
    let s = api_status(
        "create in missing namespace",
        cms.create(&PostParams::default(), &configmap("x", &[]))
            .await,
    );
    assert_status("create in missing namespace", &s, 404, "NotFound");
    assert!(
        s.message
            .contains("namespaces \"does-not-exist\" not found"),
        "message: {}",
        s.message
    );
}

#[tokio::test]
async fn two_controller_owner_references_are_rejected_with_422() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let owner = |name: &str, uid: &str| OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    let mut cm = configmap("owned", &[]);
    cm.metadata.owner_references = Some(vec![
        owner("one", "11111111-1111-1111-1111-111111111111"),
        owner("two", "22222222-2222-2222-2222-222222222222"),
    ]);
    let s = api_status(
        "two controllers",
        cms.create(&PostParams::default(), &cm).await,
    );
    assert_status("two controllers", &s, 422, "Invalid");
    assert!(
        s.message.contains("ownerReferences"),
        "message: {}",
        s.message
    );
    // One controller is fine.
    if let Some(refs) = cm.metadata.owner_references.as_mut() {
        refs[1].controller = Some(false);
    }
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("one controller reference is accepted");
}

#[tokio::test]
async fn generation_starts_at_one_and_moves_only_with_spec() {
    let t = common::start().await;
    // A ReplicationController: no controller of the sandbox writes to it (its Deployment
    // controller would race these writes, as kube-controller-manager's would).
    let deps: Api<ReplicationController> = Api::namespaced(t.client.clone(), NS);
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams::default();
    let d = deps
        .create(&pp, &replication_controller("gen"))
        .await
        .expect("create deployment");
    assert_eq!(d.metadata.generation, Some(1));
    let cm = cms
        .create(&pp, &configmap("nospec", &[("a", "b")]))
        .await
        .expect("create configmap");
    assert_eq!(
        cm.metadata.generation, None,
        "objects without spec have no generation"
    );

    let merge = PatchParams::default();
    let labelled = deps
        .patch(
            "gen",
            &merge,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("label patch");
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "labels don't bump generation"
    );

    let statused = deps
        .patch_status(
            "gen",
            &merge,
            &Patch::Merge(json!({"status": {"observedGeneration": 1, "replicas": 1}})),
        )
        .await
        .expect("status patch");
    assert_eq!(
        statused.metadata.generation,
        Some(1),
        "status doesn't bump generation"
    );

    let scaled = deps
        .patch(
            "gen",
            &merge,
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("spec patch");
    assert_eq!(scaled.metadata.generation, Some(2));

    // A no-op spec write does not bump it either.
    let same = deps
        .patch(
            "gen",
            &merge,
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("no-op spec patch");
    assert_eq!(same.metadata.generation, Some(2));
    assert_eq!(
        same.metadata.resource_version, scaled.metadata.resource_version,
        "a no-op write stores nothing"
    );
}

#[tokio::test]
async fn status_subresource_and_main_resource_write_disjoint_parts() {
    let t = common::start().await;
    // A ReplicationController: no controller of the sandbox writes to it (its Deployment
    // controller would race these writes, as kube-controller-manager's would).
    let deps: Api<ReplicationController> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams::default();

    // Status sent on create is dropped.
    let mut d = replication_controller("st");
    d.status = Some(serde_json::from_value(json!({"replicas": 7})).expect("status json"));
    let created = deps.create(&pp, &d).await.expect("create");
    assert_eq!(
        created.status.as_ref().map(|s| s.replicas),
        None,
        "status on create is ignored: {:?}",
        created.status
    );

    // /status: status changes, spec changes are ignored.
    let mut via_status = created.clone();
    via_status.status = Some(
        serde_json::from_value(json!({"replicas": 2, "readyReplicas": 1})).expect("status json"),
    );
    if let Some(s) = via_status.spec.as_mut() {
        s.replicas = Some(9);
    }
    let after_status = deps
        .replace_status("st", &pp, &via_status)
        .await
        .expect("replace status");
    assert_eq!(after_status.status.as_ref().map(|s| s.replicas), Some(2));
    assert_eq!(
        after_status.spec.as_ref().and_then(|s| s.replicas),
        Some(1),
        "spec written via /status is ignored"
    );
    assert_eq!(after_status.metadata.generation, Some(1));

    // Main resource: spec changes, status changes are ignored.
    let mut via_main = after_status.clone();
    via_main.status = Some(serde_json::from_value(json!({"replicas": 5})).expect("status json"));
    if let Some(s) = via_main.spec.as_mut() {
        s.replicas = Some(3);
    }
    let after_main = deps
        .replace("st", &pp, &via_main)
        .await
        .expect("replace main");
    assert_eq!(after_main.spec.as_ref().and_then(|s| s.replicas), Some(3));
    assert_eq!(
        after_main.status.as_ref().map(|s| s.replicas),
        Some(2),
        "status written via the main resource is ignored"
    );
    assert_eq!(
        after_main.status.as_ref().and_then(|s| s.ready_replicas),
        Some(1)
    );

    let stored = deps.get_status("st").await.expect("get status");
    assert_eq!(stored.status.map(|s| s.replicas), Some(2));
    assert_eq!(stored.spec.and_then(|s| s.replicas), Some(3));
}

#[tokio::test]
async fn json_merge_and_json_patch() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    cms.create(
        &PostParams::default(),
        &configmap("p", &[("keep", "1"), ("drop", "2"), ("change", "3")]),
    )
    .await
    .expect("create");
    let pp = PatchParams::default();
    let merged = cms
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"data": {"drop": null, "change": "33", "new": "4"}})),
        )
        .await
        .expect("merge patch");
    let want: BTreeMap<String, String> = [("keep", "1"), ("change", "33"), ("new", "4")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(merged.data.as_ref(), Some(&want));

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/keep", "value": "1"},
        {"op": "remove", "path": "/data/new"},
        {"op": "replace", "path": "/data/change", "value": "333"},
        {"op": "add", "path": "/data/added", "value": "5"}
    ]))
    .expect("json patch");
    let patched = cms
        .patch("p", &pp, &Patch::Json::<()>(ops))
        .await
        .expect("json patch");
    let want: BTreeMap<String, String> = [("keep", "1"), ("change", "333"), ("added", "5")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(patched.data.as_ref(), Some(&want));

    // A failing `test` op rejects the whole patch and changes nothing.
    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/data/keep", "value": "changed"},
        {"op": "test", "path": "/data/keep", "value": "nope"}
    ]))
    .expect("json patch");
    let s = api_status(
        "failing json patch",
        cms.patch("p", &pp, &Patch::Json::<()>(failing)).await,
    );
    assert_status("failing json patch test op", &s, 422, "Invalid");
    assert_eq!(
        cms.get("p").await.expect("get").data.as_ref(),
        Some(&want),
        "nothing changed"
    );
}

#[tokio::test]
async fn strategic_merge_patch_merges_containers_by_name() {
    let t = common::start().await;
    let deps: Api<Deployment> = Api::namespaced(t.client.clone(), NS);
    deps.create(
        &PostParams::default(),
        &deployment("smp", &[("web", "nginx:1"), ("sidecar", "envoy:1")]),
    )
    .await
    .expect("create");
    let patched = deps
        .patch(
            "smp",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "sidecar", "image": "envoy:2"},
                {"name": "extra", "image": "busybox"}
            ]}}}})),
        )
        .await
        .expect("strategic merge patch");
    let containers: Vec<(String, Option<String>)> = patched
        .spec
        .and_then(|s| s.template.spec)
        .map(|p| p.containers)
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.name, c.image))
        .collect();
    let by_name: BTreeMap<String, Option<String>> = containers.iter().cloned().collect();
    assert_eq!(containers.len(), 3, "{containers:?}");
    assert_eq!(by_name["web"].as_deref(), Some("nginx:1"), "untouched");
    assert_eq!(by_name["sidecar"].as_deref(), Some("envoy:2"), "merged");
    assert_eq!(by_name["extra"].as_deref(), Some("busybox"), "added");

    // $patch: delete removes one element by its merge key.
    let patched = deps
        .patch(
            "smp",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "extra", "$patch": "delete"}
            ]}}}})),
        )
        .await
        .expect("strategic delete");
    let left = names_of_containers(&patched);
    assert_eq!(left, vec!["sidecar".to_string(), "web".to_string()]);

    // A JSON merge patch, by contrast, replaces the list.
    let replaced = deps
        .patch(
            "smp",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "only", "image": "x"}
            ]}}}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(names_of_containers(&replaced), vec!["only".to_string()]);
}

fn names_of_containers(d: &Deployment) -> Vec<String> {
    let mut v: Vec<String> = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| p.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[tokio::test]
async fn server_side_apply_creates_prunes_conflicts_and_forces() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let manifest = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data});
    let a = PatchParams::apply("manager-a");
    let created = cms
        .patch(
            "ssa",
            &a,
            &Patch::Apply(manifest(json!({"x": "1", "y": "2"}))),
        )
        .await
        .expect("apply creates");
    assert_eq!(created.data.as_ref().map(BTreeMap::len), Some(2));
    let mf = created.metadata.managed_fields.clone().unwrap_or_default();
    assert!(
        mf.iter().any(|e| e.manager.as_deref() == Some("manager-a")
            && e.operation.as_deref() == Some("Apply")),
        "managedFields: {mf:?}"
    );

    // Re-applying without `y` removes it (manager-a owned it).
    let pruned = cms
        .patch("ssa", &a, &Patch::Apply(manifest(json!({"x": "1"}))))
        .await
        .expect("re-apply");
    let keys: Vec<String> = pruned.data.unwrap_or_default().into_keys().collect();
    assert_eq!(keys, vec!["x".to_string()]);

    // Another manager setting the same field to another value conflicts...
    let b = PatchParams::apply("manager-b");
    let s = api_status(
        "conflicting apply",
        cms.patch("ssa", &b, &Patch::Apply(manifest(json!({"x": "other"}))))
            .await,
    );
    assert_status("conflicting apply", &s, 409, "Conflict");
    assert!(
        s.message.contains("manager-a") && s.message.contains(".data.x"),
        "conflict names the manager and field: {}",
        s.message
    );
    assert_eq!(
        cms.get("ssa")
            .await
            .expect("get")
            .data
            .and_then(|d| d.get("x").cloned())
            .as_deref(),
        Some("1")
    );

    // ...unless forced, which takes ownership.
    let forced = cms
        .patch(
            "ssa",
            &b.clone().force(),
            &Patch::Apply(manifest(json!({"x": "other"}))),
        )
        .await
        .expect("forced apply");
    assert_eq!(
        forced
            .data
            .as_ref()
            .and_then(|d| d.get("x"))
            .map(String::as_str),
        Some("other")
    );
    let mf = forced.metadata.managed_fields.unwrap_or_default();
    let owns_x = |m: &str| {
        mf.iter().any(|e| {
            e.manager.as_deref() == Some(m)
                && e.fields_v1
                    .as_ref()
                    .is_some_and(|f| f.0.to_string().contains("f:x"))
        })
    };
    assert!(
        owns_x("manager-b") && !owns_x("manager-a"),
        "ownership moved: {mf:?}"
    );

    // Applying the same value as another manager is shared ownership, not a conflict.
    cms.patch("ssa", &a, &Patch::Apply(manifest(json!({"x": "other"}))))
        .await
        .expect("agreeing apply does not conflict");
}

#[tokio::test]
async fn dry_run_all_stores_nothing_on_any_write() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let would = cms
        .create(&dry, &configmap("dry", &[("a", "1")]))
        .await
        .expect("dry-run create");
    assert_eq!(would.metadata.name.as_deref(), Some("dry"));
    assert!(cms.get_opt("dry").await.expect("get_opt").is_none());
    assert!(names(&cms.list(&ListParams::default()).await.expect("list").items).is_empty());

    let real = cms
        .create(&PostParams::default(), &configmap("dry", &[("a", "1")]))
        .await
        .expect("create");
    let rv = real.metadata.resource_version.clone();

    let mut changed = real.clone();
    changed.data = Some([("a".to_string(), "2".to_string())].into());
    let would = cms
        .replace("dry", &dry, &changed)
        .await
        .expect("dry-run update");
    assert_eq!(
        would
            .data
            .as_ref()
            .and_then(|d| d.get("a"))
            .map(String::as_str),
        Some("2")
    );

    let dry_patch = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    cms.patch(
        "dry",
        &dry_patch,
        &Patch::Merge(json!({"data": {"a": "3"}})),
    )
    .await
    .expect("dry-run merge patch");
    cms.patch(
        "dry",
        &PatchParams {
            dry_run: true,
            ..PatchParams::apply("dry-applier").force()
        },
        &Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}, "data": {"a": "4"}}),
        ),
    )
    .await
    .expect("dry-run apply");
    cms.patch(
        "fresh-dry",
        &PatchParams {
            dry_run: true,
            ..PatchParams::apply("dry-applier")
        },
        &Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fresh-dry"}}),
        ),
    )
    .await
    .expect("dry-run apply-create");
    assert!(cms.get_opt("fresh-dry").await.expect("get_opt").is_none());

    cms.delete(
        "dry",
        &DeleteParams {
            dry_run: true,
            ..Default::default()
        },
    )
    .await
    .expect("dry-run delete");

    let now = cms.get("dry").await.expect("still there");
    assert_eq!(now.metadata.resource_version, rv, "nothing was written");
    assert_eq!(now.data, real.data);
}

#[tokio::test]
async fn delete_preconditions_on_uid_and_resource_version() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let cm = cms
        .create(&PostParams::default(), &configmap("pre", &[]))
        .await
        .expect("create");
    let uid = cm.metadata.uid.clone().expect("uid");
    let rv = cm.metadata.resource_version.clone().expect("rv");
    let with = |uid: Option<String>, rv: Option<String>| DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: rv,
        }),
        ..Default::default()
    };

    let s = api_status(
        "uid mismatch",
        cms.delete(
            "pre",
            &with(Some("00000000-0000-0000-0000-000000000000".into()), None),
        )
        .await,
    );
    assert_status("uid mismatch", &s, 409, "Conflict");
    assert!(s.message.contains("Precondition failed"), "{}", s.message);

    let s = api_status(
        "rv mismatch",
        cms.delete("pre", &with(None, Some("1".into()))).await,
    );
    assert_status("rv mismatch", &s, 409, "Conflict");
    assert!(s.message.contains("ResourceVersion"), "{}", s.message);
    cms.get("pre")
        .await
        .expect("still there after failed deletes");

    cms.delete("pre", &with(Some(uid), Some(rv)))
        .await
        .expect("delete with matching preconditions");
    assert!(cms.get_opt("pre").await.expect("get_opt").is_none());
}

#[tokio::test]
async fn deletecollection_with_a_label_selector() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams::default();
    for (n, app) in [
        ("x1", "x"),
        ("x2", "x"),
        ("x3", "x"),
        ("y1", "y"),
        ("z", ""),
    ] {
        let labels: &[(&str, &str)] = if app.is_empty() { &[] } else { &[("app", app)] };
        cms.create(&pp, &labelled(n, labels)).await.expect("create");
    }
    let other_ns: Api<ConfigMap> = Api::namespaced(t.client.clone(), "kube-system");
    other_ns
        .create(&pp, &labelled("x-elsewhere", &[("app", "x")]))
        .await
        .expect("create in kube-system");

    let res = cms
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app=x"),
        )
        .await
        .expect("deletecollection");
    if let Some(list) = res.left() {
        assert_eq!(
            names(&list.items),
            vec!["x1".to_string(), "x2".into(), "x3".into()]
        );
    }
    let left = cms.list(&ListParams::default()).await.expect("list");
    assert_eq!(names(&left.items), vec!["y1".to_string(), "z".into()]);
    other_ns
        .get("x-elsewhere")
        .await
        .expect("other namespaces are untouched");
}

#[tokio::test]
async fn list_with_label_and_field_selectors() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams::default();
    let objs: [(&str, &[(&str, &str)]); 5] = [
        ("a", &[("app", "web"), ("tier", "front")]),
        ("b", &[("app", "web"), ("tier", "back")]),
        ("c", &[("app", "db"), ("tier", "back")]),
        ("d", &[("app", "db")]),
        ("e", &[]),
    ];
    for (n, l) in objs {
        cms.create(&pp, &labelled(n, l)).await.expect("create");
    }
    let cases: [(&str, &[&str]); 10] = [
        ("app=web", &["a", "b"]),
        ("app==db", &["c", "d"]),
        ("app!=web", &["c", "d", "e"]),
        ("app=web,tier=back", &["b"]),
        ("tier in (front,back)", &["a", "b", "c"]),
        ("tier notin (back)", &["a", "d", "e"]),
        ("tier", &["a", "b", "c"]),
        ("!tier", &["d", "e"]),
        ("app in (db),!tier", &["d"]),
        ("app=nothing", &[]),
    ];
    for (sel, want) in cases {
        let got = cms
            .list(&ListParams::default().labels(sel))
            .await
            .unwrap_or_else(|e| panic!("list with {sel:?}: {e}"));
        assert_eq!(names(&got.items), want, "labelSelector {sel:?}");
    }
    let fcases: [(&str, &[&str]); 4] = [
        ("metadata.name=c", &["c"]),
        ("metadata.name!=c", &["a", "b", "d", "e"]),
        ("metadata.namespace=default,metadata.name==a", &["a"]),
        ("metadata.namespace=kube-system", &[]),
    ];
    for (sel, want) in fcases {
        let got = cms
            .list(&ListParams::default().fields(sel))
            .await
            .unwrap_or_else(|e| panic!("list with fieldSelector {sel:?}: {e}"));
        assert_eq!(names(&got.items), want, "fieldSelector {sel:?}");
    }
    // Both at once.
    let got = cms
        .list(
            &ListParams::default()
                .labels("app=web")
                .fields("metadata.name!=a"),
        )
        .await
        .expect("list with both selectors");
    assert_eq!(names(&got.items), vec!["b".to_string()]);
}

#[tokio::test]
async fn limit_and_continue_paginate_every_item_exactly_once() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams::default();
    let mut want = Vec::new();
    for i in 0..25 {
        let n = format!("page-{i:02}");
        cms.create(&pp, &labelled(&n, &[("paged", "yes")]))
            .await
            .expect("create");
        want.push(n);
    }
    cms.create(&pp, &configmap("not-paged", &[]))
        .await
        .expect("create");

    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().labels("paged=yes").limit(7);
        if let Some(c) = &token {
            lp = lp.continue_token(c);
        }
        let page = cms.list(&lp).await.expect("list page");
        pages += 1;
        assert!(
            page.items.len() <= 7,
            "page {pages} has {}",
            page.items.len()
        );
        seen.extend(page.items.iter().filter_map(|o| o.metadata.name.clone()));
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        if seen.len() < want.len() {
            assert!(
                token.is_some(),
                "continue token present before the last page (page {pages}, {} seen)",
                seen.len()
            );
            assert_eq!(page.items.len(), 7, "non-final pages are full");
        }
        if token.is_none() {
            break;
        }
        assert!(pages < 10, "pagination does not terminate");
    }
    assert_eq!(pages, 4, "25 items at 7 per page");
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "no item twice: {seen:?}");
    assert_eq!(sorted, want, "every item once");
}

#[tokio::test]
async fn metadata_only_lists_and_gets() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    let pp = PostParams::default();
    for n in ["m1", "m2"] {
        cms.create(&pp, &labelled(n, &[("meta", n)]))
            .await
            .expect("create");
    }
    let list = cms
        .list_metadata(&ListParams::default().labels("meta"))
        .await
        .expect("list metadata");
    assert_eq!(
        list.types.kind, "PartialObjectMetadataList",
        "list kind: {:?}",
        list.types
    );
    let got: Vec<(String, Option<String>)> = list
        .items
        .iter()
        .map(|o| {
            (
                o.metadata.name.clone().unwrap_or_default(),
                o.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("meta").cloned()),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("m1".to_string(), Some("m1".to_string())),
            ("m2".into(), Some("m2".into()))
        ]
    );
    for o in &list.items {
        assert!(o.metadata.uid.is_some() && o.metadata.resource_version.is_some());
    }
    let one = cms.get_metadata("m1").await.expect("get metadata");
    assert_eq!(
        one.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    assert_eq!(one.metadata.name.as_deref(), Some("m1"));

    // The same through Api<PartialObjectMeta<..>> with a selector.
    let sel = cms
        .list_metadata(&ListParams::default().labels("meta=m2"))
        .await
        .expect("selected metadata list");
    assert_eq!(sel.items.len(), 1);
    assert_eq!(sel.items[0].metadata.name.as_deref(), Some("m2"));
}

#[tokio::test]
async fn server_side_table_for_kubectl_get() {
    let t = common::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), NS);
    cms.create(
        &PostParams::default(),
        &configmap("tabled", &[("a", "1"), ("b", "2")]),
    )
    .await
    .expect("create");
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .expect("request");
    let table: Value = t.client.request(req).await.expect("table request");
    assert_eq!(table["kind"], "Table", "{table}");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    let cols: Vec<&str> = common::table_columns(&table);
    assert_eq!(cols.first(), Some(&"Name"), "columns: {cols:?}");
    let rows = table["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{table}");
    assert_eq!(rows[0]["cells"][0], ROOT_CA);
    let rows = &rows[1..];
    assert_eq!(rows[0]["cells"][0], "tabled");
    assert_eq!(
        rows[0]["object"]["metadata"]["name"], "tabled",
        "rows carry the object's metadata by default"
    );

    // One object as a table, too.
    let req = http::Request::get("/api/v1/namespaces/default/configmaps/tabled")
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .expect("request");
    let one: Value = t.client.request(req).await.expect("table get");
    assert_eq!(one["kind"], "Table");
    assert_eq!(one["rows"][0]["cells"][0], "tabled");
}

/// Does `s` have the shape of `pattern`, where `9` stands for any digit?
fn shaped(s: &str, pattern: &str) -> bool {
    s.len() == pattern.len()
        && s.bytes().zip(pattern.bytes()).all(|(c, p)| match p {
            b'9' => c.is_ascii_digit(),
            p => c == p,
        })
}

/// `2026-11-25T02:00:00Z`: RFC 3339 with whole seconds (metav1.Time).
fn is_whole_seconds(t: &Value) -> bool {
    shaped(t.as_str().unwrap_or_default(), "9999-99-99T99:99:99Z")
}

/// `2026-11-25T02:00:00.123456Z`: microseconds (metav1.MicroTime).
fn is_micro(t: &Value) -> bool {
    shaped(
        t.as_str().unwrap_or_default(),
        "9999-99-99T99:99:99.999999Z",
    )
}

async fn raw(c: &kube::Client, method: &str, path: &str, body: Option<Value>) -> Value {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .expect("request");
    c.request::<Value>(req).await.expect(path)
}

#[tokio::test]
async fn timestamps_are_whole_seconds_and_micro_times_microseconds() {
    let t = common::start().await;
    let c = &t.client;
    let cm = raw(
        c,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(json!({"metadata": {"name": "ts"}})),
    )
    .await;
    assert!(
        is_whole_seconds(&cm["metadata"]["creationTimestamp"]),
        "{cm}"
    );
    let pod = json!({"metadata": {"name": "ts"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}});
    raw(c, "POST", "/api/v1/namespaces/default/pods", Some(pod)).await;
    let running = common::wait_for("the pod to run", common::TIMEOUT, || async {
        let p = raw(c, "GET", "/api/v1/namespaces/default/pods/ts", None).await;
        (p["status"]["phase"] == "Running").then_some(p)
    })
    .await;
    let conds = running["status"]["conditions"]
        .as_array()
        .expect("conditions");
    assert!(!conds.is_empty());
    for cond in conds {
        assert!(is_whole_seconds(&cond["lastTransitionTime"]), "{cond}");
    }
    assert!(is_whole_seconds(&running["status"]["startTime"]));
    let gone = raw(c, "DELETE", "/api/v1/namespaces/default/pods/ts", None).await;
    assert!(
        is_whole_seconds(&gone["metadata"]["deletionTimestamp"]),
        "{gone}"
    );
    // MicroTime fields: nanoseconds are cut to microseconds, whole seconds get six zeros.
    let lease = raw(
        c,
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        Some(
            json!({"metadata": {"name": "ts"}, "spec": {"holderIdentity": "me",
            "renewTime": "2026-11-25T01:02:03.123456789Z", "acquireTime": "2026-11-25T01:02:03Z"}}),
        ),
    )
    .await;
    assert_eq!(lease["spec"]["renewTime"], "2026-11-25T01:02:03.123456Z");
    assert_eq!(lease["spec"]["acquireTime"], "2026-11-25T01:02:03.000000Z");
    let ev = raw(
        c,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        Some(
            json!({"metadata": {"name": "ts"}, "eventTime": "2026-11-25T01:02:03.5Z",
            "reportingController": "x", "reportingInstance": "y", "action": "A", "reason": "R",
            "type": "Normal", "regarding": {"kind": "Pod", "name": "ts", "namespace": "default"}}),
        ),
    )
    .await;
    assert!(is_micro(&ev["eventTime"]), "{ev}");
    assert_eq!(ev["eventTime"], "2026-11-25T01:02:03.500000Z");
    assert!(is_whole_seconds(&ev["metadata"]["creationTimestamp"]));
}

#[tokio::test]
async fn a_new_cluster_has_the_kubernetes_service_and_root_ca_in_every_namespace() {
    let t = common::start().await;
    let c = &t.client;
    let port = t.sandbox.addr().port();
    // At start-up already, before any controller pass.
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let cm = raw(
            c,
            "GET",
            &format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"),
            None,
        )
        .await;
        assert_eq!(cm["data"], json!({"ca.crt": t.sandbox.ca_pem()}), "{ns}");
        assert!(
            cm["metadata"]["annotations"]["kubernetes.io/description"]
                .as_str()
                .is_some_and(|d| d.starts_with("Contains a CA bundle")),
            "{cm}"
        );
        raw(
            c,
            "GET",
            &format!("/api/v1/namespaces/{ns}/serviceaccounts/default"),
            None,
        )
        .await;
    }
    let svc = raw(
        c,
        "GET",
        "/api/v1/namespaces/default/services/kubernetes",
        None,
    )
    .await;
    assert_eq!(
        svc["metadata"]["labels"],
        json!({"component": "apiserver", "provider": "kubernetes"})
    );
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}])
    );
    let ep = raw(
        c,
        "GET",
        "/api/v1/namespaces/default/endpoints/kubernetes",
        None,
    )
    .await;
    assert_eq!(
        ep["subsets"],
        json!([{"addresses": [{"ip": "127.0.0.1"}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
    );
    assert_eq!(
        ep["metadata"]["labels"],
        json!({"endpointslice.kubernetes.io/skip-mirror": "true"})
    );
    let slice = raw(
        c,
        "GET",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes",
        None,
    )
    .await;
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["metadata"]["labels"],
        json!({"kubernetes.io/service-name": "kubernetes"})
    );
    assert_eq!(
        slice["endpoints"],
        json!([{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}])
    );
    assert_eq!(
        slice["ports"],
        json!([{"name": "https", "port": port, "protocol": "TCP"}])
    );
    // The Node is up with its status posted before the first request is served: nothing of the
    // bootstrap is written after a client's first read (a "nothing was written" check relies on
    // it).
    let node = raw(c, "GET", "/api/v1/nodes/sandbox-node", None).await;
    let ready = node["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    assert_eq!(ready.map(|c| &c["status"]), Some(&json!("True")), "{node}");

    // A new namespace gets both; deleted ones come back; a changed CA bundle is put back.
    raw(
        c,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"metadata": {"name": "fresh"}})),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "fresh");
    let first = common::wait_for("kube-root-ca.crt in fresh", common::TIMEOUT, || async {
        cms.get_opt("kube-root-ca.crt").await.expect("get")
    })
    .await;
    cms.delete("kube-root-ca.crt", &DeleteParams::default())
        .await
        .expect("delete");
    common::wait_for("kube-root-ca.crt recreated", common::TIMEOUT, || async {
        cms.get_opt("kube-root-ca.crt")
            .await
            .expect("get")
            .filter(|c| c.metadata.uid != first.metadata.uid)
    })
    .await;
    cms.patch(
        "kube-root-ca.crt",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"ca.crt": "tampered", "extra": "x"}})),
    )
    .await
    .expect("patch");
    common::wait_for("kube-root-ca.crt restored", common::TIMEOUT, || async {
        let cm = cms.get("kube-root-ca.crt").await.expect("get");
        (cm.data
            == Some(BTreeMap::from([(
                "ca.crt".to_string(),
                t.sandbox.ca_pem().to_string(),
            )])))
        .then_some(())
    })
    .await;
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(c.clone(), "default");
    svcs.delete("kubernetes", &DeleteParams::default())
        .await
        .expect("delete service");
    common::wait_for(
        "the kubernetes service recreated",
        common::TIMEOUT,
        || async {
            svcs.get_opt("kubernetes")
                .await
                .expect("get")
                .filter(|s| s.metadata.uid != svc["metadata"]["uid"].as_str().map(String::from))
        },
    )
    .await;
}

#[tokio::test]
async fn immutable_fields_are_refused_with_kube_apiservers_message() {
    let t = common::start().await;
    let c = &t.client;
    let job = json!({"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "a"}]}}}});
    raw(
        c,
        "POST",
        "/apis/batch/v1/namespaces/default/jobs",
        Some(job),
    )
    .await;
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        c.clone(),
        NS,
        &ApiResource::erase::<k8s_openapi::api::batch::v1::Job>(&()),
    );
    let r = jobs
        .patch(
            "j",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "b"}]}}}})),
        )
        .await;
    let s = api_status("job template", r);
    assert_status("job template", &s, 422, "Invalid");
    assert_eq!(
        s.message,
        "Job.batch \"j\" is invalid: spec.template: Invalid value: core.PodTemplateSpec{...}: field is immutable"
    );
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), NS);
    let mut cm = configmap("frozen", &[("a", "1")]);
    cm.immutable = Some(true);
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let r = cms
        .patch(
            "frozen",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "2"}})),
        )
        .await;
    let s = api_status("immutable configmap", r);
    assert_eq!(
        s.message,
        "ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    // Labels still change.
    cms.patch(
        "frozen",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .expect("labels of an immutable configmap");
}

/// Fields Kubernetes 1.34–1.36 added (`spec.hostnameOverride`, a container's
/// `restartPolicyRules`) are kept as the real 1.36 server keeps them
/// (`fixtures/new_fields`, captured with its `capture.sh`), and read back through k8s-openapi's
/// `v1_36` types.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_kubernetes_1_34_to_1_36_added_survive_a_round_trip() {
    use k8s_openapi::api::core::v1::Pod;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/new_fields");
    let expected: Value = common::fixture(dir, "expected.json");
    let t = common::start_with({
        let mut cfg = kube_sandbox::SandboxConfig::ephemeral();
        cfg.tunables.kubelet_delay = None;
        cfg
    })
    .await;
    common::ok_stdout(&t.kubectl(&["create", "-f", &format!("{dir}/pod.yaml")]));
    let got: Value = serde_json::from_str(&common::ok_stdout(&t.kubectl(&[
        "get",
        "pod",
        "new-fields",
        "-n",
        NS,
        "-o",
        "json",
    ])))
    .expect("pod json");
    let c = &got["spec"]["containers"][0];
    assert_eq!(
        json!({"hostnameOverride": got["spec"]["hostnameOverride"],
            "restartPolicy": c["restartPolicy"], "restartPolicyRules": c["restartPolicyRules"]}),
        expected
    );
    // Typed: the same fields through kube-rs and k8s-openapi.
    let pods: Api<Pod> = Api::namespaced(t.client.clone(), NS);
    let pod = pods.get("new-fields").await.expect("get pod");
    let spec = pod.spec.expect("spec");
    assert_eq!(spec.hostname_override.as_deref(), Some("custom-host"));
    let rules = spec.containers[0]
        .restart_policy_rules
        .as_ref()
        .expect("restartPolicyRules");
    assert_eq!(rules[0].action, "Restart");
}
