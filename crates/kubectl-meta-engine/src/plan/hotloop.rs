//! The hot-loop guard: stop rewriting a child field the server keeps rewriting back.
//!
//! Even with [`crate::plan::server_view`], a server can rewrite a field in ways the engine cannot
//! predict (a mutating webhook, defaulting, a CRD schema pruning an unknown field, another
//! controller). Then every sync writes the field again and the parent never converges. The
//! guard counts, per parent, the consecutive syncs whose update of a child rewrote the same
//! field with the same value; after [`SYNCS`] of them the field is held: later plans leave it
//! at the server's value (see [`crate::plan::apply::apply_holding`]) while the hook keeps asking for
//! that value, and the caller reports a [`HotLoop`] (Warning event `HotLoop` on the parent, a
//! dev output line, an NDJSON event, and `--once` fails naming it). Other fields and children
//! keep syncing. A new value from the hook releases the field; a hook reload, a manual resync
//! or a `resyncPeriodSeconds` resync clears the guard of the parent.
//!
//! Pure state: the sync code feeds it each executed plan ([`Guard::record`]).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

use crate::plan::apply::{self, HeldField};
use crate::plan::writes::{ChildId, Writes};
use kube_apimachinery::quantity;

/// Consecutive syncs rewriting one field with the same value before it is held.
pub const SYNCS: usize = 3;

/// Syncs in a row that may leave a child alone without ending its streaks: the confirmation
/// sync that follows the engine's own write reads the field as the hook asks when a slower
/// writer has not set it back yet; one such sync between two rewrites is still a fight.
pub const GAP: usize = 1;

/// A child field the guard stopped rewriting.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HotLoop {
    /// The child.
    pub child: ChildId,
    /// The field, e.g. `spec.template.spec.containers[name=web].resources.limits.cpu`.
    pub path: String,
    /// What the hook asks for (`None`: the hook removes the field).
    pub desired: Option<Value>,
    /// What the server keeps returning (`None`: the server drops the field).
    pub server: Option<Value>,
    /// The likely cause and what to do.
    pub cause: String,
    /// Another client that sets the field back (its field manager, from the child's
    /// managedFields), when the guard found one: a fight between two writers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer: Option<String>,
}

impl HotLoop {
    /// One line naming the child, the field, both values and the cause.
    pub fn message(&self) -> String {
        let show = |v: &Option<Value>| match v {
            Some(v) => v.to_string(),
            None => "nothing (field absent)".to_string(),
        };
        format!(
            "hot loop on {} {}: stopped rewriting {} after {SYNCS} consecutive syncs; the hook asks for {}, the server keeps {}; {}",
            self.child.type_key,
            self.child.object(),
            self.path,
            show(&self.desired),
            show(&self.server),
            self.cause
        )
    }
}

/// The likely reason the server keeps `server` when the hook asks for `desired` at `path`.
pub fn likely_cause(path: &str, desired: Option<&Value>, server: Option<&Value>) -> String {
    if let (Some(d), Some(s)) = (desired, server)
        && let (Some(dq), Some(sq)) = (quantity::parse_value(d), quantity::parse_value(s))
        && dq == sq
    {
        let s = s.as_str().map_or_else(|| s.to_string(), str::to_string);
        return format!(
            "the server normalizes the quantity {d} to {s}: write {s} in the hook's answer"
        );
    }
    if path.starts_with("stringData") {
        return "the server folds stringData into base64 data and never returns stringData: \
                write data instead"
            .to_string();
    }
    match (desired, server) {
        (Some(_), None) => "the server drops this field (an unknown field its schema prunes, \
                            or an empty or null value it does not store): leave it out of the \
                            hook's answer"
            .to_string(),
        (None, Some(s)) => format!(
            "the server puts this field back whenever it is removed (defaulting or a mutating \
             webhook): keep it in the hook's answer, as {s}"
        ),
        (_, s) => {
            let s = s.map_or_else(String::new, Value::to_string);
            format!(
                "a mutating webhook, defaulting or another controller rewrites this field to \
                 {s}: write {s} in the hook's answer, or leave the field out"
            )
        }
    }
}

