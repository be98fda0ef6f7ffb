//! Rolling updates, the pure decision: stored ControllerRevisions + observed children + the
//! hook's answers in, a [`RolloutDecision`] and the desired children out.
//!
//! Two pure steps around the hook calls, used by the live path (`Composite::rollout`) and by
//! `dryrun` alike:
//! 1. [`revisions`]: which stored revisions claim which children, and the old revisions that
//!    still claim some, each with the parent as it was at that revision
//!    ([`rollout::patched_parent`]). The caller asks the sync hook once per old revision and
//!    checks each answer with [`RevisionAnswers::desired`].
//! 2. [`decide`]: step the rollout ([`rollout::step`]) and give the decision (state, claims,
//!    order, the ControllerRevision writes of [`revision_writes`]) and the desired children:
//!    non-rolling ones from the latest answer, rolling ones from the revision that claims them.
//!
//! The mechanics of one revision (patches, names, claims, the one-at-a-time step) are in
//! [`rollout`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::SyncError;
use crate::k8s::object;
use crate::plan::child::{ChildId, ChildType, ObjectKeyView};
use crate::plan::hookapi::{self, DecodeError, Version};
use crate::plan::ownership;
use crate::plan::planner::RolloutDecision;
use crate::plan::rollout::{self, Revision, RevisionWrite};
use crate::plan::writes::{self, PlanError};
use crate::spec::{CompositeControllerSpec, StatusConditionCheck};
use kube_apimachinery::selector::LabelSelector;

/// The rolling state of one parent before the hook calls (from [`revisions`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Revisions {
    /// The latest revision's name (from the parent's `revisionHistory.fieldPaths`).
    pub latest: String,
    /// Its parent patch.
    pub latest_patch: Value,
    /// The stored revisions controlled by the parent.
    pub stored: Vec<Revision>,
    /// Child -> revision claiming it, as stored.
    pub claims: BTreeMap<ChildId, String>,
    /// Old revisions that still claim children (in stored order), with the parent as it was
    /// at each: the sync hook is asked once per entry.
    pub old: Vec<(String, Value)>,
}

/// A CompositeController's `parentResource.revisionHistory.fieldPaths` (empty: `spec`).
pub fn field_paths(spec: &CompositeControllerSpec) -> Vec<String> {
    spec.parent_resource
        .revision_history
        .as_ref()
        .map(|r| r.field_paths.clone())
        .unwrap_or_default()
}

/// Which revisions claim which children, and the old ones the hook must be asked about.
/// `stored` are the parent's ControllerRevisions ([`rollout::revision_from_object`]); claims
/// of kinds no child type declares are ignored.
pub fn revisions(
    parent: &Value,
    field_paths: &[String],
    stored: Vec<Revision>,
    types: &[ChildType],
) -> Revisions {
    let latest_patch = rollout::parent_patch(parent, field_paths);
    let latest = rollout::revision_name(object::name(parent).unwrap_or_default(), &latest_patch);
    let mut claims = BTreeMap::new();
    for rev in &stored {
        for ((group, kind), names) in &rev.children {
            let Some(t) = types
                .iter()
                .find(|t| t.kind == *kind && object::group_of(&t.api_version) == group)
            else {
                continue;
            };
            for n in names {
                let (ns, name) = match n.split_once('/') {
                    Some((ns, name)) => (Some(ns), name),
                    None => (object::namespace(parent), n.as_str()),
                };
                let id = ChildId {
                    type_key: t.key.clone(),
                    key: ObjectKeyView {
                        namespace: t.namespaced.then(|| ns.map(str::to_string)).flatten(),
                        name: name.to_string(),
                    },
                };
                claims.insert(id, rev.name.clone());
            }
        }
    }
    let live_old: BTreeSet<&String> = claims.values().filter(|r| **r != latest).collect();
    let old = stored
        .iter()
        .filter(|r| live_old.contains(&r.name))
        .map(|r| {
            (
                r.name.clone(),
                rollout::patched_parent(parent, &r.parent_patch, field_paths),
            )
        })
        .collect();
    Revisions {
        latest,
        latest_patch,
        stored,
        claims,
        old,
    }
}

