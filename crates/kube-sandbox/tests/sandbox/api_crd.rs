//! CustomResourceDefinitions through kube-rs: establishment, discovery, CRUD of custom resources
//! (DynamicObject), structural pruning, field validation, schema violations, the status
//! subresource, cluster scope, several versions, printer columns, deletion and invalid CRDs.

use crate::common;

use axum::http;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::{self, Discovery, Scope};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::common::TIMEOUT;

const GROUP: &str = "example.com";

fn widget_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer"},
                    "color": {"type": "string"},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }
            },
            "status": {
                "type": "object",
                "properties": {"ready": {"type": "boolean"}, "observed": {"type": "integer"}}
            }
        }
    })
}

fn version(name: &str, served: bool, storage: bool) -> Value {
    json!({
        "name": name, "served": served, "storage": storage,
        "schema": {"openAPIV3Schema": widget_schema()},
        "subresources": {"status": {}},
        "additionalPrinterColumns": [
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]
    })
}

/// A CRD `PLURAL.example.com` of kind `KIND` with `versions`.
fn crd(plural: &str, kind: &str, scope: &str, versions: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {
                "plural": plural,
                "singular": kind.to_lowercase(),
                "kind": kind,
                "shortNames": [format!("{}s", &plural[..2])]
            },
            "versions": versions
        }
    }))
    .expect("CRD deserializes")
}

fn widgets_crd() -> CustomResourceDefinition {
    crd(
        "widgets",
        "Widget",
        "Namespaced",
        json!([version("v1", true, true)]),
    )
}

fn condition_true(crd: &CustomResourceDefinition, ty: &str) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == ty && c.status == "True"))
}

/// Create a CRD and wait until it is Established and NamesAccepted.
async fn install(client: &Client, crd: &CustomResourceDefinition) -> CustomResourceDefinition {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.create(&PostParams::default(), crd)
        .await
        .unwrap_or_else(|e| panic!("create CRD {}: {e}", crd.name_any()));
    let name = crd.name_any();
    common::wait_for(
        &format!("CRD {name} Established and NamesAccepted"),
        TIMEOUT,
        || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let c = api.get(&name).await.ok()?;
                (condition_true(&c, "Established") && condition_true(&c, "NamesAccepted"))
                    .then_some(c)
            }
        },
    )
    .await
}

fn ar(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, kind), plural)
}

fn widgets(client: &Client, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "default", &ar(version, "Widget", "widgets"))
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("widget deserializes")
}

