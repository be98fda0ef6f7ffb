//! The object lifecycle: create, update, patch and delete with everything kube-apiserver does
//! around a write — name generation, validation, CRD schema pruning/defaulting/validation,
//! status-subresource rules, generation, managedFields, finalizers and graceful deletion.
//!
//! HTTP handlers and the built-in controllers both go through these functions, so the rules
//! hold whoever writes.

use std::sync::Arc;

use serde_json::{Value, json};

use super::admission;
use super::apply::{self, ApplyError};
use super::defaults;
use super::patch;
use super::resources::ResourceDef;
use super::rules;
use super::state::{State, new_uid, now_rfc3339, random_u64};
use super::status::{ApiError, ApiResult, Target};
use super::store::{ObjKey, StoreError, Stored};
use super::typed;
use super::validation::{self, NameRule};
use super::webhook;

/// Finalizer the garbage collector uses for foreground deletion.
pub const FOREGROUND: &str = "foregroundDeletion";
/// Finalizer the garbage collector uses for orphan deletion.
pub const ORPHAN: &str = "orphan";
/// Finalizer on CRDs until their objects are gone.
pub const CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

/// `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop unknown fields and warn (server default).
    #[default]
    Warn,
    /// Reject unknown fields.
    Strict,
}

/// Options shared by every write.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// The field manager recorded in managedFields.
    pub field_manager: String,
    /// Unknown-field handling.
    pub field_validation: FieldValidation,
}

/// The result of a write.
#[derive(Debug)]
pub struct Written {
    /// The object as stored (or as it would be, for dry runs).
    pub obj: Value,
    /// Warnings for the `Warning` response header.
    pub warnings: Vec<String>,
    /// The write created the object (201) rather than updating it (200).
    pub created: bool,
}

/// The kinds of PATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// application/merge-patch+json
    Merge,
    /// application/json-patch+json
    Json,
    /// application/strategic-merge-patch+json
    Strategic,
    /// application/apply-patch+yaml
    Apply {
        /// `force=true`.
        force: bool,
    },
}

/// Deletion propagation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Keep dependents, removing their owner references.
    Orphan,
    /// Delete the owner now, dependents afterwards.
    Background,
    /// Delete dependents first, then the owner.
    Foreground,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// Propagation policy (default Background).
    pub propagation: Option<Propagation>,
    /// uid precondition.
    pub uid: Option<String>,
    /// resourceVersion precondition.
    pub rv: Option<u64>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `gracePeriodSeconds` (pods only; None: the pod's `terminationGracePeriodSeconds`).
    pub grace_period: Option<i64>,
}

/// What a delete did.
#[derive(Debug)]
pub enum Deleted {
    /// The object is gone; this was its last state.
    Gone(Value),
    /// The object is marked for deletion and waits for finalizers.
    Pending(Value),
}

fn target<'a>(def: &'a ResourceDef, name: &'a str) -> Target<'a> {
    Target {
        group: &def.group,
        resource: &def.plural,
        name,
    }
}

/// The 422 for an invalid CRD: kube-apiserver's message (one error as is, several in brackets).
fn crd_invalid(def: &ResourceDef, name: &str, errs: Vec<String>) -> ApiError {
    let message = format!(
        "CustomResourceDefinition.apiextensions.k8s.io \"{name}\" is invalid: {}",
        if errs.len() == 1 {
            errs[0].clone()
        } else {
            format!("[{}]", errs.join(", "))
        }
    );
    // Each error is `field: body`; the cause names the field as kube-apiserver's does.
    let causes = errs
        .into_iter()
        .map(|e| {
            let field = e.split_once(": ").map(|(f, _)| f.to_string());
            (field.unwrap_or_default(), e)
        })
        .collect();
    ApiError::invalid(kind_target(def, name), message, causes)
}

/// The target of a 422 Invalid: kube-apiserver names the kind there, not the resource.
fn kind_target<'a>(def: &'a ResourceDef, name: &'a str) -> Target<'a> {
    Target {
        group: &def.group,
        resource: &def.kind,
        name,
    }
}

fn qualified_kind(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        def.kind.clone()
    } else {
        format!("{}.{}", def.kind, def.group)
    }
}

fn name_rule(def: &ResourceDef) -> NameRule {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => NameRule::Label,
        ("", "services") => NameRule::Dns1035Label,
        ("rbac.authorization.k8s.io", _) => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
}

