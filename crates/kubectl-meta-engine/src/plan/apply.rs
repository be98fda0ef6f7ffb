//! Client-side three-way apply of a desired child onto its observed state, the way
//! Metacontroller updates children (`pkg/dynamic/apply` and `ApplyUpdate` in
//! `pkg/controller/common`), with the last applied state kept in the
//! [`LAST_APPLIED`] annotation.
//!
//! This module owns the merge rules, the last-applied annotation (reading, writing, comparing),
//! JSON equality with numbers compared by value ([`values_equal`]) and the field-level diff
//! ([`FieldChange`]) that the plan, `dryrun` and the TUI print. It is pure: no I/O.
//!
//! Rules (see the spec README, "Reconciling children"):
//! - keys in last applied but absent from desired are removed; keys only in observed are kept;
//!   scalars take the desired value; `null` in desired removes the key; objects merge recursively.
//! - lists whose items (observed, last applied and desired) are all objects carrying one of
//!   [`MERGE_KEYS`] (first in that order) as a scalar, unique within each list, merge item by
//!   item; every other list is replaced by the desired one.
//! - system metadata ([`SYSTEM_METADATA`]) and top-level `status` always keep their observed value.
//! - a value equal to the observed one under [`values_equal`] keeps the observed representation,
//!   so `3.0` from a hook never turns an observed `3` into a float and never causes a write.
//! - [`apply`] compares the way the API server stores: the desired and last-applied states are
//!   merged as [`crate::plan::server_view::server_view`] sees them (Secret `stringData` folded into
//!   `data`, `null` absent), resource quantities compare by value (`0.5` keeps an observed
//!   `500m`), and an empty map or list is not added to an existing object that lacks it (the
//!   server drops those); the annotation records what the hook wrote. So in [`apply`], `null` removes a key only through the last-applied
//!   state, like an absent one ([`merge`] itself still removes it).
//!
//! Where this differs from Metacontroller (deliberately):
//! - A merge key must be a scalar and unique within each list; otherwise the next key is tried.
//!   Metacontroller takes the first key all items carry and collapses duplicates, which breaks
//!   e.g. `ports` with the same `containerPort` for TCP and UDP.
//! - A desired value whose JSON type differs from the observed one (object vs scalar, list vs
//!   object) replaces it; `null` in desired removes the key even when the observed value is an
//!   object or a list. Metacontroller keeps the observed object or list in those cases.
//! - `managedFields` is treated as system metadata too.
//! - The annotation stores the desired object without system metadata, `status` and the
//!   annotation itself (Metacontroller stores it as given, with the annotation blanked).
//! - Integral floats from the hook (`3.0`) become integers, which is what Metacontroller puts
//!   on the wire (Go prints float64 3 as `3`); the API server rejects `3.0` for integer fields.
//! - Observed and last-applied annotations are compared by value, so an annotation written by
//!   Metacontroller (or with other key order or spacing) does not cause a write by itself.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::{Map, Number, Value};

use crate::plan::server_view::{self, Seg};
use kube_apimachinery::quantity;

/// The annotation holding the last applied desired state (compact JSON), shared with Metacontroller.
pub const LAST_APPLIED: &str = "metacontroller.k8s.io/last-applied-configuration";

/// Keys that identify items of a list of objects, highest priority first (Metacontroller's list).
pub const MERGE_KEYS: [&str; 7] = [
    "containerPort",
    "port",
    "mountPath",
    "name",
    "uid",
    "ip",
    "path",
];

/// `metadata` fields owned by the API server: never taken from desired, never stored as applied.
pub const SYSTEM_METADATA: [&str; 8] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// One field that differs between the observed object and the object an apply would write.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// Where, e.g. `spec.template.spec.containers[name=web].image`. Keys other than
    /// `[A-Za-z0-9_-]+` are written quoted (`metadata.labels["app.kubernetes.io/name"]`),
    /// items of merged lists by their merge key (`[name=web]`), other list items by index.
    pub path: String,
    /// The observed value; `None` when the field is added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// The value to write; `None` when the field is removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

/// The result of [`apply`].
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The merged object to PUT (observed `resourceVersion` kept, annotation updated).
    pub object: Value,
    /// Whether `object` differs from the observed object (annotation included); `false` means
    /// nothing must be written.
    pub changed: bool,
    /// What differs, for display. The [`LAST_APPLIED`] annotation is left out, except as the
    /// single entry when it is the only difference (so `changed == !changes.is_empty()`).
    pub changes: Vec<FieldChange>,
    /// Set when the observed annotation could not be used (not JSON, not an object): the merge
    /// then ran without last applied state.
    pub warning: Option<String>,
    /// Differences left alone because the hot-loop guard holds those fields.
    pub held: Vec<FieldChange>,
}

/// Why [`apply`] cannot merge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The desired child is not a JSON object.
    #[error(
        "cannot apply the desired child: it is a JSON {found}, not an object; the hook must \
         answer every child as an object with apiVersion, kind and metadata"
    )]
    DesiredNotObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// The observed object is not a JSON object.
    #[error(
        "cannot apply onto the observed object: it is a JSON {found}, not an object; the API \
         server returned something that is not a Kubernetes object for this resource"
    )]
    ObservedNotObject {
        /// The JSON type found.
        found: &'static str,
    },
}

