//! Tests of the CRD logic: schemas, pruning, defaulting, CRD validation and status.

use kube_apimachinery::names::{
    go_quote, is_dns1035_label_characters, is_dns1123_subdomain_characters,
};
use serde_json::{Value, json};

use super::*;

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
    let schema = spec_schema(json!({"name": {"type": "string", "minLength": 2, "maxLength": 3}}));
    assert!(errors(&schema, &json!({"spec": {"name": "日本語"}})).is_empty());
    let violations = schema.validate(&json!({"spec": {"name": "abcd"}}));
    assert_eq!(
        violations[0].to_string(),
        "spec.name: Too long: may not be more than 3 bytes"
    );
    assert_eq!(violations[0].reason(), "FieldValueTooLong");
    assert_eq!(
        errors(&schema, &json!({"spec": {"name": "a"}})),
        vec!["spec.name: Invalid value: \"a\": spec.name in body should be at least 2 chars long"]
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
        vec!["spec.name: Invalid value: \"NOT-lower\": spec.name in body should match '^[a-z]+$'"]
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
        vec!["openAPIV3Schema.properties[kind].type: Invalid value: \"integer\": must be string"]
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
        vec!["spec.group: Invalid value: \"example\": should be a domain with at least one dot"]
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
    assert!(errs.iter().any(|e| e.starts_with(
        "metadata.name: Invalid value: \"Widgets.conf.example.com\": a lowercase RFC 1123 subdomain"
    )));

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
        crd_errors(&crd)[0].ends_with(": must have exactly one version marked as storage version")
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
