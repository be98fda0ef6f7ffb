//! Server-side apply (`application/apply-patch+yaml`) and the `metadata.managedFields` bookkeeping
//! that every write does: which manager owns which fields (FieldsV1 encoding), merging an applied
//! configuration into the live object, pruning fields a manager stopped applying, and apply
//! conflicts with kube-apiserver's error text. Lists of a custom resource are associative, sets
//! or atomic by its CRD schema (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`; atomic
//! when unset, as for kube-apiserver); lists of built-in kinds (and parts of a custom resource its
//! schema does not describe, such as `metadata`) by [`super::patch::list_merge_key`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::crd::Schema;
use super::patch::{ListKey, list_merge_key};

const APPLY: &str = "Apply";
const UPDATE: &str = "Update";
const BEFORE_FIRST_APPLY: &str = "before-first-apply";
/// The field manager of `kubectl apply --server-side`, which kube-apiserver lets take over from
/// client-side apply (its lastAppliedManager and lastAppliedUpdater).
const KUBECTL: &str = "kubectl";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Metadata fields set by the server: never taken from an applied configuration, never owned.
const SERVER_METADATA: [&str; 7] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "managedFields",
    "selfLink",
];

/// Why a server-side apply was refused.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Fields the configuration changes are owned by other managers (kube-apiserver answers 409).
    #[error("{}", conflict_message(.conflicts))]
    Conflict {
        /// One entry per conflicting field and manager.
        conflicts: Vec<Conflict>,
    },
    /// The applied configuration cannot be applied at all (kube-apiserver answers 400).
    #[error("{0}")]
    Invalid(String),
    /// The applied configuration does not fit the schema's list types (kube-apiserver answers
    /// 500 "failed to create typed patch object"); the text is structured-merge-diff's.
    #[error("{0}")]
    TypedPatch(String),
}

/// One field the applied configuration would change that another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager's name.
    pub manager: String,
    /// The manager as kube-apiserver names it in messages: `"kubectl"`, or
    /// `"kubectl-client-side-apply" using v1` for an updater, plus ` with subresource "status"`.
    pub manager_description: String,
    /// The field path, like `.spec.replicas` or `.spec.containers[name="app"].image`.
    pub field: String,
}

/// kube-apiserver's conflict message, e.g.
/// `Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.a`.
fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager_description, only.field
        );
    }
    let mut by_manager: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for conflict in conflicts {
        by_manager
            .entry(&conflict.manager_description)
            .or_default()
            .push(&conflict.field);
    }
    let mut lines = Vec::new();
    for (manager, fields) in by_manager {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(fields.iter().map(|field| format!("- {field}")));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Server-side apply of `applied` (the manager's full intent) onto `live` (`None` = create).
/// Returns the new object with `metadata.managedFields` updated. Fields this manager applied before
/// and no longer specifies are removed unless another manager also owns them. Fields owned by
/// another manager and changed by this apply are conflicts unless `force`, which moves their
/// ownership to this manager. Never touches `metadata.{uid, resourceVersion, generation,
/// creationTimestamp, deletionTimestamp, managedFields}`, nor `status` unless
/// `subresource == Some("status")`, in which case only `status` is applied.
///
/// `schema` is the CRD schema of a custom resource (None for built-in kinds): it decides how
/// lists merge, and an applied list of `x-kubernetes-list-type: map` with two items of the same
/// key is refused as kube-apiserver refuses it (500, "duplicate entries for key").
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    subresource: Option<&str>,
    now: &str,
    schema: Option<&Schema>,
) -> Result<Value, ApplyError> {
    let config = applied_config(live, applied, subresource)?;
    if let Some(s) = schema {
        duplicate_map_keys(&config, At::root(Some(s)), "")?;
    }
    let old = live
        .filter(|v| v.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let api_version = api_version_of(&old)
        .or_else(|| api_version_of(&config))
        .unwrap_or_default();
    let config_set = owned_fields(&config, schema, false);
    let mut entries = decode_entries(&old);
    if live.is_some() && entries.is_empty() {
        entries.push(Entry::new(
            BEFORE_FIRST_APPLY,
            UPDATE,
            None,
            api_version.clone(),
            now,
            owned_fields(&old, schema, true),
        ));
    }

    let mut merged = old.clone();
    merge(&mut merged, &config, At::root(schema));
    let own = entries
        .iter()
        .position(|e| e.is(manager, APPLY, subresource));
    if let Some(own) = own {
        let mut keep = config_set.clone();
        for (i, entry) in entries.iter().enumerate() {
            if i != own {
                keep.union(&entry.fields);
            }
        }
        prune(
            &mut merged,
            &entries[own].fields,
            Some(&keep),
            At::root(schema),
        );
    }

    let (changed, removed) = diff(&old, &merged, schema);
    let conflicts = apply_conflicts(&entries, own, &changed, manager, &old, &api_version, schema);
    if !conflicts.is_empty() && !force {
        return Err(ApplyError::Conflict { conflicts });
    }
    take_over(&mut entries, own, &changed, &removed, manager);
    let object_changed = merged != old;
    record_apply(
        &mut entries,
        manager,
        subresource,
        config_set,
        api_version,
        object_changed,
        now,
    );
    write_entries(&mut merged, entries);
    if manager == KUBECTL && subresource.is_none() {
        sync_last_applied(&mut merged, applied);
    }
    Ok(merged)
}

/// The part of `applied` that is applied, without nulls: only `status` for the status
/// subresource (of an existing object), else everything but `status` and the server-set
/// metadata. Refuses what kube-apiserver refuses.
fn applied_config(
    live: Option<&Value>,
    applied: &Value,
    subresource: Option<&str>,
) -> Result<Value, ApplyError> {
    if !applied.is_object() {
        return Err(ApplyError::Invalid(
            "the applied configuration must be an object".to_string(),
        ));
    }
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApplyError::Invalid(
            "metadata.managedFields must be nil".to_string(),
        ));
    }
    let mut config = without_nulls(applied);
    if subresource == Some("status") {
        if live.is_none() {
            return Err(ApplyError::Invalid(
                "the status of an object that does not exist cannot be applied".to_string(),
            ));
        }
        let mut status_only = Map::new();
        if let Some(status) = config.get("status") {
            status_only.insert("status".to_string(), status.clone());
        }
        config = Value::Object(status_only);
    } else if let Value::Object(map) = &mut config {
        map.shift_remove("status");
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            for field in SERVER_METADATA {
                metadata.shift_remove(field);
            }
        }
    }
    Ok(config)
}

/// The fields of `value` a manager can own (see [`collect`] for `every_node`).
fn owned_fields(value: &Value, schema: Option<&Schema>, every_node: bool) -> FieldSet {
    let mut set = FieldSet::default();
    collect(
        value,
        At::root(schema),
        &mut Vec::new(),
        &mut set,
        every_node,
    );
    strip_server_fields(&mut set);
    set
}

/// The fields other managers own (all but entry `own`) that this apply changes. `kubectl
/// apply --server-side` takes over, without conflicts, the fields the last client-side apply
/// set that still have the values it set.
fn apply_conflicts(
    entries: &[Entry],
    own: Option<usize>,
    changed: &FieldSet,
    manager: &str,
    old: &Value,
    api_version: &str,
    schema: Option<&Schema>,
) -> Vec<Conflict> {
    let upgradable = (manager == KUBECTL)
        .then(|| fields_from_last_applied(old, api_version, schema))
        .flatten()
        .unwrap_or_default();
    let mut conflicts = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        if Some(i) == own {
            continue;
        }
        for path in entry
            .fields
            .intersection(changed)
            .difference(&upgradable)
            .member_paths()
        {
            conflicts.push(Conflict {
                manager: entry.manager.clone(),
                manager_description: entry.description(),
                field: display_path(&path),
            });
        }
    }
    conflicts
}