fn api_err(r: kube::Result<impl std::fmt::Debug>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn assert_absent(api: &Api<DynamicObject>, name: &str) {
    let s = api_err(api.get(name).await);
    assert_eq!(s.code, 404, "{name} must not be stored: {s:?}");
}

#[tokio::test]
async fn namespaced_crd_is_established_and_listed_by_discovery() {
    let t = common::start().await;
    let c = install(&t.client, &widgets_crd()).await;
    assert!(condition_true(&c, "Established") && condition_true(&c, "NamesAccepted"));
    let accepted = c
        .status
        .as_ref()
        .and_then(|s| s.accepted_names.as_ref())
        .expect("acceptedNames");
    assert_eq!(accepted.plural, "widgets");
    assert_eq!(accepted.kind, "Widget");

    let d = Discovery::new(t.client.clone())
        .run()
        .await
        .expect("discovery runs");
    let group = d.get(GROUP).expect("discovery lists example.com");
    let (res, caps) = group
        .recommended_kind("Widget")
        .expect("discovery lists Widget");
    assert_eq!(res.plural, "widgets");
    assert_eq!(res.version, "v1");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(caps.subresources.iter().any(|(r, _)| r.plural == "status"));
    for verb in [
        "create", "get", "list", "watch", "patch", "update", "delete",
    ] {
        assert!(caps.supports_operation(verb), "widgets must support {verb}");
    }
    let (pinned, _) =
        discovery::pinned_kind(&t.client, &GroupVersionKind::gvk(GROUP, "v1", "Widget"))
            .await
            .expect("pinned_kind finds Widget");
    assert_eq!(pinned.plural, "widgets");
}

#[tokio::test]
async fn custom_resources_crud_through_dynamic_object() {
    let t = common::start().await;
    install(&t.client, &widgets_crd()).await;
    let api = widgets(&t.client, "v1");

    let created = api
        .create(
            &PostParams::default(),
            &widget("w1", json!({"size": 1, "color": "red"})),
        )
        .await
        .expect("create widget");
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.types.as_ref().map(|t| t.api_version.as_str()),
        Some("example.com/v1")
    );

    let got = api.get("w1").await.expect("get widget");
    assert_eq!(got.data["spec"], json!({"size": 1, "color": "red"}));

    let mut upd = got.clone();
    upd.data["spec"]["size"] = json!(2);
    let replaced = api
        .replace("w1", &PostParams::default(), &upd)
        .await
        .expect("replace widget");
    assert_eq!(replaced.data["spec"]["size"], 2);
    assert_eq!(replaced.metadata.generation, Some(2));
    // A stale resourceVersion conflicts.
    let stale = api_err(api.replace("w1", &PostParams::default(), &upd).await);
    assert_eq!(stale.code, 409, "{stale:?}");

    let patched = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": "blue"}})),
        )
        .await
        .expect("merge patch widget");
    assert_eq!(patched.data["spec"], json!({"size": 2, "color": "blue"}));

    api.create(&PostParams::default(), &widget("w2", json!({"size": 3})))
        .await
        .expect("create w2");
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list widgets")
        .items
        .iter()
        .map(|w| w.name_any())
        .collect();
    assert_eq!(names, ["w1", "w2"]);

    api.delete("w1", &DeleteParams::default())
        .await
        .expect("delete w1");
    assert_absent(&api, "w1").await;
    assert_eq!(
        api.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn structural_pruning_drops_unknown_fields_and_keeps_preserved_subtrees() {
    let t = common::start().await;
    install(&t.client, &widgets_crd()).await;
    let api = widgets(&t.client, "v1");
    let mut w = widget(
        "pruned",
        json!({"size": 1, "unknown": "x", "free": {"anything": {"nested": [1, 2]}, "k": "v"}}),
    );
    w.data["extra"] = json!({"top": true});
    let created = api
        .create(&PostParams::default(), &w)
        .await
        .expect("create");
    let got = api.get("pruned").await.expect("get");
    for obj in [&created, &got] {
        assert_eq!(
            obj.data["spec"],
            json!({"size": 1, "free": {"anything": {"nested": [1, 2]}, "k": "v"}}),
            "unknown spec field pruned, preserved subtree kept"
        );
        assert!(
            obj.data.get("extra").is_none(),
            "top-level unknown field pruned: {:?}",
            obj.data
        );
    }
    // Patches are pruned too.
    let patched = api
        .patch(
            "pruned",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"bogus": 1, "free": {"more": {"x": 1}}}})),
        )
        .await
        .expect("patch");
    assert!(
        patched.data["spec"].get("bogus").is_none(),
        "{:?}",
        patched.data
    );
    assert_eq!(patched.data["spec"]["free"]["more"], json!({"x": 1}));
}

#[tokio::test]
async fn strict_field_validation_rejects_unknown_fields() {
    let t = common::start().await;
    install(&t.client, &widgets_crd()).await;
    let api = widgets(&t.client, "v1");

    // kube 5's PostParams has no fieldValidation: send the create by hand.
    let body = serde_json::to_vec(&widget("strict", json!({"size": 1, "unknown": "x"})))
        .expect("serialize");
    let req = http::Request::post(format!(
        "/apis/{GROUP}/v1/namespaces/default/widgets?fieldValidation=Strict"
    ))
    .header("content-type", "application/json")
    .body(body.clone())
    .expect("request");
    let s = api_err(t.client.request::<DynamicObject>(req).await);
    assert_eq!(s.code, 400, "{s:?}");
    assert!(s.message.contains("unknown field"), "{s:?}");
    assert!(s.message.contains("spec.unknown"), "{s:?}");
    assert_absent(&api, "strict").await;

    // Warn: accepted, pruned, and the client gets a Warning header.
    let req = http::Request::post(format!(
        "/apis/{GROUP}/v1/namespaces/default/widgets?fieldValidation=Warn"
    ))
    .header("content-type", "application/json")
    .body(body)
    .expect("request");
    let resp = t.client.send(req.map(Into::into)).await.expect("send");
    assert_eq!(resp.status(), 201);
    let warnings: Vec<String> = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("unknown field") && w.contains("spec.unknown")),
        "{warnings:?}"
    );
    let stored = api.get("strict").await.expect("get");
    assert!(stored.data["spec"].get("unknown").is_none());

    // Patches with PatchParams::validation_strict.
    let s = api_err(
        api.patch(
            "strict",
            &PatchParams::default().validation_strict(),
            &Patch::Merge(json!({"spec": {"size": 5, "nope": true}})),
        )
        .await,
    );
    assert_eq!(s.code, 400, "{s:?}");
    assert!(s.message.contains("unknown field"), "{s:?}");
    let s = api_err(
        api.patch(
            "strict",
            &PatchParams::apply("test").validation_strict(),
            &Patch::Apply(json!({
                "apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
                "metadata": {"name": "strict"}, "spec": {"nope": true}
            })),
        )
        .await,
    );
    assert!(s.message.contains("unknown field"), "{s:?}");
    assert_eq!(
        api.get("strict").await.expect("get").data["spec"]["size"],
        1,
        "rejected patches change nothing"
    );
}

