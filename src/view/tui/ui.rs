//! The frame: status bar on top, the three panes (parents | tree | detail tabs), the key hint
//! footer, and an overlay (help, YAML) when one is open. 80x24 is the smallest size designed
//! for; below it the panes shrink and clip, and below [`MIN_WIDTH`]x[`MIN_HEIGHT`] (where the
//! panes would show nothing useful) the frame says the terminal is too small instead; keys
//! still work (`q` quits) and the full frame is back as soon as the window is large enough.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

use super::model::{App, Overlay};
use super::theme::Theme;
use super::{detail, help, parent_list, parent_tree, status_bar};

/// Narrower than this, the frame says the terminal is too small.
pub const MIN_WIDTH: u16 = 60;
/// Shorter than this, the frame says the terminal is too small.
pub const MIN_HEIGHT: u16 = 16;

/// Draw the whole frame.
pub fn draw(f: &mut Frame, app: &mut App, now: Instant) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let t = Theme { color: app.color };
        let mut lines = vec![
            Line::styled(
                format!("terminal too small: {}x{}", area.width, area.height),
                t.warn(),
            ),
            Line::raw(format!(
                "kubectl meta {} needs at least {MIN_WIDTH}x{MIN_HEIGHT} (80x24 recommended)",
                if app.replay.is_some() {
                    "replay"
                } else {
                    "dev"
                }
            )),
            Line::raw("enlarge the window, or press q to quit"),
        ];
        if app.paused {
            lines.push(Line::styled("writes are PAUSED", t.warn()));
        }
        let pad = area.height.saturating_sub(lines.len() as u16 + 2) / 2;
        let mut text = vec![Line::raw(""); usize::from(pad)];
        text.extend(lines);
        f.render_widget(
            Paragraph::new(text)
                .alignment(Alignment::Center)
                .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let [status, main, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let [left, centre, right] = Layout::horizontal([
        Constraint::Percentage(30),
        Constraint::Percentage(32),
        Constraint::Percentage(38),
    ])
    .areas(main);
    status_bar::draw(f, status, app, now);
    parent_list::draw(f, left, app, now);
    let items = parent_tree::selected_tree(app);
    // The tree's selection rests on an object line, never on a heading.
    if items.get(app.ui.tree_row).is_none_or(|i| i.heading) {
        app.ui.tree_row = items.iter().position(|i| !i.heading).unwrap_or(0);
    }
    parent_tree::draw(f, centre, app, &items, now);
    detail::draw(f, right, app, items.get(app.ui.tree_row));
    status_bar::draw_footer(f, footer, app);
    match &app.ui.overlay {
        Some(Overlay::Help) => help::draw(f, f.area(), app.color, app.replay.is_some()),
        Some(Overlay::Yaml(title, text)) => {
            help::draw_yaml(f, f.area(), title, text, app.ui.detail_scroll, app.color);
        }
        None => {}
    }
}
