//! The CustomResourceDefinition itself: validation of an `apiextensions.k8s.io/v1` CRD with
//! apiserver-style field errors ([`parse_crd`], giving the [`CrdInfo`] the server routes with),
//! the API-approval rule of protected groups, and the fields the apiserver and its naming and
//! establishing controllers fill in ([`apply_crd_defaults`], [`crd_status`]).

use kube_apimachinery::names::{
    go_quote, is_dns1035_label_characters, is_dns1123_subdomain_characters,
};
use serde_json::{Map, Value};
use std::collections::HashSet;

use super::*;

/// What the server needs from a CRD object (`apiextensions.k8s.io/v1` CustomResourceDefinition JSON).
#[derive(Clone, Debug)]
pub struct CrdInfo {
    /// `spec.group`, e.g. `conf.example.com`.
    pub group: String,
    /// `spec.names.plural`, the resource name in URLs.
    pub plural: String,
    /// `spec.names.singular`, defaulted to the lowercased kind.
    pub singular: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// `spec.names.listKind`, defaulted to `<kind>List`.
    pub list_kind: String,
    /// `spec.names.shortNames`.
    pub short_names: Vec<String>,
    /// `spec.names.categories`.
    pub categories: Vec<String>,
    /// Whether `spec.scope` is `Namespaced` (otherwise `Cluster`).
    pub namespaced: bool,
    /// `spec.versions`, in CRD order.
    pub versions: Vec<CrdVersion>,
}

/// One entry of a CRD's `spec.versions`.
#[derive(Clone, Debug)]
pub struct CrdVersion {
    /// The version name, e.g. `v1`.
    pub name: String,
    /// Whether the version is served.
    pub served: bool,
    /// Whether objects are stored in this version (exactly one version is).
    pub storage: bool,
    /// Whether `subresources.status` is enabled.
    pub status_subresource: bool,
    /// `subresources.scale` as written (`specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`).
    pub scale_subresource: Option<Value>,
    /// The version's structural schema (always present for a CRD [`parse_crd`] accepted).
    pub schema: Option<Schema>,
    /// `additionalPrinterColumns` as written.
    pub printer_columns: Vec<Value>,
}