#[tokio::test]
async fn schema_type_violation_is_422_and_nothing_is_stored() {
    let t = common::start().await;
    install(&t.client, &widgets_crd()).await;
    let api = widgets(&t.client, "v1");
    let s = api_err(
        api.create(
            &PostParams::default(),
            &widget("bad", json!({"size": "big"})),
        )
        .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    assert_eq!(s.reason, "Invalid", "{s:?}");
    assert!(s.message.contains("spec.size"), "{s:?}");
    assert_absent(&api, "bad").await;

    api.create(&PostParams::default(), &widget("good", json!({"size": 1})))
        .await
        .expect("create good");
    let s = api_err(
        api.patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": 7}})),
        )
        .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    assert!(
        api.get("good").await.expect("get").data["spec"]
            .get("color")
            .is_none()
    );
}

#[tokio::test]
async fn status_subresource_writes_only_status() {
    let t = common::start().await;
    install(&t.client, &widgets_crd()).await;
    let api = widgets(&t.client, "v1");
    let mut w = widget("s", json!({"size": 1}));
    w.data["status"] = json!({"ready": true});
    let created = api
        .create(&PostParams::default(), &w)
        .await
        .expect("create");
    assert!(
        created.data.get("status").is_none(),
        "status is ignored on create: {:?}",
        created.data
    );

    let st = api
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true, "observed": 1}, "spec": {"size": 9}})),
        )
        .await
        .expect("patch status");
    assert_eq!(st.data["status"], json!({"ready": true, "observed": 1}));
    assert_eq!(st.data["spec"]["size"], 1, "status writes ignore spec");
    assert_eq!(
        st.metadata.generation,
        Some(1),
        "status writes do not bump generation"
    );

    let main = api
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": false}, "spec": {"size": 2}})),
        )
        .await
        .expect("patch main resource");
    assert_eq!(
        main.data["status"]["ready"], true,
        "main resource writes ignore status"
    );
    assert_eq!(main.data["spec"]["size"], 2);
    assert_eq!(main.metadata.generation, Some(2));

    let got = api.get_status("s").await.expect("get status");
    assert_eq!(got.data["status"], json!({"ready": true, "observed": 1}));
}

#[tokio::test]
async fn cluster_scoped_crd_serves_cluster_objects() {
    let t = common::start().await;
    install(
        &t.client,
        &crd(
            "gadgets",
            "Gadget",
            "Cluster",
            json!([version("v1", true, true)]),
        ),
    )
    .await;
    let res = ar("v1", "Gadget", "gadgets");
    let api: Api<DynamicObject> = Api::all_with(t.client.clone(), &res);
    let mut g = widget("g1", json!({"size": 1}));
    g.types = Some(kube::core::TypeMeta {
        api_version: format!("{GROUP}/v1"),
        kind: "Gadget".into(),
    });
    let created = api
        .create(&PostParams::default(), &g)
        .await
        .expect("create gadget");
    assert_eq!(created.metadata.namespace, None);
    assert_eq!(api.get("g1").await.expect("get").data["spec"]["size"], 1);

    let (_, caps) =
        discovery::pinned_kind(&t.client, &GroupVersionKind::gvk(GROUP, "v1", "Gadget"))
            .await
            .expect("discovery");
    assert_eq!(caps.scope, Scope::Cluster);
    // No namespaced path for a cluster-scoped resource.
    let ns_api: Api<DynamicObject> = Api::namespaced_with(t.client.clone(), "default", &res);
    let s = api_err(ns_api.list(&ListParams::default()).await);
    assert_eq!(s.code, 404, "{s:?}");
    api.delete("g1", &DeleteParams::default())
        .await
        .expect("delete");
    let s = api_err(api.get("g1").await);
    assert_eq!(s.code, 404);
}

