//! The controller definition types: CompositeController, DecoratorController and MapController
//! specs as serde structs, the loaded [`Controller`] with its raw document and [`Source`], and
//! the small accessors the engine needs (default update method, hook version and timeout).
//!
//! Field names follow Metacontroller's `metacontroller.k8s.io/v1alpha1` API. Every spec struct
//! denies unknown fields, so a typo in a definition is reported instead of silently ignored.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::duration::parse_go_duration;
use kube_apimachinery::selector::{LabelSelector, SelectorError};

/// How long a hook call may take when its definition gives no timeout (Metacontroller's default).
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// A resource type named by API version and lowercase plural (`{apiVersion: v1, resource: pods}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceRule {
    /// `<group>/<version>`, or `<version>` for the core group.
    pub api_version: String,
    /// The lowercase plural resource name (`pods`, `deployments`).
    pub resource: String,
}

/// The parent resource of a CompositeController or MapController.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParentResourceRule {
    /// `<group>/<version>`, or `<version>` for the core group.
    pub api_version: String,
    /// The lowercase plural resource name.
    pub resource: String,
    /// Only parents matching this `metav1.LabelSelector` are managed (all when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<Value>,
    /// Which parent fields trigger rolling updates of children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history: Option<RevisionHistory>,
    /// When true, a change to the parent's status alone does not trigger a sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_status_changes: Option<bool>,
}

/// `parentResource.revisionHistory`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevisionHistory {
    /// Dotted parent field paths (`spec.template`); empty means `["spec"]`.
    #[serde(default)]
    pub field_paths: Vec<String>,
}

/// A child (CompositeController), attachment (DecoratorController) or output (MapController)
/// resource type, with how existing objects of that type are updated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChildResourceRule {
    /// `<group>/<version>`, or `<version>` for the core group.
    pub api_version: String,
    /// The lowercase plural resource name.
    pub resource: String,
    /// How to update existing objects; absent means `OnDelete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<ChildUpdateStrategy>,
}

impl ChildResourceRule {
    /// The update method, `OnDelete` when no strategy is given.
    pub fn method(&self) -> UpdateMethod {
        self.update_strategy
            .as_ref()
            .map_or(UpdateMethod::OnDelete, |s| s.method)
    }
}

/// `updateStrategy` of a child resource rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChildUpdateStrategy {
    /// The update method (default `OnDelete`).
    #[serde(default)]
    pub method: UpdateMethod,
    /// Conditions already-updated children must pass before a rolling update continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_checks: Option<StatusChecks>,
}

/// `updateStrategy.statusChecks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusChecks {
    /// Every check must pass.
    #[serde(default)]
    pub conditions: Vec<StatusConditionCheck>,
}

/// One status condition a child must have (`{type: Ready, status: "True"}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusConditionCheck {
    /// The condition type (`status.conditions[].type`).
    #[serde(rename = "type")]
    pub type_: String,
    /// Required condition status; not checked when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Required condition reason; not checked when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How existing children that differ from the desired state are updated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpdateMethod {
    /// Never update an existing child.
    #[default]
    OnDelete,
    /// Delete a differing child now; it is created again on a later sync.
    Recreate,
    /// Update a differing child.
    InPlace,
    /// Like `Recreate`, one child at a time, gated by status checks.
    RollingRecreate,
    /// Like `InPlace`, one child at a time, gated by status checks.
    RollingInPlace,
}

impl UpdateMethod {
    /// `RollingRecreate` or `RollingInPlace`.
    pub fn is_rolling(self) -> bool {
        matches!(self, Self::RollingRecreate | Self::RollingInPlace)
    }
}

/// How a hook is reached: a webhook or (beyond Metacontroller) a local program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hook {
    /// An HTTP(S) hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<Webhook>,
    /// A local program, run once per call with the request on stdin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecHook>,
    /// The hook wire format version (`v1` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<HookVersion>,
}

impl Hook {
    /// The wire format version, `v1` when not given.
    pub fn version(&self) -> HookVersion {
        self.version.unwrap_or(HookVersion::V1)
    }

