//! Where `run`'s controller definitions come from, each source sending whole
//! [`DefinitionSet`]s to the [`super::Runner`] when they change:
//!
//! - [`cluster`]: the cluster's CompositeController, DecoratorController and MapController
//!   objects (`metacontroller.k8s.io/v1alpha1`; MapController is this project's kind, served by
//!   the CRD `kubectl meta deploy` renders), watched: as Metacontroller does, a definition
//!   created, changed or deleted starts, restarts or stops its controller. All of them, or the
//!   names given (`--from-cluster NAME`), filtered by `-l`. A kind whose API the cluster does
//!   not serve is left out (said once).
//! - [`files`]: `-f` files or directories (a ConfigMap mounted as files), read again when they
//!   change. A file with a mistake is reported and the running definitions are kept.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::sync::mpsc;

use super::DefinitionSet;
use crate::devloop::watch::{FileWatcher, WatchConfig};
use crate::engine::events::{EngineEvent, EventBus};
use crate::k8s::discovery::Discovery;
use crate::spec::{self, ControllerDef, ControllerSelector, Source};

/// The definition kinds `run` reads from the cluster: (kind, resource plural).
pub const CLUSTER_KINDS: [(&str, &str); 3] = [
    ("CompositeController", "compositecontrollers"),
    ("DecoratorController", "decoratorcontrollers"),
    ("MapController", "mapcontrollers"),
];

/// The API version of the definition kinds.
pub const API_VERSION: &str = "metacontroller.k8s.io/v1alpha1";

/// Why a source could not start.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The cluster serves none of the definition kinds.
    #[error(
        "the cluster serves none of compositecontrollers, decoratorcontrollers, mapcontrollers (metacontroller.k8s.io/v1alpha1): install their CRDs (kubectl meta deploy renders them), or give definitions with -f"
    )]
    NoApi,
    /// The `-f` files could not be watched.
    #[error("cannot watch the -f files: {0}")]
    Watch(String),
}

/// Which cluster definitions to run.
#[derive(Debug, Clone, Default)]
pub struct ClusterFilter {
    /// `--from-cluster` names (`NAME` or `KIND/NAME`); empty: all.
    pub names: Vec<String>,
    /// `-l`.
    pub selector: Option<ControllerSelector>,
}

impl ClusterFilter {
    fn wants(&self, kind: &str, name: &str, def: Option<&ControllerDef>) -> bool {
        let named = self.names.is_empty()
            || self.names.iter().any(|n| match n.split_once('/') {
                Some((k, n)) => {
                    n == name
                        && (k.eq_ignore_ascii_case(kind)
                            || CLUSTER_KINDS
                                .iter()
                                .any(|(kk, p)| *kk == kind && k.eq_ignore_ascii_case(p)))
                }
                None => n == name,
            });
        named
            && match (&self.selector, def) {
                (Some(sel), Some(d)) => sel.matches(d),
                _ => true,
            }
    }
}

/// One kind's objects, once listed.
#[derive(Default)]
struct KindState {
    /// By name, the raw object.
    objects: BTreeMap<String, Value>,
    /// Objects of a re-list in progress.
    pending: Option<BTreeMap<String, Value>>,
    /// Listed at least once.
    synced: bool,
}

/// Watch the cluster's definitions; send a set to `tx` (as source `source`) whenever it
/// changes. Fails when the cluster serves none of the kinds.
pub async fn cluster(
    client: kube::Client,
    discovery: &Discovery,
    filter: ClusterFilter,
    bus: EventBus,
    source: usize,
    tx: mpsc::Sender<DefinitionSet>,
) -> Result<tokio::task::JoinHandle<()>, SourceError> {
    let mut streams = Vec::new();
    for (kind, plural) in CLUSTER_KINDS {
        match discovery.resolve(API_VERSION, plural).await {
            Ok(info) => {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &info.api_resource);
                let s = watcher::watcher(api, watcher::Config::default())
                    .default_backoff()
                    .map(move |e| (kind, e));
                streams.push(s.boxed());
            }
            Err(_) => bus.publish(EngineEvent::Info {
                controller: None,
                message: format!(
                    "the cluster does not serve {plural}.metacontroller.k8s.io: no {kind} runs"
                ),
            }),
        }
    }
    if streams.is_empty() {
        return Err(SourceError::NoApi);
    }
    let kinds = streams.len();
    let mut merged = futures::stream::select_all(streams);
    Ok(tokio::spawn(async move {
        let mut state: BTreeMap<&'static str, KindState> = BTreeMap::new();
        let mut last_sent: Option<(Vec<ControllerDef>, BTreeSet<String>)> = None;
        let mut reported: BTreeMap<String, String> = BTreeMap::new();
        let mut failing = false;
        while let Some((kind, event)) = merged.next().await {
            let st = state.entry(kind).or_default();
            match event {
                Ok(Event::Init) => st.pending = Some(BTreeMap::new()),
                Ok(Event::InitApply(o)) => {
                    if let (Some(p), Some((n, v))) = (st.pending.as_mut(), named(&o)) {
                        p.insert(n, v);
                    }
                }
                Ok(Event::InitDone) => {
                    st.objects = st.pending.take().unwrap_or_default();
                    st.synced = true;
                }
                Ok(Event::Apply(o)) => {
                    if let Some((n, v)) = named(&o) {
                        st.objects.insert(n, v);
                    }
                }
                Ok(Event::Delete(o)) => {
                    if let Some((n, _)) = named(&o) {
                        st.objects.remove(&n);
                    }
                }
                Err(e) => {
                    if !failing {
                        failing = true;
                        bus.publish(EngineEvent::Error {
                            controller: None,
                            object: None,
                            message: format!(
                                "watching the {kind} definitions failed (retrying; the running controllers keep running): {e}"
                            ),
                        });
                    }
                    continue;
                }
            }
            failing = false;
            if state.len() < kinds || state.values().any(|s| !s.synced) {
                continue;
            }
            let (defs, broken) = parse_all(&state, &filter, &bus, &mut reported);
            if last_sent.as_ref() == Some(&(defs.clone(), broken.clone())) {
                continue;
            }
            last_sent = Some((defs.clone(), broken.clone()));
            let set = DefinitionSet {
                source,
                defs,
                broken,
            };
            if tx.send(set).await.is_err() {
                return;
            }
        }
    }))
}