#[tokio::test]
async fn two_versions_serve_the_same_objects() {
    let t = common::start().await;
    install(
        &t.client,
        &crd(
            "widgets",
            "Widget",
            "Namespaced",
            json!([version("v1", true, true), version("v2", true, false)]),
        ),
    )
    .await;
    let v1 = widgets(&t.client, "v1");
    let v2 = widgets(&t.client, "v2");
    let created = v1
        .create(&PostParams::default(), &widget("at-v1", json!({"size": 4})))
        .await
        .expect("create at v1");
    let got = v2.get("at-v1").await.expect("read at v2");
    assert_eq!(
        got.types.as_ref().map(|t| t.api_version.as_str()),
        Some("example.com/v2")
    );
    assert_eq!(got.metadata.uid, created.metadata.uid);
    assert_eq!(got.data["spec"]["size"], 4);

    let mut w2 = widget("at-v2", json!({"size": 5}));
    w2.types = Some(kube::core::TypeMeta {
        api_version: format!("{GROUP}/v2"),
        kind: "Widget".into(),
    });
    v2.create(&PostParams::default(), &w2)
        .await
        .expect("create at v2");
    let back = v1.get("at-v2").await.expect("read at v1");
    assert_eq!(
        back.types.as_ref().map(|t| t.api_version.as_str()),
        Some("example.com/v1")
    );
    let listed: Vec<String> = v2
        .list(&ListParams::default())
        .await
        .expect("list v2")
        .items
        .iter()
        .map(|o| {
            format!(
                "{}:{}",
                o.name_any(),
                o.types
                    .as_ref()
                    .map(|t| t.api_version.as_str())
                    .unwrap_or("")
            )
        })
        .collect();
    assert_eq!(listed, ["at-v1:example.com/v2", "at-v2:example.com/v2"]);

    let group = discovery::group(&t.client, GROUP)
        .await
        .expect("group discovery");
    let versions: Vec<&str> = group.versions().collect();
    assert!(
        versions.contains(&"v1") && versions.contains(&"v2"),
        "{versions:?}"
    );
}

#[tokio::test]
async fn printer_columns_appear_in_a_table() {
    let t = common::start().await;
    install(&t.client, &widgets_crd()).await;
    let api = widgets(&t.client, "v1");
    api.create(
        &PostParams::default(),
        &widget("tbl", json!({"size": 7, "color": "green"})),
    )
    .await
    .expect("create");
    let req = http::Request::get(format!("/apis/{GROUP}/v1/namespaces/default/widgets"))
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .expect("request");
    let table: Value = serde_json::from_str(&t.client.request_text(req).await.expect("table"))
        .expect("table is JSON");
    assert_eq!(table["kind"], "Table", "{table}");
    let cols: Vec<&str> = common::table_columns(&table);
    assert_eq!(cols, ["Name", "Size", "Color", "Age"]);
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], "tbl");
    assert_eq!(cells[1], 7);
    assert_eq!(cells[2], "green");
}

#[tokio::test]
async fn deleting_the_crd_deletes_its_objects_and_stops_serving_it() {
    let t = common::start().await;
    install(&t.client, &widgets_crd()).await;
    let api = widgets(&t.client, "v1");
    for i in 0..3 {
        api.create(
            &PostParams::default(),
            &widget(&format!("d{i}"), json!({"size": i})),
        )
        .await
        .expect("create widget");
    }
    let crds: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .expect("delete CRD");
    common::wait_for("CRD and its resource to be gone", TIMEOUT, || {
        let api = api.clone();
        let crds = crds.clone();
        async move {
            let crd_gone = matches!(crds.get("widgets.example.com").await, Err(kube::Error::Api(s)) if s.code == 404);
            let res_gone = matches!(api.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 404);
            (crd_gone && res_gone).then_some(())
        }
    })
    .await;
    let d = Discovery::new(t.client.clone())
        .run()
        .await
        .expect("discovery");
    assert!(!d.has_group(GROUP), "discovery still lists {GROUP}");

    // Re-creating the CRD serves an empty collection: the objects were deleted, not hidden.
    install(&t.client, &widgets_crd()).await;
    let left = api
        .list(&ListParams::default())
        .await
        .expect("list after re-create");
    assert!(
        left.items.is_empty(),
        "objects survived the CRD: {:?}",
        left.items
    );
}

