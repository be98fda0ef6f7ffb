//! MapController's pure parts: map keys, tagging outputs, output-name clashes, the plan for
//! detached outputs, and the engine-computed parent status.
//!
//! Everything here is a function of observed and desired objects, with no I/O, so that the
//! controller ([`crate::kinds::map`]), dry runs and tests share one definition of what a map sync does.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::k8s::object;
use crate::plan::writes::{ChildId, Delete, DeleteReason, Writes};

/// Label on every output: the map key of the input it was made from.
pub const MAP_KEY_LABEL: &str = "metacontroller.k8s.io/map-key";
/// Annotation on every output: the input it was made from, `<apiVersion>/<Kind>/<namespace>/<name>`.
pub const MAP_INPUT_ANNOTATION: &str = "metacontroller.k8s.io/map-input";

/// Longest readable prefix of a map key (a label value has at most 63 characters; the rest is
/// `-` and 16 hex digits of the hash).
const PREFIX_MAX: usize = 63 - 17;

/// The map key of an input object: `<kind>-<name>-<hash>`, where the hash (FNV-1a, 64 bits,
/// stable across releases and platforms) covers group, kind, namespace, name and uid. A valid
/// label value of at most 63 characters; an input deleted and created again under the same name
/// gets a new key (its old outputs become detached).
pub fn map_key(input: &Value) -> String {
    let api_version = object::api_version(input).unwrap_or_default();
    let kind = object::kind(input).unwrap_or_default();
    let ns = object::namespace(input).unwrap_or_default();
    let name = object::name(input).unwrap_or_default();
    let uid = object::uid(input).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [object::group_of(api_version), kind, ns, name, uid] {
        for b in part.bytes().chain(std::iter::once(0u8)) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    let mut prefix: String = format!("{}-{}", kind.to_ascii_lowercase(), name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(PREFIX_MAX)
        .collect();
    while prefix.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        prefix.pop();
    }
    if prefix.is_empty() {
        return format!("k{hash:016x}");
    }
    format!("{prefix}-{hash:016x}")
}

/// The `metacontroller.k8s.io/map-input` annotation value of an input.
pub fn input_ref(input: &Value) -> String {
    format!(
        "{}/{}/{}/{}",
        object::api_version(input).unwrap_or_default(),
        object::kind(input).unwrap_or_default(),
        object::namespace(input).unwrap_or_default(),
        object::name(input).unwrap_or_default()
    )
}

/// Put the map-key label and the map-input annotation on desired outputs (whatever the hook
/// wrote there is replaced: the engine owns these two names).
pub fn tag_outputs(desired: &mut [(ChildId, Value)], key: &str, input: &str) {
    for (_, obj) in desired.iter_mut() {
        let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
            continue;
        };
        for (field, name, value) in [
            ("labels", MAP_KEY_LABEL, key),
            ("annotations", MAP_INPUT_ANNOTATION, input),
        ] {
            let entry = meta
                .entry(field)
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Some(m) = entry.as_object_mut() {
                m.insert(name.to_string(), Value::String(value.to_string()));
            }
        }
    }
}

/// Check that no desired output of `key` takes a name that is already used by another key of
/// the same parent, by another controller, or by an object nobody controls (which the map
/// controller never takes over unless it carries this key's label).
///
/// `existing` looks an output up in the caches by id.
pub fn check_clashes(
    desired: &[(ChildId, Value)],
    parent_uid: &str,
    key: &str,
    existing: impl Fn(&ChildId) -> Option<Arc<Value>>,
) -> Result<(), String> {
    let mut problems = Vec::new();
    for (id, _) in desired {
        let Some(obj) = existing(id) else { continue };
        if object::is_deleting(&obj) {
            continue;
        }
        let other_key = object::label(&obj, MAP_KEY_LABEL);
        match object::controller_ref(&obj) {
            Some(r) if r.uid == parent_uid && other_key != Some(key) => {
                let from = object::annotation(&obj, MAP_INPUT_ANNOTATION)
                    .map(|i| format!("input {i}"))
                    .unwrap_or_else(|| "no input (it has no map-key label)".into());
                problems.push(format!(
                    "{id} already belongs to map key {} ({from})",
                    other_key.unwrap_or("<none>")
                ));
            }
            Some(r) if r.uid == parent_uid => {}
            Some(r) => problems.push(format!(
                "{id} is controlled by {} {} (uid {}); objects of other controllers are never taken over",
                r.kind, r.name, r.uid
            )),
            None if other_key != Some(key) => problems.push(format!(
                "{id} already exists and no controller owns it; delete it, or label it {MAP_KEY_LABEL}={key} to let this parent adopt it"
            )),
            None => {}
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "output name clash: {}; two inputs must not claim the same output name: derive output names from the input (e.g. include the input's name)",
        problems.join("; ")
    ))
}