/// True when the server's value may come from another writer rather than a server rule the
/// guard recognises (quantity normalization, stringData, a pruned field): worth asking the
/// child's managedFields who owns the field.
pub fn may_be_another_writer(path: &str, desired: Option<&Value>, server: Option<&Value>) -> bool {
    if path.starts_with("stringData") || server.is_none() {
        return false;
    }
    !matches!((desired, server), (Some(d), Some(s))
        if quantity::parse_value(d).zip(quantity::parse_value(s)).is_some_and(|(a, b)| a == b))
}

/// The field manager other than `own` whose entry in `managed_fields` (a child's
/// `metadata.managedFields`) owns `path`: the other writer in a fight over that field.
pub fn other_writer(managed_fields: &Value, path: &str, own: &str) -> Option<String> {
    managed_fields.as_array()?.iter().find_map(|e| {
        let manager = e.get("manager")?.as_str()?;
        let fields = e.get("fieldsV1")?;
        (manager != own && e.get("subresource").is_none() && apply::fields_v1_owns(fields, path))
            .then(|| manager.to_string())
    })
}

/// The cause of a hot loop where `writer` sets `path` back to `server`.
pub fn fight_cause(writer: &str, path: &str, server: Option<&Value>) -> String {
    let s = server.map_or_else(|| "nothing".to_string(), Value::to_string);
    format!(
        "another writer, field manager {writer:?}, sets {path} back to {s} after every write \
         (a fight between two controllers): stop one of them writing {path}, or write {s} in \
         the hook's answer"
    )
}

impl HotLoop {
    /// Name `writer` as the client that sets the field back (see [`fight_cause`]).
    pub fn fought_by(&mut self, writer: String) {
        self.cause = fight_cause(&writer, &self.path, self.server.as_ref());
        self.writer = Some(writer);
    }
}

/// The guard's state for one parent.
#[derive(Debug, Default)]
pub struct Guard {
    /// (child, field) -> (value written, consecutive syncs that wrote it, syncs since the
    /// last one that did, up to [`GAP`]).
    streaks: HashMap<(ChildId, String), (Option<Value>, usize, usize)>,
    /// Fields held now.
    held: Vec<HotLoop>,
}

fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => apply::values_equal(a, b),
        (None, None) => true,
        _ => false,
    }
}

impl Guard {
    /// The fields to leave alone in the next plan, by child.
    pub fn held_fields(&self) -> BTreeMap<ChildId, Vec<HeldField>> {
        let mut out: BTreeMap<ChildId, Vec<HeldField>> = BTreeMap::new();
        for h in &self.held {
            out.entry(h.child.clone()).or_default().push(HeldField {
                path: h.path.clone(),
                value: h.desired.clone(),
            });
        }
        out
    }

    /// Replace the held field `h` names (same child and path) with `h` (a cause found later).
    pub fn update_held(&mut self, h: &HotLoop) {
        if let Some(x) = self
            .held
            .iter_mut()
            .find(|x| x.child == h.child && x.path == h.path)
        {
            *x = h.clone();
        }
    }

    /// The fields held now.
    pub fn held(&self) -> &[HotLoop] {
        &self.held
    }

    /// True when nothing is counted or held.
    pub fn is_empty(&self) -> bool {
        self.streaks.is_empty() && self.held.is_empty()
    }

