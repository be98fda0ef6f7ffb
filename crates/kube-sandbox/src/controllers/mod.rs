//! Controllers that run inside the sandbox, as kube-controller-manager, kube-apiserver's
//! bootstrap controllers and the kubelet would: garbage collection, namespace population
//! (`default` ServiceAccount, `kube-root-ca.crt`) and deletion, the `kubernetes` Service, CRD
//! establishment, PVC protection, simulated workload controllers (ReplicaSet, Deployment,
//! StatefulSet, DaemonSet, Job), a simulated Node with a scheduler, a simulated kubelet,
//! ClusterRole aggregation and the legacy ServiceAccount token Secrets.
//!
//! They react to the store's change feed in one task (in store order) and fall back to a full
//! pass at start-up, after falling behind the feed, and periodically, so a missed event can
//! delay work but never lose it.

pub mod apiserver;
pub mod crd;
pub mod daemonset;
pub mod deployment;
pub mod gc;
pub mod job;
pub mod kubelet;
pub mod namespace;
pub mod node;
pub mod pods;
pub mod pvc;
pub mod replicaset;
pub mod requeue;
pub mod revisions;
pub mod statefulset;
pub mod tokens;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::state::State;
use super::store::{Event, EventKind, Stored};

/// How often every object is re-examined even without events.
const RESYNC: Duration = Duration::from_secs(30);

fn handle(state: &Arc<State>, kubelet: &kubelet::Kubelet, ev: &Event) {
    let obj = &ev.obj;
    match &*obj.key.gr {
        "apiextensions.k8s.io/customresourcedefinitions" => crd::sync(state, &obj.key.name),
        "/namespaces" => namespace::sync(state, &obj.key.name),
        "/configmaps" if obj.key.name == namespace::ROOT_CA => {
            namespace::owned_object_changed(state, &obj.key.ns)
        }
        "/serviceaccounts" if obj.key.name == "default" => {
            namespace::owned_object_changed(state, &obj.key.ns)
        }
        gr if apiserver::is_kept(gr, &obj.key.ns, &obj.key.name) => reconcile_apiserver(state),
        statefulset::GR if ev.kind != EventKind::Deleted => statefulset::sync(state, obj),
        pvc::GR if ev.kind != EventKind::Deleted => pvc::sync(state, obj),
        "/pods" => {
            pvc::pod_changed(state, &obj.key.ns);
            if ev.kind != EventKind::Deleted {
                kubelet.observe(state, obj);
            }
            statefulset::pod_changed(state, obj);
            replicaset::pod_changed(state, obj);
            daemonset::pod_changed(state, obj);
            job::pod_changed(state, obj);
        }
        replicaset::GR => {
            if ev.kind != EventKind::Deleted {
                replicaset::sync(state, obj);
            }
            deployment::rs_changed(state, obj);
        }
        deployment::GR if ev.kind != EventKind::Deleted => deployment::sync(state, obj),
        daemonset::GR if ev.kind != EventKind::Deleted => daemonset::sync(state, obj),
        job::GR if ev.kind != EventKind::Deleted => job::sync(state, obj),
        node::GR => daemonset::node_changed(state),
        crate::rbac::CLUSTER_ROLES => crate::rbac::aggregate::sync_all(state),
        "/secrets" if ev.kind != EventKind::Deleted => {
            tokens::populate_secret(state, &obj.key.ns, &obj.key.name)
        }
        _ => {}
    }
    if &*obj.key.gr == "/serviceaccounts" && ev.kind != EventKind::Deleted {
        // A token Secret created before its ServiceAccount gets its token now.
        for s in state.store.in_namespace("/secrets", &obj.key.ns) {
            tokens::populate_secret(state, &s.key.ns, &s.key.name);
        }
    }
    if ev.kind == EventKind::Deleted {
        gc::owner_gone(state, obj);
        if !obj.key.ns.is_empty() {
            namespace::content_gone(state, &obj.key.ns);
        }
        for o in &obj.owners {
            gc::dependent_gone(state, &o.uid);
        }
    } else {
        gc::check(state, obj);
    }
}

