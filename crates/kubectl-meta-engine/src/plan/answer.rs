//! What a hook's answer means to the engine, for comparing two answers to the same request
//! (`kubectl meta test`, `kubectl meta dryrun --against`): the answer decoded as the engine decodes it ([`hookapi`]), desired
//! objects completed by [`writes::normalize_desired`] (namespace defaulting, generated selector
//! labels) and rewritten as the API server stores them ([`server_view`]: `null` is absent,
//! `stringData` folded, quantities in their canonical spelling, empty maps and lists not
//! stored), keyed by `Kind/name` so their order does not matter.
//!
//! [`answer_view`] gives that meaning as one JSON value; [`differences`] compares two of them
//! by field path (`children[Pod/web-0].spec.containers[name=web].image`), leaving out the
//! paths a case ignores ([`ignored`]).

use serde_json::{Map, Value, json};

use kube_apimachinery::selector::LabelSelector;

use crate::plan::apply::{FieldChange, value_changes};
use crate::plan::child::ChildType;
use crate::plan::hookapi::{self, Version};
use crate::plan::planner;
use crate::plan::server_view::{Seg, is_quantity, server_view};
use crate::plan::writes;
use crate::spec::ControllerDef;

/// The controller side of an answer: what the engine knows when it reads one.
#[derive(Debug, Clone, Copy)]
pub struct AnswerContext<'a> {
    /// `CompositeController`, `DecoratorController` or `MapController`.
    pub controller_kind: &'a str,
    /// `sync`, `finalize`, `customize`, `map` or `tombstone`.
    pub hook: &'a str,
    /// The hook's version (v1 lenient, v2 strict decoding).
    pub version: Version,
    /// The declared child, attachment or output types.
    pub types: &'a [ChildType],
    /// CompositeController `spec.generateSelector`.
    pub generate_selector: bool,
}

impl<'a> AnswerContext<'a> {
    /// The context of the hook `hook` (of version `version`) of the controller `def`, whose
    /// declared types are `types`.
    pub fn of(
        def: &ControllerDef,
        hook: &'a str,
        version: Version,
        types: &'a [ChildType],
    ) -> Self {
        AnswerContext {
            controller_kind: def.kind(),
            hook,
            version,
            types,
            generate_selector: matches!(def, ControllerDef::Composite(c) if c.spec.generate_selector == Some(true)),
        }
    }
}

/// The answer as the engine would act on it (see the module docs); `Err` says why the engine
/// would reject it.
pub fn answer_view(
    cx: &AnswerContext<'_>,
    request: &Value,
    answer: &Value,
) -> Result<Value, String> {
    let hook = cx.hook;
    let mut out = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v.filter(|v| !is_absent(v)) {
            out.insert(k.to_string(), v);
        }
    };
    match (cx.controller_kind, hook) {
        (_, "customize") => {
            hookapi::decode_customize(cx.version, answer).map_err(|e| e.to_string())?;
            put(
                "relatedResources",
                answer.get("relatedResources").map(stored),
            );
        }
        ("DecoratorController", _) => {
            let r =
                hookapi::decode_decorator(hook, cx.version, answer).map_err(|e| e.to_string())?;
            let target = &request["object"];
            let desired = writes::normalize_desired(
                target,
                cx.types,
                &LabelSelector::default(),
                false,
                r.attachments,
            )
            .map_err(|e| format!("{hook} hook: {e}"))?;
            put(
                "attachments",
                Some(keyed(desired.into_iter().map(|(_, v)| v))),
            );
            put("labels", Some(json!(r.labels)));
            put("annotations", Some(json!(r.annotations)));
            put("status", r.status.as_ref().map(stored));
            put(
                "resyncAfterSeconds",
                r.resync_after_seconds.map(|s| json!(s)),
            );
            put("finalized", r.finalized.then_some(Value::Bool(true)));
        }
        ("MapController", _) => {
            let r = hookapi::decode_map(hook, cx.version, answer).map_err(|e| e.to_string())?;
            let outputs = if hook == "tombstone" {
                r.outputs
            } else {
                writes::normalize_desired(
                    &request["parent"],
                    cx.types,
                    &LabelSelector::default(),
                    false,
                    r.outputs,
                )
                .map_err(|e| format!("{hook} hook: {e}"))?
                .into_iter()
                .map(|(_, v)| v)
                .collect()
            };
            put("outputs", Some(keyed(outputs.into_iter())));
            put(
                "resyncAfterSeconds",
                r.resync_after_seconds.map(|s| json!(s)),
            );
        }
        _ => {
            let r = hookapi::decode_sync(hook, cx.version, answer).map_err(|e| e.to_string())?;
            let parent = &request["parent"];
            let selector = planner::composite_selector(parent, cx.generate_selector)
                .map_err(|e| format!("the request's parent: {e}"))?;
            let desired = writes::normalize_desired(
                parent,
                cx.types,
                &selector,
                cx.generate_selector,
                r.children,
            )
            .map_err(|e| format!("{hook} hook: {e}"))?;
            put("children", Some(keyed(desired.into_iter().map(|(_, v)| v))));
            put("status", r.status.as_ref().map(stored));
            put(
                "resyncAfterSeconds",
                r.resync_after_seconds.map(|s| json!(s)),
            );
            put("finalized", r.finalized.then_some(Value::Bool(true)));
        }
    }
    Ok(Value::Object(out))
}