/// The sync hook's answer for an old revision that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RevisionAnswerError {
    /// The response does not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The desired children are refused (as for the latest answer).
    #[error("sync hook (revision {revision}): {source}")]
    Plan {
        /// The old revision's name.
        revision: String,
        /// Why the children are refused.
        source: Box<PlanError>,
    },
}

impl From<RevisionAnswerError> for SyncError {
    /// An unusable answer of the sync hook (the message names the revision).
    fn from(e: RevisionAnswerError) -> Self {
        SyncError::answer("sync", e.to_string())
    }
}

/// How the sync hook's answers for old revisions are read: decoded, then checked as the
/// latest answer is ([`writes::normalize_desired`]).
#[derive(Debug, Clone, Copy)]
pub struct RevisionAnswers<'a> {
    /// The hook's API version.
    pub version: Version,
    /// The declared child types.
    pub types: &'a [ChildType],
    /// The parent's child selector.
    pub selector: &'a LabelSelector,
    /// The controller's `generateSelector`.
    pub generate_selector: bool,
}

impl<'a> RevisionAnswers<'a> {
    /// The reader for the sync hook (API `version`) of a controller (`spec`) with child
    /// `types`, for a parent with child `selector`.
    pub fn new(
        spec: &CompositeControllerSpec,
        version: Version,
        types: &'a [ChildType],
        selector: &'a LabelSelector,
    ) -> Self {
        RevisionAnswers {
            version,
            types,
            selector,
            generate_selector: spec.generate_selector == Some(true),
        }
    }

    /// What the hook's answer `body` for the parent at old revision `revision` (`old_parent`)
    /// desires.
    pub fn desired(
        &self,
        revision: &str,
        old_parent: &Value,
        body: &Value,
    ) -> Result<Vec<(ChildId, Value)>, RevisionAnswerError> {
        let resp = hookapi::decode_sync("sync", self.version, body)?;
        writes::normalize_desired(
            old_parent,
            self.types,
            self.selector,
            self.generate_selector,
            resp.children,
        )
        .map_err(|source| RevisionAnswerError::Plan {
            revision: revision.to_string(),
            source: Box::new(source),
        })
    }
}

/// Inputs of [`decide`].
#[derive(Debug, Clone, Copy)]
pub struct DecideInput<'a> {
    /// The parent.
    pub parent: &'a Value,
    /// Whether the parent's resource is namespaced.
    pub parent_namespaced: bool,
    /// The declared child types.
    pub types: &'a [ChildType],
    /// Status checks per child type key.
    pub checks: &'a BTreeMap<String, Vec<StatusConditionCheck>>,
    /// The parent's child selector (labels of a new revision).
    pub selector: &'a LabelSelector,
    /// The claimed children per type key.
    pub observed: &'a BTreeMap<String, Vec<Arc<Value>>>,
    /// The latest answer's desired children.
    pub latest_desired: &'a [(ChildId, Value)],
    /// Each old revision's desired children (the hook's answer for the parent at it).
    pub old_desired: &'a BTreeMap<String, Vec<(ChildId, Value)>>,
}

