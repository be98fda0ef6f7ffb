//! The garbage collector: ownerReferences drive deletion.
//!
//! - background: an object all of whose owners are gone is deleted; references to owners that
//!   are gone are removed while other owners remain;
//! - foreground: an owner with the `foregroundDeletion` finalizer has its dependents deleted and
//!   loses the finalizer once no dependent that blocks owner deletion remains;
//! - orphan: an owner with the `orphan` finalizer has its references removed from every
//!   dependent, then loses the finalizer.
//!
//! Dependents are found through the store's owner-uid index, never by scanning.

use std::sync::Arc;

use serde_json::Value;

use crate::ops::{self, DeleteOpts, FOREGROUND, ORPHAN, Propagation};
use crate::state::State;
use crate::store::Stored;

/// Does the owner with this uid exist where `dependent` can see it?
fn owner_present(state: &State, dependent: &Stored, uid: &str) -> bool {
    match state.store.get_by_uid(uid) {
        Some(o) => o.key.ns.is_empty() || o.key.ns == dependent.key.ns,
        None => false,
    }
}

fn remove_owner_refs(state: &State, dep: &Stored, gone: &[String]) {
    let r = ops::mutate(state, &dep.key, |v: &mut Value| {
        let Some(refs) = v["metadata"]["ownerReferences"].as_array_mut() else {
            return false;
        };
        let before = refs.len();
        refs.retain(|r| {
            !r["uid"]
                .as_str()
                .is_some_and(|u| gone.iter().any(|g| g == u))
        });
        if refs.is_empty()
            && let Some(m) = v["metadata"].as_object_mut()
        {
            m.remove("ownerReferences");
            return true;
        }
        before
            != v["metadata"]["ownerReferences"]
                .as_array()
                .map_or(0, Vec::len)
    });
    if let Err(e) = r {
        tracing::warn!(object = %dep.key.name, error = %e, "garbage collector could not remove owner references");
    }
}

fn delete(state: &State, obj: &Stored, propagation: Propagation) {
    let def = match state.def_for_gr(&obj.key.gr) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(error = %e, "garbage collector: unknown resource");
            return;
        }
    };
    let opts = DeleteOpts {
        propagation: Some(propagation),
        uid: Some(obj.uid.clone()),
        ..Default::default()
    };
    match ops::delete(state, &def, &obj.key, &opts) {
        Ok(_) => {}
        Err(e) if e.code == 404 || e.code == 409 => {}
        Err(e) => {
            tracing::warn!(object = %obj.key.name, error = %e, "garbage collector could not delete")
        }
    }
}

/// Examine one object: dangling owners, and pending foreground/orphan deletion.
pub fn check(state: &Arc<State>, obj: &Stored) {
    if !obj.owners.is_empty() && !obj.deleting {
        let gone: Vec<String> = obj
            .owners
            .iter()
            .filter(|o| !owner_present(state, obj, &o.uid))
            .map(|o| o.uid.clone())
            .collect();
        if gone.len() == obj.owners.len() {
            delete(state, obj, Propagation::Background);
            return;
        } else if !gone.is_empty() {
            remove_owner_refs(state, obj, &gone);
        }
    }
    if obj.deleting {
        if obj.finalizers.iter().any(|f| f == ORPHAN) {
            orphan(state, obj);
        }
        if obj.finalizers.iter().any(|f| f == FOREGROUND) {
            foreground(state, obj);
        }
    }
}

/// Remove finalizer `fin` from `obj` (if it is still the same object).
pub fn drop_finalizer(state: &State, obj: &Stored, fin: &str) {
    let r = ops::mutate(state, &obj.key, |v: &mut Value| {
        if v["metadata"]["uid"].as_str() != Some(obj.uid.as_str()) {
            return false;
        }
        let Some(fs) = v["metadata"]["finalizers"].as_array_mut() else {
            return false;
        };
        let before = fs.len();
        fs.retain(|f| f != fin);
        fs.len() != before
    });
    if let Err(e) = r {
        tracing::warn!(object = %obj.key.name, error = %e, "could not remove finalizer {fin}");
    }
}

fn orphan(state: &State, owner: &Stored) {
    for dep in state.store.dependents(&owner.uid) {
        remove_owner_refs(state, &dep, std::slice::from_ref(&owner.uid));
    }
    drop_finalizer(state, owner, ORPHAN);
}

fn foreground(state: &State, owner: &Stored) {
    let mut blocking = 0;
    for dep in state.store.dependents(&owner.uid) {
        if !dep.deleting {
            delete(state, &dep, Propagation::Foreground);
        }
        let blocks = dep.owners.iter().any(|o| o.uid == owner.uid && o.block);
        if blocks
            && state
                .store
                .get(&dep.key.gr, &dep.key.ns, &dep.key.name)
                .is_some()
        {
            blocking += 1;
        }
    }
    if blocking == 0 {
        drop_finalizer(state, owner, FOREGROUND);
    }
}

/// An object was deleted: its dependents may now be dangling.
pub fn owner_gone(state: &Arc<State>, obj: &Stored) {
    for dep in state.store.dependents(&obj.uid) {
        check(state, &dep);
    }
}

/// A dependent of `owner_uid` was deleted: a foreground deletion may now be able to finish.
pub fn dependent_gone(state: &Arc<State>, owner_uid: &str) {
    if let Some(owner) = state.store.get_by_uid(owner_uid)
        && owner.deleting
        && owner.finalizers.iter().any(|f| f == FOREGROUND)
    {
        foreground(state, &owner);
    }
}
