//! Chainsaw's assertion trees (kyverno-json semantics) and templating: partial match of
//! objects (only the expected keys are compared), arrays element by element (same length),
//! `(expr)` keys and values evaluated as JMESPath against the actual node, `~key` iterating
//! the expected subtree over every element of an array, and bindings (`$namespace`, `$name`,
//! the test's and step's `bindings`) usable in every expression.

use std::collections::BTreeMap;

use serde_json::Value;

/// Named values visible to expressions (`$namespace`, ...).
pub type Bindings = BTreeMap<String, Value>;

/// The first difference between an expected tree and the actual object.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// The field path (`spec.template.metadata.labels.app`, `status.conditions[0].type`).
    pub path: String,
    /// What was expected (the expression's value for `(expr)` nodes).
    pub expected: Value,
    /// What the object had (null when missing).
    pub actual: Value,
    /// Why, for people.
    pub reason: String,
}

/// Evaluate a JMESPath expression on `data`, with `$name` bindings substituted as JSON
/// literals (the `jmespath` crate has no variables).
pub fn eval(expr: &str, data: &Value, bindings: &Bindings) -> Result<Value, String> {
    let text = substitute(expr, bindings);
    let compiled = RUNTIME
        .compile(&text)
        .map_err(|e| format!("JMESPath {expr:?}: {e}"))?;
    let v = compiled
        .search(data.clone())
        .map_err(|e| format!("JMESPath {expr:?}: {e}"))?;
    serde_json::to_value(&*v).map_err(|e| format!("JMESPath {expr:?}: {e}"))
}

/// JMESPath's built-in functions and the string functions chainsaw adds that tests use:
/// `trim_space(s)` (leading and trailing white space removed), `to_upper(s)`, `to_lower(s)`,
/// `split(s, sep)`.
static RUNTIME: std::sync::LazyLock<jmespath::Runtime> = std::sync::LazyLock::new(|| {
    use jmespath::functions::{ArgumentType, CustomFunction, Signature};
    use jmespath::{Rcvar, Variable};
    fn string_fn(f: fn(&[&str]) -> Variable, arity: usize) -> Box<CustomFunction> {
        let sig = Signature::new(vec![ArgumentType::String; arity], None);
        Box::new(CustomFunction::new(
            sig,
            Box::new(move |args: &[Rcvar], _ctx: &mut jmespath::Context<'_>| {
                let strs: Vec<&str> = args
                    .iter()
                    .filter_map(|a| a.as_string())
                    .map(String::as_str)
                    .collect();
                Ok(Rcvar::new(f(&strs)))
            }),
        ))
    }
    let mut rt = jmespath::Runtime::new();
    rt.register_builtin_functions();
    rt.register_function(
        "trim_space",
        string_fn(|a| Variable::String(a[0].trim().to_string()), 1),
    );
    rt.register_function(
        "to_upper",
        string_fn(|a| Variable::String(a[0].to_uppercase()), 1),
    );
    rt.register_function(
        "to_lower",
        string_fn(|a| Variable::String(a[0].to_lowercase()), 1),
    );
    rt.register_function(
        "split",
        string_fn(
            |a| {
                Variable::Array(
                    a[0].split(a[1])
                        .map(|p| Rcvar::new(Variable::String(p.to_string())))
                        .collect(),
                )
            },
            2,
        ),
    );
    rt
});

/// Replace `$name` (not inside quotes) by a JSON literal of its value.
fn substitute(expr: &str, bindings: &Bindings) -> String {
    let mut out = String::with_capacity(expr.len());
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if c == '\'' || c == '`' || c == '"' {
            quote = Some(c);
            out.push(c);
            i += 1;
            continue;
        }
        if c == '$' {
            let start = i + 1;
            let mut end = start;
            while end < chars.len() && (chars[end].is_alphanumeric() || chars[end] == '_') {
                end += 1;
            }
            let name: String = chars[start..end].iter().collect();
            if let Some(v) = bindings.get(&name) {
                let lit = v.to_string().replace('`', "\\`");
                out.push('`');
                out.push_str(&lit);
                out.push('`');
                i = end;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// `(expr)` -> `Some(expr)`.
pub fn expression(s: &str) -> Option<&str> {
    let t = s.trim();
    (t.len() >= 2 && t.starts_with('(') && t.ends_with(')')).then(|| &t[1..t.len() - 1])
}

/// Render a resource template: every string value `(expr)` becomes the expression's value
/// (evaluated on the document itself), keys too.
pub fn template(v: &Value, bindings: &Bindings) -> Result<Value, String> {
    template_node(v, v, bindings)
}

fn template_node(v: &Value, root: &Value, bindings: &Bindings) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => match expression(s) {
            Some(e) => eval(e, root, bindings)?,
            None => v.clone(),
        },
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| template_node(x, root, bindings))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => {
            let mut out = serde_json::Map::new();
            for (k, x) in m {
                let key = match expression(k) {
                    Some(e) => match eval(e, root, bindings)? {
                        Value::String(s) => s,
                        other => other.to_string(),
                    },
                    None => k.clone(),
                };
                out.insert(key, template_node(x, root, bindings)?);
            }
            Value::Object(out)
        }
        _ => v.clone(),
    })
}