/// Validates a CRD like the apiserver does on create and returns what the server needs from it.
///
/// Errors are apiserver field errors rendered as strings, e.g. `spec.versions: Invalid value: [...]: must
/// have exactly one version marked as storage version`. Missing `names.singular` and `names.listKind`
/// are derived rather than rejected, so this accepts a CRD before or after [`apply_crd_defaults`].
/// `spec.conversion.strategy: Webhook` is rejected: the sandbox cannot call conversion webhooks.
pub fn parse_crd(crd: &Value) -> Result<CrdInfo, Vec<String>> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let spec = match crd.get("spec") {
        Some(Value::Object(spec)) => spec,
        None | Some(Value::Null) => {
            errs.push(required("spec", ""));
            &empty
        }
        Some(other) => {
            errs.push(invalid("spec", &go_value(other), "must be an object"));
            &empty
        }
    };
    let names = object_field(spec, "names", "spec.names", &empty, &mut errs);
    let group = text(spec, "group", "spec.group", &mut errs);
    let plural = text(names, "plural", "spec.names.plural", &mut errs);
    let kind = text(names, "kind", "spec.names.kind", &mut errs);
    let mut singular = text(names, "singular", "spec.names.singular", &mut errs);
    if singular.is_empty() {
        singular = kind.to_lowercase();
    }
    let mut list_kind = text(names, "listKind", "spec.names.listKind", &mut errs);
    if list_kind.is_empty() && !kind.is_empty() {
        list_kind = format!("{kind}List");
    }
    let short_names = texts(names, "shortNames", "spec.names.shortNames", &mut errs);
    let categories = texts(names, "categories", "spec.names.categories", &mut errs);

    validate_crd_name(crd, &plural, &group, &mut errs);
    validate_group(&group, &mut errs);

    let scope = text(spec, "scope", "spec.scope", &mut errs);
    match scope.as_str() {
        "" => errs.push(required("spec.scope", "")),
        "Namespaced" | "Cluster" => {}
        other => errs.push(not_supported(
            "spec.scope",
            &go_quote(other),
            &["Cluster", "Namespaced"],
        )),
    }

    if spec.get("preserveUnknownFields") == Some(&Value::Bool(true)) {
        errs.push(invalid(
            "spec.preserveUnknownFields",
            "true",
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }

    let versions = parse_versions(spec, &mut errs);

    if plural.is_empty() {
        errs.push(required("spec.names.plural", ""));
    }
    if kind.is_empty() {
        errs.push(required("spec.names.kind", ""));
    }
    validate_names(
        &plural,
        &singular,
        &kind,
        &list_kind,
        &short_names,
        &categories,
        &mut errs,
    );

    validate_conversion(spec, &mut errs);

    if !errs.is_empty() {
        return Err(errs.iter().map(ToString::to_string).collect());
    }
    Ok(CrdInfo {
        group,
        plural,
        singular,
        kind,
        list_kind,
        short_names,
        categories,
        namespaced: scope == "Namespaced",
        versions,
    })
}

/// `metadata.name` of a CRD: a DNS subdomain equal to `<plural>.<group>`.
pub(crate) fn validate_crd_name(
    crd: &Value,
    plural: &str,
    group: &str,
    errs: &mut Vec<SchemaViolation>,
) {
    let empty = Map::new();
    let metadata = match crd.get("metadata") {
        Some(Value::Object(m)) => m,
        _ => &empty,
    };
    let name = text(metadata, "name", "metadata.name", errs);
    if name.is_empty() {
        errs.push(required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for message in is_dns1123_subdomain_characters(&name) {
            errs.push(invalid("metadata.name", &go_quote(&name), &message));
        }
        if name != format!("{plural}.{group}") {
            errs.push(invalid(
                "metadata.name",
                &go_quote(&name),
                "must be spec.names.plural+\".\"+spec.group",
            ));
        }
    }
}

/// `spec.group`: required, a DNS subdomain with at least one dot.
pub(crate) fn validate_group(group: &str, errs: &mut Vec<SchemaViolation>) {
    if group.is_empty() {
        errs.push(required("spec.group", ""));
    } else {
        let group_errs = is_dns1123_subdomain_characters(group);
        if !group_errs.is_empty() {
            errs.push(invalid(
                "spec.group",
                &go_quote(group),
                &group_errs.join(","),
            ));
        } else if !group.contains('.') {
            errs.push(invalid(
                "spec.group",
                &go_quote(group),
                "should be a domain with at least one dot",
            ));
        }
    }
}

/// `spec.versions`: each version parsed, unique names, exactly one storage version.
pub(crate) fn parse_versions(
    spec: &Map<String, Value>,
    errs: &mut Vec<SchemaViolation>,
) -> Vec<CrdVersion> {
    let versions_value = spec.get("versions").cloned().unwrap_or(Value::Null);
    let raw_versions: &[Value] = match &versions_value {
        Value::Array(items) => items,
        Value::Null => &[],
        other => {
            errs.push(invalid(
                "spec.versions",
                &go_value(other),
                "must be an array",
            ));
            &[]
        }
    };
    // apiextensions' internal form hoists a schema all versions share to `spec.validation`, so
    // its errors are reported once, there.
    let schema_of = |v: &Value| {
        v.get("schema")
            .and_then(|s| s.get("openAPIV3Schema"))
            .cloned()
    };
    let hoisted = raw_versions
        .first()
        .and_then(schema_of)
        .filter(|s| !s.is_null())
        .is_some_and(|first| {
            raw_versions
                .iter()
                .all(|v| schema_of(v).as_ref() == Some(&first))
        });
    let versions: Vec<CrdVersion> = raw_versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            if hoisted && i > 0 {
                let mut dropped = Vec::new();
                let parsed = parse_version(v, i, true, &mut dropped);
                errs.extend(
                    dropped
                        .into_iter()
                        .filter(|e| !e.field.starts_with("spec.validation.")),
                );
                parsed
            } else {
                parse_version(v, i, hoisted, errs)
            }
        })
        .collect();
    let mut seen = HashSet::new();
    if !versions.iter().all(|v| seen.insert(v.name.as_str())) {
        errs.push(invalid(
            "spec.versions",
            &versions_value.to_string(),
            "must contain unique version names",
        ));
    }
    if versions.iter().filter(|v| v.storage).count() != 1 {
        let bad = if raw_versions.is_empty() {
            "[]".to_string()
        } else {
            versions_value.to_string()
        };
        errs.push(invalid(
            "spec.versions",
            &bad,
            "must have exactly one version marked as storage version",
        ));
    }
    versions
}