    /// How long one call may take: the webhook's or program's `timeout`, or 10s.
    ///
    /// Definitions are validated when loaded, so an unparsable timeout cannot reach here; it
    /// would fall back to the default.
    pub fn timeout(&self) -> Duration {
        let given = match (&self.webhook, &self.exec) {
            (Some(w), _) => w.timeout.as_deref(),
            (None, Some(x)) => x.timeout.as_deref(),
            (None, None) => None,
        };
        given
            .and_then(|t| parse_go_duration(t).ok())
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_HOOK_TIMEOUT)
    }
}

/// The hook wire format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HookVersion {
    /// Metacontroller's original format.
    #[serde(rename = "v1")]
    V1,
    /// `namespace/name` keys everywhere, strict response decoding.
    #[serde(rename = "v2")]
    V2,
}

/// `hook.webhook`: a URL, or a Service reference plus a path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Webhook {
    /// The full URL (`http://host:port/sync`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Path appended to the service address (`/sync`); only with `service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A Kubernetes Service through which the hook is reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    /// Call timeout as a Go duration (`10s`, `1m30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Metacontroller's ETag cache settings; accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<Value>,
    /// Metacontroller's `loose` / `strict` response decoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_un_marshall_mode: Option<String>,
    /// CA certificate(s) that verify the hook server's certificate (instead of the system
    /// roots). Any of these four fields set here replaces a matching `spec.endpointConfigs`
    /// entry entirely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<CaBundle>,
    /// A client certificate for mutual TLS.
    #[serde(default, rename = "clientTLS", skip_serializing_if = "Option::is_none")]
    pub client_tls: Option<ClientTls>,
    /// A token `Authorization` header (mutually exclusive with `basicAuth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<Authorization>,
    /// HTTP Basic authentication (mutually exclusive with `authorization`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuth>,
}

impl Webhook {
    /// The connection settings set on the hook itself (`None` when it sets none of them, so
    /// that a matching `spec.endpointConfigs` entry applies).
    pub fn connection(&self) -> Option<Connection<'_>> {
        let c = Connection {
            ca_bundle: self.ca_bundle.as_ref(),
            client_tls: self.client_tls.as_ref(),
            authorization: self.authorization.as_ref(),
            basic_auth: self.basic_auth.as_ref(),
        };
        (!c.is_empty()).then_some(c)
    }
}

/// The TLS and authentication settings of a webhook, as set on the hook or on a
/// `spec.endpointConfigs` entry (Metacontroller's `caBundle`, `clientTLS`, `authorization`,
/// `basicAuth`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Connection<'a> {
    /// `caBundle`.
    pub ca_bundle: Option<&'a CaBundle>,
    /// `clientTLS`.
    pub client_tls: Option<&'a ClientTls>,
    /// `authorization`.
    pub authorization: Option<&'a Authorization>,
    /// `basicAuth`.
    pub basic_auth: Option<&'a BasicAuth>,
}

impl Connection<'_> {
    /// Nothing is set.
    pub fn is_empty(&self) -> bool {
        self.ca_bundle.is_none()
            && self.client_tls.is_none()
            && self.authorization.is_none()
            && self.basic_auth.is_none()
    }
}

/// `caBundle`: PEM CA certificate(s), inline or from a Secret or ConfigMap key; exactly one of
/// the three.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaBundle {
    /// The PEM text itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<String>,
    /// A key (default `ca.crt`) of a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<ResourceKeyRef>,
    /// A key (default `ca.crt`) of a ConfigMap's `data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<ResourceKeyRef>,
}

/// The key `caBundle` reads when `key` is not given.
pub const DEFAULT_CA_KEY: &str = "ca.crt";

/// A key of a Secret or ConfigMap (`caBundle.secretRef`, `caBundle.configMapRef`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceKeyRef {
    /// The object's name.
    pub name: String,
    /// The object's namespace (required: definitions are cluster-scoped).
    pub namespace: String,
    /// The key; `ca.crt` when absent or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A Secret by name and namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretRef {
    /// The Secret's name.
    pub name: String,
    /// The Secret's namespace.
    pub namespace: String,
}

/// A key of a Secret (`authorization.secretRef`; the key is required).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeyRef {
    /// The Secret's name.
    pub name: String,
    /// The Secret's namespace.
    pub namespace: String,
    /// The key whose value is the credential.
    pub key: String,
}