/// The other managers lose the fields this apply changed or removed; for `kubectl`, the
/// client-side appliers (owners of the last-applied annotation) lose their entries.
fn take_over(
    entries: &mut Vec<Entry>,
    own: Option<usize>,
    changed: &FieldSet,
    removed: &FieldSet,
    manager: &str,
) {
    for (i, entry) in entries.iter_mut().enumerate() {
        if Some(i) != own {
            entry.fields = entry.fields.difference(changed).difference(removed);
        }
    }
    if manager == KUBECTL {
        let annotation = ["f:metadata", "f:annotations", &format!("f:{LAST_APPLIED}")];
        entries.retain(|e| e.manager == KUBECTL || !e.fields.has(&annotation));
    }
}

/// The manager's Apply entry now owns `fields` (its time moves only when the object changed
/// or it had none); a new entry when it had none.
fn record_apply(
    entries: &mut Vec<Entry>,
    manager: &str,
    subresource: Option<&str>,
    fields: FieldSet,
    api_version: String,
    object_changed: bool,
    now: &str,
) {
    let own = entries
        .iter()
        .position(|e| e.is(manager, APPLY, subresource));
    match own {
        Some(own) => {
            let entry = &mut entries[own];
            entry.fields = fields;
            entry.api_version = api_version;
            if object_changed || entry.time.is_none() {
                entry.time = Some(now.to_string());
            }
        }
        None => entries.push(Entry::new(
            manager,
            APPLY,
            subresource,
            api_version,
            now,
            fields,
        )),
    }
}

/// The fields of `live`'s last-applied annotation (written by client-side apply at
/// `api_version`) whose values `live` still has: kube-apiserver's
/// `allowedConflictsFromLastApplied`.
fn fields_from_last_applied(
    live: &Value,
    api_version: &str,
    schema: Option<&Schema>,
) -> Option<FieldSet> {
    let text = live
        .pointer("/metadata/annotations")?
        .get(LAST_APPLIED)?
        .as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    if !last.is_object() || api_version_of(&last).as_deref() != Some(api_version) {
        return None;
    }
    let mut fields = FieldSet::default();
    collect(&last, At::root(schema), &mut Vec::new(), &mut fields, true);
    strip_server_fields(&mut fields);
    let (changed, removed) = diff(&last, live, schema);
    Some(fields.difference(&changed).difference(&removed))
}

/// After `kubectl apply --server-side`, an existing last-applied annotation is replaced by the
/// applied configuration, encoded like Go's `encoding/json` (sorted keys, HTML-safe escapes,
/// trailing newline); dropped if annotations would exceed 256 KiB (kube-apiserver's
/// lastAppliedUpdater).
fn sync_last_applied(object: &mut Value, applied: &Value) {
    let Some(Value::Object(annotations)) = object.pointer_mut("/metadata/annotations") else {
        return;
    };
    if annotations
        .get(LAST_APPLIED)
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return;
    }
    let mut config = applied.clone();
    if let Some(Value::Object(a)) = config.pointer_mut("/metadata/annotations") {
        a.shift_remove(LAST_APPLIED);
    }
    let mut text = String::new();
    for c in sorted_keys(&config).to_string().chars() {
        match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(text, "\\u{:04x}", c as u32);
            }
            c => text.push(c),
        }
    }
    text.push('\n');
    annotations.insert(LAST_APPLIED.to_string(), Value::String(text));
    let size: usize = annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > 256 * 1024 {
        annotations.shift_remove(LAST_APPLIED);
    }
}

/// `value` with every object's keys in byte order (how Go encodes maps).
fn sorted_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted_keys(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

/// Records `metadata.managedFields` for a non-apply write (create, update, patch) by `manager`:
/// the fields whose value differs between `old` (`None` = create: every set field) and `new`
/// become owned by `manager` with operation `Update` (merged into its existing Update entry for
/// the same subresource) and are taken from every other manager; removed fields are dropped from
/// every manager. Like kube-apiserver, a main-resource write whose `new` carries a non-empty
/// `managedFields` list uses that list as the starting point (so `[{}]` resets ownership);
/// otherwise `old`'s list is used.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    now: &str,
    schema: Option<&Schema>,
) {
    if !new.is_object() {
        return;
    }
    let new_carries_entries = new
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|entries| !entries.is_empty());
    let mut entries = if subresource.is_none() && new_carries_entries {
        decode_entries(new)
    } else {
        old.map(decode_entries).unwrap_or_default()
    };
    let empty = json!({});
    let (changed, removed) = diff(old.unwrap_or(&empty), new, schema);
    let api_version = api_version_of(new).unwrap_or_default();

    let own = entries
        .iter()
        .position(|e| e.is(manager, UPDATE, subresource));
    for (i, entry) in entries.iter_mut().enumerate() {
        entry.fields = entry.fields.difference(&removed);
        if Some(i) != own {
            entry.fields = entry.fields.difference(&changed);
        }
    }
    if !changed.is_empty() {
        match own {
            Some(own) => {
                let entry = &mut entries[own];
                entry.fields.union(&changed);
                entry.api_version = api_version;
                entry.time = Some(now.to_string());
            }
            None => entries.push(Entry::new(
                manager,
                UPDATE,
                subresource,
                api_version,
                now,
                changed,
            )),
        }
    }
    write_entries(new, entries);
}

fn api_version_of(object: &Value) -> Option<String> {
    object
        .get("apiVersion")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A copy of `value` without `null` object members (an applied `null` means "not specified").
pub(crate) fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// Field sets (the FieldsV1 tree)

/// A set of field paths as a tree. Path elements are FieldsV1 keys: `f:<name>` (object field),
/// `k:<json of key fields>` (associative list item), `v:<json>` (set item). The ordered map keeps
/// kube-apiserver's serialization order (fields, then keys, then values).
#[derive(Debug, Clone, Default, PartialEq)]
struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    fn insert(&mut self, path: &[String]) {
        if path.is_empty() {
            return;
        }
        let mut node = self;
        for element in path {
            node = node.children.entry(element.clone()).or_default();
        }
        node.member = true;
    }

    fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (element, child) in &other.children {
            self.children
                .entry(element.clone())
                .or_default()
                .union(child);
        }
    }

    fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            let rest = match other.children.get(element) {
                Some(other_child) => child.difference(other_child),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(element.clone(), rest);
            }
        }
        out
    }

    /// Whether `path` is a member.
    fn has(&self, path: &[&str]) -> bool {
        let mut node = self;
        for element in path {
            match node.children.get(*element) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.member
    }

    fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            if let Some(other_child) = other.children.get(element) {
                let both = child.intersection(other_child);
                if !both.is_empty() {
                    out.children.insert(element.clone(), both);
                }
            }
        }
        out
    }

    /// Member paths in kube-apiserver's iteration order: a node's members, then its subtrees.
    fn member_paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.walk_members(&mut Vec::new(), &mut out);
        out
    }

    fn walk_members(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (element, child) in &self.children {
            if child.member {
                prefix.push(element.clone());
                out.push(prefix.clone());
                prefix.pop();
            }
        }
        for (element, child) in &self.children {
            if !child.children.is_empty() {
                prefix.push(element.clone());
                child.walk_members(prefix, out);
                prefix.pop();
            }
        }
    }

    fn from_fields_v1(value: &Value) -> FieldSet {
        let Value::Object(map) = value else {
            return FieldSet {
                member: true,
                children: BTreeMap::new(),
            };
        };
        let mut set = FieldSet {
            member: map.is_empty() || map.contains_key("."),
            children: BTreeMap::new(),
        };
        for (element, child) in map {
            if element != "." {
                let child = FieldSet::from_fields_v1(child);
                if !child.is_empty() {
                    set.children.insert(element.clone(), child);
                }
            }
        }
        set
    }

    fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".to_string(), json!({}));
        }
        for (element, child) in &self.children {
            map.insert(element.clone(), child.to_fields_v1());
        }
        Value::Object(map)
    }
}

