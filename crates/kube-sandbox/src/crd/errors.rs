//! Field errors as kube-apiserver words them (`field.Error`), and Go's rendering of
//! bad values in them (the apiserver prints values with Go's fmt).

use kube_apimachinery::names::go_quote;
use serde_json::Value;
use std::fmt;

/// The OpenAPI v3 types a CRD schema may declare, sorted as the apiserver lists them.
pub(crate) const SCHEMA_TYPES: [&str; 6] =
    ["array", "boolean", "integer", "number", "object", "string"];
/// Fields of a resource that pruning leaves to the server (`TypeMeta` and `ObjectMeta`).
pub(crate) const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];
/// Types an `additionalPrinterColumns` entry may have.
pub(crate) const COLUMN_TYPES: &str = "boolean,date,integer,number,string";
/// Formats an `additionalPrinterColumns` entry may have.
pub(crate) const COLUMN_FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";

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
pub(crate) fn required(field: &str, detail: &str) -> SchemaViolation {
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
pub(crate) fn invalid(field: &str, bad: &str, detail: &str) -> SchemaViolation {
    SchemaViolation {
        field: field.to_string(),
        detail: format!("Invalid value: {bad}: {detail}"),
    }
}

/// `field.Duplicate`: the value as Go renders it (strings quoted, numbers bare, anything else
/// as JSON with sorted keys).
pub(crate) fn duplicate(field: &str, value: &Value) -> SchemaViolation {
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
pub(crate) fn sorted_json(v: &Value) -> String {
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
pub(crate) fn not_supported<S: AsRef<str>>(
    field: &str,
    bad: &str,
    supported: &[S],
) -> SchemaViolation {
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
pub(crate) fn forbidden(field: &str, detail: &str) -> SchemaViolation {
    SchemaViolation {
        field: field.to_string(),
        detail: format!("Forbidden: {detail}"),
    }
}

/// `field.TooLong`.
pub(crate) fn too_long(field: &str, max: u64) -> SchemaViolation {
    let unit = if max == 1 { "byte" } else { "bytes" };
    SchemaViolation {
        field: field.to_string(),
        detail: format!("Too long: may not be more than {max} {unit}"),
    }
}

/// `field.TooMany`.
pub(crate) fn too_many(field: &str, actual: u64, max: u64) -> SchemaViolation {
    let unit = if max == 1 { "item" } else { "items" };
    SchemaViolation {
        field: field.to_string(),
        detail: format!("Too many: {actual}: must have at most {max} {unit}"),
    }
}

/// Go's `%v` of a float64: shortest representation, exponent form outside `1e-4 <= |f| < 1e6`.
pub(crate) fn go_float(f: f64) -> String {
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
pub(crate) fn go_number(n: &serde_json::Number) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        None => go_float(n.as_f64().unwrap_or(f64::NAN)),
    }
}

/// Go's `%#v` of a decoded JSON value (`map[string]interface {}{...}`, `[]interface {}{...}`).
pub(crate) fn go_sharp_v(v: &Value) -> String {
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
pub(crate) fn go_value(v: &Value) -> String {
    match v {
        Value::Null => go_quote("null"),
        Value::String(s) => go_quote(s),
        other => go_sharp_v(other),
    }
}