/// Map a store error to the API error kube-apiserver would return.
pub fn store_err(def: &ResourceDef, name: &str, e: StoreError) -> ApiError {
    let t = target(def, name);
    match e {
        StoreError::NotFound => ApiError::not_found(t),
        StoreError::AlreadyExists => ApiError::already_exists(t),
        StoreError::Conflict => ApiError::conflict_modified(t),
        StoreError::Precondition(m) => ApiError::conflict(t, &m),
        StoreError::Gone { requested, oldest } => {
            ApiError::gone(format!("too old resource version: {requested} ({oldest})"))
        }
        StoreError::Persist(e) => ApiError::internal(e.to_string()),
        StoreError::Corrupt(e) => ApiError::internal(e),
    }
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

/// The key an object of `def` named `name` is stored under.
pub fn key(def: &ResourceDef, ns: Option<&str>, name: &str) -> ObjKey {
    ObjKey {
        gr: Arc::from(def.group_resource().as_str()),
        ns: if def.namespaced {
            ns.unwrap_or_default().to_string()
        } else {
            String::new()
        },
        name: name.to_string(),
    }
}

/// Rewrite a stored object's apiVersion to the version it is served at.
pub fn as_served(def: &ResourceDef, mut obj: Value) -> Value {
    if def.is_custom() {
        obj["apiVersion"] = json!(def.api_version());
    }
    obj
}

fn check_type(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(format!(
            "the body of the request must be a JSON object describing a {}",
            def.kind
        )));
    }
    let want_av = def.api_version();
    match obj.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => obj["apiVersion"] = json!(want_av),
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
    }
    match obj.get("kind").and_then(Value::as_str) {
        None | Some("") => obj["kind"] = json!(def.kind),
        Some(k) if k == def.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )));
        }
    }
    if obj.get("metadata").is_none_or(Value::is_null) {
        obj["metadata"] = json!({});
    }
    if !obj["metadata"].is_object() {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

/// Prune, default and validate a custom resource against its schema. Returns warnings.
fn apply_schema(
    def: &ResourceDef,
    obj: &mut Value,
    name: &str,
    fv: FieldValidation,
    old: Option<&Value>,
) -> ApiResult<Vec<String>> {
    let Some(schema) = def.schema() else {
        return Ok(Vec::new());
    };
    let pruned = schema.prune(obj);
    let mut warnings = Vec::new();
    if !pruned.is_empty() {
        let fields: Vec<String> = pruned
            .iter()
            .map(|p| format!("unknown field \"{}\"", p.trim_start_matches('.')))
            .collect();
        match fv {
            FieldValidation::Strict => {
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
                    fields.join(", "),
                    kind = def.kind,
                    v = def.version
                )));
            }
            FieldValidation::Warn => warnings.extend(fields),
            FieldValidation::Ignore => {}
        }
    }
    schema.apply_defaults(obj);
    let violations = schema.validate_update(obj, old);
    if !violations.is_empty() {
        let msgs: Vec<String> = violations.iter().map(|v| v.to_string()).collect();
        let causes = violations
            .iter()
            .map(|v| (v.field.clone(), v.to_string()))
            .collect();
        let message = if msgs.len() == 1 {
            format!("{} \"{name}\" is invalid: {}", qualified_kind(def), msgs[0])
        } else {
            format!(
                "{} \"{name}\" is invalid: [{}]",
                qualified_kind(def),
                msgs.join(", ")
            )
        };
        return Err(ApiError::invalid(kind_target(def, name), message, causes));
    }
    Ok(warnings)
}

/// Decode a built-in object through its typed struct (dropping fields the type does not have,
/// warning or rejecting per `fieldValidation`) and apply its API defaults. Returns warnings.
fn normalize_builtin(
    def: &ResourceDef,
    obj: &mut Value,
    fv: FieldValidation,
) -> ApiResult<Vec<String>> {
    let gr = def.group_resource();
    let Some(decoded) = typed::decode(&gr, obj) else {
        return Ok(Vec::new());
    };
    let cannot = |detail: String| {
        ApiError::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: {detail}",
            kind = def.kind,
            v = def.version
        ))
    };
    let decoded = decoded.map_err(|e| cannot(e.0))?;
    let fields: Vec<String> = decoded
        .unknown
        .iter()
        .map(|p| format!("unknown field \"{p}\""))
        .collect();
    let mut warnings = Vec::new();
    if !fields.is_empty() {
        match fv {
            FieldValidation::Strict => {
                return Err(cannot(format!(
                    "strict decoding error: {}",
                    fields.join(", ")
                )));
            }
            FieldValidation::Warn => warnings = fields,
            FieldValidation::Ignore => {}
        }
    }
    *obj = decoded.obj;
    defaults::apply(&gr, obj);
    Ok(warnings)
}

fn validate_meta(def: &ResourceDef, obj: &Value, name: &str, old: Option<&Value>) -> ApiResult<()> {
    let mut errs = validation::validate_metadata(&obj["metadata"], name_rule(def));
    errs.extend(rules::validate(&def.group_resource(), obj, old));
    if errs.is_empty() {
        return Ok(());
    }
    let message = validation::invalid_message(&qualified_kind(def), name, &errs);
    let causes = errs
        .iter()
        .map(|e| (e.field.clone(), e.to_string()))
        .collect();
    Err(ApiError::invalid(kind_target(def, name), message, causes))
}