/// Drops the fields kube-apiserver never records as owned: `apiVersion`, `kind`, the `metadata`
/// map itself, its name and namespace, and the server-set metadata.
fn strip_server_fields(set: &mut FieldSet) {
    set.children.remove("f:apiVersion");
    set.children.remove("f:kind");
    if let Some(metadata) = set.children.get_mut("f:metadata") {
        metadata.member = false;
        for field in SERVER_METADATA.iter().chain(&["name", "namespace"]) {
            metadata.children.remove(&format!("f:{field}"));
        }
        if metadata.is_empty() {
            set.children.remove("f:metadata");
        }
    }
}

/// Renders a path like kube-apiserver: `.spec.containers[name="app"].image`, `.metadata.finalizers[="x"]`.
fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(name) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(name);
        } else if let Some(key) = element.strip_prefix("k:") {
            let fields = match serde_json::from_str::<Value>(key) {
                Ok(Value::Object(fields)) => fields
                    .iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect::<Vec<_>>()
                    .join(","),
                _ => key.to_string(),
            };
            let _ = write!(out, "[{fields}]");
        } else if let Some(value) = element.strip_prefix("v:") {
            let _ = write!(out, "[={value}]");
        } else if let Some(index) = element.strip_prefix("i:") {
            let _ = write!(out, "[{index}]");
        } else {
            out.push_str(element);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// List shapes

/// How a list's items are identified.
enum ListKind<'s> {
    Atomic,
    Set,
    Map(Vec<&'s str>),
}

/// Where a walk over an object is: the field name (for the list shapes of built-in kinds) and,
/// in a custom resource, the CRD schema of the node.
#[derive(Clone, Copy)]
struct At<'f, 's> {
    field: &'f str,
    schema: Option<&'s Schema>,
}

impl<'f, 's> At<'f, 's> {
    fn root(schema: Option<&'s Schema>) -> Self {
        At { field: "", schema }
    }

    /// The node of field `name` of this one.
    fn child<'g>(self, name: &'g str) -> At<'g, 's> {
        At {
            field: name,
            schema: self.schema.and_then(|s| s.field_schema(name)),
        }
    }

    /// The node of this list's items.
    fn item(self) -> At<'static, 's> {
        At {
            field: "",
            schema: self.schema.and_then(Schema::items_schema),
        }
    }
}

/// The shape of the list at `at`: by its CRD schema where there is one, else judged from the
/// field name and the items of either side of a merge or comparison. Ports are keyed by port
/// and protocol (defaulted to TCP), as in the Kubernetes schema.
fn list_kind<'s>(at: At<'_, 's>, items: &[Value], other_items: &[Value]) -> ListKind<'s> {
    if let Some(s) = at.schema {
        return match s.list_type() {
            Some("set") => ListKind::Set,
            Some("map") => ListKind::Map(s.list_map_keys().iter().map(String::as_str).collect()),
            _ => ListKind::Atomic,
        };
    }
    let field = at.field;
    match list_merge_key(field, items).or_else(|| list_merge_key(field, other_items)) {
        None => ListKind::Atomic,
        Some(ListKey::PrimitiveSet) => ListKind::Set,
        Some(ListKey::Field(key @ ("containerPort" | "port"))) => {
            ListKind::Map(vec![key, "protocol"])
        }
        Some(ListKey::Field(key)) => ListKind::Map(vec![key]),
    }
}

/// The path element of every item, or `None` when the list has to be treated as atomic (atomic
/// kind, an item without its key, a non-scalar set item, or duplicates).
fn item_elements(kind: &ListKind, items: &[Value]) -> Option<Vec<String>> {
    let mut elements: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let element = match kind {
            ListKind::Atomic => return None,
            ListKind::Set => {
                if item.is_object() || item.is_array() {
                    return None;
                }
                format!("v:{item}")
            }
            ListKind::Map(keys) => {
                let mut key = Map::new();
                for &name in keys.iter() {
                    let value = match item.get(name) {
                        Some(value) if !value.is_null() => value.clone(),
                        _ if name == "protocol" => json!("TCP"),
                        _ => return None,
                    };
                    key.insert(name.to_string(), value);
                }
                format!("k:{}", Value::Object(key))
            }
        };
        if elements.contains(&element) {
            return None;
        }
        elements.push(element);
    }
    Some(elements)
}

/// LabelSelector and NodeSelectorTerm are atomic structs in Kubernetes: owned and replaced whole.
fn is_atomic_map(value: &Value) -> bool {
    value.get("matchLabels").is_some() || value.get("matchExpressions").is_some()
}

// ---------------------------------------------------------------------------------------------
// Walks over objects

/// Adds the paths of `value` (found at `path`, in field `field`) to `set`. With `every_node`, maps
/// and lists are members too (what an Update records for added nodes); without, only leaves and
/// list items are (what an applied configuration owns).
fn collect(
    value: &Value,
    at: At<'_, '_>,
    path: &mut Vec<String>,
    set: &mut FieldSet,
    every_node: bool,
) {
    match value {
        Value::Object(map) if !is_atomic_map(value) => {
            if every_node {
                set.insert(path);
            }
            for (name, child) in map {
                path.push(format!("f:{name}"));
                collect(child, at.child(name), path, set, every_node);
                path.pop();
            }
        }
        Value::Array(items) => match item_elements(&list_kind(at, items, &[]), items) {
            Some(elements) => {
                if every_node {
                    set.insert(path);
                }
                for (element, item) in elements.into_iter().zip(items) {
                    path.push(element);
                    set.insert(path);
                    collect(item, at.item(), path, set, every_node);
                    path.pop();
                }
            }
            None => set.insert(path),
        },
        _ => set.insert(path),
    }
}

/// The fields added or modified (`.0`) and removed (`.1`) from `old` to `new`, without the fields
/// the server owns.
fn diff(old: &Value, new: &Value, schema: Option<&Schema>) -> (FieldSet, FieldSet) {
    let mut changed = FieldSet::default();
    let mut removed = FieldSet::default();
    compare(
        Some(old),
        Some(new),
        At::root(schema),
        &mut Vec::new(),
        &mut changed,
        &mut removed,
    );
    strip_server_fields(&mut changed);
    strip_server_fields(&mut removed);
    (changed, removed)
}

/// Walks `old` and `new` (the values at `path`, in field `field`) side by side like
/// structured-merge-diff's Compare: added and modified leaves, added maps and list items go to
/// `changed`; everything under a vanished node goes to `removed`.
fn compare(
    old: Option<&Value>,
    new: Option<&Value>,
    at: At<'_, '_>,
    path: &mut Vec<String>,
    changed: &mut FieldSet,
    removed: &mut FieldSet,
) {
    let (old, new) = match (old, new) {
        (None, None) => return,
        (None, Some(new)) => return collect(new, at, path, changed, true),
        (Some(old), None) => return collect(old, at, path, removed, true),
        (Some(old), Some(new)) => (old, new),
    };
    match (old, new) {
        (Value::Object(old_map), Value::Object(new_map))
            if !is_atomic_map(old) && !is_atomic_map(new) =>
        {
            for name in new_map
                .keys()
                .chain(old_map.keys().filter(|k| !new_map.contains_key(*k)))
            {
                path.push(format!("f:{name}"));
                compare(
                    old_map.get(name),
                    new_map.get(name),
                    at.child(name),
                    path,
                    changed,
                    removed,
                );
                path.pop();
            }
            return;
        }
        (Value::Array(old_items), Value::Array(new_items)) => {
            let kind = list_kind(at, new_items, old_items);
            if let (Some(old_elements), Some(new_elements)) = (
                item_elements(&kind, old_items),
                item_elements(&kind, new_items),
            ) {
                for (element, item) in new_elements.iter().zip(new_items) {
                    let old_item = old_elements
                        .iter()
                        .position(|e| e == element)
                        .map(|i| &old_items[i]);
                    path.push(element.clone());
                    compare(old_item, Some(item), at.item(), path, changed, removed);
                    path.pop();
                }
                for (element, item) in old_elements.iter().zip(old_items) {
                    if !new_elements.contains(element) {
                        path.push(element.clone());
                        collect(item, at.item(), path, removed, true);
                        path.pop();
                    }
                }
                return;
            }
        }
        _ => {}
    }
    if old == new {
        return;
    }
    if !has_children(old, at) && !has_children(new, at) {
        changed.insert(path);
    } else {
        // The value changed shape: everything under it went away and came back.
        collect(old, at, path, removed, true);
        collect(new, at, path, changed, true);
    }
}