/// The differences from `expected` to `actual` (two [`answer_view`]s), by field path, without
/// those matched by an `ignore` pattern.
pub fn differences(expected: &Value, actual: &Value, ignore: &[String]) -> Vec<FieldChange> {
    value_changes(expected, actual)
        .into_iter()
        .map(|mut c| {
            c.path = plain_object_keys(&c.path);
            c
        })
        .filter(|c| !ignore.iter().any(|p| ignored(p, &c.path)))
        .collect()
}

/// Whether the change at `path` is left out by the pattern `pattern`: the same path, a path
/// inside it (`status` covers `status.ready`), with `*` standing for any one step
/// (`children[*].metadata.annotations`, `status.*.time`).
pub fn ignored(pattern: &str, path: &str) -> bool {
    let (p, q) = (steps(pattern), steps(path));
    p.len() <= q.len() && p.iter().zip(&q).all(|(a, b)| a == "*" || a == b)
}

/// A field path split into steps: `a.b[x].c` -> `a`, `b`, `x`, `c` (brackets kept whole).
fn steps(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let mut quoted = false;
    for c in path.chars() {
        match c {
            '"' if depth > 0 => {
                quoted = !quoted;
                cur.push(c);
            }
            '[' if !quoted => {
                if depth == 0 && !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                depth += 1;
                if depth > 1 {
                    cur.push(c);
                }
            }
            ']' if !quoted && depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    out.push(std::mem::take(&mut cur));
                } else {
                    cur.push(c);
                }
            }
            '.' if depth == 0 => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `children["Pod/web-0"]` -> `children[Pod/web-0]`: the object keys this module makes are
/// written unquoted, as people write them.
fn plain_object_keys(path: &str) -> String {
    let mut out = path.to_string();
    for field in ["children", "attachments", "outputs"] {
        let prefix = format!("{field}[\"");
        if let Some(rest) = out.strip_prefix(&prefix)
            && let Some(end) = rest.find("\"]")
        {
            out = format!("{field}[{}]{}", &rest[..end], &rest[end + 2..]);
        }
    }
    out
}

/// Desired objects keyed by `Kind/name` (`Kind.apiVersion/name` when two types share a kind;
/// `Kind/namespace/name` for another namespace), each as the server would store it.
fn keyed(objects: impl Iterator<Item = Value>) -> Value {
    let objects: Vec<Value> = objects.collect();
    let s = |o: &Value, p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut map = Map::new();
    for o in &objects {
        let kind = s(o, "/kind");
        let shared_kind = objects
            .iter()
            .any(|x| s(x, "/kind") == kind && s(x, "/apiVersion") != s(o, "/apiVersion"));
        let mut key = if shared_kind {
            format!("{kind}.{}", s(o, "/apiVersion"))
        } else {
            kind
        };
        key.push('/');
        let ns = s(o, "/metadata/namespace");
        if !ns.is_empty() && objects.iter().any(|x| s(x, "/metadata/namespace") != ns) {
            key.push_str(&ns);
            key.push('/');
        }
        key.push_str(&s(o, "/metadata/name"));
        map.insert(key, stored_object(o));
    }
    Value::Object(map)
}

/// A desired object as the API server stores it: [`server_view`], quantities canonical,
/// empty maps and lists dropped.
fn stored_object(o: &Value) -> Value {
    let mut v = server_view(o, None);
    let api_version = o.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
    canonical_quantities(api_version, kind, &mut Vec::new(), &mut v);
    drop_empty(&mut v);
    v
}

/// A value (status, rules) without `null` members and empty maps and lists.
fn stored(v: &Value) -> Value {
    let mut v = server_view(v, None);
    drop_empty(&mut v);
    v
}

/// True for what the engine treats as "nothing": null, `{}`, `[]`.
fn is_absent(v: &Value) -> bool {
    v.is_null() || crate::plan::server_view::is_empty_collection(v)
}

fn drop_empty(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.values_mut().for_each(drop_empty);
            m.retain(|_, c| !is_absent(c));
        }
        Value::Array(a) => a.iter_mut().for_each(drop_empty),
        _ => {}
    }
}

