//! Keys -> what they do, close to k9s so habits carry over (see [`super::help::keys`]).
//! Pure: it changes the [`App`]'s UI state and returns what the run loop must do (quit, or a
//! dev loop command: resync, pause, replay, the same commands as the log mode's keyboard and
//! the control socket). No single key destroys anything.

use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::detail::yaml;
use super::model::{App, Focus, Overlay, Tab};
use super::parent_tree::selected_tree;
use crate::devloop::control::{Command, default_flight_path};

/// What the run loop does after an input event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// Nothing beyond redrawing (the state may have changed).
    Nothing,
    /// Leave the TUI.
    Quit,
    /// Send this command to the dev loop.
    Send(Command),
}

/// Handle one terminal event.
pub fn handle_event(app: &mut App, event: &Event) -> Intent {
    match event {
        Event::Key(k) if k.kind != KeyEventKind::Release => handle_key(app, *k),
        Event::Resize(..) | Event::FocusGained => {
            app.dirty = true;
            Intent::Nothing
        }
        _ => Intent::Nothing,
    }
}

/// Move the selection of the focused pane by `by` lines.
fn move_by(app: &mut App, by: isize) {
    match app.ui.focus {
        Focus::Parents => {
            app.ui.follow_first = false;
            let n = app.rows().len();
            let to = (app.ui.row as isize + by).clamp(0, n.saturating_sub(1) as isize);
            if to as usize != app.ui.row {
                app.ui.row = to as usize;
                app.ui.tree_row = 0;
                app.ui.detail_scroll = 0;
            }
        }
        Focus::Tree => {
            let items = selected_tree(app);
            let selectable: Vec<usize> = items
                .iter()
                .enumerate()
                .filter(|(_, i)| !i.heading)
                .map(|(n, _)| n)
                .collect();
            if selectable.is_empty() {
                return;
            }
            let at = selectable
                .iter()
                .position(|n| *n >= app.ui.tree_row)
                .unwrap_or(0) as isize;
            let to = (at + by).clamp(0, selectable.len() as isize - 1) as usize;
            app.ui.tree_row = selectable[to];
            app.ui.detail_scroll = 0;
        }
        Focus::Detail => {
            let s = i32::from(app.ui.detail_scroll) + by as i32;
            app.ui.detail_scroll = u16::try_from(s.max(0)).unwrap_or(u16::MAX);
        }
    }
}

fn quit_key(k: &KeyEvent) -> bool {
    k.code == KeyCode::Char('q')
        || (k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL))
}

/// Handle one key press.
pub fn handle_key(app: &mut App, k: KeyEvent) -> Intent {
    app.dirty = true;
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    if app.ui.editing_filter {
        match k.code {
            KeyCode::Esc => {
                app.ui.editing_filter = false;
                app.ui.filter.clear();
                app.filter_changed();
            }
            KeyCode::Enter => app.ui.editing_filter = false,
            KeyCode::Backspace => {
                app.ui.filter.pop();
                app.filter_changed();
            }
            KeyCode::Char('c') if ctrl => return Intent::Quit,
            KeyCode::Char(c) => {
                app.ui.filter.push(c);
                app.filter_changed();
            }
            _ => {}
        }
        return Intent::Nothing;
    }
    if app.ui.overlay.is_some() {
        match k.code {
            KeyCode::Esc | KeyCode::Char('?') | KeyCode::Enter => app.ui.overlay = None,
            KeyCode::Down | KeyCode::Char('j') => {
                app.ui.detail_scroll = app.ui.detail_scroll.saturating_add(1);
            }
            KeyCode::Up | KeyCode::Char('k') => {
                app.ui.detail_scroll = app.ui.detail_scroll.saturating_sub(1);
            }
            _ if quit_key(&k) => return Intent::Quit,
            _ => {}
        }
        return Intent::Nothing;
    }
    if quit_key(&k) {
        return Intent::Quit;
    }
    if app.replay.is_some() {
        // A replay steps; the dev loop's commands have nothing to act on.
        match k.code {
            KeyCode::Char('n') => return Intent::Send(Command::Step { by: 1 }),
            KeyCode::Char('b') => return Intent::Send(Command::Step { by: -1 }),
            KeyCode::Char('r' | 'R' | 'p' | 'f') => {
                app.ui.flash = Some("a replay only steps: n forward, b back (? for keys)".into());
                return Intent::Nothing;
            }
            _ => {}
        }
    }
    match k.code {
        KeyCode::Char('r') if ctrl => return Intent::Send(Command::Replay),
        KeyCode::Down | KeyCode::Char('j') => move_by(app, 1),
        KeyCode::Up | KeyCode::Char('k') => move_by(app, -1),
        KeyCode::PageDown => move_by(app, 20),
        KeyCode::PageUp => move_by(app, -20),
        KeyCode::Char('g') | KeyCode::Home => move_by(app, isize::MIN / 2),
        KeyCode::Char('G') | KeyCode::End => move_by(app, isize::MAX / 2),
        KeyCode::Enter | KeyCode::Tab => {
            app.ui.focus = match app.ui.focus {
                Focus::Parents => Focus::Tree,
                Focus::Tree => Focus::Detail,
                Focus::Detail => Focus::Parents,
            };
        }
        KeyCode::BackTab => {
            app.ui.focus = match app.ui.focus {
                Focus::Parents => Focus::Detail,
                Focus::Tree => Focus::Parents,
                Focus::Detail => Focus::Tree,
            };
        }
        KeyCode::Left | KeyCode::Char('h') => {
            app.ui.tab = app.ui.tab.step(-1);
            app.ui.detail_scroll = 0;
        }
        KeyCode::Right | KeyCode::Char('l') => {
            app.ui.tab = app.ui.tab.step(1);
            app.ui.detail_scroll = 0;
        }
        KeyCode::Char(c @ '1'..='5') => {
            app.ui.tab = Tab::ALL[usize::from(c as u8 - b'1')];
            app.ui.detail_scroll = 0;
        }
        KeyCode::Char('/') => {
            app.ui.editing_filter = true;
        }
        KeyCode::Esc => {
            app.ui.flash = None;
            if !app.ui.filter.is_empty() {
                app.ui.filter.clear();
                app.filter_changed();
            } else {
                app.ui.focus = Focus::Parents;
            }
        }
        KeyCode::Char('?') => app.ui.overlay = Some(Overlay::Help),
        KeyCode::Char('p') => return Intent::Send(Command::TogglePause),
        KeyCode::Char('R') => return Intent::Send(Command::Resync { parent: None }),
        KeyCode::Char('f') => {
            return Intent::Send(Command::DumpFlight {
                path: default_flight_path(),
            });
        }
        KeyCode::Char('r') => match app.selected() {
            Some(i) => {
                return Intent::Send(Command::Resync {
                    parent: Some(app.parents[i].key.clone()),
                });
            }
            None => app.ui.flash = Some("select a parent to resync (R resyncs all)".into()),
        },
        KeyCode::Char('d') => {
            app.ui.tab = Tab::Diff;
            app.ui.detail_scroll = 0;
            if app.ui.focus == Focus::Parents {
                app.ui.focus = Focus::Tree;
            }
            // On a line without a desired object (the parent), jump to the first child that has one.
            let items = selected_tree(app);
            if items
                .get(app.ui.tree_row)
                .is_none_or(|i| i.desired.is_none())
                && let Some(n) = items.iter().position(|i| i.desired.is_some())
            {
                app.ui.tree_row = n;
            }
        }
        KeyCode::Char('y') => show_yaml(app),
        _ => {}
    }
    Intent::Nothing
}

