//! Applying plain manifests (CRDs, namespaces, sample objects) from controller files.
//!
//! `kubectl meta dev --apply` puts the non-controller documents of the given files on the
//! cluster before the engine starts, so one file can hold a whole example. Documents are
//! applied with server-side apply (field manager `kubectl-meta`), CRDs first, then namespaces,
//! then everything else in file order; a kind that is not served yet (a CRD just created) is
//! retried until discovery finds it or the deadline passes.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::discovery::{Discovery, DiscoveryError};
use super::object;

/// A document that could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The kind is not served (after waiting).
    #[error("{source_desc}: {error}")]
    Unknown {
        /// Where the document came from.
        source_desc: String,
        /// The discovery error.
        error: DiscoveryError,
    },
    /// The API server rejected the document.
    #[error("{source_desc}: applying {kind} {name} failed: {message}")]
    Rejected {
        /// Where the document came from.
        source_desc: String,
        /// Kind.
        kind: String,
        /// Name.
        name: String,
        /// The server's message.
        message: String,
    },
    /// The document lacks apiVersion, kind or name.
    #[error("{source_desc}: a manifest needs apiVersion, kind and metadata.name")]
    Incomplete {
        /// Where the document came from.
        source_desc: String,
    },
}

fn rank(doc: &Value) -> u8 {
    match object::kind(doc) {
        Some("CustomResourceDefinition") => 0,
        Some("Namespace") => 1,
        _ => 2,
    }
}

/// What [`apply_documents`] did with one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Applied (created, or re-applied with `overwrite`).
    Applied,
    /// The object exists and was left as it is.
    Kept,
}

/// How [`apply_documents`] writes.
#[derive(Debug, Clone, Copy)]
pub struct ApplyMode<'a> {
    /// Re-apply objects that exist (else they are kept as they are).
    pub overwrite: bool,
    /// The server-side apply field manager.
    pub field_manager: &'a str,
    /// Server-side dry run (`dryRun=All`): validated and admitted, nothing stored.
    pub dry_run: bool,
}

/// Apply `docs` (with a description of where each came from); returns each object
/// (`Kind name` or `Kind namespace/name`) with what was done. Without `overwrite`, only
/// objects that do not exist are applied: what the user changed since (with kubectl) stays.
pub async fn apply_documents(
    client: &kube::Client,
    discovery: &Discovery,
    default_namespace: &str,
    docs: &[(String, Value)],
    wait: Duration,
    mode: &ApplyMode<'_>,
) -> Result<Vec<(String, Outcome)>, ManifestError> {
    let overwrite = mode.overwrite;
    let mut ordered: Vec<&(String, Value)> = docs.iter().collect();
    ordered.sort_by_key(|(_, d)| rank(d));
    let mut done = Vec::new();
    for (source_desc, doc) in ordered {
        let (Some(av), Some(kind), Some(name)) = (
            object::api_version(doc),
            object::kind(doc),
            object::name(doc),
        ) else {
            return Err(ManifestError::Incomplete {
                source_desc: source_desc.clone(),
            });
        };
        let deadline = Instant::now() + wait;
        let info = loop {
            match discovery.resolve_kind(av, kind).await {
                Ok(i) => break i,
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!("{kind} not served yet ({e}); retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => {
                    return Err(ManifestError::Unknown {
                        source_desc: source_desc.clone(),
                        error,
                    });
                }
            }
        };
        let ns = if info.namespaced {
            Some(
                object::namespace(doc)
                    .unwrap_or(default_namespace)
                    .to_string(),
            )
        } else {
            None
        };
        let api: Api<DynamicObject> = match &ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &info.api_resource),
            None => Api::all_with(client.clone(), &info.api_resource),
        };
        let described = match &ns {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        let rejected = |e: kube::Error| ManifestError::Rejected {
            source_desc: source_desc.clone(),
            kind: kind.to_string(),
            name: name.to_string(),
            message: super::kube_error_message(&e),
        };
        if !overwrite && api.get_opt(name).await.map_err(rejected)?.is_some() {
            done.push((described, Outcome::Kept));
            continue;
        }
        let mut body = doc.clone();
        if let (Some(ns), Some(meta)) =
            (&ns, body.get_mut("metadata").and_then(Value::as_object_mut))
        {
            meta.insert("namespace".into(), Value::String(ns.clone()));
        }
        let mut params = PatchParams::apply(mode.field_manager).force();
        params.dry_run = mode.dry_run;
        api.patch(name, &params, &Patch::Apply(&body))
            .await
            .map_err(rejected)?;
        done.push((described, Outcome::Applied));
        if kind == "CustomResourceDefinition" && !mode.dry_run {
            discovery.invalidate();
        }
    }
    Ok(done)
}