    /// Account for one executed sync: `plan` as carried out, `updated` the children whose
    /// update went through (written, or answered as a no-op). Returns the fields held from now.
    pub fn record(&mut self, plan: &Writes, updated: &[ChildId]) -> Vec<HotLoop> {
        // A held field stays held while the plan still held it back (the hook asks the same).
        self.held.retain(|h| {
            plan.held
                .iter()
                .any(|x| x.id == h.child && x.change.path == h.path)
        });
        // Children the sync did not try to update keep their streaks for up to GAP syncs.
        let mut streaks: HashMap<(ChildId, String), (Option<Value>, usize, usize)> = self
            .streaks
            .iter()
            .filter(|((id, _), (_, _, gap))| *gap < GAP && !plan.update.iter().any(|u| u.id == *id))
            .map(|(k, (v, n, gap))| (k.clone(), (v.clone(), *n, gap + 1)))
            .collect();
        let mut tripped = Vec::new();
        for u in plan.update.iter().filter(|u| updated.contains(&u.id)) {
            for c in &u.changes {
                if c.path.contains(apply::LAST_APPLIED) {
                    continue;
                }
                let key = (u.id.clone(), c.path.clone());
                let n = match self.streaks.get(&key) {
                    Some((v, n, _)) if same(v.as_ref(), c.new.as_ref()) => n + 1,
                    _ => 1,
                };
                if n >= SYNCS {
                    let h = HotLoop {
                        child: u.id.clone(),
                        path: c.path.clone(),
                        desired: c.new.clone(),
                        server: c.old.clone(),
                        cause: likely_cause(&c.path, c.new.as_ref(), c.old.as_ref()),
                        writer: None,
                    };
                    self.held.push(h.clone());
                    tripped.push(h);
                } else {
                    streaks.insert(key, (c.new.clone(), n, 0));
                }
            }
        }
        self.streaks = streaks;
        tripped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::apply::FieldChange;
    use crate::plan::writes::{HeldChange, ObjectKeyView, Update};
    use serde_json::json;

    fn id(name: &str) -> ChildId {
        ChildId {
            type_key: "Secret.v1".into(),
            key: ObjectKeyView {
                namespace: Some("ns".into()),
                name: name.into(),
            },
        }
    }

    fn update(name: &str, path: &str, old: Value, new: Value) -> Update {
        Update {
            id: id(name),
            object: json!({}),
            desired: json!({}),
            changes: vec![FieldChange {
                path: path.into(),
                old: Some(old),
                new: Some(new),
            }],
        }
    }

    fn plan(updates: Vec<Update>) -> Writes {
        Writes {
            update: updates,
            ..Writes::default()
        }
    }

    #[test]
    fn the_same_field_rewritten_by_consecutive_syncs_is_held_once() {
        let mut g = Guard::default();
        let p = plan(vec![
            update("a", "spec.x", json!("1"), json!("2")),
            update("b", "data.k", json!("v"), json!("w")),
        ]);
        let ids = [id("a"), id("b")];
        assert!(g.record(&p, &ids).is_empty());
        assert!(g.record(&p, &ids).is_empty());
        let tripped = g.record(&p, &ids);
        assert_eq!(tripped.len(), 2);
        assert_eq!(tripped[0].path, "spec.x");
        assert_eq!(tripped[0].server, Some(json!("1")));
        assert!(
            tripped[0].message().contains("spec.x"),
            "{}",
            tripped[0].message()
        );
        let held = g.held_fields();
        assert_eq!(held[&id("a")][0].value, Some(json!("2")));
        // The next plan held both back: they stay held, nothing trips again.
        let next = Writes {
            held: vec![
                HeldChange {
                    id: id("a"),
                    change: p.update[0].changes[0].clone(),
                },
                HeldChange {
                    id: id("b"),
                    change: p.update[1].changes[0].clone(),
                },
            ],
            ..Writes::default()
        };
        assert!(g.record(&next, &[]).is_empty());
        assert_eq!(g.held().len(), 2);
        // The hook asks for another value: no longer held (the plan did not hold it).
        assert!(g.record(&plan(vec![]), &[]).is_empty());
        assert!(g.held().is_empty());
    }

    #[test]
    fn a_break_a_new_value_or_a_failed_write_restarts_the_count() {
        let mut g = Guard::default();
        let p = plan(vec![update("a", "spec.x", json!("1"), json!("2"))]);
        let ok = [id("a")];
        g.record(&p, &ok);
        g.record(&p, &ok);
        // Two syncs in a row that do not rewrite it (one is a gap a fight may leave, GAP).
        g.record(&plan(vec![]), &[]);
        g.record(&plan(vec![]), &[]);
        g.record(&p, &ok);
        g.record(&p, &ok);
        // A different value.
        g.record(
            &plan(vec![update("a", "spec.x", json!("1"), json!("3"))]),
            &ok,
        );
        g.record(&p, &ok);
        // A failed write is not a rewrite.
        g.record(&p, &[]);
        g.record(&p, &ok);
        assert!(g.record(&p, &ok).is_empty());
        assert_eq!(g.record(&p, &ok).len(), 1);
    }

    #[test]
    fn one_confirmation_sync_between_rewrites_does_not_end_a_fight() {
        let mut g = Guard::default();
        let p = plan(vec![update("a", "spec.x", json!("1"), json!("2"))]);
        let ok = [id("a")];
        g.record(&p, &ok);
        // The engine's own write confirmed before the other writer set it back.
        g.record(&plan(vec![]), &[]);
        g.record(&p, &ok);
        g.record(&plan(vec![]), &[]);
        assert_eq!(g.record(&p, &ok).len(), 1);
    }

    #[test]
    fn the_other_writer_is_the_manager_owning_the_field() {
        let mf = json!([
            {"manager": "kubectl-meta", "operation": "Update",
             "fieldsV1": {"f:data": {"f:mine": {}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
             "fieldsV1": {"f:data": {"f:k": {}}}},
            {"manager": "fighter", "operation": "Update",
             "fieldsV1": {"f:data": {"f:k": {}}, "f:spec": {"f:containers": {
                 "k:{\"name\":\"web\"}": {"f:image": {}}}}}}
        ]);
        assert_eq!(
            other_writer(&mf, "data.k", "kubectl-meta").as_deref(),
            Some("fighter")
        );
        assert_eq!(
            other_writer(&mf, "spec.containers[name=web].image", "kubectl-meta").as_deref(),
            Some("fighter")
        );
        assert_eq!(other_writer(&mf, "data.mine", "kubectl-meta"), None);
        assert_eq!(
            other_writer(&mf, "spec.containers[name=db].image", "kubectl-meta"),
            None
        );
        let mut h = HotLoop {
            child: id("a"),
            path: "data.k".into(),
            desired: Some(json!("ours")),
            server: Some(json!("theirs")),
            cause: String::new(),
            writer: None,
        };
        h.fought_by("fighter".into());
        assert!(
            h.message()
                .contains("field manager \"fighter\", sets data.k back to \"theirs\""),
            "{}",
            h.message()
        );
        assert!(may_be_another_writer(
            "data.k",
            Some(&json!("a")),
            Some(&json!("b"))
        ));
        assert!(!may_be_another_writer(
            "spec.cpu",
            Some(&json!("0.5")),
            Some(&json!("500m"))
        ));
        assert!(!may_be_another_writer("spec.x", Some(&json!("a")), None));
    }

    #[test]
    fn causes_name_the_server_behaviour() {
        let c = likely_cause("spec.cpu", Some(&json!("0.5")), Some(&json!("500m")));
        assert!(
            c.contains("normalizes the quantity \"0.5\" to 500m: write 500m"),
            "{c}"
        );
        let c = likely_cause("stringData.a", Some(&json!("x")), None);
        assert!(c.contains("folds stringData"), "{c}");
        let c = likely_cause("spec.unknown", Some(&json!("x")), None);
        assert!(c.contains("prunes"), "{c}");
        let c = likely_cause("spec.mode", None, Some(&json!("fast")));
        assert!(c.contains("defaulting"), "{c}");
        let c = likely_cause("spec.image", Some(&json!("a")), Some(&json!("b")));
        assert!(c.contains("mutating webhook"), "{c}");
    }
}
