//! The `scale` subresource (`autoscaling/v1` Scale) of Deployments, ReplicaSets, StatefulSets and
//! of custom resources whose CRD version declares `subresources.scale`.
//!
//! As kube-apiserver's `ScaleREST` (`pkg/registry/apps/deployment/storage/storage.go`) and
//! apiextensions-apiserver's `ScaleREST` (`pkg/registry/customresource/etcd.go`): a read answers a
//! Scale built from the object (`spec.replicas`, `status.replicas`, `status.selector` as a label
//! selector string), a write validates the Scale (`spec.replicas` not negative), honours its
//! `resourceVersion` precondition, sets the replicas on the object and updates it as a PUT of the
//! object would (so its validation, generation and watch events follow).

use serde_json::{Map, Value, json};

use super::ops::{self, PatchKind, WriteOpts};
use super::resources::{Origin, ResourceDef};
use super::state::State;
use super::status::{ApiError, ApiResult, Target};

/// Where the replicas and the selector live in an object, as JSON paths split in fields.
struct Paths {
    spec: Vec<String>,
    status: Vec<String>,
    selector: Option<Vec<String>>,
    /// The selector path holds a `LabelSelector` (built-ins) rather than a string (CRDs).
    structured_selector: bool,
    /// A CRD's `specReplicasPath` as written (where its errors point); `None` for built-ins.
    crd_spec_path: Option<String>,
}

fn split(path: &str) -> Vec<String> {
    path.trim_start_matches('.')
        .split('.')
        .map(str::to_string)
        .collect()
}

fn paths(def: &ResourceDef) -> Option<Paths> {
    if !def.has_scale() {
        return None;
    }
    match &def.origin {
        Origin::Builtin => Some(Paths {
            spec: split("spec.replicas"),
            status: split("status.replicas"),
            selector: Some(split("spec.selector")),
            structured_selector: true,
            crd_spec_path: None,
        }),
        Origin::Crd { scale, .. } => {
            let scale = scale.as_ref()?;
            let text = |k: &str| {
                scale
                    .get(k)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            };
            Some(Paths {
                spec: split(text("specReplicasPath")?),
                status: split(text("statusReplicasPath")?),
                selector: text("labelSelectorPath").map(split),
                structured_selector: false,
                crd_spec_path: text("specReplicasPath").map(str::to_string),
            })
        }
    }
}

fn at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn set_at(v: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for k in parents {
        if !cur.get(k).is_some_and(Value::is_object) {
            cur[k.as_str()] = Value::Object(Map::new());
        }
        cur = &mut cur[k.as_str()];
    }
    cur[last.as_str()] = value;
}

/// The Scale of an object.
fn to_scale(p: &Paths, obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let mut metadata = Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(k).filter(|v| !v.is_null()) {
            metadata.insert(k.to_string(), v.clone());
        }
    }
    let replicas = at(obj, &p.spec).and_then(Value::as_i64).unwrap_or(0);
    let mut spec = Map::new();
    if replicas != 0 {
        spec.insert("replicas".into(), json!(replicas));
    }
    let mut status = Map::new();
    status.insert(
        "replicas".into(),
        json!(at(obj, &p.status).and_then(Value::as_i64).unwrap_or(0)),
    );
    let selector = p.selector.as_ref().and_then(|sp| at(obj, sp));
    let selector = if p.structured_selector {
        selector.and_then(super::table::selector_string)
    } else {
        selector.and_then(Value::as_str).map(str::to_string)
    };
    if let Some(s) = selector.filter(|s| !s.is_empty()) {
        status.insert("selector".into(), json!(s));
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata,
           "spec": spec, "status": status})
}

fn not_found(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::not_found(Target {
        group: &def.group,
        resource: &def.plural,
        name,
    })
}

fn current(state: &State, def: &ResourceDef, ns: Option<&str>, name: &str) -> ApiResult<Value> {
    let k = ops::key(def, ns, name);
    let s = state
        .store
        .get(&k.gr, &k.ns, name)
        .ok_or_else(|| not_found(def, name))?;
    let v = s.value().map_err(|e| ops::store_err(def, name, e))?;
    Ok(ops::as_served(def, v))
}

/// `GET <resource>/<name>/scale`.
pub(crate) fn get(
    state: &State,
    def: &ResourceDef,
    ns: Option<&str>,
    name: &str,
) -> ApiResult<Value> {
    let p = paths(def).ok_or_else(|| not_found(def, name))?;
    Ok(to_scale(&p, &current(state, def, ns, name)?))
}

