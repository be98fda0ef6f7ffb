//! The ownership graph around one object: nodes, edges (with their kind), and what controller
//! knowledge adds (adoption candidates, children to be released, map keys and tombstones,
//! decorator attachments).
//!
//! [`build`] does the I/O (owner chain by `GET`, metadata-only lists of the types that matter,
//! full objects for the rows that show a status); the classification itself reuses the
//! engine's rules: [`crate::engine::plan::ownership::claim`] for adopt/release, and
//! [`crate::engine::plan::map_plan::map_key`] for map keys.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use super::api::{ApiType, Catalog, Fetcher, Listed, RequestError};
use super::controllers::{self, Known, Role};
use super::{ControllerSource, InspectError};
use crate::engine::labels::DECORATOR_ANNOTATION;
use crate::engine::plan::map_plan::{MAP_INPUT_ANNOTATION, MAP_KEY_LABEL, map_key};
use crate::engine::plan::ownership::{self, CONTROLLER_UID_LABEL};
use crate::k8s::object;
use crate::spec::ControllerDef;
use kube_apimachinery::selector::LabelSelector;

/// Which way to trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Owners up to the roots, then each root's whole subtree.
    #[default]
    Both,
    /// Only the owner chain(s) from the object to its root(s).
    Up,
    /// Only the object's own subtree.
    Down,
}

/// What to inspect.
#[derive(Debug, Clone)]
pub struct InspectRequest {
    /// kubectl resource type (`pod`, `deploy`, `greetings.accept.example.com`).
    pub type_name: String,
    /// Object name.
    pub name: String,
    /// Namespace for namespaced types (`-n`, else the context's).
    pub namespace: String,
    /// Up, down or both.
    pub direction: Direction,
    /// At most this many owner levels up and levels below the object.
    pub depth: Option<usize>,
    /// Where controller definitions come from.
    pub controllers: ControllerSource,
    /// List every listable type even when a governing controller says which ones matter.
    pub all_types: bool,
}

/// How a node relates to the inspected object / its governing controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Relation {
    /// The inspected object.
    Inspected,
    /// An owner on the chain above it.
    Owner,
    /// A dependent found through ownerReferences (no controller knowledge about it).
    Dependent,
    /// A CompositeController child (ControllerRef to the parent, selector matches).
    Child,
    /// Matches a parent's selector but has no ControllerRef: the parent will adopt it.
    AdoptionCandidate,
    /// Owned by a parent whose selector no longer matches it: the parent will release it.
    ToBeReleased,
    /// A MapController output.
    Output,
    /// A MapController input (linked to its outputs by a `map-input` edge).
    Input,
    /// A DecoratorController attachment.
    Attachment,
}

impl Relation {
    /// The name used in `-o wide` and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inspected => "inspected",
            Self::Owner => "owner",
            Self::Dependent => "dependent",
            Self::Child => "child",
            Self::AdoptionCandidate => "adoption-candidate",
            Self::ToBeReleased => "to-be-released",
            Self::Output => "output",
            Self::Input => "input",
            Self::Attachment => "attachment",
        }
    }
}

/// The kind of an edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EdgeKind {
    /// An ownerReference with `controller: true` (the ControllerRef).
    Controller,
    /// Any other ownerReference.
    Owner,
    /// A ControllerRef plus the decorator annotation: a DecoratorController attachment.
    Attachment,
    /// From a parent to an object it would adopt (no ownerReference yet).
    AdoptionCandidate,
    /// From a MapController input to an output made from it.
    MapInput,
}

impl EdgeKind {
    /// The name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Controller => "controller",
            Self::Owner => "owner",
            Self::Attachment => "attachment",
            Self::AdoptionCandidate => "adoption-candidate",
            Self::MapInput => "map-input",
        }
    }

    /// Edges that make the tree (all but `map-input`).
    pub fn is_tree(self) -> bool {
        self != Self::MapInput
    }
}

/// One object in the graph.
#[derive(Debug, Clone)]
pub struct Node {
    /// Stable id: the uid (or `missing:<uid>` for an owner that could not be read).
    pub id: String,
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Namespace (None: cluster-scoped).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// The object: full when `full`, else its metadata only.
    pub object: Value,
    /// `object` is the full object (status readable).
    pub full: bool,
    /// Relation to the inspected object / governing controller.
    pub relation: Relation,
    /// An owner named by an ownerReference that does not exist (or could not be read).
    pub missing: Option<String>,
    /// Label of the group it is shown in under its parent (child type, map key, attachments).
    pub group: Option<String>,
    /// MapController: the map key label.
    pub map_key: Option<String>,
    /// MapController: the `map-input` annotation.
    pub map_input: Option<String>,
    /// MapController: the input is gone (or no longer selected): a tombstone.
    pub tombstone: bool,
    /// Controllers governing this object (`CompositeController/name`).
    pub governed_by: Vec<String>,
    /// A problem worth showing (an invalid selector).
    pub problem: Option<String>,
}

impl Node {
    fn new(id: String, object: Value, full: bool, relation: Relation) -> Self {
        Node {
            id,
            api_version: object::api_version(&object).unwrap_or_default().to_string(),
            kind: object::kind(&object).unwrap_or_default().to_string(),
            namespace: object::namespace(&object).map(str::to_string),
            name: object::name(&object).unwrap_or_default().to_string(),
            object,
            full,
            relation,
            missing: None,
            group: None,
            map_key: None,
            map_input: None,
            tombstone: false,
            governed_by: Vec::new(),
            problem: None,
        }
    }
}