/// Plan the deletions for a detached key: every observed output not in `keep` (objects being
/// deleted already are left alone).
pub fn plan_detached(
    observed: &BTreeMap<String, Vec<Arc<Value>>>,
    keep: &BTreeSet<ChildId>,
    plan: &mut Writes,
) {
    for (type_key, objs) in observed {
        for o in objs {
            let id = ChildId::of(type_key, o);
            if keep.contains(&id) || object::is_deleting(o) {
                if keep.contains(&id) {
                    plan.unchanged += 1;
                }
                continue;
            }
            plan.delete.push(Delete {
                id,
                uid: object::uid(o).unwrap_or_default().to_string(),
                reason: DeleteReason::NotDesired,
                changes: Vec::new(),
            });
        }
    }
}

/// What the engine knows about one parent when it computes the status.
#[derive(Debug)]
pub struct StatusInput<'a> {
    /// `(plural, number of selected inputs)` per input resource.
    pub inputs: Vec<(String, usize)>,
    /// `(plural, outputs this parent controls)` per output resource.
    pub outputs: Vec<(String, Vec<Arc<Value>>)>,
    /// Map keys of the inputs selected now (outputs tagged with another key are detached).
    pub live_keys: &'a HashSet<String>,
    /// Failing keys with their error (map key -> message).
    pub failures: &'a BTreeMap<String, String>,
    /// An error of the parent itself (e.g. an invalid `spec.selector`).
    pub parent_error: Option<&'a str>,
}