/// Three-way merge of `desired` onto `observed`, given the `last_applied` state (see the module
/// rules). System metadata and `status` keep their observed values. The caller supplies any
/// annotation it wants written; [`apply`] is the entry point that handles [`LAST_APPLIED`].
pub fn merge(observed: &Value, last_applied: Option<&Value>, desired: &Value) -> Value {
    let of = |k: &str| {
        desired
            .get(k)
            .or_else(|| observed.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut cx = Cx {
        api_version: of("apiVersion"),
        kind: of("kind"),
        path: Vec::new(),
        fresh: !observed.is_object(),
    };
    let mut merged =
        merge_value(Some(observed), last_applied, desired, &mut cx).unwrap_or(Value::Null);
    keep_system_fields(&mut merged, observed);
    merged
}

/// Apply `desired` (a child as the hook returned it) to `observed` (the live object): merge with
/// the last applied state read from the observed annotation and record the new one.
pub fn apply(observed: &Value, desired: &Value) -> Result<Applied, ApplyError> {
    apply_holding(observed, desired, &[])
}

/// A child field the engine stopped rewriting (the hot-loop guard): where, and the value the
/// hook asks for (`None`: the hook removes it).
#[derive(Debug, Clone, PartialEq)]
pub struct HeldField {
    /// The field, as [`FieldChange::path`] writes it.
    pub path: String,
    /// What the hook asks for.
    pub value: Option<Value>,
}

/// [`apply`], leaving the `held` fields at their observed value while the hook asks for the
/// value they were held with.
pub fn apply_holding(
    observed: &Value,
    desired: &Value,
    held: &[HeldField],
) -> Result<Applied, ApplyError> {
    if !observed.is_object() {
        return Err(ApplyError::ObservedNotObject {
            found: json_type(observed),
        });
    }
    if !desired.is_object() {
        return Err(ApplyError::DesiredNotObject {
            found: json_type(desired),
        });
    }
    let (last, warning) = read_last_applied(observed);
    let record = applied_record(desired);
    // Compare the way the server stores (stringData folded, empties and nulls absent); the
    // annotation keeps what the hook wrote.
    let view = server_view::server_view(&record, Some(observed));
    let last_view = last
        .as_ref()
        .map(|l| server_view::server_view(l, Some(observed)));
    // Same state as last applied, maybe written differently (by Metacontroller): keep the
    // observed text (and skip writing the record out again: the common case, an unchanged
    // child on every resync).
    let same_text = last_applied_text(observed)
        .filter(|_| last.as_ref().is_some_and(|l| values_equal(l, &record)));
    let desired_view = match same_text {
        Some(old) => with_last_applied(view, old.clone()),
        None => annotated_as(&view, &record),
    };
    let mut object = merge(observed, last_view.as_ref(), &desired_view);
    let mut held_back = Vec::new();
    if !held.is_empty() {
        // Fields the hot-loop guard holds keep their observed value while the hook asks for
        // the same value as when they were held.
        for c in field_changes(observed, &object) {
            let is_held = held.iter().any(|h| {
                h.path == c.path
                    && match (&h.value, &c.new) {
                        (Some(a), Some(b)) => values_equal(a, b),
                        (None, None) => true,
                        _ => false,
                    }
            });
            if is_held {
                set_at_path(&mut object, &c.path, c.old.clone());
                held_back.push(c);
            }
        }
    }
    let changed = !values_equal(&object, observed);
    let changes = if changed {
        field_changes(observed, &object)
    } else {
        Vec::new()
    };
    Ok(Applied {
        object,
        changed,
        changes,
        warning,
        held: held_back,
    })
}

/// The object to create for `desired`: system metadata and `status` dropped, integral floats
/// made integers, and the [`LAST_APPLIED`] annotation set. A non-object is returned unchanged.
pub fn for_create(desired: &Value) -> Value {
    annotated(&applied_record(desired))
}

/// Deep JSON equality where numbers compare by numeric value exactly (`3 == 3.0`, large `u64`
/// and `i64` without going through `f64`) and object key order is ignored. List order matters.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numeric(x) == numeric(y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| values_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// A number as an exact integer when it has an integral value, else as a float.
#[derive(PartialEq)]
enum Numeric {
    Int(i128),
    Float(f64),
}

/// 2^64 as f64: integral floats below it in magnitude convert exactly to i128.
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
/// 2^63 as f64.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

fn numeric(n: &Number) -> Numeric {
    if let Some(i) = n.as_i64() {
        return Numeric::Int(i.into());
    }
    if let Some(u) = n.as_u64() {
        return Numeric::Int(u.into());
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f.fract() == 0.0 && f.abs() < TWO_POW_64 {
        Numeric::Int(f as i128)
    } else {
        Numeric::Float(f)
    }
}

/// Where the merge is: the object's type and the path to the current value (`None` steps are
/// list items), to know which fields are resource quantities.
struct Cx {
    api_version: String,
    kind: String,
    path: Vec<Option<String>>,
    /// Merging into something the observed object does not have (sent as desired).
    fresh: bool,
}

impl Cx {
    /// True when the current field holds a resource quantity (compared by value).
    fn at_quantity(&self) -> bool {
        let segs: Vec<Seg<'_>> = self
            .path
            .iter()
            .map(|s| s.as_deref().map_or(Seg::Item, Seg::Key))
            .collect();
        server_view::is_quantity(&self.api_version, &self.kind, &segs)
    }
}

/// Merge one value; `None` means "remove the key".
fn merge_value(
    observed: Option<&Value>,
    last: Option<&Value>,
    desired: &Value,
    cx: &mut Cx,
) -> Option<Value> {
    match desired {
        Value::Null => None,
        Value::Object(des) => {
            let empty = Map::new();
            let obs = observed.and_then(Value::as_object).unwrap_or(&empty);
            Some(Value::Object(merge_object(
                obs,
                last.and_then(Value::as_object),
                des,
                cx,
            )))
        }
        Value::Array(des) => {
            let obs = observed
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            let last = last
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            Some(merge_array(obs, last, des, cx))
        }
        scalar => Some(match observed {
            Some(o) if values_equal(o, scalar) => o.clone(),
            // `0.5` and `500m` are the same quantity: keep the server's spelling.
            Some(o) if cx.at_quantity() && quantity::semantic_eq(o, scalar) => o.clone(),
            _ => scalar.clone(),
        }),
    }
}

/// Merge one object member by member. `fresh`: the object is new (not in observed), so it is
/// sent as desired, empty maps and lists included; into an existing object, an empty map or list
/// the observed object does not have is not added (the server does not store empty ones).
fn merge_object(
    observed: &Map<String, Value>,
    last: Option<&Map<String, Value>>,
    desired: &Map<String, Value>,
    cx: &mut Cx,
) -> Map<String, Value> {
    let fresh = cx.fresh;
    let mut out = observed.clone();
    for key in last.into_iter().flat_map(Map::keys) {
        if !desired.contains_key(key) {
            out.shift_remove(key);
        }
    }
    for (key, des) in desired {
        if !fresh && !observed.contains_key(key) && server_view::is_empty_collection(des) {
            continue;
        }
        let last = last.and_then(|l| l.get(key));
        cx.path.push(Some(key.clone()));
        let obs = observed.get(key);
        cx.fresh = fresh || !obs.is_some_and(Value::is_object);
        let merged = merge_value(obs, last, des, cx);
        cx.fresh = fresh;
        cx.path.pop();
        match merged {
            Some(v) => {
                out.insert(key.clone(), v);
            }
            None => {
                out.shift_remove(key);
            }
        }
    }
    out
}

/// Merge a list: item by item when it is a list map, else replace it (keeping the observed
/// list when it is equal). List-map order, as Metacontroller: surviving observed items in
/// observed order, then new desired items in desired order.
fn merge_array(observed: &[Value], last: &[Value], desired: &[Value], cx: &mut Cx) -> Value {
    let Some(key) = list_map_key(&[observed, last, desired]) else {
        cx.path.push(None);
        let keep = observed.len() == desired.len()
            && observed.iter().zip(desired).all(|(o, d)| same_at(o, d, cx));
        cx.path.pop();
        return Value::Array(if keep { observed } else { desired }.to_vec());
    };
    let desired_items = index_items(key, desired);
    let last_items = index_items(key, last);
    let mut observed_keys = HashSet::new();
    let mut out = Vec::with_capacity(observed.len().max(desired.len()));
    cx.path.push(None);
    for item in observed {
        let (Some(k), Some(obs)) = (item_key(key, item), item.as_object()) else {
            continue; // unreachable after list_map_key; keeps this total
        };
        match desired_items.get(&k).and_then(|d| d.as_object()) {
            Some(des) => {
                let fresh = std::mem::replace(&mut cx.fresh, false);
                out.push(Value::Object(merge_object(
                    obs,
                    last_items.get(&k).and_then(|l| l.as_object()),
                    des,
                    cx,
                )));
                cx.fresh = fresh;
            }
            None if last_items.contains_key(&k) => {}
            None => out.push(item.clone()),
        }
        observed_keys.insert(k);
    }
    for item in desired {
        let (Some(k), Some(des)) = (item_key(key, item), item.as_object()) else {
            continue;
        };
        if !observed_keys.contains(&k) {
            let last = last_items.get(&k).and_then(|l| l.as_object());
            let fresh = std::mem::replace(&mut cx.fresh, true);
            out.push(Value::Object(merge_object(&Map::new(), last, des, cx)));
            cx.fresh = fresh;
        }
    }
    cx.path.pop();
    Value::Array(out)
}

/// [`values_equal`], with quantities at quantity fields compared by value.
fn same_at(observed: &Value, desired: &Value, cx: &mut Cx) -> bool {
    match (observed, desired) {
        (Value::Object(o), Value::Object(d)) => {
            o.len() == d.len()
                && d.iter().all(|(k, dv)| {
                    o.get(k).is_some_and(|ov| {
                        cx.path.push(Some(k.clone()));
                        let same = same_at(ov, dv, cx);
                        cx.path.pop();
                        same
                    })
                })
        }
        (Value::Array(o), Value::Array(d)) => {
            cx.path.push(None);
            let same = o.len() == d.len() && o.iter().zip(d).all(|(a, b)| same_at(a, b, cx));
            cx.path.pop();
            same
        }
        (o, d) => values_equal(o, d) || (cx.at_quantity() && quantity::semantic_eq(o, d)),
    }
}

/// The merge key of a list map, if `lists` form one: at least one item, every item an object,
/// and the first of [`MERGE_KEYS`] that every item carries as a scalar, unique within each list.
fn list_map_key(lists: &[&[Value]]) -> Option<&'static str> {
    if lists.iter().all(|l| l.is_empty())
        || !lists.iter().flat_map(|l| l.iter()).all(Value::is_object)
    {
        return None;
    }
    MERGE_KEYS.into_iter().find(|key| {
        lists.iter().all(|list| {
            let mut seen = HashSet::new();
            list.iter()
                .all(|item| item_key(key, item).is_some_and(|k| seen.insert(k)))
        })
    })
}

/// The identity of a list item under `key`: its scalar value, numbers compared by value.
fn item_key(key: &str, item: &Value) -> Option<String> {
    match item.get(key)? {
        Value::String(s) => Some(format!("s:{s}")),
        Value::Bool(b) => Some(format!("b:{b}")),
        Value::Number(n) => Some(match numeric(n) {
            Numeric::Int(i) => format!("i:{i}"),
            Numeric::Float(f) => format!("f:{f:?}"),
        }),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn index_items<'a>(key: &str, list: &'a [Value]) -> HashMap<String, &'a Value> {
    list.iter()
        .filter_map(|item| Some((item_key(key, item)?, item)))
        .collect()
}

/// Put the observed system metadata and `status` back (or remove them where observed has none).
fn keep_system_fields(merged: &mut Value, observed: &Value) {
    let Some(out) = merged.as_object_mut() else {
        return;
    };
    restore(out, observed.as_object(), "status");
    let observed_meta = observed.get("metadata").and_then(Value::as_object);
    let has_system =
        observed_meta.is_some_and(|m| SYSTEM_METADATA.iter().any(|f| m.contains_key(*f)));
    let meta = if has_system {
        object_entry(out, "metadata")
    } else {
        out.get_mut("metadata").and_then(Value::as_object_mut)
    };
    if let Some(meta) = meta {
        for field in SYSTEM_METADATA {
            restore(meta, observed_meta, field);
        }
    }
}

fn restore(out: &mut Map<String, Value>, from: Option<&Map<String, Value>>, key: &str) {
    match from.and_then(|m| m.get(key)) {
        Some(v) => {
            out.insert(key.to_string(), v.clone());
        }
        None => {
            out.shift_remove(key);
        }
    }
}

/// `map[key]` as an object, created (or replacing a non-object) if needed.
fn object_entry<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let slot = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// The desired state as recorded in the annotation: integral floats as integers, without
/// system metadata, `status` and the annotation itself.
fn applied_record(desired: &Value) -> Value {
    let mut record = integers_for_integral_floats(desired);
    if let Some(obj) = record.as_object_mut() {
        obj.shift_remove("status");
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in SYSTEM_METADATA {
                meta.shift_remove(field);
            }
            let emptied = meta
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
                .is_some_and(|ann| ann.shift_remove(LAST_APPLIED).is_some() && ann.is_empty());
            if emptied {
                meta.shift_remove("annotations");
            }
        }
    }
    record
}

/// `record` with the [`LAST_APPLIED`] annotation set to its JSON.
fn annotated(record: &Value) -> Value {
    annotated_as(record, record)
}

/// `obj` with the [`LAST_APPLIED`] annotation set to the JSON of `record`.
fn annotated_as(obj: &Value, record: &Value) -> Value {
    with_last_applied(obj.clone(), Value::String(go_json(record)))
}

/// `obj` with the [`LAST_APPLIED`] annotation set to `text`.
fn with_last_applied(mut obj: Value, text: Value) -> Value {
    if let Some(ann) = obj
        .as_object_mut()
        .and_then(|o| object_entry(o, "metadata"))
        .and_then(|m| object_entry(m, "annotations"))
    {
        ann.insert(LAST_APPLIED.to_string(), text);
    }
    obj
}

fn integers_for_integral_floats(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if f.fract() != 0.0 {
                v.clone()
            } else if (-TWO_POW_63..TWO_POW_63).contains(&f) {
                Value::from(f as i64)
            } else if (0.0..TWO_POW_64).contains(&f) {
                Value::from(f as u64)
            } else {
                v.clone()
            }
        }
        Value::Array(a) => Value::Array(a.iter().map(integers_for_integral_floats).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), integers_for_integral_floats(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Compact JSON as Go's `encoding/json` writes it (sorted keys, `<>&` and U+2028/9 escaped),
/// so the annotation text matches what Metacontroller writes for the same state.
fn go_json(v: &Value) -> String {
    let text = sorted_keys(v).to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        // These characters only occur inside JSON strings, where escaping them is exact.
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<_> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted_keys(v)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

fn last_applied_text(obj: &Value) -> Option<&Value> {
    obj.get("metadata")?.get("annotations")?.get(LAST_APPLIED)
}

/// The last applied state from the observed annotation, or a warning when it is unusable.
fn read_last_applied(observed: &Value) -> (Option<Value>, Option<String>) {
    let problem = match last_applied_text(observed) {
        None => return (None, None),
        Some(Value::String(s)) if s.is_empty() => return (None, None),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => return (Some(v), None),
            Ok(other) => format!("holds a JSON {}, not an object", json_type(&other)),
            Err(e) => format!("is not valid JSON ({e})"),
        },
        Some(other) => format!("is a JSON {}, not a string", json_type(other)),
    };
    let kind = observed
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("object");
    let meta = observed.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let who = match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) if !ns.is_empty() => format!("{kind} {ns}/{name}"),
        _ => format!("{kind} {name}"),
    };
    let warning = format!(
        "annotation {LAST_APPLIED} on {who} {problem}; merged as if nothing had been applied \
         before, so fields dropped from the desired state since then are kept (this apply \
         rewrites the annotation)"
    );
    (None, Some(warning))
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every difference between two JSON values, by path (numbers compared by value, lists of
/// objects with a merge key matched item by item), as [`Applied::changes`] reports them.
pub fn value_changes(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    diff("", old, new, &mut out);
    out
}

/// The differences between `observed` and `merged`, annotation handled as [`Applied::changes`] says.
fn field_changes(observed: &Value, merged: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    diff(
        "",
        &without_last_applied(observed),
        &without_last_applied(merged),
        &mut out,
    );
    if out.is_empty() {
        let old = last_applied_text(observed).cloned();
        let new = last_applied_text(merged).cloned();
        if old != new {
            let path = join(&join("metadata", "annotations"), LAST_APPLIED);
            out.push(FieldChange { path, old, new });
        }
    }
    out
}

/// A copy without the annotation (and without `annotations` if that leaves it empty).
fn without_last_applied(obj: &Value) -> Value {
    let mut copy = obj.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        let now_empty = meta
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
            .is_some_and(|ann| {
                ann.shift_remove(LAST_APPLIED);
                ann.is_empty()
            });
        if now_empty {
            meta.shift_remove("annotations");
        }
    }
    copy
}

fn diff(path: &str, old: &Value, new: &Value, out: &mut Vec<FieldChange>) {
    if values_equal(old, new) {
        return;
    }
    let before = out.len();
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            for (k, ov) in o {
                match n.get(k) {
                    Some(nv) => diff(&join(path, k), ov, nv, out),
                    None => out.push(change(join(path, k), Some(ov), None)),
                }
            }
            for (k, nv) in n.iter().filter(|(k, _)| !o.contains_key(*k)) {
                out.push(change(join(path, k), None, Some(nv)));
            }
        }
        (Value::Array(o), Value::Array(n)) => {
            if let Some(key) = list_map_key(&[o, n]) {
                diff_list_map(path, key, o, n, out);
            } else if o.len() == n.len() {
                for (i, (a, b)) in o.iter().zip(n).enumerate() {
                    diff(&format!("{path}[{i}]"), a, b, out);
                }
            }
        }
        _ => {}
    }
    if out.len() == before {
        // Scalars, type changes, list length or order changes: report the whole value.
        out.push(change(path.to_string(), Some(old), Some(new)));
    }
}