/// One edge: `from` owns / governs / feeds `to`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Edge {
    /// Owner (parent, input) node id.
    pub from: String,
    /// Dependent node id.
    pub to: String,
    /// What links them.
    pub kind: EdgeKind,
}

/// A type that could not be listed.
#[derive(Debug, Clone)]
pub struct Skipped {
    /// kubectl's full type name.
    pub type_name: String,
    /// Namespace asked (None: every namespace / cluster-scoped).
    pub namespace: Option<String>,
    /// Why (the server's message).
    pub reason: String,
}

/// The result of an inspection.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Id of the inspected object.
    pub target: String,
    /// Ids of the roots shown.
    pub roots: Vec<String>,
    /// Nodes by id.
    pub nodes: BTreeMap<String, Node>,
    /// Edges (sorted, unique).
    pub edges: Vec<Edge>,
    /// The direction asked.
    pub direction: Direction,
    /// Depth limit asked.
    pub depth: Option<usize>,
    /// Types listed (with the namespace asked) to find dependents.
    pub listed: Vec<(ApiType, Option<String>)>,
    /// True when every listable type was listed (no governing controller said which matter).
    pub listed_all_types: bool,
    /// Types that could not be listed (forbidden), named in the footer.
    pub skipped: Vec<Skipped>,
    /// Controllers governing objects in the graph.
    pub governing: Vec<String>,
    /// Things worth telling that are not errors.
    pub notes: Vec<String>,
}

impl Graph {
    /// The tree edges leaving `id` (its dependents), in display order: by group, kind, name.
    pub fn children_of(&self, id: &str) -> Vec<&Edge> {
        let mut out: Vec<&Edge> = self
            .edges
            .iter()
            .filter(|e| e.from == id && e.kind.is_tree() && self.nodes.contains_key(&e.to))
            .collect();
        out.sort_by_key(|e| {
            let n = &self.nodes[&e.to];
            (
                n.group.clone().unwrap_or_default(),
                n.kind.clone(),
                n.namespace.clone(),
                n.name.clone(),
            )
        });
        out
    }

    /// The tree edges arriving at `id` (its owners).
    pub fn owners_of(&self, id: &str) -> Vec<&Edge> {
        self.edges
            .iter()
            .filter(|e| e.to == id && e.kind.is_tree() && self.nodes.contains_key(&e.from))
            .collect()
    }

    /// Ids of the nodes on an owner chain from the target to a root (target included).
    pub fn path(&self) -> HashSet<String> {
        let mut seen = HashSet::new();
        let mut stack = vec![self.target.clone()];
        while let Some(id) = stack.pop() {
            if !seen.insert(id.clone()) {
                continue;
            }
            for e in self.owners_of(&id) {
                if matches!(
                    e.kind,
                    EdgeKind::Controller | EdgeKind::Owner | EdgeKind::Attachment
                ) {
                    stack.push(e.from.clone());
                }
            }
        }
        seen
    }

    fn add_edge(&mut self, from: &str, to: &str, kind: EdgeKind) {
        let e = Edge {
            from: from.to_string(),
            to: to.to_string(),
            kind,
        };
        if !self.edges.contains(&e) {
            self.edges.push(e);
        }
    }
}

fn node_id(obj: &Value) -> String {
    match object::uid(obj) {
        Some(uid) if !uid.is_empty() => uid.to_string(),
        _ => format!(
            "{}/{}/{}",
            object::kind(obj).unwrap_or_default(),
            object::namespace(obj).unwrap_or_default(),
            object::name(obj).unwrap_or_default()
        ),
    }
}

fn api_error(what: String) -> impl FnOnce(RequestError) -> InspectError {
    move |e| {
        if e.code == 403 {
            InspectError::Forbidden {
                what,
                message: e.message,
            }
        } else {
            InspectError::Api {
                what: format!("reading {what} failed"),
                message: e.message,
            }
        }
    }
}

/// Inspect one object: resolve its type, read it and its owners, find the governing
/// controllers, list what matters and build the graph.
pub async fn build(
    fetcher: &Fetcher,
    catalog: &Catalog,
    req: &InspectRequest,
) -> Result<Graph, InspectError> {
    let ty = catalog.resolve(&req.type_name)?.clone();
    let ns = ty.namespaced.then(|| req.namespace.clone());
    let target = fetcher
        .get(&ty, ns.as_deref(), &req.name)
        .await
        .map_err(api_error(format!("{} {:?}", ty.full_name(), req.name)))?
        .ok_or_else(|| InspectError::NotFound {
            type_name: ty.full_name(),
            name: req.name.clone(),
            namespace: ns.clone(),
        })?;
    let known = controllers::load(&req.controllers, fetcher, catalog).await?;
    build_from(fetcher, catalog, req, ty, target, &known).await
}

