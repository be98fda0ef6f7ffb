//! The right pane, in tabs: the last hook call's Request and Response (pretty JSON, colored),
//! Diff (desired vs live of the selected object, restricted to the fields the hook sets, and
//! the replay diff of the last reload), Hook output (exec hook stderr, the managed server's
//! output) and Events (the parent's Kubernetes Events, the engine's events about the parent,
//! then its global notices).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Tabs, Wrap};
use serde_json::Value;

use super::model::{App, Focus, HookRecord, Parent, Tab};
use super::theme::{self, Theme};
use super::tree::TreeItem;

/// Pretty JSON as colored lines (keys, strings, numbers, literals).
pub fn json_lines(v: &Value, t: Theme) -> Vec<Line<'static>> {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    text.lines()
        .map(|l| {
            let indent_len = l.len() - l.trim_start().len();
            let (indent, rest) = l.split_at(indent_len);
            let mut spans = vec![Span::raw(indent.to_string())];
            let value = match rest.find("\": ") {
                Some(i) if rest.starts_with('"') => {
                    spans.push(Span::styled(rest[..=i].to_string(), t.fg(Color::Cyan)));
                    spans.push(Span::raw(": "));
                    &rest[i + 3..]
                }
                _ => rest,
            };
            let style = match value.chars().next() {
                Some('"') => t.fg(Color::Green),
                Some('0'..='9' | '-') => t.fg(Color::Yellow),
                Some('t' | 'f' | 'n') => t.fg(Color::Magenta),
                _ => Style::default(),
            };
            spans.push(Span::styled(value.to_string(), style));
            Line::from(spans)
        })
        .collect()
}

/// `live` restricted to the fields `desired` sets (objects key by key; lists and scalars whole),
/// so a diff shows what the hook asks for, not every defaulted field.
fn project(live: &Value, desired: &Value) -> Value {
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => Value::Object(
            d.iter()
                .filter_map(|(k, dv)| l.get(k).map(|lv| (k.clone(), project(lv, dv))))
                .collect(),
        ),
        (l, _) => l.clone(),
    }
}

/// A YAML rendering of `v` (JSON when it cannot be written as YAML).
pub fn yaml(v: &Value) -> String {
    serde_saphyr::to_string(v)
        .unwrap_or_else(|_| serde_json::to_string_pretty(v).unwrap_or_default())
}

/// Unified diff lines of live (projected) vs desired.
fn diff_lines(item: &TreeItem, t: Theme) -> Vec<Line<'static>> {
    let (live, desired) = match (&item.live, &item.desired) {
        (Some(l), Some(d)) => (yaml(&project(l, d)), yaml(d)),
        (None, Some(d)) => (String::new(), yaml(d)),
        (Some(_), None) => {
            return vec![Line::from(Span::styled(
                format!(
                    "{}: the hook gives no desired object for it (see Response)",
                    item.label
                ),
                t.dim(),
            ))];
        }
        (None, None) => return vec![Line::from(Span::styled("no object selected", t.dim()))],
    };
    let diff = similar::TextDiff::from_lines(&live, &desired);
    let mut out = vec![Line::from(Span::styled(
        format!("--- live  +++ desired  ({})", item.label),
        t.bold(),
    ))];
    let mut changed = false;
    for change in diff.iter_all_changes() {
        let (sign, style) = match change.tag() {
            similar::ChangeTag::Delete => ('-', t.err()),
            similar::ChangeTag::Insert => ('+', t.ok()),
            similar::ChangeTag::Equal => (' ', Style::default()),
        };
        changed |= sign != ' ';
        out.push(Line::from(Span::styled(
            format!("{sign}{}", change.value().trim_end_matches('\n')),
            style,
        )));
    }
    if !changed {
        out.insert(
            1,
            Line::from(Span::styled("(live matches desired)", t.ok())),
        );
    }
    out
}

