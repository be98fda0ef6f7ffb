//! Reading a flight recording back to run its window again (`kubectl meta replay`): what the
//! window started from, the recorded hook answers to serve in their order, and the writes of
//! other clients to re-apply between the syncs.
//!
//! Everything comes from the recorded `hookCalled` events (their requests are what each sync
//! observed, their answers what the hooks said) and the recording's `controllers`:
//! - the first state ([`Window::first_state`]): every object the first call of each parent (or
//!   map key) observed, Secret values masked by the recorder written as empty;
//! - the answers ([`RecordedAnswers`], a [`HookAnswers`]): per controller, hook, parent and map
//!   key, in call order; a replay that calls a hook more often than the recording gets the last
//!   answer again;
//! - other writers' writes ([`Window::external_writes`]): between two calls of one parent,
//!   what the second call observed that neither the first state, the engine (the first call's
//!   answer) nor the server explain: a child field the hook asked for that came back with
//!   another value (a fight), a parent whose spec or labels changed, an object that appeared,
//!   an object that disappeared though the engine did not delete it (the answer before still
//!   asked for it, or a related object the engine only reads).
//!   The field manager of a fight's writer is the recorded `hotLoop`'s `writer`.
//!
//! Pure: parsing and deriving; the replay driver ([`crate::replayer`]) loads the state into a
//! server and drives the engine.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::flight::{API_VERSION, KIND};
use crate::hooks::CallInfo;
use crate::runtime::context::HookAnswers;

/// Why a file cannot be replayed (the command names the file).
#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    /// Not JSON, or JSON cut short.
    #[error("{0}")]
    Json(String),
    /// Another kind of document, or a version this build does not read.
    #[error(
        "apiVersion {api_version:?} kind {kind:?} is not a flight recording this kubectl meta reads (apiVersion {API_VERSION}, kind {KIND}: what GET /debug/flight or dev --dump-flight write)"
    )]
    Version {
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
    /// `events` is missing or empty.
    #[error(
        "the recording holds no events: nothing to replay (was the flight recorder on, and did a controller sync before the dump?)"
    )]
    NoEvents,
    /// Events, but no hook call with its request to start from.
    #[error(
        "the recording holds {events} event(s) but no hookCalled event with its request: nothing to start a replay from"
    )]
    NoHookCalls {
        /// How many events it holds.
        events: usize,
    },
}

/// One recorded hook call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The controller's name.
    pub controller: String,
    /// `sync`, `finalize`, `customize`, `map`, `tombstone`.
    pub hook: String,
    /// The parent, as events name it.
    pub parent: String,
    /// The map key, for a MapController's map or tombstone call.
    pub map_key: Option<String>,
    /// The request sent (Secret values masked).
    pub request: Value,
    /// The answer, or the call's error.
    pub answer: Result<Value, String>,
}

impl Call {
    fn key(&self) -> CallKey {
        (
            self.controller.clone(),
            self.hook.clone(),
            self.parent.clone(),
            self.map_key.clone(),
        )
    }

    fn subject(&self) -> Subject {
        (
            self.controller.clone(),
            self.parent.clone(),
            self.map_key.clone(),
        )
    }

    /// A call whose request lists observed children (sync, finalize): the calls between which
    /// other writers' writes are placed.
    fn observes_children(&self) -> bool {
        matches!(self.hook.as_str(), "sync" | "finalize")
    }
}

/// (controller, hook, parent, map key).
type CallKey = (String, String, String, Option<String>);

/// (controller, parent, map key): whose syncs a write falls between.
pub type Subject = (String, String, Option<String>);

/// A write another client made during the window.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalWrite {
    /// The parent (and map key) whose sync observed it first: the write goes in before that
    /// sync.
    pub subject: Subject,
    /// Which sync of the subject observed it first (0-based, counting its sync and finalize
    /// calls): the write goes in once the replay made that many such calls.
    pub before_call: usize,
    /// `apiVersion` of the object.
    pub api_version: String,
    /// `kind` of the object.
    pub kind: String,
    /// Its namespace, if namespaced.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// A JSON merge patch of what the other client changed, or (with `create`) the object.
    pub patch: Value,
    /// The object did not exist before: create it.
    pub create: bool,
    /// Another client deleted the object: delete it (`patch` is null).
    pub delete: bool,
    /// The other client's field manager, when the recording named it (a recorded hot loop).
    pub manager: Option<String>,
}

