//! The frame: status bar on top, the three panes (parents | tree | detail tabs), the key hint
//! footer, and an overlay (help, YAML) when one is open. 80x24 is the smallest size designed
//! for; below it the panes shrink and clip rather than fail.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};

use super::app::{App, Overlay};
use super::{detail, help, parent_list, parent_tree, status_bar};

/// Draw the whole frame.
pub fn draw(f: &mut Frame, app: &mut App, now: Instant) {
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
        Some(Overlay::Help) => help::draw(f, f.area(), app.color),
        Some(Overlay::Yaml(title, text)) => {
            help::draw_yaml(f, f.area(), title, text, app.ui.detail_scroll, app.color);
        }
        None => {}
    }
}
