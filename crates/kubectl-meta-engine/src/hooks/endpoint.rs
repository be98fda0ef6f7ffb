//! Webhook connection settings: Metacontroller's `caBundle`, `clientTLS`, `authorization`,
//! `basicAuth` on a hook and `spec.endpointConfigs` by host (its `docs/src/api/hook.md` and
//! `pkg/hooks/endpoint_config.go`), resolved into an HTTP client per hook.
//!
//! 1. [`connections`]: which settings apply to each webhook of a definition. Settings on the
//!    hook itself win entirely (no merging); otherwise the first `endpointConfigs` entry whose
//!    `host` matches the host of the URL *as written in the definition* (before
//!    `--hook-base-url`; case-insensitive, the scheme's default port may be left out; a service
//!    webhook's host is `name.namespace:port`).
//! 2. [`references`] lists the Secrets and ConfigMaps they name; [`RefData::read`] reads them
//!    (from the cluster, or from the documents `--apply` is about to create), in the namespace
//!    each reference names (it is required: definitions are cluster-scoped).
//! 3. [`resolve`] builds a [`WebhookEndpoint`] per hook, collecting every problem (a missing
//!    Secret, ConfigMap or key, a bad PEM, a key that does not fit the certificate) into one
//!    [`EndpointError`] that names the controller, the field, the hooks using it and the fix.
//!
//! Secret values stay here: they are in no error message, no `Debug` output, no event, and the
//! `Authorization` header is marked sensitive. With a `caBundle`, the hook server's certificate
//! is checked against the host `dev` connects to, or, when `--hook-base-url` moved the call to
//! another address, against the definition's host (the name the certificate was made for).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use reqwest::header::HeaderValue;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use serde_json::Value;

use crate::spec::pem::parse_ca_pem;
use crate::spec::{
    Authorization, BasicAuth, CaBundle, ClientTls, Connection, ControllerDef, Webhook,
};

/// Where the settings of one webhook come from.
#[derive(Debug, Clone, PartialEq)]
pub struct HookConnection<'a> {
    /// `sync`, `finalize`, `customize`, `map` or `tombstone`.
    pub hook: &'static str,
    /// The definition field holding the settings: `spec.hooks.sync.webhook` or
    /// `spec.endpointConfigs[0]`.
    pub field: String,
    /// The settings.
    pub connection: Connection<'a>,
    /// The host of the webhook URL as the definition writes it (the name its server's
    /// certificate was made for), when it has one.
    pub definition_host: Option<String>,
}

/// The settings that apply to each webhook of `def` (hooks without any are left out).
pub fn connections(def: &ControllerDef) -> Vec<HookConnection<'_>> {
    let configs = def.endpoint_configs();
    let mut out = Vec::new();
    for (hook, h) in def.hooks() {
        let Some(w) = &h.webhook else { continue };
        let url = definition_url(w).and_then(|u| reqwest::Url::parse(&u).ok());
        let definition_host = url.as_ref().and_then(|u| u.host_str().map(str::to_string));
        if let Some(connection) = w.connection() {
            out.push(HookConnection {
                hook,
                field: format!("spec.hooks.{hook}.webhook"),
                connection,
                definition_host,
            });
            continue;
        }
        let Some(url) = url else { continue };
        if let Some((i, cfg)) = configs
            .iter()
            .enumerate()
            .find(|(_, c)| host_matches(&c.host, &url))
        {
            let connection = cfg.connection();
            if !connection.is_empty() {
                out.push(HookConnection {
                    hook,
                    field: format!("spec.endpointConfigs[{i}]"),
                    connection,
                    definition_host,
                });
            }
        }
    }
    out
}

/// The URL Metacontroller would call: `url`, else `<protocol>://<name>.<namespace>:<port><path>`.
fn definition_url(w: &Webhook) -> Option<String> {
    if let Some(url) = &w.url {
        return Some(url.clone());
    }
    let s = w.service.as_ref()?;
    Some(format!(
        "{}://{}.{}:{}{}",
        s.protocol.as_deref().unwrap_or("http"),
        s.name,
        s.namespace,
        s.port.unwrap_or(80),
        w.path.as_deref().unwrap_or("/")
    ))
}

