//! Terminal hygiene: raw mode and the alternate screen while the TUI runs, restored on every
//! way out: normal exit and errors (the guard's `Drop`), and panics (ratatui's `try_init`
//! installs a panic hook that restores the terminal before the panic message is printed).

use ratatui::DefaultTerminal;

/// Restores the terminal when dropped.
pub struct Guard {
    _private: (),
}

impl Drop for Guard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Enter raw mode and the alternate screen (with the panic hook), returning the terminal and
/// the guard that restores it.
pub fn enter() -> std::io::Result<(DefaultTerminal, Guard)> {
    let t = ratatui::try_init()?;
    Ok((t, Guard { _private: () }))
}
