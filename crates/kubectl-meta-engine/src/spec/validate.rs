//! The rules a controller definition must follow. Every check collects [`Problem`]s (field path
//! plus what to do about it) instead of stopping at the first, so one run of `kubectl meta dev`
//! shows everything wrong with a definition.
//!
//! [`envelope`] checks apiVersion, metadata.name and the top-level fields, [`typed_spec`] turns
//! type errors and unknown fields into problems with their path, and [`composite`],
//! [`decorator`] and [`map`] check the typed specs.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::Problem;
use super::duration::parse_go_duration;
use super::types::{
    API_VERSION, CaBundle, ChildResourceRule, CompositeControllerSpec, Connection,
    DecoratorControllerSpec, EndpointConfig, ExecHook, Hook, MapControllerSpec, ParentResourceRule,
    RevisionHistory, Webhook,
};
use kube_apimachinery::names::{
    is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_label_token, is_subdomain_token,
};
use kube_apimachinery::selector::LabelSelector;

/// The top-level fields of a controller document.
const TOP_LEVEL_FIELDS: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];

/// Check a controller document's apiVersion, `metadata.name` and top-level field names.
pub fn envelope(doc: &Map<String, Value>) -> Vec<Problem> {
    let mut c = Checker::default();
    match doc.get("apiVersion") {
        Some(Value::String(v)) if v == API_VERSION => {}
        Some(Value::String(v)) => c.add(
            "apiVersion",
            format!("unsupported apiVersion {v:?}; write apiVersion: {API_VERSION}"),
        ),
        _ => c.add(
            "apiVersion",
            format!("is required; write apiVersion: {API_VERSION}"),
        ),
    }
    match doc.get("metadata").and_then(|m| m.get("name")) {
        Some(Value::String(name)) => {
            let errs = is_dns1123_subdomain(name);
            if !errs.is_empty() {
                c.add(
                    "metadata.name",
                    format!("{name:?} is not a valid name: {}", errs.join("; ")),
                );
            }
        }
        Some(other) if !other.is_null() => c.add(
            "metadata.name",
            "must be a string, e.g. name: hello-controller",
        ),
        _ => c.add(
            "metadata.name",
            "is required; give the controller a name, e.g. metadata: {name: hello-controller}",
        ),
    }
    for key in doc.keys() {
        if !TOP_LEVEL_FIELDS.contains(&key.as_str()) {
            c.add(
                key.clone(),
                "unknown field; a controller document has apiVersion, kind, metadata and spec",
            );
        }
    }
    c.problems
}

/// Deserialize a spec, reporting a type error or an unknown field with its path under `spec`
/// (e.g. `spec.childResources[0]: unknown field "updateStratgy", expected one of ...`).
pub fn typed_spec<S: DeserializeOwned>(spec: &Value) -> Result<S, Problem> {
    serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "spec".to_string()
        } else {
            format!("spec.{path}")
        };
        let mut message = e.into_inner().to_string();
        if field.ends_with(".timeout") {
            message.push_str("; write a Go duration such as 10s or 1m30s");
        }
        Problem { field, message }
    })
}

/// Check a CompositeController spec.
pub fn composite(spec: &CompositeControllerSpec) -> Vec<Problem> {
    let mut c = Checker::default();
    c.parent("spec.parentResource", &spec.parent_resource);
    c.child_rules("spec.childResources", &spec.child_resources, None);
    let parent = (
        &spec.parent_resource.api_version,
        &spec.parent_resource.resource,
    );
    for (i, rule) in spec.child_resources.iter().enumerate() {
        if (&rule.api_version, &rule.resource) == parent {
            c.add(
                format!("spec.childResources[{i}]"),
                format!(
                    "is the parent resource ({} {}); a controller cannot own objects of its own parent type",
                    rule.api_version, rule.resource
                ),
            );
        }
    }
    c.resync("spec.resyncPeriodSeconds", spec.resync_period_seconds);
    c.required_hook(
        "spec.hooks.sync",
        &spec.hooks.sync,
        "it computes the status and children of each parent",
    );
    c.hook("spec.hooks.finalize", &spec.hooks.finalize);
    c.hook("spec.hooks.customize", &spec.hooks.customize);
    c.endpoint_configs(&spec.endpoint_configs);
    c.problems
}

/// Check a DecoratorController spec.
pub fn decorator(spec: &DecoratorControllerSpec) -> Vec<Problem> {
    let mut c = Checker::default();
    if spec.resources.is_empty() {
        c.add(
            "spec.resources",
            "needs at least one target resource, e.g. resources: [{apiVersion: apps/v1, resource: statefulsets}]",
        );
    }
    for (i, rule) in spec.resources.iter().enumerate() {
        let field = format!("spec.resources[{i}]");
        c.resource_rule(&field, &rule.api_version, &rule.resource);
        c.label_selector(&format!("{field}.labelSelector"), &rule.label_selector);
        if let Some(sel) = &rule.annotation_selector
            && let Err(e) = sel.selector()
        {
            c.add(
                format!("{field}.annotationSelector"),
                format!(
                    "{e}; write e.g. annotationSelector: {{matchAnnotations: {{example.com/enabled: \"true\"}}}}"
                ),
            );
        }
    }
    c.child_rules(
        "spec.attachments",
        &spec.attachments,
        Some("DecoratorController"),
    );
    c.resync("spec.resyncPeriodSeconds", spec.resync_period_seconds);
    c.required_hook(
        "spec.hooks.sync",
        &spec.hooks.sync,
        "it computes the labels, annotations, status and attachments of each target",
    );
    c.hook("spec.hooks.finalize", &spec.hooks.finalize);
    c.hook("spec.hooks.customize", &spec.hooks.customize);
    c.endpoint_configs(&spec.endpoint_configs);
    c.problems
}

/// Check a MapController spec.
pub fn map(spec: &MapControllerSpec) -> Vec<Problem> {
    let mut c = Checker::default();
    c.parent("spec.parentResource", &spec.parent_resource);
    if spec.input_resources.is_empty() {
        c.add(
            "spec.inputResources",
            "needs at least one input resource, e.g. inputResources: [{apiVersion: v1, resource: persistentvolumeclaims}]",
        );
    }
    let mut seen = BTreeMap::new();
    for (i, rule) in spec.input_resources.iter().enumerate() {
        let field = format!("spec.inputResources[{i}]");
        c.resource_rule(&field, &rule.api_version, &rule.resource);
        c.unique(
            &mut seen,
            "spec.inputResources",
            i,
            &rule.api_version,
            &rule.resource,
        );
    }
    c.child_rules(
        "spec.outputResources",
        &spec.output_resources,
        Some("MapController"),
    );
    c.resync("spec.resyncPeriodSeconds", spec.resync_period_seconds);
    c.required_hook(
        "spec.hooks.map",
        &spec.hooks.map,
        "it computes the outputs of each input",
    );
    c.hook("spec.hooks.tombstone", &spec.hooks.tombstone);
    c.endpoint_configs(&spec.endpoint_configs);
    if spec.hooks.finalize.is_some() {
        c.add(
            "spec.hooks.finalize",
            "MapController has no finalize hook: deleting the parent deletes its outputs through garbage collection (kubectl delete --cascade=orphan keeps them); remove it",
        );
    }
    if spec.hooks.customize.is_some() {
        c.add(
            "spec.hooks.customize",
            "MapController has no customize hook: the map hook sees the parent and one input; list further types as inputResources, or use a CompositeController; remove it",
        );
    }
    c.problems
}