/// Whether `endpointConfigs[].host` (`host` or `host:port`) matches `url`, as Metacontroller
/// matches: case-insensitive, and the scheme's default port equals no port.
pub fn host_matches(config_host: &str, url: &reqwest::Url) -> bool {
    let Some(url_host) = url.host_str() else {
        return false;
    };
    let Some(effective_port) = url.port_or_known_default() else {
        return false;
    };
    let Ok(cfg) = reqwest::Url::parse(&format!("{}://{}/", url.scheme(), config_host.trim()))
    else {
        return false;
    };
    let same_host = cfg
        .host_str()
        .is_some_and(|h| h.eq_ignore_ascii_case(url_host));
    // `Url` drops a port equal to the scheme's default, so "host:443" for https reads as "host".
    same_host && cfg.port_or_known_default() == Some(effective_port)
}

/// Secret or ConfigMap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefKind {
    /// A core/v1 Secret (`data`, base64-decoded).
    Secret,
    /// A core/v1 ConfigMap (`data`).
    ConfigMap,
}

impl fmt::Display for RefKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RefKind::Secret => "Secret",
            RefKind::ConfigMap => "ConfigMap",
        })
    }
}

/// A Secret or ConfigMap a definition references.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// Secret or ConfigMap.
    pub kind: RefKind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ObjectKey {
    fn new(kind: RefKind, namespace: &str, name: &str) -> Self {
        ObjectKey {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

fn connection_refs(c: &Connection<'_>, out: &mut BTreeSet<ObjectKey>) {
    if let Some(ca) = c.ca_bundle {
        if let Some(r) = &ca.secret_ref {
            out.insert(ObjectKey::new(RefKind::Secret, &r.namespace, &r.name));
        }
        if let Some(r) = &ca.config_map_ref {
            out.insert(ObjectKey::new(RefKind::ConfigMap, &r.namespace, &r.name));
        }
    }
    if let Some(t) = c.client_tls {
        let r = &t.secret_ref;
        out.insert(ObjectKey::new(RefKind::Secret, &r.namespace, &r.name));
    }
    if let Some(a) = c.authorization {
        let r = &a.secret_ref;
        out.insert(ObjectKey::new(RefKind::Secret, &r.namespace, &r.name));
    }
    if let Some(b) = c.basic_auth {
        let r = &b.secret_ref;
        out.insert(ObjectKey::new(RefKind::Secret, &r.namespace, &r.name));
    }
}

/// The Secrets and ConfigMaps the webhooks of `defs` use (entries no hook uses are not read,
/// as in Metacontroller).
pub fn references(defs: &[ControllerDef]) -> BTreeSet<ObjectKey> {
    let mut out = BTreeSet::new();
    for def in defs {
        for c in connections(def) {
            connection_refs(&c.connection, &mut out);
        }
    }
    out
}

/// The keys and values of the referenced objects that exist (Secret `data` decoded). `Debug`
/// shows keys only.
#[derive(Default, Clone, PartialEq)]
pub struct RefData {
    objects: BTreeMap<ObjectKey, BTreeMap<String, Vec<u8>>>,
}

impl fmt::Debug for RefData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: BTreeMap<String, Vec<&String>> = self
            .objects
            .iter()
            .map(|(k, v)| (k.to_string(), v.keys().collect()))
            .collect();
        f.debug_struct("RefData").field("keys", &keys).finish()
    }
}

impl RefData {
    /// Add an object's keys and values.
    pub fn insert(&mut self, key: ObjectKey, data: BTreeMap<String, Vec<u8>>) {
        self.objects.insert(key, data);
    }

    fn get(&self, key: &ObjectKey) -> Option<&BTreeMap<String, Vec<u8>>> {
        self.objects.get(key)
    }

    /// The objects of `keys` that were not found.
    pub fn missing<'k>(&self, keys: &'k BTreeSet<ObjectKey>) -> Vec<&'k ObjectKey> {
        keys.iter()
            .filter(|k| !self.objects.contains_key(k))
            .collect()
    }

    /// Read `keys` from the cluster, and from `documents` (those `--apply` will create; a
    /// namespaced document without a namespace is in `default_namespace`). Documents win when
    /// `documents_first` (`--apply --overwrite` replaces what exists), else they only stand in
    /// for objects the cluster does not have yet. A missing object is left out (reported by
    /// [`resolve`]); a failed read is an error.
    pub async fn read(
        client: &kube::Client,
        keys: &BTreeSet<ObjectKey>,
        documents: &[Value],
        default_namespace: &str,
        documents_first: bool,
    ) -> Result<RefData, EndpointError> {
        let mut from_docs = RefData::default();
        for doc in documents {
            if let Some((key, data)) = from_document(doc, default_namespace)
                && keys.contains(&key)
            {
                from_docs.insert(key, data);
            }
        }
        let mut out = RefData::default();
        for key in keys {
            if documents_first && let Some(d) = from_docs.get(key) {
                out.insert(key.clone(), d.clone());
                continue;
            }
            match read_object(client, key).await? {
                Some(d) => out.insert(key.clone(), d),
                None => {
                    if let Some(d) = from_docs.get(key) {
                        out.insert(key.clone(), d.clone());
                    }
                }
            }
        }
        Ok(out)
    }
}

