//! The status bar (top, two lines) and the key hint footer (bottom line).
//!
//! Line 1: context and namespace, APPLY / PAUSED, the API server when it is unreachable (`API:
//! unreachable 12s`, red; gone once it is back) or why else writes are held, the managed hook
//! server (state, pid, restarts), parents syncing (the work in flight), the work queues' depth
//! (keys waiting for a worker, and those scheduled for later), writes in the last minute, the
//! API request rate once requests were made (`API req/s`, and in yellow the 429 answers so far,
//! the narrowed concurrency window and any `Retry-After` wait when the API server throttles),
//! errors. When that does not fit the width, the labels are shortened (80 columns hold it).
//! Line 2: the answer to the last command, else the last reload (what, which file, how long ago,
//! how many parents' replayed answers changed).

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::model::{App, Focus};
use super::theme::{self, Theme};
use crate::engine::error::WritesHeld;

/// After this long without an `apiRate` report the API request rate shows 0.
const API_RATE_STALE: std::time::Duration = std::time::Duration::from_secs(3);

/// The first line, with long labels (`wide`) or short ones.
fn line1(app: &mut App, now: Instant, wide: bool) -> Line<'static> {
    let t = Theme { color: app.color };
    let mask = app.mask_volatile;
    let sep = || Span::styled(if wide { " │ " } else { "│" }, t.dim());
    let mut l1 = Vec::new();
    if wide {
        let title = if app.replay.is_some() {
            " kubectl-meta replay"
        } else {
            " kubectl-meta dev"
        };
        l1.push(Span::styled(title, t.bold()));
        l1.push(sep());
    }
    l1.push(Span::raw(if wide {
        app.context.clone()
    } else {
        format!(" {}", app.context)
    }));
    l1.push(sep());
    l1.push(if let Some(r) = &app.replay {
        // The replay's position instead of APPLY: it writes only to its own sandbox.
        Span::styled(
            format!("step {}/{} {}", r.step, r.total, r.state),
            t.ok().add_modifier(Modifier::BOLD),
        )
    } else if app.paused {
        Span::styled(
            " PAUSED ",
            t.warn().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        )
    } else {
        Span::styled("APPLY", t.ok().add_modifier(Modifier::BOLD))
    });
    if let Some((since, why)) = &app.held {
        l1.push(sep());
        let age = theme::age(now.saturating_duration_since(*since), mask);
        let text = match why {
            WritesHeld::ApiUnreachable { .. } => format!("API: unreachable {age}"),
            WritesHeld::LeaseLost { .. } => format!("writes held: {why}"),
        };
        l1.push(Span::styled(
            text,
            t.err().add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ));
    }
    if !app.taken_over.is_empty() {
        // `dev --takeover`: who yielded what (they take it back when this loop exits).
        l1.push(sep());
        let mut from: Vec<&str> = app.taken_over.values().map(String::as_str).collect();
        from.sort_unstable();
        from.dedup();
        let n = app.taken_over.len();
        let text = match (wide, from.as_slice()) {
            (true, [one]) => format!("taken over from {one}: {n}"),
            (true, _) => format!("taken over from run: {n}"),
            (false, _) => format!("takeover {n}"),
        };
        l1.push(Span::styled(text, t.tone(crate::view::notice::Tone::Note)));
    }
    if let Some(s) = &app.server {
        l1.push(sep());
        let style = match s.state.as_str() {
            "ready" => t.ok(),
            "failed" | "exited" => t.err(),
            _ => t.warn(),
        };
        l1.push(Span::raw(if wide { "hook server " } else { "hook " }));
        l1.push(Span::styled(s.state.clone(), style));
        if let Some(pid) = s.pid {
            l1.push(Span::raw(if mask {
                " pid -".to_string()
            } else {
                format!(" pid {pid}")
            }));
        }
        if s.restarts > 0 {
            l1.push(Span::raw(format!(" ({} restarts)", s.restarts)));
        }
    }
    let syncing = app.syncing();
    let writes = app.writes_last_minute(now);
    let failing = app.failing();
    let label = |long: &'static str, short: &'static str| if wide { long } else { short };
    l1.push(sep());
    l1.push(Span::raw(format!("{} {syncing}", label("syncing", "sync"))));
    l1.push(sep());
    let q = app.queue;
    l1.push(Span::raw(format!("{} {}", label("queue", "q"), q.ready)));
    if q.scheduled > 0 {
        l1.push(Span::styled(format!(" +{} later", q.scheduled), t.dim()));
    }
    l1.push(sep());
    let wlabel = label("writes/min", "w/min");
    l1.push(Span::raw(if mask {
        format!("{wlabel} -")
    } else {
        format!("{wlabel} {writes}")
    }));
    if let Some((at, api)) = app.api {
        l1.push(sep());
        // A report older than a few seconds: requests stopped (reports come only while busy).
        let fresh = now.saturating_duration_since(at) < API_RATE_STALE;
        let rate = if mask {
            "-".to_string()
        } else if fresh {
            format!("{:.0}", api.per_second)
        } else {
            "0".to_string()
        };
        l1.push(Span::raw(format!("{} {rate}", label("API req/s", "api/s"))));
        if api.throttled > 0 {
            let mut text = format!(" 429×{}", api.throttled);
            if let Some(w) = api.window {
                text.push_str(&format!(" win {w}"));
            }
            if let Some(s) = api.retry_after_seconds.filter(|_| fresh) {
                text.push_str(&format!(" wait {s:.0}s"));
            }
            l1.push(Span::styled(text, t.warn()));
        }
    }
    l1.push(sep());
    l1.push(Span::styled(
        format!("{} {}", label("errors", "err"), app.errors),
        if app.errors > 0 || failing > 0 {
            t.err()
        } else {
            Style::default()
        },
    ));
    Line::from(l1)
}

