//! CustomResourceDefinition logic for the embedded API server.
//!
//! This module owns everything about a CRD that involves neither storage nor HTTP:
//!
//! - [`Schema`]: the structural schema of one CRD version, built once from its `openAPIV3Schema` and reused
//!   for every request. It prunes unknown fields ([`Schema::prune`]), fills in `default:` values
//!   ([`Schema::apply_defaults`]) and validates custom resources ([`Schema::validate`]) the way
//!   kube-apiserver does. The server runs them in that order: prune, default, validate.
//! - [`parse_crd`]: validation of an `apiextensions.k8s.io/v1` CustomResourceDefinition with
//!   apiserver-style field errors, returning the [`CrdInfo`] the server routes and serves with.
//! - [`apply_crd_defaults`] and [`crd_status`]: the fields the apiserver and its naming and establishing
//!   controllers fill in on a CRD.
//!
//! Error paths and messages follow kube-apiserver 1.36 (apiextensions-apiserver and kube-openapi).
//! `pattern`, `format` (see [`super::formats`]), `allOf`/`anyOf`/`oneOf`/`not` and the CEL rules of
//! `x-kubernetes-validations` (see [`super::cel_rules`]) are checked, and so is the uniqueness of
//! `x-kubernetes-list-type: set|map` items. Known gaps: `default:` values are not validated against their own schema, the
//! metadata of embedded resources is not coerced, and only the `None` conversion strategy is accepted.

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};

use kube_apimachinery::names::{
    go_quote, is_dns1035_label_characters, is_dns1123_subdomain_characters,
};

/// The OpenAPI v3 types a CRD schema may declare, sorted as the apiserver lists them.
const SCHEMA_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
/// Fields of a resource that pruning leaves to the server (`TypeMeta` and `ObjectMeta`).
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];
/// Types an `additionalPrinterColumns` entry may have.
const COLUMN_TYPES: &str = "boolean,date,integer,number,string";
/// Formats an `additionalPrinterColumns` entry may have.
const COLUMN_FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";
// ---------------------------------------------------------------------------------------------------------
// Field errors
// ---------------------------------------------------------------------------------------------------------

/// One field error, displayed as kube-apiserver renders a `field.Error`: `<field>: <detail>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// Path of the offending field, e.g. `spec.size` or `spec.items[0].name`.
    pub field: String,
    /// The error body, e.g. `Invalid value: "string": spec.size in body must be of type integer: "string"`.
    pub detail: String,
}

impl fmt::Display for SchemaViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.detail)
    }
}

impl SchemaViolation {
    /// The `metav1.StatusCause` reason of this error (`FieldValueInvalid`, `FieldValueRequired`, ...),
    /// for the `details.causes` of a 422 Status.
    pub fn reason(&self) -> &'static str {
        let detail = self.detail.as_str();
        if detail.starts_with("Required value") {
            "FieldValueRequired"
        } else if detail.starts_with("Unsupported value") {
            "FieldValueNotSupported"
        } else if detail.starts_with("Forbidden") {
            "FieldValueForbidden"
        } else if detail.starts_with("Too long") {
            "FieldValueTooLong"
        } else if detail.starts_with("Too many") {
            "FieldValueTooMany"
        } else if detail.starts_with("Duplicate value") {
            "FieldValueDuplicate"
        } else if detail.contains(" in body must be of type ") {
            "FieldValueTypeInvalid"
        } else {
            "FieldValueInvalid"
        }
    }
}

/// `field.Required`.
fn required(field: &str, detail: &str) -> SchemaViolation {
    let detail = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    SchemaViolation {
        field: field.to_string(),
        detail,
    }
}

/// `field.Invalid` (also `field.TypeInvalid`, which renders the same); `bad` is already rendered.
fn invalid(field: &str, bad: &str, detail: &str) -> SchemaViolation {
    SchemaViolation {
        field: field.to_string(),
        detail: format!("Invalid value: {bad}: {detail}"),
    }
}

/// `field.Duplicate`: the value as Go renders it (strings quoted, numbers bare, anything else
/// as JSON with sorted keys).
fn duplicate(field: &str, value: &Value) -> SchemaViolation {
    let shown = match value {
        Value::String(s) => go_quote(s),
        Value::Number(n) => go_number(n),
        other => sorted_json(other),
    };
    SchemaViolation {
        field: field.to_string(),
        detail: format!("Duplicate value: {shown}"),
    }
}

/// Compact JSON with object keys sorted, as Go's `encoding/json` writes a map.
fn sorted_json(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), sorted_json(&m[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(sorted_json).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// `field.NotSupported`; `bad` is already rendered.
fn not_supported<S: AsRef<str>>(field: &str, bad: &str, supported: &[S]) -> SchemaViolation {
    let quoted: Vec<String> = supported.iter().map(|s| go_quote(s.as_ref())).collect();
    SchemaViolation {
        field: field.to_string(),
        detail: format!(
            "Unsupported value: {bad}: supported values: {}",
            quoted.join(", ")
        ),
    }
}

/// `field.Forbidden`.
fn forbidden(field: &str, detail: &str) -> SchemaViolation {
    SchemaViolation {
        field: field.to_string(),
        detail: format!("Forbidden: {detail}"),
    }
}

/// `field.TooLong`.
fn too_long(field: &str, max: u64) -> SchemaViolation {
    let unit = if max == 1 { "byte" } else { "bytes" };
    SchemaViolation {
        field: field.to_string(),
        detail: format!("Too long: may not be more than {max} {unit}"),
    }
}

/// `field.TooMany`.
fn too_many(field: &str, actual: u64, max: u64) -> SchemaViolation {
    let unit = if max == 1 { "item" } else { "items" };
    SchemaViolation {
        field: field.to_string(),
        detail: format!("Too many: {actual}: must have at most {max} {unit}"),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Go value rendering (the apiserver prints bad values with Go's fmt)
// ---------------------------------------------------------------------------------------------------------

/// Go's `%v` of a float64: shortest representation, exponent form outside `1e-4 <= |f| < 1e6`.
fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        format!("{f}")
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    }
}

/// A JSON number as the apiserver's decoder sees it: int64 when integral and in range, float64 otherwise.
fn go_number(n: &serde_json::Number) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        None => go_float(n.as_f64().unwrap_or(f64::NAN)),
    }
}

/// Go's `%#v` of a decoded JSON value (`map[string]interface {}{...}`, `[]interface {}{...}`).
fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let entries: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_sharp_v(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", entries.join(", "))
        }
    }
}

/// A bad value as `field.Error` prints it (`%q` for strings, `%v` for scalars, `%#v` otherwise).
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => go_quote("null"),
        Value::String(s) => go_quote(s),
        other => go_sharp_v(other),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Structural schema
// ---------------------------------------------------------------------------------------------------------

/// Error building a [`Schema`]: every violation of the structural-schema rules that was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid openAPIV3Schema: {}", join_violations(.violations))]
pub struct SchemaError {
    /// The violations, with paths rooted at the schema (`openAPIV3Schema.properties[spec].type`).
    pub violations: Vec<SchemaViolation>,
}

/// Joins violations for [`SchemaError`]'s message.
fn join_violations(violations: &[SchemaViolation]) -> String {
    let parts: Vec<String> = violations.iter().map(ToString::to_string).collect();
    parts.join("; ")
}

/// What `additionalProperties` says about the fields not listed in `properties`.
#[derive(Clone, Debug, Default)]
enum Additional {
    /// Not set: unknown fields are pruned.
    #[default]
    Absent,
    /// `true`: any key is allowed, its value is pruned as if it had no schema.
    Any,
    /// `false`: no other key is allowed.
    Never,
    /// A schema every other value must follow.
    Schema(Box<Schema>),
}

/// Where a schema node sits, which decides the message for a missing `type`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Field,
    Item,
}

/// The structural schema of one CRD version, built once by [`Schema::from_openapi`].
#[derive(Clone, Debug, Default)]
pub struct Schema {
    /// `type` as written in the CRD.
    declared_type: Option<&'static str>,
    /// Types a value may have (`integer,string` for int-or-string); empty accepts any type.
    types: Vec<&'static str>,
    nullable: bool,
    int_or_string: bool,
    preserve_unknown: bool,
    embedded: bool,
    default: Option<Value>,
    enum_values: Option<Vec<Value>>,
    required: Vec<String>,
    /// Declared properties in schema order (the order defaults are added in).
    properties: Vec<(String, Schema)>,
    items: Option<Box<Schema>>,
    additional: Additional,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: bool,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    /// `pattern`, as written and compiled.
    pattern: Option<(String, regex::Regex)>,
    /// `format` of a string.
    format: Option<String>,
    all_of: Vec<Schema>,
    any_of: Vec<Schema>,
    one_of: Vec<Schema>,
    not: Option<Box<Schema>>,
    /// `x-kubernetes-validations`.
    rules: Option<super::cel_rules::Rules>,
    /// `x-kubernetes-list-type` and `x-kubernetes-list-map-keys`, to correlate old list items.
    list_type: Option<String>,
    list_map_keys: Vec<String>,
}

impl Schema {
    #[cfg(test)]
    /// Builds the structural schema of a CRD version from its `schema.openAPIV3Schema` JSON, rejecting
    /// schemas the apiserver rejects as non-structural (paths start at `openAPIV3Schema`).
    pub fn from_openapi(v: &Value) -> Result<Schema, SchemaError> {
        parse_schema(v, "openAPIV3Schema")
    }