fn check_namespace(state: &State, def: &ResourceDef, ns: &str) -> ApiResult<()> {
    if !def.namespaced {
        return Ok(());
    }
    match state.store.get("/namespaces", "", ns) {
        None => Err(ApiError::not_found(Target {
            group: "",
            resource: "namespaces",
            name: ns,
        })),
        Some(n) if n.deleting => Err(ApiError::forbidden(format!(
            "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            def.plural, "",
        ))),
        Some(_) => Ok(()),
    }
}

/// Create an object (POST). `url_ns` is the namespace from the path.
pub fn create(
    state: &State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    mut obj: Value,
    opts: &WriteOpts,
) -> ApiResult<Written> {
    check_type(def, &mut obj)?;
    create_checked(state, def, url_ns, obj, opts, false)
}

/// Create a type-checked object: its namespace and name, server-owned fields dropped, the
/// built-in normalization, admission, schema and CRD checks, then the store.
fn create_checked(
    state: &State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    mut obj: Value,
    opts: &WriteOpts,
    managed_fields_done: bool,
) -> ApiResult<Written> {
    let ns = create_namespace(def, url_ns, &mut obj)?;
    let (given_name, generate) = create_names(def, &obj)?;
    check_namespace(state, def, &ns)?;
    strip_server_owned(def, &mut obj)?;
    let mut warnings = normalize_builtin(def, &mut obj, opts.field_validation)?;
    obj["metadata"]["uid"] = json!(new_uid());
    if given_name.is_empty() {
        // The strategy sees the generated name (the Job's `job-name` label does).
        obj["metadata"]["name"] = json!(format!(
            "{generate}{}",
            validation::generate_name_suffix(random_u64())
        ));
    }
    admission::on_create(&def.group_resource(), &mut obj);
    let hook = |name: &'static str| webhook::Attributes {
        def,
        operation: name,
        sub: None,
        ns: &ns,
        name: &given_name,
        old: None,
        dry_run: opts.dry_run,
    };
    let mutated = obj.clone();
    warnings.extend(webhook::mutate(state, &hook("CREATE"), &mut obj)?);
    if obj != mutated {
        // The patched object is decoded and defaulted again, as kube-apiserver does.
        warnings.extend(normalize_builtin(def, &mut obj, opts.field_validation)?);
    }
    warnings.extend(apply_schema(
        def,
        &mut obj,
        if given_name.is_empty() {
            &generate
        } else {
            &given_name
        },
        opts.field_validation,
        None,
    )?);
    if def.group_resource() == "apiextensions.k8s.io/customresourcedefinitions" {
        super::crd::apply_crd_defaults(&mut obj);
        let mut errs = super::crd::parse_crd(&obj).err().unwrap_or_default();
        errs.extend(super::crd::api_approval_error(&obj, None));
        if !errs.is_empty() {
            return Err(crd_invalid(def, &given_name, errs));
        }
    }
    let now = now_rfc3339();
    obj["metadata"]["creationTimestamp"] = json!(now);
    if super::generation::set_on_create(def) {
        obj["metadata"]["generation"] = json!(1);
    }
    obj["apiVersion"] = json!(def.storage_api_version());
    warnings.extend(webhook::validate(state, &hook("CREATE"), Some(&obj))?);
    let created = Created {
        ns: &ns,
        given_name: &given_name,
        generate: &generate,
        now: &now,
        managed_fields_done,
    };
    store_created(state, def, obj, opts, &created, warnings)
}

/// The namespace of an object to create, set in its metadata: the request's, which the
/// object's own may only repeat; none (removed) for a cluster-scoped resource.
fn create_namespace(def: &ResourceDef, url_ns: Option<&str>, obj: &mut Value) -> ApiResult<String> {
    if !def.namespaced {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        return Ok(String::new());
    }
    let meta_ns = str_at(obj, &["metadata", "namespace"]).map(String::from);
    let ns = match (url_ns, meta_ns.as_deref()) {
        (Some(u), Some(m)) if !m.is_empty() && u != m => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        (Some(u), _) => u.to_string(),
        (None, Some(m)) if !m.is_empty() => m.to_string(),
        _ => {
            return Err(ApiError::bad_request(
                "the server could not find the requested resource: a namespace is required",
            ));
        }
    };
    obj["metadata"]["namespace"] = json!(ns);
    Ok(ns)
}

