//! The centre pane: the selected parent's tree, with a plan marker per object from the last
//! sync's per-object plan (`EngineEvent::Planned`: `=` in sync, `~` update, `+` create, `-`
//! delete or recreate, `a` adopted, `r` released, `w` waiting in a rollout, `s` a difference
//! left alone, `k` kept by the tombstone hook; a held write says so while paused).
//!
//! - CompositeController: the parent, then its children by type.
//! - DecoratorController: the target, its attachments by type, and the labels, annotations and
//!   status it merges into the target.
//! - MapController: the parent, then each map key with its input and outputs, and the detached
//!   outputs under their key with their tombstone state.
//!
//! The tree is built from the last sync's per-object plan (what the sync observed and does,
//! object by object) and the hook's answer (what is desired), see [`super::tree`].

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::model::{App, Focus, error_heading};
use super::parent_list::glyph;
use super::theme::{self, Theme};
use super::tree::{TreeItem, tree};

/// The tree of the selected parent (empty when none is selected).
pub fn selected_tree(app: &mut App) -> Vec<TreeItem> {
    let Some(i) = app.selected() else {
        return Vec::new();
    };
    let p = &app.parents[i];
    let kind = app
        .controller_of(p)
        .map(|c| c.kind.clone())
        .unwrap_or_default();
    tree(&kind, p)
}

/// Draw the tree of the selected parent into `area`.
pub fn draw(f: &mut Frame, area: Rect, app: &mut App, items: &[TreeItem], now: Instant) {
    let t = Theme { color: app.color };
    let mask = app.mask_volatile;
    let focused = app.ui.focus == Focus::Tree;
    let Some(pi) = app.selected() else {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(t.border(focused))
            .title(" Tree ");
        f.render_widget(
            Paragraph::new(Line::from(Span::styled(
                " select a parent (j/k, enter)",
                t.dim(),
            )))
            .block(block),
            area,
        );
        return;
    };
    let p = &app.parents[pi];
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.border(focused))
        .title(format!(" {} ", p.key));
    let mut lines = Vec::new();
    let (g, style) = glyph(p.state(), t, now, mask);
    let mut head = vec![Span::styled(g, style)];
    if let Some(d) = p.unit.last_duration {
        head.push(Span::styled(
            format!(
                " {} ago · {} · ",
                theme::age(
                    p.unit
                        .last_sync
                        .map_or_else(Default::default, |s| now.saturating_duration_since(s)),
                    mask
                ),
                theme::duration(d, mask)
            ),
            t.dim(),
        ));
        head.push(Span::styled(format!("{} writes", p.unit.writes), t.dim()));
    }
    lines.push(Line::from(head));
    if let Some(e) = &p.unit.error {
        let heading = error_heading(p.unit.error_layer);
        lines.push(Line::from(Span::styled(format!("{heading}: {e}"), t.err())));
    }
    if let Some(r) = &p.rollout {
        lines.push(Line::from(Span::styled(format!("rollout {r}"), t.warn())));
    }
    let row = app.ui.tree_row.min(items.len().saturating_sub(1));
    for (i, it) in items.iter().enumerate() {
        let indent = "  ".repeat(usize::from(it.depth));
        let mut spans = vec![Span::raw(indent)];
        if let Some(m) = it.marker {
            let st = match m {
                '=' => t.ok(),
                '+' | 'a' => t.fg(ratatui::style::Color::Cyan),
                '-' | 'r' => t.err(),
                _ => t.warn(),
            };
            spans.push(Span::styled(format!("{m} "), st));
        }
        spans.push(Span::styled(
            it.label.clone(),
            if it.heading {
                t.bold()
            } else {
                ratatui::style::Style::default()
            },
        ));
        if let Some(n) = &it.note {
            spans.push(Span::styled(format!("  {n}"), t.dim()));
        }
        let mut line = Line::from(spans);
        if i == row && !it.heading {
            line = line.style(if focused { t.selected() } else { t.bold() });
        }
        lines.push(line);
    }
    if items.len() <= 1 && p.unit.main_call().is_none() && p.keys.is_empty() {
        lines.push(Line::from(Span::styled("no hook call yet", t.dim())));
    }
    // Keep the selected line in view.
    let header = lines.len() - items.len();
    let height = usize::from(block.inner(area).height);
    let scroll = (header + row + 1).saturating_sub(height);
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((u16::try_from(scroll).unwrap_or(u16::MAX), 0)),
        area,
    );
}
