//! Watch streams: `?watch=1` responses built from a store subscription.
//!
//! A watch first sends its backlog (history replay after a resourceVersion, or synthetic ADDED
//! events for the initial state), then live events in store order, translated through the
//! watcher's label/field selectors the way kube-apiserver does (an object that stops matching
//! is seen as DELETED, one that starts matching as ADDED). It ends on `timeoutSeconds`, when
//! the client goes away, when the server shuts down, or — if the client falls too far behind —
//! with an `ERROR` event carrying 410 Expired so the client re-lists.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::json;
use tokio::sync::{broadcast, mpsc};

use super::output::{self, Output};
use super::resources::ResourceDef;
use super::shard::ShardSelector;
use super::state::State;
use super::status::ApiError;
use super::store::{Event, EventKind, StoreError, Stored, WatchStart};
use kube_apimachinery::selector::{FieldSelector, LabelSelector};

/// Selectors of a list or watch.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// `labelSelector`.
    pub labels: Option<LabelSelector>,
    /// `fieldSelector`.
    pub fields: Option<FieldSelector>,
    /// KEP-5866 `shardSelector` (only with the `ShardedListAndWatch` gate on).
    pub shard: Option<Arc<ShardSelector>>,
}

impl Filter {
    /// Does the object match both selectors?
    pub fn matches(&self, s: &Stored) -> bool {
        if let Some(sh) = &self.shard
            && !sh.matches(&s.uid, &s.key.ns)
        {
            return false;
        }
        if let Some(l) = &self.labels
            && !l.matches_with(|k| s.label(k))
        {
            return false;
        }
        if let Some(f) = &self.fields {
            return s.value().is_ok_and(|v| f.matches(&v));
        }
        true
    }
}

/// How a watch was asked for.
#[derive(Debug, Clone)]
pub struct WatchParams {
    /// Where to start.
    pub start: WatchStart,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: end the initial state with an `initial-events-end` bookmark.
    pub initial_events_end: bool,
    /// Response shape.
    pub output: Output,
    /// Table `includeObject`.
    pub include_object: String,
}

struct Ctx {
    def: Arc<ResourceDef>,
    gr: String,
    ns: Option<String>,
    filter: Filter,
    p: WatchParams,
}

impl Ctx {
    fn in_scope(&self, s: &Stored) -> bool {
        *s.key.gr == *self.gr && self.ns.as_deref().is_none_or(|n| s.key.ns == n)
    }

    /// The event type this watcher sees, if any.
    fn translate(&self, ev: &Event) -> Option<EventKind> {
        let now = self.filter.matches(&ev.obj);
        match ev.kind {
            EventKind::Added => now.then_some(EventKind::Added),
            EventKind::Deleted => now.then_some(EventKind::Deleted),
            EventKind::Modified => {
                let before = ev.prev.as_ref().is_some_and(|p| self.filter.matches(p));
                match (before, now) {
                    (true, true) => Some(EventKind::Modified),
                    (false, true) => Some(EventKind::Added),
                    (true, false) => Some(EventKind::Deleted),
                    (false, false) => None,
                }
            }
        }
    }

    fn line(&self, kind: &str, obj: &[u8]) -> Bytes {
        let mut b = BytesMut::with_capacity(obj.len() + 32);
        b.put_slice(b"{\"type\":\"");
        b.put_slice(kind.as_bytes());
        b.put_slice(b"\",\"object\":");
        b.put_slice(obj);
        b.put_slice(b"}\n");
        b.freeze()
    }

    fn render(&self, kind: EventKind, s: &Stored) -> Option<Bytes> {
        match &self.p.output {
            Output::Json => Some(self.line(kind.as_str(), &output::served_bytes(&self.def, s))),
            out => {
                let v = super::ops::as_served(&self.def, s.value().ok()?);
                let o = output::object(&self.def, out, &self.p.include_object, &v).ok()?;
                Some(self.line(kind.as_str(), o.to_string().as_bytes()))
            }
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = match &self.p.output {
            Output::Metadata(v) => {
                json!({"apiVersion": format!("meta.k8s.io/{v}"), "kind": "PartialObjectMetadata", "metadata": meta})
            }
            _ => {
                json!({"apiVersion": self.def.api_version(), "kind": self.def.kind, "metadata": meta})
            }
        };
        self.line("BOOKMARK", obj.to_string().as_bytes())
    }
}

fn error_line(e: &ApiError) -> Bytes {
    let mut v = json!({"type": "ERROR", "object": e.to_status()}).to_string();
    v.push('\n');
    Bytes::from(v)
}

/// Start a watch and return the streaming response.
pub fn serve(
    state: Arc<State>,
    def: Arc<ResourceDef>,
    ns: Option<String>,
    filter: Filter,
    p: WatchParams,
) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let gr = def.group_resource();
    let sub = state.store.watch(&gr, ns.as_deref(), p.start);
    let ctx = Ctx {
        def,
        gr,
        ns,
        filter,
        p,
    };
    tokio::spawn(async move {
        let sub = match sub {
            Ok(s) => s,
            Err(StoreError::Gone { requested, oldest }) => {
                let e = ApiError::gone(format!("too old resource version: {requested} ({oldest})"));
                let _ = tx.send(error_line(&e)).await;
                return;
            }
            Err(e) => {
                let _ = tx
                    .send(error_line(&ApiError::internal(e.to_string())))
                    .await;
                return;
            }
        };
        run(state, ctx, sub.backlog, sub.rx, sub.start_rv, tx).await;
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<Bytes, Infallible>(b), rx))
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache, private")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

async fn run(
    state: Arc<State>,
    ctx: Ctx,
    backlog: Vec<Arc<Event>>,
    mut rx: broadcast::Receiver<Arc<Event>>,
    start_rv: u64,
    tx: mpsc::Sender<Bytes>,
) {
    let synthetic = matches!(ctx.p.start, WatchStart::InitialState);
    for ev in &backlog {
        let kind = if synthetic {
            ctx.filter.matches(&ev.obj).then_some(EventKind::Added)
        } else {
            ctx.translate(ev)
        };
        if let Some(kind) = kind
            && let Some(line) = ctx.render(kind, &ev.obj)
            && tx.send(line).await.is_err()
        {
            return;
        }
    }
    let mut progress = start_rv;
    if ctx.p.initial_events_end && tx.send(ctx.bookmark(progress, true)).await.is_err() {
        return;
    }
    let deadline = ctx.p.timeout.map(|t| tokio::time::Instant::now() + t);
    let timeout = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    let mut tick = tokio::time::interval(state.tunables.bookmark_interval);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = state.shutdown.cancelled() => return,
            _ = &mut timeout => return,
            _ = tx.closed() => return,
            _ = tick.tick(), if ctx.p.bookmarks => {
                if tx.send(ctx.bookmark(progress, false)).await.is_err() {
                    return;
                }
            }
            r = rx.recv() => match r {
                Ok(ev) => {
                    if ev.obj.rv <= start_rv {
                        continue;
                    }
                    progress = ev.obj.rv;
                    if !ctx.in_scope(&ev.obj) {
                        continue;
                    }
                    if let Some(kind) = ctx.translate(&ev)
                        && let Some(line) = ctx.render(kind, &ev.obj)
                        && tx.send(line).await.is_err()
                    {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let e = ApiError::gone(format!(
                        "watch of {} fell {n} events behind; too old resource version: {progress}",
                        ctx.gr
                    ));
                    let _ = tx.send(error_line(&e)).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
