//! The customize hook's answers per key and the routing of related objects' events
//! ([`RelatedCache`]).

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::SyncError;
use crate::events::{EventKey, Trigger};
use crate::k8s::informer::InformerEvent;
use crate::k8s::object::{self, ObjectKey};
use crate::plan::hookapi::{self, Version};
use crate::runtime::context::{EngineContext, HookSpec};
use crate::runtime::queue::WorkQueue;
use crate::runtime::related::{self, ResolvedRule};
use crate::runtime::source::Reader;

use crate::k8s::informer::for_each_event;
use crate::runtime::caller::Caller;

/// Everything [`RelatedCache::related`] needs to ask the customize hook about one parent.
pub struct Customize<'a> {
    /// The engine.
    pub ctx: &'a EngineContext,
    /// Where related objects are read.
    pub reader: &'a Reader,
    /// Who calls.
    pub caller: &'a Caller,
    /// The customize hook (`None`: no related objects).
    pub hook: Option<&'a HookSpec>,
    /// The controller definition as written (sent in the request).
    pub definition: &'a Value,
    /// The sync hook's version (v1 hooks of namespaced parents only see their namespace).
    pub sync_version: Version,
    /// Whether the parent's resource is namespaced.
    pub parent_namespaced: bool,
}

/// Customize results for one key, valid for one uid and generation.
struct CustomizeEntry {
    uid: String,
    generation: i64,
    rules: Vec<ResolvedRule>,
}

struct RelatedState<K> {
    /// Customize results per key.
    customize: HashMap<K, CustomizeEntry>,
    /// Keys with related rules on a resource (`Kind.apiVersion`).
    parents: HashMap<String, HashSet<K>>,
    /// Related resources whose events are routed already.
    watched: HashSet<String>,
}

/// Queues a key with a trigger.
type Enqueue<K> = Arc<dyn Fn(&K, Trigger) + Send + Sync>;

/// The customize hook's answers per key (re-asked when the parent's uid or generation
/// changes) and the routing of related objects' events to the keys whose rules match them.
pub struct RelatedCache<K> {
    state: Arc<Mutex<RelatedState<K>>>,
    enqueue: Enqueue<K>,
}