/// `authorization`: `Authorization: <type> <credential>`, the credential from a Secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Authorization {
    /// The scheme (`Bearer` when absent or empty); not `Basic` (that is `basicAuth`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Where the credential is.
    pub secret_ref: SecretKeyRef,
}

/// The scheme `authorization` uses when `type` is not given.
pub const DEFAULT_AUTHORIZATION_TYPE: &str = "Bearer";

impl Authorization {
    /// The scheme: `type` trimmed, or `Bearer`.
    pub fn scheme(&self) -> &str {
        match self.type_.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => t,
            _ => DEFAULT_AUTHORIZATION_TYPE,
        }
    }
}

/// `basicAuth`: username and password from one Secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BasicAuth {
    /// The Secret.
    pub secret_ref: SecretRef,
    /// The username's key (default `username`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_key: Option<String>,
    /// The password's key (default `password`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_key: Option<String>,
}

impl BasicAuth {
    /// The username's key: `usernameKey`, or `username`.
    pub fn username_key(&self) -> &str {
        non_empty_or(self.username_key.as_deref(), "username")
    }

    /// The password's key: `passwordKey`, or `password`.
    pub fn password_key(&self) -> &str {
        non_empty_or(self.password_key.as_deref(), "password")
    }
}

/// `clientTLS`: a PEM certificate and private key from one Secret, presented for mutual TLS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientTls {
    /// The Secret.
    pub secret_ref: SecretRef,
    /// The certificate's key (default `tls.crt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_key: Option<String>,
    /// The private key's key (default `tls.key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key_key: Option<String>,
}

impl ClientTls {
    /// The certificate's key: `certKey`, or `tls.crt`.
    pub fn cert_key(&self) -> &str {
        non_empty_or(self.cert_key.as_deref(), "tls.crt")
    }

    /// The private key's key: `privateKeyKey`, or `tls.key`.
    pub fn private_key_key(&self) -> &str {
        non_empty_or(self.private_key_key.as_deref(), "tls.key")
    }
}

impl ResourceKeyRef {
    /// The key: `key`, or `ca.crt`.
    pub fn key(&self) -> &str {
        non_empty_or(self.key.as_deref(), DEFAULT_CA_KEY)
    }
}

fn non_empty_or<'a>(given: Option<&'a str>, default: &'a str) -> &'a str {
    match given {
        Some(k) if !k.is_empty() => k,
        _ => default,
    }
}

/// `spec.endpointConfigs[]`: connection settings for every webhook whose URL has this host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EndpointConfig {
    /// `host` or `host:port` (case-insensitive; the scheme's default port may be left out).
    pub host: String,
    /// See [`Webhook::ca_bundle`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<CaBundle>,
    /// See [`Webhook::client_tls`].
    #[serde(default, rename = "clientTLS", skip_serializing_if = "Option::is_none")]
    pub client_tls: Option<ClientTls>,
    /// See [`Webhook::authorization`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<Authorization>,
    /// See [`Webhook::basic_auth`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuth>,
}

impl EndpointConfig {
    /// The entry's connection settings.
    pub fn connection(&self) -> Connection<'_> {
        Connection {
            ca_bundle: self.ca_bundle.as_ref(),
            client_tls: self.client_tls.as_ref(),
            authorization: self.authorization.as_ref(),
            basic_auth: self.basic_auth.as_ref(),
        }
    }
}

/// `webhook.service`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceReference {
    /// Service name.
    pub name: String,
    /// Service namespace.
    pub namespace: String,
    /// Port (default 80).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// `http` (default) or `https`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// `hook.exec`: a local program called with the request JSON on stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecHook {
    /// Program and arguments (`[python3, hooks/sync.py]`).
    pub command: Vec<String>,
    /// Call timeout as a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Working directory; relative paths are resolved by the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
}

/// `spec` of a CompositeController.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompositeControllerSpec {
    /// The parent resource.
    pub parent_resource: ParentResourceRule,
    /// The child resource types.
    #[serde(default)]
    pub child_resources: Vec<ChildResourceRule>,
    /// Resync every parent this often.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resync_period_seconds: Option<i32>,
    /// Use `controller-uid: <parent uid>` instead of the parent's `spec.selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_selector: Option<bool>,
    /// The hooks.
    #[serde(default)]
    pub hooks: SyncControllerHooks,
    /// Connection settings (CA bundle, client TLS, authentication) for the webhooks, by host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint_configs: Vec<EndpointConfig>,
}

