//! Where a controller's sync steps read objects ([`Source`]) and how a controller gets the
//! source of a resource ([`Reader`]): the shared informers' caches (`dev`: kept current by
//! watches whose events the routers turn into work) or lists read once ([`Snapshot`], the
//! `dryrun`: no watch, nothing written). The kinds observe, ask their hooks and plan through
//! these, so `dev` and `dryrun` run the same steps on either.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use tokio_util::sync::CancellationToken;

use crate::k8s::discovery::ResourceInfo;
use crate::k8s::informer::{FilterBy, Informer, InformerError, ShardFilter};
use crate::k8s::object::ObjectKey;
use crate::runtime::caller::Caller;
use crate::runtime::context::EngineContext;
use crate::runtime::snapshot::{Listed, LiveError, LiveReader};
use crate::runtime::start::{StartError, resolve_all, wait_caches};
use crate::spec::{Controller, ParentResourceRule};
use kube_apimachinery::selector::LabelSelector;

/// The objects of one resource, as a sync step reads them.
#[derive(Clone)]
pub enum Source {
    /// A shared informer's cache (`dev`).
    Watched(Arc<Informer>),
    /// A list read once (`dryrun`).
    Listed(Arc<Listed>),
}

impl Source {
    /// The object at `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        match self {
            Source::Watched(i) => i.get(key),
            Source::Listed(l) => l.get(key),
        }
    }

    /// Objects in `namespace` (every one with `None`).
    pub fn list(&self, namespace: Option<&str>) -> Vec<Arc<Value>> {
        match self {
            Source::Watched(i) => i.list(namespace),
            Source::Listed(l) => l.list(namespace),
        }
    }

    /// Objects whose ControllerRef points at `uid`.
    pub fn controlled_by(&self, uid: &str) -> Vec<Arc<Value>> {
        match self {
            Source::Watched(i) => i.controlled_by(uid),
            Source::Listed(l) => l.controlled_by(uid),
        }
    }

    /// Objects without a ControllerRef in `namespace` that `selector` matches.
    pub fn orphans(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Arc<Value>> {
        match self {
            Source::Watched(i) => i.orphans(namespace, selector),
            Source::Listed(l) => l.orphans(namespace, selector),
        }
    }

    /// Objects in `namespace` that `selector` matches.
    pub fn select(&self, namespace: Option<&str>, selector: &LabelSelector) -> Vec<Arc<Value>> {
        match self {
            Source::Watched(i) => i.select(namespace, selector),
            Source::Listed(l) => l.select(namespace, selector),
        }
    }

    /// The informer behind it (for routing its events, waiting for writes to show), if any.
    pub fn informer(&self) -> Option<&Arc<Informer>> {
        match self {
            Source::Watched(i) => Some(i),
            Source::Listed(_) => None,
        }
    }

    /// Wait until it can be read (an informer's first list; a list read once is ready).
    pub async fn wait_synced(&self, timeout: Duration) -> Result<(), InformerError> {
        match self {
            Source::Watched(i) => i.wait_synced(timeout).await,
            Source::Listed(_) => Ok(()),
        }
    }
}

/// How a controller gets the [`Source`] of a resource.
#[derive(Clone)]
pub enum Reader {
    /// The engine's shared informers (`dev`).
    Informers,
    /// Lists read once (`dryrun`).
    Snapshot(Arc<LiveReader>),
}

impl Reader {
    /// The source of `info`: its shared informer, or its list read once.
    pub async fn source(
        &self,
        ctx: &EngineContext,
        info: &ResourceInfo,
    ) -> Result<Source, LiveError> {
        match self {
            Reader::Informers => Ok(Source::watched(ctx, info)),
            Reader::Snapshot(live) => live.read(info).await.map(Source::Listed),
        }
    }
}

impl Source {
    /// The shared informer of `info`.
    pub fn watched(ctx: &EngineContext, info: &ResourceInfo) -> Self {
        Source::Watched(ctx.informers.informer(&info.api_resource, info.namespaced))
    }
}

impl Reader {
    /// The hook caller of a controller reading through this: a dry run keeps every exchange.
    pub fn caller(&self, kind: &'static str, controller: &str) -> Caller {
        match self {
            Reader::Informers => Caller::new(kind, controller),
            Reader::Snapshot(_) => Caller::recording(kind, controller),
        }
    }
}

/// A resolved resource with its source.
pub type Bound = (ResourceInfo, Source);

/// The resources a definition names, `(apiVersion, resource)`.
pub type Wanted = Vec<(String, String)>;

/// What a definition with a parent resource names: the parent first, then `rest`.
pub fn parent_first<'a>(
    parent: &'a ParentResourceRule,
    rest: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Wanted {
    std::iter::once((&parent.api_version, &parent.resource))
        .chain(rest)
        .map(|(a, r)| (a.clone(), r.clone()))
        .collect()
}

/// The parent's resolved resource (the first), and the others.
pub fn split_parent(
    controller: &str,
    resolved: Vec<Bound>,
) -> Result<(Bound, std::vec::IntoIter<Bound>), StartError> {
    let mut rest = resolved.into_iter();
    match rest.next() {
        Some(parent) => Ok((parent, rest)),
        None => Err(StartError::config(
            controller,
            "internal: the parent resource was not resolved",
        )),
    }
}

/// What [`Built::prepare`] gives: what the definition gives before its resources are read,
/// and the resources it names.
pub type Prepare<K> = Result<(<K as Built>::Prepared, Wanted), StartError>;

