//! The selected parent's tree, derived from the [`model`](super::model) (drawn by
//! [`parent_tree`](super::parent_tree)): its objects are the last sync's per-object plan
//! (`EngineEvent::Planned`'s ObjectPlans), sorted by type then name, each with its marker and
//! reason, the object as the sync observed it (YAML) and the hook's desired object (Diff).
//!
//! - CompositeController: the parent, then its children by type.
//! - DecoratorController: the target, its attachments by type, and the labels, annotations and
//!   status it merges into the target (from the hook's answer).
//! - MapController: the parent, then each map key with its input (from its map call) and
//!   outputs, and the detached outputs under their key with their tombstone state.
//!
//! Writes to the parent itself (status, finalizer, metadata) end the tree.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::k8s::object;

use super::model::{Parent, PlanRecord, SyncState, Unit};

/// One line of a parent's tree.
#[derive(Debug, Clone, Default)]
pub struct TreeItem {
    /// Indentation level.
    pub depth: u16,
    /// The plan marker (`=`, `~`, `+`, `-`, `a`dopted, `r`eleased, `w`aiting, `s`kipped,
    /// `k`ept), if any: see [`PlannedObject`](super::model::PlannedObject).
    pub marker: Option<char>,
    /// The text.
    pub label: String,
    /// A note after the label (held, failed, tombstone state).
    pub note: Option<String>,
    /// The object as observed (live) by the last sync.
    pub live: Option<Arc<Value>>,
    /// The object as the hook wants it.
    pub desired: Option<Value>,
    /// A heading line (no object).
    pub heading: bool,
    /// The MapController map key the line belongs to.
    pub key: Option<String>,
}

impl TreeItem {
    fn heading(depth: u16, label: impl Into<String>) -> TreeItem {
        TreeItem {
            depth,
            label: label.into(),
            heading: true,
            ..TreeItem::default()
        }
    }

    /// The object to show as YAML: live, else desired.
    pub fn object(&self) -> Option<&Value> {
        self.live.as_deref().or(self.desired.as_ref())
    }
}

/// The tree of parent `p` (of a controller of `kind`): see the module header.
pub fn tree(kind: &str, p: &Parent) -> Vec<TreeItem> {
    let mut out = Vec::new();
    let call = p.unit.main_call();
    let request = call.and_then(|c| c.request.as_deref());
    let response = call.and_then(|c| c.response.as_deref());
    match kind {
        "DecoratorController" => {
            out.push(root_item(
                "target",
                request.and_then(|r| r.get("object")),
                &p.key,
            ));
            out.push(TreeItem::heading(1, "attachments"));
            planned_items(
                &mut out,
                2,
                &p.unit,
                response.and_then(|r| r.get("attachments")),
            );
            out.push(TreeItem::heading(1, "merges"));
            merge_items(&mut out, response);
        }
        "MapController" => map_items(&mut out, p),
        _ => {
            out.push(root_item(
                "parent",
                request.and_then(|r| r.get("parent")),
                &p.key,
            ));
            planned_items(
                &mut out,
                1,
                &p.unit,
                response.and_then(|r| r.get("children")),
            );
        }
    }
    parent_write_items(&mut out, &p.unit);
    out
}

/// `Kind name` of an object.
fn kind_name(v: &Value) -> String {
    let ns = object::namespace(v)
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    format!(
        "{} {ns}{}",
        object::kind(v).unwrap_or("?"),
        object::name(v).unwrap_or("?")
    )
}

/// The tree's first line: `noun Kind namespace/name` of `obj` (`noun key` when unknown).
fn root_item(noun: &str, obj: Option<&Value>, key: &str) -> TreeItem {
    TreeItem {
        label: format!("{noun} {}", obj.map_or_else(|| key.to_string(), kind_name)),
        live: obj.cloned().map(Arc::new),
        ..TreeItem::default()
    }
}

