//! CustomResourceDefinitions: serving, status conditions, and cleanup.
//!
//! A CRD that is created or changed is (re)registered in the registry — every served version,
//! with its structural schema and printer columns — and gets `NamesAccepted`/`Established`
//! conditions. A CRD being deleted has all its objects deleted, then loses the
//! `customresourcecleanup` finalizer; once it is gone its resources are no longer served.

use std::sync::Arc;

use serde_json::Value;

use crate::crd;
use crate::ops::{self, CRD_CLEANUP};
use crate::resources::{Origin, ResourceDef};
use crate::state::{State, now_rfc3339};

const GR: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// Bring the served resources and the status of CRD `name` in line with its stored object.
pub fn sync(state: &Arc<State>, name: &str) {
    let Some(stored) = state.store.get(GR, "", name) else {
        state.registry_mut().remove_crd(name);
        return;
    };
    let Ok(crd) = stored.value() else {
        return;
    };
    let info = match crd::parse_crd(&crd) {
        Ok(i) => i,
        Err(errs) => {
            tracing::warn!(crd = name, errors = ?errs, "stored CRD is invalid; not serving it");
            state.registry_mut().remove_crd(name);
            return;
        }
    };
    if stored.deleting {
        cleanup(state, name, &info);
        return;
    }
    let conflict = {
        let reg = state.registry();
        reg.group_plural_taken(&info.group, &info.plural, name)
            .then(|| format!("\"{}\" is already in use", info.plural))
    };
    {
        let mut reg = state.registry_mut();
        reg.remove_crd(name);
        if conflict.is_none() {
            let storage = info
                .versions
                .iter()
                .find(|v| v.storage)
                .map(|v| v.name.clone())
                .unwrap_or_default();
            for v in info.versions.iter().filter(|v| v.served) {
                reg.insert(ResourceDef {
                    group: info.group.clone(),
                    version: v.name.clone(),
                    plural: info.plural.clone(),
                    singular: info.singular.clone(),
                    kind: info.kind.clone(),
                    list_kind: info.list_kind.clone(),
                    namespaced: info.namespaced,
                    short_names: info.short_names.clone(),
                    categories: info.categories.clone(),
                    status_subresource: v.status_subresource,
                    origin: Origin::Crd {
                        crd: name.to_string(),
                        schema: v.schema.clone().map(Arc::new),
                        printer_columns: v.printer_columns.clone(),
                        storage_version: storage.clone(),
                        scale: v.scale_subresource.clone(),
                        openapi: crd["spec"]["versions"]
                            .as_array()
                            .and_then(|vs| vs.iter().find(|x| x["name"] == v.name.as_str()))
                            .map(|x| &x["schema"]["openAPIV3Schema"])
                            .filter(|s| s.is_object())
                            .map(|s| Arc::new(s.clone())),
                    },
                });
            }
        }
    }
    let now = now_rfc3339();
    let r = ops::mutate(state, &stored.key, |v: &mut Value| {
        let mut status = crd::crd_status(v, &now, conflict.as_deref());
        keep_transition_times(&v["status"], &mut status);
        if v["status"] == status {
            return false;
        }
        v["status"] = status;
        true
    });
    if let Err(e) = r {
        tracing::warn!(crd = name, error = %e, "could not update CRD status");
    }
}

/// Conditions whose status did not change keep their lastTransitionTime.
fn keep_transition_times(old: &Value, new: &mut Value) {
    let Some(conds) = new["conditions"].as_array_mut() else {
        return;
    };
    for c in conds {
        let prev = old["conditions"].as_array().and_then(|a| {
            a.iter()
                .find(|o| o["type"] == c["type"] && o["status"] == c["status"])
        });
        if let Some(p) = prev {
            c["lastTransitionTime"] = p["lastTransitionTime"].clone();
        }
    }
}

fn cleanup(state: &Arc<State>, name: &str, info: &crd::CrdInfo) {
    let gr = format!("{}/{}", info.group, info.plural);
    let page = state.store.list(&gr, None, None, None, |_| true);
    let mut remaining = 0;
    if let Ok(def) = state.def_for_gr(&gr) {
        for obj in &page.items {
            match ops::delete_in_background(state, &def, obj) {
                Ok(true) => remaining += 1,
                Ok(false) => {}
                Err(e) => {
                    remaining += 1;
                    tracing::warn!(crd = name, object = %obj.key.name, error = %e, "CRD cleanup could not delete");
                }
            }
        }
    }
    if remaining > 0 {
        return;
    }
    let Some(stored) = state.store.get(GR, "", name) else {
        return;
    };
    let r = ops::mutate(state, &stored.key, |v: &mut Value| {
        let Some(fs) = v["metadata"]["finalizers"].as_array_mut() else {
            return false;
        };
        let before = fs.len();
        fs.retain(|f| f != CRD_CLEANUP);
        fs.len() != before
    });
    match r {
        Ok(_) => {
            if state.store.get(GR, "", name).is_none() {
                state.registry_mut().remove_crd(name);
            }
        }
        Err(e) => tracing::warn!(crd = name, error = %e, "could not finalize CRD"),
    }
}
