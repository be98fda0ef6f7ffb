//! The `kubernetes` Service in `default`, with its Endpoints and EndpointSlice pointing at the
//! sandbox, as kube-apiserver's bootstrap controllers keep them (the kubernetesservice
//! controller and the default "lease" endpoint reconciler): created at start-up, recreated when
//! deleted, and their ports and addresses put back when they drift (a sandbox with a state
//! directory may listen on another port after a restart).

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::keys::{ENDPOINTS, SERVICES, SLICES};
use crate::ops::{self, WriteOpts};
use crate::state::State;
use crate::status::ApiResult;

/// Name of the Service (and of its Endpoints and EndpointSlice).
pub const NAME: &str = "kubernetes";
/// Its namespace.
pub const NAMESPACE: &str = "default";
/// Its cluster IP: the first address of the service range (`10.96.0.0/12`), as kube-apiserver
/// gives it.
pub const CLUSTER_IP: &str = "10.96.0.1";

/// The address clients reach the sandbox at (an unspecified listen address means loopback).
fn advertised(state: &State) -> IpAddr {
    let ip = state.addr.ip();
    match ip {
        IpAddr::V4(v) if v.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
        IpAddr::V6(v) if v.is_unspecified() => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    }
}

fn opts() -> WriteOpts {
    WriteOpts {
        field_manager: "kube-apiserver".into(),
        ..Default::default()
    }
}

/// Is this object one of the three kept here?
pub fn is_kept(gr: &str, ns: &str, name: &str) -> bool {
    ns == NAMESPACE && name == NAME && matches!(gr, SERVICES | ENDPOINTS | SLICES)
}

/// Make the Service, its Endpoints and its EndpointSlice exist and point at the sandbox.
pub fn reconcile(state: &Arc<State>) -> ApiResult<()> {
    if state
        .store
        .get("/namespaces", "", NAMESPACE)
        .is_none_or(|n| n.deleting)
    {
        return Ok(());
    }
    let port = state.addr.port();
    let ip = advertised(state);
    let svc_ports = json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]);
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": NAME, "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": CLUSTER_IP, "sessionAffinity": "None",
            "ports": svc_ports}});
    ensure(state, SERVICES, service, |v| {
        if v["spec"]["ports"] == svc_ports && v["spec"]["type"] == "ClusterIP" {
            return false;
        }
        v["spec"]["ports"] = svc_ports.clone();
        v["spec"]["type"] = json!("ClusterIP");
        true
    })?;

    let ep_labels = json!({"endpointslice.kubernetes.io/skip-mirror": "true"});
    let subsets = json!([{"addresses": [{"ip": ip.to_string()}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]);
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": NAME, "labels": ep_labels}, "subsets": subsets});
    ensure(state, ENDPOINTS, endpoints, |v| {
        if v["subsets"] == subsets && v["metadata"]["labels"] == ep_labels {
            return false;
        }
        v["subsets"] = subsets.clone();
        v["metadata"]["labels"] = ep_labels.clone();
        true
    })?;

    let slice_labels = json!({"kubernetes.io/service-name": NAME});
    let family = if ip.is_ipv4() { "IPv4" } else { "IPv6" };
    let eps = json!([{"addresses": [ip.to_string()], "conditions": {"ready": true}}]);
    let slice_ports = json!([{"name": "https", "port": port, "protocol": "TCP"}]);
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": NAME, "labels": slice_labels}, "addressType": family,
        "endpoints": eps, "ports": slice_ports});
    ensure(state, SLICES, slice, |v| {
        if v["endpoints"] == eps
            && v["ports"] == slice_ports
            && v["metadata"]["labels"] == slice_labels
        {
            return false;
        }
        v["endpoints"] = eps.clone();
        v["ports"] = slice_ports.clone();
        v["metadata"]["labels"] = slice_labels.clone();
        true
    })
}

/// Create `obj` if missing, else bring it back with `fix` (false: already right).
fn ensure(
    state: &Arc<State>,
    gr: &str,
    obj: Value,
    fix: impl FnMut(&mut Value) -> bool,
) -> ApiResult<()> {
    match state.store.get(gr, NAMESPACE, NAME) {
        None => {
            let def = state.def_for_gr(gr)?;
            match ops::create(state, &def, Some(NAMESPACE), obj, &opts()) {
                Err(e) if e.code != 409 && e.code != 403 => Err(e),
                _ => Ok(()),
            }
        }
        Some(cur) if cur.deleting => Ok(()),
        Some(cur) => ops::mutate(state, &cur.key, fix).map(|_| ()),
    }
}
