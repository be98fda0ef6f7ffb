//! The human output: a table with tree glyphs, `NAMESPACE NAME READY STATUS AGE` (kubectl-tree's
//! shape), `-o wide` adding `RELATION` and `MAP-KEY`. Children of a governed parent are grouped
//! under header rows (child type, map key with its input or tombstone, decorator attachments);
//! the inspected object is marked `◀` and, with color, highlighted.

use std::collections::HashSet;

use colored::Colorize;
use serde_json::Value;

use super::graph::{Direction, EdgeKind, Graph, Node, Severity};
use crate::k8s::object;

/// How to draw the table.
#[derive(Debug, Clone, Copy)]
pub struct TreeStyle {
    /// Add RELATION and MAP-KEY.
    pub wide: bool,
    /// ANSI colors.
    pub color: bool,
    /// "Now" for the AGE column.
    pub now: jiff::Timestamp,
}

struct Row {
    namespace: String,
    name: String,
    ready: String,
    status: String,
    age: String,
    relation: String,
    map_key: String,
    severity: Severity,
    inspected: bool,
    header: bool,
}

/// The table, one line per row, ending with a newline.
pub fn render(g: &Graph, style: &TreeStyle) -> String {
    let only: Option<HashSet<String>> = (g.direction == Direction::Up).then(|| g.path());
    let mut rows = Vec::new();
    for root in &g.roots {
        let mut visiting = Vec::new();
        let at = At {
            id: root,
            via: None,
            first: "",
            rest: "",
        };
        walk(g, &at, style, only.as_ref(), &mut visiting, &mut rows);
    }
    table(&rows, style)
}

/// Lines for the footer (stderr): skipped types, notes.
pub fn footer(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    if !g.skipped.is_empty() {
        let names: Vec<String> = g
            .skipped
            .iter()
            .map(|s| match &s.namespace {
                Some(ns) => format!("{} (in {ns})", s.type_name),
                None => s.type_name.clone(),
            })
            .collect();
        out.push(format!(
            "note: not listed (forbidden): {}; objects of these types are missing from the tree",
            names.join(", ")
        ));
    }
    for n in &g.notes {
        out.push(format!("note: {n}"));
    }
    out
}

/// Children shown together: a group label (None: one ungrouped child) and the children with
/// the edge each hangs by.
type Item<'a> = (Option<String>, Vec<(&'a Node, EdgeKind)>);

/// Where a row is drawn: the node, the edge it is reached by, and its glyph prefixes.
struct At<'a> {
    id: &'a str,
    via: Option<EdgeKind>,
    first: &'a str,
    rest: &'a str,
}

fn walk(
    g: &Graph,
    at: &At<'_>,
    style: &TreeStyle,
    only: Option<&HashSet<String>>,
    visiting: &mut Vec<String>,
    rows: &mut Vec<Row>,
) {
    let (id, rest) = (at.id, at.rest);
    let Some(node) = g.nodes.get(id) else { return };
    rows.push(node_row(g, node, at, style.now));
    if visiting.iter().any(|v| v == id) {
        return; // an ownership cycle: shown once, not followed
    }
    visiting.push(id.to_string());
    let children: Vec<(&Node, EdgeKind)> = g
        .children_of(id)
        .into_iter()
        .filter(|e| only.is_none_or(|o| o.contains(&e.to)))
        .map(|e| (&g.nodes[&e.to], e.kind))
        .collect();
    // Items: ungrouped children, then one header per group.
    let grouped = !node.governed_by.is_empty();
    let mut items: Vec<Item<'_>> = Vec::new();
    for c in children {
        let key = if grouped { c.0.group.clone() } else { None };
        match (&key, items.last_mut()) {
            (Some(k), Some((Some(last), v))) if last == k => v.push(c),
            _ => items.push((key, vec![c])),
        }
    }
    // Ungrouped children first.
    items.sort_by_key(|(k, _)| k.is_some());
    let flat: Vec<Item<'_>> = items
        .into_iter()
        .flat_map(|(k, v)| match k {
            None => v.into_iter().map(|n| (None, vec![n])).collect::<Vec<_>>(),
            Some(k) => vec![(Some(k), v)],
        })
        .collect();
    let count = flat.len();
    for (i, (group, nodes)) in flat.into_iter().enumerate() {
        let (first, next) = branch(rest, i + 1 == count);
        // An ungrouped child hangs here; a group gets a header row and its members below it.
        let (members_rest, members) = match group {
            None => (rest.to_string(), nodes),
            Some(label) => {
                let shown: Vec<&Node> = nodes.iter().map(|(n, _)| *n).collect();
                rows.push(header_row(&label, &shown, &first));
                (next.clone(), nodes)
            }
        };
        let n = members.len();
        for (j, (c, via)) in members.into_iter().enumerate() {
            let (first, rest) = if n == 1 && members_rest == rest {
                (first.clone(), next.clone())
            } else {
                branch(&members_rest, j + 1 == n)
            };
            let at = At {
                id: &c.id,
                via: Some(via),
                first: &first,
                rest: &rest,
            };
            walk(g, &at, style, only, visiting, rows);
        }
    }
    visiting.pop();
}

/// The glyph prefix of a row under `rest` and the prefix its own children continue with.
fn branch(rest: &str, last: bool) -> (String, String) {
    if last {
        (format!("{rest}└─"), format!("{rest}  "))
    } else {
        (format!("{rest}├─"), format!("{rest}│ "))
    }
}