/// A Secret or ConfigMap document's key and data (`stringData` over `data`, as the API server
/// folds it).
fn from_document(
    doc: &Value,
    default_namespace: &str,
) -> Option<(ObjectKey, BTreeMap<String, Vec<u8>>)> {
    if doc.get("apiVersion").and_then(Value::as_str) != Some("v1") {
        return None;
    }
    let kind = match doc.get("kind").and_then(Value::as_str)? {
        "Secret" => RefKind::Secret,
        "ConfigMap" => RefKind::ConfigMap,
        _ => return None,
    };
    let meta = doc.get("metadata")?;
    let name = meta.get("name").and_then(Value::as_str)?;
    let namespace = meta
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or(default_namespace);
    let mut data = BTreeMap::new();
    let strings = |field: &str| {
        doc.get(field)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect::<Vec<_>>()
    };
    match kind {
        RefKind::Secret => {
            for (k, v) in strings("data") {
                if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(v.trim()) {
                    data.insert(k, bytes);
                }
            }
            for (k, v) in strings("stringData") {
                data.insert(k, v.into_bytes());
            }
        }
        RefKind::ConfigMap => {
            for (k, v) in strings("data") {
                data.insert(k, v.into_bytes());
            }
        }
    }
    Some((ObjectKey::new(kind, namespace, name), data))
}

async fn read_object(
    client: &kube::Client,
    key: &ObjectKey,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, EndpointError> {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    let failed = |e: kube::Error| EndpointError::Read {
        object: key.to_string(),
        message: crate::k8s::kube_error_message(&e),
    };
    match key.kind {
        RefKind::Secret => {
            let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), &key.namespace);
            Ok(api.get_opt(&key.name).await.map_err(failed)?.map(|s| {
                s.data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect()
            }))
        }
        RefKind::ConfigMap => {
            let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), &key.namespace);
            Ok(api.get_opt(&key.name).await.map_err(failed)?.map(|c| {
                c.data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect()
            }))
        }
    }
}

/// Why the connection settings of a definition cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// References that cannot be resolved (missing objects or keys, unusable values).
    #[error(
        "{controller}: the webhook connection settings cannot be used:{}",
        problems.iter().map(|p| format!("\n  - {p}")).collect::<String>()
    )]
    Invalid {
        /// `CompositeController "name" (where it came from)`.
        controller: String,
        /// `field (hooks ...): what is wrong; how to fix it`, one per problem.
        problems: Vec<String>,
    },
    /// A Secret or ConfigMap could not be read (permissions, the API server).
    #[error(
        "cannot read {object} for a webhook's connection settings: {message}; dev reads the \
         Secrets and ConfigMaps the definitions reference (get in their namespace)"
    )]
    Read {
        /// `Secret ns/name`.
        object: String,
        /// The API server's answer.
        message: String,
    },
}

/// The resolved settings of one webhook: its HTTP client (CA roots, client certificate) and
/// the `Authorization` header. `Debug` shows where they came from, never the values.
pub struct WebhookEndpoint {
    /// Where the settings came from and what they are, without values (`spec.endpointConfigs[0]:
    /// CA bundle from ConfigMap ns/ca, client certificate from Secret ns/client, Authorization:
    /// Bearer from Secret ns/token`).
    pub summary: String,
    pub(super) http: reqwest::Client,
    pub(super) authorization: Option<HeaderValue>,
}

impl fmt::Debug for WebhookEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookEndpoint")
            .field("summary", &self.summary)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish_non_exhaustive()
    }
}