/// Everything after the inspected object was read (the watch loop calls [`build`] again).
async fn build_from(
    fetcher: &Fetcher,
    catalog: &Catalog,
    req: &InspectRequest,
    ty: ApiType,
    target: Value,
    known: &Known,
) -> Result<Graph, InspectError> {
    let mut g = Graph {
        target: node_id(&target),
        direction: req.direction,
        depth: req.depth,
        notes: known.notes.clone(),
        ..Graph::default()
    };
    let mut types: HashMap<String, ApiType> = HashMap::new();
    types.insert(g.target.clone(), ty);
    g.nodes.insert(
        g.target.clone(),
        Node::new(g.target.clone(), target, true, Relation::Inspected),
    );

    // 1. Up: the owner chain, then the roots shown.
    trace_owners(fetcher, catalog, req, &mut g, &mut types).await;
    set_roots(&mut g, req.direction);

    // 2. Down: list the types that matter, metadata only.
    let mut objects: Vec<(ApiType, Value)> = Vec::new();
    if req.direction != Direction::Up {
        objects = list_down(fetcher, catalog, &known.defs, req.all_types, &mut g, &types).await;
        descend(&mut g, &mut types, &objects, req);
    }

    // 3. Controller knowledge.
    apply_controllers(fetcher, catalog, &known.defs, &mut g, &mut types, &objects).await;

    // 4. Full objects for the rows that show a status.
    fetch_statuses(fetcher, &mut g, &types).await;
    g.edges.sort();
    Ok(g)
}

/// An owner to read: its type, namespace (None: cluster-scoped) and name.
type OwnerAsk = (ApiType, Option<String>, String);

/// An owner read, by its type's full name, namespace and name.
type OwnerKey = (String, Option<String>, String);

/// An ownerReference to resolve: the dependent's node id, the reference, the owner's type
/// (None: not served).
type OwnerLink = (String, object::OwnerRef, Option<ApiType>);

/// What one level of owner GETs answered.
#[derive(Default)]
struct OwnerAnswers {
    /// Owners read.
    found: HashMap<OwnerKey, Value>,
    /// Owners that could not be read.
    failed: HashMap<OwnerKey, RequestError>,
}

/// Up: the owner chain from the target, level by level (one round of parallel GETs per
/// level), at most `--depth` levels (none when tracing down only).
async fn trace_owners(
    fetcher: &Fetcher,
    catalog: &Catalog,
    req: &InspectRequest,
    g: &mut Graph,
    types: &mut HashMap<String, ApiType>,
) {
    let up_levels = match req.direction {
        Direction::Down => 0,
        _ => req.depth.unwrap_or(usize::MAX),
    };
    let mut frontier = vec![g.target.clone()];
    let mut level = 0;
    while !frontier.is_empty() && level < up_levels {
        level += 1;
        let (asks, links) = owner_asks(catalog, g, &frontier);
        let answers = fetch_owners(fetcher, asks).await;
        frontier = link_owners(g, types, links, &answers);
    }
}

/// The ownerReferences of the `frontier` nodes, and the owners to read for them (each owner
/// not in the graph yet and of a served type, once).
fn owner_asks(
    catalog: &Catalog,
    g: &Graph,
    frontier: &[String],
) -> (Vec<OwnerAsk>, Vec<OwnerLink>) {
    let mut asks = Vec::new();
    let mut links: Vec<OwnerLink> = Vec::new();
    for id in frontier {
        let obj = &g.nodes[id].object;
        let child_ns = object::namespace(obj).map(str::to_string);
        for r in object::owner_refs(obj) {
            let owner_ty = catalog.by_kind(&r.api_version, &r.kind).cloned();
            if !g.nodes.contains_key(&r.uid)
                && !links.iter().any(|(_, p, _)| p.uid == r.uid)
                && let Some(t) = &owner_ty
            {
                asks.push((
                    t.clone(),
                    child_ns.clone().filter(|_| t.namespaced),
                    r.name.clone(),
                ));
            }
            links.push((id.clone(), r, owner_ty));
        }
    }
    (asks, links)
}

/// Read the owners asked, in parallel.
async fn fetch_owners(fetcher: &Fetcher, asks: Vec<OwnerAsk>) -> OwnerAnswers {
    let answers = fetcher.get_many(asks.clone()).await;
    let mut out = OwnerAnswers::default();
    for ((t, ns, name), answer) in asks.into_iter().zip(answers) {
        match answer {
            Ok(Some(obj)) => {
                out.found.insert((t.full_name(), ns, name), obj);
            }
            Ok(None) => {}
            Err(e) => {
                out.failed.insert((t.full_name(), ns, name), e);
            }
        }
    }
    out
}

/// Add the owners read (or a `missing:` node for those that could not be) and their edges;
/// the ids of the owners added, the next level's frontier.
fn link_owners(
    g: &mut Graph,
    types: &mut HashMap<String, ApiType>,
    links: Vec<OwnerLink>,
    answers: &OwnerAnswers,
) -> Vec<String> {
    let mut next = Vec::new();
    for (child, r, owner_ty) in links {
        let kind = if r.controller {
            EdgeKind::Controller
        } else {
            EdgeKind::Owner
        };
        if g.nodes.contains_key(&r.uid) {
            g.add_edge(&r.uid, &child, kind);
            continue;
        }
        let child_ns = g.nodes[&child].namespace.clone();
        let key = owner_ty.as_ref().map(|t| {
            (
                t.full_name(),
                child_ns.clone().filter(|_| t.namespaced),
                r.name.clone(),
            )
        });
        let obj = key.as_ref().and_then(|k| {
            answers
                .found
                .get(k)
                .filter(|o| object::uid(o) == Some(r.uid.as_str()))
                .cloned()
        });
        let error = key.as_ref().and_then(|k| answers.failed.get(k));
        match (obj, owner_ty) {
            (Some(obj), Some(t)) => {
                let id = node_id(&obj);
                types.insert(id.clone(), t);
                g.nodes.insert(
                    id.clone(),
                    Node::new(id.clone(), obj, true, Relation::Owner),
                );
                g.add_edge(&id, &child, kind);
                next.push(id);
            }
            (_, owner_ty) => {
                let n = missing_owner(&r, child_ns, owner_ty.as_ref(), error);
                let id = n.id.clone();
                g.nodes.insert(id.clone(), n);
                g.add_edge(&id, &child, kind);
            }
        }
    }
    next
}