/// `spec.hooks` of a CompositeController or a DecoratorController.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncControllerHooks {
    /// Computes the desired state: children and status (CompositeController), or labels,
    /// annotations, status and attachments (DecoratorController). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<Hook>,
    /// Called instead of sync while the parent is being deleted (or, for a decorator target,
    /// stops matching).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalize: Option<Hook>,
    /// Names the related resources a parent (target) wants to see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customize: Option<Hook>,
}

/// `spec` of a DecoratorController.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecoratorControllerSpec {
    /// The target resources (at least one).
    #[serde(default)]
    pub resources: Vec<DecoratorResourceRule>,
    /// The attachment types.
    #[serde(default)]
    pub attachments: Vec<ChildResourceRule>,
    /// Resync every target this often.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resync_period_seconds: Option<i32>,
    /// The hooks.
    #[serde(default)]
    pub hooks: SyncControllerHooks,
    /// Connection settings (CA bundle, client TLS, authentication) for the webhooks, by host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint_configs: Vec<EndpointConfig>,
}

/// A DecoratorController target resource with its selectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecoratorResourceRule {
    /// `<group>/<version>`, or `<version>` for the core group.
    pub api_version: String,
    /// The lowercase plural resource name.
    pub resource: String,
    /// Only targets with matching labels (a `metav1.LabelSelector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<Value>,
    /// Only targets with matching annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation_selector: Option<AnnotationSelector>,
}

/// A label-selector-shaped selector over annotations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnnotationSelector {
    /// Annotations that must have exactly these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_annotations: Option<BTreeMap<String, String>>,
    /// `{key, operator, values}` requirements, as in a label selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<Value>>,
}

impl AnnotationSelector {
    /// The selector to match against an object's annotations. Keys and values follow label
    /// rules, as in Metacontroller.
    pub fn selector(&self) -> Result<LabelSelector, SelectorError> {
        let mut v = serde_json::Map::new();
        if let Some(m) = &self.match_annotations {
            let labels = m
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            v.insert("matchLabels".into(), Value::Object(labels));
        }
        if let Some(e) = &self.match_expressions {
            v.insert("matchExpressions".into(), Value::Array(e.clone()));
        }
        LabelSelector::from_label_selector(&Value::Object(v))
    }
}

/// `spec` of a MapController.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MapControllerSpec {
    /// The parent resource.
    pub parent_resource: ParentResourceRule,
    /// The input resource types (at least one).
    #[serde(default)]
    pub input_resources: Vec<ResourceRule>,
    /// The output resource types.
    #[serde(default)]
    pub output_resources: Vec<ChildResourceRule>,
    /// Resync every parent this often.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resync_period_seconds: Option<i32>,
    /// The hooks.
    #[serde(default)]
    pub hooks: MapHooks,
    /// Connection settings (CA bundle, client TLS, authentication) for the webhooks, by host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint_configs: Vec<EndpointConfig>,
}

/// `spec.hooks` of a MapController.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MapHooks {
    /// Called once per input; answers that input's outputs (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<Hook>,
    /// Decides which outputs of a vanished input are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tombstone: Option<Hook>,
    /// Called while the parent is being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalize: Option<Hook>,
    /// Names the related resources a parent wants to see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customize: Option<Hook>,
}

/// A validated controller definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Controller<S> {
    /// `metadata.name`.
    pub name: String,
    /// The typed spec.
    pub spec: S,
    /// The whole document as loaded; sent to hooks as `controller`.
    pub raw: Value,
    /// Where it came from.
    pub source: Source,
}

impl<S> Controller<S> {
    /// The directory of the file the definition came from (exec hooks run there by default);
    /// `None` for definitions read from the cluster.
    pub fn base_dir(&self) -> Option<&Path> {
        self.source.base_dir()
    }
}

/// A controller definition of any kind.
// A handful exist per run: boxing the variants would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ControllerDef {
    /// A CompositeController.
    Composite(Controller<CompositeControllerSpec>),
    /// A DecoratorController.
    Decorator(Controller<DecoratorControllerSpec>),
    /// A MapController.
    Map(Controller<MapControllerSpec>),
}

