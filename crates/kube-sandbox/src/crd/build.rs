//! Building a [`Schema`] from an `openAPIV3Schema`, with the structural-schema checks of
//! apiextensions-apiserver (the errors a CRD with a non-structural schema gets).

use kube_apimachinery::names::go_quote;
use serde_json::{Map, Value};

use super::*;

/// Builds a schema whose violations are reported below `base` (e.g. `spec.versions[0].schema.openAPIV3Schema`).
pub(crate) fn parse_schema(v: &Value, base: &str) -> Result<Schema, SchemaError> {
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
pub(crate) struct SchemaParser {
    pub(crate) errs: Vec<SchemaViolation>,
}

impl SchemaParser {
    /// Builds one node; `no_default` is the reason `default:` is forbidden here (top-level metadata).
    pub(crate) fn node(
        &mut self,
        v: &Value,
        path: &str,
        level: Level,
        no_default: Option<&str>,
    ) -> Schema {
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
            s.rules = crate::cel_rules::compile(rules, path, &mut errs);
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
    pub(crate) fn wrong_kind<T: Default>(
        &mut self,
        path: &str,
        key: &str,
        v: &Value,
        must: &str,
    ) -> T {
        self.errs
            .push(invalid(&format!("{path}.{key}"), &go_value(v), must));
        T::default()
    }

    /// `pattern`: a regular expression.
    pub(crate) fn pattern(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
    ) -> Option<(String, regex::Regex)> {
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
    pub(crate) fn branch(&mut self, v: &Value, path: &str) -> Schema {
        let mut inner = SchemaParser { errs: Vec::new() };
        let s = inner.node(v, path, Level::Field, None);
        self.errs.extend(inner.errs.into_iter().filter(|e| {
            e.field.contains("x-kubernetes-validations") || e.field.ends_with(".pattern")
        }));
        s
    }

    /// The branches of `allOf`/`anyOf`/`oneOf`.
    pub(crate) fn branches(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Vec<Schema> {
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
    pub(crate) fn preserve_unknown(&mut self, obj: &Map<String, Value>, path: &str) -> bool {
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
    pub(crate) fn default_value(
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
    pub(crate) fn enum_values(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
    ) -> Option<Vec<Value>> {
        match obj.get("enum") {
            None | Some(Value::Null) => None,
            Some(Value::Array(values)) => Some(values.clone()),
            Some(other) => self.wrong_kind(path, "enum", other, "must be an array"),
        }
    }

    /// `properties`, each a node (`default:` forbidden in the root's metadata fields).
    pub(crate) fn properties(
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
    pub(crate) fn items(
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
    pub(crate) fn additional(
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
    pub(crate) fn structural_invariants(
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
    pub(crate) fn unsupported_keywords(&mut self, obj: &Map<String, Value>, path: &str) {
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

    pub(crate) fn schema_type(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
    ) -> Option<&'static str> {
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

    pub(crate) fn flag(&mut self, obj: &Map<String, Value>, key: &str, path: &str) -> bool {
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

    pub(crate) fn number(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Option<f64> {
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

    pub(crate) fn count(&mut self, obj: &Map<String, Value>, key: &str, path: &str) -> Option<u64> {
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

    pub(crate) fn strings(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Vec<String> {
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
pub(crate) fn metadata_is_name_only(metadata: &Map<String, Value>) -> bool {
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
pub(crate) fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) => false,
    }
}