/// The `missing:<uid>` node of an owner that could not be read, saying why.
fn missing_owner(
    r: &object::OwnerRef,
    child_ns: Option<String>,
    owner_ty: Option<&ApiType>,
    error: Option<&RequestError>,
) -> Node {
    let mut n = Node::new(
        format!("missing:{}", r.uid),
        serde_json::json!({"apiVersion": r.api_version, "kind": r.kind,
            "metadata": {"name": r.name, "uid": r.uid,
                "namespace": child_ns.filter(|_| owner_ty.is_none_or(|t| t.namespaced))}}),
        false,
        Relation::Owner,
    );
    n.missing = Some(match (owner_ty, error) {
        (None, _) => format!("type {}/{} is not served", r.api_version, r.kind),
        (Some(_), Some(e)) if e.code == 403 => {
            format!("cannot read the owner (forbidden: {})", e.message)
        }
        (Some(_), Some(e)) => format!("cannot read the owner: {}", e.message),
        (Some(_), None) => "owner not found (deleted, garbage collection pending?)".to_string(),
    });
    n
}

/// The roots shown: the tops of the owner chains from the target (the target itself when
/// tracing down only).
fn set_roots(g: &mut Graph, direction: Direction) {
    let path = g.path();
    g.roots = path
        .iter()
        .filter(|id| g.owners_of(id).is_empty())
        .cloned()
        .collect();
    g.roots.sort();
    if direction == Direction::Down {
        g.roots = vec![g.target.clone()];
    }
}

/// Down: list the types that matter (metadata only), in the target's namespace unless a
/// root is cluster-scoped; the types that cannot be listed are noted as skipped. The objects
/// listed.
async fn list_down(
    fetcher: &Fetcher,
    catalog: &Catalog,
    defs: &[ControllerDef],
    all_types: bool,
    g: &mut Graph,
    types: &HashMap<String, ApiType>,
) -> Vec<(ApiType, Value)> {
    let (to_list, all) = types_to_list(catalog, defs, g, types, all_types);
    g.listed_all_types = all;
    let cluster_wide = g
        .roots
        .iter()
        .any(|r| types.get(r).is_some_and(|t| !t.namespaced) || g.nodes[r].namespace.is_none());
    let scope = if cluster_wide {
        None
    } else {
        g.nodes[&g.target].namespace.clone()
    };
    let asks: Vec<(ApiType, Option<String>)> = to_list
        .into_iter()
        .map(|t| {
            let ns = scope.clone().filter(|_| t.namespaced);
            (t, ns)
        })
        .collect();
    g.listed = asks.clone();
    let mut objects = Vec::new();
    for (t, listed) in fetcher.list_many(asks.clone(), false).await {
        match listed {
            Listed::Items(items) => objects.extend(items.into_iter().map(|o| (t.clone(), o))),
            Listed::Forbidden(reason) => g.skipped.push(Skipped {
                type_name: t.full_name(),
                namespace: asks
                    .iter()
                    .find(|(a, _)| a.resource == t.resource)
                    .and_then(|(_, ns)| ns.clone()),
                reason,
            }),
            Listed::Gone => {}
        }
    }
    objects
}

/// Full objects for the rows that show a status (those read as metadata only).
async fn fetch_statuses(fetcher: &Fetcher, g: &mut Graph, types: &HashMap<String, ApiType>) {
    let want: Vec<String> = g
        .nodes
        .values()
        .filter(|n| !n.full && n.missing.is_none() && n.relation != Relation::Input)
        .filter(|n| types.get(&n.id).is_some_and(|t| t.has_status))
        .map(|n| n.id.clone())
        .collect();
    fetch_full(fetcher, g, types, &want).await;
}

/// Replace the metadata of `ids` with their full objects (parallel GETs).
async fn fetch_full(
    fetcher: &Fetcher,
    g: &mut Graph,
    types: &HashMap<String, ApiType>,
    ids: &[String],
) {
    let asks: Vec<(ApiType, Option<String>, String)> = ids
        .iter()
        .filter_map(|id| {
            let n = &g.nodes[id];
            Some((types.get(id)?.clone(), n.namespace.clone(), n.name.clone()))
        })
        .collect();
    let ids: Vec<&String> = ids.iter().filter(|id| types.contains_key(*id)).collect();
    for (id, answer) in ids.into_iter().zip(fetcher.get_many(asks).await) {
        // A row whose full object cannot be read keeps its metadata (no status shown).
        if let (Ok(Some(obj)), Some(n)) = (answer, g.nodes.get_mut(id))
            && object::uid(&obj) == object::uid(&n.object)
        {
            n.object = obj;
            n.full = true;
        }
    }
}