/// `ValidateScale`: `Scale.autoscaling "<name>" is invalid: spec.replicas: ...`.
fn validate(name: &str, scale: &Value) -> ApiResult<i64> {
    let invalid = |field: &str, body: String| {
        ApiError::invalid(
            Target {
                group: "autoscaling",
                resource: "Scale",
                name,
            },
            format!("Scale.autoscaling \"{name}\" is invalid: {field}: {body}"),
            vec![(field.to_string(), body)],
        )
    };
    if scale
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k != "Scale")
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({}) does not match the expected kind (Scale)",
            scale["kind"].as_str().unwrap_or_default()
        )));
    }
    let replicas = match scale.get("spec").and_then(|s| s.get("replicas")) {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!(
                "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {} into Go struct field ScaleSpec.spec.replicas of type int32",
                if v.is_string() { "string" } else { "number" }
            ))
        })?,
    };
    if replicas < 0 {
        return Err(invalid(
            "spec.replicas",
            format!("Invalid value: {replicas}: must be greater than or equal to 0"),
        ));
    }
    Ok(replicas)
}

/// `PUT <resource>/<name>/scale`: the new Scale (and warnings).
pub(crate) fn update(
    state: &State,
    def: &ResourceDef,
    ns: Option<&str>,
    name: &str,
    scale: Value,
    opts: &WriteOpts,
) -> ApiResult<(Value, Vec<String>)> {
    let p = paths(def).ok_or_else(|| not_found(def, name))?;
    let replicas = match (&p.crd_spec_path, validate(name, &scale)) {
        // A custom resource is validated as the object (the CRD's `ValidateScaleSpec`).
        (Some(path), Err(_)) if scale["spec"]["replicas"].as_i64().is_some_and(|r| r < 0) => {
            let r = scale["spec"]["replicas"].as_i64().unwrap_or_default();
            let body = format!("Invalid value: {r}: should be a non-negative integer");
            let group = if def.group.is_empty() {
                def.kind.clone()
            } else {
                format!("{}.{}", def.kind, def.group)
            };
            return Err(ApiError::invalid(
                Target {
                    group: &def.group,
                    resource: &def.kind,
                    name,
                },
                format!("{group} \"{name}\" is invalid: {path}: {body}"),
                vec![(path.clone(), body)],
            ));
        }
        (_, r) => r?,
    };
    let mut obj = current(state, def, ns, name)?;
    if let Some(rv) = scale["metadata"]["resourceVersion"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        obj["metadata"]["resourceVersion"] = json!(rv);
    }
    set_at(&mut obj, &p.spec, json!(replicas));
    let w = ops::update(state, def, ns, name, None, obj, opts)?;
    Ok((to_scale(&p, &w.obj), w.warnings))
}

/// `PATCH <resource>/<name>/scale`: the patch applies to the current Scale, then as [`update`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn patch(
    state: &State,
    def: &ResourceDef,
    ns: Option<&str>,
    name: &str,
    kind: PatchKind,
    body: &Value,
    opts: &WriteOpts,
) -> ApiResult<(Value, Vec<String>)> {
    let mut scale = get(state, def, ns, name)?;
    let rv = scale["metadata"]["resourceVersion"].clone();
    match kind {
        PatchKind::Json => super::patch::json_patch(&mut scale, body)
            .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?,
        PatchKind::Strategic => super::patch::strategic_merge_patch(&mut scale, body)
            .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?,
        PatchKind::Merge | PatchKind::Apply { .. } => super::patch::merge_patch(&mut scale, body),
    }
    // A patch without a resourceVersion must not fail on a concurrent write of the object.
    if body["metadata"]["resourceVersion"].is_null() {
        scale["metadata"]["resourceVersion"] = rv;
    }
    update(state, def, ns, name, scale, opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_of_a_deployment_and_of_a_custom_resource() {
        let p = Paths {
            spec: split("spec.replicas"),
            status: split("status.replicas"),
            selector: Some(split("spec.selector")),
            structured_selector: true,
            crd_spec_path: None,
        };
        let d = json!({"metadata": {"name": "web", "namespace": "default", "uid": "u",
                       "resourceVersion": "7", "labels": {"a": "b"}},
                       "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
                       "status": {"replicas": 2}});
        assert_eq!(
            to_scale(&p, &d),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                   "metadata": {"name": "web", "namespace": "default", "uid": "u", "resourceVersion": "7"},
                   "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=web"}})
        );
        let c = Paths {
            spec: split(".spec.size"),
            status: split(".status.size"),
            selector: Some(split(".status.sel")),
            structured_selector: false,
            crd_spec_path: Some(".spec.size".to_string()),
        };
        let mut o = json!({"metadata": {"name": "x"}, "spec": {}, "status": {"sel": "k=v"}});
        assert_eq!(
            to_scale(&c, &o)["status"],
            json!({"replicas": 0, "selector": "k=v"})
        );
        set_at(&mut o, &c.spec, json!(4));
        assert_eq!(o["spec"]["size"], 4);
        assert!(validate("x", &json!({"spec": {"replicas": -1}})).is_err());
    }
}