/// Whether `value` is a node with owned fields below it rather than a leaf.
fn has_children(value: &Value, at: At<'_, '_>) -> bool {
    match value {
        Value::Object(map) => !map.is_empty() && !is_atomic_map(value),
        Value::Array(items) => {
            !items.is_empty() && item_elements(&list_kind(at, items, &[]), items).is_some()
        }
        _ => false,
    }
}

/// Merges an applied configuration into the live object: maps merge, associative lists and sets
/// merge item by item (kube-apiserver's order), everything else is replaced.
fn merge(live: &mut Value, config: &Value, at: At<'_, '_>) {
    if let (Value::Object(live_map), Value::Object(config_map)) = (&mut *live, config)
        && !is_atomic_map(config)
    {
        for (name, value) in config_map {
            match live_map.get_mut(name) {
                Some(existing) => merge(existing, value, at.child(name)),
                None => {
                    live_map.insert(name.clone(), value.clone());
                }
            }
        }
        return;
    }
    if let (Value::Array(live_items), Value::Array(config_items)) = (&mut *live, config) {
        let kind = list_kind(at, config_items, live_items);
        if let (Some(live_elements), Some(config_elements)) = (
            item_elements(&kind, live_items),
            item_elements(&kind, config_items),
        ) {
            *live_items = merge_items(
                live_items,
                &live_elements,
                config_items,
                &config_elements,
                at.item(),
            );
            return;
        }
    }
    *live = config.clone();
}

/// structured-merge-diff's list merge: live-only items keep their place, configuration items come
/// in the configuration's order, shared items are merged.
fn merge_items(
    live: &[Value],
    live_elements: &[String],
    config: &[Value],
    config_elements: &[String],
    item_at: At<'_, '_>,
) -> Vec<Value> {
    let in_config = |element: &String| config_elements.contains(element);
    let live_item = |element: &String| {
        live_elements
            .iter()
            .position(|e| e == element)
            .map(|i| &live[i])
    };
    let merged_item = |live: Option<&Value>, config: &Value| match live {
        Some(live) => {
            let mut item = live.clone();
            merge(&mut item, config, item_at);
            item
        }
        None => config.clone(),
    };
    let mut shared = config_elements.iter().filter(|e| live_elements.contains(e));
    let mut next_shared = shared.next();
    let mut done: Vec<&String> = Vec::new();
    let mut out = Vec::with_capacity(live.len().max(config.len()));
    let (mut li, mut ci) = (0, 0);
    while li < live.len() || ci < config.len() {
        if li < live.len() && ci < config.len() {
            let element = &live_elements[li];
            if *element == config_elements[ci] {
                out.push(merged_item(Some(&live[li]), &config[ci]));
                done.push(element);
                li += 1;
                ci += 1;
                next_shared = shared.next();
                continue;
            }
            if in_config(element) && next_shared.is_some_and(|next| next != element) {
                li += 1;
                continue;
            }
        }
        if li < live.len() {
            let element = &live_elements[li];
            if !in_config(element) {
                out.push(live[li].clone());
                li += 1;
                continue;
            }
            if done.contains(&element) || ci >= config.len() {
                li += 1;
                continue;
            }
        }
        if ci < config.len() {
            let element = &config_elements[ci];
            out.push(merged_item(live_item(element), &config[ci]));
            done.push(element);
            ci += 1;
            if next_shared == Some(element) {
                next_shared = shared.next();
            }
        }
    }
    out
}

/// Removes from `value` what this manager applied last time (`last`) that nobody claims now
/// (`keep`: this apply's fields and every other manager's). Maps and lists emptied by the removal
/// go too, unless claimed.
fn prune(value: &mut Value, last: &FieldSet, keep: Option<&FieldSet>, at: At<'_, '_>) {
    if is_atomic_map(value) {
        return;
    }
    match value {
        Value::Object(map) => {
            for (element, last_child) in &last.children {
                let Some(name) = element.strip_prefix("f:") else {
                    continue;
                };
                let keep_child = keep.and_then(|k| k.children.get(element));
                let Some(child) = map.get_mut(name) else {
                    continue;
                };
                if last_child.member && keep_child.is_none() {
                    map.shift_remove(name);
                    continue;
                }
                let was_empty = is_empty_container(child);
                prune(child, last_child, keep_child, at.child(name));
                if keep_child.is_none() && !was_empty && is_empty_container(child) {
                    map.shift_remove(name);
                }
            }
        }
        Value::Array(items) => {
            let kind = list_kind(at, items, &[]);
            let Some(elements) = item_elements(&kind, items) else {
                return;
            };
            let mut gone = Vec::new();
            for (element, item) in elements.iter().zip(items.iter_mut()) {
                let Some(last_child) = last.children.get(element) else {
                    continue;
                };
                let keep_child = keep.and_then(|k| k.children.get(element));
                if last_child.member && keep_child.is_none() {
                    gone.push(element);
                } else {
                    prune(item, last_child, keep_child, at.item());
                }
            }
            let mut elements = elements.iter();
            items.retain(|_| elements.next().is_none_or(|e| !gone.contains(&e)));
        }
        _ => {}
    }
}