fn diff_list_map(path: &str, key: &str, old: &[Value], new: &[Value], out: &mut Vec<FieldChange>) {
    let item_path = |item: &Value| {
        let shown = match item.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        };
        format!("{path}[{key}={shown}]")
    };
    let new_items = index_items(key, new);
    let old_items = index_items(key, old);
    for item in old {
        match item_key(key, item).and_then(|k| new_items.get(&k)) {
            Some(n) => diff(&item_path(item), item, n, out),
            None => out.push(change(item_path(item), Some(item), None)),
        }
    }
    for item in new {
        if item_key(key, item).is_none_or(|k| !old_items.contains_key(&k)) {
            out.push(change(item_path(item), None, Some(item)));
        }
    }
}

/// One step of a [`FieldChange::path`].
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
    /// A list-map item: merge key and its value as shown.
    Item(String, String),
}

/// Splits a path written by [`join`] / the diff (`a.b["c.d"][name=x][0]`) into steps.
fn parse_path(path: &str) -> Option<Vec<Step>> {
    let b = path.as_bytes();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' if i > 0 => i += 1,
            b'[' if b.get(i + 1) == Some(&b'"') => {
                // A JSON string key: find its closing quote.
                let mut j = i + 2;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let key: String = serde_json::from_str(path.get(i + 1..=j)?).ok()?;
                steps.push(Step::Key(key));
                if b.get(j + 1) != Some(&b']') {
                    return None;
                }
                i = j + 2;
            }
            b'[' => {
                let end = i + path[i..].find(']')?;
                let inner = &path[i + 1..end];
                steps.push(match inner.split_once('=') {
                    Some((k, v)) => Step::Item(k.to_string(), v.to_string()),
                    None => Step::Index(inner.parse().ok()?),
                });
                i = end + 1;
            }
            _ => {
                let end = path[i..].find(['.', '[']).map_or(path.len(), |n| i + n);
                steps.push(Step::Key(path[i..end].to_string()));
                i = end;
            }
        }
    }
    Some(steps)
}

/// True when a managedFields entry's `fieldsV1` owns the field at `path` (a
/// [`FieldChange::path`]), or an atomic value (a leaf `{}`) above it.
pub fn fields_v1_owns(fields: &Value, path: &str) -> bool {
    let Some(steps) = parse_path(path) else {
        return false;
    };
    let mut cur = fields;
    for (n, step) in steps.iter().enumerate() {
        let Some(m) = cur.as_object() else {
            return false;
        };
        if n > 0 && m.is_empty() {
            return true;
        }
        let next = match step {
            Step::Key(k) => m.get(&format!("f:{k}")),
            Step::Index(i) => m.get(&format!("i:{i}")),
            Step::Item(k, shown) => m
                .iter()
                .find(|(mk, _)| {
                    mk.strip_prefix("k:")
                        .and_then(|j| serde_json::from_str::<Value>(j).ok())
                        .is_some_and(|o| match o.get(k.as_str()) {
                            Some(Value::String(s)) => s == shown,
                            Some(v) => serde_json::from_str::<Value>(shown).is_ok_and(|p| p == *v),
                            None => false,
                        })
                })
                .map(|(_, v)| v),
        };
        match next {
            Some(v) => cur = v,
            None => return false,
        }
    }
    true
}

/// The list item whose merge key `key` shows as `shown` (as the diff writes it).
fn item_position(list: &[Value], key: &str, shown: &str) -> Option<usize> {
    list.iter().position(|item| match item.get(key) {
        Some(Value::String(s)) => s == shown,
        Some(v) => serde_json::to_string(v).ok().as_deref() == Some(shown),
        None => false,
    })
}

/// Sets (or with `None` removes) the value at a [`FieldChange::path`]; a path that does not
/// resolve changes nothing.
fn set_at_path(obj: &mut Value, path: &str, value: Option<Value>) {
    let Some(steps) = parse_path(path) else {
        return;
    };
    let Some((last, parents)) = steps.split_last() else {
        return;
    };
    let mut cur = obj;
    for step in parents {
        let next = match step {
            Step::Key(k) => cur.get_mut(k.as_str()),
            Step::Index(i) => cur.get_mut(*i),
            Step::Item(k, shown) => match cur.as_array_mut() {
                Some(list) => item_position(list, k, shown).and_then(|p| list.get_mut(p)),
                None => None,
            },
        };
        let Some(next) = next else {
            return;
        };
        cur = next;
    }
    match (last, value) {
        (Step::Key(k), Some(v)) => {
            if let Some(m) = cur.as_object_mut() {
                m.insert(k.clone(), v);
            }
        }
        (Step::Key(k), None) => {
            if let Some(m) = cur.as_object_mut() {
                m.shift_remove(k);
            }
        }
        (Step::Index(i), Some(v)) => {
            if let Some(slot) = cur.get_mut(*i) {
                *slot = v;
            }
        }
        (Step::Index(_), None) => {}
        (Step::Item(k, shown), v) => {
            if let Some(list) = cur.as_array_mut() {
                match (item_position(list, k, shown), v) {
                    (Some(p), Some(v)) => list[p] = v,
                    (Some(p), None) => {
                        list.remove(p);
                    }
                    (None, Some(v)) => list.push(v),
                    (None, None) => {}
                }
            }
        }
    }
}

