//! Namespace lifecycle: a new namespace gets its `default` ServiceAccount; a namespace being
//! deleted has every object in it deleted, then loses its `kubernetes` finalizer and goes away.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::sandbox::ops::{self, DeleteOpts, Propagation, WriteOpts};
use crate::sandbox::state::State;

/// React to a change of namespace `name`.
pub fn sync(state: &Arc<State>, name: &str, added: bool) {
    let Some(ns) = state.store.get("/namespaces", "", name) else {
        return;
    };
    if ns.deleting {
        drain(state, name);
    } else if added {
        ensure_default_service_account(state, name);
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

fn ensure_default_service_account(state: &Arc<State>, ns: &str) {
    if state.store.get("/serviceaccounts", ns, "default").is_some() {
        return;
    }
    let Ok(def) = state.def_for_gr("/serviceaccounts") else {
        return;
    };
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    let opts = WriteOpts {
        field_manager: "kube-controller-manager".into(),
        ..Default::default()
    };
    match ops::create(state, &def, Some(ns), sa, &opts) {
        Ok(_) => {}
        Err(e) if e.code == 409 || e.code == 403 || e.code == 404 => {}
        Err(e) => {
            tracing::warn!(namespace = ns, error = %e, "could not create default service account")
        }
    }
}

fn drain(state: &Arc<State>, ns: &str) {
    let mut remaining = 0;
    for gr in state.store.resources_with_objects_in(ns) {
        let Ok(def) = state.def_for_gr(&gr) else {
            continue;
        };
        for obj in state.store.in_namespace(&gr, ns) {
            remaining += 1;
            if obj.deleting {
                continue;
            }
            let opts = DeleteOpts {
                propagation: Some(Propagation::Background),
                uid: Some(obj.uid.clone()),
                ..Default::default()
            };
            match ops::delete(state, &def, &obj.key, &opts) {
                Ok(ops::Deleted::Gone(_)) => remaining -= 1,
                Ok(ops::Deleted::Pending(_)) => {}
                Err(e) if e.code == 404 => remaining -= 1,
                Err(e) => {
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
