//! The left pane: controllers, and under each its parents with a state glyph (`✓` in sync,
//! `↻` syncing, `✗` failed with the retry countdown, `‖` plan held while paused, `·` not synced
//! yet), the last sync's age and its writes.
//!
//! Virtualized: only the rows inside the pane are looked at, so 10,000 parents cost about the
//! same per frame as ten (see benches/tui.rs).

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::model::{App, Focus, Row, SyncState};
use super::theme::{self, Theme};

/// The glyph and style of a state, with the retry countdown of a failure.
pub fn glyph(
    state: &SyncState,
    t: Theme,
    now: Instant,
    mask: bool,
) -> (String, ratatui::style::Style) {
    match state {
        SyncState::Pending => ("·".into(), t.dim()),
        SyncState::Syncing => ("↻".into(), t.warn()),
        SyncState::InSync => ("✓".into(), t.ok()),
        SyncState::Held => ("‖".into(), t.warn()),
        SyncState::Failed { retry_at } => (
            match retry_at {
                Some(at) => format!(
                    "✗ retry {}",
                    theme::age(at.saturating_duration_since(now), mask)
                ),
                None => "✗".into(),
            },
            t.err(),
        ),
    }
}

/// Draw the parent list into `area`.
pub fn draw(f: &mut Frame, area: Rect, app: &mut App, now: Instant) {
    let t = Theme { color: app.color };
    let mask = app.mask_volatile;
    let focused = app.ui.focus == Focus::Parents;
    let total = app.rows().len();
    let title = if app.ui.filter.is_empty() {
        format!(" Parents ({}) ", app.parents.len())
    } else {
        format!(" Parents /{} ", app.ui.filter)
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.border(focused))
        .title(title);
    let inner = block.inner(area);
    let height = usize::from(inner.height);
    // Keep the selection in view.
    if app.ui.row < app.ui.row_offset {
        app.ui.row_offset = app.ui.row;
    } else if height > 0 && app.ui.row >= app.ui.row_offset + height {
        app.ui.row_offset = app.ui.row + 1 - height;
    }
    let offset = app.ui.row_offset.min(total.saturating_sub(1));
    let selected = app.ui.row;
    let width = usize::from(inner.width);
    let visible: Vec<(usize, Row)> = app
        .rows()
        .iter()
        .copied()
        .enumerate()
        .skip(offset)
        .take(height)
        .collect();
    let mut lines = Vec::with_capacity(visible.len());
    for (i, row) in visible {
        let mut line = match row {
            Row::Controller(c) => {
                let c = &app.controllers[c];
                let kind = c.kind.trim_end_matches("Controller");
                let stopped = if c.stopped { " (stopped)" } else { "" };
                Line::from(vec![
                    Span::styled(format!("▾ {}", c.name), t.bold()),
                    Span::styled(format!(" {kind}{stopped}"), t.dim()),
                ])
            }
            Row::Parent(p) => {
                let p = &app.parents[p];
                let (g, style) = glyph(p.state(), t, now, mask);
                let mut right = String::new();
                if let Some(at) = p.unit.last_sync {
                    right = format!(
                        "{} w{}",
                        theme::age(now.saturating_duration_since(at), mask),
                        p.unit.writes
                    );
                }
                let keys = if p.keys.is_empty() {
                    String::new()
                } else {
                    format!(" [{} keys]", p.keys.len())
                };
                let left = format!("  {g} {}{keys}", p.key);
                let pad = width
                    .saturating_sub(left.chars().count() + right.chars().count())
                    .max(1);
                Line::from(vec![
                    Span::raw("  "),
                    Span::styled(g, style),
                    Span::raw(format!(" {}{keys}", p.key)),
                    Span::raw(" ".repeat(pad)),
                    Span::styled(right, t.dim()),
                ])
            }
        };
        if i == selected {
            line = line.style(if focused { t.selected() } else { t.bold() });
        }
        lines.push(line);
    }
    if total <= 1 && app.parents.is_empty() {
        lines.push(Line::from(Span::styled(" waiting for parents…", t.dim())));
    }
    f.render_widget(Paragraph::new(lines).block(block), area);
}
