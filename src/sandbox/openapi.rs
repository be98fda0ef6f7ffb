//! A minimal OpenAPI v3 surface: the index of group/versions and, per group/version, a document
//! that declares every served path with its verbs and the query parameters kubectl probes for
//! (`fieldValidation`, `dryRun`, `fieldManager`), so kubectl hands validation to the server
//! instead of failing on a missing schema. Schemas themselves are not published, so
//! `kubectl explain` is not supported.

use serde_json::{Map, Value, json};

use super::resources::Registry;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3`.
pub fn index(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for d in reg.all() {
        let p = gv_path(&d.group, &d.version);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=0")}),
        );
    }
    json!({"paths": paths})
}

fn params(names: &[&str]) -> Value {
    Value::Array(
        names
            .iter()
            .map(|n| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
            .collect(),
    )
}

/// `GET /openapi/v3/<api/v1|apis/g/v>`, None if not served.
pub fn group_version(reg: &Registry, path: &str) -> Option<Value> {
    let defs: Vec<_> = reg
        .all()
        .filter(|d| gv_path(&d.group, &d.version) == path)
        .collect();
    if defs.is_empty() {
        return None;
    }
    let write = params(&["dryRun", "fieldManager", "fieldValidation", "pretty"]);
    let mut paths = Map::new();
    for d in defs {
        let base = if d.namespaced {
            format!("/{path}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("/{path}/{}", d.plural)
        };
        paths.insert(
            base.clone(),
            json!({"get": {"operationId": format!("list{}", d.kind)},
                   "post": {"operationId": format!("create{}", d.kind), "parameters": write.clone()},
                   "delete": {"operationId": format!("deletecollection{}", d.kind)}}),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"get": {"operationId": format!("read{}", d.kind)},
                   "put": {"operationId": format!("replace{}", d.kind), "parameters": write.clone()},
                   "patch": {"operationId": format!("patch{}", d.kind),
                             "parameters": params(&["dryRun", "fieldManager", "fieldValidation", "force", "pretty"]),
                             "x-kubernetes-action": "patch",
                             "x-kubernetes-group-version-kind": {"group": d.group, "version": d.version, "kind": d.kind}},
                   "delete": {"operationId": format!("delete{}", d.kind)}}),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kubectl-meta sandbox)", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
