//! The code the hook templates are filled with, per language: object literals (the desired
//! children, with `$name` / `$data` markers turned into expressions), the children-count status
//! and the children keys, always built through the kit's `child_key` helper.

use serde_json::Value;

use super::naming::TypeRef;
use super::options::{Lang, Plan};

/// One indentation step of `lang`.
fn unit(lang: Lang) -> &'static str {
    match lang {
        Lang::Go => "\t",
        Lang::Javascript => "  ",
        _ => "    ",
    }
}

/// A string literal (JSON escaping is valid in all four languages for what the table holds).
fn string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// The expression for a string value, markers resolved: `$name` is the variable `name`,
/// `$name-x` the name plus a suffix, `$data` the spec's string fields.
fn scalar(lang: Lang, s: &str) -> String {
    if s == "$data" {
        return match lang {
            Lang::Python => "string_fields(spec)".into(),
            Lang::Javascript => "stringFields(spec)".into(),
            Lang::Go => "stringFields(spec)".into(),
            Lang::Rust => "string_fields(spec)".into(),
        };
    }
    if s == "$name" {
        return "name".into();
    }
    if let Some(suffix) = s.strip_prefix("$name") {
        return match lang {
            Lang::Python => format!("f\"{{name}}{suffix}\""),
            Lang::Javascript => format!("`${{name}}{suffix}`"),
            Lang::Go => format!("name + {}", string(suffix)),
            Lang::Rust => format!("format!(\"{{name}}{suffix}\")"),
        };
    }
    string(s)
}

/// `v` as a literal of `lang`, its inner lines indented `depth + 1` steps.
pub fn literal(lang: Lang, v: &Value, depth: usize) -> String {
    let pad = unit(lang).repeat(depth + 1);
    let end = unit(lang).repeat(depth);
    match v {
        Value::Null => match lang {
            Lang::Python => "None".into(),
            Lang::Go => "nil".into(),
            _ => "null".into(),
        },
        Value::Bool(b) => match (lang, b) {
            (Lang::Python, true) => "True".into(),
            (Lang::Python, false) => "False".into(),
            (_, b) => b.to_string(),
        },
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar(lang, s),
        Value::Array(items) => {
            let open = if lang == Lang::Go { "[]any{" } else { "[" };
            let close = if lang == Lang::Go { "}" } else { "]" };
            if items.is_empty() {
                return format!("{open}{close}");
            }
            let mut out = format!("{open}\n");
            for item in items {
                out.push_str(&format!("{pad}{},\n", literal(lang, item, depth + 1)));
            }
            out.push_str(&format!("{end}{close}"));
            out
        }
        Value::Object(m) => {
            let open = if lang == Lang::Go {
                "map[string]any{"
            } else {
                "{"
            };
            if m.is_empty() {
                return format!("{open}}}");
            }
            let entries: Vec<(String, String)> = m
                .iter()
                .map(|(k, v)| {
                    let key = match lang {
                        Lang::Javascript if is_identifier(k) => k.clone(),
                        _ => string(k),
                    };
                    (key, literal(lang, v, depth + 1))
                })
                .collect();
            // gofmt aligns the values of each run of consecutive one-line entries.
            let mut widths = vec![0; entries.len()];
            let mut start = 0;
            for i in 0..=entries.len() {
                if i == entries.len() || entries[i].1.contains('\n') {
                    let w = entries[start..i]
                        .iter()
                        .map(|(k, _)| k.len())
                        .max()
                        .unwrap_or(0);
                    widths[start..i].iter_mut().for_each(|x| *x = w);
                    start = i + 1;
                }
            }
            let mut out = format!("{open}\n");
            for ((key, value), width) in entries.iter().zip(widths) {
                let gap = if lang == Lang::Go && !value.contains('\n') {
                    " ".repeat(width - key.len())
                } else {
                    String::new()
                };
                out.push_str(&format!("{pad}{key}: {gap}{value},\n"));
            }
            out.push_str(&format!("{end}}}"));
            out
        }
    }
}

fn is_identifier(k: &str) -> bool {
    k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && k.chars().all(|c| c.is_ascii_alphanumeric())
}

/// A desired object of type `t`: apiVersion, kind, metadata with `name_marker` as its name,
/// and the well-known body, markers kept for [`literal`].
pub fn desired(t: &TypeRef, name_marker: &str) -> Value {
    let mut obj = serde_json::json!({
        "apiVersion": t.api_version(),
        "kind": t.kind,
        "metadata": {"name": name_marker},
    });
    if let (Some(o), Value::Object(body)) = (
        obj.as_object_mut(),
        t.builtin().map(|b| b.body()).unwrap_or_default(),
    ) {
        for (k, v) in body {
            match (k.as_str(), o.get_mut("metadata"), v) {
                ("metadata", Some(Value::Object(meta)), Value::Object(extra)) => meta.extend(extra),
                (_, _, v) => {
                    o.insert(k, v);
                }
            }
        }
    }
    obj
}

