//! The `?` help screen (and the YAML overlay): a box over the panes, closed with `esc`.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::theme::Theme;

/// Moving around (dev and replay alike): `(keys, what)`.
const NAVIGATION: [(&str, &str); 6] = [
    ("↑ ↓  j k", "move in the focused pane"),
    ("PgUp PgDn  g G", "page, first, last"),
    ("enter  tab", "next pane (shift-tab: previous)"),
    ("← →  h l  1-5", "detail tabs (in the detail pane: ← →)"),
    ("/", "filter parents by name (enter keeps, esc clears)"),
    ("esc", "close, clear the filter, back to the parents"),
];

/// The dev loop's commands.
const DEV_COMMANDS: [(&str, &str); 5] = [
    ("r", "resync the selected parent"),
    ("R", "resync every parent"),
    ("p", "pause / resume writes (plans are still shown)"),
    ("ctrl-r", "replay the last requests against the hooks"),
    ("f", "write the flight recording to flight-PID.json"),
];

/// A replay's steps (`kubectl meta replay`: the dev loop's commands are not there).
const REPLAY_COMMANDS: [(&str, &str); 2] = [
    ("n", "step forward: the next recorded sync"),
    ("b", "step back (replayed again from the first state)"),
];

/// Views, help, quit, and the legend.
const REST: [(&str, &str); 10] = [
    ("y", "YAML of the selected object"),
    ("d", "diff of the selected object (desired vs live)"),
    ("?", "this help"),
    ("q  ctrl-c", "quit (the terminal is restored)"),
    ("", ""),
    ("markers", "= in sync  ~ update  + create  - delete"),
    ("", "a adopted  r released  w waiting in a rollout"),
    ("", "s left alone (OnDelete)  k kept (tombstone)"),
    (
        "glyphs",
        "✓ in sync  ↻ syncing  ✗ failed  ‖ held  · pending",
    ),
    ("step N/M", "replay: N syncs replayed of the M recorded"),
];

/// The keys, as the help screen lists them: `(keys, what)`; a replay's (`replay`) step
/// instead of sending the dev loop's commands.
pub fn keys(replay: bool) -> Vec<(&'static str, &'static str)> {
    let (commands, rest): (&[_], &[_]) = if replay {
        (&REPLAY_COMMANDS, &REST)
    } else {
        (&DEV_COMMANDS, &REST[..REST.len() - 1])
    };
    let mut out = Vec::new();
    if replay {
        out.extend_from_slice(commands);
        out.extend_from_slice(&NAVIGATION);
    } else {
        out.extend_from_slice(&NAVIGATION);
        out.extend_from_slice(commands);
    }
    out.extend_from_slice(rest);
    out
}

/// A centred rectangle of at most `w` x `h` inside `area`.
fn centred(area: Rect, w: u16, h: u16) -> Rect {
    let [v] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(v);
    r
}

/// Draw the help screen over `area` (the replay's keys with `replay`).
pub fn draw(f: &mut Frame, area: Rect, color: bool, replay: bool) {
    let t = Theme { color };
    let lines: Vec<Line> = keys(replay)
        .into_iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!(" {k:<16}"), t.warn()),
                Span::raw(what),
            ])
        })
        .collect();
    let r = centred(area, 72, u16::try_from(lines.len() + 2).unwrap_or(u16::MAX));
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(t.border(true))
                .title(" Keys (esc closes) "),
        ),
        r,
    );
}

/// Draw a YAML document over `area`, scrolled by `scroll` lines.
pub fn draw_yaml(f: &mut Frame, area: Rect, title: &str, text: &str, scroll: u16, color: bool) {
    let t = Theme { color };
    let r = centred(
        area,
        area.width.saturating_sub(4),
        area.height.saturating_sub(2),
    );
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(text.to_string()).scroll((scroll, 0)).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(t.border(true))
                .title(format!(" {title} (esc closes) ")),
        ),
        r,
    );
}