/// `spec.conversion`: only the `None` strategy (the sandbox cannot call conversion webhooks).
pub(crate) fn validate_conversion(spec: &Map<String, Value>, errs: &mut Vec<SchemaViolation>) {
    let empty = Map::new();
    if let Some(conversion) = spec.get("conversion").filter(|c| !c.is_null()) {
        let conversion = conversion.as_object().unwrap_or(&empty);
        let strategy = text(conversion, "strategy", "spec.conversion.strategy", errs);
        match strategy.as_str() {
            "" => errs.push(required("spec.conversion.strategy", "")),
            "None" => {}
            "Webhook" => errs.push(not_supported(
                "spec.conversion.strategy",
                &go_quote(&strategy),
                &["None"],
            )),
            other => errs.push(not_supported(
                "spec.conversion.strategy",
                &go_quote(other),
                &["None", "Webhook"],
            )),
        }
    }
}

/// Parses and validates `spec.versions[i]`.
pub(crate) fn parse_version(
    v: &Value,
    i: usize,
    hoisted: bool,
    errs: &mut Vec<SchemaViolation>,
) -> CrdVersion {
    let path = format!("spec.versions[{i}]");
    let empty = Map::new();
    let version = match v {
        Value::Object(version) => version,
        other => {
            errs.push(invalid(&path, &go_value(other), "must be an object"));
            &empty
        }
    };
    let name = text(version, "name", &format!("{path}.name"), errs);
    let name_errs = is_dns1035_label_characters(&name);
    if !name_errs.is_empty() {
        errs.push(invalid(
            &format!("{path}.name"),
            &go_quote(&name),
            &name_errs.join(","),
        ));
    }
    let served = boolean(version, "served", &format!("{path}.served"), errs);
    let storage = boolean(version, "storage", &format!("{path}.storage"), errs);

    let schema_path = if hoisted {
        "spec.validation.openAPIV3Schema".to_string()
    } else {
        format!("{path}.schema.openAPIV3Schema")
    };
    let schema = match version
        .get("schema")
        .and_then(|s| s.get("openAPIV3Schema"))
        .filter(|s| !s.is_null())
    {
        None => {
            errs.push(required(&schema_path, "schemas are required"));
            None
        }
        Some(raw) => match parse_schema(raw, &schema_path) {
            Ok(schema) => Some(schema),
            Err(e) => {
                errs.extend(e.violations);
                None
            }
        },
    };

    let subresources = version.get("subresources").and_then(Value::as_object);
    let status_subresource = subresources
        .and_then(|s| s.get("status"))
        .is_some_and(|s| !s.is_null());
    let scale_subresource = subresources
        .and_then(|s| s.get("scale"))
        .filter(|s| !s.is_null())
        .cloned();
    if let Some(scale) = &scale_subresource {
        validate_scale(scale, &format!("{path}.subresources.scale"), errs);
    }

    let columns_path = format!("{path}.additionalPrinterColumns");
    let printer_columns = match version.get("additionalPrinterColumns") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(columns)) => {
            for (j, column) in columns.iter().enumerate() {
                validate_column(column, &format!("{columns_path}[{j}]"), errs);
            }
            columns.clone()
        }
        Some(other) => {
            errs.push(invalid(&columns_path, &go_value(other), "must be an array"));
            Vec::new()
        }
    };

    CrdVersion {
        name,
        served,
        storage,
        status_subresource,
        scale_subresource,
        schema,
        printer_columns,
    }
}