fn node_row(g: &Graph, n: &Node, at: &At<'_>, now: jiff::Timestamp) -> Row {
    let (prefix, via) = (at.first, at.via);
    let s = n.summary();
    let inspected = n.id == g.target;
    Row {
        namespace: n.namespace.clone().unwrap_or_default(),
        name: format!(
            "{prefix}{}/{}{}",
            n.kind,
            n.name,
            if inspected { " ◀" } else { "" }
        ),
        ready: s.ready,
        status: s.status,
        age: age(&n.object, now),
        relation: match via {
            // How the row hangs under the one above: ControllerRef or a plain ownerReference.
            Some(EdgeKind::Controller) => format!("{} (ControllerRef)", n.relation.as_str()),
            Some(EdgeKind::Owner) => format!("{} (ownerRef)", n.relation.as_str()),
            _ => n.relation.as_str().to_string(),
        },
        map_key: n.map_key.clone().unwrap_or_default(),
        severity: s.severity,
        inspected,
        header: false,
    }
}

fn header_row(label: &str, nodes: &[&Node], prefix: &str) -> Row {
    let (name, status, severity) = match label.strip_prefix("key ") {
        Some(key) => {
            let input = nodes
                .iter()
                .find_map(|n| n.map_input.clone())
                .unwrap_or_else(|| "unknown".to_string());
            if nodes.iter().all(|n| n.tombstone) {
                (
                    format!("key {key}"),
                    format!("Tombstone: input {input} is gone"),
                    Severity::Bad,
                )
            } else {
                (
                    format!("key {key}"),
                    format!("input {input}"),
                    Severity::Neutral,
                )
            }
        }
        None => (
            format!("{label} ({})", nodes.len()),
            String::new(),
            Severity::Neutral,
        ),
    };
    Row {
        namespace: String::new(),
        name: format!("{prefix}{name}"),
        ready: String::new(),
        status,
        age: String::new(),
        relation: String::new(),
        map_key: String::new(),
        severity,
        inspected: false,
        header: true,
    }
}

fn table(rows: &[Row], style: &TreeStyle) -> String {
    let mut headers = vec!["NAMESPACE", "NAME", "READY", "STATUS", "AGE"];
    if style.wide {
        headers.extend(["RELATION", "MAP-KEY"]);
    }
    let cells = |r: &Row| -> Vec<String> {
        let mut v = vec![
            r.namespace.clone(),
            r.name.clone(),
            r.ready.clone(),
            r.status.clone(),
            r.age.clone(),
        ];
        if style.wide {
            v.push(r.relation.clone());
            v.push(r.map_key.clone());
        }
        v
    };
    let all: Vec<Vec<String>> = rows.iter().map(cells).collect();
    let width = |i: usize| {
        all.iter()
            .map(|c| c[i].chars().count())
            .chain(std::iter::once(headers[i].len()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..headers.len()).map(width).collect();
    let mut out = String::new();
    let line = |cols: Vec<String>| -> String {
        let last = cols.len() - 1;
        let mut s = String::new();
        for (i, c) in cols.into_iter().enumerate() {
            if i == last {
                s.push_str(c.trim_end());
            } else {
                s.push_str(&c);
                s.push_str("  ");
            }
        }
        s.trim_end().to_string()
    };
    let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w.saturating_sub(s.chars().count())));
    out.push_str(&line(
        headers
            .iter()
            .enumerate()
            .map(|(i, h)| pad(h, widths[i]))
            .collect(),
    ));
    out.push('\n');
    for (r, c) in rows.iter().zip(all) {
        let cols: Vec<String> = c
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let padded = pad(v, widths[i]);
                if !style.color {
                    return padded;
                }
                paint(r, i, &padded)
            })
            .collect();
        out.push_str(&line(cols));
        out.push('\n');
    }
    out
}

/// Colors of one cell: column 1 (NAME) highlighted for the inspected object and dim for group
/// headers, READY by value, STATUS by severity.
fn paint(r: &Row, col: usize, s: &str) -> String {
    match col {
        1 if r.inspected => s.bold().cyan().to_string(),
        1 if r.header => s.dimmed().to_string(),
        2 => match r.ready.trim() {
            "True" => s.green().to_string(),
            "False" => s.red().to_string(),
            "Unknown" => s.yellow().to_string(),
            _ => s.to_string(),
        },
        3 => match r.severity {
            Severity::Good => s.green().to_string(),
            Severity::Warn => s.yellow().to_string(),
            Severity::Bad => s.red().to_string(),
            Severity::Neutral if r.header => s.dimmed().to_string(),
            Severity::Neutral => s.to_string(),
        },
        _ => s.to_string(),
    }
}

/// kubectl's human duration of `metadata.creationTimestamp` (`45s`, `3m12s`, `2h`, `4d`).
fn age(obj: &Value, now: jiff::Timestamp) -> String {
    let Some(created) = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
    else {
        return if object::name(obj).is_some() {
            "-".to_string()
        } else {
            String::new()
        };
    };
    human_duration((now.as_second() - created.as_second()).max(0))
}

/// kubectl's `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        match secs % 60 {
            0 => format!("{m}m"),
            s => format!("{m}m{s}s"),
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        match m % 60 {
            0 => format!("{h}h"),
            mm => format!("{h}h{mm}m"),
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        match h % 24 {
            0 => format!("{d}d"),
            hh => format!("{d}d{hh}h"),
        }
    } else if h < 24 * 365 * 2 {
        format!("{d}d")
    } else if h < 24 * 365 * 8 {
        let y = d / 365;
        match d % 365 {
            0 => format!("{y}y"),
            dd => format!("{y}y{dd}d"),
        }
    } else {
        format!("{}y", d / 365)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        for (secs, want) in [
            (0, "0s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 120, "3h2m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 3600, "3d1h"),
            (30 * 86400, "30d"),
            (800 * 86400, "2y70d"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }
}