/// Draw the status bar into `area` (two lines).
pub fn draw(f: &mut Frame, area: Rect, app: &mut App, now: Instant) {
    let t = Theme { color: app.color };
    let mask = app.mask_volatile;
    let long = line1(app, now, true);
    let l1 = if long.width() <= usize::from(area.width) {
        long
    } else {
        line1(app, now, false)
    };
    let l2 = if let Some(msg) = &app.ui.flash {
        Line::from(vec![Span::raw(" "), Span::styled(msg.clone(), t.warn())])
    } else if let Some(r) = &app.reload {
        let file = r
            .paths
            .first()
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
            .unwrap_or_default();
        let mut spans = vec![
            Span::raw(" last reload: "),
            Span::styled(format!("{} {file}", r.what), t.bold()),
            Span::raw(format!(
                " {} ago",
                theme::age(now.saturating_duration_since(r.at), mask)
            )),
        ];
        match &r.error {
            Some(e) => spans.push(Span::styled(format!(", refused: {e}"), t.err())),
            None => spans.push(Span::raw(format!(
                ", {} of {} replayed parent(s) changed their answer",
                r.changed, r.replayed
            ))),
        }
        Line::from(spans)
    } else {
        Line::from(Span::styled(" no reload yet", t.dim()))
    };
    f.render_widget(Paragraph::new(vec![l1, l2]), area);
}

use ratatui::style::Style;

/// Draw the key hint footer (or the filter being typed) into `area` (one line).
pub fn draw_footer(f: &mut Frame, area: Rect, app: &App) {
    let t = Theme { color: app.color };
    let line = if app.ui.editing_filter {
        Line::from(vec![
            Span::styled(" /", t.bold()),
            Span::raw(app.ui.filter.clone()),
            Span::styled("█", t.dim()),
            Span::styled("  enter: keep  esc: clear", t.dim()),
        ])
    } else {
        let pane = match app.ui.focus {
            Focus::Parents => "parents",
            Focus::Tree => "tree",
            Focus::Detail => "detail",
        };
        let mut spans = vec![Span::styled(format!(" [{pane}] "), t.bold())];
        let dev = [
            ("?", "help"),
            ("j/k", "move"),
            ("tab", "pane"),
            ("/", "filter"),
            ("r", "resync"),
            ("R", "all"),
            ("p", "pause"),
            ("y", "yaml"),
            ("d", "diff"),
            ("q", "quit"),
        ];
        let replay = [
            ("?", "help"),
            ("n", "step"),
            ("b", "back"),
            ("j/k", "move"),
            ("tab", "pane"),
            ("/", "filter"),
            ("y", "yaml"),
            ("d", "diff"),
            ("q", "quit"),
        ];
        let keys: &[(&str, &str)] = if app.replay.is_some() { &replay } else { &dev };
        for &(k, what) in keys {
            spans.push(Span::styled(k, t.warn()));
            spans.push(Span::styled(format!(":{what} "), t.dim()));
        }
        if !app.ui.filter.is_empty() {
            spans.push(Span::styled(
                format!(" filter /{}", app.ui.filter),
                t.bold(),
            ));
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(line), area);
}
