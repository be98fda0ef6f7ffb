//! Ctrl-C and SIGTERM, caught from the moment a long-running command starts.
//!
//! `tokio::signal::ctrl_c()` sees only the signals that arrive while it is awaited, and the first
//! call replaces the default action for the rest of the process. A command that creates a fresh
//! `ctrl_c()` future in each wait therefore loses the signals that arrive between two waits, and
//! one that arrives before the first wait (say, right after "server ready" is printed) kills the
//! process without a word: no Lease released, no "stopping" said. [`Interrupts`] installs both
//! handlers once, before the command prints anything, and counts every signal, so each wait sees
//! every signal since the start: the first one stops, the second one exits at once.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// What has been received so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// How many SIGINT and SIGTERM signals, together (a burst may count as one).
    pub count: u32,
    /// Whether the latest one was SIGTERM (else SIGINT).
    pub terminated: bool,
}

impl Received {
    /// "interrupted" (Ctrl-C) or "terminated" (SIGTERM), for the latest signal.
    pub fn verb(self) -> &'static str {
        if self.terminated {
            "terminated"
        } else {
            "interrupted"
        }
    }
}

/// A handle on the process's SIGINT and SIGTERM counter; clones share it.
#[derive(Debug, Clone)]
pub struct Interrupts {
    received: watch::Receiver<Received>,
}

impl Interrupts {
    /// Install the SIGINT and SIGTERM handlers and start counting. Call it once, first thing
    /// (inside the runtime); from then on neither signal kills the process by itself.
    pub fn install() -> std::io::Result<Interrupts> {
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let (tx, received) = watch::channel(Received::default());
        tokio::spawn(async move {
            loop {
                let terminated = tokio::select! {
                    Some(()) = int.recv() => false,
                    Some(()) = term.recv() => true,
                    else => return,
                };
                tx.send_modify(|r| {
                    r.count += 1;
                    r.terminated = terminated;
                });
            }
        });
        Ok(Interrupts { received })
    }

    /// What has been received so far.
    pub fn received(&self) -> Received {
        *self.received.borrow()
    }

    /// Wait until at least `n` signals have been received in all (at once if they have) and
    /// say what the latest was. Never returns if the counter stopped.
    pub async fn nth(&self, n: u32) -> Received {
        let mut rx = self.received.clone();
        let got = rx.wait_for(|r| r.count >= n).await.map(|r| *r);
        match got {
            Ok(r) => r,
            Err(_) => std::future::pending().await,
        }
    }

    /// Wait for the first signal (at once if one came already).
    pub async fn first(&self) -> Received {
        self.nth(1).await
    }

    /// Wait for one more signal than had been received when this was called (not when the
    /// future is first polled).
    pub fn next(&self) -> impl Future<Output = Received> + Send + 'static {
        let n = self.received().count + 1;
        let this = self.clone();
        async move { this.nth(n).await }
    }

    /// While stopping, let the next Ctrl-C (or SIGTERM) exit at once (exit code of
    /// [`super::exit::Class::Interrupted`]), saying `left_behind` (what stopping at once leaves behind).
    pub fn exit_on_next(&self, left_behind: &'static str) {
        let again = self.next();
        tokio::spawn(async move {
            again.await;
            eprintln!("stopping: interrupted again, exiting at once ({left_behind})");
            std::process::exit(i32::from(super::exit::Class::Interrupted.code()));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raise(sig: i32) {
        // SAFETY: raising a signal whose handler tokio installed has no memory-safety
        // preconditions.
        unsafe {
            libc::raise(sig);
        }
    }

    #[tokio::test]
    async fn a_signal_before_the_wait_is_seen_and_a_second_one_is_counted() {
        let ints = Interrupts::install().unwrap();
        assert_eq!(ints.received().count, 0);
        // Raised while nobody waits: the process survives and the wait sees it.
        raise(libc::SIGTERM);
        let first = tokio::time::timeout(std::time::Duration::from_secs(10), ints.first())
            .await
            .expect("the signal raised before the wait is seen");
        assert_eq!(first.verb(), "terminated");
        let next = ints.next();
        raise(libc::SIGINT);
        let second = tokio::time::timeout(std::time::Duration::from_secs(10), next)
            .await
            .expect("the next signal is seen");
        assert_eq!(second.count, 2);
        assert_eq!(second.verb(), "interrupted");
    }
}
