//! Object-name and `metadata` validation for the sandbox API server.
//!
//! Owns the checks kube-apiserver applies to every object's metadata (name / generateName
//! rules, label and annotation keys and values, ownerReferences, finalizers), the
//! apimachinery `field.Error` type with its exact message format, the 422 `is invalid`
//! message, and generateName's random suffix.

use std::fmt;

use serde_json::{Map, Value};

use kube_apimachinery::names::{
    go_quote, is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_label_value,
    is_path_segment, is_qualified_name,
};

/// The kind of a field error, as apimachinery's `field.ErrorType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `Invalid value`: malformed value.
    Invalid,
    /// `Required value`: missing value.
    Required,
    /// `Too long`: value longer than allowed (the value itself is not shown).
    TooLong,
    /// `Forbidden`: valid syntax, but not allowed here.
    Forbidden,
    /// `Duplicate value`: value that must be unique is repeated.
    Duplicate,
    /// `Unsupported value`: not one of an enumerated set.
    NotSupported,
}

impl FieldErrorKind {
    #[cfg(test)]
    /// The `StatusCause.reason` for this kind (e.g. `FieldValueInvalid`), for a 422 Status's `details.causes`.
    pub fn cause_type(self) -> &'static str {
        match self {
            Self::Invalid => "FieldValueInvalid",
            Self::Required => "FieldValueRequired",
            Self::TooLong => "FieldValueTooLong",
            Self::Forbidden => "FieldValueForbidden",
            Self::Duplicate => "FieldValueDuplicate",
            Self::NotSupported => "FieldValueNotSupported",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Invalid => "Invalid value",
            Self::Required => "Required value",
            Self::TooLong => "Too long",
            Self::Forbidden => "Forbidden",
            Self::Duplicate => "Duplicate value",
            Self::NotSupported => "Unsupported value",
        }
    }
}

/// One field error, like apimachinery's `field.Error`, e.g.
/// `metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must ...`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// The field path, e.g. `metadata.labels`.
    pub field: String,
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// The offending value, shown for Invalid, Duplicate and NotSupported: strings quoted
    /// like Go's `%q`, numbers and booleans bare, lists and objects as JSON. `None` omits it.
    pub value: Option<Value>,
    /// The explanation after the value; may be empty.
    pub detail: String,
}

impl FieldError {
    /// An `Invalid value` error showing `value`.
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            field: field.into(),
            kind: FieldErrorKind::Invalid,
            value: Some(value.into()),
            detail: detail.into(),
        }
    }

    /// A `Required value` error.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind: FieldErrorKind::Required,
            value: None,
            detail: detail.into(),
        }
    }

    /// A `Too long` error for a limit of `max_bytes`.
    pub fn too_long(field: impl Into<String>, max_bytes: usize) -> Self {
        let unit = if max_bytes == 1 { "byte" } else { "bytes" };
        Self {
            field: field.into(),
            kind: FieldErrorKind::TooLong,
            value: None,
            detail: format!("may not be more than {max_bytes} {unit}"),
        }
    }

    /// A `Forbidden` error.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind: FieldErrorKind::Forbidden,
            value: None,
            detail: detail.into(),
        }
    }

    /// A `Duplicate value` error showing `value`.
    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self {
            field: field.into(),
            kind: FieldErrorKind::Duplicate,
            value: Some(value.into()),
            detail: String::new(),
        }
    }

    /// An `Unsupported value` error listing the supported values.
    pub fn not_supported(
        field: impl Into<String>,
        value: impl Into<Value>,
        supported: &[&str],
    ) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self {
            field: field.into(),
            kind: FieldErrorKind::NotSupported,
            value: Some(value.into()),
            detail,
        }
    }

    /// The message without the field path (apimachinery's `ErrorBody`), as used for a
    /// `StatusCause.message`.
    pub fn body(&self) -> String {
        let mut s = self.kind.label().to_string();
        let shows_value = matches!(
            self.kind,
            FieldErrorKind::Invalid | FieldErrorKind::Duplicate | FieldErrorKind::NotSupported
        );
        if let (true, Some(value)) = (shows_value, &self.value) {
            s.push_str(": ");
            s.push_str(&render_value(value));
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => go_quote(s),
        other => other.to_string(),
    }
}