/// The types to list: the governing controllers' types (and those of built-in workload
/// controllers below them) when they cover every object on the path, else every listable type.
/// Returns the types and whether it is "every type".
fn types_to_list(
    catalog: &Catalog,
    defs: &[ControllerDef],
    g: &Graph,
    types: &HashMap<String, ApiType>,
    all_types: bool,
) -> (Vec<ApiType>, bool) {
    let every = || -> (Vec<ApiType>, bool) {
        let list = catalog
            .types
            .iter()
            .filter(|t| t.listable() && t.resource.plural != "events")
            .cloned()
            .collect();
        (list, true)
    };
    if all_types {
        return every();
    }
    let roots: Vec<&ApiType> = g.roots.iter().filter_map(|r| types.get(r)).collect();
    let governed_root = g.roots.iter().all(|r| {
        types.get(r).is_some_and(|t| {
            defs.iter()
                .any(|d| controllers::governs(d, catalog, t, &g.nodes[r].object).is_some())
        })
    });
    if roots.is_empty() || !governed_root {
        return every();
    }
    // Closure: types below the roots through controller definitions and built-in controllers.
    let mut set: Vec<ApiType> = roots.into_iter().cloned().collect();
    let mut i = 0;
    while i < set.len() {
        let t = set[i].clone();
        let mut more = controllers::builtin_dependents(&t, catalog);
        for d in defs {
            if controllers::governed_types(d, catalog)
                .iter()
                .any(|p| p.resource == t.resource)
            {
                more.extend(controllers::dependent_types(d, catalog));
            }
        }
        for m in more {
            if !set.iter().any(|s| s.resource == m.resource) {
                set.push(m);
            }
        }
        i += 1;
    }
    let path = g.path();
    let covered = path.iter().all(|id| {
        g.nodes[id].missing.is_some()
            || types
                .get(id)
                .is_some_and(|t| set.iter().any(|s| s.resource == t.resource))
    });
    if !covered {
        return every();
    }
    (set.into_iter().filter(ApiType::listable).collect(), false)
}

/// Add every root's subtree (through ownerReferences) from the listed objects.
fn descend(
    g: &mut Graph,
    types: &mut HashMap<String, ApiType>,
    objects: &[(ApiType, Value)],
    req: &InspectRequest,
) {
    let mut dependents: HashMap<&str, Vec<(usize, bool)>> = HashMap::new();
    for (i, (_, o)) in objects.iter().enumerate() {
        let refs = o
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array);
        for r in refs.into_iter().flatten() {
            if let Some(uid) = r.get("uid").and_then(Value::as_str) {
                let controller = r.get("controller").and_then(Value::as_bool) == Some(true);
                dependents.entry(uid).or_default().push((i, controller));
            }
        }
    }
    // Level of the target below its root, for --depth.
    let target_level = level_of(g, &g.target);
    let max_level = req.depth.map(|d| target_level + d);
    let mut queue: Vec<(String, usize)> = g.roots.iter().map(|r| (r.clone(), 0)).collect();
    let mut seen: HashSet<String> = HashSet::new();
    while let Some((id, level)) = queue.pop() {
        if !seen.insert(id.clone()) || max_level.is_some_and(|m| level >= m) {
            continue;
        }
        let uid = object::uid(&g.nodes[&id].object)
            .unwrap_or_default()
            .to_string();
        for &(i, controller) in dependents.get(uid.as_str()).into_iter().flatten() {
            let (t, o) = &objects[i];
            let child = node_id(o);
            if !g.nodes.contains_key(&child) {
                types.insert(child.clone(), t.clone());
                g.nodes.insert(
                    child.clone(),
                    Node::new(child.clone(), o.clone(), false, Relation::Dependent),
                );
            }
            let kind = if controller {
                EdgeKind::Controller
            } else {
                EdgeKind::Owner
            };
            g.add_edge(&id, &child, kind);
            queue.push((child, level + 1));
        }
    }
}

/// Owner hops from `id` up to its farthest root.
fn level_of(g: &Graph, id: &str) -> usize {
    let mut best = 0;
    let mut stack = vec![(id.to_string(), 0usize)];
    let mut seen = HashSet::new();
    while let Some((cur, l)) = stack.pop() {
        if !seen.insert(cur.clone()) {
            continue;
        }
        best = best.max(l);
        for e in g.owners_of(&cur) {
            stack.push((e.from.clone(), l + 1));
        }
    }
    best
}

/// Mark what the governing controllers reveal about each governed node in the graph.
async fn apply_controllers(
    fetcher: &Fetcher,
    catalog: &Catalog,
    defs: &[ControllerDef],
    g: &mut Graph,
    types: &mut HashMap<String, ApiType>,
    objects: &[(ApiType, Value)],
) {
    let mut governed: Vec<(String, usize, Role)> = Vec::new();
    for (id, n) in &g.nodes {
        let Some(t) = types.get(id) else { continue };
        if n.missing.is_some() || n.relation == Relation::AdoptionCandidate {
            continue;
        }
        for (i, d) in defs.iter().enumerate() {
            if let Some(role) = controllers::governs(d, catalog, t, &n.object) {
                governed.push((id.clone(), i, role));
            }
        }
    }
    // Parents need their spec (selector): fetch them in full first.
    let parents: Vec<String> = governed
        .iter()
        .filter(|(id, _, role)| *role != Role::DecoratorTarget && !g.nodes[id].full)
        .map(|(id, _, _)| id.clone())
        .collect();
    fetch_full(fetcher, g, types, &parents).await;
    let mut names = BTreeSet::new();
    for (id, i, role) in governed {
        let def = &defs[i];
        names.insert(controllers::label(def));
        if let Some(n) = g.nodes.get_mut(&id) {
            n.governed_by.push(controllers::label(def));
        }
        let mut scan = Scan {
            catalog,
            types,
            objects,
        };
        match role {
            Role::CompositeParent => composite(&mut scan, def, g, &id),
            Role::MapParent => map(&mut scan, def, g, &id),
            Role::DecoratorTarget => decorator(catalog, def, g, objects, &id),
        }
    }
    g.governing = names.into_iter().collect();
}

