//! Turning plans into what `dryrun` prints: one [`Entry`] per object action (the header and
//! the live/planned objects), noise stripping and Secret masking, the unified YAML diff, the
//! summary line, and the JSON document (`-o json`, schema in docs/dryrun-plan.md).

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::compose::{ParentFailure, ParentPlan};
use crate::engine::plan::apply::{FieldChange, LAST_APPLIED};
use crate::engine::plan::planner::ObjectAction;
use crate::engine::plan::rollout::RevisionWrite;
use crate::engine::plan::writes::{ChildId, FinalizerChange};
use crate::k8s::object;

/// What happens to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// Created.
    Create,
    /// Updated in place.
    Update,
    /// Deleted (not desired any more).
    Delete,
    /// Deleted to be created again by the next sync (Recreate strategies).
    Recreate,
    /// Adopted (our ControllerRef added).
    Adopt,
    /// Released (our ownerReference removed).
    Release,
    /// A difference left alone (OnDelete, being deleted).
    Skip,
    /// A rolling update has not reached it yet (it stays as its older revision wants it).
    Waiting,
    /// A MapController's detached output the tombstone hook keeps.
    Keep,
    /// The parent's status replaced.
    Status,
    /// The parent's finalizer added or removed.
    Finalizer,
    /// Labels/annotations merged into the parent (DecoratorController).
    Metadata,
}

impl Action {
    /// The header word (`+ create`, `~ update`, `- delete`, ...).
    pub fn header(self) -> &'static str {
        match self {
            Action::Create => "+ create",
            Action::Update => "~ update",
            Action::Delete => "- delete",
            Action::Recreate => "-/+ replace",
            Action::Adopt => "adopt",
            Action::Release => "release",
            Action::Skip => "= skip",
            Action::Waiting => "w waiting",
            Action::Keep => "= keep",
            Action::Status => "~ status",
            Action::Finalizer => "~ finalizer",
            Action::Metadata => "~ metadata",
        }
    }
}

/// Display options.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenderOptions {
    /// Lines of context in diffs.
    pub context: usize,
    /// Keep managedFields.
    pub managed_fields: bool,
    /// Keep every field.
    pub all: bool,
    /// Show Secret values.
    pub secrets: bool,
    /// ANSI colors.
    pub color: bool,
}

/// One object action of a plan.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The action.
    pub action: Action,
    /// `Kind.apiVersion`.
    #[serde(rename = "type")]
    pub type_key: String,
    /// Namespace (absent for cluster-scoped objects).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Why (`notDesired`, `recreate`, `onDelete`, `deleting`, `add`, `remove`, a rollout note).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Changed field paths (updates, recreates, skips).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// The object as it is (absent for a create).
    pub live: Option<Value>,
    /// The object after the action (absent for a delete).
    pub planned: Option<Value>,
    /// `--server`: the server-side dry run's answer (`confirmed`, `fallback: ...`, or the error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerCheck>,
}

/// The server-side dry run's verdict on one create or update.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum ServerCheck {
    /// Accepted; the object as the server would store it is the planned one.
    Confirmed,
    /// Rejected: the real sync would fail with this error.
    Rejected {
        /// The API server's message.
        message: String,
    },
    /// Could not be checked (e.g. a webhook without dry-run support): the local result stands.
    Fallback {
        /// Why.
        message: String,
    },
}

impl Entry {
    fn of(action: Action, id: &ChildId, live: Option<&Value>, planned: Option<Value>) -> Entry {
        Entry {
            action,
            type_key: id.type_key.clone(),
            namespace: id.key.namespace.clone(),
            name: id.key.name.clone(),
            reason: None,
            changes: Vec::new(),
            live: live.cloned(),
            planned,
            server: None,
        }
    }

    /// `Kind namespace/name`.
    pub fn title(&self) -> String {
        let kind = self.type_key.split('.').next().unwrap_or_default();
        match &self.namespace {
            Some(ns) => format!("{kind} {ns}/{}", self.name),
            None => format!("{kind} {}", self.name),
        }
    }

    /// Does this entry change anything?
    pub fn is_change(&self) -> bool {
        !matches!(self.action, Action::Skip | Action::Waiting | Action::Keep)
    }
}