/// `ValidateCustomResourceDefinitionNames` for `spec.names`.
pub(crate) fn validate_names(
    plural: &str,
    singular: &str,
    kind: &str,
    list_kind: &str,
    short_names: &[String],
    categories: &[String],
    errs: &mut Vec<SchemaViolation>,
) {
    for (field, value) in [
        ("spec.names.plural", plural),
        ("spec.names.singular", singular),
    ] {
        let label_errs = is_dns1035_label_characters(value);
        if !value.is_empty() && !label_errs.is_empty() {
            errs.push(invalid(field, &go_quote(value), &label_errs.join(",")));
        }
    }
    for (field, value) in [
        ("spec.names.kind", kind),
        ("spec.names.listKind", list_kind),
    ] {
        let label_errs = is_dns1035_label_characters(&value.to_lowercase());
        if !value.is_empty() && !label_errs.is_empty() {
            let detail = format!(
                "may have mixed case, but should otherwise match: {}",
                label_errs.join(",")
            );
            errs.push(invalid(field, &go_quote(value), &detail));
        }
    }
    for (field, values) in [
        ("spec.names.shortNames", short_names),
        ("spec.names.categories", categories),
    ] {
        for (i, value) in values.iter().enumerate() {
            let label_errs = is_dns1035_label_characters(value);
            if !label_errs.is_empty() {
                errs.push(invalid(
                    &format!("{field}[{i}]"),
                    &go_quote(value),
                    &label_errs.join(","),
                ));
            }
        }
    }
    if !kind.is_empty() && kind == list_kind {
        errs.push(invalid(
            "spec.names.listKind",
            &go_quote(list_kind),
            "kind and listKind may not be the same",
        ));
    }
}

/// `ValidateCustomResourceDefinitionSubresources` for `subresources.scale`.
pub(crate) fn validate_scale(scale: &Value, path: &str, errs: &mut Vec<SchemaViolation>) {
    let empty = Map::new();
    let scale = scale.as_object().unwrap_or(&empty);
    for (key, prefixes, under) in [
        ("specReplicasPath", &[".spec."][..], ".spec"),
        ("statusReplicasPath", &[".status."][..], ".status"),
        (
            "labelSelectorPath",
            &[".spec.", ".status."][..],
            "either .spec or .status",
        ),
    ] {
        let field = format!("{path}.{key}");
        let value = text(scale, key, &field, errs);
        if value.is_empty() {
            if key != "labelSelectorPath" {
                errs.push(required(&field, ""));
            }
        } else if let Some(e) = simple_json_path_error(&value, &field) {
            errs.push(e);
        } else if !prefixes.iter().any(|p| value.starts_with(p)) {
            errs.push(invalid(
                &field,
                &go_quote(&value),
                &format!("should be a json path under {under}"),
            ));
        }
    }
}

/// `ValidateCustomResourceColumnDefinition` for one `additionalPrinterColumns` entry.
pub(crate) fn validate_column(column: &Value, path: &str, errs: &mut Vec<SchemaViolation>) {
    let empty = Map::new();
    let column = column.as_object().unwrap_or(&empty);
    if text(column, "name", &format!("{path}.name"), errs).is_empty() {
        errs.push(required(&format!("{path}.name"), ""));
    }
    let type_field = format!("{path}.type");
    let column_type = text(column, "type", &type_field, errs);
    let must_be = format!("must be one of {COLUMN_TYPES}");
    if column_type.is_empty() {
        errs.push(required(&type_field, &must_be));
    } else if !COLUMN_TYPES.split(',').any(|t| t == column_type) {
        errs.push(invalid(&type_field, &go_quote(&column_type), &must_be));
    }
    let format_field = format!("{path}.format");
    let format = text(column, "format", &format_field, errs);
    if !format.is_empty() && !COLUMN_FORMATS.split(',').any(|f| f == format) {
        errs.push(invalid(
            &format_field,
            &go_quote(&format),
            &format!("must be one of {COLUMN_FORMATS}"),
        ));
    }
    let json_path_field = format!("{path}.JSONPath");
    let json_path = text(column, "jsonPath", &json_path_field, errs);
    if json_path.is_empty() {
        errs.push(required(&json_path_field, ""));
    } else if let Some(e) = simple_json_path_error(&json_path, &json_path_field) {
        errs.push(e);
    }
}

/// `validateSimpleJSONPath` for a non-empty path.
pub(crate) fn simple_json_path_error(path: &str, field: &str) -> Option<SchemaViolation> {
    (!path.starts_with('.')).then(|| {
        invalid(
            field,
            &go_quote(path),
            "must be a simple json path starting with .",
        )
    })
}