impl ControllerDef {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        match self {
            Self::Composite(c) => &c.name,
            Self::Decorator(c) => &c.name,
            Self::Map(c) => &c.name,
        }
    }

    /// `CompositeController`, `DecoratorController` or `MapController`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Composite(_) => COMPOSITE_KIND,
            Self::Decorator(_) => DECORATOR_KIND,
            Self::Map(_) => MAP_KIND,
        }
    }

    /// Where the definition came from.
    pub fn source(&self) -> &Source {
        match self {
            Self::Composite(c) => &c.source,
            Self::Decorator(c) => &c.source,
            Self::Map(c) => &c.source,
        }
    }

    /// The whole document as loaded.
    pub fn raw(&self) -> &Value {
        match self {
            Self::Composite(c) => &c.raw,
            Self::Decorator(c) => &c.raw,
            Self::Map(c) => &c.raw,
        }
    }

    /// The directory of the definition's file (see [`Controller::base_dir`]).
    pub fn base_dir(&self) -> Option<&Path> {
        self.source().base_dir()
    }

    /// `spec.endpointConfigs`.
    pub fn endpoint_configs(&self) -> &[EndpointConfig] {
        match self {
            Self::Composite(c) => &c.spec.endpoint_configs,
            Self::Decorator(c) => &c.spec.endpoint_configs,
            Self::Map(c) => &c.spec.endpoint_configs,
        }
    }

    /// The hooks the definition sets, by name (`sync`, `finalize`, `customize`, `map`,
    /// `tombstone`).
    pub fn hooks(&self) -> Vec<(&'static str, &Hook)> {
        let all: Vec<(&'static str, &Option<Hook>)> = match self {
            Self::Composite(c) => vec![
                ("sync", &c.spec.hooks.sync),
                ("finalize", &c.spec.hooks.finalize),
                ("customize", &c.spec.hooks.customize),
            ],
            Self::Decorator(c) => vec![
                ("sync", &c.spec.hooks.sync),
                ("finalize", &c.spec.hooks.finalize),
                ("customize", &c.spec.hooks.customize),
            ],
            Self::Map(c) => vec![
                ("map", &c.spec.hooks.map),
                ("tombstone", &c.spec.hooks.tombstone),
                ("finalize", &c.spec.hooks.finalize),
                ("customize", &c.spec.hooks.customize),
            ],
        };
        all.into_iter()
            .filter_map(|(n, h)| h.as_ref().map(|h| (n, h)))
            .collect()
    }
}

/// The API group of controller definitions.
pub const GROUP: &str = "metacontroller.k8s.io";
/// The only supported `apiVersion` of controller definitions.
pub const API_VERSION: &str = "metacontroller.k8s.io/v1alpha1";
/// Kind name of a CompositeController.
pub const COMPOSITE_KIND: &str = "CompositeController";
/// Kind name of a DecoratorController.
pub const DECORATOR_KIND: &str = "DecoratorController";
/// Kind name of a MapController.
pub const MAP_KIND: &str = "MapController";
/// The three controller kinds.
pub const CONTROLLER_KINDS: [&str; 3] = [COMPOSITE_KIND, DECORATOR_KIND, MAP_KIND];

/// Where a document came from: a file (which document of it) or the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The file, for documents read from files.
    pub path: Option<PathBuf>,
    /// 1-based index of the document in the file (empty documents are not counted).
    pub document: usize,
    /// 1-based index in the `items` of a List document.
    pub item: Option<usize>,
    /// 1-based line where the document starts, when known.
    pub line: Option<usize>,
    /// File or cluster.
    pub origin: Origin,
}

/// Whether a document was read from a file or from the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file on disk (`Source::path`).
    File,
    /// An object read from the cluster.
    Cluster {
        /// Lowercase kind as kubectl spells it (`compositecontroller`).
        kind: String,
        /// Object name.
        name: String,
    },
}

impl Source {
    /// Document `document` (1-based) of `path`, starting at `line` when known.
    pub fn file(path: impl Into<PathBuf>, document: usize, line: Option<usize>) -> Self {
        Self {
            path: Some(path.into()),
            document,
            item: None,
            line,
            origin: Origin::File,
        }
    }