/// structured-merge-diff's refusal of an applied configuration with two items of one key in a
/// list of `x-kubernetes-list-type: map` (`.spec.ports: duplicate entries for key
/// [name="http"]`), which kube-apiserver answers with 500.
fn duplicate_map_keys(value: &Value, at: At<'_, '_>, path: &str) -> Result<(), ApplyError> {
    match value {
        Value::Object(map) => {
            for (name, child) in map {
                duplicate_map_keys(child, at.child(name), &format!("{path}.{name}"))?;
            }
        }
        Value::Array(items) => {
            if let ListKind::Map(keys) = list_kind(at, items, &[]) {
                let mut seen: Vec<Vec<Option<&Value>>> = Vec::new();
                for item in items {
                    let key: Vec<Option<&Value>> = keys.iter().map(|k| item.get(*k)).collect();
                    if seen.contains(&key) {
                        let shown: Vec<String> = keys
                            .iter()
                            .zip(&key)
                            .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
                            .collect();
                        return Err(ApplyError::TypedPatch(format!(
                            "{path}: duplicate entries for key [{}]",
                            shown.join(",")
                        )));
                    }
                    seen.push(key);
                }
            }
            for (i, item) in items.iter().enumerate() {
                duplicate_map_keys(item, at.item(), &format!("{path}[{i}]"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn is_empty_container(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// managedFields entries

/// One `metadata.managedFields` entry.
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Entry {
    /// An entry of `manager` for `operation` on `subresource`, written at `now`.
    fn new(
        manager: &str,
        operation: &str,
        subresource: Option<&str>,
        api_version: String,
        now: &str,
        fields: FieldSet,
    ) -> Entry {
        Entry {
            manager: manager.to_string(),
            operation: operation.to_string(),
            api_version,
            time: Some(now.to_string()),
            subresource: subresource.map(str::to_string),
            fields,
        }
    }

    fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    /// kube-apiserver's printManager.
    fn description(&self) -> String {
        let mut out = Value::String(self.manager.clone()).to_string();
        if let Some(subresource) = &self.subresource {
            let _ = write!(
                out,
                " with subresource {}",
                Value::String(subresource.clone())
            );
        }
        if self.operation == UPDATE {
            let _ = write!(out, " using {}", self.api_version);
        }
        out
    }
}

fn decode_entries(object: &Value) -> Vec<Entry> {
    let Some(Value::Array(items)) = object.pointer("/metadata/managedFields") else {
        return Vec::new();
    };
    let text =
        |item: &Value, name: &str| item.get(name).and_then(Value::as_str).map(str::to_string);
    items
        .iter()
        .filter(|item| item.is_object())
        .map(|item| Entry {
            manager: text(item, "manager").unwrap_or_default(),
            operation: text(item, "operation").unwrap_or_default(),
            api_version: text(item, "apiVersion").unwrap_or_default(),
            time: text(item, "time"),
            subresource: text(item, "subresource").filter(|s| !s.is_empty()),
            fields: item
                .get("fieldsV1")
                .map_or_else(FieldSet::default, |fields| {
                    // The object itself is never owned, only fields in it.
                    FieldSet {
                        member: false,
                        ..FieldSet::from_fields_v1(fields)
                    }
                }),
        })
        .collect()
}

/// Writes the non-empty entries, in order, to `metadata.managedFields` (removed when none is left).
fn write_entries(object: &mut Value, entries: Vec<Entry>) {
    let encoded: Vec<Value> = entries
        .into_iter()
        .filter(|entry| !entry.fields.is_empty())
        .map(|entry| {
            let mut map = Map::new();
            map.insert("manager".to_string(), json!(entry.manager));
            map.insert("operation".to_string(), json!(entry.operation));
            map.insert("apiVersion".to_string(), json!(entry.api_version));
            if let Some(time) = entry.time {
                map.insert("time".to_string(), json!(time));
            }
            map.insert("fieldsType".to_string(), json!("FieldsV1"));
            map.insert("fieldsV1".to_string(), entry.fields.to_fields_v1());
            if let Some(subresource) = entry.subresource {
                map.insert("subresource".to_string(), json!(subresource));
            }
            Value::Object(map)
        })
        .collect();
    let Value::Object(object) = object else {
        return;
    };
    if encoded.is_empty() {
        if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
            metadata.shift_remove("managedFields");
        }
        return;
    }
    let metadata = object.entry("metadata").or_insert_with(|| json!({}));
    if let Value::Object(metadata) = metadata {
        metadata.insert("managedFields".to_string(), Value::Array(encoded));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`super::apply`] of a built-in kind (no CRD schema).
    fn apply(
        live: Option<&Value>,
        applied: &Value,
        manager: &str,
        force: bool,
        subresource: Option<&str>,
        now: &str,
    ) -> Result<Value, ApplyError> {
        super::apply(live, applied, manager, force, subresource, now, None)
    }

    /// [`super::record_update`] of a built-in kind (no CRD schema).
    fn record_update(
        old: Option<&Value>,
        new: &mut Value,
        manager: &str,
        subresource: Option<&str>,
        now: &str,
    ) {
        super::record_update(old, new, manager, subresource, now, None)
    }

    const T1: &str = "2025-01-01T00:00:00Z";
    const T2: &str = "2025-01-02T00:00:00Z";
    const T3: &str = "2025-01-03T00:00:00Z";

    fn config_map(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": data})
    }

    fn deployment(spec: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"}, "spec": spec})
    }

    fn pod_spec(containers: Value) -> Value {
        json!({"selector": {"matchLabels": {"app": "d"}}, "template": {"spec": {"containers": containers}}})
    }

    /// `(manager, operation)` of every managedFields entry, in order.
    fn managers(object: &Value) -> Vec<(String, String)> {
        object["metadata"]["managedFields"]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| {
                        (
                            e["manager"].as_str().unwrap().to_string(),
                            e["operation"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn entry<'a>(object: &'a Value, manager: &str, operation: &str) -> &'a Value {
        object["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == manager && e["operation"] == operation)
            .unwrap_or_else(|| panic!("no {manager}/{operation} entry in {object}"))
    }

    fn conflicts(result: Result<Value, ApplyError>) -> (Vec<Conflict>, String) {
        match result {
            Err(error @ ApplyError::Conflict { .. }) => {
                let message = error.to_string();
                let ApplyError::Conflict { conflicts } = error else {
                    unreachable!()
                };
                (conflicts, message)
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
    }

    #[test]
    fn create_by_apply_owns_exactly_the_applied_fields() {
        let mut applied = config_map(json!({"a": "1", "b": "2"}));
        applied["metadata"]["labels"] = json!({"app": "x"});
        let created = apply(None, &applied, "kubectl", false, None, T1).unwrap();
        assert_eq!(created["data"], json!({"a": "1", "b": "2"}));
        assert_eq!(created["metadata"]["labels"], json!({"app": "x"}));
        assert_eq!(
            serde_json::to_string(&created["metadata"]["managedFields"]).unwrap(),
            r#"[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","time":"2025-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{"f:app":{}}}}}]"#
        );
    }

    #[test]
    fn reapply_without_a_field_removes_it() {
        let mut applied = config_map(json!({"a": "1", "b": "2"}));
        applied["metadata"]["labels"] = json!({"app": "x"});
        let live = apply(None, &applied, "kubectl", false, None, T1).unwrap();
        let live = apply(
            Some(&live),
            &config_map(json!({"a": "1"})),
            "kubectl",
            false,
            None,
            T2,
        )
        .unwrap();
        assert_eq!(live["data"], json!({"a": "1"}));
        assert!(
            live["metadata"].get("labels").is_none(),
            "emptied labels map is removed: {live}"
        );
        assert_eq!(live["metadata"]["name"], "c");
        let e = entry(&live, "kubectl", "Apply");
        assert_eq!(e["fieldsV1"], json!({"f:data": {"f:a": {}}}));
        assert_eq!(e["time"], T2);
        // Removing every data key removes the map.
        let live = apply(
            Some(&live),
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
            "kubectl",
            false,
            None,
            T3,
        )
        .unwrap();
        assert!(live.get("data").is_none(), "{live}");
        assert!(
            live["metadata"].get("managedFields").is_none(),
            "manager with no fields is dropped: {live}"
        );
    }

    #[test]
    fn reapplying_the_same_config_keeps_the_timestamp() {
        let applied = config_map(json!({"a": "1"}));
        let live = apply(None, &applied, "kubectl", false, None, T1).unwrap();
        let again = apply(Some(&live), &applied, "kubectl", false, None, T2).unwrap();
        assert_eq!(again, live);
    }

    #[test]
    fn conflict_between_appliers_and_force_moves_ownership() {
        let live = apply(
            None,
            &config_map(json!({"a": "1", "b": "1"})),
            "alice",
            false,
            None,
            T1,
        )
        .unwrap();
        let bob = config_map(json!({"a": "2"}));
        let (found, message) = conflicts(apply(Some(&live), &bob, "bob", false, None, T2));
        assert_eq!(
            message,
            r#"Apply failed with 1 conflict: conflict with "alice": .data.a"#
        );
        assert_eq!(
            found,
            vec![Conflict {
                manager: "alice".into(),
                manager_description: r#""alice""#.into(),
                field: ".data.a".into()
            }]
        );
        let forced = apply(Some(&live), &bob, "bob", true, None, T2).unwrap();
        assert_eq!(forced["data"], json!({"a": "2", "b": "1"}));
        assert_eq!(
            entry(&forced, "alice", "Apply")["fieldsV1"],
            json!({"f:data": {"f:b": {}}})
        );
        assert_eq!(
            entry(&forced, "bob", "Apply")["fieldsV1"],
            json!({"f:data": {"f:a": {}}})
        );
        assert_eq!(
            managers(&forced),
            vec![
                ("alice".into(), "Apply".into()),
                ("bob".into(), "Apply".into())
            ]
        );
        // alice now conflicts with bob, and losing her last field drops her entry.
        let (_, message) = conflicts(apply(
            Some(&forced),
            &config_map(json!({"a": "1", "b": "1"})),
            "alice",
            false,
            None,
            T3,
        ));
        assert_eq!(
            message,
            r#"Apply failed with 1 conflict: conflict with "bob": .data.a"#
        );
        let taken = apply(
            Some(&forced),
            &config_map(json!({"b": "3"})),
            "bob",
            true,
            None,
            T3,
        )
        .unwrap();
        assert_eq!(managers(&taken), vec![("bob".into(), "Apply".into())]);
        // bob no longer applies .data.a and nobody else owns it: it is removed.
        assert_eq!(taken["data"], json!({"b": "3"}));
    }

    #[test]
    fn shared_fields_survive_until_the_last_owner_drops_them() {
        let live = apply(
            None,
            &config_map(json!({"a": "1", "b": "1"})),
            "alice",
            false,
            None,
            T1,
        )
        .unwrap();
        // Same value: no conflict, both own .data.a.
        let live = apply(
            Some(&live),
            &config_map(json!({"a": "1"})),
            "bob",
            false,
            None,
            T2,
        )
        .unwrap();
        assert_eq!(
            entry(&live, "bob", "Apply")["fieldsV1"],
            json!({"f:data": {"f:a": {}}})
        );
        let live = apply(
            Some(&live),
            &config_map(json!({"b": "1"})),
            "alice",
            false,
            None,
            T2,
        )
        .unwrap();
        assert_eq!(live["data"], json!({"a": "1", "b": "1"}));
        let live = apply(Some(&live), &config_map(json!({})), "bob", false, None, T3).unwrap();
        assert_eq!(live["data"], json!({"b": "1"}));
        assert_eq!(managers(&live), vec![("alice".into(), "Apply".into())]);
    }

    #[test]
    fn several_conflicts_are_grouped_by_manager() {
        let live = apply(
            None,
            &config_map(json!({"a": "1", "b": "1"})),
            "alice",
            false,
            None,
            T1,
        )
        .unwrap();
        let live = apply(
            Some(&live),
            &config_map(json!({"c": "1"})),
            "bob",
            false,
            None,
            T1,
        )
        .unwrap();
        let err = apply(
            Some(&live),
            &config_map(json!({"a": "2", "b": "2", "c": "2"})),
            "dave",
            false,
            None,
            T2,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"alice\":\n- .data.a\n- .data.b\nconflicts with \"bob\":\n- .data.c"
        );
    }

    #[test]
    fn client_side_apply_then_server_side_apply() {
        let mut created = config_map(json!({"a": "1"}));
        created["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/last-applied-configuration": "{}"});
        created["metadata"]["uid"] = json!("u1");
        created["metadata"]["resourceVersion"] = json!("1");
        record_update(None, &mut created, "kubectl-client-side-apply", None, T1);
        assert_eq!(
            serde_json::to_string(&created["metadata"]["managedFields"]).unwrap(),
            r#"[{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"v1","time":"2025-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:a":{}},"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}}}}]"#
        );

        let server_side = config_map(json!({"a": "2"}));
        let (found, message) = conflicts(apply(
            Some(&created),
            &server_side,
            "kubectl",
            false,
            None,
            T2,
        ));
        assert_eq!(
            message,
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.a"#
        );
        assert_eq!(found[0].manager, "kubectl-client-side-apply");

        let forced = apply(Some(&created), &server_side, "kubectl", true, None, T2).unwrap();
        assert_eq!(forced["data"]["a"], "2");
        assert_eq!(forced["metadata"]["uid"], "u1");
        assert_eq!(forced["metadata"]["resourceVersion"], "1");
        // Like kube-apiserver's lastAppliedManager, `kubectl` drops the client-side applier's
        // entry (it owns the last-applied annotation) and, like its lastAppliedUpdater, rewrites
        // the annotation to the applied configuration.
        assert_eq!(managers(&forced), vec![("kubectl".into(), "Apply".into())]);
        assert_eq!(
            entry(&forced, "kubectl", "Apply")["fieldsV1"],
            json!({"f:data": {"f:a": {}}})
        );
        assert_eq!(
            forced["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{\"apiVersion\":\"v1\",\"data\":{\"a\":\"2\"},\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\",\"namespace\":\"default\"}}\n"
        );
        // Applying a value the updater already set is no conflict either.
        let shared = apply(
            Some(&created),
            &config_map(json!({"a": "1"})),
            "kubectl",
            false,
            None,
            T2,
        )
        .unwrap();
        assert_eq!(shared["data"]["a"], "1");
        assert_eq!(managers(&shared), vec![("kubectl".into(), "Apply".into())]);
        // Another manager keeps the client-side applier's entry and its conflicts.
        let other = apply(Some(&created), &server_side, "other", true, None, T2).unwrap();
        assert_eq!(
            entry(&other, "kubectl-client-side-apply", "Update")["time"],
            T1
        );
    }

    #[test]
    fn kubectl_server_side_apply_takes_over_fields_last_applied_client_side() {
        let last = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "default"}, "data": {"a": "1", "b": "1"}});
        let mut created = config_map(json!({"a": "1", "b": "1"}));
        created["metadata"]["annotations"] = json!({
            "kubectl.kubernetes.io/last-applied-configuration": last.to_string()});
        record_update(None, &mut created, "kubectl-client-side-apply", None, T1);
        // Someone else changed b since the last client-side apply.
        let mut edited = created.clone();
        edited["data"]["b"] = json!("edited");
        record_update(Some(&created), &mut edited, "editor", None, T1);
        let mut changed_by_csa = edited.clone();
        changed_by_csa["data"]["c"] = json!("1");
        record_update(
            Some(&edited),
            &mut changed_by_csa,
            "kubectl-client-side-apply",
            None,
            T1,
        );

        // a still has its last-applied value: kubectl may change it without conflict.
        let ok = apply(
            Some(&changed_by_csa),
            &config_map(json!({"a": "2", "b": "edited"})),
            "kubectl",
            false,
            None,
            T2,
        )
        .unwrap();
        assert_eq!(ok["data"]["a"], "2");
        // c is not in last-applied, so changing it still conflicts; so does b for "editor".
        let (found, _) = conflicts(apply(
            Some(&changed_by_csa),
            &config_map(json!({"a": "2", "b": "mine", "c": "2"})),
            "kubectl",
            false,
            None,
            T2,
        ));
        let fields: Vec<(&str, &str)> = found
            .iter()
            .map(|c| (c.manager.as_str(), c.field.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("kubectl-client-side-apply", ".data.c"),
                ("editor", ".data.b")
            ]
        );
        // Any other manager conflicts on a as before.
        let (found, _) = conflicts(apply(
            Some(&changed_by_csa),
            &config_map(json!({"a": "2"})),
            "other",
            false,
            None,
            T2,
        ));
        assert_eq!(found[0].field, ".data.a");
    }

    #[test]
    fn containers_are_associative_between_managers() {
        let alice = deployment(pod_spec(json!([{"name": "a", "image": "nginx"}])));
        let live = apply(None, &alice, "alice", false, None, T1).unwrap();
        assert_eq!(
            entry(&live, "alice", "Apply")["fieldsV1"],
            json!({"f:spec": {"f:selector": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}
            }}}}})
        );
        let bob = deployment(pod_spec(json!([{"name": "b", "image": "redis"}])));
        let live = apply(Some(&live), &bob, "bob", false, None, T2).unwrap();
        assert_eq!(
            live["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "nginx"}, {"name": "b", "image": "redis"}])
        );
        assert_eq!(
            entry(&live, "bob", "Apply")["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"],
            json!({"k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}})
        );

        // Bob touching alice's container conflicts on that item's field only.
        let bob_takes = deployment(pod_spec(
            json!([{"name": "b", "image": "redis"}, {"name": "a", "image": "httpd"}]),
        ));
        let (_, message) = conflicts(apply(Some(&live), &bob_takes, "bob", false, None, T3));
        assert_eq!(
            message,
            r#"Apply failed with 1 conflict: conflict with "alice": .spec.template.spec.containers[name="a"].image"#
        );

        // Alice updating her own container is fine; dropping it removes only hers.
        let alice2 = deployment(pod_spec(json!([{"name": "a", "image": "nginx:2"}])));
        let live = apply(Some(&live), &alice2, "alice", false, None, T3).unwrap();
        assert_eq!(
            live["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:2"
        );
        let alice3 = deployment(json!({"selector": {"matchLabels": {"app": "d"}}, "replicas": 2}));
        let live = apply(Some(&live), &alice3, "alice", false, None, T3).unwrap();
        assert_eq!(
            live["spec"]["template"]["spec"]["containers"],
            json!([{"name": "b", "image": "redis"}])
        );
        assert_eq!(live["spec"]["replicas"], 2);
    }

    #[test]
    fn applied_list_items_keep_kubernetes_order() {
        // Live-only items keep their place; applied items follow the configuration's order.
        let mut live = deployment(pod_spec(
            json!([{"name": "x"}, {"name": "a"}, {"name": "y"}, {"name": "b"}]),
        ));
        record_update(None, &mut live, "creator", None, T1);
        let applied = deployment(pod_spec(
            json!([{"name": "b", "image": "1"}, {"name": "a", "image": "2"}, {"name": "n"}]),
        ));
        let out = apply(Some(&live), &applied, "kubectl", true, None, T2).unwrap();
        let names: Vec<&str> = out["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["x", "y", "b", "a", "n"]);
    }

    #[test]
    fn ports_are_keyed_by_port_and_protocol() {
        let ports = json!([{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 53}]);
        let live = apply(
            None,
            &deployment(pod_spec(json!([{"name": "dns", "ports": ports}]))),
            "kubectl",
            false,
            None,
            T1,
        )
        .unwrap();
        assert_eq!(
            live["spec"]["template"]["spec"]["containers"][0]["ports"],
            ports
        );
        let owned = &entry(&live, "kubectl", "Apply")["fieldsV1"]["f:spec"]["f:template"]["f:spec"]
            ["f:containers"]["k:{\"name\":\"dns\"}"]["f:ports"];
        assert_eq!(
            owned,
            &json!({
                "k:{\"containerPort\":53,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}},
                "k:{\"containerPort\":53,\"protocol\":\"UDP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}
            })
        );
    }

    #[test]
    fn finalizers_are_a_set_shared_between_managers() {
        let mut a = config_map(json!({}));
        a["metadata"]["finalizers"] = json!(["example.com/a"]);
        let live = apply(None, &a, "alice", false, None, T1).unwrap();
        let mut b = config_map(json!({}));
        b["metadata"]["finalizers"] = json!(["example.com/b"]);
        let live = apply(Some(&live), &b, "bob", false, None, T2).unwrap();
        assert_eq!(
            live["metadata"]["finalizers"],
            json!(["example.com/a", "example.com/b"])
        );
        assert_eq!(
            entry(&live, "bob", "Apply")["fieldsV1"],
            json!({"f:metadata": {"f:finalizers": {"v:\"example.com/b\"": {}}}})
        );
        let live = apply(
            Some(&live),
            &config_map(json!({})),
            "alice",
            false,
            None,
            T3,
        )
        .unwrap();
        assert_eq!(live["metadata"]["finalizers"], json!(["example.com/b"]));
    }

    #[test]
    fn status_subresource_apply_only_touches_status() {
        let live = apply(
            None,
            &deployment(json!({"replicas": 1})),
            "kubectl",
            false,
            None,
            T1,
        )
        .unwrap();
        let mut status = deployment(json!({"replicas": 5}));
        status["status"] =
            json!({"readyReplicas": 1, "conditions": [{"type": "Available", "status": "True"}]});
        let live = apply(
            Some(&live),
            &status,
            "controller",
            false,
            Some("status"),
            T2,
        )
        .unwrap();
        assert_eq!(live["spec"], json!({"replicas": 1}));
        assert_eq!(live["status"]["readyReplicas"], 1);
        let e = entry(&live, "controller", "Apply");
        assert_eq!(e["subresource"], "status");
        assert_eq!(
            e["fieldsV1"],
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Available\"}": {".": {}, "f:status": {}, "f:type": {}}}, "f:readyReplicas": {}}})
        );

        // A main-resource apply ignores status, and the status manager prunes its own fields.
        let mut main = deployment(json!({"replicas": 2}));
        main["status"] = json!({"readyReplicas": 9});
        let live = apply(Some(&live), &main, "kubectl", false, None, T3).unwrap();
        assert_eq!(live["spec"]["replicas"], 2);
        assert_eq!(live["status"]["readyReplicas"], 1);
        let mut status = deployment(json!({}));
        status["status"] = json!({"readyReplicas": 2});
        let live = apply(
            Some(&live),
            &status,
            "controller",
            false,
            Some("status"),
            T3,
        )
        .unwrap();
        assert_eq!(live["status"], json!({"readyReplicas": 2}));

        let err = apply(None, &status, "controller", false, Some("status"), T3).unwrap_err();
        assert!(matches!(err, ApplyError::Invalid(_)));
    }

    #[test]
    fn status_subresource_conflicts_name_the_subresource() {
        let live = apply(
            None,
            &deployment(json!({"replicas": 1})),
            "kubectl",
            false,
            None,
            T1,
        )
        .unwrap();
        let mut status = deployment(json!({}));
        status["status"] = json!({"readyReplicas": 1});
        let mut updated = apply(
            Some(&live),
            &status,
            "controller",
            false,
            Some("status"),
            T2,
        )
        .unwrap();
        let old = updated.clone();
        updated["status"]["readyReplicas"] = json!(3);
        record_update(
            Some(&old),
            &mut updated,
            "other-controller",
            Some("status"),
            T2,
        );
        assert_eq!(
            entry(&updated, "other-controller", "Update")["subresource"],
            "status"
        );
        let (_, message) = conflicts(apply(
            Some(&updated),
            &status,
            "controller",
            false,
            Some("status"),
            T3,
        ));
        assert_eq!(
            message,
            r#"Apply failed with 1 conflict: conflict with "other-controller" with subresource "status" using apps/v1: .status.readyReplicas"#
        );
    }

    #[test]
    fn server_metadata_is_never_taken_from_the_config() {
        let mut live = config_map(json!({"a": "1"}));
        live["metadata"]["uid"] = json!("u1");
        live["metadata"]["resourceVersion"] = json!("7");
        live["metadata"]["generation"] = json!(1);
        live["metadata"]["creationTimestamp"] = json!(T1);
        record_update(None, &mut live, "creator", None, T1);
        let mut applied = config_map(json!({"a": "1"}));
        applied["metadata"]["uid"] = json!("forged");
        applied["metadata"]["resourceVersion"] = json!("1");
        applied["metadata"]["generation"] = json!(99);
        applied["metadata"]["creationTimestamp"] = json!(T3);
        applied["metadata"]["deletionTimestamp"] = json!(T3);
        let out = apply(Some(&live), &applied, "kubectl", false, None, T2).unwrap();
        for (field, value) in [
            ("uid", json!("u1")),
            ("resourceVersion", json!("7")),
            ("generation", json!(1)),
            ("creationTimestamp", json!(T1)),
        ] {
            assert_eq!(out["metadata"][field], value, "{field}");
        }
        assert!(out["metadata"].get("deletionTimestamp").is_none());

        applied["metadata"]["managedFields"] = json!([]);
        let err = apply(Some(&live), &applied, "kubectl", false, None, T2).unwrap_err();
        assert_eq!(err.to_string(), "metadata.managedFields must be nil");
        let err = apply(Some(&live), &json!([1]), "kubectl", false, None, T2).unwrap_err();
        assert!(matches!(err, ApplyError::Invalid(_)));
    }

    #[test]
    fn objects_without_managed_fields_belong_to_before_first_apply() {
        let live = config_map(json!({"a": "1"}));
        let (_, message) = conflicts(apply(
            Some(&live),
            &config_map(json!({"a": "2"})),
            "kubectl",
            false,
            None,
            T1,
        ));
        assert_eq!(
            message,
            r#"Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a"#
        );
        let out = apply(
            Some(&live),
            &config_map(json!({"b": "2"})),
            "kubectl",
            false,
            None,
            T1,
        )
        .unwrap();
        assert_eq!(
            managers(&out),
            vec![
                ("before-first-apply".into(), "Update".into()),
                ("kubectl".into(), "Apply".into())
            ]
        );
    }

    #[test]
    fn applied_nulls_mean_unspecified() {
        let live = apply(
            None,
            &config_map(json!({"a": "1", "b": "2"})),
            "kubectl",
            false,
            None,
            T1,
        )
        .unwrap();
        let out = apply(
            Some(&live),
            &config_map(json!({"a": "1", "b": null})),
            "kubectl",
            false,
            None,
            T2,
        )
        .unwrap();
        assert_eq!(out["data"], json!({"a": "1"}));
    }

    #[test]
    fn record_update_moves_ownership_of_changed_fields() {
        let live = apply(
            None,
            &deployment(json!({"replicas": 1, "paused": false})),
            "kubectl",
            false,
            None,
            T1,
        )
        .unwrap();
        let mut scaled = live.clone();
        scaled["spec"]["replicas"] = json!(3);
        record_update(Some(&live), &mut scaled, "kubectl-scale", None, T2);
        assert_eq!(
            entry(&scaled, "kubectl", "Apply")["fieldsV1"],
            json!({"f:spec": {"f:paused": {}}})
        );
        assert_eq!(entry(&scaled, "kubectl", "Apply")["time"], T1);
        let e = entry(&scaled, "kubectl-scale", "Update");
        assert_eq!(e["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        assert_eq!(e["apiVersion"], "apps/v1");
        assert_eq!(e["time"], T2);

        // A second write by the same manager merges into its entry.
        let mut paused = scaled.clone();
        paused["spec"]["paused"] = json!(true);
        record_update(Some(&scaled), &mut paused, "kubectl-scale", None, T3);
        assert_eq!(
            managers(&paused),
            vec![("kubectl-scale".into(), "Update".into())]
        );
        assert_eq!(
            entry(&paused, "kubectl-scale", "Update")["fieldsV1"],
            json!({"f:spec": {"f:paused": {}, "f:replicas": {}}})
        );

        // Re-applying the old replicas now conflicts with the updater.
        let (_, message) = conflicts(apply(
            Some(&paused),
            &deployment(json!({"replicas": 1})),
            "kubectl",
            false,
            None,
            T3,
        ));
        assert_eq!(
            message,
            r#"Apply failed with 1 conflict: conflict with "kubectl-scale" using apps/v1: .spec.replicas"#
        );
    }

    #[test]
    fn record_update_without_changes_records_nothing() {
        let live = apply(
            None,
            &config_map(json!({"a": "1"})),
            "kubectl",
            false,
            None,
            T1,
        )
        .unwrap();
        let mut same = live.clone();
        same["metadata"]["resourceVersion"] = json!("2");
        record_update(Some(&live), &mut same, "editor", None, T2);
        assert_eq!(
            same["metadata"]["managedFields"],
            live["metadata"]["managedFields"]
        );
    }

    #[test]
    fn record_update_drops_removed_fields_from_every_manager() {
        let live = apply(
            None,
            &config_map(json!({"a": "1", "b": "1"})),
            "kubectl",
            false,
            None,
            T1,
        )
        .unwrap();
        let mut edited = live.clone();
        edited["data"].as_object_mut().unwrap().shift_remove("a");
        record_update(Some(&live), &mut edited, "editor", None, T2);
        assert_eq!(
            entry(&edited, "kubectl", "Apply")["fieldsV1"],
            json!({"f:data": {"f:b": {}}})
        );
        assert_eq!(managers(&edited), vec![("kubectl".into(), "Apply".into())]);
        // Re-applying the unchanged configuration puts the field back.
        let out = apply(
            Some(&edited),
            &config_map(json!({"a": "1", "b": "1"})),
            "kubectl",
            false,
            None,
            T3,
        )
        .unwrap();
        assert_eq!(out["data"], json!({"a": "1", "b": "1"}));
    }

    #[test]
    fn record_update_uses_the_written_managed_fields_when_given() {
        let live = apply(
            None,
            &config_map(json!({"a": "1"})),
            "kubectl",
            false,
            None,
            T1,
        )
        .unwrap();
        // `[{}]` resets ownership, as documented for kube-apiserver.
        let mut reset = live.clone();
        reset["metadata"]["managedFields"] = json!([{}]);
        record_update(Some(&live), &mut reset, "editor", None, T2);
        assert!(reset["metadata"].get("managedFields").is_none(), "{reset}");
        // A client that drops managedFields does not wipe them.
        let mut dropped = live.clone();
        dropped["metadata"]
            .as_object_mut()
            .unwrap()
            .shift_remove("managedFields");
        dropped["data"]["b"] = json!("2");
        record_update(Some(&live), &mut dropped, "editor", None, T2);
        assert_eq!(
            managers(&dropped),
            vec![
                ("kubectl".into(), "Apply".into()),
                ("editor".into(), "Update".into())
            ]
        );
        assert_eq!(
            entry(&dropped, "editor", "Update")["fieldsV1"],
            json!({"f:data": {"f:b": {}}})
        );
    }

    #[test]
    fn record_update_on_create_owns_nested_lists_and_maps() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "p"}},
            "spec": {"containers": [{"name": "c", "image": "x", "args": ["a"], "ports": [{"containerPort": 80}]}],
                     "tolerations": [{"key": "k"}]}});
        record_update(None, &mut pod, "kubectl-create", None, T1);
        assert_eq!(
            entry(&pod, "kubectl-create", "Update")["fieldsV1"],
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {".": {}, "f:containers": {".": {},
                    "k:{\"name\":\"c\"}": {".": {}, "f:args": {}, "f:image": {}, "f:name": {},
                        "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}},
                    "f:tolerations": {}}
            })
        );
    }

    #[test]
    fn malformed_managed_fields_are_tolerated() {
        let mut live = config_map(json!({"a": "1"}));
        live["metadata"]["managedFields"] = json!([
            "junk",
            {"manager": "empty", "operation": "Update", "fieldsV1": {}},
            {"manager": "odd", "operation": "Update", "apiVersion": "v1", "fieldsV1": {"f:data": {"f:a": 7}}}
        ]);
        let (found, _) = conflicts(apply(
            Some(&live),
            &config_map(json!({"a": "2"})),
            "kubectl",
            false,
            None,
            T1,
        ));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].manager, "odd");
        let out = apply(
            Some(&live),
            &config_map(json!({"a": "2"})),
            "kubectl",
            true,
            None,
            T1,
        )
        .unwrap();
        assert_eq!(managers(&out), vec![("kubectl".into(), "Apply".into())]);
    }

    #[test]
    fn fields_v1_round_trips_and_paths_render_like_kubernetes() {
        let fields = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}, "f:finalizers": {"v:\"x\"": {}}}});
        let set = FieldSet::from_fields_v1(&fields);
        assert_eq!(set.to_fields_v1(), fields);
        let paths: Vec<String> = set.member_paths().iter().map(|p| display_path(p)).collect();
        assert_eq!(
            paths,
            [
                ".metadata.labels",
                ".metadata.labels.app",
                ".spec.containers[name=\"c\"]",
                ".spec.containers[name=\"c\"].image",
                ".spec.finalizers[=\"x\"]"
            ]
        );
    }
}