/// A string field of a CRD object; a missing or null field reads as empty, another type is an error.
pub(crate) fn text(
    map: &Map<String, Value>,
    key: &str,
    field: &str,
    errs: &mut Vec<SchemaViolation>,
) -> String {
    match map.get(key) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            errs.push(invalid(field, &go_value(other), "must be a string"));
            String::new()
        }
    }
}

/// A string-array field of a CRD object.
pub(crate) fn texts(
    map: &Map<String, Value>,
    key: &str,
    field: &str,
    errs: &mut Vec<SchemaViolation>,
) -> Vec<String> {
    match map.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item {
                Value::String(s) => Some(s.clone()),
                other => {
                    errs.push(invalid(
                        &format!("{field}[{i}]"),
                        &go_value(other),
                        "must be a string",
                    ));
                    None
                }
            })
            .collect(),
        Some(other) => {
            errs.push(invalid(
                field,
                &go_value(other),
                "must be an array of strings",
            ));
            Vec::new()
        }
    }
}

/// A boolean field of a CRD object; missing reads as false.
pub(crate) fn boolean(
    map: &Map<String, Value>,
    key: &str,
    field: &str,
    errs: &mut Vec<SchemaViolation>,
) -> bool {
    match map.get(key) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            errs.push(invalid(field, &go_value(other), "must be a boolean"));
            false
        }
    }
}

/// An object field of a CRD object; missing (or, after an error, malformed) reads as `empty`.
pub(crate) fn object_field<'a>(
    map: &'a Map<String, Value>,
    key: &str,
    field: &str,
    empty: &'a Map<String, Value>,
    errs: &mut Vec<SchemaViolation>,
) -> &'a Map<String, Value> {
    match map.get(key) {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => empty,
        Some(other) => {
            errs.push(invalid(field, &go_value(other), "must be an object"));
            empty
        }
    }
}

/// The annotation kube-apiserver requires on a CRD in a protected group: a URL of the API review
/// that approved it, or a reason starting with `unapproved`.
pub const API_APPROVED_ANNOTATION: &str = "api-approved.kubernetes.io";

/// Whether a CRD group is reserved for the Kubernetes community (`k8s.io`, `kubernetes.io` and
/// their subdomains): its CRDs must carry [`API_APPROVED_ANNOTATION`] (apiextensions-apiserver
/// `apihelpers.IsProtectedCommunityGroup`).
pub fn is_protected_group(group: &str) -> bool {
    group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io")
}

/// The state of a CRD's API approval annotation (`apihelpers.APIApprovalState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ApprovalState {
    /// The annotation is absent or empty.
    Missing,
    /// It starts with `unapproved`: allowed without approval.
    Bypassed,
    /// It is an absolute URL with a host: approved there.
    Approved,
    /// Anything else.
    Invalid,
}

