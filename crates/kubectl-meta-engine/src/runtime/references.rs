//! The Secrets and ConfigMaps a controller's webhooks reference (`caBundle`, `clientTLS`,
//! `authorization`, `basicAuth`; see [`crate::hooks::endpoint`]), followed for as long as the
//! controller runs: it starts once they all exist and resolve (until then it waits, saying for
//! what, without holding up the other controllers, as Metacontroller retries a controller whose
//! references are missing), and they are read again whenever one of them changes (a rotated
//! certificate or token is used from the next hook call on, without a restart).
//!
//! One watch per referenced object (a field selector on its name), so a change is seen as it
//! happens and nothing else in the namespace is listed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::{FutureExt, StreamExt, stream::BoxStream};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::events::EngineEvent;
use crate::hooks::endpoint::{self, EndpointError, ObjectKey, RefData, RefKind};
use crate::k8s::informer::CappedBackoff;
use crate::runtime::context::EngineContext;
use crate::spec::ControllerDef;

/// Follow the references of `def` until `stop`: `ready` is sent once they resolved (at once
/// when there are none); `waiting` says meanwhile what the controller waits for.
pub(crate) async fn follow(
    def: ControllerDef,
    ctx: Arc<EngineContext>,
    stop: CancellationToken,
    waiting: Arc<Mutex<Option<String>>>,
    ready: oneshot::Sender<()>,
) {
    let keys = endpoint::references(std::slice::from_ref(&def));
    if keys.is_empty() {
        let _ = ready.send(());
        return;
    }
    let name = def.name().to_string();
    let mut changes = watch_all(&ctx.client, &keys);
    let mut ready = Some(ready);
    let mut last: Option<RefData> = None;
    let mut said: Option<String> = None;
    loop {
        match RefData::read(&ctx.client, &keys, &[], "default", false).await {
            Ok(data) if last.as_ref() != Some(&data) => {
                let outcome = endpoint::resolve(&def, &data);
                last = Some(data.clone());
                match outcome {
                    Ok(resolved) => {
                        ctx.hooks.set_endpoints(&resolved);
                        set(&waiting, None);
                        said = None;
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        } else {
                            ctx.bus.publish(EngineEvent::Info {
                                controller: Some(name.clone()),
                                message: format!(
                                    "read the webhooks' connection settings again ({} changed)",
                                    list(&keys)
                                ),
                            });
                        }
                    }
                    Err(e) => {
                        let message = problem(&e, &data, &keys, ready.is_some());
                        if said.as_deref() != Some(message.as_str()) {
                            // Waiting for objects that do not exist yet is expected (they are
                            // often created after the controllers): a notice, said once.
                            let notice = ready.is_some() && !data.missing(&keys).is_empty();
                            ctx.bus.publish(if notice {
                                EngineEvent::Info {
                                    controller: Some(name.clone()),
                                    message: message.clone(),
                                }
                            } else {
                                EngineEvent::Error {
                                    controller: Some(name.clone()),
                                    object: None,
                                    message: message.clone(),
                                }
                            });
                            said = Some(message.clone());
                        }
                        if ready.is_some() {
                            set(&waiting, Some(message));
                        }
                    }
                }
            }
            Ok(_) => {}
            Err(e) => {
                // Cannot read them (permissions, the API server away): say so, keep watching.
                let message = e.to_string();
                if said.as_deref() != Some(message.as_str()) {
                    ctx.bus.publish(EngineEvent::Error {
                        controller: Some(name.clone()),
                        object: None,
                        message: message.clone(),
                    });
                    said = Some(message.clone());
                }
                if ready.is_some() {
                    set(&waiting, Some(message));
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            next = changes.next() => if next.is_none() { return },
        }
        // One change arrives as several watch events (and several objects change together,
        // as when a certificate is rotated): read once for all of those already here.
        while let Some(Some(_)) = changes.next().now_or_never() {}
    }
}

/// What the controller waits for (`ready` not sent yet) or why its running settings were kept.
fn problem(
    e: &EndpointError,
    data: &RefData,
    keys: &BTreeSet<ObjectKey>,
    starting: bool,
) -> String {
    let missing = data.missing(keys);
    let what = if starting {
        if missing.is_empty() {
            "not started: its webhooks' connection settings cannot be used (fix the Secret or ConfigMap; it starts once they can)".to_string()
        } else {
            format!(
                "not started: waiting for {} (it starts once they exist; the other controllers run meanwhile)",
                missing
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    } else {
        "kept the webhooks' previous connection settings: the changed ones cannot be used"
            .to_string()
    };
    format!("{what}: {e}")
}

fn set(waiting: &Mutex<Option<String>>, value: Option<String>) {
    if let Ok(mut w) = waiting.lock() {
        *w = value;
    }
}

fn list(keys: &BTreeSet<ObjectKey>) -> String {
    keys.iter()
        .map(ObjectKey::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// One item per watch event on any of `keys` (errors included: the backoff retries them).
fn watch_all(client: &kube::Client, keys: &BTreeSet<ObjectKey>) -> BoxStream<'static, ()> {
    let streams = keys.iter().map(|key| {
        let config = watcher::Config::default().fields(&format!("metadata.name={}", key.name));
        match key.kind {
            RefKind::Secret => {
                let api: Api<Secret> = Api::namespaced(client.clone(), &key.namespace);
                watcher(api, config)
                    .backoff(CappedBackoff::new())
                    .map(|_| ())
                    .boxed()
            }
            RefKind::ConfigMap => {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), &key.namespace);
                watcher(api, config)
                    .backoff(CappedBackoff::new())
                    .map(|_| ())
                    .boxed()
            }
        }
    });
    futures::stream::select_all(streams).boxed()
}
