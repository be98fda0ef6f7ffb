//! State shared by the HTTP handlers and the built-in controllers of one sandbox instance.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::resources::{Registry, ResourceDef};
use super::status::{ApiError, ApiResult, Target};
use super::store::{Store, Stored};

/// Tunables of a running sandbox.
#[derive(Debug, Clone)]
pub struct Tunables {
    /// Delay before the simulated kubelet marks a new pod Running/Ready (None = no kubelet).
    pub kubelet_delay: Option<Duration>,
    /// How long run-to-completion pods (`restartPolicy` Never/OnFailure) run before the
    /// simulated kubelet marks them Succeeded or Failed.
    pub pod_run: Duration,
    /// The simulated Job controller's pod failure back-off (doubled per failure, capped at 60
    /// times this); kube-controller-manager's is 10 s.
    pub job_backoff: Duration,
    /// How often idle watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            kubelet_delay: Some(Duration::from_millis(500)),
            pod_run: Duration::from_secs(1),
            job_backoff: Duration::from_secs(10),
            bookmark_interval: Duration::from_secs(30),
            max_body_bytes: 3 * 1024 * 1024,
        }
    }
}

/// Everything one sandbox instance shares.
#[derive(Debug)]
pub struct State {
    /// The objects.
    pub store: Store,
    /// What is served.
    registry: RwLock<Registry>,
    /// The bearer token every request must carry.
    pub token: String,
    /// Tunables.
    pub tunables: Tunables,
    /// Feature gates.
    pub features: super::features::FeatureGates,
    /// Cancelled when the server shuts down (ends watches and controllers).
    pub shutdown: CancellationToken,
    /// The CA certificate (PEM) clients trust; published as `kube-root-ca.crt` in every namespace.
    pub ca_pem: String,
    /// Where the server listens; the `kubernetes` Service's endpoints point there.
    pub addr: SocketAddr,
    /// Delayed re-syncs of the built-in controllers.
    pub requeue: super::controllers::requeue::Requeue,
    /// Authentication: ServiceAccount tokens, the CA for client certificates.
    pub auth: super::auth::Auth,
    /// Authorization: RBAC.
    pub rbac: super::rbac::Authorizer,
}

impl State {
    /// The stored core (`v1`) object `resource`/`ns`/`name` (e.g. `"pods"`), or the API's
    /// 404 naming it: what a subresource handler (proxy, log, token) reads its parent with.
    pub(crate) fn core_object(
        &self,
        resource: &str,
        ns: &str,
        name: &str,
    ) -> ApiResult<Arc<Stored>> {
        self.store
            .get(&format!("/{resource}"), ns, name)
            .ok_or_else(|| {
                ApiError::not_found(Target {
                    group: "",
                    resource,
                    name,
                })
            })
    }

    /// Assemble the shared state.
    pub fn new(
        store: Store,
        token: String,
        tunables: Tunables,
        features: super::features::FeatureGates,
        ca_pem: String,
        addr: SocketAddr,
        auth: super::auth::Auth,
    ) -> Arc<State> {
        let rbac = super::rbac::Authorizer::new(&store);
        let shutdown = CancellationToken::new();
        Arc::new(State {
            store,
            registry: RwLock::new(Registry::builtin()),
            token,
            tunables,
            features,
            requeue: super::controllers::requeue::Requeue::new(shutdown.clone()),
            shutdown,
            ca_pem,
            addr,
            auth,
            rbac,
        })
    }

    /// Read the registry.
    pub fn registry(&self) -> RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Change the registry (CRD controller only).
    pub fn registry_mut(&self) -> RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The definition objects of a storage key are stored under (their storage version).
    pub fn def_for_gr(&self, gr: &str) -> ApiResult<Arc<ResourceDef>> {
        let reg = self.registry();
        reg.all()
            .find(|d| d.group_resource() == gr && d.storage_api_version() == d.api_version())
            .cloned()
            .ok_or_else(|| ApiError::internal(format!("resource {gr} is no longer served")))
    }
}

/// Now as an RFC 3339 timestamp with second precision (`2026-11-22T02:56:14Z`).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Now as Unix seconds.
pub fn now_unix() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A fresh random uid.
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A random u64 (for generateName suffixes).
pub fn random_u64() -> u64 {
    let b = uuid::Uuid::new_v4().into_bytes();
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}
