//! Namespace lifecycle: every active namespace has its `default` ServiceAccount (as
//! kube-controller-manager's serviceaccount controller keeps it) and its `kube-root-ca.crt`
//! ConfigMap holding the sandbox's CA (as its root-ca-cert-publisher keeps it: recreated when
//! deleted, its data and description annotation restored when changed); a namespace being
//! deleted has every object in it deleted, then loses its `kubernetes` finalizer and goes away.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::ops::{self, WriteOpts};
use crate::state::State;
use crate::status::ApiResult;

/// Name of the ConfigMap holding the cluster's CA in every namespace.
pub const ROOT_CA: &str = "kube-root-ca.crt";
/// The annotation the root-ca-cert-publisher puts on it.
const DESCRIPTION_KEY: &str = "kubernetes.io/description";
/// Its value (kube-controller-manager's, word for word).
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// React to a change of namespace `name`.
pub fn sync(state: &Arc<State>, name: &str) {
    let Some(ns) = state.store.get("/namespaces", "", name) else {
        return;
    };
    if ns.deleting {
        drain(state, name);
    } else {
        populate(state, name);
    }
}

/// Make sure active namespace `ns` has its `default` ServiceAccount and its `kube-root-ca.crt`
/// ConfigMap (with the current CA). Objects already right are not written.
pub fn populate(state: &Arc<State>, ns: &str) {
    for r in [
        ensure_default_service_account(state, ns),
        ensure_root_ca(state, ns),
    ] {
        if let Err(e) = r {
            tracing::warn!(namespace = ns, error = %e, "could not populate namespace");
        }
    }
}

/// Something happened to `kube-root-ca.crt` or the `default` ServiceAccount in `ns`: put it back.
pub fn owned_object_changed(state: &Arc<State>, ns: &str) {
    if state
        .store
        .get("/namespaces", "", ns)
        .is_some_and(|n| !n.deleting)
    {
        populate(state, ns);
    }
}

/// An object in namespace `ns` was deleted: a terminating namespace may now be empty.
pub fn content_gone(state: &Arc<State>, ns: &str) {
    if state
        .store
        .get("/namespaces", "", ns)
        .is_some_and(|n| n.deleting)
    {
        drain(state, ns);
    }
}

fn controller_opts() -> WriteOpts {
    WriteOpts {
        field_manager: "kube-controller-manager".into(),
        ..Default::default()
    }
}

/// Create `obj` in `ns` unless an object of that name exists. A namespace that is gone or
/// terminating is not an error (as for the real controllers).
fn create_missing(state: &Arc<State>, gr: &str, ns: &str, name: &str, obj: Value) -> ApiResult<()> {
    if state.store.get(gr, ns, name).is_some() {
        return Ok(());
    }
    let def = state.def_for_gr(gr)?;
    match ops::create(state, &def, Some(ns), obj, &controller_opts()) {
        Ok(_) => Ok(()),
        Err(e) if e.code == 409 || e.code == 403 || e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

fn ensure_default_service_account(state: &Arc<State>, ns: &str) -> ApiResult<()> {
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    create_missing(state, "/serviceaccounts", ns, "default", sa)
}

fn ensure_root_ca(state: &Arc<State>, ns: &str) -> ApiResult<()> {
    let ca = state.ca_pem.as_str();
    let Some(current) = state.store.get("/configmaps", ns, ROOT_CA) else {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA, "annotations": {DESCRIPTION_KEY: DESCRIPTION}},
            "data": {"ca.crt": ca}});
        return create_missing(state, "/configmaps", ns, ROOT_CA, cm);
    };
    if current.deleting {
        return Ok(());
    }
    // As the publisher: the data must be exactly the CA, and the description must be there.
    let right = |v: &Value| {
        v["data"] == json!({"ca.crt": ca})
            && v["metadata"]["annotations"][DESCRIPTION_KEY]
                .as_str()
                .is_some_and(|d| !d.is_empty())
    };
    ops::mutate(state, &current.key, |v| {
        if right(v) {
            return false;
        }
        v["data"] = json!({"ca.crt": ca});
        v["metadata"]["annotations"][DESCRIPTION_KEY] = json!(DESCRIPTION);
        true
    })?;
    Ok(())
}

fn drain(state: &Arc<State>, ns: &str) {
    let mut remaining = 0;
    for gr in state.store.resources_with_objects_in(ns) {
        let Ok(def) = state.def_for_gr(&gr) else {
            continue;
        };
        for obj in state.store.in_namespace(&gr, ns) {
            match ops::delete_in_background(state, &def, &obj) {
                Ok(true) => remaining += 1,
                Ok(false) => {}
                Err(e) => {
                    remaining += 1;
                    tracing::warn!(namespace = ns, object = %obj.key.name, error = %e, "namespace cleanup could not delete")
                }
            }
        }
    }
    if remaining > 0 {
        return;
    }
    let Some(obj) = state.store.get("/namespaces", "", ns) else {
        return;
    };
    let r = ops::mutate(state, &obj.key, |v: &mut Value| {
        let Some(fs) = v["spec"]["finalizers"].as_array_mut() else {
            return false;
        };
        let before = fs.len();
        fs.retain(|f| f != "kubernetes");
        fs.len() != before
    });
    if let Err(e) = r {
        tracing::warn!(namespace = ns, error = %e, "could not finalize namespace");
    }
}
