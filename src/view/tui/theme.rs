//! Colors and text styles of the TUI, in one place so that `NO_COLOR` (or a non-color run)
//! turns every color off while keeping bold and reverse video, which carry the selection.

use ratatui::style::{Color, Modifier, Style};

use crate::view::notice::Tone;

/// The styles of one run.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    /// Colors on.
    pub color: bool,
}

impl Theme {
    /// A foreground color (plain text when colors are off).
    pub fn fg(self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    /// The style of a [`Tone`] of the engine's notices (the same tones the headless log
    /// colors).
    pub fn tone(self, tone: Tone) -> Style {
        match tone {
            Tone::Plain => Style::default(),
            Tone::Dim => self.dim(),
            Tone::Good => self.ok(),
            Tone::Warn => self.warn(),
            Tone::Bad => self.err(),
            Tone::Alert => self.err().add_modifier(Modifier::BOLD),
            Tone::Note => self.fg(Color::Cyan),
            Tone::Meta => self.fg(Color::Blue),
            Tone::Step => self.fg(Color::Magenta),
        }
    }

    /// The selected line of the focused pane.
    pub fn selected(self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    /// Headings and labels.
    pub fn bold(self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }

    /// Secondary text (ages, counts).
    pub fn dim(self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default()
        }
    }

    /// Success.
    pub fn ok(self) -> Style {
        self.fg(Color::Green)
    }

    /// Warnings and things in progress.
    pub fn warn(self) -> Style {
        self.fg(Color::Yellow)
    }

    /// Errors.
    pub fn err(self) -> Style {
        self.fg(Color::Red)
    }

    /// The border of a pane, highlighted when focused.
    pub fn border(self, focused: bool) -> Style {
        match (focused, self.color) {
            (true, true) => Style::default().fg(Color::Cyan),
            (true, false) => Style::default().add_modifier(Modifier::BOLD),
            (false, _) => self.dim(),
        }
    }
}

/// `3s`, `5m`, `2h`, `4d` (or `-` when `mask` is set, for deterministic snapshots).
pub fn age(d: std::time::Duration, mask: bool) -> String {
    if mask {
        return "-".into();
    }
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// A duration as `12ms` / `1.2s` (or `-` when masked).
pub fn duration(d: std::time::Duration, mask: bool) -> String {
    if mask {
        return "-".into();
    }
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ages_and_durations() {
        assert_eq!(age(Duration::from_secs(59), false), "59s");
        assert_eq!(age(Duration::from_secs(61), false), "1m");
        assert_eq!(age(Duration::from_secs(7200), false), "2h");
        assert_eq!(age(Duration::from_secs(7200), true), "-");
        assert_eq!(duration(Duration::from_millis(12), false), "12ms");
        assert_eq!(duration(Duration::from_millis(1500), false), "1.5s");
    }
}