/// The resolved webhook settings of one controller, by hook name.
#[derive(Debug, Clone, Default)]
pub struct ResolvedController {
    /// `CompositeController`, `DecoratorController` or `MapController`.
    pub kind: String,
    /// The controller's name.
    pub name: String,
    /// The hooks with settings.
    pub hooks: BTreeMap<String, Arc<WebhookEndpoint>>,
}

impl ResolvedController {
    /// One line per distinct source of settings: `hooks sync, customize: spec.endpointConfigs[0]: ...`.
    pub fn describe(&self) -> Vec<String> {
        let mut by_summary: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (hook, ep) in &self.hooks {
            by_summary.entry(&ep.summary).or_default().push(hook);
        }
        by_summary
            .into_iter()
            .map(|(summary, hooks)| {
                format!(
                    "{} {}: hook(s) {} use {summary}",
                    self.kind,
                    self.name,
                    hooks.join(", ")
                )
            })
            .collect()
    }
}

/// Resolve the webhook settings of `def` from `data` (see [`RefData::read`]). Every problem is
/// reported at once.
pub fn resolve(def: &ControllerDef, data: &RefData) -> Result<ResolvedController, EndpointError> {
    let mut problems = Vec::new();
    let mut out = ResolvedController {
        kind: def.kind().to_string(),
        name: def.name().to_string(),
        hooks: BTreeMap::new(),
    };
    // Several hooks share one endpointConfigs entry: resolve it once, name all its hooks.
    let conns = connections(def);
    let mut groups: BTreeMap<(String, Option<String>), Vec<&HookConnection<'_>>> = BTreeMap::new();
    for c in &conns {
        groups
            .entry((c.field.clone(), c.definition_host.clone()))
            .or_default()
            .push(c);
    }
    for ((field, host), members) in groups {
        let hooks: Vec<&str> = members.iter().map(|m| m.hook).collect();
        let used_by = format!("hook(s) {}", hooks.join(", "));
        match build(&field, &members[0].connection, host.as_deref(), data) {
            Ok(ep) => {
                let ep = Arc::new(ep);
                for h in hooks {
                    out.hooks.insert(h.to_string(), Arc::clone(&ep));
                }
            }
            Err(errs) => problems.extend(
                errs.into_iter()
                    .map(|(f, msg)| format!("{field}.{f} (used by {used_by}): {msg}")),
            ),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(EndpointError::Invalid {
            controller: format!("{} {:?} ({})", def.kind(), def.name(), def.source()),
            problems,
        })
    }
}

/// Read `keys` with [`RefData::read`] (cluster only) and [`resolve`] each of `defs`.
pub async fn resolve_from_cluster(
    client: &kube::Client,
    defs: &[ControllerDef],
) -> Result<Vec<ResolvedController>, EndpointError> {
    let data = RefData::read(client, &references(defs), &[], "default", false).await?;
    defs.iter().map(|d| resolve(d, &data)).collect()
}

/// (field below the settings' field, message) problems.
type Problems = Vec<(String, String)>;

/// A key of a referenced object, or a problem that says what is missing and how to add it.
fn lookup<'d>(
    data: &'d RefData,
    key: &ObjectKey,
    item: &str,
    example: &str,
) -> Result<&'d [u8], String> {
    let Some(obj) = data.get(key) else {
        let create = match key.kind {
            RefKind::Secret => format!(
                "kubectl create secret generic {} -n {} {example}",
                key.name, key.namespace
            ),
            RefKind::ConfigMap => format!(
                "kubectl create configmap {} -n {} {example}",
                key.name, key.namespace
            ),
        };
        return Err(format!(
            "{key} not found; create it ({create}) or fix the reference"
        ));
    };
    match obj.get(item) {
        Some(v) if !v.is_empty() => Ok(v),
        Some(_) => Err(format!("key {item:?} of {key} is empty")),
        None => {
            let have: Vec<&String> = obj.keys().collect();
            Err(format!(
                "{key} has no key {item:?} (it has {}); add it, or name the right key",
                if have.is_empty() {
                    "none".to_string()
                } else {
                    format!("{have:?}")
                }
            ))
        }
    }
}