/// The objects of a hook's answer (a list), by (`Kind.apiVersion`, name).
fn desired_by_id(answer: Option<&Value>) -> BTreeMap<(String, &str), &Value> {
    answer
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|o| {
            let type_key = format!(
                "{}.{}",
                object::kind(o).unwrap_or_default(),
                object::api_version(o).unwrap_or_default()
            );
            ((type_key, object::name(o).unwrap_or("?")), o)
        })
        .collect()
}

/// The objects of the unit's last plan by type (a heading per type), each with its marker, a
/// note (a failed or held write, the plan's reason, the write's detail), what the sync
/// observed of it and what the hook's answer `desired` asks for. The outputs a
/// MapController's tombstone sync detached are left to [`detached_items`].
fn planned_items(out: &mut Vec<TreeItem>, depth: u16, unit: &Unit, desired: Option<&Value>) {
    let Some(plan) = &unit.plan else {
        return;
    };
    let desired = desired_by_id(desired);
    let mut heading: Option<&str> = None;
    for ((t, n), o) in &plan.objects {
        if plan.detached.contains_key(&(t.clone(), n.clone())) {
            continue;
        }
        if heading != Some(t.as_str()) {
            out.push(TreeItem::heading(depth, t.clone()));
            heading = Some(t);
        }
        let action = unit.action_for(t, n);
        let note = action
            .and_then(|a| match (&a.error, a.held) {
                (Some(e), _) => Some(format!("failed: {e}")),
                (None, true) => Some("held (paused)".into()),
                _ => None,
            })
            .or_else(|| (o.marker != '=' && !o.reason.is_empty()).then(|| o.reason.clone()))
            .or_else(|| action.and_then(|a| a.detail.clone()));
        out.push(TreeItem {
            depth: depth + 1,
            marker: Some(o.marker),
            label: n.clone(),
            note,
            live: o.live.clone(),
            desired: desired.get(&(t.clone(), n.as_str())).map(|d| (*d).clone()),
            heading: false,
            key: None,
        });
    }
}