/// The entries of one parent's plan, in execution order (objects in sync are left out).
pub fn entries(p: &ParentPlan) -> Vec<Entry> {
    let plan = &p.plan;
    let parent_id = ChildId::of(&p.parent_resource.key(), &p.parent);
    let mut out = Vec::new();
    if let Some(m) = &plan.metadata {
        let mut after = (*p.parent).clone();
        for (field, map) in [("labels", &m.labels), ("annotations", &m.annotations)] {
            for (k, v) in map {
                match v {
                    Some(v) => after["metadata"][field][k] = json!(v),
                    None => {
                        if let Some(o) = after["metadata"][field].as_object_mut() {
                            o.shift_remove(k);
                        }
                    }
                }
            }
        }
        let mut e = Entry::of(Action::Metadata, &parent_id, Some(&p.parent), Some(after));
        e.reason = Some(m.summary());
        out.push(e);
    }
    if plan.finalizer == Some(FinalizerChange::Add) {
        out.push(finalizer_entry(p, &parent_id, FinalizerChange::Add));
    }
    for r in &plan.writes.revisions {
        out.push(revision_entry(r));
    }
    for o in &plan.objects {
        let action = match o.action {
            ObjectAction::Create => Action::Create,
            ObjectAction::Update => Action::Update,
            ObjectAction::Recreate => Action::Recreate,
            ObjectAction::Delete => Action::Delete,
            ObjectAction::Adopt => Action::Adopt,
            ObjectAction::Release => Action::Release,
            ObjectAction::Skip => Action::Skip,
            ObjectAction::Waiting => Action::Waiting,
            ObjectAction::Keep => Action::Keep,
            ObjectAction::InSync => continue,
        };
        let mut e = Entry::of(action, &o.id, o.before.as_deref(), o.after.clone());
        let mut reason = o.reason.clone();
        if let Some(r) = &o.rollout {
            reason.push_str(&format!(
                "; rollout {}/{} of revision {}{}",
                r.position,
                r.total,
                r.revision,
                if r.latest { "" } else { " (old)" }
            ));
        }
        e.reason = (!reason.is_empty()).then_some(reason);
        e.changes = o.changes.clone();
        out.push(e);
    }
    if let Some(st) = &plan.status {
        let mut after = (*p.parent).clone();
        after["status"] = st.after.clone();
        out.push(Entry::of(
            Action::Status,
            &parent_id,
            Some(&p.parent),
            Some(after),
        ));
    }
    if plan.finalizer == Some(FinalizerChange::Remove) {
        out.push(finalizer_entry(p, &parent_id, FinalizerChange::Remove));
    }
    out
}

/// A ControllerRevision write of a rolling update (an update or delete against the stored
/// revision).
fn revision_entry(r: &RevisionWrite) -> Entry {
    let (action, live, obj) = match r {
        RevisionWrite::Create { object } => (Action::Create, None, Some(object.clone())),
        RevisionWrite::Update { object, live } => {
            (Action::Update, Some((**live).clone()), Some(object.clone()))
        }
        RevisionWrite::Delete { live, .. } => (Action::Delete, Some((**live).clone()), None),
    };
    let (ns, name) = match r {
        RevisionWrite::Delete {
            name, namespace, ..
        } => (Some(namespace.clone()), name.clone()),
        RevisionWrite::Create { object } | RevisionWrite::Update { object, .. } => (
            object::namespace(object).map(str::to_string),
            object::name(object).unwrap_or_default().to_string(),
        ),
    };
    Entry {
        action,
        type_key: format!(
            "{}.{}",
            crate::engine::plan::rollout::REVISION_KIND,
            crate::engine::plan::rollout::REVISION_API_VERSION
        ),
        namespace: ns,
        name,
        reason: Some("rollout progress".into()),
        changes: Vec::new(),
        live,
        planned: obj,
        server: None,
    }
}

fn finalizer_entry(p: &ParentPlan, parent_id: &ChildId, change: FinalizerChange) -> Entry {
    let finalizer = match p.controller_kind {
        "DecoratorController" => format!("metacontroller.io/decoratorcontroller-{}", p.controller),
        _ => format!("metacontroller.io/compositecontroller-{}", p.controller),
    };
    let mut after = (*p.parent).clone();
    let mut list: Vec<Value> = object::finalizers(&p.parent)
        .into_iter()
        .filter(|f| *f != finalizer)
        .map(Value::from)
        .collect();
    if change == FinalizerChange::Add {
        list.push(Value::from(finalizer.clone()));
    }
    if list.is_empty() {
        if let Some(m) = after["metadata"].as_object_mut() {
            m.shift_remove("finalizers");
        }
    } else {
        after["metadata"]["finalizers"] = Value::Array(list);
    }
    let mut e = Entry::of(Action::Finalizer, parent_id, Some(&p.parent), Some(after));
    e.reason = Some(match change {
        FinalizerChange::Add => format!("add {finalizer}"),
        FinalizerChange::Remove => format!("remove {finalizer}"),
    });
    e
}