fn change(path: String, old: Option<&Value>, new: Option<&Value>) -> FieldChange {
    FieldChange {
        path,
        old: old.cloned(),
        new: new.cloned(),
    }
}

/// `path.key`, or `path["key"]` when the key has characters other than `[A-Za-z0-9_-]`.
fn join(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (plain, path.is_empty()) {
        (true, true) => key.to_string(),
        (true, false) => format!("{path}.{key}"),
        (false, _) => format!("{path}[{}]", Value::String(key.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the API server adds when it stores a created object.
    fn stored(created: &Value) -> Value {
        let mut obj = created.clone();
        let meta = obj["metadata"].as_object_mut().expect("metadata");
        meta.insert("uid".into(), json!("u-1"));
        meta.insert("resourceVersion".into(), json!("17"));
        meta.insert("generation".into(), json!(1));
        meta.insert("creationTimestamp".into(), json!("2026-01-01T00:00:00Z"));
        meta.insert(
            "managedFields".into(),
            json!([{"manager": "kubectl-meta", "operation": "Update"}]),
        );
        obj
    }

    fn last_applied(obj: &Value) -> Value {
        let text = obj["metadata"]["annotations"][LAST_APPLIED]
            .as_str()
            .expect("annotation");
        serde_json::from_str(text).expect("annotation JSON")
    }

    /// apply, checking the invariants every result must have.
    fn apply_ok(observed: &Value, desired: &Value) -> Applied {
        let a = apply(observed, desired).expect("apply");
        assert_eq!(
            a.changed,
            !a.changes.is_empty(),
            "changed vs changes: {a:?}"
        );
        assert_eq!(a.changed, !values_equal(&a.object, observed));
        a
    }

    fn paths(a: &Applied) -> Vec<&str> {
        a.changes.iter().map(|c| c.path.as_str()).collect()
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "namespace": "ns"}, "data": data})
    }

    // ---- values_equal ----

    #[test]
    fn numbers_compare_by_value() {
        assert!(values_equal(&json!(3), &json!(3.0)));
        assert!(values_equal(&json!(-1), &json!(-1.0)));
        assert!(values_equal(&json!(0), &json!(-0.0)));
        assert!(!values_equal(&json!(3), &json!(3.5)));
        assert!(!values_equal(&json!(3), &json!(4)));
        assert!(values_equal(&json!(0.1), &json!(0.1)));
        assert!(!values_equal(&json!(0.1), &json!(0.2)));
        assert!(values_equal(&json!(1e300), &json!(1e300)));
        assert!(values_equal(&json!(i64::MAX), &json!(i64::MAX as u64)));
    }

    #[test]
    fn large_integers_compare_exactly() {
        assert!(values_equal(&json!(u64::MAX), &json!(u64::MAX)));
        assert!(!values_equal(&json!(u64::MAX), &json!(u64::MAX - 1)));
        // u64::MAX as f64 rounds to 2^64, which is not u64::MAX.
        assert!(!values_equal(&json!(u64::MAX), &json!(u64::MAX as f64)));
        // 2^53 + 1 is not representable as f64; 2^53 is.
        assert!(!values_equal(
            &json!(9_007_199_254_740_993u64),
            &json!(9_007_199_254_740_992.0)
        ));
        assert!(values_equal(
            &json!(9_007_199_254_740_992u64),
            &json!(9_007_199_254_740_992.0)
        ));
        assert!(values_equal(&json!(i64::MIN), &json!(i64::MIN as f64)));
        assert!(!values_equal(&json!(i64::MIN + 1), &json!(i64::MIN as f64)));
        assert!(!values_equal(&json!(-1), &json!(u64::MAX)));
    }

    #[test]
    fn structures_compare_deeply() {
        assert!(values_equal(
            &json!({"a": 1, "b": {"c": [1, 2.0]}}),
            &json!({"b": {"c": [1.0, 2]}, "a": 1.0})
        ));
        assert!(!values_equal(&json!([1, 2]), &json!([2, 1])));
        assert!(!values_equal(&json!({"a": 1}), &json!({"a": 1, "b": 1})));
        assert!(!values_equal(&json!({"a": 1, "b": 1}), &json!({"a": 1})));
        assert!(!values_equal(&json!({"a": 1}), &json!({"b": 1})));
        assert!(!values_equal(&json!("3"), &json!(3)));
        assert!(!values_equal(&json!(null), &json!(false)));
        assert!(!values_equal(&json!([]), &json!({})));
        assert!(values_equal(&json!(null), &json!(null)));
    }

    // ---- merge rules, one at a time ----

    #[test]
    fn key_removed_from_desired_since_last_apply_is_removed() {
        let observed = json!({"a": 1, "b": 2, "n": {"x": 1, "y": 2}});
        let last = json!({"a": 1, "b": 2, "n": {"x": 1, "y": 2}});
        let merged = merge(&observed, Some(&last), &json!({"a": 1, "n": {"x": 1}}));
        assert_eq!(merged, json!({"a": 1, "n": {"x": 1}}));
    }

    #[test]
    fn keys_only_in_observed_are_kept() {
        let observed = json!({"a": 1, "server": "x", "n": {"x": 1, "defaulted": true}});
        let last = json!({"a": 1, "n": {"x": 1}});
        let merged = merge(&observed, Some(&last), &json!({"a": 1, "n": {"x": 1}}));
        assert_eq!(merged, observed);
    }

    #[test]
    fn without_last_applied_nothing_is_removed() {
        let observed = json!({"a": 1, "b": 2});
        assert_eq!(
            merge(&observed, None, &json!({"a": 5})),
            json!({"a": 5, "b": 2})
        );
    }

    #[test]
    fn scalars_take_the_desired_value() {
        let observed = json!({"s": "old", "n": 1, "b": true, "z": null});
        let desired = json!({"s": "new", "n": 2.5, "b": false, "z": "set"});
        let merged = merge(&observed, Some(&observed), &desired);
        assert_eq!(merged, desired);
    }

    #[test]
    fn null_in_desired_removes_the_key() {
        let observed = json!({"s": "x", "o": {"a": 1}, "l": [1], "keep": 1});
        let desired = json!({"s": null, "o": null, "l": null, "missing": null});
        let merged = merge(&observed, None, &desired);
        assert_eq!(merged, json!({"keep": 1}));
        // Nulls inside a newly added object or list-map item are dropped too.
        let merged = merge(
            &json!({}),
            None,
            &json!({"n": {"a": null, "b": 1}, "items": [{"name": "x", "v": null}]}),
        );
        assert_eq!(merged, json!({"n": {"b": 1}, "items": [{"name": "x"}]}));
        // Nested null removes only that key.
        let merged = merge(
            &json!({"n": {"a": 1, "b": 2}}),
            None,
            &json!({"n": {"a": null}}),
        );
        assert_eq!(merged, json!({"n": {"b": 2}}));
    }

    #[test]
    fn nested_objects_merge_recursively() {
        let observed = json!({"spec": {"a": {"x": 1, "y": 1}, "other": 1}});
        let last = json!({"spec": {"a": {"x": 1, "y": 1}}});
        let desired = json!({"spec": {"a": {"x": 2, "z": 3}}});
        let merged = merge(&observed, Some(&last), &desired);
        assert_eq!(merged, json!({"spec": {"a": {"x": 2, "z": 3}, "other": 1}}));
    }

    #[test]
    fn a_different_json_type_replaces_the_observed_value() {
        let observed = json!({"a": {"x": 1}, "b": [1], "c": 1, "d": [{"name": "n"}]});
        let desired = json!({"a": "s", "b": {"k": 1}, "c": [1], "d": {"name": "n"}});
        assert_eq!(merge(&observed, None, &desired), desired);
    }

    #[test]
    fn containers_merge_by_name_and_ports_by_container_port() {
        let observed = json!({"spec": {"containers": [
            {"name": "web", "image": "web:1", "imagePullPolicy": "IfNotPresent",
             "ports": [{"containerPort": 8080, "protocol": "TCP"},
                       {"containerPort": 8081, "protocol": "TCP"},
                       {"containerPort": 7000, "protocol": "TCP"}]},
            {"name": "injected-sidecar", "image": "mesh:1"},
            {"name": "old", "image": "old:1"}
        ]}});
        let last = json!({"spec": {"containers": [
            {"name": "web", "image": "web:1",
             "ports": [{"containerPort": 8080}, {"containerPort": 8081}]},
            {"name": "old", "image": "old:1"}
        ]}});
        let desired = json!({"spec": {"containers": [
            {"name": "new", "image": "new:1"},
            {"name": "web", "image": "web:2",
             "ports": [{"containerPort": 9090}, {"containerPort": 8080, "name": "http"}]}
        ]}});
        let merged = merge(&observed, Some(&last), &desired);
        assert_eq!(
            merged,
            json!({"spec": {"containers": [
                {"name": "web", "image": "web:2", "imagePullPolicy": "IfNotPresent",
                 "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"},
                           {"containerPort": 7000, "protocol": "TCP"},
                           {"containerPort": 9090}]},
                {"name": "injected-sidecar", "image": "mesh:1"},
                {"name": "new", "image": "new:1"}
            ]}})
        );
    }

    #[test]
    fn volumes_merge_by_name_and_mounts_by_mount_path() {
        let observed = json!({
            "volumes": [{"name": "data", "emptyDir": {}},
                        {"name": "token", "projected": {"sources": []}}],
            "volumeMounts": [{"name": "data", "mountPath": "/a", "readOnly": false},
                             {"name": "data", "mountPath": "/b"}]
        });
        let last = json!({
            "volumes": [{"name": "data", "emptyDir": {}}],
            "volumeMounts": [{"name": "data", "mountPath": "/a"}, {"name": "data", "mountPath": "/b"}]
        });
        let desired = json!({
            "volumes": [{"name": "data", "emptyDir": {"medium": "Memory"}}],
            "volumeMounts": [{"name": "data", "mountPath": "/a", "subPath": "x"}]
        });
        let merged = merge(&observed, Some(&last), &desired);
        assert_eq!(
            merged,
            json!({
                "volumes": [{"name": "data", "emptyDir": {"medium": "Memory"}},
                            {"name": "token", "projected": {"sources": []}}],
                "volumeMounts": [{"name": "data", "mountPath": "/a", "readOnly": false, "subPath": "x"}]
            })
        );
    }

    #[test]
    fn env_merges_by_name() {
        let observed = json!({"env": [
            {"name": "A", "value": "1"},
            {"name": "B", "value": "2"},
            {"name": "ADDED_BY_USER", "value": "u"}
        ]});
        let last = json!({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]});
        let desired = json!({"env": [
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "C", "value": "3"}
        ]});
        let merged = merge(&observed, Some(&last), &desired);
        // `value` was applied before and is gone from desired: removed; valueFrom added.
        assert_eq!(
            merged,
            json!({"env": [
                {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "ADDED_BY_USER", "value": "u"},
                {"name": "C", "value": "3"}
            ]})
        );
    }

    #[test]
    fn list_map_keeps_observed_order_then_appends_new_items_in_desired_order() {
        let observed = json!({"l": [{"name": "b"}, {"name": "x"}, {"name": "a"}]});
        let desired = json!({"l": [{"name": "a"}, {"name": "d"}, {"name": "c"}, {"name": "b"}]});
        let merged = merge(&observed, None, &desired);
        let names: Vec<_> = merged["l"]
            .as_array()
            .expect("list")
            .iter()
            .map(|i| i["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names, ["b", "x", "a", "d", "c"]);
    }

    #[test]
    fn lists_of_scalars_are_replaced() {
        let observed = json!({"args": ["a", "b", "extra"], "finalizers": ["x"]});
        let last = json!({"args": ["a", "b"]});
        let desired = json!({"args": ["c"], "finalizers": ["y"]});
        assert_eq!(merge(&observed, Some(&last), &desired), desired);
    }

    #[test]
    fn lists_of_objects_without_a_common_key_are_replaced() {
        // Tolerations have no merge key; a mix of keys is not a list map either.
        let observed = json!({
            "tolerations": [{"key": "a", "operator": "Exists"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}],
            "mixed": [{"name": "a"}, {"port": 1}]
        });
        let desired = json!({
            "tolerations": [{"key": "b", "operator": "Exists"}],
            "mixed": [{"name": "a", "v": 1}, {"port": 1}]
        });
        assert_eq!(merge(&observed, Some(&observed), &desired), desired);
        // Lists mixing objects and scalars are replaced too.
        let merged = merge(
            &json!({"l": [{"name": "a"}, "s"]}),
            None,
            &json!({"l": [{"name": "a"}]}),
        );
        assert_eq!(merged, json!({"l": [{"name": "a"}]}));
    }

    #[test]
    fn duplicate_key_values_fall_back_to_the_next_merge_key() {
        // DNS on 53 over TCP and UDP: containerPort repeats, name is unique.
        let observed = json!({"ports": [
            {"containerPort": 53, "protocol": "UDP", "name": "dns"},
            {"containerPort": 53, "protocol": "TCP", "name": "dns-tcp"},
            {"containerPort": 9153, "protocol": "TCP", "name": "metrics"}
        ]});
        let last = json!({"ports": [
            {"containerPort": 53, "protocol": "UDP", "name": "dns"},
            {"containerPort": 53, "protocol": "TCP", "name": "dns-tcp"}
        ]});
        let desired = json!({"ports": [
            {"containerPort": 53, "protocol": "UDP", "name": "dns"},
            {"containerPort": 5353, "protocol": "TCP", "name": "dns-tcp"}
        ]});
        let merged = merge(&observed, Some(&last), &desired);
        assert_eq!(
            merged,
            json!({"ports": [
                {"containerPort": 53, "protocol": "UDP", "name": "dns"},
                {"containerPort": 5353, "protocol": "TCP", "name": "dns-tcp"},
                {"containerPort": 9153, "protocol": "TCP", "name": "metrics"}
            ]})
        );
        // No unique key at all: replaced.
        let observed = json!({"ports": [{"containerPort": 53, "protocol": "UDP"},
                                        {"containerPort": 53, "protocol": "TCP"}]});
        let desired = json!({"ports": [{"containerPort": 53, "protocol": "TCP"}]});
        assert_eq!(merge(&observed, None, &desired), desired);
    }

    #[test]
    fn a_merge_key_must_be_a_scalar() {
        let observed = json!({"l": [{"name": {"first": "a"}, "v": 1}, {"name": {"first": "b"}}]});
        let desired = json!({"l": [{"name": {"first": "a"}, "v": 2}]});
        assert_eq!(merge(&observed, None, &desired), desired);
    }

    #[test]
    fn numeric_merge_keys_match_by_value() {
        let observed = json!({"ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]});
        let desired = json!({"ports": [{"port": 80.0, "targetPort": 9090}]});
        let merged = merge(&observed, None, &desired);
        assert_eq!(
            merged,
            json!({"ports": [{"port": 80, "targetPort": 9090, "protocol": "TCP"}]})
        );
        assert!(merged["ports"][0]["port"].is_u64());
    }

    #[test]
    fn last_applied_items_without_the_key_make_the_list_replaced() {
        // As Metacontroller: the key must be common to observed, last applied and desired.
        let observed = json!({"l": [{"name": "a", "extra": 1}, {"name": "b"}]});
        let last = json!({"l": [{"id": 1}]});
        let desired = json!({"l": [{"name": "a"}]});
        assert_eq!(merge(&observed, Some(&last), &desired), desired);
    }

    #[test]
    fn status_and_system_metadata_are_never_taken_from_desired() {
        let observed = json!({
            "metadata": {"name": "p", "uid": "u-obs", "resourceVersion": "5", "generation": 2,
                         "creationTimestamp": "t0", "managedFields": [{"manager": "m"}],
                         "selfLink": "/x"},
            "status": {"phase": "Running"}
        });
        let desired = json!({
            "metadata": {"name": "p", "uid": "u-hook", "resourceVersion": "1", "generation": 9,
                         "creationTimestamp": "t9", "deletionTimestamp": "t10",
                         "deletionGracePeriodSeconds": 30, "managedFields": [], "selfLink": null,
                         "labels": {"a": "b"}},
            "status": {"phase": "Pending", "extra": 1}
        });
        let last = json!({"metadata": {"name": "p", "uid": "u-old"}, "status": {"phase": "x"}});
        let merged = merge(&observed, Some(&last), &desired);
        let mut expected = observed.clone();
        expected["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(merged, expected);
        // Observed without status: desired status is not added.
        let merged = merge(&json!({"metadata": {}}), None, &json!({"status": {"a": 1}}));
        assert_eq!(merged, json!({"metadata": {}}));
    }

    #[test]
    fn system_metadata_survives_a_desired_metadata_of_the_wrong_type() {
        let observed = json!({"metadata": {"name": "p", "uid": "u"}});
        let merged = merge(&observed, None, &json!({"metadata": "oops"}));
        assert_eq!(merged, json!({"metadata": {"uid": "u"}}));
    }

    #[test]
    fn equal_numbers_keep_the_observed_representation() {
        let observed = json!({"replicas": 3, "l": [1, 2], "big": u64::MAX, "f": 0.5});
        let desired = json!({"replicas": 3.0, "l": [1.0, 2.0], "big": u64::MAX, "f": 0.5});
        let merged = merge(&observed, None, &desired);
        assert_eq!(merged, observed);
        assert!(merged["replicas"].is_u64());
        assert!(merged["l"][0].is_u64());
        assert_eq!(merged["big"].as_u64(), Some(u64::MAX));
        // A different number takes the desired value, kept exactly.
        let merged = merge(&observed, None, &json!({"big": u64::MAX - 1, "f": 0.25}));
        assert_eq!(merged["big"].as_u64(), Some(u64::MAX - 1));
        assert_eq!(merged["f"].as_f64(), Some(0.25));
    }

    // ---- apply ----

    fn deployment(image: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": image}]}}}
        })
    }

    #[test]
    fn a_resync_of_the_same_desired_state_writes_nothing() {
        let desired = deployment("web:1");
        let observed = stored(&for_create(&desired));
        let a = apply_ok(&observed, &desired);
        assert!(!a.changed);
        assert_eq!(a.object, observed);
        assert!(a.changes.is_empty());
        assert_eq!(a.warning, None);
    }

    #[test]
    fn apply_twice_is_a_no_op_the_second_time() {
        // An adopted orphan without the annotation: the first apply only records it.
        let desired = deployment("web:1");
        let orphan = stored(&desired);
        let first = apply_ok(&orphan, &desired);
        assert!(first.changed);
        assert_eq!(
            paths(&first),
            ["metadata.annotations[\"metacontroller.k8s.io/last-applied-configuration\"]"]
        );
        assert_eq!(first.changes[0].old, None);
        assert_eq!(first.object["metadata"]["uid"], "u-1");
        let second = apply_ok(&first.object, &desired);
        assert!(!second.changed);
        assert_eq!(second.object, first.object);
    }

    #[test]
    fn kubectl_style_scenarios() {
        let v1 = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns", "labels": {"app": "x", "tier": "web"}},
            "data": {"a": "1", "b": "2", "mode": "fast"}
        });
        let mut live = stored(&for_create(&v1));
        // Another actor adds a label and a data key, and changes a field the hook owns.
        live["metadata"]["labels"]["owner"] = json!("alice");
        live["data"]["extra"] = json!("kept");
        live["data"]["mode"] = json!("slow");
        // The hook now drops the tier label and key b.
        let v2 = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "ns", "labels": {"app": "x"}},
            "data": {"a": "1", "mode": "fast"}
        });
        let a = apply_ok(&live, &v2);
        assert!(a.changed);
        assert_eq!(
            a.object["metadata"]["labels"],
            json!({"app": "x", "owner": "alice"})
        );
        assert_eq!(
            a.object["data"],
            json!({"a": "1", "mode": "fast", "extra": "kept"})
        );
        assert_eq!(last_applied(&a.object), v2);
        assert_eq!(
            a.changes,
            vec![
                FieldChange {
                    path: "metadata.labels.tier".into(),
                    old: Some(json!("web")),
                    new: None
                },
                FieldChange {
                    path: "data.b".into(),
                    old: Some(json!("2")),
                    new: None
                },
                FieldChange {
                    path: "data.mode".into(),
                    old: Some(json!("slow")),
                    new: Some(json!("fast"))
                },
            ]
        );
        // Once written, the same desired state is a no-op, and the user's additions stay.
        let again = apply_ok(&a.object, &v2);
        assert!(!again.changed);
    }

    #[test]
    fn a_field_set_back_by_someone_else_is_reset_on_every_sync() {
        let desired = deployment("web:1");
        let mut live = stored(&for_create(&desired));
        live["spec"]["replicas"] = json!(5);
        let a = apply_ok(&live, &desired);
        assert_eq!(paths(&a), ["spec.replicas"]);
        assert_eq!(a.object["spec"]["replicas"], 2);
        assert_eq!(a.object["metadata"]["resourceVersion"], "17");
    }

    #[test]
    fn changes_name_list_items_by_merge_key() {
        let live = stored(&for_create(&deployment("web:1")));
        let a = apply_ok(&live, &deployment("web:2"));
        assert_eq!(
            a.changes,
            vec![FieldChange {
                path: "spec.template.spec.containers[name=web].image".into(),
                old: Some(json!("web:1")),
                new: Some(json!("web:2")),
            }]
        );
        assert_eq!(
            a.object["spec"]["template"]["spec"]["containers"][0]["image"],
            "web:2"
        );
        assert_eq!(last_applied(&a.object), deployment("web:2"));
    }

    #[test]
    fn changes_for_added_removed_quoted_and_replaced_fields() {
        let mut d1 = deployment("web:1");
        d1["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["a", "b"]);
        d1["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .expect("containers")
            .push(json!({"name": "side", "image": "s:1"}));
        let live = stored(&for_create(&d1));
        let mut d2 = deployment("web:1");
        d2["metadata"]["labels"]["app.kubernetes.io/name"] = json!("web");
        d2["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["a", "c"]);
        d2["spec"]["template"]["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80}]);
        let a = apply_ok(&live, &d2);
        assert_eq!(
            paths(&a),
            [
                "metadata.labels[\"app.kubernetes.io/name\"]",
                "spec.template.spec.containers[name=web].args[1]",
                "spec.template.spec.containers[name=web].ports",
                "spec.template.spec.containers[name=side]",
            ]
        );
        assert_eq!(a.changes[0].old, None);
        assert_eq!(a.changes[2].new, Some(json!([{"containerPort": 80}])));
        assert_eq!(a.changes[3].new, None);
        // A list whose length changes is reported whole.
        let mut d3 = d2.clone();
        d3["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["a"]);
        let b = apply_ok(&stored(&for_create(&d2)), &d3);
        assert_eq!(paths(&b), ["spec.template.spec.containers[name=web].args"]);
        assert_eq!(b.changes[0].old, Some(json!(["a", "c"])));
        assert_eq!(b.changes[0].new, Some(json!(["a"])));
    }

    #[test]
    fn field_changes_serialize_without_absent_sides() {
        let c = FieldChange {
            path: "data.x".into(),
            old: None,
            new: Some(json!(1)),
        };
        assert_eq!(
            serde_json::to_value(&c).expect("serialize"),
            json!({"path": "data.x", "new": 1})
        );
    }

    #[test]
    fn an_equivalent_annotation_written_differently_is_kept() {
        let desired = cm(json!({"b": "x", "a": "y"}));
        let mut live = stored(&for_create(&desired));
        // As another writer might have recorded it: other key order, spacing, float spelling.
        live["metadata"]["annotations"][LAST_APPLIED] = json!(
            "{ \"data\": {\"a\": \"y\", \"b\": \"x\"}, \"kind\": \"ConfigMap\", \
             \"metadata\": {\"namespace\": \"ns\", \"name\": \"c\"}, \"apiVersion\": \"v1\" }"
        );
        let a = apply_ok(&live, &desired);
        assert!(!a.changed);
        assert_eq!(a.object, live);
    }

    #[test]
    fn the_annotation_is_go_style_compact_json() {
        let desired = json!({
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "c", "labels": {"z": "1", "a": "2"}},
            "data": {"cmd": "a && b <x>", "n": 3}
        });
        let created = for_create(&desired);
        assert_eq!(
            created["metadata"]["annotations"][LAST_APPLIED],
            "{\"apiVersion\":\"v1\",\"data\":{\"cmd\":\"a \\u0026\\u0026 b \\u003cx\\u003e\",\"n\":3},\
             \"kind\":\"ConfigMap\",\"metadata\":{\"labels\":{\"a\":\"2\",\"z\":\"1\"},\"name\":\"c\"}}"
        );
        assert_eq!(last_applied(&created), desired);
    }

    #[test]
    fn for_create_drops_system_fields_and_records_the_rest() {
        let desired = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "uid": "x", "resourceVersion": "3", "generation": 1,
                         "managedFields": [], "creationTimestamp": "t",
                         "annotations": {"keep": "me", LAST_APPLIED: "{\"bogus\":1}"}},
            "status": {"x": 1},
            "data": {"a": "1"}
        });
        let created = for_create(&desired);
        let expected_record = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {"keep": "me"}},
            "data": {"a": "1"}
        });
        assert_eq!(last_applied(&created), expected_record);
        let mut expected = expected_record.clone();
        expected["metadata"]["annotations"][LAST_APPLIED] =
            created["metadata"]["annotations"][LAST_APPLIED].clone();
        assert_eq!(created, expected);
        // Without metadata at all, metadata and the annotation are created.
        let created = for_create(&json!({"kind": "X"}));
        assert_eq!(last_applied(&created), json!({"kind": "X"}));
        // Not an object: returned as is.
        assert_eq!(for_create(&json!([1])), json!([1]));
    }

    #[test]
    fn a_last_applied_annotation_from_the_hook_is_ignored() {
        let mut desired = cm(json!({"a": "1"}));
        let live = stored(&for_create(&desired));
        desired["metadata"]["annotations"] = json!({LAST_APPLIED: "{\"junk\":true}"});
        let a = apply_ok(&live, &desired);
        assert!(!a.changed);
    }

    #[test]
    fn an_unparseable_annotation_is_a_warning_and_merges_without_last_applied() {
        let desired = cm(json!({"a": "1"}));
        let mut live = stored(&for_create(&cm(json!({"a": "1", "old": "x"}))));
        live["metadata"]["annotations"][LAST_APPLIED] = json!("{not json");
        let a = apply_ok(&live, &desired);
        let warning = a.warning.as_deref().expect("warning");
        assert!(warning.contains(LAST_APPLIED), "{warning}");
        assert!(warning.contains("ConfigMap ns/c"), "{warning}");
        assert!(warning.contains("not valid JSON"), "{warning}");
        // Without last applied state the dropped key stays; the annotation is repaired.
        assert_eq!(a.object["data"], json!({"a": "1", "old": "x"}));
        assert_eq!(last_applied(&a.object), desired);
        assert!(a.changed);
        assert_eq!(a.changes.len(), 1);
        assert_eq!(a.changes[0].old, Some(json!("{not json")));
        // After the repair the next apply is a no-op without a warning.
        let b = apply_ok(&a.object, &desired);
        assert!(!b.changed);
        assert_eq!(b.warning, None);
    }

    #[test]
    fn annotations_of_the_wrong_shape_are_warnings() {
        let desired = cm(json!({"a": "1"}));
        for (value, expect) in [
            (json!("[1, 2]"), "holds a JSON array"),
            (json!("null"), "holds a JSON null"),
            (json!(7), "is a JSON number, not a string"),
        ] {
            let mut live = stored(&for_create(&desired));
            live["metadata"]["annotations"][LAST_APPLIED] = value;
            let a = apply_ok(&live, &desired);
            let warning = a.warning.expect("warning");
            assert!(warning.contains(expect), "{warning}");
            assert!(a.changed);
        }
        // An empty annotation (Metacontroller blanks it) means "none", silently.
        let mut live = stored(&desired);
        live["metadata"]["annotations"] = json!({LAST_APPLIED: ""});
        let a = apply_ok(&live, &desired);
        assert_eq!(a.warning, None);
        assert_eq!(last_applied(&a.object), desired);
    }

    #[test]
    fn non_objects_are_errors() {
        let obj = cm(json!({}));
        let err = apply(&json!([1]), &obj).expect_err("observed array");
        assert_eq!(err, ApplyError::ObservedNotObject { found: "array" });
        assert!(err.to_string().contains("observed object"), "{err}");
        let err = apply(&obj, &json!("pod")).expect_err("desired string");
        assert_eq!(err, ApplyError::DesiredNotObject { found: "string" });
        assert!(err.to_string().contains("the hook must answer"), "{err}");
        let err = apply(&obj, &Value::Null).expect_err("desired null");
        assert_eq!(err, ApplyError::DesiredNotObject { found: "null" });
    }

    #[test]
    fn odd_metadata_shapes_do_not_panic() {
        let desired = cm(json!({"a": "1"}));
        for observed in [
            json!({"metadata": "x"}),
            json!({"metadata": {"annotations": "x"}}),
            json!({"metadata": {"annotations": null}}),
            json!({}),
        ] {
            let a = apply_ok(&observed, &desired);
            assert_eq!(last_applied(&a.object), desired);
        }
        let a = apply_ok(
            &json!({"metadata": {"uid": "u"}}),
            &json!({"metadata": null}),
        );
        assert_eq!(a.object["metadata"]["uid"], "u");
    }

    #[test]
    fn integral_floats_from_the_hook_become_integers() {
        let desired = json!({"kind": "X", "metadata": {"name": "x"},
                             "spec": {"replicas": 2.0, "ratio": 2.5, "huge": 1e20,
                                      "neg": -4.0, "big": 1.8e19, "l": [1.0]}});
        let created = for_create(&desired);
        let spec = &created["spec"];
        assert!(spec["replicas"].is_i64() || spec["replicas"].is_u64());
        assert_eq!(spec["replicas"].as_u64(), Some(2));
        assert_eq!(spec["neg"].as_i64(), Some(-4));
        assert_eq!(spec["big"].as_u64(), Some(18_000_000_000_000_000_000));
        assert!(spec["l"][0].is_u64());
        assert!(spec["ratio"].is_f64());
        assert!(spec["huge"].is_f64());
        assert!(
            created["metadata"]["annotations"][LAST_APPLIED]
                .as_str()
                .expect("annotation")
                .contains("\"replicas\":2}")
        );
        // Also for fields added by an update.
        let live = stored(&for_create(
            &json!({"kind": "X", "metadata": {"name": "x"}}),
        ));
        let a = apply_ok(&live, &desired);
        assert!(a.object["spec"]["replicas"].is_u64());
    }

    #[test]
    fn a_hook_answering_floats_for_integers_causes_no_write() {
        let mut desired = deployment("web:1");
        let live = stored(&for_create(&desired));
        desired["spec"]["replicas"] = json!(2.0);
        let a = apply_ok(&live, &desired);
        assert!(!a.changed, "{:?}", a.changes);
        assert!(a.object["spec"]["replicas"].is_u64());
    }

    #[test]
    fn a_pod_with_server_defaults_is_not_changed() {
        let desired = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "ns", "labels": {"app": "web"}},
            "spec": {
                "containers": [{
                    "name": "web", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "name": "http"}],
                    "env": [{"name": "MODE", "value": "prod"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "resources": {"limits": {"cpu": "500m"}}
                }],
                "volumes": [{"name": "data", "emptyDir": {}}]
            }
        });
        let mut live = stored(&for_create(&desired));
        live["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "example.com/v1", "kind": "Set", "name": "web", "uid": "p-1",
            "controller": true, "blockOwnerDeletion": true
        }]);
        let spec = &mut live["spec"];
        let c = &mut spec["containers"][0];
        c["terminationMessagePath"] = json!("/dev/termination-log");
        c["terminationMessagePolicy"] = json!("File");
        c["imagePullPolicy"] = json!("IfNotPresent");
        c["ports"][0]["protocol"] = json!("TCP");
        c["resources"]["requests"] = json!({"cpu": "500m"});
        c["volumeMounts"]
            .as_array_mut()
            .expect("mounts")
            .push(json!({"name": "kube-api-access-x", "readOnly": true,
                         "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}));
        spec["volumes"].as_array_mut().expect("volumes").push(
            json!({"name": "kube-api-access-x", "projected": {"defaultMode": 420,
                         "sources": [{"serviceAccountToken": {"expirationSeconds": 3607,
                                                              "path": "token"}}]}}),
        );
        spec["dnsPolicy"] = json!("ClusterFirst");
        spec["restartPolicy"] = json!("Always");
        spec["schedulerName"] = json!("default-scheduler");
        spec["securityContext"] = json!({});
        spec["serviceAccountName"] = json!("default");
        spec["terminationGracePeriodSeconds"] = json!(30);
        spec["enableServiceLinks"] = json!(true);
        spec["preemptionPolicy"] = json!("PreemptLowerPriority");
        spec["priority"] = json!(0);
        spec["nodeName"] = json!("node-1");
        spec["tolerations"] = json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300}
        ]);
        live["status"] = json!({"phase": "Running", "podIP": "10.0.0.5",
                                "conditions": [{"type": "Ready", "status": "True"}]});
        let a = apply_ok(&live, &desired);
        assert!(!a.changed, "{:?}", a.changes);
        assert_eq!(a.object, live);
        // A real change on top of the defaults touches only that field.
        let mut newer = desired.clone();
        newer["spec"]["containers"][0]["env"][0]["value"] = json!("debug");
        let b = apply_ok(&live, &newer);
        assert_eq!(
            paths(&b),
            ["spec.containers[name=web].env[name=MODE].value"]
        );
        let mut expected = live.clone();
        expected["spec"]["containers"][0]["env"][0]["value"] = json!("debug");
        expected["metadata"]["annotations"][LAST_APPLIED] =
            b.object["metadata"]["annotations"][LAST_APPLIED].clone();
        assert_eq!(b.object, expected);
    }

    // ---- comparing the way the server stores ----

    /// `desired` created, then stored by a kube-apiserver that normalizes: `server` is the
    /// object as that server returns it (without the annotation, which is added here).
    fn stored_by_server(desired: &Value, server: Value) -> Value {
        let created = for_create(desired);
        let mut obj = stored(&json!({"metadata": {"name": "x"}}));
        obj["apiVersion"] = desired["apiVersion"].clone();
        obj["kind"] = desired["kind"].clone();
        for (k, v) in server.as_object().expect("object") {
            obj[k] = v.clone();
        }
        let meta = obj["metadata"].as_object_mut().expect("metadata");
        for (k, v) in created["metadata"].as_object().expect("metadata") {
            meta.insert(k.clone(), v.clone());
        }
        obj
    }

    fn secret(body: Value) -> Value {
        let mut s = json!({"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": "x", "namespace": "ns"}});
        for (k, v) in body.as_object().expect("object") {
            s[k] = v.clone();
        }
        s
    }

    #[test]
    fn secret_string_data_converges_on_a_folding_server() {
        let desired = secret(json!({"stringData": {"a": "hello"}}));
        let observed = stored_by_server(
            &desired,
            secret(json!({"data": {"a": "aGVsbG8="}, "type": "Opaque"})),
        );
        let a = apply_ok(&observed, &desired);
        assert!(!a.changed, "{:?}", a.changes);
        // The annotation still records what the hook wrote.
        assert_eq!(last_applied(&a.object)["stringData"], json!({"a": "hello"}));
        // A changed value is a change of data.a.
        let a = apply_ok(&observed, &secret(json!({"stringData": {"a": "bye"}})));
        assert_eq!(paths(&a), ["data.a"]);
        assert_eq!(a.object["data"]["a"], json!("Ynll"));
    }

    #[test]
    fn secret_string_data_wins_over_data_and_three_way_deletes_work() {
        let desired =
            secret(json!({"data": {"a": "b2xk", "b": "Yg=="}, "stringData": {"a": "new"}}));
        let observed = stored_by_server(
            &desired,
            secret(json!({"data": {"a": "bmV3", "b": "Yg=="}, "type": "Opaque"})),
        );
        assert!(!apply_ok(&observed, &desired).changed);
        // The hook stops writing stringData.a: data.a is what data says again.
        let a = apply_ok(
            &observed,
            &secret(json!({"data": {"a": "b2xk", "b": "Yg=="}})),
        );
        assert_eq!(paths(&a), ["data.a"]);
        assert_eq!(a.object["data"]["a"], json!("b2xk"));
        // A stringData key the hook drops is removed from data.
        let two = secret(json!({"stringData": {"a": "1", "b": "2"}}));
        let observed = stored_by_server(
            &two,
            secret(json!({"data": {"a": "MQ==", "b": "Mg=="}, "type": "Opaque"})),
        );
        let a = apply_ok(&observed, &secret(json!({"stringData": {"a": "1"}})));
        assert_eq!(paths(&a), ["data.b"]);
        assert!(a.object["data"].get("b").is_none());
    }

    #[test]
    fn secret_string_data_on_a_server_that_keeps_it_stays_string_data() {
        let desired = secret(json!({"stringData": {"a": "hello"}}));
        let observed = stored_by_server(&desired, secret(json!({"stringData": {"a": "hello"}})));
        assert!(!apply_ok(&observed, &desired).changed);
    }

    fn sized_deployment(resources: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "x", "namespace": "ns"},
               "spec": {"template": {"spec": {"containers": [
                   {"name": "web", "image": "nginx", "resources": resources}]}}}})
    }

    #[test]
    fn quantities_compare_by_value_and_keep_the_server_spelling() {
        let desired = sized_deployment(json!({"limits": {"cpu": "0.5", "memory": "1024Mi"},
                                        "requests": {"cpu": 0.25, "memory": "0.5Gi"}}));
        let server = sized_deployment(json!({"limits": {"cpu": "500m", "memory": "1Gi"},
                                       "requests": {"cpu": "250m", "memory": "512Mi"}}));
        let observed = stored_by_server(&desired, server);
        let a = apply_ok(&observed, &desired);
        assert!(!a.changed, "{:?}", a.changes);
        // A different quantity is a change, written as the hook wrote it.
        let a = apply_ok(
            &observed,
            &sized_deployment(json!({"limits": {"cpu": "0.6", "memory": "1Gi"},
                               "requests": {"cpu": 0.25, "memory": "0.5Gi"}})),
        );
        assert_eq!(
            paths(&a),
            ["spec.template.spec.containers[name=web].resources.limits.cpu"]
        );
        assert_eq!(
            a.object["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            json!("0.6")
        );
    }

    #[test]
    fn quantities_in_every_pod_template_kind_converge() {
        let pod_spec = |cpu: &str| {
            json!({"containers": [{"name": "c", "resources": {"limits": {"cpu": cpu}}}],
                                            "initContainers": [{"name": "i", "resources": {"requests": {"memory": if cpu == "0.5" {"1024Mi"} else {"1Gi"}}}}]})
        };
        for (api, kind) in [
            ("v1", "Pod"),
            ("v1", "PodTemplate"),
            ("v1", "ReplicationController"),
            ("apps/v1", "Deployment"),
            ("apps/v1", "ReplicaSet"),
            ("apps/v1", "StatefulSet"),
            ("apps/v1", "DaemonSet"),
            ("batch/v1", "Job"),
            ("batch/v1", "CronJob"),
        ] {
            let wrap = |spec: Value| {
                let body = match kind {
                    "Pod" => json!({"spec": spec}),
                    "PodTemplate" => json!({"template": {"spec": spec}}),
                    "CronJob" => {
                        json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}})
                    }
                    _ => json!({"spec": {"template": {"spec": spec}}}),
                };
                let mut o = json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x", "namespace": "ns"}});
                for (k, v) in body.as_object().expect("object") {
                    o[k] = v.clone();
                }
                o
            };
            let desired = wrap(pod_spec("0.5"));
            let observed = stored_by_server(&desired, wrap(pod_spec("500m")));
            let a = apply_ok(&observed, &desired);
            assert!(!a.changed, "{kind}: {:?}", a.changes);
            // The same spelling in a custom resource is a string like any other.
            let cr = |spec: Value| {
                let mut o = wrap(spec);
                o["apiVersion"] = json!("example.com/v1");
                o
            };
            let desired = cr(pod_spec("0.5"));
            let observed = stored_by_server(&desired, cr(pod_spec("500m")));
            assert!(
                apply_ok(&observed, &desired).changed,
                "{kind} as a custom resource"
            );
        }
    }

    #[test]
    fn pvc_quota_and_limit_range_quantities_converge() {
        for (desired, server) in [
            (
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "x"},
                       "spec": {"resources": {"requests": {"storage": "1024Mi"}}}}),
                json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}}),
            ),
            (
                json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "x"},
                       "spec": {"hard": {"cpu": "1.5", "pods": 10}}}),
                json!({"spec": {"hard": {"cpu": "1500m", "pods": "10"}}}),
            ),
            (
                json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "x"},
                       "spec": {"limits": [{"type": "Container", "default": {"memory": "0.5Gi"}}]}}),
                json!({"spec": {"limits": [{"type": "Container", "default": {"memory": "512Mi"}}]}}),
            ),
            (
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "x"},
                       "spec": {"volumeClaimTemplates": [{"metadata": {"name": "d"},
                                "spec": {"resources": {"requests": {"storage": "1e9"}}}}]}}),
                json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "d"},
                                "spec": {"resources": {"requests": {"storage": "1G"}}}}]}}),
            ),
        ] {
            let observed = stored_by_server(&desired, server);
            let a = apply_ok(&observed, &desired);
            assert!(!a.changed, "{}: {:?}", desired["kind"], a.changes);
        }
    }

    #[test]
    fn int_or_string_is_not_a_quantity_and_is_written_as_asked() {
        let svc = |port: Value| {
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
                                       "spec": {"ports": [{"port": 80, "targetPort": port}]}})
        };
        let observed = stored_by_server(&svc(json!(80)), svc(json!(80)));
        assert!(!apply_ok(&observed, &svc(json!(80))).changed);
        // "80" is another value for the server (it keeps the type): written, never "fixed".
        let a = apply_ok(&observed, &svc(json!("80")));
        assert_eq!(paths(&a), ["spec.ports[port=80].targetPort"]);
        assert_eq!(a.object["spec"]["ports"][0]["targetPort"], json!("80"));
    }

    #[test]
    fn empty_maps_lists_and_nulls_are_absent() {
        let desired = json!({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "x", "labels": {}, "annotations": {}},
                             "data": {}, "binaryData": null});
        // The server dropped all of them.
        let observed = stored_by_server(&desired, json!({}));
        let a = apply_ok(&observed, &desired);
        assert!(!a.changed, "{:?}", a.changes);
        let pod = |env: Value, sc: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
            "spec": {"containers": [{"name": "c", "image": "i", "env": env}], "securityContext": sc}})
        };
        // env: [] dropped; securityContext null on a server that defaults it to {}.
        let desired = pod(json!([]), json!(null));
        let observed = stored_by_server(
            &desired,
            json!({"spec": {"containers": [{"name": "c", "image": "i"}], "securityContext": {}}}),
        );
        assert!(!apply_ok(&observed, &desired).changed);
        // A value applied before and null now is removed (three-way), absent or null alike.
        let before = pod(
            json!([{"name": "A", "value": "1"}]),
            json!({"runAsUser": 1}),
        );
        let observed = stored_by_server(&before, before.clone());
        for now in [pod(json!([]), json!(null)), pod(json!(null), json!({}))] {
            let a = apply_ok(&observed, &now);
            let spec = &a.object["spec"];
            let env = spec["containers"][0].get("env");
            assert!(env.is_none_or(|e| *e == json!([])), "{spec}");
            let sc = spec.get("securityContext");
            assert!(sc.is_none_or(|s| *s == json!({})), "{spec}");
            // Stored as the server does (no empty list), the next apply writes nothing.
            let mut stored = a.object.clone();
            if let Some(c) = stored["spec"]["containers"][0].as_object_mut() {
                c.shift_remove("env");
            }
            assert!(!apply_ok(&stored, &now).changed, "{stored}");
        }
    }

    #[test]
    fn empties_are_sent_in_new_objects_and_items() {
        let pod = |volumes: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": volumes}})
        };
        let before = pod(json!([{"name": "a", "emptyDir": {}}]));
        let observed = stored_by_server(&before, before.clone());
        assert!(!apply_ok(&observed, &before).changed);
        // A new volume keeps its `emptyDir: {}` (a volume needs a source).
        let a = apply_ok(
            &observed,
            &pod(json!([{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}])),
        );
        assert_eq!(
            a.object["spec"]["volumes"][1],
            json!({"name": "b", "emptyDir": {}})
        );
        // A new subtree keeps its empty members too (a CRD's `subresources: {status: {}}`).
        let crd = |versions: Value| {
            json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "spec": {"versions": versions}})
        };
        let before = crd(json!([{"name": "v1"}]));
        let observed = stored_by_server(&before, before.clone());
        let a = apply_ok(
            &observed,
            &crd(json!([{"name": "v1", "subresources": {"status": {}}}])),
        );
        assert_eq!(
            a.object["spec"]["versions"][0]["subresources"],
            json!({"status": {}})
        );
    }

    #[test]
    fn held_fields_keep_the_observed_value_while_the_hook_asks_the_same() {
        let desired = sized_deployment(json!({"limits": {"cpu": "2"}}));
        let observed =
            stored_by_server(&desired, sized_deployment(json!({"limits": {"cpu": "1"}})));
        let path = "spec.template.spec.containers[name=web].resources.limits.cpu";
        let held = [HeldField {
            path: path.into(),
            value: Some(json!("2")),
        }];
        let a = apply_holding(&observed, &desired, &held).expect("apply");
        assert!(!a.changed, "{:?}", a.changes);
        // Another value from the hook is not held.
        let a = apply_holding(
            &observed,
            &sized_deployment(json!({"limits": {"cpu": "3"}})),
            &held,
        )
        .expect("apply");
        assert_eq!(paths(&a), [path]);
        // Held removals and additions, with quoted keys.
        let obs = stored(&for_create(&cm(json!({"a.b": "1"}))));
        let held = [
            HeldField {
                path: "data[\"a.b\"]".into(),
                value: None,
            },
            HeldField {
                path: "data.new".into(),
                value: Some(json!("x")),
            },
        ];
        let a = apply_holding(&obs, &cm(json!({"new": "x"})), &held).expect("apply");
        // Only the annotation (what the hook asked) changes.
        assert_eq!(
            paths(&a),
            [format!("metadata.annotations[\"{LAST_APPLIED}\"]")]
        );
        assert_eq!(a.object["data"], json!({"a.b": "1"}));
    }

    #[test]
    fn paths_parse_back() {
        assert_eq!(
            parse_path("spec.c[name=web].x[\"a.b\\\"c\"][2]").expect("parses"),
            vec![
                Step::Key("spec".into()),
                Step::Key("c".into()),
                Step::Item("name".into(), "web".into()),
                Step::Key("x".into()),
                Step::Key("a.b\"c".into()),
                Step::Index(2),
            ]
        );
        assert!(parse_path("a[x").is_none());
    }
}
