//! The structural schema of one CRD version ([`Schema`]), built once from its
//! `openAPIV3Schema` and reused for every request, and the validation of custom resources
//! against it ([`Schema::validate`]), as kube-apiserver (apiextensions-apiserver, kube-openapi).

use kube_apimachinery::names::go_quote;
use serde_json::{Map, Value};

use super::*;

/// Error building a [`Schema`]: every violation of the structural-schema rules that was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid openAPIV3Schema: {}", join_violations(.violations))]
pub struct SchemaError {
    /// The violations, with paths rooted at the schema (`openAPIV3Schema.properties[spec].type`).
    pub violations: Vec<SchemaViolation>,
}

/// Joins violations for [`SchemaError`]'s message.
pub(crate) fn join_violations(violations: &[SchemaViolation]) -> String {
    let parts: Vec<String> = violations.iter().map(ToString::to_string).collect();
    parts.join("; ")
}

/// What `additionalProperties` says about the fields not listed in `properties`.
#[derive(Clone, Debug, Default)]
pub(crate) enum Additional {
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
pub(crate) enum Level {
    Root,
    Field,
    Item,
}

/// The structural schema of one CRD version, built once by [`Schema::from_openapi`].
#[derive(Clone, Debug, Default)]
pub struct Schema {
    /// `type` as written in the CRD.
    pub(crate) declared_type: Option<&'static str>,
    /// Types a value may have (`integer,string` for int-or-string); empty accepts any type.
    pub(crate) types: Vec<&'static str>,
    pub(crate) nullable: bool,
    pub(crate) int_or_string: bool,
    pub(crate) preserve_unknown: bool,
    pub(crate) embedded: bool,
    pub(crate) default: Option<Value>,
    pub(crate) enum_values: Option<Vec<Value>>,
    pub(crate) required: Vec<String>,
    /// Declared properties in schema order (the order defaults are added in).
    pub(crate) properties: Vec<(String, Schema)>,
    pub(crate) items: Option<Box<Schema>>,
    pub(crate) additional: Additional,
    pub(crate) minimum: Option<f64>,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) exclusive_maximum: bool,
    pub(crate) multiple_of: Option<f64>,
    pub(crate) min_length: Option<u64>,
    pub(crate) max_length: Option<u64>,
    pub(crate) min_items: Option<u64>,
    pub(crate) max_items: Option<u64>,
    pub(crate) min_properties: Option<u64>,
    pub(crate) max_properties: Option<u64>,
    /// `pattern`, as written and compiled.
    pub(crate) pattern: Option<(String, regex::Regex)>,
    /// `format` of a string.
    pub(crate) format: Option<String>,
    pub(crate) all_of: Vec<Schema>,
    pub(crate) any_of: Vec<Schema>,
    pub(crate) one_of: Vec<Schema>,
    pub(crate) not: Option<Box<Schema>>,
    /// `x-kubernetes-validations`.
    pub(crate) rules: Option<crate::cel_rules::Rules>,
    /// `x-kubernetes-list-type` and `x-kubernetes-list-map-keys`, to correlate old list items.
    pub(crate) list_type: Option<String>,
    pub(crate) list_map_keys: Vec<String>,
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
    pub(crate) fn has_rules(&self) -> bool {
        self.rules.is_some()
            || self.properties.iter().any(|(_, p)| p.has_rules())
            || self.items.as_ref().is_some_and(|i| i.has_rules())
            || matches!(&self.additional, Additional::Schema(a) if a.has_rules())
            || self.all_of.iter().any(Schema::has_rules)
    }

    /// The CEL walk of apiextensions-apiserver's `cel.Validator`: rules of this node, of its
    /// `allOf` branches, then of properties (`.name`), map values (`[key]`) and list items
    /// (`[i]`), with old values correlated by key (objects, `listType: map`) or equality (`set`).
    pub(crate) fn evaluate_rules(
        &self,
        v: &Value,
        old: Option<&Value>,
        field: &str,
        out: &mut Vec<crate::cel_rules::RuleError>,
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
    pub(crate) fn check_list_types(&self, v: &Value, field: &str, out: &mut Vec<SchemaViolation>) {
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
    pub(crate) fn property(&self, name: &str) -> Option<&Schema> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, s)| s)
    }

    /// The schema pruning applies to an undeclared key: `None` when the key is not allowed at all,
    /// `Some(None)` when it is allowed without a schema.
    pub(crate) fn additional_for_prune(&self) -> Option<Option<&Schema>> {
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

    pub(crate) fn validate_at(&self, v: &Value, path: &str, out: &mut Vec<SchemaViolation>) {
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
    pub(crate) fn check_composition(&self, v: &Value, path: &str, out: &mut Vec<SchemaViolation>) {
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

    pub(crate) fn type_matches(&self, v: &Value) -> bool {
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

    pub(crate) fn type_error(&self, path: &str, actual: &str) -> SchemaViolation {
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

    pub(crate) fn check_string(&self, s: &str, path: &str, out: &mut Vec<SchemaViolation>) {
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
            && !crate::formats::is_valid(format, s)
        {
            let detail = format!("{path} in body must be of type {format}: {}", go_quote(s));
            out.push(invalid(&field_of(path), &go_quote(s), &detail));
        }
    }

    pub(crate) fn check_number(
        &self,
        n: &serde_json::Number,
        path: &str,
        out: &mut Vec<SchemaViolation>,
    ) {
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

    pub(crate) fn check_float_multiple(
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

    pub(crate) fn check_array(&self, items: &[Value], path: &str, out: &mut Vec<SchemaViolation>) {
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

    pub(crate) fn check_enum(&self, v: &Value, path: &str, out: &mut Vec<SchemaViolation>) {
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

    pub(crate) fn check_object(
        &self,
        map: &Map<String, Value>,
        path: &str,
        out: &mut Vec<SchemaViolation>,
    ) {
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

pub(crate) fn min_word(exclusive: bool) -> &'static str {
    if exclusive {
        "greater than"
    } else {
        "greater than or equal to"
    }
}

pub(crate) fn max_word(exclusive: bool) -> &'static str {
    if exclusive {
        "less than"
    } else {
        "less than or equal to"
    }
}

/// The JSON type of a value as kube-openapi names it.
pub(crate) fn json_type(v: &Value) -> &'static str {
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
pub(crate) fn is_json_integer(f: f64) -> bool {
    pub(crate) const MAX_JSON_FLOAT: f64 = 9_007_199_254_740_992.0;
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
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
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
pub(crate) fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The field path the apiserver reports for a kube-openapi error name (one leading dot trimmed).
pub(crate) fn field_of(name: &str) -> String {
    if name == "." {
        return String::new();
    }
    name.strip_prefix('.').unwrap_or(name).to_string()
}