impl ExternalWrite {
    /// `Kind namespace/name`, for messages.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// (`Kind.apiVersion`, `namespace/name`): how engine events (`action`) name the object.
    pub fn event_names(&self) -> (String, String) {
        type_object(&(
            self.api_version.clone(),
            self.kind.clone(),
            self.namespace.clone(),
            self.name.clone(),
        ))
    }
}

/// A parsed recording.
#[derive(Debug, Clone)]
pub struct Window {
    /// The controller definitions the recording carries (`controllers`), as loaded.
    pub controllers: Vec<Value>,
    /// The hook calls with their requests, in recording order.
    pub calls: Vec<Call>,
    /// Events in the recording.
    pub events: usize,
    /// The recorded `hotLoop` events: (controller, parent, `Kind.apiVersion`,
    /// `namespace/name`, field path, its `writer`: the other writer when the guard named one).
    pub hot_loops: Vec<(String, String, String, String, String, Option<String>)>,
}

/// The identity of an object: (apiVersion, kind, namespace, name).
type Identity = (String, String, Option<String>, String);

fn identity(o: &Value) -> Option<Identity> {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_string);
    Some((
        s("/apiVersion")?,
        s("/kind")?,
        s("/metadata/namespace").filter(|n| !n.is_empty()),
        s("/metadata/name")?,
    ))
}

/// Every object a request observed: the parent (or decorator target) and the objects of its
/// children, attachments and related maps.
fn observed(request: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for k in ["parent", "object"] {
        if let Some(o) = request.get(k).filter(|o| o.is_object()) {
            out.push(o);
        }
    }
    for k in ["children", "attachments", "related"] {
        if let Some(types) = request.get(k).and_then(Value::as_object) {
            for objects in types.values().filter_map(Value::as_object) {
                out.extend(objects.values().filter(|o| o.is_object()));
            }
        }
    }
    out
}

/// Whether `id` is of a type the request lists among its children or attachments (objects the
/// engine writes and may delete), as opposed to related objects it only reads.
fn is_desired_type(request: &Value, id: &Identity) -> bool {
    let key = format!("{}.{}", id.1, id.0);
    ["children", "attachments"].iter().any(|k| {
        request
            .get(*k)
            .and_then(Value::as_object)
            .is_some_and(|types| types.contains_key(&key))
    })
}

/// The objects an answer asks for (children or attachments).
fn desired(answer: &Value) -> Vec<&Value> {
    ["children", "attachments"]
        .iter()
        .filter_map(|k| answer.get(*k).and_then(Value::as_array))
        .flatten()
        .filter(|o| o.is_object())
        .collect()
}