/// The `name` and `generateName` of an object to create: one of them is required, and the
/// object must not carry a `resourceVersion`.
fn create_names(def: &ResourceDef, obj: &Value) -> ApiResult<(String, String)> {
    if let Some(rv) = str_at(obj, &["metadata", "resourceVersion"])
        && !rv.is_empty()
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let given_name = str_at(obj, &["metadata", "name"])
        .unwrap_or_default()
        .to_string();
    let generate = str_at(obj, &["metadata", "generateName"])
        .unwrap_or_default()
        .to_string();
    if given_name.is_empty() && generate.is_empty() {
        return Err(ApiError::invalid(
            kind_target(def, ""),
            format!(
                "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                qualified_kind(def)
            ),
            vec![(
                "metadata.name".into(),
                "Required value: name or generateName is required".into(),
            )],
        ));
    }
    Ok((given_name, generate))
}

/// Drop what the server owns from an object to create: its uid, timestamps, generation,
/// selfLink, an empty managedFields, and the status of a resource with a status subresource.
fn strip_server_owned(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    let m = obj["metadata"]
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "selfLink",
    ] {
        m.remove(k);
    }
    if m.get("managedFields")
        .is_some_and(|v| v.as_array().is_some_and(Vec::is_empty))
    {
        m.remove("managedFields");
    }
    if def.status_subresource
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    Ok(())
}

/// Where and under which name an object is being created.
struct Created<'a> {
    ns: &'a str,
    given_name: &'a str,
    generate: &'a str,
    now: &'a str,
    managed_fields_done: bool,
}

/// Store a new object (not with `dryRun`): validate its metadata, record its field manager,
/// and with `generateName` try other names while the generated one is taken.
fn store_created(
    state: &State,
    def: &ResourceDef,
    mut obj: Value,
    opts: &WriteOpts,
    c: &Created<'_>,
    warnings: Vec<String>,
) -> ApiResult<Written> {
    let generate = c.generate;
    for attempt in 0..8 {
        let name = if c.given_name.is_empty() && attempt > 0 {
            format!(
                "{generate}{}",
                validation::generate_name_suffix(random_u64())
            )
        } else if c.given_name.is_empty() {
            str_at(&obj, &["metadata", "name"])
                .unwrap_or_default()
                .to_string()
        } else {
            c.given_name.to_string()
        };
        obj["metadata"]["name"] = json!(name);
        if attempt == 0 {
            validate_meta(def, &obj, &name, None)?;
        }
        let mut candidate = obj.clone();
        if !c.managed_fields_done {
            apply::record_update(
                None,
                &mut candidate,
                &opts.field_manager,
                None,
                c.now,
                def.schema(),
            );
        }
        if opts.dry_run {
            return Ok(Written {
                obj: as_served(def, candidate),
                warnings,
                created: true,
            });
        }
        match state
            .store
            .create_value(key(def, Some(c.ns), &name), candidate)
        {
            Ok((_, v)) => {
                return Ok(Written {
                    obj: as_served(def, v),
                    warnings,
                    created: true,
                });
            }
            Err(StoreError::AlreadyExists) if c.given_name.is_empty() => continue,
            Err(e) => return Err(store_err(def, &name, e)),
        }
    }
    Err(ApiError::new(
        409,
        "AlreadyExists",
        format!("could not generate a unique name for generateName {generate:?}"),
    ))
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Update an object (PUT), optionally on a subresource.
pub fn update(
    state: &State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    mut obj: Value,
    opts: &WriteOpts,
) -> ApiResult<Written> {
    check_type(def, &mut obj)?;
    if let Some(n) = str_at(&obj, &["metadata", "name"])
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    if def.namespaced
        && let (Some(u), Some(m)) = (url_ns, str_at(&obj, &["metadata", "namespace"]))
        && !m.is_empty()
        && u != m
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let k = key(def, url_ns, name);
    let current = state
        .store
        .get(&k.gr, &k.ns, name)
        .ok_or_else(|| ApiError::not_found(target(def, name)))?;
    let expected = match str_at(&obj, &["metadata", "resourceVersion"]) {
        None | Some("") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?,
        ),
    };
    if let Some(e) = expected
        && e != current.rv
    {
        return Err(ApiError::conflict_modified(target(def, name)));
    }
    if let Some(uid) = str_at(&obj, &["metadata", "uid"])
        && !uid.is_empty()
        && uid != current.uid
    {
        return Err(ApiError::conflict(
            target(def, name),
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                current.uid
            ),
        ));
    }
    let old = current.value().map_err(|e| store_err(def, name, e))?;
    write_update(state, def, &k, &current, old, obj, sub, opts, false, true)
}

