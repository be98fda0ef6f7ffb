//! The API server side of `kubectl meta test`: the CRDs of the `-f` files installed in the
//! in-process sandbox (so declared custom types resolve as the engine resolves them), and
//! `--validate`: each desired object of an answer, and its status, checked by a server-side dry
//! run (dryRun=All: nothing is stored) against the schemas the server applies.

use std::time::{Duration, Instant};

use anyhow::Result;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::Cluster;
use crate::commands::exit::{Class, Classify};
use crate::engine::plan::child::ChildType;
use crate::k8s::discovery::{Discovery, ResourceInfo};
use crate::k8s::{FIELD_MANAGER, kube_error_message, manifests, object};
use crate::spec;

/// How long a CRD just created may take to be served.
const CRD_WAIT: Duration = Duration::from_secs(30);

/// In the sandbox: create the CustomResourceDefinitions and Namespaces of the `-f` files and
/// wait until each custom kind is served.
pub(super) async fn install_types(cluster: &Cluster, loaded: &spec::Loaded) -> Result<()> {
    if !cluster.is_sandbox() {
        return Ok(());
    }
    let docs: Vec<(String, Value)> = loaded
        .others
        .iter()
        .filter(|d| {
            matches!(
                object::kind(&d.value),
                Some("CustomResourceDefinition" | "Namespace")
            )
        })
        .map(|d| (d.source.to_string(), d.value.clone()))
        .collect();
    if docs.is_empty() {
        return Ok(());
    }
    let conn = &cluster.conn;
    let discovery = Discovery::new(conn.client.clone());
    manifests::apply_documents(
        &conn.client,
        &discovery,
        &conn.context.namespace,
        &docs,
        CRD_WAIT,
        &manifests::ApplyMode {
            overwrite: false,
            field_manager: crate::k8s::FIELD_MANAGER,
            dry_run: false,
        },
    )
    .await
    .class(Class::Usage)?;
    for (source, crd) in docs
        .iter()
        .filter(|(_, d)| object::kind(d) == Some("CustomResourceDefinition"))
    {
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = crd
            .pointer("/spec/names/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        for v in crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
        {
            let version = v.get("name").and_then(Value::as_str).unwrap_or("");
            let api_version = format!("{group}/{version}");
            let deadline = Instant::now() + CRD_WAIT;
            loop {
                discovery.invalidate();
                match discovery.resolve_kind(&api_version, kind).await {
                    Ok(_) => break,
                    Err(e) if Instant::now() >= deadline => {
                        return Err(anyhow::anyhow!("{source}: {kind} is not served: {e}"))
                            .class(Class::Usage);
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }
    }
    Ok(())
}

/// `--validate`: the problems the API server finds with the answer's desired objects (the
/// `children`, `attachments` or `outputs` of `view`, an [`crate::engine::plan::answer`] view)
/// and its `status` (on the request's parent); empty when it accepts them all.
pub(super) async fn check(
    cluster: &Cluster,
    types: &[(ChildType, ResourceInfo)],
    request: &Value,
    view: &Value,
) -> Vec<String> {
    let client = &cluster.conn.client;
    let mut problems = Vec::new();
    for field in ["children", "attachments", "outputs"] {
        for (key, obj) in view
            .get(field)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let av = object::api_version(obj).unwrap_or_default();
            let kind = object::kind(obj).unwrap_or_default();
            let Some((_, info)) = types
                .iter()
                .find(|(t, _)| t.api_version == av && t.kind == kind)
            else {
                continue;
            };
            let ns = object::namespace(obj).filter(|_| info.namespaced);
            if let Some(ns) = ns
                && cluster.is_sandbox()
            {
                ensure_namespace(client, ns).await;
            }
            let api: Api<DynamicObject> = match ns {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &info.api_resource),
                None => Api::all_with(client.clone(), &info.api_resource),
            };
            let Ok(dynamic) = serde_json::from_value::<DynamicObject>(obj.clone()) else {
                problems.push(format!("{field}[{key}]: not a Kubernetes object"));
                continue;
            };
            let params = PostParams {
                dry_run: true,
                field_manager: Some(FIELD_MANAGER.into()),
            };
            match api.create(&params, &dynamic).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => problems.push(format!("{field}[{key}]: {}", kube_error_message(&e))),
            }
        }
    }
    if let Some(status) = view.get("status") {
        let parent = if request.get("object").is_some() {
            &request["object"]
        } else {
            &request["parent"]
        };
        if let Some(p) = check_status(cluster, parent, status).await {
            problems.push(format!("status: {p}"));
        }
    }
    problems
}

/// The problem the API server finds with `status` on `parent` (created in the sandbox first;
/// on a real cluster only an existing parent is checked), if any.
async fn check_status(cluster: &Cluster, parent: &Value, status: &Value) -> Option<String> {
    let client = &cluster.conn.client;
    let av = object::api_version(parent)?;
    let kind = object::kind(parent)?;
    let name = object::name(parent)?;
    let discovery = Discovery::new(client.clone());
    let info = discovery.resolve_kind(av, kind).await.ok()?;
    let ns = object::namespace(parent).filter(|_| info.namespaced);
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &info.api_resource),
        None => Api::all_with(client.clone(), &info.api_resource),
    };
    if cluster.is_sandbox() {
        if let Some(ns) = ns {
            ensure_namespace(client, ns).await;
        }
        let mut fresh = object::strip_volatile(parent, true);
        if let Some(m) = fresh.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "uid",
                "creationTimestamp",
                "generation",
                "ownerReferences",
                "finalizers",
                "deletionTimestamp",
            ] {
                m.shift_remove(k);
            }
        }
        if let Ok(d) = serde_json::from_value::<DynamicObject>(fresh) {
            // Another case may have created it already: that is fine.
            let _ = api.create(&PostParams::default(), &d).await;
        }
    }
    let params = PatchParams {
        dry_run: true,
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    let patch = Patch::Merge(json!({ "status": status }));
    let result = if info.has_status {
        api.patch_status(name, &params, &patch).await
    } else {
        api.patch(name, &params, &patch).await
    };
    match result {
        Ok(_) => None,
        Err(kube::Error::Api(e)) if e.code == 404 && !cluster.is_sandbox() => None,
        Err(e) => Some(kube_error_message(&e)),
    }
}

/// Create namespace `ns` in the sandbox when it does not exist (children are checked in it).
async fn ensure_namespace(client: &kube::Client, ns: &str) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let Ok(obj) = serde_json::from_value(json!({"metadata": {"name": ns}})) else {
        return;
    };
    let _ = api.create(&PostParams::default(), &obj).await;
}