/// `k=v k2-` of a labels/annotations answer.
fn merged_map(v: Option<&Value>) -> Option<String> {
    let m = v?.as_object()?;
    if m.is_empty() {
        return None;
    }
    Some(
        m.iter()
            .map(|(k, v)| match v {
                Value::Null => format!("{k}-"),
                Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// What a DecoratorController's hook merges into its target: labels, annotations, status.
fn merge_items(out: &mut Vec<TreeItem>, response: Option<&Value>) {
    for (what, v) in [
        ("labels", merged_map(response.and_then(|r| r.get("labels")))),
        (
            "annotations",
            merged_map(response.and_then(|r| r.get("annotations"))),
        ),
        (
            "status",
            response
                .and_then(|r| r.get("status"))
                .filter(|s| !s.is_null())
                .map(Value::to_string),
        ),
    ] {
        if let Some(v) = v {
            out.push(TreeItem::heading(2, format!("{what}: {v}")));
        }
    }
}

/// A MapController's parent, then each map key's lines (tagged with the key).
fn map_items(out: &mut Vec<TreeItem>, p: &Parent) {
    let parent_obj = p
        .keys
        .values()
        .find_map(|u| u.main_call()?.request.as_ref()?.get("parent"));
    out.push(root_item("parent", parent_obj, &p.key));
    for (k, u) in &p.keys {
        let first = out.len();
        map_key_items(out, k, u);
        for it in &mut out[first..] {
            it.key = Some(k.clone());
        }
    }
}

/// One map key: its heading (with its state), the input of its last map call, the outputs of
/// its last plan, and the outputs its last plan detached.
fn map_key_items(out: &mut Vec<TreeItem>, k: &str, u: &Unit) {
    let glyph = match u.state {
        SyncState::Failed { .. } => " (failed)",
        SyncState::Syncing => " (syncing)",
        SyncState::Held => " (held)",
        _ => "",
    };
    out.push(TreeItem::heading(1, format!("key {k}{glyph}")));
    let map = u.calls.get("map");
    let input = map
        .and_then(|c| c.request.as_ref())
        .and_then(|r| r.get("input"));
    if let Some(i) = input.filter(|i| !i.is_null()) {
        out.push(TreeItem {
            depth: 2,
            label: format!("input {}", kind_name(i)),
            live: Some(Arc::new(i.clone())),
            ..TreeItem::default()
        });
    }
    let desired = map
        .and_then(|c| c.response.as_ref())
        .and_then(|r| r.get("outputs"));
    planned_items(out, 2, u, desired);
    if let Some(plan) = u.plan.as_ref().filter(|p| !p.detached.is_empty()) {
        out.push(TreeItem::heading(2, "detached outputs"));
        detached_items(out, plan);
    }
}

/// The outputs a tombstone sync detached, each kept by the tombstone hook or to be deleted.
fn detached_items(out: &mut Vec<TreeItem>, plan: &PlanRecord) {
    for ((ty, n), keep) in &plan.detached {
        let live = plan
            .objects
            .get(&(ty.clone(), n.clone()))
            .and_then(|o| o.live.clone());
        out.push(TreeItem {
            depth: 3,
            marker: Some(if *keep { '=' } else { '-' }),
            label: format!("{ty} {n}"),
            note: Some(
                if *keep {
                    "kept by the tombstone hook"
                } else {
                    "tombstone: to be deleted"
                }
                .into(),
            ),
            live,
            ..TreeItem::default()
        });
    }
}

/// Writes to the parent itself (status, finalizer, metadata).
fn parent_write_items(out: &mut Vec<TreeItem>, unit: &Unit) {
    for a in unit.actions.iter().filter(|a| {
        matches!(
            a.verb.as_str(),
            "status" | "add-finalizer" | "remove-finalizer" | "metadata"
        )
    }) {
        out.push(TreeItem {
            depth: 1,
            marker: Some('~'),
            label: format!("parent {}", a.verb),
            note: a.error.clone().or_else(|| a.detail.clone()),
            ..TreeItem::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::*;
    use crate::engine::events::{EngineEvent, EventParent};
    use crate::engine::plan::child::ChildId;
    use crate::engine::plan::planner::{DetachedOutput, ObjectAction, ObjectPlan};
    use crate::view::tui::model::App;

    fn cm(name: &str, value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns"}, "data": {"v": value}})
    }

    fn planned(obj: &Value, action: ObjectAction, reason: &str) -> ObjectPlan {
        ObjectPlan {
            id: ChildId::of(
                &format!(
                    "{}.{}",
                    object::kind(obj).unwrap_or_default(),
                    object::api_version(obj).unwrap_or_default()
                ),
                obj,
            ),
            kind: object::kind(obj).unwrap_or_default().into(),
            action,
            strategy: None,
            reason: reason.into(),
            changes: Vec::new(),
            changes_omitted: 0,
            before: (action != ObjectAction::Create).then(|| Arc::new(obj.clone())),
            after: None,
            rollout: None,
        }
    }

    fn started(kind: &str) -> EngineEvent {
        EngineEvent::ControllerStarted {
            controller_kind: kind.into(),
            controller: "c".into(),
            parent_resource: "Thing.example/v1".into(),
            parents: 1,
        }
    }

    fn call(hook: &str, map_key: Option<&str>, request: Value, response: Value) -> EngineEvent {
        EngineEvent::HookCalled {
            controller: "c".into(),
            subject: EventParent {
                parent: "ns/p".into(),
                map_key: map_key.map(str::to_string),
            },
            hook: hook.into(),
            status: Some(200),
            latency: Duration::ZERO,
            error: None,
            request: Some(Arc::new(request)),
            response: Some(Arc::new(response)),
            stderr: None,
        }
    }

    fn plan(
        map_key: Option<&str>,
        objects: Vec<ObjectPlan>,
        detached: Vec<(&Value, bool)>,
    ) -> EngineEvent {
        EngineEvent::Planned {
            controller: "c".into(),
            subject: EventParent {
                parent: "ns/p".into(),
                map_key: map_key.map(str::to_string),
            },
            objects,
            detached: detached
                .into_iter()
                .map(|(o, kept)| DetachedOutput {
                    id: ChildId::of("ConfigMap.v1", o),
                    kept,
                })
                .collect(),
            status_change: false,
            finalizer: None,
            resync_after_seconds: None,
            writes: 0,
        }
    }

    /// `depth marker label (note) [live] [desired]` per line (the data of a child's objects;
    /// the root's object is the parent).
    fn lines(kind: &str, events: &[EngineEvent]) -> Vec<String> {
        let mut app = App::new("ctx", false);
        let now = Instant::now();
        for e in events {
            app.apply(e, now);
        }
        tree(kind, &app.parents[0])
            .iter()
            .map(|i| {
                let mut l = format!("{} {} {}", i.depth, i.marker.unwrap_or(' '), i.label);
                if let Some(n) = &i.note {
                    l.push_str(&format!(" ({n})"));
                }
                if let Some(v) = i.live.as_ref().filter(|_| i.depth > 0) {
                    l.push_str(&format!(" [live {}]", v["data"]["v"]));
                }
                if let Some(v) = &i.desired {
                    l.push_str(&format!(" [desired {}]", v["data"]["v"]));
                }
                l
            })
            .collect()
    }

    /// The children are the plan's objects, by type then name, each with what the sync
    /// observed and what the hook's answer asks for; no plan yet, no children.
    #[test]
    fn children_are_the_planned_objects() {
        let parent = json!({"apiVersion": "example/v1", "kind": "Thing",
            "metadata": {"name": "p", "namespace": "ns"}});
        let (a, b, new) = (cm("a", "1"), cm("b", "1"), cm("n", "2"));
        let req = json!({"parent": parent, "children": {"ConfigMap.v1": {"a": a, "b": b}}});
        let answer = json!({"children": [cm("a", "2"), new]});
        let call = call("sync", None, req, answer);
        let none = lines(
            "CompositeController",
            &[started("CompositeController"), call.clone()],
        );
        assert_eq!(none, ["0   parent Thing ns/p"]);
        let objects = vec![
            planned(&b, ObjectAction::Delete, "not desired"),
            planned(&cm("n", "2"), ObjectAction::Create, "desired, absent"),
            planned(&a, ObjectAction::Update, "changed: data.v"),
        ];
        let all = lines(
            "CompositeController",
            &[
                started("CompositeController"),
                call,
                plan(None, objects, vec![]),
            ],
        );
        assert_eq!(
            all,
            [
                "0   parent Thing ns/p",
                "1   ConfigMap.v1",
                "2 ~ a (changed: data.v) [live \"1\"] [desired \"2\"]",
                "2 - b (not desired) [live \"1\"]",
                "2 + n (desired, absent) [desired \"2\"]",
            ]
        );
    }

    /// A MapController key's tombstone sync: its detached outputs under their key, kept or
    /// to be deleted, once (not also among the key's outputs).
    #[test]
    fn detached_outputs_are_listed_once_under_their_key() {
        let (x, y) = (cm("x", "1"), cm("y", "1"));
        let req = json!({"parent": {"kind": "Sched", "metadata": {"name": "p", "namespace": "ns"}},
            "outputs": {"ConfigMap.v1": {"x": x, "y": y}}});
        let objects = vec![
            planned(
                &x,
                ObjectAction::Keep,
                "detached; kept by the tombstone hook",
            ),
            planned(&y, ObjectAction::Delete, "detached; not kept"),
        ];
        let got = lines(
            "MapController",
            &[
                started("MapController"),
                call("tombstone", Some("k"), req, json!({"outputs": [x.clone()]})),
                plan(Some("k"), objects, vec![(&x, true), (&y, false)]),
            ],
        );
        assert_eq!(
            got,
            [
                "0   parent Sched ns/p",
                "1   key k",
                "2   detached outputs",
                "3 = ConfigMap.v1 x (kept by the tombstone hook) [live \"1\"]",
                "3 - ConfigMap.v1 y (tombstone: to be deleted) [live \"1\"]",
            ]
        );
    }
}