/// The approval annotation of `crd` and its state (`apihelpers.GetAPIApprovalState`).
pub(crate) fn approval_state(crd: &Value) -> (&str, ApprovalState) {
    let value = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(API_APPROVED_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or("");
    let state = if value.is_empty() {
        ApprovalState::Missing
    } else if value.starts_with("unapproved") {
        ApprovalState::Bypassed
    } else if is_absolute_url_with_host(value) {
        ApprovalState::Approved
    } else {
        ApprovalState::Invalid
    };
    (value, state)
}

/// What Go's `url.ParseRequestURI` accepts with a non-empty scheme and host: `scheme://host...`
/// with a scheme of a letter then letters, digits, `+`, `-` or `.`, and no whitespace.
pub(crate) fn is_absolute_url_with_host(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    let scheme_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    scheme_ok && !host.is_empty() && !s.chars().any(char::is_whitespace)
}

/// kube-apiserver's API approval rule for CRDs in protected groups (apiextensions
/// `validateAPIApproval`): on create, and on an update that changes the approval state, the
/// annotation [`API_APPROVED_ANNOTATION`] must be a URL or start with `unapproved`. `old` is the
/// stored CRD on update. Returns the field error, rendered like the other CRD errors.
pub fn api_approval_error(crd: &Value, old: Option<&Value>) -> Option<String> {
    let group = crd.pointer("/spec/group").and_then(Value::as_str)?;
    if !is_protected_group(group) {
        return None;
    }
    let (value, state) = approval_state(crd);
    if old.is_some_and(|o| approval_state(o).1 == state) {
        return None;
    }
    let field = format!("metadata.annotations[{API_APPROVED_ANNOTATION}]");
    let see = "see https://github.com/kubernetes/enhancements/pull/1111";
    let violation = match state {
        ApprovalState::Approved | ApprovalState::Bypassed => return None,
        ApprovalState::Missing => required(
            &field,
            &format!(
                "protected groups must have approval annotation {}, {see}",
                go_quote(API_APPROVED_ANNOTATION)
            ),
        ),
        ApprovalState::Invalid => invalid(
            &field,
            &go_quote(value),
            &format!(
                "protected groups must have approval annotation {} with either a URL or a reason starting with \"unapproved\", {see}",
                go_quote(API_APPROVED_ANNOTATION)
            ),
        ),
    };
    Some(violation.to_string())
}

/// Fills in the defaults the apiserver sets on a CRD: `names.singular` (lowercased kind), `names.listKind`
/// (`<kind>List`) and `conversion: {strategy: None}`. Fields already set are left alone.
pub fn apply_crd_defaults(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !kind.is_empty() {
            if names
                .get("singular")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                names.insert("singular".to_string(), Value::String(kind.to_lowercase()));
            }
            if names
                .get("listKind")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                names.insert("listKind".to_string(), Value::String(format!("{kind}List")));
            }
        }
    }
    if spec.get("conversion").is_none_or(Value::is_null) {
        let mut conversion = Map::new();
        conversion.insert("strategy".to_string(), Value::String("None".to_string()));
        spec.insert("conversion".to_string(), Value::Object(conversion));
    }
}

/// The `status` the apiserver's naming and establishing controllers give a CRD.
///
/// Without a conflict: `acceptedNames` = `spec.names` (with defaults), `NamesAccepted=True`
/// (`NoConflicts`), `Established=True` (`InitialNamesAccepted`). `names_conflict` is the requested name
/// (plural, singular, a short name, kind or listKind) that another served resource already uses: that name
/// is then not accepted, `NamesAccepted=False` with reason `PluralConflict`, `SingularConflict`,
/// `ShortNamesConflict`, `KindConflict` or `ListKindConflict` and message `"<name>" is already in use`, and
/// `Established` stays `False` (`NotAccepted`) unless it was already `True`.
///
/// An existing status is updated as the controllers do: other conditions are kept, `lastTransitionTime`
/// (`now`, RFC 3339) only changes when a condition's status does, and `storedVersions` gains the current
/// storage version.
pub fn crd_status(crd: &Value, now: &str, names_conflict: Option<&str>) -> Value {
    let mut defaulted = crd.clone();
    apply_crd_defaults(&mut defaulted);
    let names = defaulted
        .pointer("/spec/names")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let status = crd.get("status").and_then(Value::as_object);
    let conflict = names_conflict.map(|clash| (clash, conflict_reason(&names, clash)));

    let mut out = Map::new();
    let conditions = naming_conditions(status, conflict, now);
    out.insert("conditions".to_string(), Value::Array(conditions));
    let accepted = accepted_names(&names, status, conflict.map(|(_, reason)| reason));
    out.insert("acceptedNames".to_string(), Value::Object(accepted));
    let stored = stored_versions(status, &defaulted);
    out.insert("storedVersions".to_string(), Value::Array(stored));
    Value::Object(out)
}

/// The `NamesAccepted` reason for requested name `clash` (plural, singular, a short name,
/// kind or listKind in `names`) being in use elsewhere.
pub(crate) fn conflict_reason(names: &Map<String, Value>, clash: &str) -> &'static str {
    let name_of = |key: &str| names.get(key).and_then(Value::as_str).unwrap_or("");
    let short_names = names.get("shortNames").and_then(Value::as_array);
    if clash == name_of("plural") {
        "PluralConflict"
    } else if clash == name_of("singular") {
        "SingularConflict"
    } else if short_names.is_some_and(|s| s.iter().any(|n| n.as_str() == Some(clash))) {
        "ShortNamesConflict"
    } else if clash == name_of("kind") {
        "KindConflict"
    } else if clash == name_of("listKind") {
        "ListKindConflict"
    } else {
        "PluralConflict"
    }
}