#[tokio::test]
async fn invalid_crds_are_rejected_with_422_and_not_stored() {
    let t = common::start().await;
    let api: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    let two_storage = crd(
        "widgets",
        "Widget",
        "Namespaced",
        json!([version("v1", true, true), version("v2", true, true)]),
    );
    let s = api_err(api.create(&PostParams::default(), &two_storage).await);
    assert_eq!(s.code, 422, "{s:?}");
    assert_eq!(s.reason, "Invalid", "{s:?}");
    assert!(s.message.contains("storage"), "{s:?}");

    let mut misnamed = widgets_crd();
    misnamed.metadata.name = Some("things.example.com".into());
    let s = api_err(api.create(&PostParams::default(), &misnamed).await);
    assert_eq!(s.code, 422, "{s:?}");
    assert!(s.message.contains("metadata.name"), "{s:?}");

    for name in ["widgets.example.com", "things.example.com"] {
        let s = api_err(api.get(name).await);
        assert_eq!(s.code, 404, "{name} must not be stored");
    }
    assert!(
        api.list(&ListParams::default())
            .await
            .expect("list CRDs")
            .items
            .is_empty()
    );
    let s = api_err(widgets(&t.client, "v1").list(&ListParams::default()).await);
    assert_eq!(s.code, 404, "an invalid CRD must not be served: {s:?}");
}

#[tokio::test]
async fn crds_in_protected_groups_need_the_api_approval_annotation_as_on_kube_apiserver() {
    let t = common::start().await;
    let api: Api<CustomResourceDefinition> = Api::all(t.client.clone());
    // A CRD in a protected group (*.k8s.io) carrying the annotation is accepted and served (as
    // Metacontroller's ControllerRevision CRD, which `kubectl meta dev` installs).
    let revisions: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "controllerrevisions.metacontroller.k8s.io",
            "annotations": {"api-approved.kubernetes.io": "unapproved, request not yet submitted"},
        },
        "spec": {
            "group": "metacontroller.k8s.io",
            "scope": "Namespaced",
            "names": {"plural": "controllerrevisions", "singular": "controllerrevision",
                      "kind": "ControllerRevision", "listKind": "ControllerRevisionList"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap();
    let installed = install(&t.client, &revisions).await;

    // Without the annotation (or with one that is neither a URL nor "unapproved..."): 422 with
    // kube-apiserver's message, nothing stored.
    let mut bare = revisions.clone();
    bare.metadata.annotations = None;
    bare.metadata.name = Some("things.metacontroller.k8s.io".into());
    bare.spec.names.plural = "things".into();
    bare.spec.names.singular = Some("thing".into());
    bare.spec.names.kind = "Thing".into();
    bare.spec.names.list_kind = Some("ThingList".into());
    let s = api_err(api.create(&PostParams::default(), &bare).await);
    assert_eq!(s.code, 422, "{s:?}");
    assert_eq!(s.reason, "Invalid", "{s:?}");
    assert_eq!(
        s.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"things.metacontroller.k8s.io\" is invalid: \
         metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must \
         have approval annotation \"api-approved.kubernetes.io\", see \
         https://github.com/kubernetes/enhancements/pull/1111"
    );
    let mut wrong = bare.clone();
    wrong.metadata.annotations = Some(
        [("api-approved.kubernetes.io".to_string(), "yes".to_string())]
            .into_iter()
            .collect(),
    );
    let s = api_err(api.create(&PostParams::default(), &wrong).await);
    assert_eq!(s.code, 422, "{s:?}");
    assert!(
        s.message
            .contains("with either a URL or a reason starting with \"unapproved\""),
        "{s:?}"
    );
    assert_eq!(
        api_err(api.get("things.metacontroller.k8s.io").await).code,
        404
    );
    // An approved URL is accepted.
    let mut approved = wrong.clone();
    approved.metadata.annotations = Some(
        [(
            "api-approved.kubernetes.io".to_string(),
            "https://github.com/kubernetes/enhancements/pull/1111".to_string(),
        )]
        .into_iter()
        .collect(),
    );
    install(&t.client, &approved).await;

    // Updates: removing the annotation is refused; a spec edit that keeps it is not.
    let mut removed = installed.clone();
    removed.metadata.annotations = None;
    let s = api_err(
        api.replace(
            "controllerrevisions.metacontroller.k8s.io",
            &PostParams::default(),
            &removed,
        )
        .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    assert!(s.message.contains("Required value"), "{s:?}");
    let mut edited = installed.clone();
    edited.spec.names.short_names = Some(vec!["crev".into()]);
    api.replace(
        "controllerrevisions.metacontroller.k8s.io",
        &PostParams::default(),
        &edited,
    )
    .await
    .expect("a spec edit that keeps the approval state is accepted");

    // Other groups need nothing.
    install(&t.client, &widgets_crd()).await;
}
