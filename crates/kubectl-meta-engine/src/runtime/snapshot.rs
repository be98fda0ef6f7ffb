//! Live state read once, for a dry run: one list per resource (no informers, no watches, no
//! Lease), kept as a snapshot with the look-ups the planning needs (by key, by controller uid,
//! orphans, label selection), the same questions the engine asks its informers
//! ([`crate::runtime::source::Source`] answers them from either).

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use crate::k8s::discovery::{Discovery, ResourceInfo};
use crate::k8s::object::{self, ObjectKey};
use kube_apimachinery::selector::LabelSelector;

/// Why live state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// Discovery could not resolve a resource a controller names.
    #[error("resource {api_version}/{resource}: {message}")]
    Resolve {
        /// apiVersion.
        api_version: String,
        /// Plural.
        resource: String,
        /// Why.
        message: String,
    },
    /// Listing failed.
    #[error("listing {resource}: {message}")]
    List {
        /// `Kind.apiVersion`.
        resource: String,
        /// The API server's answer.
        message: String,
    },
}

/// Every object of one resource (in one namespace, or all), as listed once.
#[derive(Debug, Clone)]
pub struct Listed {
    objects: BTreeMap<ObjectKey, Arc<Value>>,
}

impl Listed {
    /// The object at `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.objects.get(key).cloned()
    }

    /// Objects in `namespace` (every one with `None`), sorted by key.
    pub fn list(&self, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.objects
            .values()
            .filter(|o| namespace.is_none_or(|ns| object::namespace(o) == Some(ns)))
            .cloned()
            .collect()
    }

    /// Objects whose ControllerRef points at `uid`.
    pub fn controlled_by(&self, uid: &str) -> Vec<Arc<Value>> {
        self.objects
            .values()
            .filter(|o| object::controller_ref(o).is_some_and(|r| r.uid == uid))
            .cloned()
            .collect()
    }

    /// Objects without a ControllerRef in `namespace` that `selector` matches.
    pub fn orphans(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Arc<Value>> {
        self.select(namespace, selector)
            .into_iter()
            .filter(|o| object::controller_ref(o).is_none())
            .collect()
    }

    /// Objects in `namespace` that `selector` matches.
    pub fn select(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Arc<Value>> {
        self.list(namespace)
            .into_iter()
            .filter(|o| selector.matches(&object::labels(o)))
            .collect()
    }
}

/// A resource read, and what it listed.
type ReadOnce = (ResourceInfo, Arc<Listed>);

/// Reads resources once, each at most once per run.
pub struct LiveReader {
    client: kube::Client,
    discovery: Discovery,
    cache: tokio::sync::Mutex<BTreeMap<(String, String), ReadOnce>>,
    lists: std::sync::atomic::AtomicUsize,
}

impl LiveReader {
    /// A reader on `client`.
    pub fn new(client: kube::Client) -> Self {
        LiveReader {
            discovery: Discovery::new(client.clone()),
            client,
            cache: tokio::sync::Mutex::new(BTreeMap::new()),
            lists: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Resolve `apiVersion` + plural (or kind) through discovery.
    pub async fn resolve(
        &self,
        api_version: &str,
        resource: &str,
    ) -> Result<ResourceInfo, LiveError> {
        self.discovery
            .resolve(api_version, resource)
            .await
            .map_err(|e| LiveError::Resolve {
                api_version: api_version.to_string(),
                resource: resource.to_string(),
                message: e.to_string(),
            })
    }

    /// Every object of `info`, listed once per run.
    pub async fn read(&self, info: &ResourceInfo) -> Result<Arc<Listed>, LiveError> {
        let id = (
            info.api_resource.api_version.clone(),
            info.api_resource.plural.clone(),
        );
        let mut cache = self.cache.lock().await;
        if let Some((_, l)) = cache.get(&id) {
            return Ok(Arc::clone(l));
        }
        // Every namespace, as the engine's informers: `-n` narrows the parents only (children,
        // related objects and inputs may live elsewhere for cluster-scoped parents); the
        // controllers apply it (`EngineOptions::namespace`).
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &info.api_resource);
        self.lists
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| LiveError::List {
                resource: info.key(),
                message: crate::k8s::kube_error_message(&e),
            })?;
        let mut objects = BTreeMap::new();
        for item in list.items {
            let mut v = serde_json::to_value(&item).unwrap_or(Value::Null);
            // Lists carry apiVersion/kind on the list only; the engine's objects have them.
            if let Some(m) = v.as_object_mut() {
                m.insert(
                    "apiVersion".into(),
                    Value::from(info.api_resource.api_version.clone()),
                );
                m.insert("kind".into(), Value::from(info.api_resource.kind.clone()));
            }
            if let Some(k) = ObjectKey::of(&v) {
                objects.insert(k, Arc::new(v));
            }
        }
        let listed = Arc::new(Listed { objects });
        cache.insert(id, (info.clone(), Arc::clone(&listed)));
        Ok(listed)
    }

    /// Every resource read so far, with what it listed (`dryrun --simulate` copies them).
    pub async fn listed(&self) -> Vec<(ResourceInfo, Arc<Listed>)> {
        self.cache
            .lock()
            .await
            .values()
            .map(|(i, l)| (i.clone(), Arc::clone(l)))
            .collect()
    }
}