/// `acceptedNames`: the requested `names`, except that the name in conflict (`conflict` is
/// its reason) keeps its previously accepted value.
pub(crate) fn accepted_names(
    names: &Map<String, Value>,
    status: Option<&Map<String, Value>>,
    conflict: Option<&str>,
) -> Map<String, Value> {
    let previous = status
        .and_then(|s| s.get("acceptedNames"))
        .and_then(Value::as_object);
    let mut accepted = Map::new();
    for (key, reason) in [
        ("plural", "PluralConflict"),
        ("singular", "SingularConflict"),
        ("shortNames", "ShortNamesConflict"),
        ("kind", "KindConflict"),
        ("listKind", "ListKindConflict"),
        ("categories", ""),
    ] {
        let source = if conflict == Some(reason) {
            previous
        } else {
            Some(names)
        };
        let value = source
            .and_then(|s| s.get(key))
            .filter(|v| !is_zero(v))
            .cloned();
        match value {
            Some(v) => {
                accepted.insert(key.to_string(), v);
            }
            None if key == "plural" || key == "kind" => {
                accepted.insert(key.to_string(), Value::String(String::new()));
            }
            None => {}
        }
    }
    accepted
}

/// The existing conditions with `NamesAccepted` and `Established` set: both true without a
/// conflict; with one (`(name, reason)`), names not accepted and, unless it already was, not
/// established.
pub(crate) fn naming_conditions(
    status: Option<&Map<String, Value>>,
    conflict: Option<(&str, &str)>,
    now: &str,
) -> Vec<Value> {
    let mut conditions: Vec<Value> = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let established_before = conditions.iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("Established")
            && c.get("status").and_then(Value::as_str) == Some("True")
    });
    let message = conflict
        .map(|(clash, _)| format!("{} is already in use", go_quote(clash)))
        .unwrap_or_default();
    let updates = match conflict {
        None => vec![
            ("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
            (
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
            ),
        ],
        Some((_, reason)) => {
            let mut updates = vec![("NamesAccepted", "False", reason, message.as_str())];
            if !established_before {
                updates.push((
                    "Established",
                    "False",
                    "NotAccepted",
                    "not all names are accepted",
                ));
            }
            updates
        }
    };
    for (kind, status, reason, message) in updates {
        set_condition(&mut conditions, kind, status, reason, message, now);
    }
    conditions
}

/// `storedVersions`: the existing list plus the storage version of the (defaulted) CRD.
pub(crate) fn stored_versions(
    status: Option<&Map<String, Value>>,
    defaulted: &Value,
) -> Vec<Value> {
    let mut stored: Vec<Value> = status
        .and_then(|s| s.get("storedVersions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_versions = defaulted
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage") == Some(&Value::Bool(true)))
        .filter_map(|v| v.get("name").cloned());
    for version in storage_versions {
        if !stored.contains(&version) {
            stored.push(version);
        }
    }
    stored
}

/// `SetCRDCondition`: updates the condition of that type in place (keeping its `lastTransitionTime` unless its
/// status changes) or appends it.
pub(crate) fn set_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    let existing = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(kind));
    let transition_time = existing
        .and_then(|i| conditions.get(i))
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|c| c.get("lastTransitionTime"))
        .filter(|t| !is_zero(t))
        .cloned()
        .unwrap_or_else(|| Value::String(now.to_string()));
    let mut condition = Map::new();
    condition.insert("type".to_string(), Value::String(kind.to_string()));
    condition.insert("status".to_string(), Value::String(status.to_string()));
    condition.insert("lastTransitionTime".to_string(), transition_time);
    condition.insert("reason".to_string(), Value::String(reason.to_string()));
    condition.insert("message".to_string(), Value::String(message.to_string()));
    match existing.and_then(|i| conditions.get_mut(i)) {
        Some(slot) => *slot = Value::Object(condition),
        None => conditions.push(Value::Object(condition)),
    }
}
