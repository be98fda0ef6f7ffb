//! Testing a kube-runtime `Controller` against an in-process sandbox.
//!
//! The controller reconciles `Widget`s (a CRD with a status subresource): each Widget owns a
//! ConfigMap `<widget>-config` holding its `spec.size`, and its status says which ConfigMap and
//! which generation it has seen. The scenario checks what a controller author needs a real API
//! server for:
//! - ownership: the ConfigMap carries a controller ownerReference to the Widget;
//! - status: written through the `/status` subresource, `observedGeneration` caught up;
//! - a watch-driven requeue: someone edits the owned ConfigMap, the `owns()` watch requeues the
//!   Widget and the reconciler puts the data back;
//! - garbage collection: deleting the Widget deletes the ConfigMap (the sandbox runs the GC).
//!
//! `cargo run -p kube-sandbox --example controller` prints each step; `cargo test -p
//! kube-sandbox --example controller` (and so `cargo test --workspace`) runs the same scenario
//! as a test.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use kube_sandbox::Sandbox;
use serde_json::{Value, json};

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 0}
          status:
            type: object
            properties:
              configMap: {type: string}
              observedGeneration: {type: integer}
"#;

/// The field manager of the controller's writes.
const MANAGER: &str = "widget-controller";

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error("widget has no namespace")]
    NoNamespace,
}

/// What the reconciler needs.
struct Ctx {
    client: Client,
    widgets: ApiResource,
}

fn widget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

/// Make the Widget's ConfigMap match its spec, then report in its status.
async fn reconcile(widget: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = widget.namespace().ok_or(Error::NoNamespace)?;
    let name = widget.name_any();
    let owner = widget
        .controller_owner_ref(&ctx.widgets)
        .ok_or(Error::NoNamespace)?;
    let size = widget.data["spec"]["size"].as_i64().unwrap_or_default();
    let cm_name = format!("{name}-config");
    let cm = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": cm_name, "ownerReferences": [owner]},
        "data": {"size": size.to_string()},
    });
    let params = PatchParams::apply(MANAGER).force();
    Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
        .patch(&cm_name, &params, &Patch::Apply(&cm))
        .await?;
    let status = json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "status": {"configMap": cm_name, "observedGeneration": widget.metadata.generation},
    });
    Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &ns, &ctx.widgets)
        .patch_status(&name, &params, &Patch::Apply(&status))
        .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

fn error_policy(_: Arc<DynamicObject>, _: &Error, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

/// Run the controller until the returned task is aborted.
fn spawn_controller(client: Client) -> tokio::task::JoinHandle<()> {
    let widgets = widget_resource();
    let api = Api::<DynamicObject>::all_with(client.clone(), &widgets);
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        widgets: widgets.clone(),
    });
    tokio::spawn(
        Controller::new_with(api, watcher::Config::default(), widgets)
            .owns(Api::<ConfigMap>::all(client), watcher::Config::default())
            .run(reconcile, error_policy, ctx)
            .for_each(|_| futures::future::ready(())),
    )
}

/// Poll `f` until it returns `Some`, or fail after 30 s naming `what`.
async fn wait_for<T, F, Fut>(what: &str, mut f: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The whole scenario; each step prints what it checked.
async fn scenario() -> Result<(), Box<dyn std::error::Error>> {
    let sandbox = Sandbox::builder()
        .yaml(CRD)
        .namespace("demo")
        .start()
        .await?;
    let client = sandbox.client().await?;
    let controller = spawn_controller(client.clone());
    let widgets = Api::<DynamicObject>::namespaced_with(client.clone(), "demo", &widget_resource());
    let cms = Api::<ConfigMap>::namespaced(client.clone(), "demo");

    let mut w = DynamicObject::new("w1", &widget_resource()).within("demo");
    w.data = json!({"spec": {"size": 2}});
    let w = widgets.create(&PostParams::default(), &w).await?;
    let uid = w.uid().unwrap_or_default();

    // Ownership: the ConfigMap exists and its controller is the Widget.
    let cm = wait_for("the widget's ConfigMap", || async {
        cms.get_opt("w1-config").await.ok().flatten()
    })
    .await?;
    let owner = cm
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .ok_or("the ConfigMap has no controller reference")?;
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Widget", uid.as_str())
    );
    println!("ownership: w1-config is controlled by Widget w1 ({uid})");

    // Status through the subresource.
    let seen = wait_for("status.observedGeneration", || async {
        let w = widgets.get("w1").await.ok()?;
        let observed = w.data["status"]["observedGeneration"].as_i64()?;
        (Some(observed) == w.metadata.generation).then_some(w.data["status"].clone())
    })
    .await?;
    assert_eq!(seen["configMap"], "w1-config");
    println!("status: {seen}");

    // A spec change is followed.
    widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 5}})),
        )
        .await?;
    wait_for("the ConfigMap to follow spec.size", || async {
        let cm = cms.get("w1-config").await.ok()?;
        (cm.data?.get("size")? == "5").then_some(())
    })
    .await?;
    println!("spec change: size 5 reached the ConfigMap");

    // Watch-driven requeue: an edit of the owned ConfigMap is reverted.
    cms.patch(
        "w1-config",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"size": "tampered"}})),
    )
    .await?;
    wait_for("the reconciler to revert the edit", || async {
        let cm = cms.get("w1-config").await.ok()?;
        (cm.data?.get("size")? == "5").then_some(())
    })
    .await?;
    println!("requeue: an edit of the owned ConfigMap was reverted");

    // Garbage collection: deleting the Widget deletes its ConfigMap.
    widgets.delete("w1", &DeleteParams::background()).await?;
    wait_for("the garbage collector to delete the ConfigMap", || async {
        matches!(cms.get_opt("w1-config").await, Ok(None)).then_some(())
    })
    .await?;
    println!("garbage collection: w1-config is gone with w1");

    controller.abort();
    let value: Value = serde_json::to_value(sandbox.addr().to_string())?;
    println!("done (sandbox at {value})");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    scenario().await
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_kube_runtime_controller_owns_reports_requeues_and_is_garbage_collected() {
        if let Err(e) = super::scenario().await {
            panic!("{e}");
        }
    }
}