/// The engine-computed status (without `observedGeneration`, which
/// [`crate::plan::writes::status_change`] adds): `inputs.<plural>.total`,
/// `outputs.<plural>.{total, detached, <condition type lower-cased>: count of True}`, and the
/// `Synced` condition.
pub fn aggregate_status(input: &StatusInput<'_>, now: &str) -> (Value, Value) {
    let mut inputs = Map::new();
    for (plural, total) in &input.inputs {
        inputs.insert(plural.clone(), json!({"total": total}));
    }
    let mut outputs = Map::new();
    for (plural, objs) in &input.outputs {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut detached = 0u64;
        for o in objs {
            if object::label(o, MAP_KEY_LABEL).is_some_and(|k| !input.live_keys.contains(k)) {
                detached += 1;
            }
            let conditions = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten();
            let mut seen = BTreeSet::new();
            for c in conditions {
                let (Some(t), Some(s)) = (
                    c.get("type").and_then(Value::as_str),
                    c.get("status").and_then(Value::as_str),
                ) else {
                    continue;
                };
                let t = t.to_ascii_lowercase();
                if t == "total" || t == "detached" || !seen.insert(t.clone()) {
                    continue;
                }
                let n = counts.entry(t).or_insert(0);
                if s == "True" {
                    *n += 1;
                }
            }
        }
        let mut m = Map::new();
        m.insert("total".into(), json!(objs.len()));
        m.insert("detached".into(), json!(detached));
        for (t, n) in counts {
            m.insert(t, json!(n));
        }
        outputs.insert(plural.clone(), Value::Object(m));
    }
    let synced = match (input.parent_error, input.failures.iter().next()) {
        (Some(e), _) => json!({"type": "Synced", "status": "False", "reason": "SyncError",
            "message": e, "lastTransitionTime": now}),
        (None, Some((key, e))) => {
            let more = input.failures.len() - 1;
            let message = if more == 0 {
                format!("map key {key}: {e}")
            } else {
                format!("map key {key}: {e} (and {more} more failing keys)")
            };
            json!({"type": "Synced", "status": "False", "reason": "SyncError",
                "message": message, "lastTransitionTime": now})
        }
        (None, None) => json!({"type": "Synced", "status": "True", "reason": "Synced",
            "message": "every input is mapped", "lastTransitionTime": now}),
    };
    (json!({"inputs": inputs, "outputs": outputs}), synced)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pvc(name: &str, uid: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "ns", "uid": uid}})
    }

    fn is_label_value(s: &str) -> bool {
        s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
    }

    #[test]
    fn map_key_is_stable_readable_and_a_label_value() {
        let k = map_key(&pvc("data-0", "u1"));
        assert!(k.starts_with("persistentvolumeclaim-data-0-"), "{k}");
        assert!(is_label_value(&k), "{k}");
        // Stable: this exact value is stored in clusters; changing it detaches every output.
        assert_eq!(k, map_key(&pvc("data-0", "u1")));
        assert_eq!(k, "persistentvolumeclaim-data-0-3ea43c406cac949a");
        // uid, name and namespace all matter.
        assert_ne!(k, map_key(&pvc("data-0", "u2")));
        assert_ne!(k, map_key(&pvc("data-1", "u1")));
        let mut other_ns = pvc("data-0", "u1");
        other_ns["metadata"]["namespace"] = json!("other");
        assert_ne!(k, map_key(&other_ns));
        // Long and odd names still give a valid label value.
        let long = map_key(&pvc(&format!("{}.-x", "a".repeat(80)), "u1"));
        assert!(is_label_value(&long), "{long}");
        let dotted = map_key(&pvc(&format!("{}.b", "a".repeat(44)), "u1"));
        assert!(is_label_value(&dotted), "{dotted}");
        assert!(is_label_value(&map_key(&json!({}))));
    }

    fn id(name: &str) -> ChildId {
        ChildId::of(
            "ConfigMap.v1",
            &json!({"metadata": {"name": name, "namespace": "ns"}}),
        )
    }

    #[test]
    fn tagging_overrides_what_the_hook_wrote() {
        let mut d = vec![
            (
                id("a"),
                json!({"metadata": {"name": "a", "labels": {MAP_KEY_LABEL: "forged", "x": "1"}}}),
            ),
            (
                id("b"),
                json!({"metadata": {"name": "b", "annotations": null}}),
            ),
        ];
        tag_outputs(&mut d, "k1", "v1/PersistentVolumeClaim/ns/data-0");
        assert_eq!(d[0].1["metadata"]["labels"][MAP_KEY_LABEL], "k1");
        assert_eq!(d[0].1["metadata"]["labels"]["x"], "1");
        assert_eq!(
            d[1].1["metadata"]["annotations"][MAP_INPUT_ANNOTATION],
            "v1/PersistentVolumeClaim/ns/data-0"
        );
        assert_eq!(input_ref(&pvc("d", "u")), "v1/PersistentVolumeClaim/ns/d");
    }

    fn existing(labels: Value, owner: Option<&str>) -> Arc<Value> {
        let refs = owner.map_or(json!([]), |u| {
            json!([{"apiVersion": "x/v1", "kind": "P", "name": "p", "uid": u, "controller": true}])
        });
        Arc::new(
            json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels,
            "annotations": {MAP_INPUT_ANNOTATION: "v1/PersistentVolumeClaim/ns/other"},
            "ownerReferences": refs}}),
        )
    }

    #[test]
    fn clashes_between_keys_controllers_and_strangers() {
        let d = vec![(id("a"), json!({}))];
        // Nothing there, or ours with the same key: fine.
        assert!(check_clashes(&d, "p1", "k1", |_| None).is_ok());
        let same = existing(json!({MAP_KEY_LABEL: "k1"}), Some("p1"));
        assert!(check_clashes(&d, "p1", "k1", |_| Some(Arc::clone(&same))).is_ok());
        // Ours under another key: the clash error names the other key and its input.
        let other = existing(json!({MAP_KEY_LABEL: "k2"}), Some("p1"));
        let e = check_clashes(&d, "p1", "k1", |_| Some(Arc::clone(&other))).unwrap_err();
        assert!(
            e.contains("output name clash") && e.contains("map key k2"),
            "{e}"
        );
        assert!(e.contains("v1/PersistentVolumeClaim/ns/other"), "{e}");
        // Another parent's: never taken over.
        let foreign = existing(json!({MAP_KEY_LABEL: "k1"}), Some("p2"));
        let e = check_clashes(&d, "p1", "k1", |_| Some(Arc::clone(&foreign))).unwrap_err();
        assert!(e.contains("controlled by P p"), "{e}");
        // An orphan: adoptable only with our key's label.
        let stray = existing(json!({}), None);
        let e = check_clashes(&d, "p1", "k1", |_| Some(Arc::clone(&stray))).unwrap_err();
        assert!(e.contains("no controller owns it"), "{e}");
        let labelled = existing(json!({MAP_KEY_LABEL: "k1"}), None);
        assert!(check_clashes(&d, "p1", "k1", |_| Some(Arc::clone(&labelled))).is_ok());
    }

    #[test]
    fn detached_plan_deletes_all_but_the_kept_ones() {
        let obj = |n: &str, deleting: bool| {
            let mut v =
                json!({"metadata": {"name": n, "namespace": "ns", "uid": format!("u-{n}")}});
            if deleting {
                v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            Arc::new(v)
        };
        let observed = BTreeMap::from([(
            "ConfigMap.v1".to_string(),
            vec![obj("a", false), obj("b", false), obj("c", true)],
        )]);
        let mut plan = Writes::default();
        plan_detached(&observed, &BTreeSet::from([id("a")]), &mut plan);
        assert_eq!(plan.delete.len(), 1);
        assert_eq!(plan.delete[0].id, id("b"));
        assert_eq!(plan.delete[0].uid, "u-b");
        assert_eq!(plan.unchanged, 1);
        let mut all = Writes::default();
        plan_detached(&observed, &BTreeSet::new(), &mut all);
        assert_eq!(all.delete.len(), 2);
    }

    #[test]
    fn status_counts_inputs_outputs_detached_and_conditions() {
        let out = |key: &str, conds: Value| {
            Arc::new(
                json!({"metadata": {"name": "o", "labels": {MAP_KEY_LABEL: key}},
                "status": {"conditions": conds}}),
            )
        };
        let live = HashSet::from(["k1".to_string()]);
        let failures = BTreeMap::new();
        let input = StatusInput {
            inputs: vec![("persistentvolumeclaims".into(), 1)],
            outputs: vec![(
                "volumesnapshots".into(),
                vec![
                    out("k1", json!([{"type": "Ready", "status": "True"}])),
                    out("k1", json!([{"type": "Ready", "status": "False"}])),
                    out("gone", json!([{"type": "Ready", "status": "True"}])),
                ],
            )],
            live_keys: &live,
            failures: &failures,
            parent_error: None,
        };
        let (status, synced) = aggregate_status(&input, "t0");
        assert_eq!(
            status,
            json!({"inputs": {"persistentvolumeclaims": {"total": 1}},
                "outputs": {"volumesnapshots": {"total": 3, "detached": 1, "ready": 2}}})
        );
        assert_eq!(synced["status"], "True");
        assert_eq!(synced["lastTransitionTime"], "t0");

        let failures = BTreeMap::from([
            ("k1".to_string(), "map hook failed: 500".to_string()),
            ("k2".to_string(), "x".to_string()),
        ]);
        let input = StatusInput {
            failures: &failures,
            ..input
        };
        let (_, synced) = aggregate_status(&input, "t0");
        assert_eq!(synced["status"], "False");
        assert_eq!(synced["reason"], "SyncError");
        let msg = synced["message"].as_str().unwrap();
        assert!(
            msg.contains("map key k1: map hook failed: 500") && msg.contains("1 more"),
            "{msg}"
        );
        let input = StatusInput {
            parent_error: Some("spec.selector is invalid"),
            ..input
        };
        assert_eq!(
            aggregate_status(&input, "t").1["message"],
            "spec.selector is invalid"
        );
    }
}