/// Objects of `ty` in the scope of `parent` (its namespace, or everywhere when cluster-scoped).
fn in_scope<'a>(
    objects: &'a [(ApiType, Value)],
    ty: &'a ApiType,
    parent: &'a Node,
) -> impl Iterator<Item = &'a Value> + 'a {
    objects.iter().filter_map(move |(t, o)| {
        (t.resource == ty.resource
            && (parent.namespace.is_none() || object::namespace(o) == parent.namespace.as_deref()))
        .then_some(o)
    })
}

fn controlled_by(o: &Value, uid: &str) -> bool {
    object::controller_ref(o).is_some_and(|r| r.uid == uid)
}

/// Add `o` (of type `t`) as a node if the graph lacks it; its id.
fn ensure_node(
    g: &mut Graph,
    types: &mut HashMap<String, ApiType>,
    t: &ApiType,
    o: &Value,
    relation: Relation,
) -> String {
    let id = node_id(o);
    if !g.nodes.contains_key(&id) {
        types.insert(id.clone(), t.clone());
        g.nodes.insert(
            id.clone(),
            Node::new(id.clone(), o.clone(), false, relation),
        );
    }
    id
}

fn set_relation(g: &mut Graph, id: &str, relation: Relation, group: &str) {
    if let Some(n) = g.nodes.get_mut(id) {
        if n.relation != Relation::Inspected && n.relation != Relation::Owner {
            n.relation = relation;
        }
        n.group = Some(group.to_string());
    }
}

/// The governed parent `id`, its uid and its selector (`select` reads it from the parent);
/// an invalid selector is recorded on the node as its problem and gives `None`.
fn parent_with_selector(
    g: &mut Graph,
    id: &str,
    select: impl FnOnce(&Value, &str) -> Result<LabelSelector, String>,
) -> Option<(Node, String, LabelSelector)> {
    let parent = g.nodes.get(id)?.clone();
    let uid = object::uid(&parent.object).unwrap_or_default().to_string();
    match select(&parent.object, &uid) {
        Ok(s) => Some((parent, uid, s)),
        Err(problem) => {
            if let Some(n) = g.nodes.get_mut(id) {
                n.problem = Some(problem);
            }
            None
        }
    }
}

/// CompositeController's selector: `controller-uid: <uid>` with `generateSelector`, else the
/// parent's non-empty `spec.selector`.
fn composite_selector(generate: bool, parent: &Value, uid: &str) -> Result<LabelSelector, String> {
    if generate {
        return LabelSelector::parse(&format!("{CONTROLLER_UID_LABEL}={uid}"))
            .map_err(|e| e.to_string());
    }
    let Some(s) = parent.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        return Err("no spec.selector (and generateSelector is not set)".to_string());
    };
    let s = LabelSelector::from_label_selector(s)
        .map_err(|e| format!("spec.selector is invalid: {e}"))?;
    if s.is_empty() {
        return Err("spec.selector is empty".to_string());
    }
    Ok(s)
}

/// The objects of one scan: listed objects and their types, and the types of graph nodes.
struct Scan<'a> {
    catalog: &'a Catalog,
    types: &'a mut HashMap<String, ApiType>,
    objects: &'a [(ApiType, Value)],
}

fn composite(scan: &mut Scan<'_>, def: &ControllerDef, g: &mut Graph, id: &str) {
    let ControllerDef::Composite(c) = def else {
        return;
    };
    let generate = c.spec.generate_selector == Some(true);
    let Some((parent, uid, selector)) =
        parent_with_selector(g, id, |p, uid| composite_selector(generate, p, uid))
    else {
        return;
    };
    let (catalog, objects) = (scan.catalog, scan.objects);
    for rule in &c.spec.child_resources {
        let Some(t) = catalog.by_rule(&rule.api_version, &rule.resource) else {
            continue;
        };
        let group = t.full_name();
        let owned: Vec<Arc<Value>> = in_scope(objects, t, &parent)
            .filter(|o| controlled_by(o, &uid))
            .map(|o| Arc::new(o.clone()))
            .collect();
        let orphans: Vec<Arc<Value>> = in_scope(objects, t, &parent)
            .filter(|o| object::controller_ref(o).is_none())
            .map(|o| Arc::new(o.clone()))
            .collect();
        let claims = ownership::claim(
            object::is_deleting(&parent.object),
            &selector,
            owned,
            orphans,
        );
        let adopt: HashSet<String> = claims.adopt.iter().map(|o| node_id(o)).collect();
        for o in &claims.children {
            let child = node_id(o);
            if adopt.contains(&child) {
                continue;
            }
            if g.nodes.contains_key(&child) {
                set_relation(g, &child, Relation::Child, &group);
            }
        }
        for o in &claims.release {
            let child = node_id(o);
            if g.nodes.contains_key(&child) {
                set_relation(g, &child, Relation::ToBeReleased, &group);
            }
        }
        for o in &claims.adopt {
            let child = ensure_node(g, scan.types, t, o, Relation::AdoptionCandidate);
            set_relation(g, &child, Relation::AdoptionCandidate, &group);
            g.add_edge(id, &child, EdgeKind::AdoptionCandidate);
        }
    }
}

