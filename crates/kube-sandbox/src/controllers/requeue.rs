//! Delayed re-syncs, as a controller's `AddAfter` on its work queue: a controller that must act
//! when time passes (a Deployment's progress deadline, a Job's back-off or active deadline)
//! asks for its object to be examined again after a delay. The key comes back through the
//! controllers' own loop, so the sync runs there, never concurrently with another.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::store::ObjKey;

/// The queue of delayed re-syncs of one sandbox.
#[derive(Debug)]
pub struct Requeue {
    tx: mpsc::UnboundedSender<ObjKey>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<ObjKey>>>,
    /// The earliest pending re-sync per object (a later request for it is dropped).
    pending: Arc<Mutex<HashMap<ObjKey, Instant>>>,
    /// The sandbox's shutdown: pending re-syncs end with it.
    shutdown: CancellationToken,
}

impl Requeue {
    /// An empty queue whose pending re-syncs end when `shutdown` is cancelled.
    pub fn new(shutdown: CancellationToken) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Requeue {
            tx,
            rx: Mutex::new(Some(rx)),
            pending: Arc::default(),
            shutdown,
        }
    }

    /// Examine the object `key` again after `delay` (unless one is already due sooner).
    pub fn after(&self, key: &ObjKey, delay: Duration) {
        let due = Instant::now() + delay;
        {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if p.get(key).is_some_and(|d| *d <= due) {
                return;
            }
            p.insert(key.clone(), due);
        }
        let (tx, pending, key) = (self.tx.clone(), self.pending.clone(), key.clone());
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = tokio::time::sleep_until(due.into()) => {
                    let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
                    if p.get(&key) == Some(&due) {
                        p.remove(&key);
                    }
                    drop(p);
                    let _ = tx.send(key);
                }
            }
        });
    }

    /// The receiving end, for the controllers' loop (taken once).
    pub fn take_receiver(&self) -> Option<mpsc::UnboundedReceiver<ObjKey>> {
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}