/// Accumulates problems.
#[derive(Default)]
struct Checker {
    problems: Vec<Problem>,
}

impl Checker {
    fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            field: field.into(),
            message: message.into(),
        });
    }

    fn resource_rule(&mut self, field: &str, api_version: &str, resource: &str) {
        if let Some(msg) = api_version_problem(api_version) {
            self.add(format!("{field}.apiVersion"), msg);
        }
        if let Some(msg) = resource_problem(resource) {
            self.add(format!("{field}.resource"), msg);
        }
    }

    fn parent(&mut self, field: &str, rule: &ParentResourceRule) {
        self.resource_rule(field, &rule.api_version, &rule.resource);
        self.label_selector(&format!("{field}.labelSelector"), &rule.label_selector);
        if let Some(history) = &rule.revision_history {
            self.revision_history(&format!("{field}.revisionHistory"), history);
        }
    }

    fn label_selector(&mut self, field: &str, selector: &Option<Value>) {
        if let Some(sel) = selector
            && let Err(e) = LabelSelector::from_label_selector(sel)
        {
            self.add(
                field,
                format!("{e}; write e.g. labelSelector: {{matchLabels: {{app: web}}}}"),
            );
        }
    }

    fn revision_history(&mut self, field: &str, history: &RevisionHistory) {
        for (i, path) in history.field_paths.iter().enumerate() {
            let bad_segment = |s: &str| {
                s.is_empty() || s.chars().any(|c| c.is_whitespace() || c == '[' || c == ']')
            };
            if path.is_empty() {
                self.add(
                    format!("{field}.fieldPaths[{i}]"),
                    "must not be empty; write a dotted field path like spec.template",
                );
            } else if path.split('.').any(bad_segment) {
                self.add(
                    format!("{field}.fieldPaths[{i}]"),
                    format!(
                        "{path:?} is not a dotted field path; write e.g. spec.template (no empty segments, spaces or list indexes)"
                    ),
                );
            }
        }
    }

    /// Child, attachment or output rules: each valid, each type once.
    /// `no_rolling`: the controller kind that does not do rolling updates (None: rolling allowed).
    fn child_rules(&mut self, list: &str, rules: &[ChildResourceRule], no_rolling: Option<&str>) {
        let mut seen = BTreeMap::new();
        for (i, rule) in rules.iter().enumerate() {
            let field = format!("{list}[{i}]");
            self.resource_rule(&field, &rule.api_version, &rule.resource);
            self.unique(&mut seen, list, i, &rule.api_version, &rule.resource);
            let Some(strategy) = &rule.update_strategy else {
                continue;
            };
            if let Some(kind) = no_rolling
                && strategy.method.is_rolling()
            {
                self.add(
                    format!("{field}.updateStrategy.method"),
                    format!(
                        "{:?} is not supported here: {kind} does not do rolling updates; use InPlace or Recreate",
                        strategy.method
                    ),
                );
            }
            let Some(checks) = &strategy.status_checks else {
                continue;
            };
            if let Some(kind) = no_rolling {
                self.add(
                    format!("{field}.updateStrategy.statusChecks"),
                    format!("is only used by rolling updates, which {kind} does not do; remove it"),
                );
            }
            for (k, check) in checks.conditions.iter().enumerate() {
                if check.type_.is_empty() {
                    self.add(
                        format!("{field}.updateStrategy.statusChecks.conditions[{k}].type"),
                        "must not be empty; name the condition type to check, e.g. type: Ready",
                    );
                }
            }
        }
    }

    /// Report `list[i]` when an earlier entry has the same type.
    fn unique(
        &mut self,
        seen: &mut BTreeMap<(String, String), usize>,
        list: &str,
        i: usize,
        api_version: &str,
        resource: &str,
    ) {
        let key = (api_version.to_string(), resource.to_string());
        if let Some(first) = seen.get(&key) {
            self.add(
                format!("{list}[{i}]"),
                format!(
                    "duplicates {list}[{first}] ({api_version} {resource}); list each resource type once"
                ),
            );
        } else {
            seen.insert(key, i);
        }
    }

    fn resync(&mut self, field: &str, seconds: Option<i32>) {
        if seconds.is_some_and(|s| s < 0) {
            self.add(
                field,
                "must not be negative; omit it (or use 0) for no periodic resync",
            );
        }
    }

    fn required_hook(&mut self, field: &str, hook: &Option<Hook>, why: &str) {
        if hook.is_none() {
            self.add(
                field,
                format!(
                    "is required ({why}); e.g. {{webhook: {{url: http://127.0.0.1:8080/sync}}}} or {{exec: {{command: [python3, hook.py]}}}}"
                ),
            );
        }
        self.hook(field, hook);
    }

    fn hook(&mut self, field: &str, hook: &Option<Hook>) {
        let Some(hook) = hook else { return };
        match (&hook.webhook, &hook.exec) {
            (Some(_), Some(_)) => self.add(
                field,
                "has both webhook and exec; a hook is reached one way, keep one of them",
            ),
            (None, None) => self.add(
                field,
                "needs webhook (url, or service + path) or exec (a local program), e.g. {webhook: {url: http://127.0.0.1:8080/sync}}",
            ),
            _ => {}
        }
        if let Some(w) = &hook.webhook {
            self.webhook(&format!("{field}.webhook"), w);
        }
        if let Some(x) = &hook.exec {
            self.exec(&format!("{field}.exec"), x);
        }
    }

    fn webhook(&mut self, field: &str, w: &Webhook) {
        match (&w.url, &w.service) {
            (Some(url), None) => {
                if let Some(msg) = url_problem(url) {
                    self.add(format!("{field}.url"), msg);
                }
                if w.path.is_some() {
                    self.add(
                        format!("{field}.path"),
                        "is only used with service; with url, put the path in the url (e.g. http://127.0.0.1:8080/sync) and remove path",
                    );
                }
            }
            (None, Some(svc)) => {
                let svc_field = format!("{field}.service");
                let name_errs = is_dns1035_label(&svc.name);
                if !name_errs.is_empty() {
                    self.add(
                        format!("{svc_field}.name"),
                        format!(
                            "{:?} is not a Service name: {}",
                            svc.name,
                            name_errs.join("; ")
                        ),
                    );
                }
                let ns_errs = is_dns1123_label(&svc.namespace);
                if !ns_errs.is_empty() {
                    self.add(
                        format!("{svc_field}.namespace"),
                        format!(
                            "{:?} is not a namespace name: {}",
                            svc.namespace,
                            ns_errs.join("; ")
                        ),
                    );
                }
                if let Some(port) = svc.port
                    && !(1..=65535).contains(&port)
                {
                    self.add(
                        format!("{svc_field}.port"),
                        format!("{port} is not a port; use 1-65535 (default 80)"),
                    );
                }
                if let Some(p) = &svc.protocol
                    && p != "http"
                    && p != "https"
                {
                    self.add(
                        format!("{svc_field}.protocol"),
                        format!("{p:?} is not supported; use http (default) or https"),
                    );
                }
                if let Some(path) = &w.path
                    && !path.starts_with('/')
                {
                    self.add(
                        format!("{field}.path"),
                        format!("{path:?} must start with '/', e.g. /{path}"),
                    );
                }
            }
            (Some(_), Some(_)) => self.add(
                field,
                "has both url and service; keep url for a hook you run yourself, or service (+ path) for an in-cluster Service",
            ),
            (None, None) => self.add(
                field,
                "needs url (e.g. http://127.0.0.1:8080/sync), or service + path",
            ),
        }
        self.timeout(&format!("{field}.timeout"), &w.timeout);
        if let Some(conn) = w.connection() {
            self.connection(field, &conn);
        }
        if let Some(mode) = &w.response_un_marshall_mode
            && mode != "loose"
            && mode != "strict"
        {
            self.add(
                format!("{field}.responseUnMarshallMode"),
                format!("{mode:?} is not a mode; use loose or strict"),
            );
        }
    }

    /// `spec.endpointConfigs`: a host each, valid connection settings.
    fn endpoint_configs(&mut self, configs: &[EndpointConfig]) {
        for (i, cfg) in configs.iter().enumerate() {
            let field = format!("spec.endpointConfigs[{i}]");
            if let Some(msg) = endpoint_host_problem(&cfg.host) {
                self.add(format!("{field}.host"), msg);
            }
            self.connection(&field, &cfg.connection());
        }
    }

    /// `caBundle`, `clientTLS`, `authorization`, `basicAuth` of a webhook or an
    /// `endpointConfigs` entry (Metacontroller's rules; a reference is read when `dev` starts).
    fn connection(&mut self, field: &str, conn: &Connection<'_>) {
        if conn.authorization.is_some() && conn.basic_auth.is_some() {
            self.add(
                field,
                "has both authorization and basicAuth, which are mutually exclusive; keep \
                 authorization for a token (Authorization: Bearer ...) or basicAuth for a \
                 username and password",
            );
        }
        if let Some(ca) = conn.ca_bundle {
            self.ca_bundle(&format!("{field}.caBundle"), ca);
        }
        if let Some(tls) = conn.client_tls {
            let f = format!("{field}.clientTLS.secretRef");
            self.object_ref(&f, &tls.secret_ref.name, &tls.secret_ref.namespace);
        }
        if let Some(auth) = conn.authorization {
            let f = format!("{field}.authorization");
            let r = &auth.secret_ref;
            self.object_ref(&format!("{f}.secretRef"), &r.name, &r.namespace);
            if r.key.is_empty() {
                self.add(
                    format!("{f}.secretRef.key"),
                    "is required (it has no default): the key of the Secret whose value is the \
                     token, e.g. key: token",
                );
            }
            let scheme = auth.scheme();
            if scheme.eq_ignore_ascii_case("basic") {
                self.add(
                    format!("{f}.type"),
                    "Basic is not supported here; use basicAuth (username and password from a \
                     Secret) instead of authorization",
                );
            } else if !scheme.bytes().all(is_token_byte) {
                self.add(
                    format!("{f}.type"),
                    format!(
                        "{scheme:?} is not an HTTP authorization scheme (one word such as Bearer \
                         or Token); it defaults to Bearer"
                    ),
                );
            }
        }
        if let Some(basic) = conn.basic_auth {
            let f = format!("{field}.basicAuth.secretRef");
            self.object_ref(&f, &basic.secret_ref.name, &basic.secret_ref.namespace);
        }
    }

    fn ca_bundle(&mut self, field: &str, ca: &CaBundle) {
        let sources = [
            ca.inline.is_some(),
            ca.secret_ref.is_some(),
            ca.config_map_ref.is_some(),
        ];
        match sources.iter().filter(|s| **s).count() {
            0 => self.add(
                field,
                "needs one of inline (the PEM text), secretRef or configMapRef ({name, \
                 namespace, key: ca.crt}); or remove caBundle to use the system's CA roots",
            ),
            1 => {}
            _ => self.add(
                field,
                "has more than one of inline, secretRef and configMapRef; keep exactly one",
            ),
        }
        if let Some(pem) = &ca.inline
            && let Err(e) = crate::spec::pem::parse_ca_pem(pem.as_bytes())
        {
            self.add(format!("{field}.inline"), e);
        }
        for (name, r) in [
            ("secretRef", &ca.secret_ref),
            ("configMapRef", &ca.config_map_ref),
        ] {
            if let Some(r) = r {
                self.object_ref(&format!("{field}.{name}"), &r.name, &r.namespace);
            }
        }
    }

    /// A Secret or ConfigMap reference: a valid name and namespace.
    fn object_ref(&mut self, field: &str, name: &str, namespace: &str) {
        let name_errs = is_dns1123_subdomain(name);
        if !name_errs.is_empty() {
            self.add(
                format!("{field}.name"),
                format!("{name:?} is not an object name: {}", name_errs.join("; ")),
            );
        }
        let ns_errs = is_dns1123_label(namespace);
        if !ns_errs.is_empty() {
            self.add(
                format!("{field}.namespace"),
                format!(
                    "{namespace:?} is not a namespace name: {} (the namespace is required: \
                     controller definitions have none)",
                    ns_errs.join("; ")
                ),
            );
        }
    }

    fn exec(&mut self, field: &str, x: &ExecHook) {
        match x.command.first() {
            None => self.add(
                format!("{field}.command"),
                "must name the program to run, e.g. command: [python3, hooks/sync.py]",
            ),
            Some(program) if program.is_empty() => self.add(
                format!("{field}.command[0]"),
                "must not be empty: it is the program to run, e.g. python3",
            ),
            Some(_) => {}
        }
        self.timeout(&format!("{field}.timeout"), &x.timeout);
        if x.working_dir.as_deref() == Some("") {
            self.add(
                format!("{field}.workingDir"),
                "must not be empty; omit it to run in the directory of the definition file",
            );
        }
        for key in x.env.iter().flat_map(BTreeMap::keys) {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                self.add(
                    format!("{field}.env"),
                    format!(
                        "{key:?} is not an environment variable name (it must be non-empty, without '=')"
                    ),
                );
            }
        }
    }

    fn timeout(&mut self, field: &str, timeout: &Option<String>) {
        let Some(t) = timeout else { return };
        match parse_go_duration(t) {
            Ok(d) if d.is_zero() => self.add(field, "must be greater than 0, e.g. 10s"),
            Ok(_) => {}
            Err(e) => self.add(field, e.to_string()),
        }
    }
}