impl<K: Clone + Eq + Hash + Display + Send + Sync + 'static> RelatedCache<K> {
    /// An empty cache; a change to a related object queues the keys it matters to with
    /// `enqueue`.
    pub fn new(enqueue: impl Fn(&K, Trigger) + Send + Sync + 'static) -> Self {
        RelatedCache {
            state: Arc::new(Mutex::new(RelatedState {
                customize: HashMap::new(),
                parents: HashMap::new(),
                watched: HashSet::new(),
            })),
            enqueue: Arc::new(enqueue),
        }
    }

    /// An empty cache that queues keys on `queue`.
    pub fn for_queue(queue: &WorkQueue<K, Trigger>) -> Self {
        let queue = queue.clone();
        Self::new(move |k: &K, t| queue.add(k.clone(), t))
    }

    /// Forget every customize answer (the hook was reloaded).
    pub fn clear(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.customize.clear();
        }
    }

    /// Forget `key` (its parent was deleted).
    pub fn forget(&self, key: &K) {
        if let Ok(mut st) = self.state.lock() {
            st.customize.remove(key);
            for set in st.parents.values_mut() {
                set.remove(key);
            }
        }
    }

    /// The related objects of `parent` (synced as `key`) per rule: from the cached customize
    /// answer, or by asking the hook (and starting to route the events of resources not
    /// watched yet, until `stop`).
    pub async fn related(
        &self,
        c: &Customize<'_>,
        parent: &Value,
        key: &K,
        stop: &CancellationToken,
    ) -> Result<Vec<(ResolvedRule, Vec<Arc<Value>>)>, SyncError>
    where
        K: EventKey,
    {
        let Some(spec) = c.hook else {
            return Ok(Vec::new());
        };
        let fail = |message: String| SyncError::answer("customize", message);
        let uid = object::uid(parent).unwrap_or_default().to_string();
        let generation = object::generation(parent);
        let cached = self.state.lock().ok().and_then(|s| {
            s.customize
                .get(key)
                .filter(|e| e.uid == uid && e.generation == generation)
                .map(|e| e.rules.clone())
        });
        let rules = match cached {
            Some(r) => r,
            None => {
                let body = hookapi::customize_request(c.definition, parent);
                let resp = c.caller.call(c.ctx, "customize", spec, key, &body).await?;
                let rules = hookapi::decode_customize(spec.version, &resp)
                    .map_err(|e| fail(e.to_string()))?;
                let mut resolved = Vec::new();
                for r in &rules {
                    let rr = related::resolve(
                        c.ctx,
                        c.reader,
                        r,
                        parent,
                        c.parent_namespaced,
                        c.sync_version,
                    )
                    .await
                    .map_err(|m| fail(format!("customize hook: {m}")))?;
                    resolved.push(rr);
                }
                for rr in &resolved {
                    self.watch(rr, stop);
                }
                if let Ok(mut st) = self.state.lock() {
                    for set in st.parents.values_mut() {
                        set.remove(key);
                    }
                    for rr in &resolved {
                        st.parents
                            .entry(rr.info.key())
                            .or_default()
                            .insert(key.clone());
                    }
                    st.customize.insert(
                        key.clone(),
                        CustomizeEntry {
                            uid,
                            generation,
                            rules: resolved.clone(),
                        },
                    );
                }
                resolved
            }
        };
        let mut out = Vec::new();
        for r in rules {
            r.source
                .wait_synced(c.ctx.options.sync_timeout)
                .await
                .map_err(|e| SyncError::Read(e.to_string()))?;
            let objs = r.select();
            out.push((r, objs));
        }
        Ok(out)
    }

    /// Start routing events of a related resource (once per resource; a list read once has
    /// none).
    fn watch(&self, rule: &ResolvedRule, stop: &CancellationToken) {
        let Some(informer) = rule.source.informer() else {
            return;
        };
        let resource = rule.info.key();
        let first = self
            .state
            .lock()
            .map(|mut s| s.watched.insert(resource.clone()))
            .unwrap_or(false);
        if !first {
            return;
        }
        let state = Arc::clone(&self.state);
        let enqueue = Arc::clone(&self.enqueue);
        let rx = informer.subscribe();
        tokio::spawn(for_each_event(rx, stop.clone(), move |ev| {
            let objs: Vec<Arc<Value>> = match ev {
                InformerEvent::Added(o) | InformerEvent::Deleted(o) => vec![o],
                // Both sides: a relation that ends must still reach the parent it matched.
                InformerEvent::Updated { old, new } => vec![old, new],
                InformerEvent::Relisted => {
                    let keys: Vec<K> = state
                        .lock()
                        .map(|s| {
                            s.parents
                                .get(&resource)
                                .into_iter()
                                .flatten()
                                .cloned()
                                .collect()
                        })
                        .unwrap_or_default();
                    for k in &keys {
                        enqueue(
                            k,
                            Trigger::Related {
                                resource: resource.clone(),
                                object: "*".into(),
                            },
                        );
                    }
                    return;
                }
            };
            route_related(&state, &*enqueue, &resource, &objs);
        }));
    }
}

/// Queue the keys with a rule on `resource` that matches one of `objs`.
fn route_related<K: Clone + Eq + Hash>(
    state: &Mutex<RelatedState<K>>,
    enqueue: &(dyn Fn(&K, Trigger) + Send + Sync),
    resource: &str,
    objs: &[Arc<Value>],
) {
    let hits: Vec<K> = {
        let Ok(st) = state.lock() else { return };
        let Some(keys) = st.parents.get(resource) else {
            return;
        };
        keys.iter()
            .filter(|k| {
                st.customize.get(*k).is_some_and(|entry| {
                    entry
                        .rules
                        .iter()
                        .filter(|r| r.info.key() == resource)
                        .any(|r| objs.iter().any(|o| r.matches(o)))
                })
            })
            .cloned()
            .collect()
    };
    let object = objs
        .last()
        .and_then(|o| ObjectKey::of(o))
        .map(|k| k.to_string())
        .unwrap_or_default();
    for k in &hits {
        enqueue(
            k,
            Trigger::Related {
                resource: resource.to_string(),
                object: object.clone(),
            },
        );
    }
}