/// Which naming rule an object's `metadata.name` follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain, ≤253 bytes: most kinds, including custom resources.
    Subdomain,
    /// DNS-1123 label, ≤63 bytes: namespaces.
    Label,
    /// DNS-1035 label (starts with a letter), ≤63 bytes: services.
    Dns1035Label,
    /// Anything without `/` or `%` that is not `.` or `..`: RBAC roles and bindings.
    PathSegment,
}

impl NameRule {
    /// The rule's messages for `name`; `prefix` checks a generateName prefix, to which a
    /// random suffix is still to be appended.
    fn check(self, name: &str, prefix: bool) -> Vec<String> {
        let masked;
        let name = if prefix && self != Self::PathSegment {
            masked = mask_trailing_dash(name);
            masked.as_str()
        } else {
            name
        };
        match self {
            Self::Subdomain => is_dns1123_subdomain(name),
            Self::Label => is_dns1123_label(name),
            Self::Dns1035Label => is_dns1035_label(name),
            Self::PathSegment => is_path_segment(name, prefix),
        }
    }
}

/// apimachinery's `maskTrailingDash`: a generateName like `web-` is valid because a suffix
/// follows, so its last two bytes become `a` before validation (sic: two, not one).
fn mask_trailing_dash(name: &str) -> String {
    let bytes = name.as_bytes();
    if bytes.len() > 1 && name.ends_with('-') {
        let mut masked = bytes[..bytes.len() - 2].to_vec();
        masked.push(b'a');
        String::from_utf8_lossy(&masked).into_owned()
    } else {
        name.to_string()
    }
}

/// Validates `metadata.name` against `rule`; an empty name is `Required`.
pub fn validate_name(name: &str, rule: NameRule) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )];
    }
    rule.check(name, false)
        .into_iter()
        .map(|msg| FieldError::invalid("metadata.name", name, msg))
        .collect()
}

/// Annotations may not exceed this many bytes of keys plus values in total.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Validates an object's `metadata` like kube-apiserver's `ValidateObjectMeta` (minus
/// namespace checks): generateName (as a `rule` prefix) when set, the name via
/// [`validate_name`] (so callers need not call both; an empty name is accepted when
/// generateName is set, since it is still to be generated), labels, annotations (keys and
/// total size), ownerReferences (required fields, at most one controller) and finalizers.
/// A null `meta` counts as empty; fields of the wrong JSON type are reported as invalid.
pub fn validate_metadata(meta: &Value, rule: NameRule) -> Vec<FieldError> {
    let empty = Map::new();
    let obj = match meta {
        Value::Null => &empty,
        Value::Object(m) => m,
        other => {
            return vec![FieldError::invalid(
                "metadata",
                other.clone(),
                "must be an object",
            )];
        }
    };
    let mut errs = Vec::new();

    let generate_name = string_field(obj, "generateName", "metadata.generateName", &mut errs);
    if !generate_name.is_empty() {
        for msg in rule.check(generate_name, true) {
            errs.push(FieldError::invalid(
                "metadata.generateName",
                generate_name,
                msg,
            ));
        }
    }
    let name = string_field(obj, "name", "metadata.name", &mut errs);
    // Before creation the name may still be empty, to be generated from generateName.
    if !name.is_empty() || generate_name.is_empty() {
        errs.extend(validate_name(name, rule));
    }

    for (key, value) in string_map(obj, "labels", &mut errs) {
        for msg in is_qualified_name(key) {
            errs.push(FieldError::invalid("metadata.labels", key, msg));
        }
        for msg in is_label_value(value) {
            errs.push(FieldError::invalid("metadata.labels", value, msg));
        }
    }

    let annotations = string_map(obj, "annotations", &mut errs);
    for (key, _) in &annotations {
        // Annotation keys are qualified names, except that case does not matter.
        for msg in is_qualified_name(&key.to_lowercase()) {
            errs.push(FieldError::invalid("metadata.annotations", *key, msg));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(
            "metadata.annotations",
            TOTAL_ANNOTATION_SIZE_LIMIT,
        ));
    }

    validate_owner_references(obj.get("ownerReferences"), &mut errs);
    validate_finalizers(obj.get("finalizers"), &mut errs);
    errs
}