fn call_header(c: &HookRecord, t: Theme, mask: bool) -> Line<'static> {
    let status = c.status.map(|s| format!(" HTTP {s}")).unwrap_or_default();
    let (what, style) = match &c.error {
        Some(e) => (format!(" failed: {e}"), t.err()),
        None => (" ok".to_string(), t.ok()),
    };
    Line::from(vec![
        Span::styled(format!("{} hook", c.hook), t.bold()),
        Span::raw(format!("{status} {}", theme::duration(c.latency, mask))),
        Span::styled(what, style),
    ])
}

/// The lines of the selected tab.
fn content(app: &mut App, item: Option<&TreeItem>) -> Vec<Line<'static>> {
    let t = Theme { color: app.color };
    let mask = app.mask_volatile;
    let Some(pi) = app.selected() else {
        return vec![Line::from(Span::styled("no parent selected", t.dim()))];
    };
    let app = &*app;
    let p = &app.parents[pi];
    // A line under a map key shows that key's call; else the parent's, else the first key's.
    let call = item
        .and_then(|i| i.key.as_ref())
        .and_then(|k| p.keys.get(k))
        .and_then(|u| u.main_call())
        .or_else(|| p.unit.main_call())
        .or_else(|| p.keys.values().find_map(|u| u.main_call()));
    match app.ui.tab {
        Tab::Request | Tab::Response => match call {
            Some(c) => call_lines(c, app.ui.tab == Tab::Request, t, mask),
            None => vec![Line::from(Span::styled("no hook call yet", t.dim()))],
        },
        Tab::Diff => diff_tab(p, item, t),
        Tab::Output => output_tab(app, call, t),
        Tab::Events => events_tab(app, p, t, mask),
    }
}

/// The Request (`request`) or Response tab: the call's outcome, then its body (a request's
/// controller definition last).
fn call_lines(c: &HookRecord, request: bool, t: Theme, mask: bool) -> Vec<Line<'static>> {
    let mut out = vec![call_header(c, t, mask)];
    let body = if request {
        c.request.as_deref()
    } else {
        c.response.as_deref()
    };
    match body {
        Some(Value::String(s)) => out.extend(s.lines().map(|l| Line::from(l.to_string()))),
        Some(Value::Object(m)) if m.contains_key("controller") => {
            // The controller definition is the same in every request: last, not first.
            let mut m = m.clone();
            if let Some(c) = m.shift_remove("controller") {
                m.insert("controller".into(), c);
            }
            out.extend(json_lines(&Value::Object(m), t));
        }
        Some(v) => out.extend(json_lines(v, t)),
        None => out.push(Line::from(Span::styled("(no body)", t.dim()))),
    }
    out
}

/// The Diff tab: the selected object's diff, then the parent's last replay.
fn diff_tab(p: &Parent, item: Option<&TreeItem>, t: Theme) -> Vec<Line<'static>> {
    let mut out = match item {
        Some(it) if !it.heading => diff_lines(it, t),
        _ => vec![Line::from(Span::styled(
            "select an object in the tree for its diff",
            t.dim(),
        ))],
    };
    out.push(Line::from(""));
    match &p.replay {
        None => out.push(Line::from(Span::styled(
            "no replay yet (reload a hook, or ctrl-r)",
            t.dim(),
        ))),
        Some(r) => {
            out.push(Line::from(Span::styled(
                format!("replay of the {} hook after the last reload:", r.hook),
                t.bold(),
            )));
            if let Some(e) = &r.error {
                out.push(Line::from(Span::styled(format!("  failed: {e}"), t.err())));
            } else if r.changes.is_empty() {
                out.push(Line::from("  same answer"));
            }
            for c in &r.changes {
                let show = |v: &Option<Value>| v.as_ref().map_or("(none)".into(), Value::to_string);
                out.push(Line::from(vec![
                    Span::raw(format!("  {}: ", c.path)),
                    Span::styled(show(&c.old), t.err()),
                    Span::raw(" → "),
                    Span::styled(show(&c.new), t.ok()),
                ]));
            }
        }
    }
    out
}