/// Counts for the summary line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Creates (ControllerRevisions included).
    pub create: usize,
    /// Updates.
    pub update: usize,
    /// Deletes (replacements included).
    pub delete: usize,
    /// Replacements (Recreate strategies: deleted now, created again by the next sync), also
    /// counted in `delete`.
    pub replace: usize,
    /// Adoptions.
    pub adopt: usize,
    /// Releases.
    pub release: usize,
    /// Parents whose status changes.
    pub status: usize,
    /// Finalizer additions and removals.
    pub finalizer: usize,
    /// Label/annotation merges into parents.
    pub metadata: usize,
}

impl Summary {
    /// Add the entries of one plan.
    pub fn add(&mut self, entries: &[Entry]) {
        for e in entries {
            match e.action {
                Action::Create => self.create += 1,
                Action::Update => self.update += 1,
                Action::Delete => self.delete += 1,
                Action::Recreate => {
                    self.delete += 1;
                    self.replace += 1;
                }
                Action::Adopt => self.adopt += 1,
                Action::Release => self.release += 1,
                Action::Status => self.status += 1,
                Action::Finalizer => self.finalizer += 1,
                Action::Metadata => self.metadata += 1,
                Action::Skip | Action::Waiting | Action::Keep => {}
            }
        }
    }

    /// Anything to do?
    pub fn changes(&self) -> bool {
        *self != Summary::default()
    }

    /// `Plan: 2 to create, 1 to update, 1 to delete, 0 to adopt, 0 to release; status changes`,
    /// with `K to delete (R replaced)` when some deletes are replacements (as Terraform says
    /// "destroy and then create replacement").
    pub fn line(&self) -> String {
        let replaced = if self.replace > 0 {
            format!(" ({} replaced)", self.replace)
        } else {
            String::new()
        };
        let mut s = format!(
            "Plan: {} to create, {} to update, {} to delete{replaced}, {} to adopt, {} to release",
            self.create, self.update, self.delete, self.adopt, self.release
        );
        let mut parent = Vec::new();
        if self.status > 0 {
            parent.push("status changes");
        }
        if self.finalizer > 0 {
            parent.push("finalizer changes");
        }
        if self.metadata > 0 {
            parent.push("label/annotation changes");
        }
        if !parent.is_empty() {
            s.push_str("; ");
            s.push_str(&parent.join(", "));
        }
        s
    }
}

/// Metadata fields stripped from diffs unless `--show-all`.
const NOISE: [&str; 5] = [
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "managedFields",
];

/// The object as shown: noise stripped (per the options), Secret values masked.
fn shown(obj: &Value, is_parent: bool, opts: &RenderOptions) -> Value {
    let mut v = obj.clone();
    if !opts.all {
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in NOISE {
                if f == "managedFields" && opts.managed_fields {
                    continue;
                }
                m.shift_remove(f);
            }
            if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
                a.shift_remove(LAST_APPLIED);
                if a.is_empty() {
                    m.shift_remove("annotations");
                }
            }
        }
        if !is_parent && let Some(m) = v.as_object_mut() {
            m.shift_remove("status");
        }
    }
    v
}

fn is_secret(e: &Entry) -> bool {
    e.type_key == "Secret.v1"
}

