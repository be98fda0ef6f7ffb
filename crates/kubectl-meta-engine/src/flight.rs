//! The flight recorder: the last events of every controller (sync triggers, hook requests and
//! answers, writes and their results, hot loops), kept in memory within a byte bound so that
//! it can stay on in production, and dumped as one versioned JSON document
//! (docs/flight-recorder.md).
//!
//! It is a subscriber of the [`EventBus`]: what it records is what `dev -o json` shows, with
//! Secret values already masked by the bus ([`crate::events::published_body`]). Each event is
//! serialized once when it arrives; the oldest events are dropped when the serialized events
//! (plus a fixed per-event overhead) would exceed the bound.

pub mod replay;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::broadcast::error::RecvError;

use crate::events::{EngineEvent, EventBus};

/// The `apiVersion` of a dump: a reader refuses versions it does not know.
pub const API_VERSION: &str = "flight.kubectl-meta.io/v1";

/// The `kind` of a dump.
pub const KIND: &str = "FlightRecording";

/// The default bound, in bytes: small enough to be always on.
pub const DEFAULT_SIZE: usize = 8 * 1024 * 1024;

/// Bytes counted for each kept event beyond its JSON (its slot, sequence and time).
pub const ENTRY_OVERHEAD: usize = 64;

/// One recorded event.
#[derive(Debug)]
struct Entry {
    seq: u64,
    time_ms: u64,
    event: Box<RawValue>,
}

impl Entry {
    fn bytes(&self) -> usize {
        self.event.get().len() + ENTRY_OVERHEAD
    }
}

#[derive(Debug, Default)]
struct Ring {
    entries: VecDeque<Entry>,
    bytes: usize,
    next_seq: u64,
    evicted: u64,
    lost: u64,
}

/// A bounded, in-memory recorder of engine events. Share it with an [`Arc`].
#[derive(Debug)]
pub struct FlightRecorder {
    limit: usize,
    ring: Mutex<Ring>,
    /// The definition of each controller started, by name (the last one started wins).
    controllers: Mutex<BTreeMap<String, serde_json::Value>>,
}

/// One event of a dump.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedEvent<'a> {
    /// Position in the recorder's stream (gaps: events dropped by the bound or lost).
    pub seq: u64,
    /// When it was recorded, milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The event, as `dev -o json` prints it.
    pub event: &'a RawValue,
}

