//! Related resources (customize hook): resolving `relatedResources` rules and matching objects.
//!
//! A rule names a resource and narrows it by namespace, namespace selector, label selector or
//! names. [`ResolvedRule`] binds a rule to its [`Source`] (an informer in `dev`, a list read
//! once in `dryrun`) so the controller can both list the matching objects for a hook request
//! and test single objects when routing watch events (old and new versions both, so a
//! relation that ends still reaches its parent).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::k8s::discovery::ResourceInfo;
use crate::k8s::object::{self, ObjectKey};
use crate::plan::hookapi::{RelatedRule, Version};
use crate::runtime::context::EngineContext;
use crate::runtime::source::{Reader, Source};
use kube_apimachinery::selector::LabelSelector;

/// A related-resources rule bound to its source.
#[derive(Clone)]
pub struct ResolvedRule {
    /// The resource.
    pub info: ResourceInfo,
    /// Where its objects are read.
    pub source: Source,
    /// Only this namespace (from the rule, or the parent's for v1 hooks of namespaced parents).
    pub namespace: Option<String>,
    /// Only these names.
    pub names: Option<BTreeSet<String>>,
    /// Label selector (everything when absent).
    pub labels: LabelSelector,
    /// Namespace selector, with the namespaces it needs.
    pub namespaces: Option<(LabelSelector, Source)>,
}

impl ResolvedRule {
    /// Does `obj` fall under this rule?
    pub fn matches(&self, obj: &Value) -> bool {
        let ns = object::namespace(obj);
        if let Some(want) = &self.namespace
            && self.info.namespaced
            && ns != Some(want.as_str())
        {
            return false;
        }
        if let Some(names) = &self.names
            && !object::name(obj).is_some_and(|n| names.contains(n))
        {
            return false;
        }
        if !self.labels.matches(&object::labels(obj)) {
            return false;
        }
        if let Some((sel, nsinf)) = &self.namespaces {
            let Some(ns) = ns else { return false };
            let Some(nsobj) = nsinf.get(&ObjectKey::new(None, ns)) else {
                return false;
            };
            if !sel.matches(&object::labels(&nsobj)) {
                return false;
            }
        }
        true
    }

    /// Every cached object under this rule, sorted by namespace/name.
    pub fn select(&self) -> Vec<Arc<Value>> {
        let ns = if self.info.namespaced {
            self.namespace.as_deref()
        } else {
            None
        };
        let mut out: Vec<Arc<Value>> = match &self.names {
            // Names in a known namespace (or of a cluster-scoped resource): direct lookups.
            Some(names) if !self.info.namespaced || ns.is_some() => names
                .iter()
                .filter_map(|n| self.source.get(&ObjectKey::new(ns, n)))
                .filter(|o| self.matches(o))
                .collect(),
            _ => self
                .source
                .select(ns, &self.labels)
                .into_iter()
                .filter(|o| self.matches(o))
                .collect(),
        };
        out.sort_by(|a, b| ObjectKey::of(a).cmp(&ObjectKey::of(b)));
        out
    }
}

/// Resolve a customize rule for a parent, its objects read through `reader`.
pub async fn resolve(
    ctx: &EngineContext,
    reader: &Reader,
    rule: &RelatedRule,
    parent: &Value,
    parent_namespaced: bool,
    version: Version,
) -> Result<ResolvedRule, String> {
    let info = ctx
        .discovery
        .resolve(&rule.api_version, &rule.resource)
        .await
        .map_err(|e| e.to_string())?;
    let source = reader.source(ctx, &info).await.map_err(|e| e.to_string())?;
    let labels = match &rule.label_selector {
        Some(s) => LabelSelector::from_label_selector(s)
            .map_err(|e| format!("relatedResources labelSelector: {e}"))?,
        None => LabelSelector::default(),
    };
    let namespaces = match &rule.namespace_selector {
        Some(s) => {
            let sel = LabelSelector::from_label_selector(s)
                .map_err(|e| format!("relatedResources namespaceSelector: {e}"))?;
            let nsinfo = ctx
                .discovery
                .resolve("v1", "namespaces")
                .await
                .map_err(|e| e.to_string())?;
            let namespaces = reader
                .source(ctx, &nsinfo)
                .await
                .map_err(|e| e.to_string())?;
            namespaces
                .wait_synced(ctx.options.sync_timeout)
                .await
                .map_err(|e| e.to_string())?;
            Some((sel, namespaces))
        }
        None => None,
    };
    let namespace = if parent_namespaced && version == Version::V1 {
        // v1 hooks of namespaced parents only ever see their own namespace.
        object::namespace(parent).map(str::to_string)
    } else {
        rule.namespace.clone().filter(|n| !n.is_empty())
    };
    Ok(ResolvedRule {
        info,
        source,
        namespace,
        names: rule
            .names
            .as_ref()
            .filter(|n| !n.is_empty())
            .map(|n| n.iter().cloned().collect()),
        labels,
        namespaces,
    })
}
