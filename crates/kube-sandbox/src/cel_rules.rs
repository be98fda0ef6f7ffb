//! CRD validation rules (`x-kubernetes-validations`), evaluated with the `cel` crate and the
//! Kubernetes CEL libraries from `kube-cel` (strings, lists, sets, regex, quantity, url, ip/cidr,
//! semver, format).
//!
//! Rules are compiled once, when a CRD's schema is parsed; a rule that does not compile rejects
//! the CRD with apiextensions-apiserver's wording (`pkg/apis/apiextensions/validation/validation.go`:
//! `field.Invalid(<path>.x-kubernetes-validations[i].rule, <rule as a Go struct>, "compilation
//! failed: ...")`). At write time every rule of every schema node with a non-null value is
//! evaluated with `self` (and `oldSelf` for transition rules, which run only when the value has an
//! old counterpart, unless `optionalOldSelf` binds `oldSelf` as an optional). Failures are worded
//! as `pkg/apiserver/schema/cel/validation.go` words them (`validateExpressions`,
//! `ruleMessageOrDefault`, `fieldErrorForReason`): `<path>: Invalid value: <detail>` for objects
//! and lists, `<path>: Invalid value: <value>: <detail>` for scalars, `Forbidden`/`Required`/
//! `Duplicate value` when `reason` says so; `fieldPath` moves the error below the node.
//!
//! Not modelled: cel-go's static type checking (a rule naming an undeclared field fails when it is
//! evaluated, not when the CRD is created), and CEL cost accounting (no estimated or runtime cost
//! limit is enforced).

use std::fmt;
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map as CelMap, OptionalValue};
use kube_cel::cel::{Context, ExecutionError, Program, Value as CelValue};
use serde_json::{Map, Value, json};

use kube_apimachinery::names::go_quote;

/// The compiled `x-kubernetes-validations` of one schema node.
#[derive(Clone, Default)]
pub(crate) struct Rules(Arc<Vec<Rule>>);

impl fmt::Debug for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|r| &r.rule))
            .finish()
    }
}

/// One compiled rule.
struct Rule {
    rule: String,
    message: String,
    message_expression: Option<Program>,
    /// `fieldPath`, as Go `field.Path` segments appended below the node (`.spec`, `[key]`).
    field_path: String,
    reason: Option<String>,
    optional_old_self: bool,
    program: Program,
    uses_old_self: bool,
}

/// A compile error of a CRD's rule: `field` and `detail` as `field.Error` renders them.
pub(crate) struct CompileError {
    pub field: String,
    pub detail: String,
}

/// cel-go's rendering of parse errors: `ERROR: <input>:L:C: msg` then the source line and a
/// caret, each after `\n | ` (the cel crate writes `\n| `).
fn cel_go_errors(e: &kube_cel::cel::ParseErrors) -> String {
    e.to_string().replace("\n| ", "\n | ")
}

/// An `apiextensions.ValidationRule` as the apiserver prints a struct bad value: Go's JSON
/// encoding (fields in declaration order, `<`, `>`, `&` escaped, unset pointers `null`).
fn go_rule_struct(v: &Map<String, Value>) -> String {
    let text = |k: &str| json!(v.get(k).and_then(Value::as_str).unwrap_or(""));
    let ptr = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let fields = [
        ("Rule", text("rule")),
        ("Message", text("message")),
        ("MessageExpression", text("messageExpression")),
        ("Reason", ptr("reason")),
        ("FieldPath", text("fieldPath")),
        ("OptionalOldSelf", ptr("optionalOldSelf")),
    ];
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("{{{}}}", body.join(","))
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The reasons a rule may name (`FieldValueErrorReason`).
const REASONS: [&str; 4] = [
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

/// Turns a `fieldPath` JSON path (`.spec.x`, `['key']`) into Go `field.Path` segments.
fn normalize_field_path(p: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err("unexpected end of JSON path".to_string());
            }
            out.push('.');
            out.push_str(&r[..end]);
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let Some(end) = r.find("']") else {
                return Err("unexpected end of JSON path".to_string());
            };
            out.push('[');
            out.push_str(&r[..end]);
            out.push(']');
            rest = &r[end + 2..];
        } else {
            let tok: String = rest
                .chars()
                .take_while(|c| *c != '.' && *c != '[')
                .collect();
            return Err(format!("expected [ or . but got: {tok}"));
        }
    }
    Ok(out)
}

