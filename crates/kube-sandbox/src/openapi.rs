//! The OpenAPI surface: `/openapi/v2` (JSON with every definition; protobuf as a document
//! without definitions) and `/openapi/v3` (the index of group/versions and, per group/version,
//! a document with every served path, its verbs and the query parameters kubectl probes for —
//! `fieldValidation`, `dryRun`, `fieldManager` — and the schemas of its kinds), so
//! `kubectl explain` works for built-in kinds and custom resources.
//!
//! Built-in definitions are generated from k8s-openapi's sources by `openapi/generate.py` into
//! `openapi/definitions.json` (compiled in, parsed on the first OpenAPI request so the sandbox
//! starts without paying for it). A custom resource's definition is its CRD version's
//! `openAPIV3Schema` with `apiVersion`, `kind` and `metadata` (a reference to `ObjectMeta`)
//! filled in and `x-kubernetes-group-version-kind` set, named `<reversed group>.<version>.<Kind>`
//! as apiextensions-apiserver names it.

use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use super::resources::{Origin, Registry, ResourceDef};

const V2_TITLE: &str = "Kubernetes";
const V2_VERSION: &str = crate::version::GIT_VERSION;
/// The generated built-in definitions (see `openapi/generate.py`).
const DEFINITIONS: &str = include_str!("openapi/definitions.json");

/// The built-in definitions, parsed once.
fn builtins() -> &'static Map<String, Value> {
    static DEFS: OnceLock<Map<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| serde_json::from_str(DEFINITIONS).unwrap_or_default())
}

/// The definition of a served kind: its name and schema (v2 form, `#/definitions/` refs).
fn definition(d: &ResourceDef) -> Option<(String, Value)> {
    match &d.origin {
        Origin::Builtin => builtins()
            .iter()
            .find(|(_, s)| {
                s["x-kubernetes-group-version-kind"]
                    .as_array()
                    .is_some_and(|gvks| {
                        gvks.iter().any(|g| {
                            g["group"] == d.group.as_str()
                                && g["version"] == d.version.as_str()
                                && g["kind"] == d.kind.as_str()
                        })
                    })
            })
            .map(|(n, s)| (n.clone(), s.clone())),
        Origin::Crd { openapi, .. } => {
            let raw = openapi.as_deref()?;
            let mut s = raw.clone();
            let props = s
                .as_object_mut()?
                .entry("properties")
                .or_insert_with(|| json!({}));
            if let Some(props) = props.as_object_mut() {
                let builtin_meta = builtins()
                    .get("io.k8s.api.core.v1.ConfigMap")
                    .map(|c| c["properties"].clone())
                    .unwrap_or_default();
                for k in ["apiVersion", "kind"] {
                    props.insert(k.to_string(), builtin_meta[k].clone());
                }
                props.insert("metadata".to_string(), builtin_meta["metadata"].clone());
            }
            s["x-kubernetes-group-version-kind"] =
                json!([{"group": d.group, "kind": d.kind, "version": d.version}]);
            let mut reversed: Vec<&str> = d.group.split('.').collect();
            reversed.reverse();
            Some((
                format!("{}.{}.{}", reversed.join("."), d.version, d.kind),
                s,
            ))
        }
    }
}

/// Names referenced (`#/definitions/<name>`) anywhere in `v`.
fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str)
                && let Some(n) = r.strip_prefix("#/definitions/")
            {
                out.push(n.to_string());
            }
            m.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// `roots` and every built-in definition they reference, transitively.
fn closure(roots: Vec<(String, Value)>) -> Map<String, Value> {
    let mut out = Map::new();
    let mut todo = roots;
    while let Some((name, schema)) = todo.pop() {
        if out.contains_key(&name) {
            continue;
        }
        let mut names = Vec::new();
        refs(&schema, &mut names);
        out.insert(name, schema);
        for n in names {
            if !out.contains_key(&n)
                && let Some(s) = builtins().get(&n)
            {
                todo.push((n, s.clone()));
            }
        }
    }
    out
}

/// A v2 schema in OpenAPI v3 form: refs under `#/components/schemas/`, a ref with a description
/// beside it wrapped in `allOf` (as kube-apiserver publishes v3).
fn to_v3(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out: Map<String, Value> =
                m.iter().map(|(k, x)| (k.clone(), to_v3(x))).collect();
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                let r = json!(r.replacen("#/definitions/", "#/components/schemas/", 1));
                if m.len() == 1 {
                    out.insert("$ref".to_string(), r);
                } else {
                    out.remove("$ref");
                    out.insert("allOf".to_string(), json!([{"$ref": r}]));
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_v3).collect()),
        other => other.clone(),
    }
}

/// `GET /openapi/v2` as JSON: every built-in definition and those of the served custom resources.
pub fn v2_json(reg: &Registry) -> Value {
    let mut defs = builtins().clone();
    for d in reg.all() {
        if let Some((n, s)) = definition(d).filter(|_| matches!(d.origin, Origin::Crd { .. })) {
            defs.insert(n, s);
        }
    }
    json!({"swagger": "2.0", "info": {"title": V2_TITLE, "version": V2_VERSION},
           "paths": {}, "definitions": defs})
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
        paths.insert(p, json!(""));
    }
    // The hash changes with what the document holds: the kinds and, for CRDs, their schemas.
    let keys: Vec<String> = paths.keys().cloned().collect();
    for p in keys {
        let content: Vec<Value> = reg
            .all()
            .filter(|d| gv_path(&d.group, &d.version) == p)
            .map(|d| match &d.origin {
                Origin::Crd { openapi, .. } => json!([d.kind, openapi.as_deref()]),
                Origin::Builtin => json!([d.kind, V2_VERSION]),
            })
            .collect();
        let hash = kube_apimachinery::hash::hash_value(&Value::Array(content));
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash}")}),
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
    let schemas = closure(defs.iter().filter_map(|d| definition(d)).collect());
    let schemas: Map<String, Value> = schemas.iter().map(|(k, v)| (k.clone(), to_v3(v))).collect();
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
        "components": {"schemas": schemas},
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
        assert!(!builtins().is_empty());
    }
}