fn reconcile_apiserver(state: &Arc<State>) {
    if let Err(e) = apiserver::reconcile(state) {
        tracing::warn!(error = %e, "could not keep the kubernetes service");
    }
}

fn full_pass(state: &Arc<State>, kubelet: &kubelet::Kubelet) {
    reconcile_apiserver(state);
    crate::rbac::aggregate::sync_all(state);
    for obj in state.store.all() {
        examine(state, kubelet, &obj);
    }
}

fn examine(state: &Arc<State>, kubelet: &kubelet::Kubelet, obj: &Arc<Stored>) {
    match &*obj.key.gr {
        "apiextensions.k8s.io/customresourcedefinitions" => crd::sync(state, &obj.key.name),
        "/namespaces" => namespace::sync(state, &obj.key.name),
        "/pods" => kubelet.observe(state, obj),
        statefulset::GR => statefulset::sync(state, obj),
        replicaset::GR => replicaset::sync(state, obj),
        deployment::GR => deployment::sync(state, obj),
        daemonset::GR => daemonset::sync(state, obj),
        job::GR => job::sync(state, obj),
        pvc::GR => pvc::sync(state, obj),
        "/secrets" => tokens::populate_secret(state, &obj.key.ns, &obj.key.name),
        _ => {}
    }
    gc::check(state, obj);
}

/// Most change events [`bootstrap`] handles itself before the loop takes over (a bound, in
/// case a controller kept writing).
const BOOTSTRAP_EVENTS: usize = 10_000;

/// The controllers after their start-up work, ready to follow the change feed.
pub struct Started {
    state: Arc<State>,
    kubelet: kubelet::Kubelet,
    rx: broadcast::Receiver<Arc<Event>>,
    requeued: Option<tokio::sync::mpsc::UnboundedReceiver<crate::store::ObjKey>>,
}

/// Do the start-up work now, before the server accepts a request: the default Node, a full
/// pass (each namespace's `default` ServiceAccount and `kube-root-ca.crt`, the `kubernetes`
/// Service, whatever a persisted state calls for) and the changes that pass itself made. A
/// client's first request then sees a cluster that is up, and nothing the bootstrap does is
/// written after it (a test comparing resourceVersions would otherwise race it).
pub fn bootstrap(state: Arc<State>) -> Started {
    let kubelet = kubelet::Kubelet::default();
    let mut rx = state.store.subscribe();
    node::ensure_default(&state);
    full_pass(&state, &kubelet);
    for _ in 0..BOOTSTRAP_EVENTS {
        match rx.try_recv() {
            Ok(ev) => handle(&state, &kubelet, &ev),
            Err(TryRecvError::Lagged(_)) => full_pass(&state, &kubelet),
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
        }
    }
    let requeued = state.requeue.take_receiver();
    Started {
        state,
        kubelet,
        rx,
        requeued,
    }
}

/// Run every controller until the sandbox shuts down.
pub async fn run(started: Started) {
    let Started {
        state,
        kubelet,
        mut rx,
        mut requeued,
    } = started;
    let mut tick = tokio::time::interval(RESYNC);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = tick.tick() => full_pass(&state, &kubelet),
            Some(key) = async { match requeued.as_mut() {
                Some(r) => r.recv().await,
                None => std::future::pending().await,
            } } => {
                if let Some(obj) = state.store.get(&key.gr, &key.ns, &key.name) {
                    examine(&state, &kubelet, &obj);
                }
            }
            r = rx.recv() => match r {
                Ok(ev) => {
                    handle(&state, &kubelet, &ev);
                    // Keep the authorizer's change feed short while no request reads it.
                    state.rbac.drain();
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "sandbox controllers fell behind; re-examining every object");
                    full_pass(&state, &kubelet);
                }
                Err(RecvError::Closed) => return,
            }
        }
    }
}