/// Rewrite every quantity field ([`is_quantity`]) in its canonical spelling (`0.5` -> `500m`).
fn canonical_quantities(
    api_version: &str,
    kind: &str,
    path: &mut Vec<Option<String>>,
    v: &mut Value,
) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                path.push(Some(k.clone()));
                canonical_quantities(api_version, kind, path, child);
                path.pop();
            }
        }
        Value::Array(a) => {
            for child in a.iter_mut() {
                path.push(None);
                canonical_quantities(api_version, kind, path, child);
                path.pop();
            }
        }
        Value::String(_) | Value::Number(_) => {
            let segs: Vec<Seg<'_>> = path
                .iter()
                .map(|s| s.as_deref().map_or(Seg::Item, Seg::Key))
                .collect();
            if is_quantity(api_version, kind, &segs)
                && let Some(q) = kube_apimachinery::quantity::parse_value(v)
            {
                *v = Value::String(q.to_string());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::UpdateMethod;

    fn types() -> Vec<ChildType> {
        vec![ChildType {
            key: "Pod.v1".into(),
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespaced: true,
            method: UpdateMethod::default(),
        }]
    }

    fn cx(t: &[ChildType]) -> AnswerContext<'_> {
        AnswerContext {
            controller_kind: "CompositeController",
            hook: "sync",
            version: Version::V1,
            types: t,
            generate_selector: false,
        }
    }

    fn request() -> Value {
        json!({"parent": {"apiVersion": "x/v1", "kind": "P",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}}}})
    }

    fn pod(name: &str, image: &str, cpu: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "web"}, "annotations": null},
            "spec": {"containers": [{"name": "web", "image": image,
                "resources": {"limits": {"cpu": cpu}}, "env": []}]}})
    }

    #[test]
    fn order_spelling_nulls_and_defaults_do_not_differ() {
        let t = types();
        let a = json!({"status": {"ready": 2}, "children": [pod("a", "n:1", json!("500m")), pod("b", "n:1", json!(1))]});
        let mut b0 = pod("b", "n:1", json!("1000m"));
        b0["metadata"]["namespace"] = json!("ns");
        let b = json!({"children": [b0, pod("a", "n:1", json!(0.5))], "status": {"ready": 2.0, "gone": null}, "resyncAfterSeconds": 0});
        let va = answer_view(&cx(&t), &request(), &a).expect("valid");
        let vb = answer_view(&cx(&t), &request(), &b).expect("valid");
        assert_eq!(differences(&va, &vb, &[]), vec![]);
    }

    #[test]
    fn a_changed_child_is_named_by_field_path() {
        let t = types();
        let a = json!({"children": [pod("web-0", "nginx:1.27", json!(1))], "status": {"at": "t1"}});
        let b = json!({"children": [pod("web-0", "nginx:1.28", json!(1))], "status": {"at": "t2"}});
        let va = answer_view(&cx(&t), &request(), &a).expect("valid");
        let vb = answer_view(&cx(&t), &request(), &b).expect("valid");
        let d = differences(&va, &vb, &[]);
        let paths: Vec<&str> = d.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "children[Pod/web-0].spec.containers[name=web].image",
                "status.at"
            ]
        );
        assert_eq!(d[0].old, Some(json!("nginx:1.27")));
        assert_eq!(d[0].new, Some(json!("nginx:1.28")));
        let d = differences(&va, &vb, &["status.at".into(), "children[*].spec".into()]);
        assert_eq!(d, vec![]);
    }

    #[test]
    fn an_answer_the_engine_rejects_says_why() {
        let t = types();
        let bad = json!({"children": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}]});
        let e = answer_view(&cx(&t), &request(), &bad).unwrap_err();
        assert!(e.contains("Service"), "{e}");
    }

    #[test]
    fn ignore_patterns_match_steps() {
        assert!(ignored("status", "status.ready"));
        assert!(ignored("status.*.time", "status.a.time"));
        assert!(ignored(
            "children[*].metadata",
            "children[Pod/a].metadata.labels"
        ));
        assert!(ignored(
            "metadata.annotations[\"a.b/c\"]",
            "metadata.annotations[\"a.b/c\"]"
        ));
        assert!(!ignored("status.ready", "status"));
        assert!(!ignored("stat", "status"));
        assert!(!ignored("children[Pod/b]", "children[Pod/a].spec"));
    }
}