fn map(scan: &mut Scan<'_>, def: &ControllerDef, g: &mut Graph, id: &str) {
    let ControllerDef::Map(c) = def else {
        return;
    };
    let Some((parent, uid, selector)) =
        parent_with_selector(g, id, |p, _| match p.pointer("/spec/selector") {
            None | Some(Value::Null) => Ok(LabelSelector::default()),
            Some(s) => LabelSelector::from_label_selector(s)
                .map_err(|e| format!("spec.selector is invalid: {e}")),
        })
    else {
        return;
    };
    let (catalog, objects) = (scan.catalog, scan.objects);
    // Live keys: selected inputs that the parent does not control itself.
    let mut inputs: HashMap<String, (ApiType, Value)> = HashMap::new();
    for rule in &c.spec.input_resources {
        let Some(t) = catalog.by_rule(&rule.api_version, &rule.resource) else {
            continue;
        };
        for o in in_scope(objects, t, &parent) {
            if controlled_by(o, &uid) || !selector.matches(&object::labels(o)) {
                continue;
            }
            inputs.insert(map_key(o), (t.clone(), o.clone()));
        }
    }
    for rule in &c.spec.output_resources {
        let Some(t) = catalog.by_rule(&rule.api_version, &rule.resource) else {
            continue;
        };
        let outputs: Vec<Value> = in_scope(objects, t, &parent)
            .filter(|o| controlled_by(o, &uid))
            .cloned()
            .collect();
        for o in outputs {
            let out_id = ensure_node(g, scan.types, t, &o, Relation::Output);
            g.add_edge(id, &out_id, EdgeKind::Controller);
            let key = object::label(&o, MAP_KEY_LABEL).map(str::to_string);
            let input_ref = object::annotation(&o, MAP_INPUT_ANNOTATION).map(str::to_string);
            let live = key.as_ref().and_then(|k| inputs.get(k)).cloned();
            let group = match &key {
                Some(k) => format!("key {k}"),
                None => "key (none)".to_string(),
            };
            set_relation(g, &out_id, Relation::Output, &group);
            if let Some(n) = g.nodes.get_mut(&out_id) {
                n.map_key = key.clone();
                n.map_input = input_ref;
                n.tombstone = live.is_none();
            }
            if let Some((it, input)) = live {
                let in_id = ensure_node(g, scan.types, &it, &input, Relation::Input);
                g.add_edge(&in_id, &out_id, EdgeKind::MapInput);
            }
        }
    }
}

fn decorator(
    catalog: &Catalog,
    def: &ControllerDef,
    g: &mut Graph,
    objects: &[(ApiType, Value)],
    id: &str,
) {
    let ControllerDef::Decorator(c) = def else {
        return;
    };
    let target = g.nodes[id].clone();
    let uid = object::uid(&target.object).unwrap_or_default().to_string();
    let group = format!("attachments of {}", controllers::label(def));
    for rule in &c.spec.attachments {
        let Some(t) = catalog.by_rule(&rule.api_version, &rule.resource) else {
            continue;
        };
        let attached: Vec<String> = in_scope(objects, t, &target)
            .filter(|o| {
                controlled_by(o, &uid)
                    && object::annotation(o, DECORATOR_ANNOTATION) == Some(c.name.as_str())
            })
            .map(node_id)
            .collect();
        for a in attached {
            if !g.nodes.contains_key(&a) {
                continue;
            }
            set_relation(g, &a, Relation::Attachment, &group);
            g.edges
                .retain(|e| !(e.from == id && e.to == a && e.kind == EdgeKind::Controller));
            g.add_edge(id, &a, EdgeKind::Attachment);
        }
    }
}

/// How a row's status should look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Nothing to say.
    Neutral,
    /// Healthy.
    Good,
    /// Worth a look (adoption candidate, stale status, pending).
    Warn,
    /// Wrong (NotSynced, tombstone, missing owner, terminating).
    Bad,
}

/// The READY and STATUS columns of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// `True`, `False`, `Unknown` (the Ready condition) or `-`.
    pub ready: String,
    /// What is going on, most important first, `; `-separated.
    pub status: String,
    /// How it should look.
    pub severity: Severity,
}

/// READY of a workload without a Ready condition, as kubectl shows it: `ready/desired` Pods
/// (Deployment, ReplicaSet, StatefulSet: `status.readyReplicas` of `spec.replicas`; DaemonSet:
/// `status.numberReady` of `status.desiredNumberScheduled`).
fn replicas_ready(obj: &Value) -> Option<String> {
    let group = obj["apiVersion"].as_str()?.split('/').next()?;
    let num = |p: &str| obj.pointer(p).and_then(Value::as_i64);
    let (ready, desired) = match (group, obj["kind"].as_str()?) {
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet") => (
            num("/status/readyReplicas").unwrap_or(0),
            num("/spec/replicas").unwrap_or(1),
        ),
        ("apps", "DaemonSet") => (
            num("/status/numberReady").unwrap_or(0),
            num("/status/desiredNumberScheduled")?,
        ),
        _ => return None,
    };
    Some(format!("{ready}/{desired}"))
}

