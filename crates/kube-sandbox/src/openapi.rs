//! A minimal OpenAPI v3 surface: the index of group/versions and, per group/version, a document
//! that declares every served path with its verbs and the query parameters kubectl probes for
//! (`fieldValidation`, `dryRun`, `fieldManager`), so kubectl hands validation to the server
//! instead of failing on a missing schema. Schemas themselves are not published, so
//! `kubectl explain` is not supported.

use serde_json::{Map, Value, json};

use super::resources::Registry;

const V2_TITLE: &str = "Kubernetes";
const V2_VERSION: &str = super::server::KUBE_GIT_VERSION;

/// `GET /openapi/v2` as JSON: a document without definitions.
pub fn v2_json() -> Value {
    json!({"swagger": "2.0", "info": {"title": V2_TITLE, "version": V2_VERSION},
           "paths": {}, "definitions": {}})
}

/// `GET /openapi/v2` as protobuf (`openapi_v2.Document` with `swagger` and `info` only).
pub fn v2_protobuf() -> Vec<u8> {
    fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
        out.push(tag);
        out.push(u8::try_from(bytes.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(bytes);
    }
    let mut info = Vec::new();
    field(&mut info, 0x0a, V2_TITLE.as_bytes());
    field(&mut info, 0x12, V2_VERSION.as_bytes());
    let mut doc = Vec::new();
    field(&mut doc, 0x0a, b"2.0");
    field(&mut doc, 0x12, &info);
    doc
}

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
        "info": {"title": "Kubernetes (kubectl-meta sandbox)", "version": V2_VERSION},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_protobuf_is_a_document_with_swagger_and_info() {
        let b = v2_protobuf();
        assert_eq!(&b[..5], b"\x0a\x032.0");
        assert_eq!(b[5], 0x12);
        assert_eq!(usize::from(b[6]), b.len() - 7);
        assert_eq!(&b[7..9], b"\x0a\x0a");
        assert_eq!(v2_json()["swagger"], "2.0");
    }
}