/// A byte of an HTTP token (RFC 9110 `tchar`), as an authorization scheme must be.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// What is wrong with an `endpointConfigs[].host` (`host` or `host:port`), if anything.
fn endpoint_host_problem(host: &str) -> Option<String> {
    const SHAPE: &str = "write the webhook URL's host, optionally with its port, e.g. \
                         my-hook.my-ns or my-hook.my-ns:8443";
    if host.trim().is_empty() {
        return Some(format!("must not be empty; {SHAPE}"));
    }
    if host.contains("://") || host.contains('/') || host.contains('@') || host.contains('?') {
        return Some(format!(
            "{host:?} is not a host; {SHAPE} (no scheme or path)"
        ));
    }
    match reqwest::Url::parse(&format!("http://{host}/")) {
        Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => None,
        _ => Some(format!("{host:?} is not a host; {SHAPE}")),
    }
}

fn api_version_problem(av: &str) -> Option<String> {
    const SHAPE: &str =
        "write <group>/<version> (e.g. apps/v1), or only the version for core resources (v1)";
    if av.is_empty() {
        return Some(format!("must not be empty; {SHAPE}"));
    }
    let (group, version) = match av.split_once('/') {
        Some((g, v)) => (Some(g), v),
        None => (None, av),
    };
    match group {
        Some("core") | Some("") => {
            return Some(format!(
                "{av:?}: core resources are written without a group; write {version}"
            ));
        }
        Some(_) if version.contains('/') => {
            return Some(format!("{av:?} has more than one '/'; {SHAPE}"));
        }
        Some(g) if !is_subdomain_token(g) => {
            return Some(format!(
                "{av:?}: {g:?} is not an API group (a lowercase DNS name such as apps or example.com); {SHAPE}"
            ));
        }
        None if version.contains('.') => {
            return Some(format!(
                "{av:?} looks like an API group without a version; write e.g. {av}/v1"
            ));
        }
        _ => {}
    }
    if version.is_empty() || !is_dns1035_label(version).is_empty() {
        return Some(format!(
            "{av:?}: {version:?} is not an API version (such as v1 or v1beta1); {SHAPE}"
        ));
    }
    None
}