fn build(
    field: &str,
    conn: &Connection<'_>,
    definition_host: Option<&str>,
    data: &RefData,
) -> Result<WebhookEndpoint, Problems> {
    let mut problems: Problems = Vec::new();
    let mut summary: Vec<String> = Vec::new();
    if conn.authorization.is_some() && conn.basic_auth.is_some() {
        problems.push((
            "authorization".into(),
            "authorization and basicAuth are mutually exclusive; keep one".into(),
        ));
    }
    let ca = conn
        .ca_bundle
        .map(|ca| ca_certs(ca, data, &mut summary))
        .transpose()
        .map_err(|e| problems.push(e))
        .ok()
        .flatten();
    let identity = conn
        .client_tls
        .map(|t| client_identity(t, data, &mut summary))
        .transpose()
        .map_err(|e| problems.push(e))
        .ok()
        .flatten();
    let authorization = match (conn.authorization, conn.basic_auth) {
        (Some(a), _) => token_header(a, data, &mut summary)
            .map_err(|e| problems.push(e))
            .ok(),
        (None, Some(b)) => basic_header(b, data, &mut summary)
            .map_err(|e| problems.push(e))
            .ok(),
        (None, None) => None,
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    let http =
        client(ca, identity, definition_host).map_err(|e| vec![("clientTLS".to_string(), e)])?;
    Ok(WebhookEndpoint {
        summary: format!("{field}: {}", summary.join(", ")),
        http,
        authorization,
    })
}

fn ca_certs(
    ca: &CaBundle,
    data: &RefData,
    summary: &mut Vec<String>,
) -> Result<Vec<CertificateDer<'static>>, (String, String)> {
    let (field, pem, from) = if let Some(inline) = &ca.inline {
        (
            "caBundle.inline".to_string(),
            inline.as_bytes(),
            "inline".to_string(),
        )
    } else if let Some(r) = &ca.secret_ref {
        let key = ObjectKey::new(RefKind::Secret, &r.namespace, &r.name);
        let example = format!("--from-file={}=ca.pem", r.key());
        let v = lookup(data, &key, r.key(), &example)
            .map_err(|e| ("caBundle.secretRef".to_string(), e))?;
        (
            "caBundle.secretRef".to_string(),
            v,
            format!("key {} of {key}", r.key()),
        )
    } else if let Some(r) = &ca.config_map_ref {
        let key = ObjectKey::new(RefKind::ConfigMap, &r.namespace, &r.name);
        let example = format!("--from-file={}=ca.pem", r.key());
        let v = lookup(data, &key, r.key(), &example)
            .map_err(|e| ("caBundle.configMapRef".to_string(), e))?;
        (
            "caBundle.configMapRef".to_string(),
            v,
            format!("key {} of {key}", r.key()),
        )
    } else {
        return Err((
            "caBundle".into(),
            "needs one of inline, secretRef or configMapRef".into(),
        ));
    };
    let certs = parse_ca_pem(pem).map_err(|e| (field, format!("{from} {e}")))?;
    summary.push(format!("CA bundle ({from})"));
    Ok(certs)
}

/// A client certificate chain and its private key.
type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn client_identity(
    t: &ClientTls,
    data: &RefData,
    summary: &mut Vec<String>,
) -> Result<Identity, (String, String)> {
    let r = &t.secret_ref;
    let key = ObjectKey::new(RefKind::Secret, &r.namespace, &r.name);
    let example = format!(
        "--from-file={}=client.crt --from-file={}=client.key",
        t.cert_key(),
        t.private_key_key()
    );
    let err = |e: String| ("clientTLS.secretRef".to_string(), e);
    let cert_pem = lookup(data, &key, t.cert_key(), &example).map_err(err)?;
    let key_pem = lookup(data, &key, t.private_key_key(), &example).map_err(err)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            err(format!(
                "key {} of {key} is not valid PEM ({e})",
                t.cert_key()
            ))
        })?;
    if certs.is_empty() {
        return Err(err(format!(
            "key {} of {key} holds no PEM certificate",
            t.cert_key()
        )));
    }
    // The parser's message is not quoted: it could show part of the key.
    let private = PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| {
        err(format!(
            "key {} of {key} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)",
            t.private_key_key()
        ))
    })?;
    summary.push(format!("client certificate from {key}"));
    Ok((certs, private))
}