/// Mask the values of a Secret's `data` and `stringData` per key: `(hidden)` on the live side,
/// `(changed)`, `(added)` or `(hidden)` (unchanged) on the planned side.
fn mask_secrets(live: Option<&mut Value>, planned: Option<&mut Value>) {
    let field_of = |v: &Option<&mut Value>, f: &str| -> Map<String, Value> {
        v.as_ref()
            .and_then(|v| v.get(f))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let mut live = live;
    let mut planned = planned;
    for f in ["data", "stringData"] {
        let before = field_of(&live, f);
        let after = field_of(&planned, f);
        if let Some(Some(m)) = live.as_deref_mut().map(|v| v.get_mut(f))
            && let Some(m) = m.as_object_mut()
        {
            for (_, val) in m.iter_mut() {
                *val = json!("(hidden)");
            }
        }
        if let Some(Some(m)) = planned.as_deref_mut().map(|v| v.get_mut(f))
            && let Some(m) = m.as_object_mut()
        {
            for (k, val) in m.iter_mut() {
                let mark = match before.get(k) {
                    None => "(added)",
                    Some(b) if Some(b) != after.get(k) => "(changed)",
                    Some(_) => "(hidden)",
                };
                *val = json!(mark);
            }
        }
    }
}

/// The entry's live and planned objects as shown (stripped, masked).
pub fn shown_pair(e: &Entry, opts: &RenderOptions) -> (Option<Value>, Option<Value>) {
    let is_parent = matches!(
        e.action,
        Action::Status | Action::Finalizer | Action::Metadata
    );
    let mut live = e.live.as_ref().map(|v| shown(v, is_parent, opts));
    let mut planned = e.planned.as_ref().map(|v| shown(v, is_parent, opts));
    if is_secret(e) && !opts.secrets {
        mask_secrets(live.as_mut(), planned.as_mut());
    }
    (live, planned)
}

fn yaml(v: Option<&Value>) -> String {
    match v {
        None => String::new(),
        Some(v) => serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# not YAML: {e}\n")),
    }
}

/// ANSI color codes.
pub(crate) struct Paint {
    /// Whether to color at all.
    pub(crate) on: bool,
}

impl Paint {
    /// `s` in color `code` (an SGR code: `31` red, `32` green, `2` dim), when on.
    pub(crate) fn wrap(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
}

/// The unified YAML diff of live vs planned, `context` lines around each change.
pub fn diff(live: Option<&Value>, planned: Option<&Value>, context: usize, color: bool) -> String {
    let (a, b) = (yaml(live), yaml(planned));
    let paint = Paint { on: color };
    let d = similar::TextDiff::from_lines(&a, &b);
    let mut out = String::new();
    for hunk in d.unified_diff().context_radius(context).iter_hunks() {
        let _ = writeln!(out, "{}", paint.wrap("36", &hunk.header().to_string()));
        for c in hunk.iter_changes() {
            let line = c.value().trim_end_matches('\n');
            let s = match c.tag() {
                similar::ChangeTag::Delete => paint.wrap("31", &format!("-{line}")),
                similar::ChangeTag::Insert => paint.wrap("32", &format!("+{line}")),
                similar::ChangeTag::Equal => format!(" {line}"),
            };
            let _ = writeln!(out, "{s}");
        }
    }
    out
}

/// The human rendering of every plan and failure, then the summary line.
pub fn human(plans: &[Shown], failures: &[ParentFailure], opts: &RenderOptions) -> String {
    let paint = Paint { on: opts.color };
    let mut out = String::new();
    let mut summary = Summary::default();
    for sh in plans {
        let (p, es) = (&sh.plan, &sh.entries);
        summary.add(es);
        let _ = writeln!(out, "{}", paint.wrap("1", &parent_title(p)));
        if let Some(r) = &p.plan.rollout {
            let _ = writeln!(out, "  rollout: {} ({})", r.message, r.reason);
        }
        if es.iter().all(|e| !e.is_change()) && es.is_empty() {
            let _ = writeln!(out, "  no changes");
        }
        for e in es {
            let code = match e.action {
                Action::Create => "32",
                Action::Delete | Action::Recreate => "31",
                Action::Adopt | Action::Release => "35",
                Action::Skip | Action::Waiting | Action::Keep => "2",
                _ => "33",
            };
            let mut head = format!("{} {}", e.action.header(), e.title());
            if let Some(r) = &e.reason {
                head.push_str(&format!(" ({r})"));
            }
            let _ = writeln!(out, "{}", paint.wrap(code, &head));
            match &e.server {
                Some(ServerCheck::Confirmed) => {
                    let _ = writeln!(out, "  server dry run: accepted");
                }
                Some(ServerCheck::Rejected { message }) => {
                    let _ = writeln!(
                        out,
                        "{}",
                        paint.wrap("31", &format!("  server dry run: rejected: {message}"))
                    );
                }
                Some(ServerCheck::Fallback { message }) => {
                    let _ = writeln!(
                        out,
                        "{}",
                        paint.wrap(
                            "33",
                            &format!("  warning: server dry run unavailable ({message}); local result shown")
                        )
                    );
                }
                None => {}
            }
            if matches!(
                e.action,
                Action::Recreate | Action::Skip | Action::Waiting | Action::Keep
            ) {
                for c in &e.changes {
                    let _ = writeln!(out, "  {}", change_line(c, is_secret(e) && !opts.secrets));
                }
                continue;
            }
            let (l, pl) = shown_pair(e, opts);
            let body = diff(l.as_ref(), pl.as_ref(), opts.context, opts.color);
            for line in body.lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
        for n in &p.notes {
            let _ = writeln!(out, "{}", paint.wrap("33", &format!("  note: {n}")));
        }
        if let Some(s) = p.plan.resync_after_seconds {
            let _ = writeln!(
                out,
                "  resyncAfterSeconds: {s} (the next sync comes after {s}s)"
            );
        }
    }
    for f in failures {
        let _ = writeln!(
            out,
            "{}",
            paint.wrap(
                "31",
                &format!(
                    "! {} {}: sync would fail: {}",
                    f.controller, f.parent, f.message
                )
            )
        );
    }
    let _ = writeln!(out, "{}", summary.line());
    out
}

fn change_line(c: &FieldChange, mask: bool) -> String {
    let show = |v: &Option<Value>| match v {
        None => "(absent)".to_string(),
        Some(_) if mask && (c.path.starts_with("data.") || c.path.starts_with("stringData.")) => {
            "(hidden)".into()
        }
        Some(v) => v.to_string(),
    };
    if mask && (c.path.starts_with("data.") || c.path.starts_with("stringData.")) {
        return format!("{}: (changed)", c.path);
    }
    format!("{}: {} -> {}", c.path, show(&c.old), show(&c.new))
}

/// `MapController fanout default/p (key k, input v1/ConfigMap/default/a)`.
pub fn parent_title(p: &ParentPlan) -> String {
    let k = object::kind(&p.parent).unwrap_or_default();
    let name = crate::k8s::object::ObjectKey::of(&p.parent)
        .map(|k| k.to_string())
        .unwrap_or_default();
    let mut s = format!("{} {}: {k} {name}", p.controller_kind, p.controller);
    if let Some(mk) = &p.map_key {
        match &p.map_input {
            Some(i) => s.push_str(&format!(" map key {mk} (input {i})")),
            None => s.push_str(&format!(" map key {mk} (detached: its input is gone)")),
        }
    }
    if p.finalizing {
        s.push_str(" (finalizing)");
    }
    s
}

/// The JSON document of the whole run.
pub fn json_doc(plans: &[Shown], failures: &[ParentFailure], opts: &RenderOptions) -> Value {
    let mut summary = Summary::default();
    let mut parents = Vec::new();
    for sh in plans {
        let (p, es) = (&sh.plan, &sh.entries);
        summary.add(es);
        let objects: Vec<Value> = es
            .iter()
            .map(|e| {
                let (l, pl) = shown_pair(e, opts);
                let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
                v["live"] = l.unwrap_or(Value::Null);
                v["planned"] = pl.unwrap_or(Value::Null);
                v["diff"] = json!(diff(
                    v.get("live").filter(|x| !x.is_null()),
                    v.get("planned").filter(|x| !x.is_null()),
                    opts.context,
                    false
                ));
                v
            })
            .collect();
        let key = crate::k8s::object::ObjectKey::of(&p.parent);
        parents.push(json!({
            "controller": p.controller,
            "controllerKind": p.controller_kind,
            "parent": {
                "type": p.parent_resource.key(),
                "namespace": key.as_ref().and_then(|k| k.namespace.clone()),
                "name": key.as_ref().map(|k| k.name.clone()),
            },
            "mapKey": p.map_key,
            "mapInput": p.map_input,
            "finalizing": p.finalizing,
            "objects": objects,
            "status": p.plan.status.as_ref().map(|s| &s.after),
            "finalizer": p.plan.finalizer,
            "rollout": p.plan.rollout,
            "resyncAfterSeconds": p.plan.resync_after_seconds,
            "detached": p.plan.detached,
            "notes": p.notes,
            "hooks": p.exchanges.iter().map(|x| json!({"hook": x.hook})).collect::<Vec<_>>(),
        }));
    }
    let failures: Vec<Value> = failures
        .iter()
        .map(|f| json!({"controller": f.controller, "parent": f.parent, "message": f.message}))
        .collect();
    let mut counts = serde_json::to_value(summary).unwrap_or(Value::Null);
    counts["changes"] = json!(summary.changes());
    json!({
        "kind": "DryRunPlan",
        "parents": parents,
        "failures": failures,
        "summary": counts,
    })
}

/// A parent's plan with its entries (and their `--server` verdicts).
#[derive(Debug, Clone)]
pub struct Shown {
    /// The plan.
    pub plan: ParentPlan,
    /// Its entries, in execution order.
    pub entries: Vec<Entry>,
}

impl Shown {
    /// The entries of `plan`.
    pub fn new(plan: ParentPlan) -> Shown {
        let entries = entries(&plan);
        Shown { plan, entries }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(action: Action, type_key: &str, live: Option<Value>, planned: Option<Value>) -> Entry {
        Entry {
            action,
            type_key: type_key.into(),
            namespace: Some("ns".into()),
            name: "x".into(),
            reason: None,
            changes: Vec::new(),
            live,
            planned,
            server: None,
        }
    }

    #[test]
    fn summary_line_says_replaced_and_names_parent_changes() {
        let mut s = Summary::default();
        s.add(&[
            entry(Action::Create, "Pod.v1", None, None),
            entry(Action::Recreate, "Pod.v1", None, None),
            entry(Action::Delete, "Pod.v1", None, None),
            entry(Action::Waiting, "Pod.v1", None, None),
            entry(Action::Status, "P.x/v1", None, None),
        ]);
        assert_eq!(
            s.line(),
            "Plan: 1 to create, 0 to update, 2 to delete (1 replaced), 0 to adopt, 0 to release; status changes"
        );
        assert_eq!((s.delete, s.replace), (2, 1));
        assert!(s.changes());
        assert!(!Summary::default().changes());
    }

    #[test]
    fn secrets_are_masked_per_key_and_noise_is_stripped() {
        let live = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "x", "resourceVersion": "7", "uid": "u", "managedFields": [],
                "annotations": {LAST_APPLIED: "{}"}},
            "data": {"password": "b2xk", "user": "YQ=="}, "status": {"x": 1}});
        let mut planned = live.clone();
        planned["data"]["password"] = json!("bmV3");
        planned["data"]["token"] = json!("dA==");
        let e = entry(Action::Update, "Secret.v1", Some(live), Some(planned));
        let (l, p) = shown_pair(&e, &RenderOptions::default());
        let (l, p) = (l.unwrap(), p.unwrap());
        assert_eq!(
            l["data"],
            json!({"password": "(hidden)", "user": "(hidden)"})
        );
        assert_eq!(
            p["data"],
            json!({"password": "(changed)", "user": "(hidden)", "token": "(added)"})
        );
        assert_eq!(l["metadata"], json!({"name": "x"}), "noise stripped");
        assert!(l.get("status").is_none(), "children's status is noise");
        let all = RenderOptions {
            all: true,
            secrets: true,
            ..RenderOptions::default()
        };
        let (l, _) = shown_pair(&e, &all);
        let l = l.unwrap();
        assert_eq!(l["data"]["password"], json!("b2xk"));
        assert_eq!(l["metadata"]["resourceVersion"], json!("7"));
        let mf = RenderOptions {
            managed_fields: true,
            ..RenderOptions::default()
        };
        let (l, _) = shown_pair(&e, &mf);
        let l = l.unwrap();
        assert!(l["metadata"].get("managedFields").is_some());
        assert!(l["metadata"].get("uid").is_none());
    }

    #[test]
    fn unified_diff_keeps_n_lines_of_context_and_colors_on_request() {
        let a = json!({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6});
        let mut b = a.clone();
        b["f"] = json!(7);
        let d = diff(Some(&a), Some(&b), 1, false);
        assert_eq!(d, "@@ -5,2 +5,2 @@\n e: 5\n-f: 6\n+f: 7\n");
        let colored = diff(Some(&a), Some(&b), 0, true);
        assert!(colored.contains("\x1b[31m-f: 6\x1b[0m"), "{colored:?}");
        assert!(colored.contains("\x1b[32m+f: 7\x1b[0m"), "{colored:?}");
        assert_eq!(diff(Some(&a), Some(&a), 3, false), "");
    }
}