fn resource_problem(resource: &str) -> Option<String> {
    const EXAMPLE: &str = "the lowercase plural resource name, e.g. pods or deployments";
    if resource.is_empty() {
        Some(format!("must not be empty; write {EXAMPLE}"))
    } else if resource.contains('/') {
        Some(format!(
            "{resource:?} must be {EXAMPLE}, without '/': the group belongs in apiVersion and subresources cannot be managed"
        ))
    } else if resource.contains('.') {
        Some(format!(
            "{resource:?} must be {EXAMPLE}, without '.': the group belongs in apiVersion (deployments.apps is apiVersion: apps/v1, resource: deployments)"
        ))
    } else if resource.chars().any(|c| c.is_ascii_uppercase()) {
        Some(format!(
            "{resource:?} must be {EXAMPLE}, not the kind (Pod is resource: pods)"
        ))
    } else if !is_label_token(resource) {
        Some(format!(
            "{resource:?} must be {EXAMPLE} (lowercase letters, digits and '-')"
        ))
    } else {
        None
    }
}

fn url_problem(url: &str) -> Option<String> {
    const EXAMPLE: &str = "e.g. http://127.0.0.1:8080/sync";
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(format!("{url:?} has no scheme; write http://{url}"));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Some(format!(
            "{url:?} uses {scheme:?}; a webhook URL is http:// or https://, {EXAMPLE}"
        ));
    }
    if rest.is_empty() || rest.starts_with(['/', '?', '#']) {
        return Some(format!("{url:?} has no host; {EXAMPLE}"));
    }
    match reqwest::Url::parse(url) {
        Err(e) => Some(format!("{url:?} is not a URL ({e}); {EXAMPLE}")),
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::types::{HookVersion, Source, UpdateMethod};
    use super::super::{ControllerDef, SpecError, parse_controller};
    use super::*;

    fn composite() -> Value {
        json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "CompositeController",
            "metadata": {"name": "hello-controller"},
            "spec": {
                "parentResource": {"apiVersion": "example.com/v1", "resource": "hellos"},
                "childResources": [{"apiVersion": "v1", "resource": "pods"}],
                "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:8080/sync"}}}
            }
        })
    }

    fn decorator() -> Value {
        json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "DecoratorController",
            "metadata": {"name": "service-per-pod"},
            "spec": {
                "resources": [{
                    "apiVersion": "apps/v1",
                    "resource": "statefulsets",
                    "annotationSelector": {"matchExpressions": [{"key": "service-per-pod-label", "operator": "Exists"}]}
                }],
                "attachments": [{"apiVersion": "v1", "resource": "services"}],
                "hooks": {"sync": {"webhook": {"url": "http://127.0.0.1:8080/sync-service-per-pod"}}}
            }
        })
    }

    fn map() -> Value {
        json!({
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "MapController",
            "metadata": {"name": "snapshotschedule-controller"},
            "spec": {
                "parentResource": {"apiVersion": "ctl.example.com/v1", "resource": "snapshotschedules"},
                "inputResources": [{"apiVersion": "v1", "resource": "persistentvolumeclaims"}],
                "outputResources": [{"apiVersion": "snapshot.storage.k8s.io/v1", "resource": "volumesnapshots", "updateStrategy": {"method": "InPlace"}}],
                "resyncPeriodSeconds": 5,
                "hooks": {
                    "map": {"webhook": {"url": "http://127.0.0.1:8080/map"}},
                    "tombstone": {"webhook": {"url": "http://127.0.0.1:8080/tombstone"}}
                }
            }
        })
    }

    /// `doc` with the value at JSON pointer `ptr` replaced (or added); `null` removes it.
    fn with(mut doc: Value, ptr: &str, v: Value) -> Value {
        let (parent, key) = ptr.rsplit_once('/').unwrap();
        match doc.pointer_mut(parent).unwrap() {
            Value::Object(m) if v.is_null() => {
                m.remove(key);
            }
            Value::Object(m) => {
                m.insert(key.to_string(), v);
            }
            Value::Array(a) => {
                let i = key.parse::<usize>().unwrap();
                if i == a.len() {
                    a.push(v);
                } else {
                    a[i] = v;
                }
            }
            other => panic!("{ptr}: parent is {other}"),
        }
        doc
    }

    fn src() -> Source {
        Source::file("ctl.yaml", 1, Some(1))
    }

    fn problems(doc: &Value) -> Vec<Problem> {
        match parse_controller(doc, src()) {
            Err(SpecError::Invalid { problems, .. }) => problems,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    /// The single problem of `doc`, which must be at `field` and mention `needle`.
    #[track_caller]
    fn only(doc: &Value, field: &str, needle: &str) {
        let p = problems(doc);
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_eq!(p[0].field, field, "{p:#?}");
        assert!(
            p[0].message.contains(needle),
            "{:?} lacks {needle:?}",
            p[0].message
        );
    }

    #[test]
    fn minimal_definitions_of_each_kind_are_valid() {
        for doc in [composite(), decorator(), map()] {
            let def = parse_controller(&doc, src()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(def.raw(), &doc);
            assert_eq!(def.source(), &src());
        }
        let Ok(ControllerDef::Map(m)) = parse_controller(&map(), src()) else {
            panic!("not a map controller");
        };
        assert_eq!(m.name, "snapshotschedule-controller");
        assert_eq!(m.spec.input_resources[0].resource, "persistentvolumeclaims");
        assert_eq!(m.spec.output_resources[0].method(), UpdateMethod::InPlace);
        assert!(m.spec.hooks.tombstone.is_some());
        assert_eq!(m.spec.resync_period_seconds, Some(5));
        let Ok(ControllerDef::Decorator(d)) = parse_controller(&decorator(), src()) else {
            panic!("not a decorator");
        };
        let sel = d.spec.resources[0].annotation_selector.as_ref().unwrap();
        assert!(
            sel.selector()
                .unwrap()
                .matches_json(Some(&json!({"service-per-pod-label": "x"})))
        );
        assert_eq!(d.spec.attachments[0].resource, "services");
    }

    #[test]
    fn envelope_rules() {
        only(
            &with(
                composite(),
                "/apiVersion",
                json!("metacontroller.k8s.io/v2"),
            ),
            "apiVersion",
            "write apiVersion: metacontroller.k8s.io/v1alpha1",
        );
        only(
            &with(composite(), "/metadata/name", Value::Null),
            "metadata.name",
            "is required",
        );
        only(
            &with(composite(), "/metadata", Value::Null),
            "metadata.name",
            "is required",
        );
        only(
            &with(composite(), "/metadata/name", json!("Hello_World")),
            "metadata.name",
            "RFC 1123 subdomain",
        );
        only(
            &with(composite(), "/metadata/name", json!(5)),
            "metadata.name",
            "must be a string",
        );
        only(
            &with(composite(), "/specs", json!({})),
            "specs",
            "unknown field",
        );
        only(
            &with(composite(), "/spec", Value::Null),
            "spec",
            "is required",
        );
        // Unknown metadata fields, status and server metadata are fine.
        let doc = with(composite(), "/metadata/uid", json!("1234"));
        let doc = with(
            doc,
            "/metadata/managedFields",
            json!([{"manager": "kubectl"}]),
        );
        let doc = with(doc, "/metadata/labels", json!({"app": "x"}));
        let doc = with(doc, "/status", json!({"anything": true}));
        assert!(
            parse_controller(
                &doc,
                Source::cluster("compositecontroller", "hello-controller")
            )
            .is_ok()
        );
    }

    #[test]
    fn not_a_controller_kind_is_a_document_error() {
        let err =
            parse_controller(&with(composite(), "/kind", json!("Deployment")), src()).unwrap_err();
        assert!(matches!(err, SpecError::Document { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("\"Deployment\" is not a controller kind"),
            "{err}"
        );
        let err = parse_controller(&json!([1]), src()).unwrap_err();
        assert!(
            err.to_string().contains("must be an object, found a list"),
            "{err}"
        );
    }

    #[test]
    fn type_errors_and_unknown_fields_carry_their_path() {
        only(
            &with(
                composite(),
                "/spec/childResources/0/updateStratgy",
                json!({"method": "InPlace"}),
            ),
            "spec.childResources[0].updateStratgy",
            "unknown field `updateStratgy`, expected one of `apiVersion`, `resource`, `updateStrategy`",
        );
        only(
            &with(
                composite(),
                "/spec/childResources/0/updateStrategy",
                json!({"method": "Rolling"}),
            ),
            "spec.childResources[0].updateStrategy.method",
            "unknown variant `Rolling`, expected one of `OnDelete`",
        );
        only(
            &with(composite(), "/spec/hooks/sync/webhook/timeout", json!(10)),
            "spec.hooks.sync.webhook.timeout",
            "expected a string; write a Go duration such as 10s",
        );
        only(
            &with(composite(), "/spec/hooks/sync/version", json!("v3")),
            "spec.hooks.sync.version",
            "unknown variant `v3`, expected `v1` or `v2`",
        );
        only(
            &with(composite(), "/spec/parentResource/resource", Value::Null),
            "spec.parentResource",
            "missing field `resource`",
        );
        only(
            &with(composite(), "/spec/hooks/sync/webHook", json!({})),
            "spec.hooks.sync.webHook",
            "unknown field `webHook`",
        );
        only(
            &with(composite(), "/spec/resyncPeriodSeconds", json!("30")),
            "spec.resyncPeriodSeconds",
            "invalid type: string \"30\", expected i32",
        );
    }

    #[test]
    fn every_problem_of_a_document_is_reported() {
        let doc = with(
            composite(),
            "/apiVersion",
            json!("metacontroller.k8s.io/v1"),
        );
        let doc = with(doc, "/metadata/name", json!("Bad Name"));
        let doc = with(doc, "/spec/hooks", json!({}));
        let doc = with(doc, "/spec/resyncPeriodSeconds", json!(-5));
        let doc = with(doc, "/spec/childResources/0/resource", json!("Pod"));
        let fields: Vec<String> = problems(&doc).into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "apiVersion",
                "metadata.name",
                "spec.childResources[0].resource",
                "spec.resyncPeriodSeconds",
                "spec.hooks.sync"
            ]
        );
        let err = parse_controller(&doc, src()).unwrap_err().to_string();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            lines[0],
            "ctl.yaml, document 1 (line 1): CompositeController \"Bad Name\" is invalid:"
        );
        assert_eq!(lines.len(), 6, "{err}");
        assert!(
            lines[3].starts_with(
                "  - spec.childResources[0].resource: \"Pod\" must be the lowercase plural"
            ),
            "{err}"
        );
        assert!(
            lines[5].starts_with("  - spec.hooks.sync: is required"),
            "{err}"
        );
        let nameless = with(composite(), "/metadata", json!({}));
        let err = parse_controller(&nameless, src()).unwrap_err().to_string();
        assert!(
            err.contains("CompositeController (without metadata.name) is invalid"),
            "{err}"
        );
    }

    #[test]
    fn resource_rule_shapes() {
        let av = |v: &str| with(composite(), "/spec/childResources/0/apiVersion", json!(v));
        let field = "spec.childResources[0].apiVersion";
        only(&av(""), field, "must not be empty");
        only(
            &av("core/v1"),
            field,
            "core resources are written without a group; write v1",
        );
        only(&av("/v1"), field, "written without a group");
        only(&av("apps/v1/x"), field, "more than one '/'");
        only(&av("Apps/v1"), field, "\"Apps\" is not an API group");
        only(&av("apps/V1"), field, "\"V1\" is not an API version");
        only(&av("apps/"), field, "\"\" is not an API version");
        only(
            &av("example.com"),
            field,
            "API group without a version; write e.g. example.com/v1",
        );
        for ok in ["v1", "apps/v1", "batch/v1beta1", "ctl.enisoc.com/v1"] {
            assert!(parse_controller(&av(ok), src()).is_ok(), "{ok}");
        }
        let res = |v: &str| with(composite(), "/spec/childResources/0/resource", json!(v));
        let field = "spec.childResources[0].resource";
        only(&res(""), field, "must not be empty");
        only(&res("Pods"), field, "not the kind");
        only(&res("deployments.apps"), field, "without '.'");
        only(&res("pods/status"), field, "without '/'");
        only(&res("pods_x"), field, "lowercase letters, digits and '-'");
        only(
            &with(
                composite(),
                "/spec/parentResource/apiVersion",
                json!("example.com/"),
            ),
            "spec.parentResource.apiVersion",
            "not an API version",
        );
    }

    #[test]
    fn children_are_unique_and_not_the_parent() {
        let doc = with(
            composite(),
            "/spec/childResources",
            json!([
                {"apiVersion": "v1", "resource": "pods"},
                {"apiVersion": "v1", "resource": "configmaps"},
                {"apiVersion": "v1", "resource": "pods", "updateStrategy": {"method": "InPlace"}}
            ]),
        );
        only(
            &doc,
            "spec.childResources[2]",
            "duplicates spec.childResources[0] (v1 pods)",
        );
        let doc = with(
            composite(),
            "/spec/childResources/0",
            json!({"apiVersion": "example.com/v1", "resource": "hellos"}),
        );
        only(
            &doc,
            "spec.childResources[0]",
            "is the parent resource (example.com/v1 hellos)",
        );
        // The same resource under another version is a different rule.
        let doc = with(
            composite(),
            "/spec/childResources/0",
            json!({"apiVersion": "example.com/v2", "resource": "hellos"}),
        );
        assert!(parse_controller(&doc, src()).is_ok());
    }

    #[test]
    fn hook_shapes() {
        let sync = |h: Value| with(composite(), "/spec/hooks/sync", h);
        only(
            &with(composite(), "/spec/hooks/sync", Value::Null),
            "spec.hooks.sync",
            "is required",
        );
        only(&sync(json!({})), "spec.hooks.sync", "needs webhook");
        only(
            &sync(json!({"version": "v2"})),
            "spec.hooks.sync",
            "needs webhook",
        );
        only(
            &sync(json!({"webhook": {"url": "http://h/sync"}, "exec": {"command": ["x"]}})),
            "spec.hooks.sync",
            "has both webhook and exec",
        );
        // Both are still checked.
        let p = problems(&sync(
            json!({"webhook": {"url": "nope"}, "exec": {"command": []}}),
        ));
        let fields: Vec<&str> = p.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.hooks.sync",
                "spec.hooks.sync.webhook.url",
                "spec.hooks.sync.exec.command"
            ]
        );
        // Optional hooks are checked too.
        only(
            &with(composite(), "/spec/hooks/finalize", json!({"webhook": {}})),
            "spec.hooks.finalize.webhook",
            "needs url",
        );
        only(
            &with(
                composite(),
                "/spec/hooks/customize",
                json!({"exec": {"command": [""]}}),
            ),
            "spec.hooks.customize.exec.command[0]",
            "must not be empty",
        );
    }

    #[test]
    fn connection_settings_rules() {
        let wh = |extra: Value| {
            let mut w = json!({"url": "https://hooks.ns/sync"});
            if let (Some(m), Some(e)) = (w.as_object_mut(), extra.as_object()) {
                m.extend(e.clone());
            }
            with(composite(), "/spec/hooks/sync/webhook", w)
        };
        let f = "spec.hooks.sync.webhook";
        let token = json!({"secretRef": {"name": "tok", "namespace": "ns", "key": "token"}});
        let basic = json!({"secretRef": {"name": "basic", "namespace": "ns"}});
        let ca_cm = json!({"configMapRef": {"name": "ca", "namespace": "ns"}});
        let ok = wh(json!({"authorization": token, "caBundle": ca_cm,
            "clientTLS": {"secretRef": {"name": "c", "namespace": "ns"}, "certKey": "a", "privateKeyKey": "b"}}));
        assert!(parse_controller(&ok, src()).is_ok());
        only(
            &wh(json!({"authorization": token, "basicAuth": basic})),
            f,
            "mutually exclusive",
        );
        only(
            &wh(json!({"authorization": {"type": "basic", "secretRef": token["secretRef"]}})),
            "spec.hooks.sync.webhook.authorization.type",
            "use basicAuth",
        );
        only(
            &wh(
                json!({"authorization": {"type": "Bearer token", "secretRef": token["secretRef"]}}),
            ),
            "spec.hooks.sync.webhook.authorization.type",
            "not an HTTP authorization scheme",
        );
        only(
            &wh(
                json!({"authorization": {"secretRef": {"name": "tok", "namespace": "ns", "key": ""}}}),
            ),
            "spec.hooks.sync.webhook.authorization.secretRef.key",
            "is required (it has no default)",
        );
        only(
            &wh(json!({"caBundle": {}})),
            "spec.hooks.sync.webhook.caBundle",
            "needs one of inline",
        );
        only(
            &wh(
                json!({"caBundle": {"secretRef": ca_cm["configMapRef"], "configMapRef": ca_cm["configMapRef"]}}),
            ),
            "spec.hooks.sync.webhook.caBundle",
            "keep exactly one",
        );
        let p = problems(&wh(json!({"caBundle": {"inline": "not pem"}})));
        assert!(
            p.iter()
                .any(|p| p.field == "spec.hooks.sync.webhook.caBundle.inline"
                    && p.message.contains("no PEM certificate")),
            "{p:#?}"
        );
        only(
            &wh(json!({"basicAuth": {"secretRef": {"name": "basic", "namespace": "Bad_NS"}}})),
            "spec.hooks.sync.webhook.basicAuth.secretRef.namespace",
            "the namespace is required",
        );
        // A typo is an unknown field, with its path.
        let p = problems(&wh(
            json!({"clientTls": {"secretRef": {"name": "c", "namespace": "ns"}}}),
        ));
        assert_eq!(p[0].field, "spec.hooks.sync.webhook.clientTls", "{p:#?}");
        assert!(p[0].message.contains("`clientTLS`"), "{p:#?}");

        let entries = |e: Value| with(composite(), "/spec/endpointConfigs", e);
        let ok = entries(json!([{"host": "hooks.ns:8443", "authorization": token}]));
        assert!(parse_controller(&ok, src()).is_ok());
        only(
            &entries(json!([{"host": "https://hooks.ns/", "authorization": token}])),
            "spec.endpointConfigs[0].host",
            "no scheme or path",
        );
        only(
            &entries(json!([{"host": "ok", "authorization": token, "basicAuth": basic}])),
            "spec.endpointConfigs[0]",
            "mutually exclusive",
        );
        let p = problems(&entries(json!([{"authorization": token}])));
        assert!(p[0].message.contains("missing field `host`"), "{p:#?}");
        // DecoratorController and MapController take endpointConfigs too.
        for doc in [decorator(), map()] {
            let doc = with(
                doc,
                "/spec/endpointConfigs",
                json!([{"host": "h", "basicAuth": basic}]),
            );
            assert!(parse_controller(&doc, src()).is_ok());
        }
    }

    #[test]
    fn webhook_rules() {
        let wh = |w: Value| with(composite(), "/spec/hooks/sync/webhook", w);
        let f = "spec.hooks.sync.webhook";
        only(&wh(json!({})), f, "needs url");
        only(
            &wh(json!({"url": "http://h/sync", "service": {"name": "s", "namespace": "n"}})),
            f,
            "has both url and service",
        );
        only(
            &wh(json!({"url": "http://h:8080", "path": "/sync"})),
            "spec.hooks.sync.webhook.path",
            "put the path in the url",
        );
        let url = "spec.hooks.sync.webhook.url";
        only(
            &wh(json!({"url": "127.0.0.1:8080/sync"})),
            url,
            "has no scheme; write http://127.0.0.1:8080/sync",
        );
        only(&wh(json!({"url": "sync"})), url, "has no scheme");
        only(
            &wh(json!({"url": "http://exa mple.com/"})),
            url,
            "is not a URL (invalid international domain name)",
        );
        only(&wh(json!({"url": "ftp://h/sync"})), url, "uses \"ftp\"");
        only(&wh(json!({"url": "http:///sync"})), url, "has no host");
        only(&wh(json!({"url": "file:///tmp/x"})), url, "uses \"file\"");
        let svc = |s: Value, path: Value| {
            let w = with(json!({"service": s}), "/path", path);
            wh(w)
        };
        let ok_svc = json!({"name": "hello", "namespace": "metacontroller", "port": 8080, "protocol": "https"});
        assert!(parse_controller(&svc(ok_svc.clone(), json!("/sync")), src()).is_ok());
        assert!(parse_controller(&svc(ok_svc.clone(), Value::Null), src()).is_ok());
        only(
            &svc(ok_svc.clone(), json!("sync")),
            "spec.hooks.sync.webhook.path",
            "must start with '/', e.g. /sync",
        );
        only(
            &svc(with(ok_svc.clone(), "/port", json!(0)), json!("/s")),
            "spec.hooks.sync.webhook.service.port",
            "use 1-65535",
        );
        only(
            &svc(with(ok_svc.clone(), "/port", json!(70000)), json!("/s")),
            "spec.hooks.sync.webhook.service.port",
            "70000",
        );
        only(
            &svc(with(ok_svc.clone(), "/protocol", json!("tcp")), json!("/s")),
            "spec.hooks.sync.webhook.service.protocol",
            "use http (default) or https",
        );
        only(
            &svc(with(ok_svc.clone(), "/name", json!("Hello")), json!("/s")),
            "spec.hooks.sync.webhook.service.name",
            "is not a Service name",
        );
        only(
            &svc(
                with(ok_svc.clone(), "/namespace", json!("a.b")),
                json!("/s"),
            ),
            "spec.hooks.sync.webhook.service.namespace",
            "is not a namespace name",
        );
        only(
            &svc(with(ok_svc, "/namespace", Value::Null), json!("/s")),
            "spec.hooks.sync.webhook.service",
            "missing field `namespace`",
        );
        let timeout = "spec.hooks.sync.webhook.timeout";
        let t = |t: &str| wh(json!({"url": "http://h/sync", "timeout": t}));
        only(&t("10"), timeout, "missing unit");
        only(&t("-1s"), timeout, "must not be negative");
        only(&t("0s"), timeout, "must be greater than 0");
        only(
            &t("soon"),
            timeout,
            "expected a sequence of numbers with units",
        );
        assert!(parse_controller(&t("1m30s"), src()).is_ok());
        // Metacontroller's extra fields are accepted.
        let extra = wh(
            json!({"url": "https://h/sync", "etag": {"enabled": true}, "responseUnMarshallMode": "strict"}),
        );
        assert!(parse_controller(&extra, src()).is_ok());
        only(
            &wh(json!({"url": "https://h/sync", "responseUnMarshallMode": "lenient"})),
            "spec.hooks.sync.webhook.responseUnMarshallMode",
            "use loose or strict",
        );
    }

    #[test]
    fn exec_rules() {
        let ex = |x: Value| with(composite(), "/spec/hooks/sync", json!({"exec": x}));
        let ok = ex(
            json!({"command": ["python3", "hooks/sync.py"], "timeout": "5s", "workingDir": "hooks", "env": {"DEBUG": "1"}}),
        );
        let Ok(ControllerDef::Composite(c)) = parse_controller(&ok, src()) else {
            panic!("exec hook rejected");
        };
        let hook = c.spec.hooks.sync.unwrap();
        assert_eq!(hook.exec.unwrap().command, ["python3", "hooks/sync.py"]);
        only(
            &ex(json!({"command": []})),
            "spec.hooks.sync.exec.command",
            "must name the program",
        );
        only(
            &ex(json!({})),
            "spec.hooks.sync.exec",
            "missing field `command`",
        );
        only(
            &ex(json!({"command": ["x"], "timeout": "5"})),
            "spec.hooks.sync.exec.timeout",
            "missing unit",
        );
        only(
            &ex(json!({"command": ["x"], "workingDir": ""})),
            "spec.hooks.sync.exec.workingDir",
            "omit it",
        );
        only(
            &ex(json!({"command": ["x"], "env": {"A=B": "1"}})),
            "spec.hooks.sync.exec.env",
            "\"A=B\" is not an environment variable name",
        );
        only(
            &ex(json!({"command": ["x"], "cwd": "."})),
            "spec.hooks.sync.exec.cwd",
            "unknown field `cwd`",
        );
    }

    #[test]
    fn parent_rules() {
        let parent =
            |ptr: &str, v: Value| with(composite(), &format!("/spec/parentResource/{ptr}"), v);
        only(
            &parent(
                "labelSelector",
                json!({"matchExpressions": [{"key": "a", "operator": "Has"}]}),
            ),
            "spec.parentResource.labelSelector",
            "\"Has\" is not a valid label selector operator",
        );
        only(
            &parent("labelSelector", json!({"matchLabels": {"a": "b c"}})),
            "spec.parentResource.labelSelector",
            "matchLabels: {app: web}",
        );
        assert!(
            parse_controller(
                &parent("labelSelector", json!({"matchLabels": {"tier": "web"}})),
                src()
            )
            .is_ok()
        );
        assert!(parse_controller(&parent("labelSelector", Value::Null), src()).is_ok());
        let paths = |p: Value| parent("revisionHistory", json!({"fieldPaths": p}));
        assert!(
            parse_controller(&paths(json!(["spec.template", "metadata.labels"])), src()).is_ok()
        );
        assert!(parse_controller(&parent("revisionHistory", json!({})), src()).is_ok());
        only(
            &paths(json!([""])),
            "spec.parentResource.revisionHistory.fieldPaths[0]",
            "must not be empty",
        );
        only(
            &paths(json!(["spec", "spec..template"])),
            "spec.parentResource.revisionHistory.fieldPaths[1]",
            "not a dotted field path",
        );
        only(
            &paths(json!(["spec.containers[0]"])),
            "spec.parentResource.revisionHistory.fieldPaths[0]",
            "list indexes",
        );
        only(
            &parent("ignoreStatusChanges", json!("yes")),
            "spec.parentResource.ignoreStatusChanges",
            "expected a boolean",
        );
    }

    #[test]
    fn update_strategy_rules() {
        let strategy = |s: Value| with(composite(), "/spec/childResources/0/updateStrategy", s);
        let ok = strategy(
            json!({"method": "RollingInPlace", "statusChecks": {"conditions": [{"type": "Ready", "status": "True", "reason": "PodReady"}]}}),
        );
        let Ok(ControllerDef::Composite(c)) = parse_controller(&ok, src()) else {
            panic!("rejected");
        };
        let checks = &c.spec.child_resources[0]
            .update_strategy
            .as_ref()
            .unwrap()
            .status_checks;
        assert_eq!(
            checks.as_ref().unwrap().conditions[0].reason.as_deref(),
            Some("PodReady")
        );
        only(
            &strategy(
                json!({"method": "RollingInPlace", "statusChecks": {"conditions": [{"type": ""}]}}),
            ),
            "spec.childResources[0].updateStrategy.statusChecks.conditions[0].type",
            "e.g. type: Ready",
        );
        only(
            &strategy(json!({"statusChecks": {"conditions": [{"status": "True"}]}})),
            "spec.childResources[0].updateStrategy.statusChecks.conditions[0]",
            "missing field `type`",
        );
        only(
            &with(composite(), "/spec/resyncPeriodSeconds", json!(-1)),
            "spec.resyncPeriodSeconds",
            "must not be negative",
        );
        assert!(
            parse_controller(
                &with(composite(), "/spec/resyncPeriodSeconds", json!(0)),
                src()
            )
            .is_ok()
        );
    }

    #[test]
    fn decorator_rules() {
        only(
            &with(decorator(), "/spec/resources", json!([])),
            "spec.resources",
            "at least one target resource",
        );
        only(
            &with(decorator(), "/spec/hooks", json!({})),
            "spec.hooks.sync",
            "labels, annotations, status and attachments",
        );
        only(
            &with(
                decorator(),
                "/spec/attachments/0/updateStrategy",
                json!({"method": "RollingRecreate"}),
            ),
            "spec.attachments[0].updateStrategy.method",
            "DecoratorController does not do rolling updates",
        );
        only(
            &with(
                decorator(),
                "/spec/attachments/0/updateStrategy",
                json!({"method": "InPlace", "statusChecks": {"conditions": [{"type": "Ready"}]}}),
            ),
            "spec.attachments[0].updateStrategy.statusChecks",
            "remove it",
        );
        only(
            &with(
                decorator(),
                "/spec/attachments/1",
                json!({"apiVersion": "v1", "resource": "services"}),
            ),
            "spec.attachments[1]",
            "duplicates spec.attachments[0]",
        );
        only(
            &with(
                decorator(),
                "/spec/resources/0/annotationSelector",
                json!({"matchExpressions": [{"key": "a", "operator": "Maybe"}]}),
            ),
            "spec.resources[0].annotationSelector",
            "\"Maybe\" is not a valid label selector operator",
        );
        only(
            &with(
                decorator(),
                "/spec/resources/0/labelSelector",
                json!({"matchLabels": "app"}),
            ),
            "spec.resources[0].labelSelector",
            "matchLabels must be an object",
        );
        only(
            &with(
                decorator(),
                "/spec/resources/0/resource",
                json!("StatefulSet"),
            ),
            "spec.resources[0].resource",
            "not the kind",
        );
        // Several rules for one resource (different selectors) are fine.
        let two = with(
            decorator(),
            "/spec/resources/1",
            json!({"apiVersion": "apps/v1", "resource": "statefulsets", "labelSelector": {"matchLabels": {"a": "b"}}}),
        );
        assert!(parse_controller(&two, src()).is_ok());
        only(
            &with(decorator(), "/spec/parentResource", json!({})),
            "spec.parentResource",
            "unknown field `parentResource`",
        );
    }

    #[test]
    fn map_rules() {
        only(
            &with(map(), "/spec/inputResources", json!([])),
            "spec.inputResources",
            "at least one input resource",
        );
        only(
            &with(map(), "/spec/hooks/map", Value::Null),
            "spec.hooks.map",
            "computes the outputs of each input",
        );
        only(
            &with(
                map(),
                "/spec/inputResources/1",
                json!({"apiVersion": "v1", "resource": "persistentvolumeclaims"}),
            ),
            "spec.inputResources[1]",
            "duplicates spec.inputResources[0]",
        );
        only(
            &with(
                map(),
                "/spec/hooks/tombstone/webhook/url",
                json!("localhost:8080"),
            ),
            "spec.hooks.tombstone.webhook.url",
            "has no scheme; write http://localhost:8080",
        );
        only(
            &with(map(), "/spec/inputResources/0/updateStrategy", json!({})),
            "spec.inputResources[0].updateStrategy",
            "unknown field `updateStrategy`",
        );
        // A type may be both input and output; output rules follow child rules.
        let both = with(
            map(),
            "/spec/inputResources/1",
            json!({"apiVersion": "snapshot.storage.k8s.io/v1", "resource": "volumesnapshots"}),
        );
        assert!(parse_controller(&both, src()).is_ok());
        let rolling = with(
            map(),
            "/spec/outputResources/0/updateStrategy/method",
            json!("RollingInPlace"),
        );
        only(
            &rolling,
            "spec.outputResources[0].updateStrategy.method",
            "MapController does not do rolling updates",
        );
        only(
            &with(
                map(),
                "/spec/hooks/finalize",
                json!({"webhook": {"url": "http://127.0.0.1:1/f"}}),
            ),
            "spec.hooks.finalize",
            "deleting the parent deletes its outputs through garbage collection",
        );
        only(
            &with(
                map(),
                "/spec/hooks/customize",
                json!({"webhook": {"url": "http://127.0.0.1:1/c"}}),
            ),
            "spec.hooks.customize",
            "MapController has no customize hook",
        );
        let v2 = with(map(), "/spec/hooks/map/version", json!("v2"));
        let Ok(ControllerDef::Map(m)) = parse_controller(&v2, src()) else {
            panic!("rejected");
        };
        assert_eq!(m.spec.hooks.map.unwrap().version(), HookVersion::V2);
    }
}