/// Whether `actual` satisfies the assertion tree `expected`; the first difference otherwise.
pub fn check(expected: &Value, actual: &Value, bindings: &Bindings) -> Result<(), Box<Mismatch>> {
    node(expected, actual, "", bindings)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn mismatch(path: &str, expected: &Value, actual: &Value, reason: &str) -> Box<Mismatch> {
    Box::new(Mismatch {
        path: if path.is_empty() {
            "(root)".into()
        } else {
            path.into()
        },
        expected: expected.clone(),
        actual: actual.clone(),
        reason: reason.to_string(),
    })
}

fn node(expected: &Value, actual: &Value, path: &str, b: &Bindings) -> Result<(), Box<Mismatch>> {
    match expected {
        Value::Object(m) => {
            for (k, ev) in m {
                // `~key` / `~.(expr)`: the subtree holds for every element.
                if let Some(rest) = k.strip_prefix('~') {
                    let rest = rest.trim_start_matches('.');
                    let (label, items) = match expression(rest) {
                        Some(e) => (
                            format!("({e})"),
                            eval(e, actual, b).map_err(|r| mismatch(path, ev, actual, &r))?,
                        ),
                        None => (
                            rest.to_string(),
                            actual.get(rest).cloned().unwrap_or(Value::Null),
                        ),
                    };
                    let p = join(path, &label);
                    let Value::Array(items) = items else {
                        return Err(mismatch(&p, ev, &items, "~ needs an array"));
                    };
                    for (i, it) in items.iter().enumerate() {
                        node(ev, it, &format!("{p}[{i}]"), b)?;
                    }
                    continue;
                }
                if let Some(e) = expression(k) {
                    let p = join(path, k);
                    let got = eval(e, actual, b).map_err(|r| mismatch(&p, ev, actual, &r))?;
                    node(ev, &got, &p, b)?;
                    continue;
                }
                let p = join(path, k);
                match actual.get(k.as_str()) {
                    Some(av) => node(ev, av, &p, b)?,
                    None if actual.is_object() => {
                        return Err(mismatch(&p, ev, &Value::Null, "field not found"));
                    }
                    None => return Err(mismatch(path, expected, actual, "not an object")),
                }
            }
            Ok(())
        }
        Value::Array(ea) => {
            let Value::Array(aa) = actual else {
                return Err(mismatch(path, expected, actual, "not an array"));
            };
            if ea.len() != aa.len() {
                return Err(mismatch(
                    path,
                    expected,
                    actual,
                    &format!("{} element(s) expected, {} found", ea.len(), aa.len()),
                ));
            }
            for (i, (e, a)) in ea.iter().zip(aa).enumerate() {
                node(e, a, &format!("{path}[{i}]"), b)?;
            }
            Ok(())
        }
        Value::String(s) => {
            if let Some(e) = expression(s) {
                let want = eval(e, actual, b).map_err(|r| mismatch(path, expected, actual, &r))?;
                return if scalar_eq(&want, actual) {
                    Ok(())
                } else {
                    Err(mismatch(path, &want, actual, "value differs"))
                };
            }
            if scalar_eq(expected, actual) {
                Ok(())
            } else {
                Err(mismatch(path, expected, actual, "value differs"))
            }
        }
        _ => {
            if scalar_eq(expected, actual) {
                Ok(())
            } else {
                Err(mismatch(path, expected, actual, "value differs"))
            }
        }
    }
}

/// Equality with numbers compared by value (1 == 1.0).
fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b() -> Bindings {
        let mut b = Bindings::new();
        b.insert("namespace".into(), json!("ns-1"));
        b
    }

    #[test]
    fn chainsaw_string_functions() {
        let mut b = b();
        b.insert("stdout".into(), json!("  hello chainsaw\n"));
        let eval_ = |e: &str| eval(e, &Value::Null, &b).unwrap();
        assert_eq!(eval_("trim_space($stdout)"), json!("hello chainsaw"));
        assert_eq!(eval_("to_upper('a-b')"), json!("A-B"));
        assert_eq!(eval_("to_lower('A-B')"), json!("a-b"));
        assert_eq!(eval_("split('a,b', ',')"), json!(["a", "b"]));
        // The built-ins are still there; a wrong argument type is an error, not a panic.
        assert_eq!(eval_("length('abc')"), json!(3));
        assert!(eval("trim_space(`1`)", &Value::Null, &b).is_err());
    }

    #[test]
    fn partial_match_arrays_and_expressions() {
        let actual = json!({"metadata": {"name": "a", "namespace": "ns-1", "labels": {"x": "1"}},
            "spec": {"replicas": 2, "items": [{"n": 1, "o": 2}, {"n": 2}]}});
        assert!(check(&json!({"metadata": {"name": "a"}}), &actual, &b()).is_ok());
        assert!(
            check(
                &json!({"metadata": {"namespace": "($namespace)"}}),
                &actual,
                &b()
            )
            .is_ok()
        );
        assert!(check(&json!({"spec": {"(replicas > `1`)": true}}), &actual, &b()).is_ok());
        assert!(
            check(
                &json!({"spec": {"items": [{"n": 1}, {"n": 2}]}}),
                &actual,
                &b()
            )
            .is_ok()
        );
        assert!(
            check(
                &json!({"spec": {"~items": {"(n > `0`)": true}}}),
                &actual,
                &b()
            )
            .is_ok()
        );
        let m = check(
            &json!({"spec": {"items": [{"n": 1}, {"n": 3}]}}),
            &actual,
            &b(),
        )
        .unwrap_err();
        assert_eq!(m.path, "spec.items[1].n");
        assert_eq!((m.expected, m.actual), (json!(3), json!(2)));
        let m = check(&json!({"spec": {"items": [{"n": 1}]}}), &actual, &b()).unwrap_err();
        assert_eq!(m.path, "spec.items");
        let m = check(&json!({"metadata": {"labels": {"y": "1"}}}), &actual, &b()).unwrap_err();
        assert_eq!(m.path, "metadata.labels.y");
    }

    #[test]
    fn templates() {
        let t = json!({"metadata": {"name": "x", "namespace": "($namespace)"}});
        assert_eq!(template(&t, &b()).unwrap()["metadata"]["namespace"], "ns-1");
    }
}