/// A string field of `obj` ("" when absent or null); other types are reported.
fn string_field<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    path: &str,
    errs: &mut Vec<FieldError>,
) -> &'a str {
    match obj.get(key) {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s,
        Some(other) => {
            errs.push(FieldError::invalid(path, other.clone(), "must be a string"));
            ""
        }
    }
}

/// The string entries of a map field such as `labels`; non-string entries are reported.
fn string_map<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    errs: &mut Vec<FieldError>,
) -> Vec<(&'a str, &'a str)> {
    let path = format!("metadata.{key}");
    match obj.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => m
            .iter()
            .filter_map(|(k, v)| match v {
                Value::String(s) => Some((k.as_str(), s.as_str())),
                other => {
                    errs.push(FieldError::invalid(
                        format!("{path}[{k}]"),
                        other.clone(),
                        "must be a string",
                    ));
                    None
                }
            })
            .collect(),
        Some(other) => {
            errs.push(FieldError::invalid(
                path,
                other.clone(),
                "must be an object",
            ));
            Vec::new()
        }
    }
}

/// One owner reference, read leniently from JSON.
struct OwnerRef<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: &'a str,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

impl OwnerRef<'_> {
    /// The reference as Go's `json.Marshal(metav1.OwnerReference)` renders it in messages.
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("apiVersion".into(), self.api_version.into());
        m.insert("kind".into(), self.kind.into());
        m.insert("name".into(), self.name.into());
        m.insert("uid".into(), self.uid.into());
        if let Some(c) = self.controller {
            m.insert("controller".into(), c.into());
        }
        if let Some(b) = self.block_owner_deletion {
            m.insert("blockOwnerDeletion".into(), b.into());
        }
        Value::Object(m)
    }
}

