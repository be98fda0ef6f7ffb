//! PVC protection, as kube-controller-manager's pvc-protection controller: a claim being
//! deleted keeps its `kubernetes.io/pvc-protection` finalizer while a pod that is not finished
//! uses it, and loses it (and so goes away) once none does.

use std::sync::Arc;

use crate::admission::PVC_PROTECTION;
use crate::state::State;
use crate::store::Stored;

/// Resource of claims.
pub const GR: &str = "/persistentvolumeclaims";

/// Does a live pod in `ns` mount claim `name`?
fn in_use(state: &State, ns: &str, name: &str) -> bool {
    state.store.in_namespace("/pods", ns).iter().any(|p| {
        let Ok(v) = p.value() else { return false };
        let done = matches!(v["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
        !done
            && v["spec"]["volumes"].as_array().is_some_and(|vs| {
                vs.iter()
                    .any(|vol| vol["persistentVolumeClaim"]["claimName"] == name)
            })
    })
}

/// A claim changed: release it if it is being deleted and unused.
pub fn sync(state: &Arc<State>, claim: &Arc<Stored>) {
    if !claim.deleting || in_use(state, &claim.key.ns, &claim.key.name) {
        return;
    }
    super::gc::drop_finalizer(state, claim, PVC_PROTECTION);
}

/// A pod in `ns` changed or went away: claims being deleted there may now be unused.
pub fn pod_changed(state: &Arc<State>, ns: &str) {
    for claim in state.store.in_namespace(GR, ns) {
        if claim.deleting {
            sync(state, &claim);
        }
    }
}