/// Step the rollout: the decision and the desired children (non-rolling ones from the latest
/// answer, in its order; rolling ones from the revision that claims them, then those only an
/// old revision still wants).
pub fn decide(r: Revisions, input: DecideInput<'_>) -> (RolloutDecision, Vec<(ChildId, Value)>) {
    let rolling: BTreeSet<&str> = input
        .types
        .iter()
        .filter(|t| t.method.is_rolling())
        .map(|t| t.key.as_str())
        .collect();
    let only_rolling = |d: &[(ChildId, Value)]| -> BTreeMap<ChildId, Value> {
        d.iter()
            .filter(|(id, _)| rolling.contains(id.type_key.as_str()))
            .cloned()
            .collect()
    };
    let mut desired_by_rev: BTreeMap<String, BTreeMap<ChildId, Value>> = BTreeMap::new();
    desired_by_rev.insert(r.latest.clone(), only_rolling(input.latest_desired));
    for (rev, d) in input.old_desired {
        desired_by_rev.insert(rev.clone(), only_rolling(d));
    }
    let observed_rolling: BTreeMap<ChildId, Arc<Value>> = input
        .observed
        .iter()
        .filter(|(k, _)| rolling.contains(k.as_str()))
        .flat_map(|(k, objs)| objs.iter().map(move |o| (ChildId::of(k, o), Arc::clone(o))))
        .collect();
    let order: Vec<ChildId> = input
        .latest_desired
        .iter()
        .filter(|(id, _)| rolling.contains(id.type_key.as_str()))
        .map(|(id, _)| id.clone())
        .collect();
    let outcome = rollout::step(rollout::StepInput {
        latest: &r.latest,
        claims: r.claims.clone(),
        desired: &desired_by_rev,
        latest_order: &order,
        observed: &observed_rolling,
        checks: input.checks,
    });
    let from_rev = |id: &ChildId| {
        outcome
            .claims
            .get(id)
            .and_then(|rev| desired_by_rev.get(rev))
            .and_then(|d| d.get(id))
            .map(|v| (id.clone(), v.clone()))
    };
    let mut desired: Vec<(ChildId, Value)> = input
        .latest_desired
        .iter()
        .filter_map(|(id, v)| {
            if rolling.contains(id.type_key.as_str()) {
                from_rev(id)
            } else {
                Some((id.clone(), v.clone()))
            }
        })
        .collect();
    for (id, rev) in &outcome.claims {
        if *rev != r.latest
            && !desired.iter().any(|(d, _)| d == id)
            && let Some(x) = from_rev(id)
        {
            desired.push(x);
        }
    }
    let writes = revision_writes(&r, &input, &outcome.claims);
    (
        RolloutDecision {
            state: Some(outcome.state),
            writes,
            claims: outcome.claims,
            latest: r.latest,
            order,
        },
        desired,
    )
}