fn validate_owner_references(refs: Option<&Value>, errs: &mut Vec<FieldError>) {
    const PATH: &str = "metadata.ownerReferences";
    let items = match refs {
        None | Some(Value::Null) => return,
        Some(Value::Array(a)) => a,
        Some(other) => {
            errs.push(FieldError::invalid(PATH, other.clone(), "must be an array"));
            return;
        }
    };
    let mut owners = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Value::Object(m) = item else {
            errs.push(FieldError::invalid(
                format!("{PATH}[{i}]"),
                item.clone(),
                "must be an object",
            ));
            continue;
        };
        let field = |key: &str, errs: &mut Vec<FieldError>| {
            string_field(m, key, &format!("{PATH}[{i}].{key}"), errs)
        };
        let flag = |key: &str, errs: &mut Vec<FieldError>| match m.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                errs.push(FieldError::invalid(
                    format!("{PATH}[{i}].{key}"),
                    other.clone(),
                    "must be a boolean",
                ));
                None
            }
        };
        owners.push(OwnerRef {
            api_version: field("apiVersion", errs),
            kind: field("kind", errs),
            name: field("name", errs),
            uid: field("uid", errs),
            controller: flag("controller", errs),
            block_owner_deletion: flag("blockOwnerDeletion", errs),
        });
    }

    let mut first_controller: Option<String> = None;
    for owner in &owners {
        let (group, version) = parse_group_version(owner.api_version);
        if version.is_empty() {
            errs.push(FieldError::invalid(
                format!("{PATH}.apiVersion"),
                owner.api_version,
                "version must not be empty",
            ));
        }
        if owner.kind.is_empty() {
            errs.push(FieldError::invalid(
                format!("{PATH}.kind"),
                owner.kind,
                "kind must not be empty",
            ));
        }
        if owner.name.is_empty() {
            errs.push(FieldError::invalid(
                format!("{PATH}.name"),
                owner.name,
                "name must not be empty",
            ));
        }
        if owner.uid.is_empty() {
            errs.push(FieldError::invalid(
                format!("{PATH}.uid"),
                owner.uid,
                "uid must not be empty",
            ));
        }
        if group.is_empty() && version == "v1" && owner.kind == "Event" {
            errs.push(FieldError::invalid(
                PATH,
                owner.to_json(),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if owner.controller == Some(true) {
            let this = format!("{}/{}", owner.kind, owner.name);
            match &first_controller {
                None => first_controller = Some(this),
                Some(first) => errs.push(FieldError::invalid(
                    PATH,
                    Value::Array(owners.iter().map(OwnerRef::to_json).collect()),
                    format!("Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"),
                )),
            }
        }
    }
}

/// Splits an apiVersion like apimachinery's `ParseGroupVersion`: `v1` is the core group,
/// `apps/v1` is group `apps`; anything with more slashes yields nothing.
fn parse_group_version(api_version: &str) -> (&str, &str) {
    if api_version == "/" {
        return ("", "");
    }
    match api_version.split_once('/') {
        None => ("", api_version),
        Some((group, version)) if !version.contains('/') => (group, version),
        Some(_) => ("", ""),
    }
}

fn validate_finalizers(finalizers: Option<&Value>, errs: &mut Vec<FieldError>) {
    const PATH: &str = "metadata.finalizers";
    let items = match finalizers {
        None | Some(Value::Null) => return,
        Some(Value::Array(a)) => a,
        Some(other) => {
            errs.push(FieldError::invalid(PATH, other.clone(), "must be an array"));
            return;
        }
    };
    let mut names = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) => names.push(s.as_str()),
            other => errs.push(FieldError::invalid(
                format!("{PATH}[{i}]"),
                other.clone(),
                "must be a string",
            )),
        }
    }
    for name in &names {
        for msg in is_qualified_name(name) {
            errs.push(FieldError::invalid(PATH, *name, msg));
        }
    }
    if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
        errs.push(FieldError::invalid(
            PATH,
            Value::from(names.clone()),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
}

/// Renders errors the way kube-apiserver's 422 Status message does:
/// `ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: ...`, several errors as
/// `[err1, err2]` with exact duplicates dropped. `kind` is the kind, qualified with its
/// group for non-core groups (`Deployment.apps`).
pub fn invalid_message(kind: &str, name: &str, errors: &[FieldError]) -> String {
    let mut msgs: Vec<String> = Vec::with_capacity(errors.len());
    for e in errors {
        let m = e.to_string();
        if !msgs.contains(&m) {
            msgs.push(m);
        }
    }
    let head = format!("{kind} {} is invalid", go_quote(name));
    match msgs.as_slice() {
        [] => head,
        [one] => format!("{head}: {one}"),
        _ => format!("{head}: [{}]", msgs.join(", ")),
    }
}

/// The alphabet of kube-apiserver's random name suffixes (no vowels, no confusable characters).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A 5-character generateName suffix drawn from kube-apiserver's alphabet, derived from
/// `random` (the same input gives the same suffix).
pub fn generate_name_suffix(random: u64) -> String {
    let base = SUFFIX_ALPHABET.len() as u64;
    let mut r = random;
    let mut out = String::with_capacity(5);
    for _ in 0..5 {
        let idx = usize::try_from(r % base).unwrap_or(0);
        out.push(char::from(
            SUFFIX_ALPHABET.get(idx).copied().unwrap_or(b'x'),
        ));
        r /= base;
    }
    out
}

#[cfg(test)]
/// A name generated from a generateName prefix as kube-apiserver does: the prefix cut to
/// 58 bytes (on a char boundary here) followed by [`generate_name_suffix`], so the result
/// is at most 63 bytes.
pub fn generate_name(prefix: &str, random: u64) -> String {
    let mut cut = prefix.len().min(58);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{}", &prefix[..cut], generate_name_suffix(random))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    fn strings(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn meta_errs(meta: Value) -> Vec<String> {
        strings(&validate_metadata(&meta, NameRule::Subdomain))
    }

    #[test]
    fn subdomain_names() {
        for ok in ["a", "example.com", "a-b.c-d", "0", &"a".repeat(253)] {
            assert!(validate_name(ok, NameRule::Subdomain).is_empty(), "{ok}");
        }
        assert_eq!(
            strings(&validate_name("Bad_Name", NameRule::Subdomain)),
            vec![format!(
                "metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN_MSG}"
            )]
        );
        for bad in ["-a", "a-", "a..b", ".a", "a.", "é"] {
            assert_eq!(validate_name(bad, NameRule::Subdomain).len(), 1, "{bad}");
        }
        let long = "a".repeat(254);
        assert_eq!(
            strings(&validate_name(&long, NameRule::Subdomain)),
            vec![format!(
                "metadata.name: Invalid value: \"{long}\": must be no more than 253 bytes"
            )]
        );
    }

    #[test]
    fn label_names() {
        assert!(validate_name("kube-system", NameRule::Label).is_empty());
        assert!(validate_name("0abc", NameRule::Label).is_empty());
        assert_eq!(
            strings(&validate_name("a.b", NameRule::Label)),
            vec!["metadata.name: Invalid value: \"a.b\": must not contain dots"]
        );
        assert_eq!(
            strings(&validate_name("Ns", NameRule::Label)),
            vec![format!("metadata.name: Invalid value: \"Ns\": {LABEL_MSG}")]
        );
        let long = "a".repeat(64);
        assert_eq!(
            strings(&validate_name(&long, NameRule::Label)),
            vec![format!(
                "metadata.name: Invalid value: \"{long}\": must be no more than 63 bytes"
            )]
        );
    }

    #[test]
    fn dns1035_names() {
        assert!(validate_name("my-svc", NameRule::Dns1035Label).is_empty());
        assert_eq!(
            strings(&validate_name("1svc", NameRule::Dns1035Label)),
            vec![format!(
                "metadata.name: Invalid value: \"1svc\": {DNS1035_MSG}"
            )]
        );
        assert_eq!(validate_name("a.b", NameRule::Dns1035Label).len(), 1);
    }

    #[test]
    fn path_segment_names() {
        for ok in ["Anything_Goes:here", "system:controller", "..."] {
            assert!(validate_name(ok, NameRule::PathSegment).is_empty(), "{ok}");
        }
        assert_eq!(
            strings(&validate_name("..", NameRule::PathSegment)),
            vec!["metadata.name: Invalid value: \"..\": may not be '..'"]
        );
        assert_eq!(
            strings(&validate_name(".", NameRule::PathSegment)),
            vec!["metadata.name: Invalid value: \".\": may not be '.'"]
        );
        assert_eq!(
            strings(&validate_name("a/b%c", NameRule::PathSegment)),
            vec![
                "metadata.name: Invalid value: \"a/b%c\": may not contain '/'",
                "metadata.name: Invalid value: \"a/b%c\": may not contain '%'"
            ]
        );
    }

    #[test]
    fn empty_name_is_required() {
        for rule in [
            NameRule::Subdomain,
            NameRule::Label,
            NameRule::Dns1035Label,
            NameRule::PathSegment,
        ] {
            assert_eq!(
                strings(&validate_name("", rule)),
                vec!["metadata.name: Required value: name or generateName is required"]
            );
        }
    }

    #[test]
    fn generate_name_prefixes() {
        assert!(meta_errs(json!({"generateName": "web-"})).is_empty());
        assert!(meta_errs(json!({"generateName": "web"})).is_empty());
        assert!(meta_errs(json!({"generateName": "a-"})).is_empty());
        assert_eq!(
            meta_errs(json!({"generateName": "Web-"})),
            vec![format!(
                "metadata.generateName: Invalid value: \"Web-\": {SUBDOMAIN_MSG}"
            )]
        );
        // With a name already set (after generation), both are reported, as the apiserver does.
        assert_eq!(
            meta_errs(json!({"generateName": "Bad_", "name": "Bad_x2b4c"})).len(),
            2
        );
        assert!(
            validate_metadata(&json!({"generateName": "Web-"}), NameRule::PathSegment).is_empty()
        );
        assert_eq!(
            strings(&validate_metadata(
                &json!({"generateName": "a/"}),
                NameRule::PathSegment
            )),
            vec!["metadata.generateName: Invalid value: \"a/\": may not contain '/'"]
        );
        assert_eq!(
            strings(&validate_metadata(
                &json!({"generateName": "a.b-"}),
                NameRule::Label
            )),
            vec!["metadata.generateName: Invalid value: \"a.b-\": must not contain dots"]
        );
    }

    #[test]
    fn mask_trailing_dash_matches_apimachinery() {
        assert_eq!(mask_trailing_dash("web-"), "wea");
        assert_eq!(mask_trailing_dash("-"), "-");
        assert_eq!(mask_trailing_dash("ab"), "ab");
        assert_eq!(
            mask_trailing_dash("é-"),
            "\u{fffd}a",
            "cuts by bytes without panicking"
        );
        assert_eq!(mask_trailing_dash("aé-"), "a\u{fffd}a");
    }

    #[test]
    fn metadata_requires_name_or_generate_name() {
        assert_eq!(
            meta_errs(json!({})),
            vec!["metadata.name: Required value: name or generateName is required"]
        );
        assert_eq!(meta_errs(Value::Null).len(), 1);
        assert!(meta_errs(json!({"name": "ok"})).is_empty());
        assert_eq!(
            meta_errs(json!({"name": "Bad_Name"})),
            vec![format!(
                "metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN_MSG}"
            )]
        );
    }

    #[test]
    fn labels_are_validated() {
        assert!(meta_errs(json!({"name": "x", "labels": {"app": "web", "example.com/Tier": "", "a_b": "A.b-c_9"}})).is_empty());
        assert_eq!(
            meta_errs(json!({"name": "x", "labels": {"-bad": "ok"}})),
            vec![format!(
                "metadata.labels: Invalid value: \"-bad\": {NAME_PART_MSG}"
            )]
        );
        assert_eq!(
            meta_errs(json!({"name": "x", "labels": {"app": "bad value"}})),
            vec![format!(
                "metadata.labels: Invalid value: \"bad value\": {LABEL_VALUE_MSG}"
            )]
        );
        let long = "v".repeat(64);
        assert_eq!(
            meta_errs(json!({"name": "x", "labels": {"app": long}})),
            vec![format!(
                "metadata.labels: Invalid value: \"{long}\": must be no more than 63 bytes"
            )]
        );
        assert_eq!(
            meta_errs(json!({"name": "x", "labels": {"Example.com/a": "v"}})),
            vec![format!(
                "metadata.labels: Invalid value: \"Example.com/a\": prefix part {SUBDOMAIN_MSG}"
            )]
        );
        assert_eq!(
            meta_errs(json!({"name": "x", "labels": {"/a": "v"}})),
            vec!["metadata.labels: Invalid value: \"/a\": prefix part must be non-empty"]
        );
        assert_eq!(
            meta_errs(json!({"name": "x", "labels": {"a/": "v"}})),
            vec![
                "metadata.labels: Invalid value: \"a/\": name part must be non-empty".to_string(),
                format!("metadata.labels: Invalid value: \"a/\": {NAME_PART_MSG}")
            ]
        );
        let three = meta_errs(json!({"name": "x", "labels": {"a/b/c": "v"}}));
        assert_eq!(three.len(), 1);
        assert!(three[0].starts_with(
            "metadata.labels: Invalid value: \"a/b/c\": a valid label key must consist of"
        ));
        assert!(three[0].ends_with(
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ));
        let long_key = "k".repeat(64);
        assert_eq!(
            meta_errs(json!({"name": "x", "labels": {long_key.clone(): "v"}})),
            vec![format!(
                "metadata.labels: Invalid value: \"{long_key}\": name part must be no more than 63 bytes"
            )]
        );
    }

    #[test]
    fn annotations_are_validated() {
        assert!(meta_errs(json!({"name": "x", "annotations": {"Example.COM/Some-Key": "any value at all\n", "k": ""}})).is_empty());
        assert_eq!(
            meta_errs(json!({"name": "x", "annotations": {"bad key": "v"}})),
            vec![format!(
                "metadata.annotations: Invalid value: \"bad key\": {NAME_PART_MSG}"
            )]
        );
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        assert!(meta_errs(json!({"name": "x", "annotations": {"a": big[1..]}})).is_empty());
        assert_eq!(
            meta_errs(json!({"name": "x", "annotations": {"a": big}})),
            vec!["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
    }

    #[test]
    fn owner_references_need_their_fields() {
        let ok = json!({"name": "x", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u1", "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u2", "controller": false}
        ]});
        assert!(meta_errs(ok).is_empty());
        assert_eq!(
            meta_errs(json!({"name": "x", "ownerReferences": [{}]})),
            vec![
                "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty",
                "metadata.ownerReferences.kind: Invalid value: \"\": kind must not be empty",
                "metadata.ownerReferences.name: Invalid value: \"\": name must not be empty",
                "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty"
            ]
        );
        for bad in ["apps/", "a/b/c", "/"] {
            assert_eq!(
                meta_errs(
                    json!({"name": "x", "ownerReferences": [{"apiVersion": bad, "kind": "K", "name": "n", "uid": "u"}]})
                ),
                vec![format!(
                    "metadata.ownerReferences.apiVersion: Invalid value: \"{bad}\": version must not be empty"
                )]
            );
        }
    }

    #[test]
    fn two_controller_references_are_rejected() {
        let errs = meta_errs(json!({"name": "x", "ownerReferences": [
            {"apiVersion": "example.com/v1", "kind": "Parent", "name": "a", "uid": "u1", "controller": true, "blockOwnerDeletion": true},
            {"apiVersion": "example.com/v1", "kind": "Parent", "name": "b", "uid": "u2", "controller": true}
        ]}));
        assert_eq!(
            errs,
            vec![concat!(
                "metadata.ownerReferences: Invalid value: [",
                r#"{"apiVersion":"example.com/v1","kind":"Parent","name":"a","uid":"u1","controller":true,"blockOwnerDeletion":true},"#,
                r#"{"apiVersion":"example.com/v1","kind":"Parent","name":"b","uid":"u2","controller":true}"#,
                "]: Only one reference can have Controller set to true. Found \"true\" in references for Parent/a and Parent/b"
            )]
        );
        let three = meta_errs(json!({"name": "x", "ownerReferences": [
            {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": true},
            {"apiVersion": "v1", "kind": "C", "name": "c", "uid": "3", "controller": true}
        ]}));
        assert_eq!(three.len(), 2);
        assert!(three[0].ends_with("for A/a and B/b"));
        assert!(three[1].ends_with("for A/a and C/c"));
    }

    #[test]
    fn events_cannot_own_objects() {
        assert_eq!(
            meta_errs(
                json!({"name": "x", "ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"}]})
            ),
            vec![
                r#"metadata.ownerReferences: Invalid value: {"apiVersion":"v1","kind":"Event","name":"e","uid":"u"}: /v1, Kind=Event is disallowed from being an owner"#
            ]
        );
        assert!(meta_errs(json!({"name": "x", "ownerReferences": [{"apiVersion": "events.k8s.io/v1", "kind": "Event", "name": "e", "uid": "u"}]})).is_empty());
    }

    #[test]
    fn finalizers_are_validated() {
        assert!(
            meta_errs(
                json!({"name": "x", "finalizers": ["example.com/cleanup", "kubernetes", "orphan"]})
            )
            .is_empty()
        );
        assert_eq!(
            meta_errs(json!({"name": "x", "finalizers": ["bad finalizer"]})),
            vec![format!(
                "metadata.finalizers: Invalid value: \"bad finalizer\": {NAME_PART_MSG}"
            )]
        );
        assert_eq!(
            meta_errs(json!({"name": "x", "finalizers": ["orphan", "foregroundDeletion"]})),
            vec![
                r#"metadata.finalizers: Invalid value: ["orphan","foregroundDeletion"]: finalizer orphan and foregroundDeletion cannot be both set"#
            ]
        );
    }

    #[test]
    fn wrong_json_types_are_reported() {
        assert_eq!(
            strings(&validate_metadata(&json!("x"), NameRule::Subdomain)),
            vec!["metadata: Invalid value: \"x\": must be an object"]
        );
        assert_eq!(
            meta_errs(json!({"name": 5})),
            vec![
                "metadata.name: Invalid value: 5: must be a string",
                "metadata.name: Required value: name or generateName is required"
            ]
        );
        assert_eq!(
            meta_errs(json!({"name": "x", "labels": ["a"], "annotations": {"a": 1}})),
            vec![
                r#"metadata.labels: Invalid value: ["a"]: must be an object"#,
                "metadata.annotations[a]: Invalid value: 1: must be a string"
            ]
        );
        assert_eq!(
            meta_errs(json!({"name": "x", "ownerReferences": {"a": 1}, "finalizers": "f"})),
            vec![
                r#"metadata.ownerReferences: Invalid value: {"a":1}: must be an array"#,
                "metadata.finalizers: Invalid value: \"f\": must be an array"
            ]
        );
        assert_eq!(
            meta_errs(
                json!({"name": "x", "ownerReferences": [7, {"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u", "controller": "yes"}], "finalizers": [null]})
            ),
            vec![
                "metadata.ownerReferences[0]: Invalid value: 7: must be an object",
                "metadata.ownerReferences[1].controller: Invalid value: \"yes\": must be a boolean",
                "metadata.finalizers[0]: Invalid value: null: must be a string"
            ]
        );
    }

    #[test]
    fn field_error_formats() {
        assert_eq!(
            FieldError::required("spec.selector", "").to_string(),
            "spec.selector: Required value"
        );
        assert_eq!(
            FieldError::forbidden("metadata.namespace", "not allowed on this type").to_string(),
            "metadata.namespace: Forbidden: not allowed on this type"
        );
        assert_eq!(
            FieldError::duplicate("spec.ports[1].name", "http").to_string(),
            "spec.ports[1].name: Duplicate value: \"http\""
        );
        assert_eq!(
            FieldError::not_supported("spec.type", "Weird", &["ClusterIP", "NodePort"]).to_string(),
            "spec.type: Unsupported value: \"Weird\": supported values: \"ClusterIP\", \"NodePort\""
        );
        assert_eq!(
            FieldError::too_long("x", 1).to_string(),
            "x: Too long: may not be more than 1 byte"
        );
        assert_eq!(
            FieldError::invalid("spec.replicas", -1, "must be greater than or equal to 0")
                .to_string(),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            FieldError::invalid("a", true, "").to_string(),
            "a: Invalid value: true"
        );
        let omitted = FieldError {
            field: "a".into(),
            kind: FieldErrorKind::Invalid,
            value: None,
            detail: "d".into(),
        };
        assert_eq!(omitted.to_string(), "a: Invalid value: d");
        assert_eq!(omitted.body(), "Invalid value: d");
        assert_eq!(
            FieldError::invalid("a", "quo\"te\n", "x").to_string(),
            "a: Invalid value: \"quo\\\"te\\n\": x"
        );
        assert_eq!(FieldErrorKind::Invalid.cause_type(), "FieldValueInvalid");
        assert_eq!(FieldErrorKind::Required.cause_type(), "FieldValueRequired");
        assert_eq!(
            FieldErrorKind::NotSupported.cause_type(),
            "FieldValueNotSupported"
        );
    }

    #[test]
    fn invalid_messages() {
        let one = validate_name("Bad_Name", NameRule::Subdomain);
        assert_eq!(
            invalid_message("ConfigMap", "Bad_Name", &one),
            format!(
                "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": {SUBDOMAIN_MSG}"
            )
        );
        let two = vec![
            FieldError::required("spec.a", "x"),
            FieldError::required("spec.b", "y"),
            FieldError::required("spec.a", "x"),
        ];
        assert_eq!(
            invalid_message("Deployment.apps", "web", &two),
            "Deployment.apps \"web\" is invalid: [spec.a: Required value: x, spec.b: Required value: y]"
        );
        assert_eq!(invalid_message("Pod", "p", &[]), "Pod \"p\" is invalid");
        let dup = vec![
            FieldError::required("a", "b"),
            FieldError::required("a", "b"),
        ];
        assert_eq!(
            invalid_message("Pod", "p", &dup),
            "Pod \"p\" is invalid: a: Required value: b"
        );
    }

    #[test]
    fn name_suffixes() {
        let s = generate_name_suffix(0);
        assert_eq!(s, "bbbbb");
        for r in [1, 42, u64::MAX, 0xdead_beef, 14_348_906] {
            let s = generate_name_suffix(r);
            assert_eq!(s.len(), 5);
            assert!(s.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)), "{s}");
            assert_eq!(generate_name_suffix(r), s, "deterministic");
        }
        assert_ne!(generate_name_suffix(1), generate_name_suffix(2));
        assert_eq!(generate_name_suffix(26), "9bbbb");
    }

    #[test]
    fn generated_names_fit_63_bytes() {
        let name = generate_name("web-", 7);
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert!(validate_name(&name, NameRule::Label).is_empty());
        let long = generate_name(&"a".repeat(100), 3);
        assert_eq!(long.len(), 63);
        assert!(long.starts_with(&"a".repeat(58)));
        let multibyte = generate_name(&format!("{}é", "a".repeat(57)), 3);
        assert!(
            multibyte.starts_with(&"a".repeat(57)) && multibyte.len() == 62,
            "{multibyte}"
        );
    }
}