fn token_header(
    a: &Authorization,
    data: &RefData,
    summary: &mut Vec<String>,
) -> Result<HeaderValue, (String, String)> {
    let r = &a.secret_ref;
    let scheme = a.scheme();
    if scheme.eq_ignore_ascii_case("basic") {
        return Err((
            "authorization.type".into(),
            "Basic is not supported; use basicAuth instead".into(),
        ));
    }
    let key = ObjectKey::new(RefKind::Secret, &r.namespace, &r.name);
    let example = format!("--from-literal={}=TOKEN", r.key);
    let token = lookup(data, &key, &r.key, &example)
        .map_err(|e| ("authorization.secretRef".to_string(), e))?;
    let token = String::from_utf8_lossy(token);
    let header = sensitive(&format!("{scheme} {}", token.trim())).map_err(|()| {
        (
            "authorization.secretRef".to_string(),
            format!(
                "key {} of {key} cannot be sent in an HTTP header (it has line breaks or other \
                 control characters)",
                r.key
            ),
        )
    })?;
    summary.push(format!(
        "Authorization: {scheme} from key {} of {key}",
        r.key
    ));
    Ok(header)
}

fn basic_header(
    b: &BasicAuth,
    data: &RefData,
    summary: &mut Vec<String>,
) -> Result<HeaderValue, (String, String)> {
    let r = &b.secret_ref;
    let key = ObjectKey::new(RefKind::Secret, &r.namespace, &r.name);
    let example = format!(
        "--from-literal={}=USER --from-literal={}=PASSWORD",
        b.username_key(),
        b.password_key()
    );
    let err = |e: String| ("basicAuth.secretRef".to_string(), e);
    let user = lookup(data, &key, b.username_key(), &example).map_err(err)?;
    let password = lookup(data, &key, b.password_key(), &example).map_err(err)?;
    if user.contains(&b':') {
        return Err(err(format!(
            "the username (key {} of {key}) must not contain ':'",
            b.username_key()
        )));
    }
    let pair = format!(
        "{}:{}",
        String::from_utf8_lossy(user).trim(),
        String::from_utf8_lossy(password).trim()
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    let header = sensitive(&format!("Basic {encoded}"))
        .map_err(|()| err("the credentials cannot be sent in an HTTP header".into()))?;
    summary.push(format!(
        "basic auth from keys {}, {} of {key}",
        b.username_key(),
        b.password_key()
    ));
    Ok(header)
}

fn sensitive(value: &str) -> Result<HeaderValue, ()> {
    let mut v = HeaderValue::from_str(value).map_err(|_| ())?;
    v.set_sensitive(true);
    Ok(v)
}

/// The HTTP client of a webhook with settings: HTTP/1.1, no proxy, no redirects (as the
/// shared client), with the CA roots and client certificate.
fn client(
    ca: Option<Vec<CertificateDer<'static>>>,
    identity: Option<Identity>,
    definition_host: Option<&str>,
) -> Result<reqwest::Client, String> {
    let builder = reqwest::Client::builder()
        .no_proxy()
        .http1_only()
        .redirect(reqwest::redirect::Policy::none());
    let builder = match (ca, identity) {
        (None, None) => builder,
        (ca, identity) => {
            builder.tls_backend_preconfigured(tls_config(ca, identity, definition_host)?)
        }
    };
    builder.build().map_err(|e| {
        format!(
            "cannot set up the HTTP client: {}",
            super::webhook::error_chain(&e)
        )
    })
}

fn tls_config(
    ca: Option<Vec<CertificateDer<'static>>>,
    identity: Option<Identity>,
    definition_host: Option<&str>,
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(certs) => {
            roots.add_parsable_certificates(certs);
        }
        None => {
            roots.add_parsable_certificates(system_roots());
        }
    }
    let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::clone(&provider),
    )
    .build()
    .map_err(|e| format!("no usable CA certificate: {e}"))?;
    let also = definition_host.and_then(|h| ServerName::try_from(h.to_string()).ok());
    let verifier = Arc::new(DefinitionHostVerifier { inner, also });
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    match identity {
        Some((certs, key)) => {
            let (raw_certs, raw_key) = (certs.clone(), key.clone_key());
            match builder.clone().with_client_auth_cert(certs, key) {
                Ok(c) => Ok(c),
                // webpki reads X.509 v3 only; OpenSSL and Go also take a v1 client certificate
                // (what `openssl x509 -req` without extensions makes, as in Metacontroller's
                // webhook-auth example): send it as it is and let the server decide.
                Err(rustls::Error::InvalidCertificate(_)) => {
                    let signing = provider
                        .key_provider
                        .load_private_key(raw_key)
                        .map_err(|e| format!("the private key cannot be used ({e})"))?;
                    let certified = Arc::new(rustls::sign::CertifiedKey::new(raw_certs, signing));
                    Ok(builder.with_client_cert_resolver(Arc::new(FixedClientCert(certified))))
                }
                Err(e) => Err(format!(
                    "the client certificate and private key cannot be used together ({e})"
                )),
            }
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

/// One client certificate for every server (a `clientTLS` webpki cannot read, see
/// [`tls_config`]).
#[derive(Debug)]
struct FixedClientCert(Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for FixedClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// The system's CA roots (for a client certificate without a `caBundle`): the first bundle
/// file of the usual Linux and macOS places.
fn system_roots() -> Vec<CertificateDer<'static>> {
    let mut out = Vec::new();
    for path in [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ] {
        if let Ok(pem) = std::fs::read(path) {
            out.extend(CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok));
            break;
        }
    }
    out
}

/// Verifies the server certificate for the host connected to, or else for the definition's
/// host: with `--hook-base-url https://127.0.0.1:8443` a certificate made for
/// `my-hook.my-ns` (the definition's URL) is accepted, as a port-forward would need.
#[derive(Debug)]
struct DefinitionHostVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    also: Option<ServerName<'static>>,
}