    /// Removes fields not declared by the schema (structural pruning) and returns their paths, sorted, in
    /// the apiserver's format (`spec.unknownField`, `spec.items[0].bad`: no leading dot, as in its
    /// `unknown field "spec.unknownField"` warnings). `apiVersion`, `kind` and `metadata` are never pruned at
    /// the root nor in `x-kubernetes-embedded-resource` objects. Also drops, without reporting them, nulls
    /// in fields that are neither nullable nor defaulted, as the apiserver does before defaulting.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        prune_value(obj, Some(self), true, "", &mut pruned);
        prune_nulls(obj, Some(self));
        pruned.sort();
        pruned
    }

    /// Applies `default:` values to missing properties (and to nulls where null is not allowed),
    /// recursing into existing and freshly defaulted values. Call after [`Schema::prune`].
    pub fn apply_defaults(&self, obj: &mut Value) {
        apply_defaults_to(obj, self);
    }

    /// Validates `obj` against the schema as kube-openapi does: type (integral floats such as `3.0` pass
    /// as integers, `1.5` does not), nullable, enum, required, minimum/maximum (with exclusive variants),
    /// multipleOf, minLength/maxLength (counted in characters), minItems/maxItems,
    /// minProperties/maxProperties, `x-kubernetes-int-or-string`, `pattern`, `format` and the
    /// composition keywords (`allOf`, `anyOf`, `oneOf`, `not`). CEL rules: [`Schema::validate_update`].
    #[cfg(test)]
    pub fn validate(&self, obj: &Value) -> Vec<SchemaViolation> {
        self.validate_update(obj, None)
    }

    /// [`Schema::validate`], then the CEL rules (`x-kubernetes-validations`) with `old` the stored
    /// object on update (transition rules run only then).
    pub fn validate_update(&self, obj: &Value, old: Option<&Value>) -> Vec<SchemaViolation> {
        let mut out = Vec::new();
        self.validate_at(obj, "", &mut out);
        self.check_list_types(obj, "", &mut out);
        if !self.has_rules() {
            return out;
        }
        // The CRD strategy's `hasBlockingErr`: after an error of these types the rules are not run.
        let blocking = out.iter().any(|v| {
            matches!(
                v.reason(),
                "FieldValueNotSupported"
                    | "FieldValueRequired"
                    | "FieldValueTooLong"
                    | "FieldValueTooMany"
                    | "FieldValueTypeInvalid"
            )
        });
        if blocking {
            out.push(SchemaViolation {
                field: "<nil>".to_string(),
                detail: "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".to_string(),
            });
            return out;
        }
        let mut rule_errs = Vec::new();
        self.evaluate_rules(obj, old, "<nil>", &mut rule_errs);
        out.extend(rule_errs.into_iter().map(|e| SchemaViolation {
            field: e.field,
            detail: e.body,
        }));
        out
    }

    /// Whether this node or one below it has CEL rules.
    fn has_rules(&self) -> bool {
        self.rules.is_some()
            || self.properties.iter().any(|(_, p)| p.has_rules())
            || self.items.as_ref().is_some_and(|i| i.has_rules())
            || matches!(&self.additional, Additional::Schema(a) if a.has_rules())
            || self.all_of.iter().any(Schema::has_rules)
    }

    /// The CEL walk of apiextensions-apiserver's `cel.Validator`: rules of this node, of its
    /// `allOf` branches, then of properties (`.name`), map values (`[key]`) and list items
    /// (`[i]`), with old values correlated by key (objects, `listType: map`) or equality (`set`).
    fn evaluate_rules(
        &self,
        v: &Value,
        old: Option<&Value>,
        field: &str,
        out: &mut Vec<super::cel_rules::RuleError>,
    ) {
        if v.is_null() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        if let Some(rules) = &self.rules {
            rules.evaluate(v, old, field, out);
        }
        for s in &self.all_of {
            s.evaluate_rules(v, old, field, out);
        }
        let child_field = |name: &str| {
            if field == "<nil>" {
                name.to_string()
            } else {
                format!("{field}.{name}")
            }
        };
        let at = |suffix: String| {
            if field == "<nil>" {
                suffix
            } else {
                format!("{field}{suffix}")
            }
        };
        match v {
            Value::Object(map) => {
                let old_map = old.and_then(Value::as_object);
                for (k, val) in map {
                    let old_val = old_map.and_then(|m| m.get(k));
                    if let Some(prop) = self.property(k) {
                        prop.evaluate_rules(val, old_val, &child_field(k), out);
                    } else if let Additional::Schema(s) = &self.additional {
                        s.evaluate_rules(val, old_val, &at(format!("[{k}]")), out);
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = &self.items else {
                    return;
                };
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|olds| match self.list_type.as_deref() {
                        Some("map") => olds
                            .iter()
                            .find(|o| self.list_map_keys.iter().all(|k| o.get(k) == item.get(k))),
                        Some("set") => olds.iter().find(|o| json_eq(o, item)),
                        _ => None,
                    });
                    item_schema.evaluate_rules(item, old_item, &at(format!("[{i}]")), out);
                }
            }
            _ => {}
        }
    }

    /// apiextensions-apiserver's `structurallisttype.ValidateListSetsAndMaps`: items of a
    /// `set` list must be unique (each duplicated value reported once, at its first repeat) and
    /// items of a `map` list unique by their `x-kubernetes-list-map-keys` (every repeat
    /// reported, with the key fields as its value); then the same below, lists before their
    /// items. Paths as `field.Path` renders them (`spec.tags[2]`, `spec.labels[key]`).
    fn check_list_types(&self, v: &Value, field: &str, out: &mut Vec<SchemaViolation>) {
        match v {
            Value::Object(map) => {
                if let Additional::Schema(s) = &self.additional {
                    for (k, val) in map {
                        s.check_list_types(val, &format!("{field}[{k}]"), out);
                    }
                }
                for (k, val) in map {
                    if let Some(p) = self.property(k) {
                        p.check_list_types(val, &child(field, k), out);
                    }
                }
            }
            Value::Array(items) => {
                match self.list_type.as_deref() {
                    Some("set") => {
                        let mut reported: Vec<&Value> = Vec::new();
                        for (i, x) in items.iter().enumerate() {
                            if items[..i].iter().any(|y| json_eq(x, y))
                                && !reported.iter().any(|y| json_eq(x, y))
                            {
                                reported.push(x);
                                out.push(duplicate(&format!("{field}[{i}]"), x));
                            }
                        }
                    }
                    Some("map") => {
                        let key_of = |x: &Value| -> Value {
                            let mut key = std::collections::BTreeMap::new();
                            for k in &self.list_map_keys {
                                let val = x.get(k).cloned().or_else(|| {
                                    self.items
                                        .as_ref()
                                        .and_then(|i| i.property(k))
                                        .and_then(|p| p.default.clone())
                                });
                                if let Some(val) = val {
                                    key.insert(k.clone(), val);
                                }
                            }
                            serde_json::to_value(key).unwrap_or_default()
                        };
                        let mut seen: Vec<Value> = Vec::new();
                        for (i, x) in items.iter().enumerate() {
                            let key = key_of(x);
                            if seen.iter().any(|k| json_eq(k, &key)) {
                                out.push(duplicate(&format!("{field}[{i}]"), &key));
                            } else {
                                seen.push(key);
                            }
                        }
                    }
                    _ => {}
                }
                if let Some(item_schema) = &self.items {
                    for (i, item) in items.iter().enumerate() {
                        item_schema.check_list_types(item, &format!("{field}[{i}]"), out);
                    }
                }
            }
            _ => {}
        }
    }

    /// The schema of a list's items.
    pub(crate) fn items_schema(&self) -> Option<&Schema> {
        self.items.as_deref()
    }

    /// `x-kubernetes-list-type`.
    pub(crate) fn list_type(&self) -> Option<&str> {
        self.list_type.as_deref()
    }

    /// `x-kubernetes-list-map-keys`.
    pub(crate) fn list_map_keys(&self) -> &[String] {
        &self.list_map_keys
    }

    /// The schema of a declared property.
    fn property(&self, name: &str) -> Option<&Schema> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, s)| s)
    }

    /// The schema pruning applies to an undeclared key: `None` when the key is not allowed at all,
    /// `Some(None)` when it is allowed without a schema.
    fn additional_for_prune(&self) -> Option<Option<&Schema>> {
        match &self.additional {
            Additional::Absent => None,
            Additional::Any | Additional::Never => Some(None),
            Additional::Schema(s) => Some(Some(s)),
        }
    }

    /// The schema of a field (a declared property, else `additionalProperties`).
    pub(crate) fn field_schema(&self, name: &str) -> Option<&Schema> {
        match (self.property(name), &self.additional) {
            (Some(s), _) => Some(s),
            (None, Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }

    fn validate_at(&self, v: &Value, path: &str, out: &mut Vec<SchemaViolation>) {
        if v.is_null() {
            if !self.types.is_empty() && !self.nullable {
                out.push(self.type_error(path, "null"));
            }
            self.check_enum(v, path, out);
            return;
        }
        if !self.types.is_empty() && !self.type_matches(v) {
            out.push(self.type_error(path, json_type(v)));
        }
        match v {
            Value::String(s) => self.check_string(s, path, out),
            Value::Number(n) => self.check_number(n, path, out),
            Value::Array(items) => self.check_array(items, path, out),
            _ => {}
        }
        self.check_enum(v, path, out);
        if let Value::Object(map) = v {
            self.check_object(map, path, out);
        }
        self.check_composition(v, path, out);
    }

    /// `anyOf`, `oneOf`, `allOf` and `not`, as kube-openapi's `schemaPropsValidator` reports them
    /// (its composite errors are not field errors: the apiserver renders them at `<nil>` with an
    /// empty value), followed by the errors of the closest failing branch.
    fn check_composition(&self, v: &Value, path: &str, out: &mut Vec<SchemaViolation>) {
        let composite = |msg: String| SchemaViolation {
            field: "<nil>".to_string(),
            detail: format!("Invalid value: \"\": {msg}"),
        };
        let run = |s: &Schema| {
            let mut errs = Vec::new();
            s.validate_at(v, path, &mut errs);
            errs
        };
        let fewest = |results: Vec<Vec<SchemaViolation>>| {
            results.into_iter().min_by_key(Vec::len).unwrap_or_default()
        };
        if !self.any_of.is_empty() {
            let results: Vec<_> = self.any_of.iter().map(run).collect();
            if results.iter().all(|r| !r.is_empty()) {
                out.push(composite(format!(
                    "{} must validate at least one schema (anyOf)",
                    go_quote(path)
                )));
                out.extend(fewest(results));
            }
        }
        if !self.one_of.is_empty() {
            let results: Vec<_> = self.one_of.iter().map(run).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid != 1 {
                let more = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                out.push(composite(format!(
                    "{} must validate one and only one schema (oneOf). {more}",
                    go_quote(path)
                )));
                if valid == 0 {
                    out.extend(fewest(results));
                }
            }
        }
        if !self.all_of.is_empty() {
            let results: Vec<_> = self.all_of.iter().map(run).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            for r in results {
                out.extend(r);
            }
            if valid != self.all_of.len() {
                let more = if valid == 0 { ". None validated" } else { "" };
                out.push(composite(format!(
                    "{} must validate all the schemas (allOf){more}",
                    go_quote(path)
                )));
            }
        }
        if let Some(not) = &self.not
            && run(not).is_empty()
        {
            out.push(composite(format!(
                "{} must not validate the schema (not)",
                go_quote(path)
            )));
        }
    }

    fn type_matches(&self, v: &Value) -> bool {
        let actual = json_type(v);
        if self.types.contains(&actual) {
            return true;
        }
        match v {
            Value::Number(n) if actual == "number" => {
                self.types.contains(&"integer") && n.as_f64().is_some_and(is_json_integer)
            }
            Value::Number(_) => self.types.contains(&"number"),
            _ => false,
        }
    }

    fn type_error(&self, path: &str, actual: &str) -> SchemaViolation {
        let actual = go_quote(actual);
        invalid(
            &field_of(path),
            &actual,
            &format!(
                "{path} in body must be of type {}: {actual}",
                self.types.join(",")
            ),
        )
    }

    fn check_string(&self, s: &str, path: &str, out: &mut Vec<SchemaViolation>) {
        let len = s.chars().count() as u64;
        if let Some(max) = self.max_length
            && len > max
        {
            out.push(too_long(&field_of(path), max));
            return;
        }
        if let Some(min) = self.min_length
            && len < min
        {
            let detail = format!("{path} in body should be at least {min} chars long");
            out.push(invalid(&field_of(path), &go_quote(s), &detail));
        }
        if let Some((pattern, re)) = &self.pattern
            && !re.is_match(s)
        {
            let detail = format!("{path} in body should match '{pattern}'");
            out.push(invalid(&field_of(path), &go_quote(s), &detail));
        }
        if let Some(format) = &self.format
            && !super::formats::is_valid(format, s)
        {
            let detail = format!("{path} in body must be of type {format}: {}", go_quote(s));
            out.push(invalid(&field_of(path), &go_quote(s), &detail));
        }
    }

    fn check_number(&self, n: &serde_json::Number, path: &str, out: &mut Vec<SchemaViolation>) {
        let field = field_of(path);
        let bad = go_number(n);
        // The apiserver decodes integral numbers as int64 and compares them with the limits truncated to
        // int64; everything else is compared as float64.
        if let Some(i) = n.as_i64() {
            if let Some(m) = self.multiple_of.filter(|m| *m >= 1.0) {
                let factor = m as i64;
                if i.checked_rem(factor).is_some_and(|r| r != 0) {
                    let detail = format!("{path} in body should be a multiple of {factor}");
                    out.push(invalid(&field, &bad, &detail));
                }
            } else if let Some(m) = self.multiple_of.filter(|m| *m > 0.0) {
                self.check_float_multiple(i as f64, m, path, &bad, out);
            }
            if let Some(min) = self.minimum {
                let limit = min as i64;
                if i < limit || (self.exclusive_minimum && i == limit) {
                    let detail = format!(
                        "{path} in body should be {} {limit}",
                        min_word(self.exclusive_minimum)
                    );
                    out.push(invalid(&field, &bad, &detail));
                }
            }
            if let Some(max) = self.maximum {
                let limit = max as i64;
                if i > limit || (self.exclusive_maximum && i == limit) {
                    let detail = format!(
                        "{path} in body should be {} {limit}",
                        max_word(self.exclusive_maximum)
                    );
                    out.push(invalid(&field, &bad, &detail));
                }
            }
            return;
        }
        let f = n.as_f64().unwrap_or(f64::NAN);
        if let Some(m) = self.multiple_of.filter(|m| *m > 0.0) {
            self.check_float_multiple(f, m, path, &bad, out);
        }
        if let Some(min) = self.minimum
            && (f < min || (self.exclusive_minimum && f == min))
        {
            let detail = format!(
                "{path} in body should be {} {}",
                min_word(self.exclusive_minimum),
                go_float(min)
            );
            out.push(invalid(&field, &bad, &detail));
        }
        if let Some(max) = self.maximum
            && (f > max || (self.exclusive_maximum && f == max))
        {
            let detail = format!(
                "{path} in body should be {} {}",
                max_word(self.exclusive_maximum),
                go_float(max)
            );
            out.push(invalid(&field, &bad, &detail));
        }
    }

    fn check_float_multiple(
        &self,
        f: f64,
        m: f64,
        path: &str,
        bad: &str,
        out: &mut Vec<SchemaViolation>,
    ) {
        let quotient = if m < 1.0 { 1.0 / m * f } else { f / m };
        if !is_json_integer(quotient) {
            let detail = format!("{path} in body should be a multiple of {}", go_float(m));
            out.push(invalid(&field_of(path), bad, &detail));
        }
    }

    fn check_array(&self, items: &[Value], path: &str, out: &mut Vec<SchemaViolation>) {
        if let Some(item_schema) = &self.items {
            for (i, item) in items.iter().enumerate() {
                item_schema.validate_at(item, &format!("{path}[{i}]"), out);
            }
        }
        let size = items.len() as u64;
        if let Some(min) = self.min_items
            && size < min
        {
            let detail = format!("{path} in body should have at least {min} items");
            out.push(invalid(&field_of(path), &size.to_string(), &detail));
        }
        if let Some(max) = self.max_items
            && size > max
        {
            out.push(too_many(&field_of(path), size, max));
        }
    }

    fn check_enum(&self, v: &Value, path: &str, out: &mut Vec<SchemaViolation>) {
        let Some(allowed) = &self.enum_values else {
            return;
        };
        if allowed.iter().any(|a| json_eq(v, a)) {
            return;
        }
        let supported: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        out.push(not_supported(&field_of(path), &go_value(v), &supported));
    }

    fn check_object(&self, map: &Map<String, Value>, path: &str, out: &mut Vec<SchemaViolation>) {
        let count = map.len() as u64;
        if let Some(min) = self.min_properties
            && count < min
        {
            let detail = format!("{path} in body should have at least {min} properties");
            out.push(invalid(&field_of(path), &count.to_string(), &detail));
            return;
        }
        if let Some(max) = self.max_properties
            && count > max
        {
            out.push(too_many(&field_of(path), count, max));
            return;
        }
        for (key, value) in map {
            if let Some(prop) = self.property(key) {
                prop.validate_at(value, &child(path, key), out);
                continue;
            }
            match &self.additional {
                Additional::Schema(s) => s.validate_at(value, &format!("{path}.{key}"), out),
                Additional::Never => {
                    let detail = format!("{path}.{key} in body is a forbidden property");
                    out.push(invalid(&field_of(path), &go_quote(key), &detail));
                }
                Additional::Absent | Additional::Any => {}
            }
        }
        for name in &self.required {
            if !map.contains_key(name) {
                out.push(required(&field_of(&format!("{path}.{name}")), ""));
            }
        }
    }
}

fn min_word(exclusive: bool) -> &'static str {
    if exclusive {
        "greater than"
    } else {
        "greater than or equal to"
    }
}