impl Window {
    /// Parse a recording (docs/flight-recorder.md).
    pub fn parse(bytes: &[u8]) -> Result<Window, WindowError> {
        let doc: Value = serde_json::from_slice(bytes).map_err(|e| {
            WindowError::Json(if e.is_eof() {
                format!(
                    "the JSON ends early at line {} column {} (a truncated download?): {e}",
                    e.line(),
                    e.column()
                )
            } else {
                format!("not valid JSON: {e}")
            })
        })?;
        let field = |k: &str| doc.get(k).and_then(Value::as_str).unwrap_or_default();
        if field("apiVersion") != API_VERSION || field("kind") != KIND {
            return Err(WindowError::Version {
                api_version: field("apiVersion").to_string(),
                kind: field("kind").to_string(),
            });
        }
        let events = doc
            .get("events")
            .and_then(Value::as_array)
            .filter(|e| !e.is_empty())
            .ok_or(WindowError::NoEvents)?;
        let mut calls = Vec::new();
        let mut hot_loops = Vec::new();
        for e in events.iter().filter_map(|e| e.get("event")) {
            let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
            match s("event").as_deref() {
                Some("hookCalled") => {
                    let Some(request) = e.get("request").filter(|r| r.is_object()) else {
                        continue;
                    };
                    let answer = match (s("error"), e.get("response")) {
                        (Some(err), _) => Err(err),
                        (None, Some(r)) if r.is_object() => Ok(r.clone()),
                        (None, r) => Err(format!(
                            "the recorded answer is not a JSON object: {}",
                            r.map_or_else(|| "none".to_string(), Value::to_string)
                        )),
                    };
                    calls.push(Call {
                        controller: s("controller").unwrap_or_default(),
                        hook: s("hook").unwrap_or_default(),
                        parent: s("parent").unwrap_or_default(),
                        map_key: s("mapKey"),
                        request: request.clone(),
                        answer,
                    });
                }
                Some("hotLoop") => hot_loops.push((
                    s("controller").unwrap_or_default(),
                    s("parent").unwrap_or_default(),
                    s("resource").unwrap_or_default(),
                    s("object").unwrap_or_default(),
                    s("path").unwrap_or_default(),
                    s("writer"),
                )),
                _ => {}
            }
        }
        if calls.is_empty() {
            return Err(WindowError::NoHookCalls {
                events: events.len(),
            });
        }
        let controllers = doc
            .get("controllers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        Ok(Window {
            controllers,
            calls,
            events: events.len(),
            hot_loops,
        })
    }

    /// The objects the window started from: what the first call of each parent (map key)
    /// observed, each once, parents first; Secret values the recorder masked (`***`) are empty.
    pub fn first_state(&self) -> Vec<Value> {
        let mut seen_subjects = HashSet::new();
        let mut seen = HashSet::new();
        let mut parents = Vec::new();
        let mut others = Vec::new();
        for c in &self.calls {
            if !seen_subjects.insert(c.subject()) {
                continue;
            }
            for (i, o) in observed(&c.request).into_iter().enumerate() {
                let Some(id) = identity(o) else { continue };
                if seen.insert(id) {
                    let o = unmasked(o);
                    if i == 0 {
                        parents.push(o)
                    } else {
                        others.push(o)
                    }
                }
            }
        }
        parents.extend(others);
        parents
    }

    /// The answers to serve, in call order.
    pub fn answers(&self) -> RecordedAnswers {
        let mut by_key: HashMap<CallKey, Vec<Result<Value, String>>> = HashMap::new();
        for c in &self.calls {
            by_key.entry(c.key()).or_default().push(c.answer.clone());
        }
        RecordedAnswers {
            total: self.calls.len(),
            served: Mutex::new(HashMap::new()),
            by_key,
        }
    }

    /// What other clients wrote during the window (see the module header), in the order the
    /// window observed it.
    pub fn external_writes(&self) -> Vec<ExternalWrite> {
        let managers: HashMap<(String, String), String> = self
            .hot_loops
            .iter()
            .filter_map(|h| Some(((h.2.clone(), h.3.clone()), h.5.clone()?)))
            .collect();
        let mut known: HashSet<Identity> = HashSet::new();
        let mut last: BTreeMap<Subject, (usize, &Call)> = BTreeMap::new();
        let mut out = Vec::new();
        for c in self.calls.iter().filter(|c| c.observes_children()) {
            let subject = c.subject();
            let Some((n, prev)) = last.get(&subject).copied() else {
                known.extend(observed(&c.request).into_iter().filter_map(identity));
                last.insert(subject, (1, c));
                continue;
            };
            // A desired object without a namespace is in the parent's (or cluster-scoped).
            let parent_ns = prev
                .request
                .pointer("/parent/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_string);
            let mut asked: HashMap<Identity, &Value> = HashMap::new();
            for o in prev.answer.as_ref().map(desired).unwrap_or_default() {
                let Some(id) = identity(o) else { continue };
                if id.2.is_none() {
                    let in_parent_ns =
                        (id.0.clone(), id.1.clone(), parent_ns.clone(), id.3.clone());
                    known.insert(in_parent_ns.clone());
                    asked.insert(in_parent_ns, o);
                }
                known.insert(id.clone());
                asked.insert(id, o);
            }
            let before: HashMap<Identity, &Value> = observed(&prev.request)
                .into_iter()
                .filter_map(|o| Some((identity(o)?, o)))
                .collect();
            for (i, o) in observed(&c.request).into_iter().enumerate() {
                let Some(id) = identity(o) else { continue };
                let patch = if i == 0 {
                    // The parent: what changed outside its status.
                    before
                        .get(&id)
                        .and_then(|b| merge_patch(&spec_of(b), &spec_of(o)))
                } else if let Some(d) = asked.get(&id) {
                    // A child the hook asked for: fields that came back otherwise.
                    contradicted(d, o)
                } else if !known.contains(&id) && !before.contains_key(&id) {
                    known.insert(id.clone());
                    let mut w = write(&subject, n, &id, unmasked(o), true);
                    w.manager = managers.get(&type_object(&id)).cloned();
                    out.push(w);
                    continue;
                } else {
                    None
                };
                known.insert(id.clone());
                if let Some(patch) = patch {
                    let mut w = write(&subject, n, &id, patch, false);
                    w.manager = managers.get(&type_object(&id)).cloned();
                    out.push(w);
                }
            }
            // Gone since the call before, though that call's answer still asked for it (the
            // engine did not delete it) or it was not the engine's (related objects): another
            // client deleted it.
            let now: HashSet<Identity> = observed(&c.request)
                .into_iter()
                .filter_map(identity)
                .collect();
            let parent_id = observed(&prev.request).first().and_then(|o| identity(o));
            let mut gone: Vec<&Identity> = before
                .keys()
                .filter(|id| !now.contains(*id) && Some(*id) != parent_id.as_ref())
                .filter(|id| asked.contains_key(*id) || !is_desired_type(&prev.request, id))
                .collect();
            gone.sort();
            for id in gone {
                let mut w = write(&subject, n, id, Value::Null, false);
                w.delete = true;
                w.manager = managers.get(&type_object(id)).cloned();
                out.push(w);
            }
            last.insert(subject, (n + 1, c));
        }
        out
    }
}