/// Apply the update rules to `new` against `old` and store it (expecting `current.rv`).
#[allow(clippy::too_many_arguments)]
fn write_update(
    state: &State,
    def: &ResourceDef,
    k: &ObjKey,
    current: &Arc<Stored>,
    old: Value,
    mut new: Value,
    sub: Option<&str>,
    opts: &WriteOpts,
    managed_fields_done: bool,
    external: bool,
) -> ApiResult<Written> {
    let name = k.name.as_str();
    let gr = def.group_resource();
    let finalize_to = scope_to_subresource(def, &old, &mut new, sub, managed_fields_done)?;
    keep_server_owned(def, &old, &mut new);
    if external && current.deleting {
        refuse_added_finalizers(def, name, &old, &new)?;
    }
    let mut warnings = normalize_builtin(
        def,
        &mut new,
        if sub.is_none() {
            opts.field_validation
        } else {
            FieldValidation::Ignore
        },
    )?;
    admission::on_update(&gr, &old, &mut new);
    if let Some(fins) = finalize_to {
        if fins.as_array().is_some_and(|a| !a.is_empty()) {
            new["spec"]["finalizers"] = fins;
        } else if let Some(spec) = new["spec"].as_object_mut() {
            spec.remove("finalizers");
        }
    }
    let hook = webhook::Attributes {
        def,
        operation: "UPDATE",
        sub,
        ns: &k.ns,
        name,
        old: Some(&old),
        dry_run: opts.dry_run,
    };
    let mutated = new.clone();
    warnings.extend(webhook::mutate(state, &hook, &mut new)?);
    if new != mutated {
        warnings.extend(normalize_builtin(def, &mut new, FieldValidation::Ignore)?);
    }
    if sub.is_none() {
        warnings.extend(apply_schema(
            def,
            &mut new,
            name,
            opts.field_validation,
            Some(&old),
        )?);
        validate_meta(def, &new, name, Some(&old))?;
        if gr == "apiextensions.k8s.io/customresourcedefinitions" {
            super::crd::apply_crd_defaults(&mut new);
            let mut errs = super::crd::parse_crd(&new).err().unwrap_or_default();
            errs.extend(super::crd::api_approval_error(&new, Some(&old)));
            if !errs.is_empty() {
                return Err(crd_invalid(def, name, errs));
            }
        }
    }
    if let Some(g) = old["metadata"]["generation"].as_i64()
        && super::generation::bumped(def, &old, &new)
    {
        new["metadata"]["generation"] = json!(g + 1);
    }
    warnings.extend(webhook::validate(state, &hook, Some(&new))?);
    if new == old {
        return Ok(Written {
            obj: as_served(def, old),
            warnings,
            created: false,
        });
    }
    if !managed_fields_done {
        apply::record_update(
            Some(&old),
            &mut new,
            &opts.field_manager,
            sub,
            &now_rfc3339(),
            def.schema(),
        );
    }
    if opts.dry_run {
        return Ok(Written {
            obj: as_served(def, new),
            warnings,
            created: false,
        });
    }
    store_update(state, def, k, current, new, warnings)
}