    /// An object read from the cluster, e.g. `Source::cluster("compositecontroller", "foo")`.
    pub fn cluster(kind: &str, name: &str) -> Self {
        Self {
            path: None,
            document: 1,
            item: None,
            line: None,
            origin: Origin::Cluster {
                kind: kind.to_string(),
                name: name.to_string(),
            },
        }
    }

    /// The directory of the source file (`.` for a bare file name); `None` for the cluster.
    pub fn base_dir(&self) -> Option<&Path> {
        let path = self.path.as_deref()?;
        match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => Some(dir),
            _ => Some(Path::new(".")),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Origin::Cluster { kind, name } = &self.origin {
            return write!(f, "cluster {kind}/{name}");
        }
        match &self.path {
            Some(p) => write!(f, "{}, document {}", p.display(), self.document)?,
            None => write!(f, "document {}", self.document)?,
        }
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hook(v: Value) -> Hook {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn update_method_defaults_to_on_delete() {
        let rule: ChildResourceRule =
            serde_json::from_value(json!({"apiVersion": "v1", "resource": "pods"})).unwrap();
        assert_eq!(rule.method(), UpdateMethod::OnDelete);
        let rule: ChildResourceRule = serde_json::from_value(
            json!({"apiVersion": "v1", "resource": "pods", "updateStrategy": {}}),
        )
        .unwrap();
        assert_eq!(rule.method(), UpdateMethod::OnDelete);
        let rule: ChildResourceRule = serde_json::from_value(
            json!({"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "RollingInPlace"}}),
        )
        .unwrap();
        assert_eq!(rule.method(), UpdateMethod::RollingInPlace);
        let rolling: Vec<bool> = [
            UpdateMethod::OnDelete,
            UpdateMethod::Recreate,
            UpdateMethod::InPlace,
            UpdateMethod::RollingRecreate,
            UpdateMethod::RollingInPlace,
        ]
        .into_iter()
        .map(UpdateMethod::is_rolling)
        .collect();
        assert_eq!(rolling, [false, false, false, true, true]);
    }

    #[test]
    fn hook_version_and_timeout_defaults() {
        let h = hook(json!({"webhook": {"url": "http://x/sync"}}));
        assert_eq!(h.version(), HookVersion::V1);
        assert_eq!(h.timeout(), Duration::from_secs(10));
        let h =
            hook(json!({"webhook": {"url": "http://x/sync", "timeout": "1m30s"}, "version": "v2"}));
        assert_eq!(h.version(), HookVersion::V2);
        assert_eq!(h.timeout(), Duration::from_secs(90));
        let h = hook(json!({"exec": {"command": ["true"], "timeout": "250ms"}}));
        assert_eq!(h.timeout(), Duration::from_millis(250));
        assert!(serde_json::from_value::<Hook>(json!({"version": "v3"})).is_err());
    }

    #[test]
    fn source_display_and_base_dir() {
        let s = Source::file("examples/hello/controller.yaml", 2, None);
        assert_eq!(s.to_string(), "examples/hello/controller.yaml, document 2");
        assert_eq!(s.base_dir(), Some(Path::new("examples/hello")));
        let s = Source {
            item: Some(3),
            line: Some(14),
            ..Source::file("list.json", 1, None)
        };
        assert_eq!(s.to_string(), "list.json, document 1, item 3 (line 14)");
        assert_eq!(s.base_dir(), Some(Path::new(".")));
        let s = Source::cluster("compositecontroller", "foo");
        assert_eq!(s.to_string(), "cluster compositecontroller/foo");
        assert_eq!(s.base_dir(), None);
    }

    #[test]
    fn annotation_selector_matches_annotations() {
        let sel: AnnotationSelector = serde_json::from_value(json!({
            "matchAnnotations": {"example.com/enabled": "true"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]
        }))
        .unwrap();
        let sel = sel.selector().unwrap();
        assert!(sel.matches_json(Some(&json!({"example.com/enabled": "true", "tier": "b"}))));
        assert!(!sel.matches_json(Some(&json!({"example.com/enabled": "true"}))));
        assert!(!sel.matches_json(Some(&json!({"example.com/enabled": "false", "tier": "a"}))));
    }
}