/// The ControllerRevision writes that record `claims` (child -> revision): create the latest
/// revision when it is not stored yet (labelled with the selector's exact pairs, owned by the
/// parent), update a stored one whose claims change, delete an old one that claims nothing.
pub fn revision_writes(
    r: &Revisions,
    input: &DecideInput<'_>,
    claims: &BTreeMap<ChildId, String>,
) -> Vec<RevisionWrite> {
    type ByType = BTreeMap<(String, String), BTreeSet<String>>;
    let ns = object::namespace(input.parent)
        .unwrap_or("default")
        .to_string();
    let mut wanted: BTreeMap<&str, ByType> = BTreeMap::new();
    for (id, rev) in claims {
        let Some(t) = input.types.iter().find(|t| t.key == id.type_key) else {
            continue;
        };
        let (gk, name) = rollout::claim_key(id, &t.api_version, &t.kind, input.parent_namespaced);
        wanted
            .entry(rev.as_str())
            .or_default()
            .entry(gk)
            .or_default()
            .insert(name);
    }
    let encode = |c: &ByType| -> Value {
        Value::Array(
            c.iter()
                .map(|((g, k), names)| json!({"apiGroup": g, "kind": k, "names": names}))
                .collect(),
        )
    };
    let empty = BTreeMap::new();
    let mut out = Vec::new();
    if !r.stored.iter().any(|s| s.name == r.latest) {
        let labels: serde_json::Map<String, Value> = input
            .selector
            .exact_pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        out.push(RevisionWrite::Create {
            object: json!({
                "apiVersion": rollout::REVISION_API_VERSION,
                "kind": rollout::REVISION_KIND,
                "metadata": {"name": r.latest, "namespace": ns, "labels": labels,
                    "ownerReferences": [ownership::controller_ref_for(input.parent)]},
                "parentPatch": r.latest_patch,
                "children": encode(wanted.get(r.latest.as_str()).unwrap_or(&empty)),
            }),
        });
    }
    for rev in &r.stored {
        let want = wanted.get(rev.name.as_str()).unwrap_or(&empty);
        let Some(obj) = &rev.object else { continue };
        if want.is_empty() && rev.name != r.latest {
            out.push(RevisionWrite::Delete {
                name: rev.name.clone(),
                namespace: object::namespace(obj).unwrap_or(&ns).to_string(),
                uid: object::uid(obj).unwrap_or_default().to_string(),
                live: Arc::clone(obj),
            });
        } else if *want != rev.children {
            let mut o = (**obj).clone();
            o["children"] = encode(want);
            out.push(RevisionWrite::Update {
                object: o,
                live: Arc::clone(obj),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::apply;
    use crate::spec::UpdateMethod;

    const POD: &str = "Pod.v1";
    const CM: &str = "ConfigMap.v1";

    fn types(method: UpdateMethod) -> Vec<ChildType> {
        vec![
            ChildType {
                key: POD.into(),
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespaced: true,
                method,
            },
            ChildType {
                key: CM.into(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespaced: true,
                method: UpdateMethod::InPlace,
            },
        ]
    }

    fn parent(image: &str) -> Value {
        json!({"apiVersion": "ctl.example.com/v1", "kind": "CatSet",
            "metadata": {"name": "cats", "namespace": "ns", "uid": "u-1"},
            "spec": {"replicas": 3, "template": {"image": image}}})
    }

    fn paths() -> Vec<String> {
        vec!["spec.template".into()]
    }

    fn id(type_key: &str, name: &str) -> ChildId {
        ChildId {
            type_key: type_key.into(),
            key: ObjectKeyView {
                namespace: Some("ns".into()),
                name: name.into(),
            },
        }
    }

    fn pod(name: &str, image: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "cats"}},
            "spec": {"image": image}})
    }

    /// What the hook answers for the parent at `image`: pods in order, one ConfigMap.
    fn answer(image: &str, names: &[&str]) -> Vec<(ChildId, Value)> {
        let mut d: Vec<(ChildId, Value)> =
            names.iter().map(|n| (id(POD, n), pod(n, image))).collect();
        d.push((
            id(CM, "conf"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "conf", "namespace": "ns"}, "data": {"image": image}}),
        ));
        d
    }

    /// A live pod as the server holds it after applying `pod(name, image)`.
    fn live(name: &str, image: &str, ready: bool) -> Arc<Value> {
        let mut o = apply::for_create(&pod(name, image));
        o["status"] =
            json!({"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]});
        Arc::new(o)
    }

    fn observed(pods: &[(&str, &str, bool)]) -> BTreeMap<String, Vec<Arc<Value>>> {
        let mut m = BTreeMap::new();
        m.insert(
            POD.to_string(),
            pods.iter().map(|(n, i, r)| live(n, i, *r)).collect(),
        );
        m
    }

    /// A stored ControllerRevision of `parent("image")` claiming `names`.
    fn stored(image: &str, names: &[&str]) -> Revision {
        let patch = rollout::parent_patch(&parent(image), &paths());
        let name = rollout::revision_name("cats", &patch);
        rollout::revision_from_object(Arc::new(json!({
            "apiVersion": rollout::REVISION_API_VERSION, "kind": rollout::REVISION_KIND,
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "resourceVersion": "7"},
            "parentPatch": patch,
            "children": if names.is_empty() { json!([]) } else {
                json!([{"apiGroup": "", "kind": "Pod", "names": names}]) },
        })))
    }

    fn rev_name(image: &str) -> String {
        rollout::revision_name("cats", &rollout::parent_patch(&parent(image), &paths()))
    }

    fn checks() -> BTreeMap<String, Vec<StatusConditionCheck>> {
        let mut m = BTreeMap::new();
        m.insert(
            POD.to_string(),
            vec![StatusConditionCheck {
                type_: "Ready".into(),
                status: Some("True".into()),
                reason: None,
            }],
        );
        m
    }

    fn selector() -> LabelSelector {
        LabelSelector::parse("app=cats").expect("selector")
    }

    /// One rollout decision for the parent at `image` with the given stored revisions and
    /// observed pods; the hook answers `answer(image, names)` for every revision.
    struct Case {
        method: UpdateMethod,
        image: &'static str,
        names: Vec<&'static str>,
        stored: Vec<Revision>,
        observed: BTreeMap<String, Vec<Arc<Value>>>,
    }

    impl Case {
        fn new(image: &'static str, names: &[&'static str]) -> Self {
            Case {
                method: UpdateMethod::RollingRecreate,
                image,
                names: names.to_vec(),
                stored: Vec::new(),
                observed: BTreeMap::new(),
            }
        }

        fn revisions(&self) -> Revisions {
            revisions(
                &parent(self.image),
                &paths(),
                self.stored.clone(),
                &types(self.method),
            )
        }

        fn decide(&self) -> (RolloutDecision, Vec<(ChildId, Value)>) {
            let r = self.revisions();
            let p = parent(self.image);
            let types = types(self.method);
            // The hook's answer for the parent at each old revision.
            let old_desired: BTreeMap<String, Vec<(ChildId, Value)>> = r
                .old
                .iter()
                .map(|(rev, old_parent)| {
                    let image = old_parent["spec"]["template"]["image"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    (rev.clone(), answer(&image, &self.names))
                })
                .collect();
            let latest = answer(self.image, &self.names);
            let checks = checks();
            let selector = selector();
            decide(
                r,
                DecideInput {
                    parent: &p,
                    parent_namespaced: true,
                    types: &types,
                    checks: &checks,
                    selector: &selector,
                    observed: &self.observed,
                    latest_desired: &latest,
                    old_desired: &old_desired,
                },
            )
        }
    }

    /// The image each desired pod gets, by name.
    fn images(desired: &[(ChildId, Value)]) -> Vec<(String, String)> {
        desired
            .iter()
            .filter(|(id, _)| id.type_key == POD)
            .map(|(id, v)| {
                (
                    id.key.name.clone(),
                    v["spec"]["image"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// Child name -> revision name, pods only.
    fn claims(d: &RolloutDecision) -> Vec<(String, String)> {
        d.claims
            .iter()
            .map(|(id, rev)| (id.key.name.clone(), rev.clone()))
            .collect()
    }

    /// The writes, as `(op, revision, claimed pod names)`.
    fn writes(d: &RolloutDecision) -> Vec<(&'static str, String, Value)> {
        d.writes
            .iter()
            .map(|w| match w {
                RevisionWrite::Create { object } => (
                    "create",
                    object["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .into(),
                    object["children"].clone(),
                ),
                RevisionWrite::Update { object, .. } => (
                    "update",
                    object["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .into(),
                    object["children"].clone(),
                ),
                RevisionWrite::Delete { name, .. } => ("delete", name.clone(), Value::Null),
            })
            .collect()
    }

    fn pods(names: &[&str]) -> Value {
        json!([{"apiGroup": "", "kind": "Pod", "names": names}])
    }

    #[test]
    fn no_revision_yet_creates_the_latest_claiming_every_child() {
        let c = Case::new("v1", &["a", "b"]);
        let r = c.revisions();
        assert_eq!(r.latest, rev_name("v1"));
        assert!(r.latest.starts_with("cats-"), "{}", r.latest);
        assert_eq!(
            r.latest_patch,
            json!({"spec": {"template": {"image": "v1"}}})
        );
        assert!(r.claims.is_empty() && r.old.is_empty() && r.stored.is_empty());

        let (d, desired) = c.decide();
        let state = d.state.as_ref().expect("state");
        assert_eq!(state.reason, "OnLatestRevision");
        assert!(!state.in_progress);
        assert_eq!(d.latest, rev_name("v1"));
        assert_eq!(d.order, vec![id(POD, "a"), id(POD, "b")]);
        assert_eq!(
            claims(&d),
            pairs(&[("a", &rev_name("v1")), ("b", &rev_name("v1"))])
        );
        // The desired children are the answer as it is (rolling and not).
        assert_eq!(desired, answer("v1", &["a", "b"]));
        // The latest revision is created: labelled with the selector, owned by the parent.
        assert_eq!(d.writes.len(), 1);
        let RevisionWrite::Create { object } = &d.writes[0] else {
            panic!("{:?}", d.writes);
        };
        assert_eq!(object["apiVersion"], rollout::REVISION_API_VERSION);
        assert_eq!(object["kind"], rollout::REVISION_KIND);
        assert_eq!(object["metadata"]["name"], json!(rev_name("v1")));
        assert_eq!(object["metadata"]["namespace"], "ns");
        assert_eq!(object["metadata"]["labels"], json!({"app": "cats"}));
        assert_eq!(
            object["metadata"]["ownerReferences"],
            json!([ownership::controller_ref_for(&parent("v1"))])
        );
        assert_eq!(object["parentPatch"], r.latest_patch);
        assert_eq!(object["children"], pods(&["a", "b"]));
    }

    #[test]
    fn latest_only_writes_nothing_and_is_on_latest() {
        let mut c = Case::new("v1", &["a", "b"]);
        c.stored = vec![stored("v1", &["a", "b"])];
        c.observed = observed(&[("a", "v1", true), ("b", "v1", true)]);
        let r = c.revisions();
        assert!(r.old.is_empty(), "no old revision to ask about");
        assert_eq!(r.claims.len(), 2);
        let (d, desired) = c.decide();
        assert_eq!(
            d.state.as_ref().map(|s| s.reason.as_str()),
            Some("OnLatestRevision")
        );
        assert!(d.writes.is_empty(), "{:?}", d.writes);
        assert_eq!(desired, answer("v1", &["a", "b"]));
    }

    #[test]
    fn an_old_revision_claiming_children_keeps_them_and_rolls_one() {
        let mut c = Case::new("v2", &["a", "b", "c"]);
        c.stored = vec![stored("v1", &["a", "b", "c"])];
        c.observed = observed(&[("a", "v1", true), ("b", "v1", true), ("c", "v1", true)]);
        let r = c.revisions();
        // The hook is asked once, about the parent at v1 (other fields as they are now).
        assert_eq!(r.old.len(), 1);
        assert_eq!(r.old[0].0, rev_name("v1"));
        assert_eq!(r.old[0].1, parent("v1"));
        assert_eq!(r.claims.get(&id(POD, "b")), Some(&rev_name("v1")));

        let (d, desired) = c.decide();
        let state = d.state.as_ref().expect("state");
        assert_eq!(state.reason, "RolloutProgressing");
        assert!(state.in_progress);
        assert!(state.message.contains("Pod.v1 ns/a"), "{}", state.message);
        // a moves to the latest revision; b and c keep the old template.
        assert_eq!(
            images(&desired),
            pairs(&[("a", "v2"), ("b", "v1"), ("c", "v1")])
        );
        // Non-rolling children come from the latest answer.
        assert_eq!(
            desired
                .iter()
                .find(|(i, _)| *i == id(CM, "conf"))
                .map(|(_, v)| &v["data"]),
            Some(&json!({"image": "v2"}))
        );
        assert_eq!(
            writes(&d),
            vec![
                ("create", rev_name("v2"), pods(&["a"])),
                ("update", rev_name("v1"), pods(&["b", "c"])),
            ]
        );
    }

    #[test]
    fn a_child_failing_its_status_checks_holds_the_rollout() {
        let mut c = Case::new("v2", &["a", "b"]);
        c.stored = vec![stored("v1", &["b"]), stored("v2", &["a"])];
        c.observed = observed(&[("a", "v2", false), ("b", "v1", true)]);
        let (d, desired) = c.decide();
        let state = d.state.as_ref().expect("state");
        assert_eq!(state.reason, "RolloutWaiting");
        assert!(state.in_progress);
        assert!(
            state.message.contains("status checks (Ready=True)"),
            "{}",
            state.message
        );
        assert_eq!(images(&desired), pairs(&[("a", "v2"), ("b", "v1")]));
        assert!(d.writes.is_empty(), "claims unchanged: {:?}", d.writes);

        // Once a is ready, b moves, the old revision claims nothing and is deleted.
        c.observed = observed(&[("a", "v2", true), ("b", "v1", true)]);
        let (d, desired) = c.decide();
        assert_eq!(
            d.state.as_ref().map(|s| s.reason.as_str()),
            Some("RolloutProgressing")
        );
        assert_eq!(images(&desired), pairs(&[("a", "v2"), ("b", "v2")]));
        assert_eq!(
            writes(&d),
            vec![
                ("delete", rev_name("v1"), Value::Null),
                ("update", rev_name("v2"), pods(&["a", "b"])),
            ]
        );
        let RevisionWrite::Delete { namespace, uid, .. } = &d.writes[0] else {
            panic!("{:?}", d.writes);
        };
        assert_eq!(
            (namespace.as_str(), uid.as_str()),
            ("ns", format!("uid-{}", rev_name("v1")).as_str())
        );
    }

    #[test]
    fn a_missing_or_stale_latest_child_holds_the_rollout() {
        let mut c = Case::new("v2", &["a", "b"]);
        c.stored = vec![stored("v1", &["b"]), stored("v2", &["a"])];
        // a was deleted to be recreated: the claim lapses, the latest wants it, wait for it.
        c.observed = observed(&[("b", "v1", true)]);
        let (d, desired) = c.decide();
        let state = d.state.as_ref().expect("state");
        assert_eq!(state.reason, "RolloutWaiting");
        assert!(state.message.contains("to be created"), "{}", state.message);
        assert_eq!(images(&desired), pairs(&[("a", "v2"), ("b", "v1")]));
        // a exists but still has the old template (an update not yet applied).
        c.observed = observed(&[("a", "v1", true), ("b", "v1", true)]);
        let (d, _) = c.decide();
        let state = d.state.as_ref().expect("state");
        assert!(state.message.contains("to be updated"), "{}", state.message);
    }

    #[test]
    fn rolling_in_place_and_rolling_recreate_take_the_same_decision() {
        let mut c = Case::new("v2", &["a", "b"]);
        c.stored = vec![stored("v1", &["a", "b"])];
        c.observed = observed(&[("a", "v1", true), ("b", "v1", true)]);
        c.method = UpdateMethod::RollingRecreate;
        let recreate = c.decide();
        c.method = UpdateMethod::RollingInPlace;
        let in_place = c.decide();
        assert_eq!(recreate.1, in_place.1);
        assert_eq!(recreate.0.claims, in_place.0.claims);
        assert_eq!(recreate.0.state, in_place.0.state);
        assert_eq!(recreate.0.order, in_place.0.order);
        assert_eq!(images(&in_place.1), pairs(&[("a", "v2"), ("b", "v1")]));
        // Not rolling at all: no child is ordered or claimed; everything is from the latest.
        c.method = UpdateMethod::InPlace;
        let (d, desired) = c.decide();
        assert!(d.order.is_empty() && d.claims.is_empty(), "{d:?}");
        assert_eq!(desired, answer("v2", &["a", "b"]));
        assert_eq!(
            d.state.as_ref().map(|s| s.reason.as_str()),
            Some("OnLatestRevision")
        );
    }

    #[test]
    fn children_only_an_old_revision_wants_stay_on_it_until_released() {
        // Scale down during a rollout: the latest no longer wants c; the old revision still
        // claims it, and it is released (not desired, not claimed) at once.
        let mut c = Case::new("v2", &["a", "b"]);
        c.stored = vec![stored("v1", &["b", "c"]), stored("v2", &["a"])];
        c.observed = observed(&[("a", "v2", false), ("b", "v1", true), ("c", "v1", true)]);
        let (d, desired) = c.decide();
        assert!(!d.claims.contains_key(&id(POD, "c")), "{:?}", d.claims);
        assert_eq!(images(&desired), pairs(&[("a", "v2"), ("b", "v1")]));
        assert_eq!(writes(&d), vec![("update", rev_name("v1"), pods(&["b"]))]);
    }

    #[test]
    fn revisions_read_claims_by_kind_and_scope() {
        // Claims of kinds no child type declares are ignored; a name with a namespace (a
        // cluster-scoped parent's claim) keeps it.
        let mut rev = stored("v1", &["a", "other/b"]);
        rev.children.insert(
            ("apps".into(), "Deployment".into()),
            ["d".to_string()].into(),
        );
        let r = revisions(
            &parent("v2"),
            &paths(),
            vec![rev],
            &types(UpdateMethod::RollingRecreate),
        );
        let other_b = ChildId {
            type_key: POD.into(),
            key: ObjectKeyView {
                namespace: Some("other".into()),
                name: "b".into(),
            },
        };
        assert_eq!(
            r.claims.keys().cloned().collect::<Vec<_>>(),
            vec![id(POD, "a"), other_b]
        );
        // No field paths: the revision is the whole spec.
        let r = revisions(
            &parent("v2"),
            &[],
            Vec::new(),
            &types(UpdateMethod::RollingRecreate),
        );
        assert_eq!(r.latest_patch, json!({"spec": parent("v2")["spec"]}));
    }

    #[test]
    fn claims_of_a_cluster_scoped_parent_carry_the_namespace() {
        let mut p = parent("v1");
        p["metadata"].as_object_mut().map(|m| m.remove("namespace"));
        let types = types(UpdateMethod::RollingRecreate);
        let r = revisions(&p, &paths(), Vec::new(), &types);
        let latest = answer("v1", &["a"]);
        let checks = checks();
        let selector = selector();
        let (d, _) = decide(
            r,
            DecideInput {
                parent: &p,
                parent_namespaced: false,
                types: &types,
                checks: &checks,
                selector: &selector,
                observed: &BTreeMap::new(),
                latest_desired: &latest,
                old_desired: &BTreeMap::new(),
            },
        );
        let RevisionWrite::Create { object } = &d.writes[0] else {
            panic!("{:?}", d.writes);
        };
        assert_eq!(object["children"], pods(&["ns/a"]));
        assert_eq!(object["metadata"]["namespace"], "default");
    }

    #[test]
    fn an_old_revision_answer_is_checked_like_the_latest() {
        let types = types(UpdateMethod::RollingRecreate);
        let selector = selector();
        let spec: CompositeControllerSpec = serde_json::from_value(json!({
            "parentResource": {"apiVersion": "v1", "resource": "x"}, "hooks": {}
        }))
        .expect("spec");
        let answers = RevisionAnswers::new(&spec, Version::V1, &types, &selector);
        assert!(!answers.generate_selector);
        let p = parent("v1");
        let ok = answers
            .desired("cats-1", &p, &json!({"children": [pod("a", "v1")]}))
            .expect("valid");
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].0, id(POD, "a"));
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}});
        let undeclared = answers
            .desired("cats-1", &p, &json!({"children": [deployment]}))
            .expect_err("undeclared");
        assert!(
            undeclared
                .to_string()
                .starts_with("sync hook (revision cats-1): "),
            "{undeclared}"
        );
        let bad = answers
            .desired("cats-1", &p, &json!({"children": "nope"}))
            .expect_err("undecodable");
        assert!(matches!(bad, RevisionAnswerError::Decode(_)), "{bad}");
        // In a sync, it is an unusable answer of the sync hook, with the same message.
        let message = undeclared.to_string();
        assert_eq!(
            SyncError::from(undeclared),
            SyncError::answer("sync", message)
        );
    }

    #[test]
    fn field_paths_come_from_revision_history() {
        let spec: CompositeControllerSpec = serde_json::from_value(json!({
            "parentResource": {"apiVersion": "v1", "resource": "x",
                "revisionHistory": {"fieldPaths": ["spec.template"]}},
            "hooks": {}
        }))
        .expect("spec");
        assert_eq!(field_paths(&spec), paths());
        let spec: CompositeControllerSpec = serde_json::from_value(json!({
            "parentResource": {"apiVersion": "v1", "resource": "x"}, "hooks": {}
        }))
        .expect("spec");
        assert!(field_paths(&spec).is_empty());
    }
}