/// Compiles `x-kubernetes-validations` of the node at `path` (`None` when the node has none).
pub(crate) fn compile(v: &Value, path: &str, errs: &mut Vec<CompileError>) -> Option<Rules> {
    let list = v.as_array()?;
    let mut rules = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let base = format!("{path}.x-kubernetes-validations[{i}]");
        let Some(obj) = item.as_object() else {
            errs.push(CompileError {
                field: base,
                detail: "Invalid value: must be an object".to_string(),
            });
            continue;
        };
        let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let rule = text("rule");
        if rule.trim().is_empty() {
            errs.push(CompileError {
                field: format!("{base}.rule"),
                detail: "Required value: rule is not specified".to_string(),
            });
            continue;
        }
        let message = text("message");
        let message_expression_src = text("messageExpression");
        let reason = obj
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(r) = &reason
            && !REASONS.contains(&r.as_str())
        {
            let supported: Vec<String> = REASONS.iter().map(|r| go_quote(r)).collect();
            errs.push(CompileError {
                field: format!("{base}.reason"),
                detail: format!(
                    "Unsupported value: {}: supported values: {}",
                    go_quote(r),
                    supported.join(", ")
                ),
            });
        }
        let field_path = match obj.get("fieldPath").and_then(Value::as_str) {
            None | Some("") => String::new(),
            Some(fp) => match normalize_field_path(fp) {
                Ok(p) => p,
                Err(e) => {
                    errs.push(CompileError {
                        field: format!("{base}.fieldPath"),
                        detail: format!("Invalid value: {}: {e}", go_quote(fp)),
                    });
                    String::new()
                }
            },
        };
        let program = match Program::compile(&rule) {
            Ok(p) => p,
            Err(e) => {
                errs.push(CompileError {
                    field: format!("{base}.rule"),
                    detail: format!(
                        "Invalid value: {}: compilation failed: {}",
                        go_rule_struct(obj),
                        cel_go_errors(&e)
                    ),
                });
                continue;
            }
        };
        let message_expression = if message_expression_src.trim().is_empty() {
            None
        } else {
            match Program::compile(&message_expression_src) {
                Ok(p) => Some(p),
                Err(e) => {
                    errs.push(CompileError {
                        field: format!("{base}.messageExpression"),
                        detail: format!(
                            "Invalid value: {}: messageExpression compilation failed: {}",
                            go_rule_struct(obj),
                            cel_go_errors(&e)
                        ),
                    });
                    continue;
                }
            }
        };
        let uses_old_self = program.references().has_variable("oldSelf");
        let optional_old_self = obj.get("optionalOldSelf") == Some(&Value::Bool(true));
        if optional_old_self && !uses_old_self {
            errs.push(CompileError {
                field: format!("{base}.optionalOldSelf"),
                detail: "Invalid value: true: may not be set if rule does not use oldSelf"
                    .to_string(),
            });
        }
        rules.push(Rule {
            rule,
            message,
            message_expression,
            field_path,
            reason,
            optional_old_self,
            program,
            uses_old_self,
        });
    }
    (!rules.is_empty()).then(|| Rules(Arc::new(rules)))
}

/// A JSON value as CEL sees it (integers as `int`, objects as maps with string keys).
pub(crate) fn to_cel(v: &Value) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => CelValue::Int(i),
            None => CelValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let entries: std::collections::HashMap<Key, CelValue> = map
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            CelValue::Map(CelMap::from(entries))
        }
    }
}

thread_local! {
    /// The root context with the standard and Kubernetes functions, built once per thread.
    static ROOT: Context<'static> = Context::default().with_all();
}

/// Evaluates a boolean expression (an admission webhook's `matchConditions` entry) with
/// `vars` bound, in the same environment as the CRD rules: its result, or the error worded as
/// cel-go words it (a compile error, an evaluation error, or `no such overload` for a value
/// that is not a bool).
pub(crate) fn eval_condition(expression: &str, vars: &[(&str, &Value)]) -> Result<bool, String> {
    let program = Program::compile(expression).map_err(|e| cel_go_errors(&e))?;
    ROOT.with(|root| {
        let mut ctx = root.new_inner_scope();
        for (name, v) in vars {
            ctx.add_variable_from_value(*name, to_cel(v));
        }
        match program.execute(&ctx) {
            Ok(CelValue::Bool(b)) => Ok(b),
            Ok(_) => Err("no such overload".to_string()),
            Err(e) => Err(eval_error(&e)),
        }
    })
}