/// Narrow an update to what its subresource may change: `status` takes only the status (and
/// managedFields already recorded), `finalize` on a namespace only `spec.finalizers`
/// (returned, to be set after admission), the main resource everything but the status.
fn scope_to_subresource(
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    sub: Option<&str>,
    managed_fields_done: bool,
) -> ApiResult<Option<Value>> {
    match sub {
        Some("status") => {
            if !def.status_subresource {
                return Err(ApiError::no_route(&format!("{}/status", def.plural)));
            }
            let status = new.get("status").cloned();
            let mf = new["metadata"].get("managedFields").cloned();
            *new = old.clone();
            match status {
                Some(s) => new["status"] = s,
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            if managed_fields_done && let Some(mf) = mf {
                new["metadata"]["managedFields"] = mf;
            }
            Ok(None)
        }
        Some("finalize") if def.group_resource() == "/namespaces" => {
            let finalize_to = new["spec"]["finalizers"].clone();
            *new = old.clone();
            Ok(Some(finalize_to))
        }
        Some(other) => Err(ApiError::no_route(&format!("{}/{other}", def.plural))),
        None => {
            if def.status_subresource {
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            Ok(None)
        }
    }
}

/// Immutable and server-owned metadata comes from the stored object, as do its managedFields
/// when the update has none; the stored version is the storage version.
fn keep_server_owned(def: &ResourceDef, old: &Value, new: &mut Value) {
    for f in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "namespace",
        "name",
    ] {
        match old["metadata"].get(f) {
            Some(v) => new["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = new["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    if new["metadata"]
        .get("managedFields")
        .is_none_or(Value::is_null)
        && let Some(mf) = old["metadata"].get("managedFields")
    {
        new["metadata"]["managedFields"] = mf.clone();
    }
    new["apiVersion"] = json!(def.storage_api_version());
}

/// An object being deleted may lose finalizers but not gain any.
fn refuse_added_finalizers(
    def: &ResourceDef,
    name: &str,
    old: &Value,
    new: &Value,
) -> ApiResult<()> {
    let old_fins = finalizers(old);
    let added: Vec<String> = finalizers(new)
        .into_iter()
        .filter(|f| !old_fins.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    let msg = format!(
        "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
    );
    Err(ApiError::invalid(
        kind_target(def, name),
        format!("{} \"{name}\" is invalid: {msg}", qualified_kind(def)),
        vec![("metadata.finalizers".into(), msg)],
    ))
}

/// Store an updated object (expecting `current.rv`); an object being deleted whose last
/// finalizer went is deleted instead.
fn store_update(
    state: &State,
    def: &ResourceDef,
    k: &ObjKey,
    current: &Arc<Stored>,
    new: Value,
    warnings: Vec<String>,
) -> ApiResult<Written> {
    let name = k.name.as_str();
    let gr = def.group_resource();
    let done_deleting = current.deleting
        && finalizers(&new).is_empty()
        && new["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .is_none_or(|g| g == 0)
        && !(gr == "/namespaces"
            && new["spec"]["finalizers"]
                .as_array()
                .is_some_and(|a| !a.is_empty()));
    if done_deleting {
        let gone = state
            .store
            .delete(k, Some(&current.uid), Some(current.rv))
            .map_err(|e| match e {
                StoreError::Precondition(_) => ApiError::conflict_modified(target(def, name)),
                e => store_err(def, name, e),
            })?;
        let mut v = gone.value().map_err(|e| store_err(def, name, e))?;
        v["metadata"]["finalizers"] = new["metadata"]["finalizers"].clone();
        return Ok(Written {
            obj: as_served(def, v),
            warnings,
            created: false,
        });
    }
    let (_, v) = state
        .store
        .update_value(k.clone(), Some(current.rv), new)
        .map_err(|e| store_err(def, name, e))?;
    Ok(Written {
        obj: as_served(def, v),
        warnings,
        created: false,
    })
}

/// Patch an object (PATCH), optionally on a subresource. Server-side apply creates missing objects.
#[allow(clippy::too_many_arguments)]
pub fn patch(
    state: &State,
    def: &ResourceDef,
    url_ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    kind: PatchKind,
    body: &Value,
    opts: &WriteOpts,
) -> ApiResult<Written> {
    if kind == PatchKind::Strategic && def.is_custom() {
        return Err(ApiError::unsupported_media_type(
            "application/strategic-merge-patch+json",
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    let k = key(def, url_ns, name);
    let now = now_rfc3339();
    for _ in 0..16 {
        let Some(current) = state.store.get(&k.gr, &k.ns, name) else {
            let PatchKind::Apply { force } = kind else {
                return Err(ApiError::not_found(target(def, name)));
            };
            if sub.is_some() {
                return Err(ApiError::not_found(target(def, name)));
            }
            let mut applied = body.clone();
            check_type(def, &mut applied)?;
            if let Some(n) = str_at(&applied, &["metadata", "name"])
                && n != name
            {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            applied["metadata"]["name"] = json!(name);
            let obj = apply::apply(
                None,
                &applied,
                &opts.field_manager,
                force,
                sub,
                &now,
                def.schema(),
            )
            .map_err(|e| apply_err(def, name, &applied, e))?;
            return match create_checked(state, def, url_ns, obj, opts, true) {
                Err(e) if e.reason == "AlreadyExists" => continue,
                other => other,
            };
        };
        let old = current.value().map_err(|e| store_err(def, name, e))?;
        let old_served = as_served(def, old.clone());
        let mut new = old_served.clone();
        let mut managed_done = false;
        match kind {
            PatchKind::Merge => {
                if !body.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                patch::merge_patch(&mut new, body)
            }
            PatchKind::Json => patch::json_patch(&mut new, body).map_err(|e| {
                ApiError::invalid(
                    kind_target(def, name),
                    format!("the server rejected our request due to an error in our request: {e}"),
                    vec![],
                )
            })?,
            PatchKind::Strategic => patch::strategic_merge_patch(&mut new, body)
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
            PatchKind::Apply { force } => {
                let mut applied = body.clone();
                check_type(def, &mut applied)?;
                if let Some(rv) = str_at(&applied, &["metadata", "resourceVersion"])
                    && !rv.is_empty()
                    && rv != current.rv.to_string()
                {
                    return Err(ApiError::conflict_modified(target(def, name)));
                }
                new = apply::apply(
                    Some(&old_served),
                    &applied,
                    &opts.field_manager,
                    force,
                    sub,
                    &now,
                    def.schema(),
                )
                .map_err(|e| apply_err(def, name, &applied, e))?;
                managed_done = true;
            }
        }
        // A resourceVersion in the patch is a precondition.
        let patched_rv = str_at(&new, &["metadata", "resourceVersion"]).map(String::from);
        if patched_rv
            .as_deref()
            .is_some_and(|rv| rv != current.rv.to_string())
        {
            return Err(ApiError::conflict_modified(target(def, name)));
        }
        if !new.is_object() {
            return Err(ApiError::bad_request("the patch did not produce an object"));
        }
        match write_update(
            state,
            def,
            &k,
            &current,
            old,
            new,
            sub,
            opts,
            managed_done,
            true,
        ) {
            Err(e) if e.reason == "Conflict" && e.message.contains("has been modified") => continue,
            other => return other,
        }
    }
    Err(ApiError::conflict_modified(target(def, name)))
}

fn apply_err(def: &ResourceDef, name: &str, applied: &Value, e: ApplyError) -> ApiError {
    match &e {
        // `apierrors.NewApplyConflict`: one cause per field and manager, nothing else.
        ApplyError::Conflict { conflicts } => {
            let causes: Vec<Value> = conflicts
                .iter()
                .map(|c| {
                    json!({"reason": "FieldManagerConflict",
                        "message": format!("conflict with {}", c.manager_description),
                        "field": c.field})
                })
                .collect();
            let mut err = ApiError::new(409, "Conflict", e.to_string());
            err.details = Some(Box::new(json!({"causes": causes})));
            err
        }
        ApplyError::Invalid(m) if m.contains("managedFields") => ApiError::bad_request(m.clone()),
        ApplyError::Invalid(m) => ApiError::invalid(
            kind_target(def, name),
            format!("{} \"{name}\" is invalid: {m}", qualified_kind(def)),
            vec![],
        ),
        // kube-apiserver wraps structured-merge-diff's error in a plain (reason-less) 500,
        // naming the applied object by its own namespace and name.
        ApplyError::TypedPatch(m) => {
            let ns = str_at(applied, &["metadata", "namespace"]).unwrap_or_default();
            ApiError::new(
                500,
                "",
                format!(
                    "failed to create typed patch object ({ns}/{name}; {}, Kind={}): {m}",
                    def.api_version(),
                    def.kind
                ),
            )
        }
    }
}

/// Change an object from inside the sandbox (controllers): read, apply `f`, write, retrying on conflicts.
/// `f` returns false to leave the object alone. Returns the new state, or None if the object is gone.
pub fn mutate(
    state: &State,
    k: &ObjKey,
    mut f: impl FnMut(&mut Value) -> bool,
) -> ApiResult<Option<Value>> {
    let def = state.def_for_gr(&k.gr)?;
    for _ in 0..16 {
        let Some(current) = state.store.get(&k.gr, &k.ns, &k.name) else {
            return Ok(None);
        };
        let old = current.value().map_err(|e| store_err(&def, &k.name, e))?;
        let mut new = old.clone();
        if !f(&mut new) {
            return Ok(Some(old));
        }
        let sub = if new.get("status") != old.get("status") && def.status_subresource {
            // Controllers write status and metadata in separate steps, as real ones do.
            Some("status")
        } else if k.gr.as_ref() == "/namespaces" && new["spec"] != old["spec"] {
            Some("finalize")
        } else {
            None
        };
        let opts = WriteOpts {
            field_manager: "kubectl-meta-sandbox".into(),
            field_validation: FieldValidation::Ignore,
            ..Default::default()
        };
        match write_update(state, &def, k, &current, old, new, sub, &opts, false, false) {
            Ok(w) => return Ok(Some(w.obj)),
            Err(e) if e.code == 409 || e.code == 404 => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::conflict_modified(target(&def, &k.name)))
}

/// The grace period a delete of `obj` gets, as the pod strategy's `CheckGracefulDelete`: a pod
/// bound to a node and not yet terminated terminates gracefully, for `gracePeriodSeconds` or
/// its `terminationGracePeriodSeconds` (a negative request means 1 second); every other
/// object, unscheduled pods and pods that have already terminated go at once.
fn pod_grace(def: &ResourceDef, obj: &Value, requested: Option<i64>) -> i64 {
    if def.group_resource() != "/pods"
        || obj["spec"]["nodeName"].as_str().is_none_or(str::is_empty)
        || matches!(
            obj["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        )
    {
        return 0;
    }
    let g = requested
        .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30);
    let g = if g < 0 { 1 } else { g };
    // A pod already terminating only ever gets a shorter period.
    match obj["metadata"]["deletionGracePeriodSeconds"].as_i64() {
        Some(cur) => g.min(cur),
        None => g,
    }
}

/// Delete an object in the background with a uid precondition, as a namespace's or a CRD's
/// cleanup does, unless it is already being deleted: whether it remains (being deleted or
/// waiting for finalizers); an object already gone does not.
pub fn delete_in_background(state: &State, def: &ResourceDef, obj: &Stored) -> ApiResult<bool> {
    if obj.deleting {
        return Ok(true);
    }
    let opts = DeleteOpts {
        propagation: Some(Propagation::Background),
        uid: Some(obj.uid.clone()),
        ..Default::default()
    };
    match delete(state, def, &obj.key, &opts) {
        Ok(Deleted::Pending(_)) => Ok(true),
        Ok(Deleted::Gone(_)) => Ok(false),
        Err(e) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Delete an object (DELETE).
pub fn delete(
    state: &State,
    def: &ResourceDef,
    k: &ObjKey,
    opts: &DeleteOpts,
) -> ApiResult<Deleted> {
    let name = k.name.as_str();
    let mut admitted = false;
    for _ in 0..16 {
        let current = state
            .store
            .get(&k.gr, &k.ns, name)
            .ok_or_else(|| ApiError::not_found(target(def, name)))?;
        if !admitted {
            let old = current.value().map_err(|e| store_err(def, name, e))?;
            let hook = webhook::Attributes {
                def,
                operation: "DELETE",
                sub: None,
                ns: &k.ns,
                name,
                old: Some(&old),
                dry_run: opts.dry_run,
            };
            webhook::validate(state, &hook, None)?;
            admitted = true;
        }
        if let Some(uid) = &opts.uid
            && *uid != current.uid
        {
            return Err(ApiError::conflict(
                target(def, name),
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    current.uid
                ),
            ));
        }
        if let Some(rv) = opts.rv
            && rv != current.rv
        {
            return Err(ApiError::conflict(
                target(def, name),
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    current.rv
                ),
            ));
        }
        let mut obj = current.value().map_err(|e| store_err(def, name, e))?;
        let is_ns = def.group_resource() == "/namespaces";
        let gc_finalizer = match opts.propagation {
            Some(Propagation::Foreground) => Some(FOREGROUND),
            Some(Propagation::Orphan) => Some(ORPHAN),
            _ => None,
        };
        // As in kube-apiserver, foreground and orphan deletion always pass through the garbage
        // collector's finalizer; the collector removes it once dependents are handled.
        let mut fins = finalizers(&obj);
        // kube-apiserver puts the CRD cleanup finalizer on when a CRD is deleted.
        if def.group_resource() == "apiextensions.k8s.io/customresourcedefinitions"
            && !fins.iter().any(|x| x == CRD_CLEANUP)
        {
            fins.push(CRD_CLEANUP.to_string());
        }
        if let Some(f) = gc_finalizer
            && !fins.iter().any(|x| x == f)
        {
            fins.push(f.to_string());
        }
        let ns_pending = is_ns
            && obj["spec"]["finalizers"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
        let grace = pod_grace(def, &obj, opts.grace_period);
        if fins.is_empty() && !ns_pending && grace == 0 {
            if opts.dry_run {
                return Ok(Deleted::Gone(as_served(def, obj)));
            }
            match state.store.delete(k, Some(&current.uid), Some(current.rv)) {
                Ok(gone) => {
                    let v = gone.value().map_err(|e| store_err(def, name, e))?;
                    return Ok(Deleted::Gone(as_served(def, v)));
                }
                Err(StoreError::Precondition(_)) => continue,
                Err(e) => return Err(store_err(def, name, e)),
            }
        }
        // Graceful: mark and wait for finalizers.
        let before = obj.clone();
        obj["metadata"]["finalizers"] = json!(fins);
        let shorter = obj["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .is_some_and(|g| grace < g);
        if obj["metadata"]["deletionTimestamp"].is_null() || shorter {
            let at = jiff::Timestamp::now()
                .checked_add(jiff::SignedDuration::from_secs(grace))
                .unwrap_or_else(|_| jiff::Timestamp::now());
            obj["metadata"]["deletionTimestamp"] =
                json!(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            if let Some(g) = obj["metadata"]["generation"].as_i64()
                && !shorter
            {
                obj["metadata"]["generation"] = json!(g + 1);
            }
        }
        if is_ns {
            obj["status"]["phase"] = json!("Terminating");
        }
        if obj == before {
            return Ok(Deleted::Pending(as_served(def, obj)));
        }
        if opts.dry_run {
            return Ok(Deleted::Pending(as_served(def, obj)));
        }
        match state.store.update(k.clone(), Some(current.rv), obj) {
            Ok(s) => {
                let v = s.value().map_err(|e| store_err(def, name, e))?;
                return Ok(Deleted::Pending(as_served(def, v)));
            }
            Err(StoreError::Conflict) => continue,
            Err(e) => return Err(store_err(def, name, e)),
        }
    }
    Err(ApiError::conflict_modified(target(def, name)))
}