/// The YAML overlay of the selected tree object (or of the parent when the tree has no
/// selection).
fn show_yaml(app: &mut App) {
    let items = selected_tree(app);
    let pick = if app.ui.focus == Focus::Parents {
        items.first()
    } else {
        items.get(app.ui.tree_row).or(items.first())
    };
    match pick.and_then(|i| i.object().map(|o| (i.label.clone(), o))) {
        Some((label, obj)) => {
            app.ui.detail_scroll = 0;
            app.ui.overlay = Some(Overlay::Yaml(label, yaml(obj)));
        }
        None => app.ui.flash = Some("no object to show (no hook call yet)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn keys_map_to_commands() {
        let mut app = App::new("ctx", false);
        assert_eq!(handle_key(&mut app, key(KeyCode::Char('q'))), Intent::Quit);
        assert_eq!(
            handle_key(
                &mut app,
                KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
            ),
            Intent::Quit
        );
        assert_eq!(
            handle_key(&mut app, key(KeyCode::Char('p'))),
            Intent::Send(Command::TogglePause)
        );
        assert_eq!(
            handle_key(&mut app, key(KeyCode::Char('R'))),
            Intent::Send(Command::Resync { parent: None })
        );
        assert_eq!(
            handle_key(&mut app, key(KeyCode::Char('f'))),
            Intent::Send(Command::DumpFlight {
                path: format!("flight-{}.json", std::process::id())
            })
        );
        // `r` without a selected parent asks for one instead of resyncing everything.
        assert_eq!(
            handle_key(&mut app, key(KeyCode::Char('r'))),
            Intent::Nothing
        );
        assert!(app.ui.flash.is_some());
        // Typing a filter does not trigger commands: `q` is text there.
        handle_key(&mut app, key(KeyCode::Char('/')));
        assert_eq!(
            handle_key(&mut app, key(KeyCode::Char('q'))),
            Intent::Nothing
        );
        assert_eq!(app.ui.filter, "q");
        handle_key(&mut app, key(KeyCode::Esc));
        assert!(app.ui.filter.is_empty() && !app.ui.editing_filter);
        handle_key(&mut app, key(KeyCode::Char('?')));
        assert_eq!(app.ui.overlay, Some(Overlay::Help));
        handle_key(&mut app, key(KeyCode::Esc));
        assert_eq!(app.ui.overlay, None);
    }

    #[test]
    fn a_replay_steps_and_refuses_the_dev_loop_commands() {
        let mut app = App::new("ctx", false);
        // In dev, n and b do nothing.
        assert_eq!(
            handle_key(&mut app, key(KeyCode::Char('n'))),
            Intent::Nothing
        );
        app.replay = Some(crate::view::tui::model::ReplayPosition {
            step: 0,
            total: 3,
            state: "waiting".into(),
        });
        assert_eq!(
            handle_key(&mut app, key(KeyCode::Char('n'))),
            Intent::Send(Command::Step { by: 1 })
        );
        assert_eq!(
            handle_key(&mut app, key(KeyCode::Char('b'))),
            Intent::Send(Command::Step { by: -1 })
        );
        for c in ['p', 'R', 'f'] {
            assert_eq!(handle_key(&mut app, key(KeyCode::Char(c))), Intent::Nothing);
            assert!(
                app.ui
                    .flash
                    .as_deref()
                    .is_some_and(|f| f.contains("n forward"))
            );
        }
        assert_eq!(handle_key(&mut app, key(KeyCode::Char('q'))), Intent::Quit);
    }
}