fn write(subject: &Subject, n: usize, id: &Identity, patch: Value, create: bool) -> ExternalWrite {
    ExternalWrite {
        subject: subject.clone(),
        before_call: n,
        api_version: id.0.clone(),
        kind: id.1.clone(),
        namespace: id.2.clone(),
        name: id.3.clone(),
        patch,
        create,
        delete: false,
        manager: None,
    }
}

/// (`Kind.apiVersion`, `namespace/name`): how events name an object.
fn type_object(id: &Identity) -> (String, String) {
    let object = match &id.2 {
        Some(ns) => format!("{ns}/{}", id.3),
        None => id.3.clone(),
    };
    (format!("{}.{}", id.1, id.0), object)
}

/// An object without its status and server-set metadata (labels and annotations kept).
fn spec_of(o: &Value) -> Value {
    let mut v = o.clone();
    if let Some(m) = v.as_object_mut() {
        m.shift_remove("status");
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.retain(|k, _| k == "labels" || k == "annotations");
        }
    }
    v
}

/// The JSON merge patch turning `from` into `to` (`None`: equal).
fn merge_patch(from: &Value, to: &Value) -> Option<Value> {
    match (from, to) {
        (Value::Object(f), Value::Object(t)) => {
            let mut out = Map::new();
            for (k, tv) in t {
                match f.get(k) {
                    Some(fv) => {
                        if let Some(p) = merge_patch(fv, tv) {
                            out.insert(k.clone(), p);
                        }
                    }
                    None => {
                        out.insert(k.clone(), tv.clone());
                    }
                }
            }
            for k in f.keys().filter(|k| !t.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        _ => (from != to).then(|| to.clone()),
    }
}

/// The fields of `desired` (outside metadata but labels and annotations) that `observed` holds
/// with another value, as a merge patch setting them to the observed values.
fn contradicted(desired: &Value, observed: &Value) -> Option<Value> {
    fn walk(d: &Value, o: &Value) -> Option<Value> {
        match (d, o) {
            (Value::Object(dm), Value::Object(om)) => {
                let mut out = Map::new();
                for (k, dv) in dm {
                    if let Some(p) = om.get(k).and_then(|ov| walk(dv, ov)) {
                        out.insert(k.clone(), p);
                    }
                }
                (!out.is_empty()).then_some(Value::Object(out))
            }
            _ => (d != o).then(|| o.clone()),
        }
    }
    walk(&spec_of(desired), &spec_of(observed))
}

/// `o` with the Secret values the recorder masked (`***`) made empty, so that the object can
/// be created.
fn unmasked(o: &Value) -> Value {
    let mut v = o.clone();
    if v.get("kind").and_then(Value::as_str) == Some("Secret") {
        for k in ["data", "stringData"] {
            if let Some(m) = v.get_mut(k).and_then(Value::as_object_mut) {
                for val in m.values_mut().filter(|x| x.as_str() == Some("***")) {
                    *val = Value::String(String::new());
                }
            }
        }
    }
    v
}

/// The recorded answers, served in call order per controller, hook, parent and map key (the
/// last one again once they are used up).
#[derive(Debug)]
pub struct RecordedAnswers {
    by_key: HashMap<CallKey, Vec<Result<Value, String>>>,
    served: Mutex<HashMap<CallKey, usize>>,
    total: usize,
}

impl RecordedAnswers {
    /// (recorded answers served at least once, recorded answers, calls served beyond the
    /// recording).
    pub fn progress(&self) -> (usize, usize, usize) {
        let Ok(served) = self.served.lock() else {
            return (0, self.total, 0);
        };
        let mut used = 0;
        let mut beyond = 0;
        for (k, n) in served.iter() {
            let len = self.by_key.get(k).map_or(0, Vec::len);
            used += (*n).min(len);
            beyond += n.saturating_sub(len);
        }
        (used, self.total, beyond)
    }
}

impl HookAnswers for RecordedAnswers {
    fn answer(&self, info: &CallInfo, _body: &Value) -> Option<Result<Value, String>> {
        let key = (
            info.controller.clone(),
            info.hook.clone(),
            info.parent.clone(),
            info.map_key.clone(),
        );
        let Some(answers) = self.by_key.get(&key) else {
            return Some(Err(format!(
                "the recording holds no answer of the {} hook of {} for {}",
                info.hook,
                info.controller,
                info.label()
            )));
        };
        let mut served = self.served.lock().ok()?;
        let n = served.entry(key).or_insert(0);
        let answer = answers.get(*n).or(answers.last()).cloned();
        *n += 1;
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "p-c", "namespace": "default", "resourceVersion": "9"},
               "data": {"value": value}})
    }

    fn parent() -> Value {
        json!({"apiVersion": "x.io/v1", "kind": "Parent",
               "metadata": {"name": "p", "namespace": "default"}, "spec": {"n": 1}})
    }

    fn call(children: Option<&str>) -> Value {
        let mut kids = json!({"ConfigMap.v1": {}});
        if let Some(v) = children {
            kids["ConfigMap.v1"]["p-c"] = cm(v);
        }
        json!({"event": {"event": "hookCalled", "controller": "c", "parent": "default/p",
            "hook": "sync", "status": 200, "latencyMs": 1.0, "error": null,
            "request": {"parent": parent(), "children": kids},
            "response": {"children": [{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "p-c"}, "data": {"value": "ours"}}]}}})
    }

    fn doc(events: Vec<Value>) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"apiVersion": API_VERSION, "kind": KIND, "limitBytes": 1,
            "bytes": 1, "evicted": 0, "lost": 0, "events": events}),
        )
        .expect("json")
    }

    #[test]
    fn bad_files_are_named_errors() {
        assert!(
            matches!(Window::parse(b"{\"apiVersion\": \"fl"), Err(WindowError::Json(m)) if m.contains("ends early"))
        );
        assert!(matches!(
            Window::parse(b"[1]"),
            Err(WindowError::Version { .. })
        ));
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap"}).to_string();
        assert!(
            matches!(Window::parse(other.as_bytes()), Err(WindowError::Version { kind, .. }) if kind == "ConfigMap")
        );
        assert!(matches!(
            Window::parse(&doc(vec![])),
            Err(WindowError::NoEvents)
        ));
        let info = json!({"event": {"event": "info", "message": "m"}});
        assert!(matches!(
            Window::parse(&doc(vec![info])),
            Err(WindowError::NoHookCalls { events: 1 })
        ));
    }

    #[test]
    fn a_fight_is_the_first_state_the_answers_and_the_other_writers_writes() {
        let hot = json!({"event": {"event": "hotLoop", "controller": "c", "parent": "default/p",
            "resource": "ConfigMap.v1", "object": "default/p-c", "path": "data.value",
            "cause": "another writer, field manager \"fighter\", sets data.value back",
            "writer": "fighter"}});
        let w = Window::parse(&doc(vec![
            call(None),
            call(Some("theirs")),
            call(Some("theirs")),
            call(Some("ours")),
            hot,
        ]))
        .expect("parses");
        // The child did not exist at first: the first state is the parent alone.
        let first = w.first_state();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0]["kind"], "Parent");
        let writes = w.external_writes();
        let got: Vec<(usize, Value, Option<String>)> = writes
            .iter()
            .map(|w| (w.before_call, w.patch.clone(), w.manager.clone()))
            .collect();
        let theirs = json!({"data": {"value": "theirs"}});
        assert_eq!(
            got,
            vec![
                (1, theirs.clone(), Some("fighter".into())),
                (2, theirs, Some("fighter".into()))
            ]
        );
        let answers = w.answers();
        let info = CallInfo {
            hook: "sync".into(),
            controller_kind: "CompositeController".into(),
            controller: "c".into(),
            parent: "default/p".into(),
            map_key: None,
        };
        for _ in 0..5 {
            let a = answers.answer(&info, &Value::Null);
            assert_eq!(
                a.and_then(Result::ok)
                    .map(|a| a["children"][0]["data"]["value"].clone()),
                Some(json!("ours"))
            );
        }
        assert_eq!(answers.progress(), (4, 4, 1));
        let other = CallInfo {
            parent: "default/q".into(),
            ..info
        };
        assert!(
            matches!(answers.answer(&other, &Value::Null), Some(Err(m)) if m.contains("no answer"))
        );
    }

    #[test]
    fn a_child_gone_that_the_hook_still_asked_for_is_another_writers_delete() {
        // Observed in the second call, gone in the third: the second answer asked for it, so
        // the engine did not delete it.
        let w =
            Window::parse(&doc(vec![call(None), call(Some("ours")), call(None)])).expect("parses");
        let writes = w.external_writes();
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert!(writes[0].delete && !writes[0].create);
        assert_eq!((writes[0].before_call, writes[0].name.as_str()), (2, "p-c"));
        // The engine's own delete (the answer no longer asks for the child) is no write.
        let mut second = call(Some("ours"));
        second["event"]["response"]["children"] = json!([]);
        let w = Window::parse(&doc(vec![call(None), second, call(None)])).expect("parses");
        assert_eq!(w.external_writes(), vec![]);
    }

    #[test]
    fn a_parent_edited_between_syncs_is_a_write_and_masked_secrets_are_empty() {
        let mut second = call(Some("ours"));
        second["event"]["request"]["parent"]["spec"]["n"] = json!(2);
        second["event"]["request"]["parent"]["status"] = json!({"x": 1});
        let mut first = call(Some("ours"));
        first["event"]["request"]["children"]["Secret.v1"] = json!({"s": {"apiVersion": "v1",
            "kind": "Secret", "metadata": {"name": "s", "namespace": "default"},
            "data": {"k": "***"}}});
        let w = Window::parse(&doc(vec![first, second])).expect("parses");
        let writes = w.external_writes();
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert_eq!(writes[0].kind, "Parent");
        assert_eq!(writes[0].patch, json!({"spec": {"n": 2}}));
        let secret = w
            .first_state()
            .into_iter()
            .find(|o| o["kind"] == "Secret")
            .expect("secret");
        assert_eq!(secret["data"]["k"], "");
    }
}