fn max_word(exclusive: bool) -> &'static str {
    if exclusive {
        "less than"
    } else {
        "less than or equal to"
    }
}

/// The JSON type of a value as kube-openapi names it.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.as_i64().is_some() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// go-openapi's `IsFloat64AJSONInteger`: finite, within ±2^53 and integral (up to rounding noise).
fn is_json_integer(f: f64) -> bool {
    const MAX_JSON_FLOAT: f64 = 9_007_199_254_740_992.0;
    if !f.is_finite() || f.abs() > MAX_JSON_FLOAT {
        return false;
    }
    let truncated = f.trunc();
    if f == truncated {
        return true;
    }
    (f - truncated).abs() / (f.abs() + truncated.abs()) < 1e-9
}

/// Equality of JSON values with numbers compared by value (`1` equals `1.0`), as the enum check does.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A field's path below `path`, without a leading dot at the root.
fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The field path the apiserver reports for a kube-openapi error name (one leading dot trimmed).
fn field_of(name: &str) -> String {
    if name == "." {
        return String::new();
    }
    name.strip_prefix('.').unwrap_or(name).to_string()
}

// ---------------------------------------------------------------------------------------------------------
// Pruning and defaulting
// ---------------------------------------------------------------------------------------------------------

/// apiextensions-apiserver's `prune`: `s == None` means "no schema", which drops every object key below.
fn prune_value(x: &mut Value, s: Option<&Schema>, root: bool, path: &str, out: &mut Vec<String>) {
    if let Some(schema) = s
        && schema.preserve_unknown
    {
        skip_prune(x, schema, root, path, out);
        return;
    }
    match x {
        Value::Object(map) => {
            let Some(schema) = s else {
                out.extend(map.keys().map(|k| child(path, k)));
                map.clear();
                return;
            };
            let keep_meta = schema.embedded || root;
            let mut dropped = HashSet::new();
            for (key, value) in map.iter_mut() {
                if keep_meta && is_meta(key) {
                    continue;
                }
                if let Some(prop) = schema.property(key) {
                    prune_value(value, Some(prop), false, &child(path, key), out);
                } else if let Some(additional) = schema.additional_for_prune() {
                    prune_value(value, additional, false, &child(path, key), out);
                } else {
                    if !is_meta(key) || !path.is_empty() {
                        out.push(child(path, key));
                    }
                    dropped.insert(key.clone());
                }
            }
            if !dropped.is_empty() {
                map.retain(|k, _| !dropped.contains(k));
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for (i, item) in items.iter_mut().enumerate() {
                prune_value(item, item_schema, false, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// apiextensions-apiserver's `skipPrune`: under `x-kubernetes-preserve-unknown-fields` unknown keys stay,
/// declared ones are still pruned below.
fn skip_prune(x: &mut Value, s: &Schema, root: bool, path: &str, out: &mut Vec<String>) {
    match x {
        Value::Object(map) => {
            let keep_meta = s.embedded || root;
            for (key, value) in map.iter_mut() {
                if keep_meta && is_meta(key) {
                    continue;
                }
                if let Some(prop) = s.property(key) {
                    prune_value(value, Some(prop), false, &child(path, key), out);
                } else if let Some(additional) = s.additional_for_prune() {
                    prune_value(value, additional, false, &child(path, key), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    skip_prune(item, item_schema, false, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// `PruneNonNullableNullsWithoutDefaults`: removes nulls from fields that are neither nullable nor defaulted.
fn prune_nulls(x: &mut Value, s: Option<&Schema>) {
    match x {
        Value::Object(map) => {
            let mut dropped = HashSet::new();
            for (key, value) in map.iter_mut() {
                let field_schema = s.and_then(|s| s.field_schema(key));
                if value.is_null()
                    && field_schema.is_some_and(|f| !f.nullable && f.default.is_none())
                {
                    dropped.insert(key.clone());
                } else {
                    prune_nulls(value, field_schema);
                }
            }
            if !dropped.is_empty() {
                map.retain(|k, _| !dropped.contains(k));
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for item in items {
                prune_nulls(item, item_schema);
            }
        }
        _ => {}
    }
}

/// apiextensions-apiserver's `Default`.
fn apply_defaults_to(x: &mut Value, s: &Schema) {
    match x {
        Value::Object(map) => {
            for (name, prop) in &s.properties {
                let Some(default) = &prop.default else {
                    continue;
                };
                let missing = match map.get(name) {
                    None => true,
                    Some(v) => v.is_null() && !prop.nullable,
                };
                if missing {
                    map.insert(name.clone(), default.clone());
                }
            }
            for (key, value) in map.iter_mut() {
                if let Some(prop) = s.property(key) {
                    apply_defaults_to(value, prop);
                } else if let Additional::Schema(additional) = &s.additional {
                    default_null(value, additional);
                    apply_defaults_to(value, additional);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for item in items {
                    default_null(item, item_schema);
                    apply_defaults_to(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// Replaces a null the schema does not allow with the schema's default, if it has one.
fn default_null(v: &mut Value, s: &Schema) {
    if v.is_null()
        && !s.nullable
        && let Some(default) = &s.default
    {
        *v = default.clone();
    }
}

fn is_meta(key: &str) -> bool {
    META_FIELDS.contains(&key)
}

// ---------------------------------------------------------------------------------------------------------
// Building a schema
// ---------------------------------------------------------------------------------------------------------

/// Builds a schema whose violations are reported below `base` (e.g. `spec.versions[0].schema.openAPIV3Schema`).
fn parse_schema(v: &Value, base: &str) -> Result<Schema, SchemaError> {
    let mut parser = SchemaParser { errs: Vec::new() };
    let schema = parser.node(v, base, Level::Root, None);
    if parser.errs.is_empty() {
        Ok(schema)
    } else {
        let mut violations = parser.errs;
        violations.sort_by_key(ToString::to_string);
        Err(SchemaError { violations })
    }
}

/// Collects the violations found while building a [`Schema`].
struct SchemaParser {
    errs: Vec<SchemaViolation>,
}

impl SchemaParser {
    /// Builds one node; `no_default` is the reason `default:` is forbidden here (top-level metadata).
    fn node(&mut self, v: &Value, path: &str, level: Level, no_default: Option<&str>) -> Schema {
        let Some(obj) = v.as_object() else {
            self.errs
                .push(invalid(path, &go_value(v), "must be a JSON schema object"));
            return Schema::default();
        };
        let mut s = Schema {
            declared_type: self.schema_type(obj, path),
            nullable: self.flag(obj, "nullable", path),
            int_or_string: self.flag(obj, "x-kubernetes-int-or-string", path),
            embedded: self.flag(obj, "x-kubernetes-embedded-resource", path),
            exclusive_minimum: self.flag(obj, "exclusiveMinimum", path),
            exclusive_maximum: self.flag(obj, "exclusiveMaximum", path),
            minimum: self.number(obj, "minimum", path),
            maximum: self.number(obj, "maximum", path),
            multiple_of: self.number(obj, "multipleOf", path),
            min_length: self.count(obj, "minLength", path),
            max_length: self.count(obj, "maxLength", path),
            min_items: self.count(obj, "minItems", path),
            max_items: self.count(obj, "maxItems", path),
            min_properties: self.count(obj, "minProperties", path),
            max_properties: self.count(obj, "maxProperties", path),
            required: self.strings(obj, "required", path),
            ..Schema::default()
        };
        s.types = if s.int_or_string {
            vec!["integer", "string"]
        } else {
            s.declared_type.into_iter().collect()
        };
        s.preserve_unknown = self.preserve_unknown(obj, path);
        s.default = self.default_value(obj, path, no_default);
        s.enum_values = self.enum_values(obj, path);
        self.unsupported_keywords(obj, path);

        s.pattern = self.pattern(obj, path);
        s.format = obj
            .get("format")
            .and_then(Value::as_str)
            .map(str::to_string);
        s.all_of = self.branches(obj, "allOf", path);
        s.any_of = self.branches(obj, "anyOf", path);
        s.one_of = self.branches(obj, "oneOf", path);
        s.not = obj
            .get("not")
            .filter(|n| n.is_object())
            .map(|n| Box::new(self.branch(n, &format!("{path}.not"))));
        s.list_type = obj
            .get("x-kubernetes-list-type")
            .and_then(Value::as_str)
            .map(str::to_string);
        s.list_map_keys = self.strings(obj, "x-kubernetes-list-map-keys", path);
        if let Some(rules) = obj.get("x-kubernetes-validations") {
            let mut errs = Vec::new();
            s.rules = super::cel_rules::compile(rules, path, &mut errs);
            self.errs.extend(errs.into_iter().map(|e| SchemaViolation {
                field: e.field,
                detail: e.detail,
            }));
        }
        s.properties = self.properties(obj, path, level, no_default);
        s.items = self.items(obj, path, no_default);
        s.additional = self.additional(obj, &s, path, level, no_default);
        self.structural_invariants(obj, &s, path, level);
        s
    }

    /// `path.key` holds a value of the wrong kind (`must` says which): reported, and taken as
    /// not set.
    fn wrong_kind<T: Default>(&mut self, path: &str, key: &str, v: &Value, must: &str) -> T {
        self.errs
            .push(invalid(&format!("{path}.{key}"), &go_value(v), must));
        T::default()
    }

    /// `pattern`: a regular expression.
    fn pattern(&mut self, obj: &Map<String, Value>, path: &str) -> Option<(String, regex::Regex)> {
        let p = obj.get("pattern")?.as_str()?;
        match regex::Regex::new(p) {
            Ok(re) => Some((p.to_string(), re)),
            Err(e) => {
                self.errs.push(invalid(
                    &format!("{path}.pattern"),
                    &go_quote(p),
                    &format!("must be a valid regular expression, but isn't: {e}"),
                ));
                None
            }
        }
    }

    /// One `allOf`/`anyOf`/`oneOf`/`not` branch: value validations only (the structural rules
    /// that forbid types there are not checked), its own rules compiled.
    fn branch(&mut self, v: &Value, path: &str) -> Schema {
        let mut inner = SchemaParser { errs: Vec::new() };
        let s = inner.node(v, path, Level::Field, None);
        self.errs.extend(inner.errs.into_iter().filter(|e| {
            e.field.contains("x-kubernetes-validations") || e.field.ends_with(".pattern")
        }));
        s
    }

    /// The branches of `allOf`/`anyOf`/`oneOf`.
    fn branches(&mut self, obj: &Map<String, Value>, key: &str, path: &str) -> Vec<Schema> {
        match obj.get(key) {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, b)| self.branch(b, &format!("{path}.{key}[{i}]")))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// `x-kubernetes-preserve-unknown-fields`: true or undefined.
    fn preserve_unknown(&mut self, obj: &Map<String, Value>, path: &str) -> bool {
        const KEY: &str = "x-kubernetes-preserve-unknown-fields";
        match obj.get(KEY) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(true)) => true,
            Some(Value::Bool(false)) => {
                self.errs.push(invalid(
                    &format!("{path}.{KEY}"),
                    "false",
                    "must be true or undefined",
                ));
                false
            }
            Some(other) => self.wrong_kind(path, KEY, other, "must be a boolean"),
        }
    }

    /// `default`, unless forbidden here (`no_default` says why).
    fn default_value(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        no_default: Option<&str>,
    ) -> Option<Value> {
        let default = obj.get("default").filter(|d| !d.is_null())?;
        match no_default {
            Some(reason) => {
                self.errs.push(forbidden(
                    &format!("{path}.default"),
                    &format!("must not be set {reason}"),
                ));
                None
            }
            None => Some(default.clone()),
        }
    }

    /// `enum`: an array.
    fn enum_values(&mut self, obj: &Map<String, Value>, path: &str) -> Option<Vec<Value>> {
        match obj.get("enum") {
            None | Some(Value::Null) => None,
            Some(Value::Array(values)) => Some(values.clone()),
            Some(other) => self.wrong_kind(path, "enum", other, "must be an array"),
        }
    }

    /// `properties`, each a node (`default:` forbidden in the root's metadata fields).
    fn properties(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        level: Level,
        no_default: Option<&str>,
    ) -> Vec<(String, Schema)> {
        match obj.get("properties") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(props)) => props
                .iter()
                .map(|(name, prop)| {
                    let top_level_meta = format!("in top-level {name}");
                    let prop_no_default = if level == Level::Root && is_meta(name) {
                        Some(top_level_meta.as_str())
                    } else {
                        no_default
                    };
                    let prop_path = format!("{path}.properties[{name}]");
                    let schema = self.node(prop, &prop_path, Level::Field, prop_no_default);
                    (name.clone(), schema)
                })
                .collect(),
            Some(other) => self.wrong_kind(path, "properties", other, "must be an object"),
        }
    }

    /// `items`: one node (not an array of them).
    fn items(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        no_default: Option<&str>,
    ) -> Option<Box<Schema>> {
        let items_path = format!("{path}.items");
        match obj.get("items") {
            None | Some(Value::Null) => None,
            Some(items @ Value::Object(_)) => Some(Box::new(self.node(
                items,
                &items_path,
                Level::Item,
                no_default,
            ))),
            Some(Value::Array(_)) => {
                let detail = "items must be a schema object and not an array";
                self.errs.push(forbidden(&items_path, detail));
                None
            }
            Some(other) => self.wrong_kind(path, "items", other, "must be an object"),
        }
    }

    /// `additionalProperties`: a boolean or a node; not beside `properties` (unless true), at
    /// the root, or in an embedded resource (`s`, the node so far, says which).
    fn additional(
        &mut self,
        obj: &Map<String, Value>,
        s: &Schema,
        path: &str,
        level: Level,
        no_default: Option<&str>,
    ) -> Additional {
        let additional_path = format!("{path}.additionalProperties");
        let additional = match obj.get("additionalProperties") {
            None | Some(Value::Null) => Additional::Absent,
            Some(Value::Bool(true)) => Additional::Any,
            Some(Value::Bool(false)) => Additional::Never,
            Some(schema @ Value::Object(_)) => {
                let schema = self.node(schema, &additional_path, Level::Field, no_default);
                Additional::Schema(Box::new(schema))
            }
            Some(other) => self.wrong_kind(
                path,
                "additionalProperties",
                other,
                "must be a boolean or an object",
            ),
        };
        if !s.properties.is_empty()
            && matches!(additional, Additional::Never | Additional::Schema(_))
        {
            self.errs.push(forbidden(
                &additional_path,
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if !matches!(additional, Additional::Absent) {
            if level == Level::Root {
                self.errs
                    .push(forbidden(&additional_path, "must not be used at the root"));
            }
            if s.embedded {
                self.errs.push(forbidden(
                    &additional_path,
                    "must not be used if x-kubernetes-embedded-resource is set",
                ));
            }
        }
        additional
    }

    /// `validateStructuralInvariants` and the node checks of `ValidateCustomResourceDefinitionOpenAPISchema`.
    fn structural_invariants(
        &mut self,
        obj: &Map<String, Value>,
        s: &Schema,
        path: &str,
        level: Level,
    ) {
        let type_path = format!("{path}.type");
        // A misspelled type or an array-form `items` was already reported; don't report it missing too.
        let type_written = obj
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty());
        let items_written = obj.get("items").is_some_and(|i| !i.is_null());
        if s.declared_type == Some("array") && !items_written {
            self.errs
                .push(required(&format!("{path}.items"), "must be specified"));
        }
        if s.embedded && s.declared_type != Some("object") {
            let detail = "must be object if x-kubernetes-embedded-resource is true";
            match s.declared_type {
                None => self.errs.push(required(&type_path, detail)),
                Some(t) => self.errs.push(invalid(&type_path, &go_quote(t), detail)),
            }
        } else if !type_written && !s.int_or_string && !s.preserve_unknown {
            let detail = match level {
                Level::Root => "must not be empty at the root",
                Level::Item => "must not be empty for specified array items",
                Level::Field => "must not be empty for specified object fields",
            };
            self.errs.push(required(&type_path, detail));
        }
        if level == Level::Root {
            if let Some(t) = s.declared_type.filter(|t| *t != "object") {
                self.errs.push(invalid(
                    &type_path,
                    &go_quote(t),
                    "must be object at the root",
                ));
            }
            if s.nullable {
                self.errs.push(forbidden(
                    &format!("{path}.nullable"),
                    "nullable cannot be true at the root",
                ));
            }
        }
        if s.int_or_string && s.preserve_unknown {
            self.errs.push(invalid(
                &format!("{path}.x-kubernetes-preserve-unknown-fields"),
                "true",
                "must be false if x-kubernetes-int-or-string is true",
            ));
        }
        if s.int_or_string && s.embedded {
            self.errs.push(invalid(
                &format!("{path}.x-kubernetes-embedded-resource"),
                "true",
                "must be false if x-kubernetes-int-or-string is true",
            ));
        }
        if level == Level::Root || s.embedded {
            for (name, want) in [
                ("kind", "string"),
                ("apiVersion", "string"),
                ("metadata", "object"),
            ] {
                let Some(prop) = s.property(name) else {
                    continue;
                };
                if prop.declared_type != Some(want) {
                    let bad = go_quote(prop.declared_type.unwrap_or(""));
                    let field = format!("{path}.properties[{name}].type");
                    self.errs
                        .push(invalid(&field, &bad, &format!("must be {want}")));
                }
            }
        }
        if level == Level::Root
            && let Some(metadata) = obj
                .get("properties")
                .and_then(|p| p.get("metadata"))
                .and_then(Value::as_object)
            && !metadata_is_name_only(metadata)
        {
            self.errs.push(forbidden(
                &format!("{path}.properties[metadata]"),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
        if s.embedded && !s.preserve_unknown && s.properties.is_empty() {
            self.errs.push(required(
                &format!("{path}.properties"),
                "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
            ));
        }
    }

    /// Keywords the apiserver forbids in CRD schemas.
    fn unsupported_keywords(&mut self, obj: &Map<String, Value>, path: &str) {
        for (key, message) in [
            ("$ref", "$ref is not supported"),
            ("id", "id is not supported"),
            ("additionalItems", "additionalItems is not supported"),
            ("patternProperties", "patternProperties is not supported"),
            ("definitions", "definitions is not supported"),
            ("dependencies", "dependencies is not supported"),
        ] {
            if obj.get(key).is_some_and(|v| !is_zero(v)) {
                self.errs.push(forbidden(&format!("{path}.{key}"), message));
            }
        }
        if obj.get("uniqueItems") == Some(&Value::Bool(true)) {
            self.errs.push(forbidden(
                &format!("{path}.uniqueItems"),
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            ));
        }
    }

    fn schema_type(&mut self, obj: &Map<String, Value>, path: &str) -> Option<&'static str> {
        let field = format!("{path}.type");
        match obj.get("type") {
            None | Some(Value::Null) => None,
            Some(Value::String(t)) if t.is_empty() => None,
            Some(Value::String(t)) => {
                if let Some(known) = SCHEMA_TYPES.iter().find(|known| **known == t.as_str()) {
                    return Some(*known);
                }
                if t == "null" {
                    self.errs.push(forbidden(
                        &field,
                        "type cannot be set to null, use nullable as an alternative",
                    ));
                } else {
                    self.errs
                        .push(not_supported(&field, &go_quote(t), &SCHEMA_TYPES));
                }
                None
            }
            Some(other) => {
                self.errs
                    .push(invalid(&field, &go_value(other), "must be a string"));
                None
            }
        }
    }

    fn flag(&mut self, obj: &Map<String, Value>, key: &str, path: &str) -> bool {
        match obj.get(key) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.errs.push(invalid(
                    &format!("{path}.{key}"),
                    &go_value(other),
                    "must be a boolean",
                ));
                false
            }
        }
    }

    fn number(&mut self, obj: &Map<String, Value>, key: &str, path: &str) -> Option<f64> {
        match obj.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => n.as_f64(),
            Some(other) => {
                self.errs.push(invalid(
                    &format!("{path}.{key}"),
                    &go_value(other),
                    "must be a number",
                ));
                None
            }
        }
    }

    fn count(&mut self, obj: &Map<String, Value>, key: &str, path: &str) -> Option<u64> {
        match obj.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
            Some(other) => {
                self.errs.push(invalid(
                    &format!("{path}.{key}"),
                    &go_value(other),
                    "must be a non-negative integer",
                ));
                None
            }
        }
    }

    fn strings(&mut self, obj: &Map<String, Value>, key: &str, path: &str) -> Vec<String> {
        match obj.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            Some(other) => {
                self.errs.push(invalid(
                    &format!("{path}.{key}"),
                    &go_value(other),
                    "must be an array of strings",
                ));
                Vec::new()
            }
        }
    }
}

/// Whether a top-level `metadata` schema restricts nothing but `name` and `generateName`.
fn metadata_is_name_only(metadata: &Map<String, Value>) -> bool {
    metadata.iter().all(|(key, value)| match key.as_str() {
        "type" | "default" => true,
        "properties" => match value.as_object() {
            Some(props) => props.keys().all(|k| k == "name" || k == "generateName"),
            None => is_zero(value),
        },
        _ => is_zero(value),
    })
}

/// Whether a value is what Go would decode as the zero value (absent for the apiserver's checks).
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) => false,
    }
}

// ---------------------------------------------------------------------------------------------------------
// CustomResourceDefinition
// ---------------------------------------------------------------------------------------------------------

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
fn validate_crd_name(crd: &Value, plural: &str, group: &str, errs: &mut Vec<SchemaViolation>) {
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
fn validate_group(group: &str, errs: &mut Vec<SchemaViolation>) {
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
fn parse_versions(spec: &Map<String, Value>, errs: &mut Vec<SchemaViolation>) -> Vec<CrdVersion> {
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
fn validate_conversion(spec: &Map<String, Value>, errs: &mut Vec<SchemaViolation>) {
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
fn parse_version(
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
fn validate_names(
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
fn validate_scale(scale: &Value, path: &str, errs: &mut Vec<SchemaViolation>) {
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
fn validate_column(column: &Value, path: &str, errs: &mut Vec<SchemaViolation>) {
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
fn simple_json_path_error(path: &str, field: &str) -> Option<SchemaViolation> {
    (!path.starts_with('.')).then(|| {
        invalid(
            field,
            &go_quote(path),
            "must be a simple json path starting with .",
        )
    })
}

/// A string field of a CRD object; a missing or null field reads as empty, another type is an error.
fn text(
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
fn texts(
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
fn boolean(
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
fn object_field<'a>(
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
enum ApprovalState {
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
fn approval_state(crd: &Value) -> (&str, ApprovalState) {
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
fn is_absolute_url_with_host(s: &str) -> bool {
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
fn conflict_reason(names: &Map<String, Value>, clash: &str) -> &'static str {
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
fn accepted_names(
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
fn naming_conditions(
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
fn stored_versions(status: Option<&Map<String, Value>>, defaulted: &Value) -> Vec<Value> {
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
fn set_condition(
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `IsDNS1035Label`'s regex error.
    const DNS1035_ERROR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', \
    start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', \
    regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    /// `IsDNS1123Subdomain`'s regex error.
    const DNS1123_SUBDOMAIN_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
    characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used \
    for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    /// The Widget CRD used by the conformance suite.
    fn widget_crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.conf.example.com"},
            "spec": {
                "group": "conf.example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wdg"]},
                "versions": [{
                    "name": "v1",
                    "served": true,
                    "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer"},
                                    "selector": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                                }
                            },
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                        }
                    }}
                }]
            }
        })
    }

    fn widget_schema() -> Schema {
        let crd = widget_crd();
        Schema::from_openapi(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
            .expect("widget schema")
    }

    /// A root schema whose `spec` has the given properties.
    fn spec_schema(properties: Value) -> Schema {
        let schema = json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": properties}}
        });
        Schema::from_openapi(&schema).expect("valid schema")
    }

    fn errors(schema: &Schema, obj: &Value) -> Vec<String> {
        schema
            .validate(obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn schema_errors(schema: Value) -> Vec<String> {
        match Schema::from_openapi(&schema) {
            Ok(_) => Vec::new(),
            Err(e) => e.violations.iter().map(ToString::to_string).collect(),
        }
    }

    fn crd_errors(crd: &Value) -> Vec<String> {
        match parse_crd(crd) {
            Ok(_) => Vec::new(),
            Err(errs) => errs,
        }
    }

    #[test]
    fn crds_in_protected_groups_need_the_approval_annotation() {
        let crd = |group: &str, annotation: Option<&str>| {
            let mut c = widget_crd();
            c["spec"]["group"] = json!(group);
            c["metadata"]["name"] = json!(format!("widgets.{group}"));
            if let Some(a) = annotation {
                c["metadata"]["annotations"] = json!({API_APPROVED_ANNOTATION: a});
            }
            c
        };
        for group in [
            "k8s.io",
            "metacontroller.k8s.io",
            "kubernetes.io",
            "x.kubernetes.io",
        ] {
            assert!(is_protected_group(group), "{group}");
            assert_eq!(
                api_approval_error(&crd(group, None), None).as_deref(),
                Some(
                    "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
                ),
                "{group}"
            );
            for ok in [
                "unapproved, request not yet submitted",
                "unapproved",
                "https://github.com/kubernetes/enhancements/pull/1111",
            ] {
                assert_eq!(
                    api_approval_error(&crd(group, Some(ok)), None),
                    None,
                    "{ok}"
                );
            }
            assert_eq!(
                api_approval_error(&crd(group, Some("approved")), None).as_deref(),
                Some(
                    "metadata.annotations[api-approved.kubernetes.io]: Invalid value: \"approved\": protected groups must have approval annotation \"api-approved.kubernetes.io\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
                )
            );
        }
        for group in [
            "conf.example.com",
            "k8s.io.example.com",
            "notk8s.io",
            "example.kubectl-meta.dev",
        ] {
            assert!(!is_protected_group(group), "{group}");
            assert_eq!(api_approval_error(&crd(group, None), None), None, "{group}");
        }
        // An update that leaves the state as it was is never refused (a CRD stored before the
        // rule, or one whose spec a controller edits); one that makes it invalid is.
        let stored = crd("metacontroller.k8s.io", None);
        assert_eq!(api_approval_error(&stored, Some(&stored)), None);
        let bad = crd("metacontroller.k8s.io", Some("yes"));
        assert!(api_approval_error(&bad, Some(&stored)).is_some());
        let good = crd("metacontroller.k8s.io", Some("unapproved"));
        assert!(api_approval_error(&stored, Some(&good)).is_some());
    }

    // --- pruning ---

    #[test]
    fn prune_reports_unknown_fields_and_keeps_preserved_subtrees() {
        let schema = widget_schema();
        let mut obj = json!({
            "apiVersion": "conf.example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "labels": {"a": "b"}, "bogus": 1},
            "spec": {"size": 3, "unknownField": "x", "selector": {"matchLabels": {"app": "w"}, "any": [1, {"x": 2}]}},
            "status": {"ready": true, "nested": {"deep": 1}},
            "extra": {"a": 1}
        });
        let pruned = schema.prune(&mut obj);
        assert_eq!(pruned, vec!["extra", "spec.unknownField"]);
        assert_eq!(
            obj,
            json!({
                "apiVersion": "conf.example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w", "labels": {"a": "b"}, "bogus": 1},
                "spec": {"size": 3, "selector": {"matchLabels": {"app": "w"}, "any": [1, {"x": 2}]}},
                "status": {"ready": true, "nested": {"deep": 1}}
            })
        );
    }

    #[test]
    fn prune_keeps_key_order_of_remaining_fields() {
        let schema = spec_schema(
            json!({"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}}),
        );
        let mut obj = json!({"spec": {"c": "3", "x": 0, "a": "1", "b": "2"}});
        schema.prune(&mut obj);
        let keys: Vec<&String> = obj["spec"].as_object().expect("object").keys().collect();
        assert_eq!(keys, vec!["c", "a", "b"]);
    }

    #[test]
    fn prune_recurses_through_arrays_of_objects() {
        let schema = spec_schema(json!({
            "containers": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}}
            }}}
        }));
        let mut obj = json!({"spec": {"containers": [
            {"name": "a", "junk": 1, "ports": [{"port": 80, "proto": "TCP"}]},
            {"name": "b", "more": {"x": 1}}
        ]}});
        let pruned = schema.prune(&mut obj);
        assert_eq!(
            pruned,
            vec![
                "spec.containers[0].junk",
                "spec.containers[0].ports[0].proto",
                "spec.containers[1].more"
            ]
        );
        assert_eq!(
            obj,
            json!({"spec": {"containers": [{"name": "a", "ports": [{"port": 80}]}, {"name": "b"}]}})
        );
    }

    #[test]
    fn prune_still_prunes_declared_properties_below_preserve_unknown_fields() {
        let schema = spec_schema(json!({
            "config": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"inner": {"type": "object", "properties": {"keep": {"type": "string"}}}}
            },
            "list": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
        }));
        let mut obj = json!({"spec": {
            "config": {"free": {"any": 1}, "inner": {"keep": "x", "drop": 1}},
            "list": [{"anything": {"goes": true}}]
        }});
        let pruned = schema.prune(&mut obj);
        assert_eq!(pruned, vec!["spec.config.inner.drop"]);
        assert_eq!(
            obj,
            json!({"spec": {
                "config": {"free": {"any": 1}, "inner": {"keep": "x"}},
                "list": [{"anything": {"goes": true}}]
            }})
        );
    }

    #[test]
    fn prune_keeps_type_and_object_meta_of_embedded_resources() {
        let schema = spec_schema(json!({
            "template": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}
            },
            "raw": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
        }));
        let mut obj = json!({"spec": {
            "template": {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"replicas": 1, "junk": 2}, "other": 1
            },
            "raw": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}}
        }});
        let pruned = schema.prune(&mut obj);
        assert_eq!(
            pruned,
            vec!["spec.template.other", "spec.template.spec.junk"]
        );
        assert_eq!(
            obj["spec"]["template"],
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"replicas": 1}})
        );
        assert_eq!(
            obj["spec"]["raw"],
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}})
        );
    }

    #[test]
    fn prune_drops_meta_field_names_below_the_root() {
        let schema = spec_schema(json!({"size": {"type": "integer"}}));
        let mut obj = json!({"kind": "Widget", "spec": {"kind": "x", "metadata": {}, "size": 1}});
        let pruned = schema.prune(&mut obj);
        assert_eq!(pruned, vec!["spec.kind", "spec.metadata"]);
        assert_eq!(obj, json!({"kind": "Widget", "spec": {"size": 1}}));
    }

    #[test]
    fn prune_follows_additional_properties() {
        let schema = spec_schema(json!({
            "labels": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "string"}}}},
            "extras": {"type": "object", "additionalProperties": true}
        }));
        let mut obj = json!({"spec": {
            "labels": {"a": {"v": "x", "junk": 1}},
            "extras": {"n": 1, "s": "x", "obj": {"c": 2}}
        }});
        let pruned = schema.prune(&mut obj);
        // additionalProperties: true keeps every key but, having no schema, prunes inside object values.
        assert_eq!(pruned, vec!["spec.extras.obj.c", "spec.labels.a.junk"]);
        assert_eq!(
            obj,
            json!({"spec": {"labels": {"a": {"v": "x"}}, "extras": {"n": 1, "s": "x", "obj": {}}}})
        );
    }

    #[test]
    fn prune_drops_non_nullable_nulls_without_defaults_silently() {
        let schema = spec_schema(json!({
            "size": {"type": "integer"},
            "note": {"type": "string", "nullable": true},
            "mode": {"type": "string", "default": "fast"},
            "list": {"type": "array", "items": {"type": "string"}}
        }));
        let mut obj = json!({"spec": {"size": null, "note": null, "mode": null, "list": [null]}});
        let pruned = schema.prune(&mut obj);
        assert!(pruned.is_empty(), "{pruned:?}");
        // array items are not removed (validation reports them), defaulted fields wait for defaulting.
        assert_eq!(
            obj,
            json!({"spec": {"note": null, "mode": null, "list": [null]}})
        );
        schema.apply_defaults(&mut obj);
        assert_eq!(
            obj,
            json!({"spec": {"note": null, "mode": "fast", "list": [null]}})
        );
    }

    #[test]
    fn prune_with_preserve_unknown_fields_at_the_root_keeps_everything_unknown() {
        let schema = Schema::from_openapi(&json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}
        }))
        .expect("schema");
        let mut obj = json!({"anything": 1, "spec": {"a": "x", "b": 2}});
        assert_eq!(schema.prune(&mut obj), vec!["spec.b"]);
        assert_eq!(obj, json!({"anything": 1, "spec": {"a": "x"}}));
    }

    // --- defaulting ---

    fn defaulting_schema() -> Schema {
        Schema::from_openapi(&json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "default": {}, "properties": {
                    "size": {"type": "integer", "default": 1},
                    "mode": {"type": "string", "default": "fast"},
                    "opts": {"type": "object", "default": {}, "properties": {
                        "retries": {"type": "integer", "default": 3}
                    }},
                    "items": {"type": "array", "items": {"type": "object", "properties": {
                        "weight": {"type": "integer", "default": 10}
                    }}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "default": "x"}}
                }},
                "status": {"type": "object", "properties": {"phase": {"type": "string", "default": "Pending"}}}
            }
        }))
        .expect("schema")
    }

    #[test]
    fn defaults_fill_missing_fields_recursively() {
        let schema = defaulting_schema();
        let mut obj = json!({"metadata": {"name": "w"}});
        schema.apply_defaults(&mut obj);
        assert_eq!(
            obj,
            json!({
                "metadata": {"name": "w"},
                "spec": {"size": 1, "mode": "fast", "opts": {"retries": 3}}
            })
        );
    }

    #[test]
    fn defaults_keep_set_values_and_reach_array_items_and_maps() {
        let schema = defaulting_schema();
        let mut obj = json!({"spec": {
            "size": 5,
            "opts": {"retries": 0},
            "items": [{}, {"weight": 2}, null],
            "labels": {"a": null, "b": "set"}
        }});
        schema.apply_defaults(&mut obj);
        assert_eq!(
            obj,
            json!({"spec": {
                "size": 5,
                "opts": {"retries": 0},
                "items": [{"weight": 10}, {"weight": 2}, null],
                "labels": {"a": "x", "b": "set"},
                "mode": "fast"
            }})
        );
    }

    // --- validation ---

    #[test]
    fn validate_reports_type_errors_like_the_apiserver() {
        let schema = widget_schema();
        let obj = json!({"spec": {"size": "string"}});
        let violations = schema.validate(&obj);
        assert_eq!(violations.len(), 1);
        assert_eq!(violations[0].field, "spec.size");
        assert_eq!(
            violations[0].to_string(),
            "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""
        );
        assert_eq!(violations[0].reason(), "FieldValueTypeInvalid");
        assert_eq!(
            errors(&schema, &json!({"spec": []})),
            vec!["spec: Invalid value: \"array\": spec in body must be of type object: \"array\""]
        );
    }

    #[test]
    fn validate_integer_accepts_integral_floats_only() {
        let schema = spec_schema(json!({"size": {"type": "integer"}, "ratio": {"type": "number"}}));
        assert!(errors(&schema, &json!({"spec": {"size": 3.0, "ratio": 2}})).is_empty());
        assert_eq!(
            errors(&schema, &json!({"spec": {"size": 1.5}})),
            vec![
                "spec.size: Invalid value: \"number\": spec.size in body must be of type integer: \"number\""
            ]
        );
        assert_eq!(
            errors(&schema, &json!({"spec": {"ratio": true}})),
            vec![
                "spec.ratio: Invalid value: \"boolean\": spec.ratio in body must be of type number: \"boolean\""
            ]
        );
    }

    #[test]
    fn validate_nullable() {
        let schema = spec_schema(json!({
            "note": {"type": "string", "nullable": true},
            "list": {"type": "array", "items": {"type": "string"}}
        }));
        assert!(errors(&schema, &json!({"spec": {"note": null, "list": ["a"]}})).is_empty());
        assert_eq!(
            errors(&schema, &json!({"spec": {"list": ["a", null]}})),
            vec![
                "spec.list[1]: Invalid value: \"null\": spec.list[1] in body must be of type string: \"null\""
            ]
        );
    }

    #[test]
    fn validate_enum() {
        let schema = spec_schema(json!({
            "color": {"type": "string", "enum": ["red", "green"]},
            "level": {"type": "integer", "enum": [1, 2]}
        }));
        assert!(errors(&schema, &json!({"spec": {"color": "red", "level": 2.0}})).is_empty());
        let violations = schema.validate(&json!({"spec": {"color": "purple", "level": 3}}));
        let messages: Vec<String> = violations.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            vec![
                "spec.color: Unsupported value: \"purple\": supported values: \"red\", \"green\"",
                "spec.level: Unsupported value: 3: supported values: \"1\", \"2\"",
            ]
        );
        assert_eq!(violations[0].reason(), "FieldValueNotSupported");
    }

    #[test]
    fn validate_required() {
        let schema = Schema::from_openapi(&json!({
            "type": "object",
            "required": ["spec"],
            "properties": {"spec": {"type": "object", "required": ["name", "size"], "properties": {
                "name": {"type": "string"}, "size": {"type": "integer"}
            }}}
        }))
        .expect("schema");
        assert_eq!(errors(&schema, &json!({})), vec!["spec: Required value"]);
        let violations = schema.validate(&json!({"spec": {"size": 1}}));
        assert_eq!(
            violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            vec!["spec.name: Required value"]
        );
        assert_eq!(violations[0].reason(), "FieldValueRequired");
    }

    #[test]
    fn validate_numeric_bounds_and_multiples() {
        let schema = spec_schema(json!({
            "size": {"type": "integer", "minimum": 1, "maximum": 10, "exclusiveMaximum": true},
            "ratio": {"type": "number", "maximum": 1_000_000, "exclusiveMinimum": true, "minimum": 0.5},
            "step": {"type": "integer", "multipleOf": 5},
            "half": {"type": "number", "multipleOf": 0.5}
        }));
        assert!(
            errors(
                &schema,
                &json!({"spec": {"size": 9, "ratio": 0.75, "step": 15, "half": 1.5}})
            )
            .is_empty()
        );
        assert_eq!(
            errors(
                &schema,
                &json!({"spec": {"size": 0, "ratio": 0.5, "step": 7, "half": 1.25}})
            ),
            vec![
                "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
                "spec.ratio: Invalid value: 0.5: spec.ratio in body should be greater than 0.5",
                "spec.step: Invalid value: 7: spec.step in body should be a multiple of 5",
                "spec.half: Invalid value: 1.25: spec.half in body should be a multiple of 0.5",
            ]
        );
        assert_eq!(
            errors(
                &schema,
                &json!({"spec": {"size": 10, "ratio": 2_500_000.5}})
            ),
            vec![
                "spec.size: Invalid value: 10: spec.size in body should be less than 10",
                "spec.ratio: Invalid value: 2.5000005e+06: spec.ratio in body should be less than or equal to 1e+06",
            ]
        );
    }

    #[test]
    fn validate_string_lengths_count_characters() {
        let schema =
            spec_schema(json!({"name": {"type": "string", "minLength": 2, "maxLength": 3}}));
        assert!(errors(&schema, &json!({"spec": {"name": "日本語"}})).is_empty());
        let violations = schema.validate(&json!({"spec": {"name": "abcd"}}));
        assert_eq!(
            violations[0].to_string(),
            "spec.name: Too long: may not be more than 3 bytes"
        );
        assert_eq!(violations[0].reason(), "FieldValueTooLong");
        assert_eq!(
            errors(&schema, &json!({"spec": {"name": "a"}})),
            vec![
                "spec.name: Invalid value: \"a\": spec.name in body should be at least 2 chars long"
            ]
        );
    }

    #[test]
    fn validate_array_sizes() {
        let schema = spec_schema(
            json!({"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}}),
        );
        assert!(errors(&schema, &json!({"spec": {"tags": ["a", "b"]}})).is_empty());
        assert_eq!(
            errors(&schema, &json!({"spec": {"tags": []}})),
            vec!["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"]
        );
        let violations = schema.validate(&json!({"spec": {"tags": ["a", "b", 3]}}));
        assert_eq!(
            violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            vec![
                "spec.tags[2]: Invalid value: \"integer\": spec.tags[2] in body must be of type string: \"integer\"",
                "spec.tags: Too many: 3: must have at most 2 items",
            ]
        );
        assert_eq!(violations[1].reason(), "FieldValueTooMany");
    }

    #[test]
    fn validate_object_property_counts() {
        let schema = spec_schema(json!({
            "labels": {"type": "object", "minProperties": 1, "maxProperties": 2, "additionalProperties": {"type": "string"}}
        }));
        assert_eq!(
            errors(&schema, &json!({"spec": {"labels": {}}})),
            vec![
                "spec.labels: Invalid value: 0: spec.labels in body should have at least 1 properties"
            ]
        );
        assert_eq!(
            errors(
                &schema,
                &json!({"spec": {"labels": {"a": "1", "b": "2", "c": "3"}}})
            ),
            vec!["spec.labels: Too many: 3: must have at most 2 items"]
        );
    }

    #[test]
    fn validate_int_or_string() {
        let schema = spec_schema(json!({"port": {"x-kubernetes-int-or-string": true}}));
        assert!(errors(&schema, &json!({"spec": {"port": 8080}})).is_empty());
        assert!(errors(&schema, &json!({"spec": {"port": "http"}})).is_empty());
        assert_eq!(
            errors(&schema, &json!({"spec": {"port": true}})),
            vec![
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\""
            ]
        );
    }

    #[test]
    fn validate_additional_properties_values() {
        let schema = spec_schema(json!({
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "closed": {"type": "object", "additionalProperties": false}
        }));
        assert_eq!(
            errors(
                &schema,
                &json!({"spec": {"labels": {"a": "x", "b": 1}, "closed": {"k": 1}}})
            ),
            vec![
                "spec.labels.b: Invalid value: \"integer\": spec.labels.b in body must be of type string: \"integer\"",
                "spec.closed: Invalid value: \"k\": spec.closed.k in body is a forbidden property",
            ]
        );
    }

    #[test]
    fn validate_checks_pattern_and_format_but_not_preserved_fields() {
        let schema = spec_schema(json!({
            "name": {"type": "string", "pattern": "^[a-z]+$", "format": "hostname"},
            "free": {"x-kubernetes-preserve-unknown-fields": true}
        }));
        assert_eq!(
            errors(
                &schema,
                &json!({"spec": {"name": "NOT-lower", "free": [1, "a", {"b": null}]}})
            ),
            vec![
                "spec.name: Invalid value: \"NOT-lower\": spec.name in body should match '^[a-z]+$'"
            ]
        );
        assert_eq!(
            errors(&schema, &json!({"spec": {"name": "a-"}})),
            vec![
                "spec.name: Invalid value: \"a-\": spec.name in body should match '^[a-z]+$'",
                "spec.name: Invalid value: \"a-\": spec.name in body must be of type hostname: \"a-\""
            ]
        );
    }

    #[test]
    fn composition_keywords_report_as_kube_openapi() {
        let schema = Schema::from_openapi(&json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
            "not": {"required": ["c"]},
            "allOf": [{"properties": {"a": {"maximum": 5}}}]}}}))
        .expect("schema");
        assert!(errors(&schema, &json!({"spec": {"a": 1}})).is_empty());
        assert_eq!(
            errors(&schema, &json!({"spec": {"c": 1}})),
            vec![
                "<nil>: Invalid value: \"\": \"spec\" must validate at least one schema (anyOf)",
                "spec.a: Required value",
                "<nil>: Invalid value: \"\": \"spec\" must not validate the schema (not)",
            ]
        );
        assert_eq!(
            errors(&schema, &json!({"spec": {"a": 9}})),
            vec![
                "spec.a: Invalid value: 9: spec.a in body should be less than or equal to 5",
                "<nil>: Invalid value: \"\": \"spec\" must validate all the schemas (allOf). None validated",
            ]
        );
    }

    #[test]
    fn violation_display_and_reasons() {
        let v = SchemaViolation {
            field: "spec.x".to_string(),
            detail: "Forbidden: nope".to_string(),
        };
        assert_eq!(v.to_string(), "spec.x: Forbidden: nope");
        assert_eq!(v.reason(), "FieldValueForbidden");
        let v = SchemaViolation {
            field: "spec.x".to_string(),
            detail: "Invalid value: 1: bad".to_string(),
        };
        assert_eq!(v.reason(), "FieldValueInvalid");
    }

    // --- building schemas ---

    #[test]
    fn from_openapi_accepts_structural_schemas() {
        assert!(
            schema_errors(json!({
                "type": "object",
                "properties": {
                    "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
                    "spec": {"type": "object", "properties": {
                        "free": {"x-kubernetes-preserve-unknown-fields": true},
                        "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "list": {"type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}}
                    }}
                }
            }))
            .is_empty()
        );
    }

    #[test]
    fn from_openapi_rejects_non_structural_schemas() {
        assert_eq!(
            schema_errors(
                json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}})
            ),
            vec![
                "openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
            ]
        );
        assert_eq!(
            schema_errors(json!({"properties": {"list": {"type": "array"}}})),
            vec![
                "openAPIV3Schema.properties[list].items: Required value: must be specified",
                "openAPIV3Schema.type: Required value: must not be empty at the root",
            ]
        );
        assert_eq!(
            schema_errors(
                json!({"type": "object", "properties": {"l": {"type": "array", "items": {}}}})
            ),
            vec![
                "openAPIV3Schema.properties[l].items.type: Required value: must not be empty for specified array items"
            ]
        );
        assert_eq!(
            schema_errors(json!({"type": "string"})),
            vec!["openAPIV3Schema.type: Invalid value: \"string\": must be object at the root"]
        );
    }

    #[test]
    fn from_openapi_rejects_unsupported_keywords() {
        assert_eq!(
            schema_errors(json!({"type": "object", "properties": {"a": {"type": "strin"}}})),
            vec![
                "openAPIV3Schema.properties[a].type: Unsupported value: \"strin\": supported values: \"array\", \
                 \"boolean\", \"integer\", \"number\", \"object\", \"string\""
            ]
        );
        assert_eq!(
            schema_errors(
                json!({"type": "object", "properties": {"a": {"$ref": "#/x", "type": "object"}}})
            ),
            vec!["openAPIV3Schema.properties[a].$ref: Forbidden: $ref is not supported"]
        );
        assert_eq!(
            schema_errors(
                json!({"type": "object", "properties": {"a": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}}})
            ),
            vec![
                "openAPIV3Schema.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"
            ]
        );
        assert_eq!(
            schema_errors(
                json!({"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}})
            ),
            vec![
                "openAPIV3Schema.properties[a].items: Forbidden: items must be a schema object and not an array"
            ]
        );
        assert_eq!(
            schema_errors(
                json!({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}})
            ),
            vec![
                "openAPIV3Schema.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
            ]
        );
        assert_eq!(
            schema_errors(json!("x")),
            vec!["openAPIV3Schema: Invalid value: \"x\": must be a JSON schema object"]
        );
    }

    #[test]
    fn from_openapi_rejects_bad_additional_properties() {
        assert_eq!(
            schema_errors(json!({"type": "object", "properties": {"a": {
                "type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}
            }}})),
            vec![
                "openAPIV3Schema.properties[a].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
            ]
        );
        assert_eq!(
            schema_errors(json!({"type": "object", "additionalProperties": {"type": "string"}})),
            vec!["openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root"]
        );
    }

    #[test]
    fn from_openapi_restricts_top_level_metadata() {
        assert_eq!(
            schema_errors(
                json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}})
            ),
            vec![
                "openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and \
                 generateName, but metadata is implicitly specified"
            ]
        );
        assert_eq!(
            schema_errors(
                json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}}}})
            ),
            vec![
                "openAPIV3Schema.properties[metadata].properties[name].default: Forbidden: must not be set in top-level metadata"
            ]
        );
        assert_eq!(
            schema_errors(json!({"type": "object", "properties": {"kind": {"type": "integer"}}})),
            vec![
                "openAPIV3Schema.properties[kind].type: Invalid value: \"integer\": must be string"
            ]
        );
    }

    #[test]
    fn from_openapi_checks_embedded_resources() {
        assert_eq!(
            schema_errors(
                json!({"type": "object", "properties": {"t": {"x-kubernetes-embedded-resource": true}}})
            ),
            vec![
                "openAPIV3Schema.properties[t].properties: Required value: must not be empty if \
                 x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
                "openAPIV3Schema.properties[t].type: Required value: must be object if x-kubernetes-embedded-resource is true",
            ]
        );
    }

    #[test]
    fn schema_error_display_lists_violations() {
        let err = Schema::from_openapi(&json!({"type": "string"})).expect_err("invalid");
        assert_eq!(
            err.to_string(),
            "invalid openAPIV3Schema: openAPIV3Schema.type: Invalid value: \"string\": must be object at the root"
        );
    }

    // --- CRDs ---

    #[test]
    fn parse_crd_widget() {
        let info = parse_crd(&widget_crd()).expect("valid CRD");
        assert_eq!(info.group, "conf.example.com");
        assert_eq!(info.plural, "widgets");
        assert_eq!(info.singular, "widget");
        assert_eq!(info.kind, "Widget");
        assert_eq!(info.list_kind, "WidgetList");
        assert_eq!(info.short_names, vec!["wdg"]);
        assert!(info.categories.is_empty());
        assert!(info.namespaced);
        assert_eq!(info.versions.len(), 1);
        let v1 = &info.versions[0];
        assert_eq!(v1.name, "v1");
        assert!(v1.served && v1.storage && v1.status_subresource);
        assert!(v1.scale_subresource.is_none());
        assert!(v1.printer_columns.is_empty());
        let mut obj = json!({"spec": {"size": 1, "unknownField": true}});
        assert_eq!(
            v1.schema.as_ref().expect("schema").prune(&mut obj),
            vec!["spec.unknownField"]
        );
    }

    fn multi_version_crd() -> Value {
        let schema = |extra: Value| {
            json!({"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": extra},
                "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "selector": {"type": "string"}}}
            }}})
        };
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com",
                "scope": "Namespaced",
                "names": {"plural": "crontabs", "kind": "CronTab", "categories": ["all"]},
                "conversion": {"strategy": "None"},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": schema(json!({"cronSpec": {"type": "string"}}))},
                    {"name": "v1", "served": true, "storage": true,
                     "schema": schema(json!({"cronSpec": {"type": "string"}, "replicas": {"type": "integer"}})),
                     "subresources": {"status": {}, "scale": {
                         "specReplicasPath": ".spec.replicas",
                         "statusReplicasPath": ".status.replicas",
                         "labelSelectorPath": ".status.selector"
                     }},
                     "additionalPrinterColumns": [
                         {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                         {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                     ]}
                ]
            }
        })
    }

    #[test]
    fn parse_crd_multi_version() {
        let info = parse_crd(&multi_version_crd()).expect("valid CRD");
        assert_eq!(info.singular, "crontab");
        assert_eq!(info.list_kind, "CronTabList");
        assert_eq!(info.categories, vec!["all"]);
        let names: Vec<&str> = info.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, vec!["v1beta1", "v1"]);
        let (beta, v1) = (&info.versions[0], &info.versions[1]);
        assert!(
            beta.served
                && !beta.storage
                && !beta.status_subresource
                && beta.scale_subresource.is_none()
        );
        assert!(v1.storage && v1.status_subresource);
        assert_eq!(
            v1.scale_subresource.as_ref().expect("scale")["specReplicasPath"],
            ".spec.replicas"
        );
        assert_eq!(v1.printer_columns.len(), 2);
        assert_eq!(v1.printer_columns[1]["name"], "Age");
        // each version prunes with its own schema
        let mut obj = json!({"spec": {"cronSpec": "* * * * *", "replicas": 2}});
        assert_eq!(
            beta.schema
                .as_ref()
                .expect("schema")
                .prune(&mut obj.clone()),
            vec!["spec.replicas"]
        );
        assert!(
            v1.schema
                .as_ref()
                .expect("schema")
                .prune(&mut obj)
                .is_empty()
        );
    }

    #[test]
    fn parse_crd_cluster_scoped() {
        let mut crd = widget_crd();
        crd["spec"]["scope"] = json!("Cluster");
        let info = parse_crd(&crd).expect("valid CRD");
        assert!(!info.namespaced);
    }

    #[test]
    fn parse_crd_rejects_name_and_group_problems() {
        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!("widget.conf.example.com");
        assert_eq!(
            crd_errors(&crd),
            vec![
                "metadata.name: Invalid value: \"widget.conf.example.com\": must be spec.names.plural+\".\"+spec.group"
            ]
        );

        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!("widgets.example");
        crd["spec"]["group"] = json!("example");
        assert_eq!(
            crd_errors(&crd),
            vec![
                "spec.group: Invalid value: \"example\": should be a domain with at least one dot"
            ]
        );

        let mut crd = widget_crd();
        crd["metadata"] = json!({});
        assert_eq!(
            crd_errors(&crd),
            vec!["metadata.name: Required value: name or generateName is required"]
        );
    }

    #[test]
    fn parse_crd_rejects_bad_names() {
        let mut crd = widget_crd();
        crd["spec"]["names"] = json!({"plural": "Widgets", "kind": "Widget", "listKind": "Widget"});
        crd["metadata"]["name"] = json!("Widgets.conf.example.com");
        let errs = crd_errors(&crd);
        assert!(
            errs.contains(&format!(
                "spec.names.plural: Invalid value: \"Widgets\": {DNS1035_ERROR}"
            )),
            "{errs:?}"
        );
        assert!(errs.contains(&"spec.names.listKind: Invalid value: \"Widget\": kind and listKind may not be the same".to_string()));
        assert!(errs.iter().any(|e| e.starts_with("metadata.name: Invalid value: \"Widgets.conf.example.com\": a lowercase RFC 1123 subdomain")));

        let mut crd = widget_crd();
        crd["spec"]["names"] = json!({"shortNames": ["w_d"]});
        crd["metadata"]["name"] = json!(".conf.example.com");
        let errs = crd_errors(&crd);
        assert!(
            errs.contains(&"spec.names.plural: Required value".to_string()),
            "{errs:?}"
        );
        assert!(errs.contains(&"spec.names.kind: Required value".to_string()));
        assert!(errs.contains(&format!(
            "spec.names.shortNames[0]: Invalid value: \"w_d\": {DNS1035_ERROR}"
        )));
    }

    #[test]
    fn parse_crd_rejects_bad_scope() {
        let mut crd = widget_crd();
        crd["spec"]["scope"] = json!("Global");
        assert_eq!(
            crd_errors(&crd),
            vec![
                "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\""
            ]
        );
        crd["spec"].as_object_mut().expect("spec").remove("scope");
        assert_eq!(crd_errors(&crd), vec!["spec.scope: Required value"]);
    }

    #[test]
    fn parse_crd_requires_exactly_one_storage_version() {
        let mut crd = multi_version_crd();
        crd["spec"]["versions"][0]["storage"] = json!(true);
        let errs = crd_errors(&crd);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].starts_with("spec.versions: Invalid value: [{"));
        assert!(errs[0].ends_with(": must have exactly one version marked as storage version"));

        crd["spec"]["versions"][0]["storage"] = json!(false);
        crd["spec"]["versions"][1]["storage"] = json!(false);
        assert!(
            crd_errors(&crd)[0]
                .ends_with(": must have exactly one version marked as storage version")
        );

        crd["spec"]["versions"] = json!([]);
        assert_eq!(
            crd_errors(&crd),
            vec![
                "spec.versions: Invalid value: []: must have exactly one version marked as storage version"
            ]
        );
    }

    #[test]
    fn parse_crd_rejects_bad_version_names() {
        let mut crd = multi_version_crd();
        crd["spec"]["versions"][0]["name"] = json!("v1");
        let errs = crd_errors(&crd);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].ends_with(": must contain unique version names"));

        let mut crd = widget_crd();
        crd["spec"]["versions"][0]["name"] = json!("V1");
        assert_eq!(
            crd_errors(&crd),
            vec![format!(
                "spec.versions[0].name: Invalid value: \"V1\": {DNS1035_ERROR}"
            )]
        );
    }

    #[test]
    fn parse_crd_requires_structural_schemas() {
        let mut crd = widget_crd();
        crd["spec"]["versions"][0]
            .as_object_mut()
            .expect("version")
            .remove("schema");
        assert_eq!(
            crd_errors(&crd),
            vec!["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]
        );

        let mut crd = widget_crd();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            .as_object_mut()
            .expect("spec schema")
            .remove("type");
        assert_eq!(
            crd_errors(&crd),
            vec![
                "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty \
                 for specified object fields"
            ]
        );
    }

    #[test]
    fn parse_crd_rejects_webhook_conversion_and_preserve_unknown_fields() {
        let mut crd = widget_crd();
        crd["spec"]["conversion"] =
            json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}});
        assert_eq!(
            crd_errors(&crd),
            vec![
                "spec.conversion.strategy: Unsupported value: \"Webhook\": supported values: \"None\""
            ]
        );
        crd["spec"]["conversion"] = json!({"strategy": "Magic"});
        assert_eq!(
            crd_errors(&crd),
            vec![
                "spec.conversion.strategy: Unsupported value: \"Magic\": supported values: \"None\", \"Webhook\""
            ]
        );

        let mut crd = widget_crd();
        crd["spec"]["preserveUnknownFields"] = json!(true);
        assert_eq!(
            crd_errors(&crd),
            vec![
                "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set \
                 x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"
            ]
        );
    }

    #[test]
    fn parse_crd_checks_printer_columns_and_scale() {
        let mut crd = multi_version_crd();
        crd["spec"]["versions"][1]["additionalPrinterColumns"] = json!([
            {"name": "Spec", "type": "str", "jsonPath": "spec.cronSpec"},
            {"type": "integer", "format": "int8"}
        ]);
        crd["spec"]["versions"][1]["subresources"]["scale"] =
            json!({"specReplicasPath": ".status.replicas"});
        assert_eq!(
            crd_errors(&crd),
            vec![
                "spec.versions[1].subresources.scale.specReplicasPath: Invalid value: \".status.replicas\": should be \
                 a json path under .spec",
                "spec.versions[1].subresources.scale.statusReplicasPath: Required value",
                "spec.versions[1].additionalPrinterColumns[0].type: Invalid value: \"str\": must be one of \
                 boolean,date,integer,number,string",
                "spec.versions[1].additionalPrinterColumns[0].JSONPath: Invalid value: \"spec.cronSpec\": must be a \
                 simple json path starting with .",
                "spec.versions[1].additionalPrinterColumns[1].name: Required value",
                "spec.versions[1].additionalPrinterColumns[1].format: Invalid value: \"int8\": must be one of \
                 byte,date,date-time,double,float,int32,int64,password",
                "spec.versions[1].additionalPrinterColumns[1].JSONPath: Required value",
            ]
        );
    }

    #[test]
    fn parse_crd_rejects_wrongly_typed_fields() {
        let mut crd = widget_crd();
        crd["spec"]["group"] = json!(5);
        crd["spec"]["versions"][0]["served"] = json!("yes");
        let errs = crd_errors(&crd);
        assert!(
            errs.contains(&"spec.group: Invalid value: 5: must be a string".to_string()),
            "{errs:?}"
        );
        assert!(errs.contains(
            &"spec.versions[0].served: Invalid value: \"yes\": must be a boolean".to_string()
        ));
        assert_eq!(
            crd_errors(&json!({"metadata": {"name": "x.y.z"}, "spec": "nope"}))[0],
            "spec: Invalid value: \"nope\": must be an object"
        );
    }

    #[test]
    fn apply_crd_defaults_fills_names_and_conversion() {
        let mut crd = multi_version_crd();
        apply_crd_defaults(&mut crd);
        assert_eq!(crd["spec"]["names"]["singular"], "crontab");
        assert_eq!(crd["spec"]["names"]["listKind"], "CronTabList");
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));

        let mut crd = widget_crd();
        crd["spec"]["names"]["singular"] = json!("gadget");
        crd["spec"]["names"]["listKind"] = json!("Widgets");
        crd["spec"]["conversion"] = json!({"strategy": "Webhook"});
        apply_crd_defaults(&mut crd);
        assert_eq!(crd["spec"]["names"]["singular"], "gadget");
        assert_eq!(crd["spec"]["names"]["listKind"], "Widgets");
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "Webhook"}));

        let mut not_a_crd = json!({"spec": 1});
        apply_crd_defaults(&mut not_a_crd);
        assert_eq!(not_a_crd, json!({"spec": 1}));
    }

    const NOW: &str = "2025-01-02T03:04:05Z";
    const LATER: &str = "2025-06-07T08:09:10Z";

    #[test]
    fn crd_status_of_a_new_crd() {
        assert_eq!(
            crd_status(&widget_crd(), NOW, None),
            json!({
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "lastTransitionTime": NOW,
                     "reason": "NoConflicts", "message": "no conflicts found"},
                    {"type": "Established", "status": "True", "lastTransitionTime": NOW,
                     "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
                ],
                "acceptedNames": {"plural": "widgets", "singular": "widget", "shortNames": ["wdg"],
                                  "kind": "Widget", "listKind": "WidgetList"},
                "storedVersions": ["v1"]
            })
        );
    }

    #[test]
    fn crd_status_reports_a_name_conflict() {
        let status = crd_status(&widget_crd(), NOW, Some("wdg"));
        assert_eq!(
            status["conditions"],
            json!([
                {"type": "NamesAccepted", "status": "False", "lastTransitionTime": NOW,
                 "reason": "ShortNamesConflict", "message": "\"wdg\" is already in use"},
                {"type": "Established", "status": "False", "lastTransitionTime": NOW,
                 "reason": "NotAccepted", "message": "not all names are accepted"}
            ])
        );
        assert_eq!(
            status["acceptedNames"],
            json!({"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"})
        );
        let status = crd_status(&widget_crd(), NOW, Some("widgets"));
        assert_eq!(status["conditions"][0]["reason"], "PluralConflict");
        assert_eq!(status["acceptedNames"]["plural"], "");
    }

    #[test]
    fn crd_status_updates_an_existing_status() {
        let mut crd = multi_version_crd();
        crd["status"] = json!({
            "conditions": [
                {"type": "Established", "status": "True", "lastTransitionTime": NOW,
                 "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
                {"type": "Terminating", "status": "False", "lastTransitionTime": NOW, "reason": "x", "message": "y"},
                {"type": "NamesAccepted", "status": "False", "lastTransitionTime": NOW,
                 "reason": "PluralConflict", "message": "\"crontabs\" is already in use"}
            ],
            "acceptedNames": {"plural": "crontabs", "kind": "CronTab"},
            "storedVersions": ["v1beta1"]
        });
        let status = crd_status(&crd, LATER, None);
        assert_eq!(
            status["conditions"],
            json!([
                {"type": "Established", "status": "True", "lastTransitionTime": NOW,
                 "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
                {"type": "Terminating", "status": "False", "lastTransitionTime": NOW, "reason": "x", "message": "y"},
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": LATER,
                 "reason": "NoConflicts", "message": "no conflicts found"}
            ])
        );
        assert_eq!(status["storedVersions"], json!(["v1beta1", "v1"]));
        assert_eq!(status["acceptedNames"]["categories"], json!(["all"]));

        // A conflict introduced later keeps an established CRD established and its accepted name.
        crd["status"] = status;
        crd["spec"]["names"]["kind"] = json!("Pod");
        let status = crd_status(&crd, LATER, Some("Pod"));
        assert_eq!(status["conditions"][0]["status"], "True");
        assert_eq!(status["conditions"][2]["reason"], "KindConflict");
        assert_eq!(status["acceptedNames"]["kind"], "CronTab");
    }

    // --- helpers ---

    #[test]
    fn go_formatting() {
        assert_eq!(go_float(1_000_000.0), "1e+06");
        assert_eq!(go_float(123_456_789.0), "1.23456789e+08");
        assert_eq!(go_float(100_000.0), "100000");
        assert_eq!(go_float(0.5), "0.5");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.000_015), "1.5e-05");
        assert_eq!(go_float(-2.0), "-2");
        assert_eq!(go_quote("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\x01\"");
        assert_eq!(go_quote("日本"), "\"日本\"");
        assert_eq!(
            go_value(&json!({"b": [1, 2.5, null], "a": "x"})),
            "map[string]interface {}{\"a\":\"x\", \"b\":[]interface {}{1, 2.5, interface {}(nil)}}"
        );
        assert_eq!(go_value(&json!(null)), "\"null\"");
        assert_eq!(go_value(&json!(u64::MAX)), "1.8446744073709552e+19");
    }

    #[test]
    fn dns_names() {
        assert!(is_dns1035_label_characters("v1beta1").is_empty());
        assert!(is_dns1035_label_characters("my-name").is_empty());
        assert_eq!(is_dns1035_label_characters("1v"), vec![DNS1035_ERROR]);
        assert_eq!(is_dns1035_label_characters("a-"), vec![DNS1035_ERROR]);
        assert_eq!(is_dns1035_label_characters(""), vec![DNS1035_ERROR]);
        assert_eq!(
            is_dns1035_label_characters(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert!(is_dns1123_subdomain_characters("widgets.conf.example.com").is_empty());
        assert!(is_dns1123_subdomain_characters("1.example").is_empty());
        assert_eq!(
            is_dns1123_subdomain_characters("a..b"),
            vec![DNS1123_SUBDOMAIN_ERROR]
        );
        assert_eq!(
            is_dns1123_subdomain_characters("-a.b"),
            vec![DNS1123_SUBDOMAIN_ERROR]
        );
    }
}