/// How cel-go words an evaluation error.
fn eval_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload => "no such overload".to_string(),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::IndexOutOfBounds(i) => match i {
            CelValue::Int(i) => format!("index out of bounds: {i}"),
            other => format!("index out of bounds: {other:?}"),
        },
        other => other.to_string(),
    }
}

/// A failed rule as a `field.Error`: `field`, and the body after `field: `.
pub(crate) struct RuleError {
    pub field: String,
    pub body: String,
}

/// Go's rendering of a scalar bad value (`%q` for strings, `%v` otherwise).
fn scalar_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.to_string(),
        },
        other => other.to_string(),
    }
}

impl Rules {
    /// Evaluates the rules against `value` (never null) at `field` (Go `field.Path` text, `<nil>`
    /// at the root), with `old` the correlated old value on update.
    pub(crate) fn evaluate(
        &self,
        value: &Value,
        old: Option<&Value>,
        field: &str,
        out: &mut Vec<RuleError>,
    ) {
        let is_composite = value.is_object() || value.is_array();
        let self_val = to_cel(value);
        let old_val = old.map(to_cel);
        ROOT.with(|root| {
            for rule in self.0.iter() {
                if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
                    continue;
                }
                let mut ctx = root.new_inner_scope();
                ctx.add_variable_from_value("self", self_val.clone());
                if rule.optional_old_self {
                    let opt = match &old_val {
                        Some(o) => OptionalValue::of(o.clone()),
                        None => OptionalValue::none(),
                    };
                    ctx.add_variable_from_value("oldSelf", CelValue::Opaque(Arc::new(opt)));
                } else if let Some(o) = &old_val {
                    ctx.add_variable_from_value("oldSelf", o.clone());
                }
                let rule_text = if rule.message.trim().is_empty() {
                    rule.rule.trim().to_string()
                } else {
                    rule.message.trim().to_string()
                };
                let body_invalid = |detail: &str| {
                    if is_composite {
                        format!("Invalid value: {detail}")
                    } else {
                        format!("Invalid value: {}: {detail}", scalar_value(value))
                    }
                };
                let at_node = |field: &str| {
                    if field == "<nil>" {
                        String::new()
                    } else {
                        field.to_string()
                    }
                };
                match rule.program.execute(&ctx) {
                    Ok(CelValue::Bool(true)) => continue,
                    Ok(CelValue::Bool(false)) => {}
                    Ok(other) => {
                        let detail = format!(
                            "{} evaluating rule: {rule_text}",
                            format_args!("no such overload: {other:?}")
                        );
                        out.push(RuleError {
                            field: field.to_string(),
                            body: body_invalid(&detail),
                        });
                        continue;
                    }
                    Err(e) => {
                        let msg = eval_error(&e);
                        let detail = if msg.starts_with("no such overload") {
                            format!(
                                "'{msg}': call arguments did not match a supported operator, function or macro signature for rule: {rule_text}"
                            )
                        } else {
                            format!("{msg} evaluating rule: {rule_text}")
                        };
                        out.push(RuleError {
                            field: field.to_string(),
                            body: body_invalid(&detail),
                        });
                        continue;
                    }
                }
                let target = if rule.field_path.is_empty() {
                    field.to_string()
                } else {
                    let base = at_node(field);
                    let fp = if base.is_empty() {
                        rule.field_path.trim_start_matches('.').to_string()
                    } else {
                        rule.field_path.clone()
                    };
                    format!("{base}{fp}")
                };
                let mut detail = None;
                if let Some(me) = &rule.message_expression
                    && let Ok(CelValue::String(s)) = me.execute(&ctx)
                {
                    let t = s.trim();
                    if !t.is_empty() && !t.contains('\n') {
                        detail = Some(t.to_string());
                    }
                }
                let detail = detail.unwrap_or_else(|| {
                    if rule.message.trim().is_empty() {
                        format!("failed rule: {rule_text}")
                    } else {
                        rule.message.trim().to_string()
                    }
                });
                let body = match rule.reason.as_deref() {
                    Some("FieldValueForbidden") => format!("Forbidden: {detail}"),
                    Some("FieldValueRequired") => format!("Required value: {detail}"),
                    Some("FieldValueDuplicate") => {
                        if is_composite {
                            "Duplicate value".to_string()
                        } else {
                            format!("Duplicate value: {}", scalar_value(value))
                        }
                    }
                    _ => body_invalid(&detail),
                };
                out.push(RuleError {
                    field: target,
                    body,
                });
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(v: Value) -> Rules {
        let mut errs = Vec::new();
        let r = compile(&v, "x", &mut errs).expect("rules");
        assert!(errs.is_empty());
        r
    }

    fn eval(r: &Rules, v: Value, old: Option<Value>, field: &str) -> Vec<String> {
        let mut out = Vec::new();
        r.evaluate(&v, old.as_ref(), field, &mut out);
        out.into_iter()
            .map(|e| format!("{}: {}", e.field, e.body))
            .collect()
    }

    #[test]
    fn a_failing_rule_on_an_object_omits_the_value() {
        let r = rules(json!([{"rule": "self.replicas <= self.max"}]));
        assert_eq!(
            eval(&r, json!({"replicas": 5, "max": 3}), None, "spec"),
            ["spec: Invalid value: failed rule: self.replicas <= self.max"]
        );
        assert!(eval(&r, json!({"replicas": 1, "max": 3}), None, "spec").is_empty());
    }

    #[test]
    fn message_expression_reason_and_field_path() {
        let r = rules(json!([{
            "rule": "self.replicas <= self.max",
            "messageExpression": "'replicas ' + string(self.replicas) + ' exceeds ' + string(self.max)",
            "reason": "FieldValueForbidden",
            "fieldPath": ".replicas"}]));
        assert_eq!(
            eval(&r, json!({"replicas": 5, "max": 3}), None, "spec"),
            ["spec.replicas: Forbidden: replicas 5 exceeds 3"]
        );
    }

    #[test]
    fn transition_rules_run_only_with_an_old_value() {
        let r = rules(json!([{"rule": "self == oldSelf", "message": "is immutable"}]));
        assert!(eval(&r, json!("a"), None, "spec.name").is_empty());
        assert_eq!(
            eval(&r, json!("b"), Some(json!("a")), "spec.name"),
            ["spec.name: Invalid value: \"b\": is immutable"]
        );
        let r = rules(
            json!([{"rule": "!oldSelf.hasValue() || self >= oldSelf.value()",
                               "optionalOldSelf": true, "message": "may not shrink"}]),
        );
        assert!(eval(&r, json!(1), None, "spec.size").is_empty());
        assert_eq!(
            eval(&r, json!(1), Some(json!(2)), "spec.size"),
            ["spec.size: Invalid value: 1: may not shrink"]
        );
    }

    #[test]
    fn kubernetes_libraries_are_available() {
        let r = rules(json!([
            {"rule": "quantity(self.mem).isLessThan(quantity('1Gi'))"},
            {"rule": "isURL(self.url) && url(self.url).getScheme() == 'https'"},
            {"rule": "isCIDR(self.net)"},
            {"rule": "self.name.matches('^[a-z]+$')"},
            {"rule": "self.tags.all(t, t.startsWith('x-'))"}]));
        let ok = json!({"mem": "512Mi", "url": "https://a.example", "net": "10.0.0.0/8",
                        "name": "abc", "tags": ["x-1"]});
        assert!(eval(&r, ok, None, "spec").is_empty());
        let bad =
            json!({"mem": "2Gi", "url": "http://a", "net": "nope", "name": "A", "tags": ["y"]});
        assert_eq!(eval(&r, bad, None, "spec").len(), 5);
    }

    #[test]
    fn runtime_errors_and_compile_errors() {
        let r = rules(json!([{"rule": "self.missing > 1"}]));
        assert_eq!(
            eval(&r, json!({}), None, "spec"),
            ["spec: Invalid value: no such key: missing evaluating rule: self.missing > 1"]
        );
        let mut errs = Vec::new();
        assert!(compile(&json!([{"rule": "self.x >"}]), "p", &mut errs).is_none());
        assert_eq!(errs[0].field, "p.x-kubernetes-validations[0].rule");
        assert!(
            errs[0].detail.starts_with(
                "Invalid value: {\"Rule\":\"self.x \\u003e\",\"Message\":\"\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: "
            ) && errs[0]
                .detail
                .contains("compilation failed: ERROR: <input>:1:"),
            "{}",
            errs[0].detail
        );
    }
}