/// The Hook output tab: the call's exec hook stderr, then the managed server's output.
fn output_tab(app: &App, call: Option<&HookRecord>, t: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    match call.and_then(|c| c.stderr.as_ref()) {
        Some(s) => {
            out.push(Line::from(Span::styled(
                "exec hook stderr (last call):",
                t.bold(),
            )));
            out.extend(s.lines().map(|l| Line::from(l.to_string())));
        }
        None => out.push(Line::from(Span::styled(
            "exec hook stderr: (none)",
            t.dim(),
        ))),
    }
    if app.server.is_some() || !app.server_output.is_empty() {
        out.push(Line::from(Span::styled("hook server output:", t.bold())));
        out.extend(app.server_output.iter().map(|l| Line::from(l.clone())));
    }
    out
}

/// The Events tab: the parent's Kubernetes Events, the engine's events about it, then the
/// engine's latest global notices.
fn events_tab(app: &App, p: &Parent, t: Theme, mask: bool) -> Vec<Line<'static>> {
    let mut out = vec![Line::from(Span::styled("Kubernetes events:", t.bold()))];
    let now = jiff::Timestamp::now();
    let before = out.len();
    for e in p.uid.iter().flat_map(|u| app.kube_events.of(u)) {
        let age = e
            .last
            .as_deref()
            .and_then(|l| l.parse::<jiff::Timestamp>().ok())
            .and_then(|l| now.duration_since(l).try_into().ok())
            .map_or_else(|| "-".to_string(), |d| theme::age(d, mask));
        let count = if e.count > 1 {
            format!(" x{}", e.count)
        } else {
            String::new()
        };
        out.push(Line::from(vec![
            Span::styled(
                format!("{} {}", e.kind, e.reason),
                if e.kind == "Warning" { t.err() } else { t.ok() },
            ),
            Span::styled(format!("{count} {age} ago {}: ", e.source), t.dim()),
            Span::raw(e.message.clone()),
        ]));
    }
    if out.len() == before {
        out.push(Line::from(Span::styled("none", t.dim())));
    }
    out.push(Line::from(Span::styled("this parent (engine):", t.bold())));
    out.extend(p.log.iter().map(|l| notice_line(t, l)));
    if p.log.is_empty() {
        out.push(Line::from(Span::styled(
            "no events for this parent yet",
            t.dim(),
        )));
    }
    out.push(Line::from(Span::styled("engine:", t.bold())));
    out.extend(app.log.iter().rev().take(50).map(|l| notice_line(t, l)));
    out
}

/// A log line of engine notices, its tones as the theme's styles.
fn notice_line(t: Theme, line: &crate::view::notice::Line) -> Line<'static> {
    Line::from(
        line.iter()
            .map(|s| Span::styled(s.text.clone(), t.tone(s.tone)))
            .collect::<Vec<_>>(),
    )
}

/// Draw the detail tabs into `area`; `item` is the selected tree line.
pub fn draw(f: &mut Frame, area: Rect, app: &mut App, item: Option<&TreeItem>) {
    let t = Theme { color: app.color };
    let focused = app.ui.focus == Focus::Detail;
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.border(focused));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [tabs_area, body] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
    let tabs = Tabs::new(Tab::ALL.iter().map(|t| t.title()))
        .select(Tab::ALL.iter().position(|x| *x == app.ui.tab))
        .style(t.dim())
        .highlight_style(t.selected())
        .divider("|")
        .padding("", "");
    f.render_widget(tabs, tabs_area);
    let lines = content(app, item);
    let max = u16::try_from(lines.len().saturating_sub(1)).unwrap_or(u16::MAX);
    app.ui.detail_scroll = app.ui.detail_scroll.min(max);
    let mut text = Paragraph::new(lines).scroll((app.ui.detail_scroll, 0));
    if app.ui.tab == Tab::Events {
        // Event messages are prose: wrapped, not clipped.
        text = text.wrap(Wrap { trim: false });
    }
    f.render_widget(text, body);
}
