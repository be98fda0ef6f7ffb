//! Terminal hygiene: raw mode and the alternate screen while the TUI runs, restored on every
//! way out: normal exit and errors (the guard's `Drop`), and panics (a panic hook gives stderr
//! back and restores the terminal before the panic message is printed). Restoring happens
//! once: leaving the alternate screen a second time would move the cursor back over what was
//! printed since (the panic message), as the terminal restores the cursor it saved on entry.
//!
//! While the TUI owns the screen, anything written to stderr (warnings from the log
//! subscriber, a library's message) would scribble over the frame, so stderr (fd 2) is sent
//! to a temporary file and replayed on the real stderr when the terminal is restored: delayed,
//! never lost.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use ratatui::DefaultTerminal;
use ratatui::crossterm::{cursor, execute, terminal};

/// Raw mode and the alternate screen are on (set by [`enter`], cleared by the first restore).
static ENTERED: AtomicBool = AtomicBool::new(false);

/// Leave the alternate screen and raw mode and show the cursor, if not done yet (idempotent;
/// safe from a panic hook).
fn restore_terminal() {
    if ENTERED.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(
            std::io::stdout(),
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
    }
}

/// The saved real stderr while it is redirected (-1 when not).
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);

/// Give fd 2 back its saved target (idempotent; safe from a panic hook).
fn restore_stderr() {
    let saved = SAVED_STDERR.swap(-1, Ordering::SeqCst);
    if saved >= 0 {
        // SAFETY: plain fd calls on a descriptor we own (from `dup`).
        unsafe {
            libc::dup2(saved, 2);
            libc::close(saved);
        }
    }
}

/// Send fd 2 to `file`, remembering where it went before.
fn redirect_stderr(file: &File) -> std::io::Result<()> {
    // SAFETY: plain fd calls; `file` stays open while fd 2 points at it (dup2 duplicates it).
    let saved = unsafe { libc::dup(2) };
    if saved < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if unsafe { libc::dup2(file.as_raw_fd(), 2) } < 0 {
        let e = std::io::Error::last_os_error();
        unsafe { libc::close(saved) };
        return Err(e);
    }
    SAVED_STDERR.store(saved, Ordering::SeqCst);
    Ok(())
}

/// Restores the terminal (and stderr, replaying what was written to it) when dropped.
pub struct Guard {
    captured: Option<(File, PathBuf)>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore_terminal();
        restore_stderr();
        if let Some((mut file, path)) = self.captured.take() {
            let mut text = String::new();
            if file.rewind().is_ok() && file.read_to_string(&mut text).is_ok() && !text.is_empty() {
                let mut err = std::io::stderr();
                let _ = writeln!(err, "(written to stderr while the terminal UI ran:)");
                let _ = err.write_all(text.as_bytes());
            }
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Enter raw mode and the alternate screen (with the panic hooks) and park stderr in a
/// temporary file, returning the terminal and the guard that restores all of it.
pub fn enter() -> std::io::Result<(DefaultTerminal, Guard)> {
    terminal::enable_raw_mode()?;
    ENTERED.store(true, Ordering::SeqCst);
    let t = execute!(std::io::stdout(), terminal::EnterAlternateScreen).and_then(|()| {
        DefaultTerminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))
    });
    let t = match t {
        Ok(t) => t,
        Err(e) => {
            restore_terminal();
            return Err(e);
        }
    };
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_stderr();
        restore_terminal();
        previous(info);
    }));
    let path = std::env::temp_dir().join(format!("kubectl-meta-tui-{}.stderr", std::process::id()));
    let captured = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .and_then(|f| redirect_stderr(&f).map(|()| (f, path)))
        .ok();
    Ok((t, Guard { captured }))
}