/// What [`Built::build`] is given.
pub struct Building<K: Built> {
    /// The definition.
    pub def: Controller<K::Spec>,
    /// The engine's shared services.
    pub ctx: Arc<EngineContext>,
    /// What [`Built::prepare`] gave.
    pub prepared: K::Prepared,
    /// The resources [`Built::prepare`] named, resolved, in its order.
    pub resolved: Vec<Bound>,
    /// Where related objects are read (and who calls the hooks: [`Reader::caller`]).
    pub reader: Reader,
}

/// A controller kind built from its definition on its resolved resources: watched (`dev`,
/// [`watched`]) or read once (`dryrun`, [`snapshot`]).
pub trait Built: Sized + Send {
    /// The definition's spec.
    type Spec;
    /// What the definition gives before its resources are read (hooks, selectors, rules).
    type Prepared;

    /// Check the definition (resolving its hooks) and name its resources, `(apiVersion,
    /// resource)`, in the order [`Built::build`] takes them.
    fn prepare(def: &Controller<Self::Spec>, ctx: &EngineContext) -> Prepare<Self>;
    /// The controller on its resolved resources, reading related ones through the reader.
    fn build(b: Building<Self>) -> Result<Self, StartError>;
    /// Every source it reads.
    fn sources(&self) -> Vec<&Source>;
    /// With `run --sharded`, how the informer of its `index`-th resource (in
    /// [`Built::prepare`]'s order) is narrowed to the parents this process is assigned
    /// ([`crate::shard::CacheScope`]): [`FilterBy::ParentUid`] for its parents,
    /// [`FilterBy::ChildLabel`] for children it labels with their parent's bucket
    /// ([`crate::shard::bucket_label`]); `None` (the default) caches every object.
    fn cache_filter(prepared: &Self::Prepared, controller: &str, index: usize) -> Option<FilterBy> {
        let _ = (prepared, controller, index);
        None
    }
    /// Built on shared informers, before their first lists are waited for (by default
    /// nothing).
    fn watching(
        &mut self,
        stop: &CancellationToken,
    ) -> impl Future<Output = Result<(), StartError>> + Send {
        let _ = stop;
        async { Ok(()) }
    }
    /// Built on lists read once (by default nothing).
    fn snapshotted(
        &mut self,
        live: &Arc<LiveReader>,
    ) -> impl Future<Output = Result<(), SnapshotError>> + Send {
        let _ = live;
        async { Ok(()) }
    }
}

/// Build a controller on its resources' shared informers, resolving them first (a missing one
/// is reported and retried until it exists or `stop` fires), and wait for their first lists.
pub async fn watched<K: Built>(
    def: Controller<K::Spec>,
    ctx: Arc<EngineContext>,
    stop: &CancellationToken,
) -> Result<Arc<K>, StartError> {
    let name = def.name.clone();
    let (prepared, wanted) = K::prepare(&def, &ctx)?;
    let infos = resolve_all(&ctx, &name, &wanted, stop).await?;
    let gate = ctx.shard().filter(|g| g.knows(&name));
    let resolved = infos
        .into_iter()
        .enumerate()
        .map(|(n, i)| {
            let by = K::cache_filter(&prepared, &name, n);
            let follower = by.and_then(|by| Some((by, gate.as_ref()?.cache_follower(&name)?)));
            let s = match follower {
                Some((by, follower)) => {
                    let filter = ShardFilter {
                        controller: name.clone(),
                        by,
                        follower,
                    };
                    Source::Watched(ctx.informers.sharded(&i.api_resource, i.namespaced, filter))
                }
                None => Source::watched(&ctx, &i),
            };
            (i, s)
        })
        .collect();
    let mut kind = K::build(Building {
        def,
        ctx: Arc::clone(&ctx),
        prepared,
        resolved,
        reader: Reader::Informers,
    })?;
    kind.watching(stop).await?;
    let informers: Vec<&Arc<Informer>> = kind
        .sources()
        .into_iter()
        .filter_map(Source::informer)
        .collect();
    wait_caches(&ctx, &name, &informers, stop).await?;
    Ok(Arc::new(kind))
}

/// Build a controller on lists read once (no retry: a resource the cluster does not serve
/// is an error).
pub async fn snapshot<K: Built>(
    def: Controller<K::Spec>,
    ctx: Arc<EngineContext>,
    live: &Arc<LiveReader>,
) -> Result<K, SnapshotError> {
    let (prepared, wanted) = K::prepare(&def, &ctx)?;
    let resolved = read_once(live, &wanted).await?;
    let reader = Reader::Snapshot(Arc::clone(live));
    let mut kind = K::build(Building {
        def,
        ctx,
        prepared,
        resolved,
        reader,
    })?;
    kind.snapshotted(live).await?;
    Ok(kind)
}

/// Why a controller could not be read from a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Reading live state failed.
    #[error(transparent)]
    Live(#[from] LiveError),
    /// The definition cannot be run (hooks, selectors, scopes).
    #[error(transparent)]
    Config(#[from] StartError),
}

/// Resolve `(apiVersion, resource)` pairs and list each once.
async fn read_once(
    live: &LiveReader,
    wanted: &[(String, String)],
) -> Result<Vec<Bound>, LiveError> {
    let mut out = Vec::with_capacity(wanted.len());
    for (api_version, resource) in wanted {
        let info = live.resolve(api_version, resource).await?;
        let listed = live.read(&info).await?;
        out.push((info, Source::Listed(listed)));
    }
    Ok(out)
}