/// A dump of the recorder (the versioned file format).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recording<'a> {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// [`KIND`].
    pub kind: &'static str,
    /// The recorder's bound in bytes.
    pub limit_bytes: usize,
    /// Bytes the kept events count for (never above `limit_bytes`).
    pub bytes: usize,
    /// Events dropped, oldest first, to stay within the bound.
    pub evicted: u64,
    /// Events the recorder could not keep up with (the bus overran it).
    pub lost: u64,
    /// The kept events, oldest first.
    pub events: Vec<RecordedEvent<'a>>,
    /// The definitions of the controllers the events are about, as they were loaded (what
    /// `kubectl meta replay` runs again); absent when none was noted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub controllers: Vec<serde_json::Value>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl FlightRecorder {
    /// A recorder keeping at most `limit` bytes of events.
    pub fn new(limit: usize) -> Self {
        FlightRecorder {
            limit,
            ring: Mutex::new(Ring::default()),
            controllers: Mutex::new(BTreeMap::new()),
        }
    }

    /// Keep the definition `raw` of controller `name` for the dumps (the engine calls it for
    /// each controller it starts, see [`crate::Engine::set_flight_recorder`]). Definitions are
    /// not counted in the bound: one per controller.
    pub fn note_controller(&self, name: &str, raw: &serde_json::Value) {
        if let Ok(mut c) = self.controllers.lock() {
            c.insert(name.to_string(), raw.clone());
        }
    }

    /// The bound in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes the kept events count for now.
    pub fn bytes(&self) -> usize {
        self.ring.lock().map_or(0, |r| r.bytes)
    }

    /// Events kept now.
    pub fn len(&self) -> usize {
        self.ring.lock().map_or(0, |r| r.entries.len())
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record one event, dropping the oldest ones beyond the bound. Events that say nothing
    /// about a controller's behaviour (API request rates, hook server output) are not kept.
    pub fn record(&self, event: &EngineEvent) {
        if matches!(
            event,
            EngineEvent::ApiRate { .. } | EngineEvent::HookServerOutput { .. }
        ) {
            return;
        }
        let Ok(json) = serde_json::value::to_raw_value(event) else {
            return;
        };
        let Ok(mut ring) = self.ring.lock() else {
            return;
        };
        let entry = Entry {
            seq: ring.next_seq,
            time_ms: now_ms(),
            event: json,
        };
        ring.next_seq += 1;
        let size = entry.bytes();
        if size > self.limit {
            ring.evicted += 1;
            return;
        }
        while ring.bytes + size > self.limit {
            let Some(old) = ring.entries.pop_front() else {
                break;
            };
            ring.bytes -= old.bytes();
            ring.evicted += 1;
        }
        ring.bytes += size;
        ring.entries.push_back(entry);
    }

    fn lost(&self, n: u64) {
        if let Ok(mut ring) = self.ring.lock() {
            ring.lost += n;
            ring.next_seq += n;
        }
    }

    /// Record every event published on `bus` from now on, until the bus closes.
    pub fn spawn(self: &Arc<Self>, bus: &EventBus) -> tokio::task::JoinHandle<()> {
        let mut rx = bus.subscribe();
        let me = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(e) => me.record(&e),
                    Err(RecvError::Lagged(n)) => me.lost(n),
                    Err(RecvError::Closed) => break,
                }
            }
        })
    }

    /// The recording as JSON (the format of docs/flight-recorder.md).
    pub fn dump_json(&self) -> Vec<u8> {
        let controllers = self
            .controllers
            .lock()
            .map(|c| c.values().cloned().collect())
            .unwrap_or_default();
        let Ok(ring) = self.ring.lock() else {
            return Vec::new();
        };
        let rec = Recording {
            controllers,
            api_version: API_VERSION,
            kind: KIND,
            limit_bytes: self.limit,
            bytes: ring.bytes,
            evicted: ring.evicted,
            lost: ring.lost,
            events: ring
                .entries
                .iter()
                .map(|e| RecordedEvent {
                    seq: e.seq,
                    time_ms: e.time_ms,
                    event: &e.event,
                })
                .collect(),
        };
        serde_json::to_vec(&rec).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn info(n: usize) -> EngineEvent {
        EngineEvent::Info {
            controller: Some("c".into()),
            message: format!("{n} {}", "x".repeat(100)),
        }
    }

    #[test]
    fn the_bound_is_never_exceeded_and_the_newest_events_stay() {
        let r = FlightRecorder::new(4096);
        for n in 0..1000 {
            r.record(&info(n));
            assert!(r.bytes() <= r.limit(), "{} > {}", r.bytes(), r.limit());
        }
        let v: Value = serde_json::from_slice(&r.dump_json()).expect("json");
        assert_eq!(v["apiVersion"], API_VERSION);
        assert_eq!(v["kind"], KIND);
        let events = v["events"].as_array().expect("events");
        assert!(!events.is_empty() && events.len() < 1000);
        let last = &events[events.len() - 1];
        assert_eq!(last["seq"], 999);
        assert!(
            last["event"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("999 "))
        );
        assert_eq!(v["evicted"].as_u64(), Some(1000 - events.len() as u64));
    }

    #[test]
    fn an_event_larger_than_the_bound_is_dropped_not_kept() {
        let r = FlightRecorder::new(100);
        r.record(&info(1));
        assert!(r.is_empty());
        assert_eq!(r.bytes(), 0);
    }
}