impl rustls::client::danger::ServerCertVerifier for DefinitionHostVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let first = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        match (&first, &self.also) {
            (
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                )),
                Some(also),
            ) if also != server_name => self
                .inner
                .verify_server_cert(end_entity, intermediates, also, ocsp_response, now)
                .or(first),
            _ => first,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Source, parse_controller};
    use serde_json::json;

    fn def(spec_extra: Value, hooks: Value) -> ControllerDef {
        let mut spec = json!({
            "parentResource": {"apiVersion": "example.com/v1", "resource": "things"},
            "hooks": hooks,
        });
        if let (Some(s), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
            s.extend(extra.clone());
        }
        let doc = json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "CompositeController",
            "metadata": {"name": "secured"},
            "spec": spec,
        });
        parse_controller(&doc, Source::file("c.yaml", 1, None)).unwrap()
    }

    fn url(u: &str) -> reqwest::Url {
        reqwest::Url::parse(u).unwrap()
    }

    #[test]
    fn hosts_match_as_metacontroller_matches_them() {
        assert!(host_matches(
            "my-hook.my-ns",
            &url("https://my-hook.my-ns/sync")
        ));
        assert!(host_matches(
            "My-Hook.my-ns",
            &url("https://my-hook.MY-NS:443/sync")
        ));
        assert!(host_matches(
            "my-hook.my-ns:443",
            &url("https://my-hook.my-ns/sync")
        ));
        assert!(host_matches(
            "my-hook.my-ns",
            &url("http://my-hook.my-ns:80/sync")
        ));
        assert!(host_matches(
            "my-hook.my-ns:8443",
            &url("https://my-hook.my-ns:8443/x")
        ));
        assert!(!host_matches(
            "my-hook.my-ns",
            &url("https://my-hook.my-ns:8443/x")
        ));
        assert!(!host_matches(
            "my-hook.my-ns:80",
            &url("https://my-hook.my-ns/x")
        ));
        assert!(!host_matches("my-hook", &url("https://my-hook.my-ns/x")));
        assert!(!host_matches(
            "my-hook.my-ns",
            &url("http://my-hook.my-ns:443/x")
        ));
    }

    #[test]
    fn hook_settings_win_whole_over_endpoint_configs_matched_by_host() {
        let d = def(
            json!({"endpointConfigs": [
                {"host": "other", "authorization": {"secretRef": {"name": "o", "namespace": "ns", "key": "t"}}},
                {"host": "hooks.ns", "authorization": {"secretRef": {"name": "tok", "namespace": "ns", "key": "t"}},
                 "caBundle": {"configMapRef": {"name": "ca", "namespace": "ns"}}},
            ]}),
            json!({
                "sync": {"webhook": {"url": "https://hooks.ns/sync"}},
                "customize": {"webhook": {"service": {"name": "hooks", "namespace": "ns", "port": 443, "protocol": "https"}, "path": "/customize"}},
                "finalize": {"webhook": {"url": "https://hooks.ns/finalize",
                    "basicAuth": {"secretRef": {"name": "basic", "namespace": "ns"}}}},
            }),
        );
        let c = connections(&d);
        let by: BTreeMap<&str, &str> = c.iter().map(|c| (c.hook, c.field.as_str())).collect();
        assert_eq!(by["sync"], "spec.endpointConfigs[1]");
        assert_eq!(by["customize"], "spec.endpointConfigs[1]");
        assert_eq!(by["finalize"], "spec.hooks.finalize.webhook");
        let fin = c.iter().find(|c| c.hook == "finalize").unwrap();
        // No merging: the hook's own settings replace the entry's CA bundle and token.
        assert!(fin.connection.ca_bundle.is_none() && fin.connection.authorization.is_none());
        let keys: Vec<String> = references(&[d]).iter().map(ToString::to_string).collect();
        assert_eq!(
            keys,
            ["Secret ns/basic", "Secret ns/tok", "ConfigMap ns/ca"]
        );
    }

    #[test]
    fn missing_objects_and_keys_are_named_with_the_fix_and_no_value() {
        let d = def(
            json!({"endpointConfigs": [{"host": "hooks.ns",
                "authorization": {"type": "Token", "secretRef": {"name": "tok", "namespace": "ns", "key": "token"}},
                "clientTLS": {"secretRef": {"name": "client", "namespace": "ns"}}}]}),
            json!({
                "sync": {"webhook": {"url": "https://hooks.ns/sync"}},
                "customize": {"webhook": {"url": "https://hooks.ns/customize"}},
            }),
        );
        let mut data = RefData::default();
        data.insert(
            ObjectKey::new(RefKind::Secret, "ns", "client"),
            BTreeMap::from([("tls.crt".to_string(), b"s3cr3t-not-pem".to_vec())]),
        );
        let e = resolve(&d, &data).unwrap_err().to_string();
        assert!(
            e.starts_with("CompositeController \"secured\" (c.yaml, document 1)"),
            "{e}"
        );
        assert!(
            e.contains("spec.endpointConfigs[0].clientTLS.secretRef (used by hook(s) sync, customize): Secret ns/client has no key \"tls.key\" (it has [\"tls.crt\"])"),
            "{e}"
        );
        assert!(
            e.contains("spec.endpointConfigs[0].authorization.secretRef (used by hook(s) sync, customize): Secret ns/tok not found; create it (kubectl create secret generic tok -n ns --from-literal=token=TOKEN)"),
            "{e}"
        );
        assert!(!e.contains("s3cr3t"), "{e}");

        data.insert(
            ObjectKey::new(RefKind::Secret, "ns", "tok"),
            BTreeMap::from([("token".to_string(), b" s3cr3t-token\n".to_vec())]),
        );
        data.insert(
            ObjectKey::new(RefKind::Secret, "ns", "client"),
            BTreeMap::new(),
        );
        let d = def(
            json!({"endpointConfigs": [{"host": "hooks.ns",
                "authorization": {"type": "Token", "secretRef": {"name": "tok", "namespace": "ns", "key": "token"}}}]}),
            json!({"sync": {"webhook": {"url": "https://hooks.ns/sync"}}}),
        );
        let r = resolve(&d, &data).unwrap();
        let ep = &r.hooks["sync"];
        assert_eq!(
            ep.authorization.as_ref().unwrap().to_str().unwrap(),
            "Token s3cr3t-token"
        );
        assert!(ep.authorization.as_ref().unwrap().is_sensitive());
        let shown = format!("{r:?} {}", r.describe().join(" "));
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(
            shown.contains("Authorization: Token from key token of Secret ns/tok"),
            "{shown}"
        );
        assert!(!format!("{data:?}").contains("s3cr3t"));
    }

    #[test]
    fn documents_stand_in_for_secrets_and_config_maps() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "tok", "namespace": "ns"},
            "data": {"token": "YQ==", "b": "Yg=="}, "stringData": {"b": "B"}});
        let (key, data) = from_document(&secret, "default").unwrap();
        assert_eq!(key, ObjectKey::new(RefKind::Secret, "ns", "tok"));
        assert_eq!(data["token"], b"a");
        assert_eq!(data["b"], b"B");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca"},
            "data": {"ca.crt": "PEM"}});
        let (key, data) = from_document(&cm, "dev").unwrap();
        assert_eq!(key, ObjectKey::new(RefKind::ConfigMap, "dev", "ca"));
        assert_eq!(data["ca.crt"], b"PEM");
        assert!(
            from_document(
                &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
                "d"
            )
            .is_none()
        );
    }
}