/// An object's name and JSON.
fn named(o: &DynamicObject) -> Option<(String, Value)> {
    let name = o.metadata.name.clone()?;
    Some((name, serde_json::to_value(o).ok()?))
}

/// Every wanted definition of every kind; those that do not parse are reported (once per
/// version) and named in the second set.
fn parse_all(
    state: &BTreeMap<&'static str, KindState>,
    filter: &ClusterFilter,
    bus: &EventBus,
    reported: &mut BTreeMap<String, String>,
) -> (Vec<ControllerDef>, BTreeSet<String>) {
    let mut defs = Vec::new();
    let mut broken = BTreeSet::new();
    for (kind, st) in state {
        for (name, value) in &st.objects {
            if !filter.wants(kind, name, None) {
                continue;
            }
            let key = format!("{kind}/{name}");
            match spec::parse_controller(value, Source::cluster(&kind.to_ascii_lowercase(), name)) {
                Ok(def) => {
                    reported.remove(&key);
                    if filter.wants(kind, name, Some(&def)) {
                        defs.push(def);
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    if reported.get(&key) != Some(&msg) {
                        bus.publish(EngineEvent::Error {
                            controller: Some(name.clone()),
                            object: Some(key.clone()),
                            message: format!(
                                "{kind} {name} is not valid; the running version (if any) is kept: {msg}"
                            ),
                        });
                        reported.insert(key, msg);
                    }
                    broken.insert(name.clone());
                }
            }
        }
    }
    (defs, broken)
}

/// Send the `-f` definitions now, and again whenever the files change; a file with a mistake
/// is reported and the running definitions are kept.
pub fn files(
    paths: Vec<PathBuf>,
    recursive: bool,
    selector: Option<ControllerSelector>,
    initial: Vec<ControllerDef>,
    bus: EventBus,
    source: usize,
    tx: mpsc::Sender<DefinitionSet>,
) -> Result<tokio::task::JoinHandle<()>, SourceError> {
    let abs: Vec<PathBuf> = paths
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    let (watcher, mut changes) = FileWatcher::start(WatchConfig {
        paths: abs,
        debounce: std::time::Duration::from_millis(200),
        exclude: Vec::new(),
    })
    .map_err(|e| SourceError::Watch(e.to_string()))?;
    Ok(tokio::spawn(async move {
        let _watcher = watcher;
        let mut current = initial;
        if tx
            .send(DefinitionSet {
                source,
                defs: current.clone(),
                broken: BTreeSet::new(),
            })
            .await
            .is_err()
        {
            return;
        }
        while let Some(batch) = changes.recv().await {
            let shown: Vec<String> = batch
                .paths
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            let loaded = match spec::load_paths_with(&paths, recursive) {
                Ok(l) => l,
                Err(e) => {
                    bus.publish(EngineEvent::Reload {
                        what: "definition".into(),
                        paths: shown,
                        message: "kept the running definitions".into(),
                        error: Some(e.to_string()),
                    });
                    continue;
                }
            };
            let defs: Vec<ControllerDef> = loaded
                .controllers
                .into_iter()
                .filter(|d| selector.as_ref().is_none_or(|s| s.matches(d)))
                .collect();
            if defs == current {
                continue;
            }
            current = defs;
            bus.publish(EngineEvent::Reload {
                what: "definition".into(),
                paths: shown,
                message: format!("{} definition(s) read", current.len()),
                error: None,
            });
            let set = DefinitionSet {
                source,
                defs: current.clone(),
                broken: BTreeSet::new(),
            };
            if tx.send(set).await.is_err() {
                return;
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_select_by_name_or_kind_and_name() {
        let all = ClusterFilter::default();
        assert!(all.wants("CompositeController", "a", None));
        let f = ClusterFilter {
            names: vec![
                "a".into(),
                "decoratorcontroller/b".into(),
                "mapcontrollers/c".into(),
            ],
            selector: None,
        };
        assert!(f.wants("CompositeController", "a", None));
        assert!(f.wants("MapController", "a", None));
        assert!(f.wants("DecoratorController", "b", None));
        assert!(!f.wants("CompositeController", "b", None));
        assert!(f.wants("MapController", "c", None));
        assert!(!f.wants("CompositeController", "c", None));
        assert!(!f.wants("CompositeController", "z", None));
    }
}