/// A condition of `status.conditions` by type.
fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

fn str_field<'a>(v: &'a Value, f: &str) -> &'a str {
    v.get(f).and_then(Value::as_str).unwrap_or_default()
}

impl Node {
    /// `status.observedGeneration` vs `metadata.generation`: `Some((observed, generation))`
    /// when the status is stale.
    pub fn stale(&self) -> Option<(i64, i64)> {
        let observed = self
            .object
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64)?;
        let generation = object::generation(&self.object);
        (observed < generation).then_some((observed, generation))
    }

    /// The `Synced` condition of a governed parent (status, reason, message).
    pub fn synced(&self) -> Option<(&str, &str, &str)> {
        let c = condition(&self.object, "Synced")?;
        Some((
            str_field(c, "status"),
            str_field(c, "reason"),
            str_field(c, "message"),
        ))
    }

    /// Is this a Composite/Map parent (shows Synced)?
    pub fn is_parent(&self) -> bool {
        self.governed_by
            .iter()
            .any(|g| !g.starts_with(crate::spec::DECORATOR_KIND))
    }

    /// READY and STATUS as shown in the table (and in JSON).
    pub fn summary(&self) -> Summary {
        let mut parts: Vec<String> = Vec::new();
        let mut severity = Severity::Neutral;
        let raise = |s: Severity, sev: &mut Severity| {
            let rank = |s: Severity| match s {
                Severity::Neutral => 0,
                Severity::Good => 1,
                Severity::Warn => 2,
                Severity::Bad => 3,
            };
            if rank(s) > rank(*sev) {
                *sev = s;
            }
        };
        if let Some(why) = &self.missing {
            return Summary {
                ready: "-".into(),
                status: format!("Missing: {why}"),
                severity: Severity::Bad,
            };
        }
        if object::is_deleting(&self.object) {
            let f = object::finalizers(&self.object);
            parts.push(if f.is_empty() {
                "Terminating".to_string()
            } else {
                format!("Terminating (finalizers pending: {})", f.join(", "))
            });
            raise(Severity::Bad, &mut severity);
        }
        match self.relation {
            Relation::AdoptionCandidate => {
                parts.push("AdoptionCandidate (matches the selector, no ControllerRef)".into());
                raise(Severity::Warn, &mut severity);
            }
            Relation::ToBeReleased => {
                parts.push("ToBeReleased (owned, the selector no longer matches)".into());
                raise(Severity::Warn, &mut severity);
            }
            _ => {}
        }
        if self.tombstone {
            parts.push("Tombstone (input gone)".into());
            raise(Severity::Bad, &mut severity);
        }
        if let Some(p) = &self.problem {
            parts.push(format!("Invalid: {p}"));
            raise(Severity::Bad, &mut severity);
        }
        if self.is_parent() {
            match self.synced() {
                Some(("True", _, _)) => {
                    parts.push("Synced".into());
                    raise(Severity::Good, &mut severity);
                }
                Some((_, reason, message)) => {
                    let why = if message.is_empty() { reason } else { message };
                    parts.push(if why.is_empty() {
                        "NotSynced".to_string()
                    } else {
                        format!("NotSynced: {why}")
                    });
                    raise(Severity::Bad, &mut severity);
                }
                // No Synced condition (a CompositeController's hook need not write one): what
                // the engine itself writes after every sync that succeeded, observedGeneration,
                // tells whether the current generation was synced.
                None if self.full => match self
                    .object
                    .pointer("/status/observedGeneration")
                    .and_then(Value::as_i64)
                {
                    Some(_) if self.stale().is_some() => {}
                    Some(g) => {
                        parts.push(format!(
                            "Synced (observedGeneration {g}: its last sync succeeded; the hook writes no Synced condition)"
                        ));
                        raise(Severity::Good, &mut severity);
                    }
                    None => {
                        parts.push("NotSynced (no sync yet: no observedGeneration)".into());
                        raise(Severity::Warn, &mut severity);
                    }
                },
                None => {}
            }
        }
        if let Some((observed, generation)) = self.stale() {
            parts.push(format!(
                "Stale (observedGeneration {observed} < generation {generation})"
            ));
            raise(Severity::Warn, &mut severity);
        }
        let ready = match condition(&self.object, "Ready") {
            Some(c) => {
                let status = str_field(c, "status");
                let reason = str_field(c, "reason");
                if !reason.is_empty() && !self.is_parent() {
                    parts.push(reason.to_string());
                }
                raise(
                    if status == "True" {
                        Severity::Good
                    } else {
                        Severity::Warn
                    },
                    &mut severity,
                );
                status.to_string()
            }
            None => replicas_ready(&self.object).unwrap_or_else(|| "-".to_string()),
        };
        if parts.is_empty()
            && let Some(phase) = self.object.pointer("/status/phase").and_then(Value::as_str)
        {
            parts.push(phase.to_string());
        }
        Summary {
            ready,
            status: if parts.is_empty() {
                "-".to_string()
            } else {
                parts.join("; ")
            },
            severity,
        }
    }
}