/// The name marker of the desired objects of `plan`'s hook: the parent's name (composite),
/// the target's name plus the kind (decorator attachments), the computed `name` (map).
pub fn name_marker(plan: &Plan, t: &TypeRef) -> String {
    match plan.kind {
        super::options::ControllerKind::Decorator => {
            format!("$name-{}", t.kind.to_ascii_lowercase())
        }
        _ => "$name".into(),
    }
}

/// The items of the desired-objects list: one literal per child type, each followed by a
/// comma, indented `depth` steps (Rust: the whole `vec![...]` expression).
pub fn children(plan: &Plan, depth: usize) -> String {
    let pad = unit(plan.lang).repeat(depth);
    if plan.lang == Lang::Rust {
        // The whole `vec![...]`, shaped as rustfmt leaves it (one item hugs the brackets).
        let item = |t: &TypeRef, d: usize| {
            let v = desired(t, &name_marker(plan, t));
            format!("json!({})", literal(Lang::Rust, &v, d))
        };
        return match plan.children.as_slice() {
            [one] => format!("vec![{}]", item(one, depth - 1)),
            many => format!(
                "vec![\n{}\n{}]",
                many.iter()
                    .map(|t| format!("{pad}{},", item(t, depth)))
                    .collect::<Vec<_>>()
                    .join("\n"),
                unit(Lang::Rust).repeat(depth - 1)
            ),
        };
    }
    plan.children
        .iter()
        .map(|t| {
            let v = desired(t, &name_marker(plan, t));
            format!("{pad}{},", literal(plan.lang, &v, depth))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a desired object copies the spec's string fields (`$data`): Go and Rust declare
/// `spec` only then (an unused variable does not compile in Go).
pub fn uses_data(plan: &Plan) -> bool {
    plan.children.iter().any(|t| {
        t.builtin()
            .is_some_and(|b| b.body().to_string().contains("\"$data\""))
    })
}

/// `child_key("ConfigMap", "v1")` in `lang`.
fn key_call(lang: Lang, t: &TypeRef) -> String {
    let (k, a) = (string(&t.kind), string(&t.api_version()));
    match lang {
        Lang::Python | Lang::Rust => format!("child_key({k}, {a})"),
        Lang::Javascript | Lang::Go => format!("childKey({k}, {a})"),
    }
}

/// The status statement: a count of the observed objects of each child type (read from the
/// request's map `observed` (an expression) through `child_key`), or no status when the hook does not own it.
/// Indented `depth` steps.
pub fn status(plan: &Plan, observed: &str, depth: usize) -> String {
    let lang = plan.lang;
    let pad = unit(lang).repeat(depth);
    let inner = unit(lang).repeat(depth + 1);
    if !plan.hook_writes_status() {
        let why = format!(
            "a {} has no status for this hook to write: leave it alone",
            plan.parent.kind
        );
        return match lang {
            Lang::Python => format!("{pad}status = None  # {why}"),
            Lang::Javascript => format!("{pad}const status = null; // {why}"),
            Lang::Go => format!("{pad}var status map[string]any // nil: {why}"),
            Lang::Rust => format!("{pad}let status = serde_json::Value::Null; // {why}"),
        };
    }
    let width = plan
        .children
        .iter()
        .map(|t| string(&t.resource).len())
        .max()
        .unwrap_or(0);
    let lines: Vec<String> = plan
        .children
        .iter()
        .map(|t| {
            let key = key_call(lang, t);
            match lang {
                Lang::Python => format!("{inner}{}: len({observed}[{key}]),", string(&t.resource)),
                Lang::Javascript => format!(
                    "{inner}{}: Object.keys({observed}[{key}] || {{}}).length,",
                    t.resource
                ),
                Lang::Go => format!(
                    "{inner}{}: {}len({observed}[{key}]),",
                    string(&t.resource),
                    " ".repeat(width - string(&t.resource).len())
                ),
                Lang::Rust => format!(
                    "{inner}{}: {observed}.get(&{key}).map_or(0, |m| m.len()),",
                    string(&t.resource)
                ),
            }
        })
        .collect();
    let body = lines.join("\n");
    match lang {
        Lang::Python => format!("{pad}status = {{\n{body}\n{pad}}}"),
        Lang::Javascript => format!("{pad}const status = {{\n{body}\n{pad}}};"),
        Lang::Go => format!("{pad}status := map[string]any{{\n{body}\n{pad}}}"),
        Lang::Rust => format!("{pad}let status = json!({{\n{body}\n{pad}}});"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn markers_become_expressions() {
        let v = json!({"metadata": {"name": "$name-configmap"}, "data": "$data", "on": true});
        let py = literal(Lang::Python, &v, 0);
        assert!(py.contains("\"name\": f\"{name}-configmap\""), "{py}");
        assert!(py.contains("\"data\": string_fields(spec)"), "{py}");
        assert!(py.contains("True"), "{py}");
        let go = literal(Lang::Go, &v, 0);
        assert!(go.starts_with("map[string]any{"), "{go}");
        assert!(go.contains("\"name\": name + \"-configmap\""), "{go}");
        let rs = literal(Lang::Rust, &v, 0);
        assert!(rs.contains("format!(\"{name}-configmap\")"), "{rs}");
    }
}
