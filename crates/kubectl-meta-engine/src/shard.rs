//! Sharding one controller's parents over several processes (`kubectl meta run --sharded`):
//! which parents this process may sync, and a handshake-friendly way to change that without
//! restarting the controller.
//!
//! - [`Ring`]: a consistent hash ring over the members of one controller's ring (virtual
//!   nodes, 64-bit FNV-1a), [`Ring::owner`] of a parent.
//! - [`ShardGate`]: set on the [`crate::EngineContext`] ([`crate::EngineContext::set_shard`]);
//!   every worker asks it before a sync ([`ShardGate::begin`]) and holds the returned
//!   [`InFlight`] for the sync's length. A key the gate refuses is dropped from the queue (not
//!   retried): whoever widens what this process owns re-queues the controller's parents
//!   ([`crate::ControllerHandle::enqueue_all`]).
//!
//! What this process owns of a controller is the parents that **every** ring in its
//! constraint list ([`ShardGate::set_rings`]) assigns to it, and nothing while its membership
//! is not fresh ([`ShardGate::renewed`]: a process that could not renew its member Lease within
//! the renew deadline fences itself before the others can take its parents over). The caller
//! narrows by appending the new ring to the list (old owner of a moved parent stops at once),
//! waits for [`ShardGate::drained`] (no sync in flight on a parent it no longer owns), tells
//! the other members so, and widens to the new ring alone once every member did the same:
//! a parent is never synced by two processes at once.
//!
//! The parent of a sync is its [`crate::events::EventSubject::parent`] (`namespace/name`):
//! a MapController's key syncs follow their parent.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::Notify;

/// Virtual nodes per member by default: with 3 members the largest share stays within about
/// 10% of a third.
pub const DEFAULT_VNODES: usize = 128;

/// 64-bit FNV-1a (as KEP-5866's `shardRange` hashes a uid).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A point on the ring: FNV-1a, then MurmurHash3's 64-bit finalizer (FNV alone clusters
/// similar short strings such as `a#0`, `a#1`, which would leave the shares uneven).
fn point(bytes: &[u8]) -> u64 {
    let mut h = fnv1a64(bytes);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A consistent hash ring over a set of members (identities).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    members: Vec<String>,
    /// `(point, index in members)`, sorted by point.
    points: Vec<(u64, usize)>,
}

impl Ring {
    /// The ring of `members` (order and duplicates do not matter) with `vnodes` points each.
    pub fn new<I, S>(members: I, vnodes: usize) -> Ring
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let set: BTreeSet<String> = members.into_iter().map(Into::into).collect();
        let members: Vec<String> = set.into_iter().collect();
        let mut points = Vec::with_capacity(members.len() * vnodes.max(1));
        for (i, m) in members.iter().enumerate() {
            for v in 0..vnodes.max(1) {
                points.push((point(format!("{m}#{v}").as_bytes()), i));
            }
        }
        points.sort_unstable();
        Ring { members, points }
    }

    /// The members, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// A short stable name of this membership (hex of the hash of the sorted members): what
    /// members write on their Leases to say which ring they have drained for.
    pub fn id(&self) -> String {
        format!("{:016x}", fnv1a64(self.members.join("\n").as_bytes()))
    }

    /// The member `parent` is assigned to (`None`: no members).
    pub fn owner(&self, parent: &str) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let h = point(parent.as_bytes());
        let i = self.points.partition_point(|(p, _)| *p < h);
        let (_, m) = self.points[i % self.points.len()];
        self.members.get(m).map(String::as_str)
    }
}

/// One controller's ownership state.
#[derive(Debug, Default)]
struct Owned {
    /// Every ring must assign a parent to us (empty: we own nothing).
    rings: Vec<Ring>,
    /// Our membership is fresh until then (`None`: not yet).
    fresh_until: Option<Instant>,
    /// Syncs in flight, by parent.
    in_flight: HashMap<String, usize>,
    /// Parents synced here (pruned to the owned ones when the rings change).
    synced: BTreeSet<String>,
}

impl Owned {
    fn owns(&self, me: &str, parent: &str) -> bool {
        !self.rings.is_empty() && self.rings.iter().all(|r| r.owner(parent) == Some(me))
    }

    fn fresh(&self) -> bool {
        self.fresh_until.is_some_and(|t| Instant::now() < t)
    }
}

/// Which parents this process may sync, per controller, and the syncs in flight.
#[derive(Debug)]
pub struct ShardGate {
    me: String,
    state: Mutex<BTreeMap<String, Owned>>,
    /// Woken when a sync ends (a drain may have completed).
    ended: Notify,
}

/// A sync admitted by [`ShardGate::begin`]; dropping it ends the sync for the gate.
#[derive(Debug)]
pub struct InFlight {
    gate: Arc<ShardGate>,
    controller: String,
    parent: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut st = self
                .gate
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(o) = st.get_mut(&self.controller)
                && let Some(n) = o.in_flight.get_mut(&self.parent)
            {
                *n -= 1;
                if *n == 0 {
                    o.in_flight.remove(&self.parent);
                }
            }
        }
        self.gate.ended.notify_waiters();
    }
}

impl ShardGate {
    /// A gate for the member `identity` (owning nothing until rings are set).
    pub fn new(identity: impl Into<String>) -> Arc<ShardGate> {
        Arc::new(ShardGate {
            me: identity.into(),
            state: Mutex::default(),
            ended: Notify::new(),
        })
    }

    /// This member's identity.
    pub fn identity(&self) -> &str {
        &self.me
    }

    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<String, Owned>) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether a sync of `parent` by `controller` may start now, and if so the sync's token.
    /// A controller the gate does not know is not sharded: always admitted.
    pub fn begin(self: &Arc<Self>, controller: &str, parent: &str) -> Option<InFlight> {
        let admitted = self.with(|st| match st.get_mut(controller) {
            None => true,
            Some(o) => {
                if o.fresh() && o.owns(&self.me, parent) {
                    *o.in_flight.entry(parent.to_string()).or_default() += 1;
                    o.synced.insert(parent.to_string());
                    true
                } else {
                    false
                }
            }
        });
        admitted.then(|| InFlight {
            gate: Arc::clone(self),
            controller: controller.to_string(),
            parent: parent.to_string(),
        })
    }

    /// Whether `controller`'s `parent` is ours now (fresh membership, every ring agrees).
    pub fn owns(&self, controller: &str, parent: &str) -> bool {
        self.with(|st| {
            st.get(controller)
                .is_none_or(|o| o.fresh() && o.owns(&self.me, parent))
        })
    }

    /// Shard `controller`: from now on it syncs only what the rings assign here (nothing
    /// until [`ShardGate::set_rings`] and [`ShardGate::renewed`]).
    pub fn add(&self, controller: &str) {
        self.with(|st| {
            st.entry(controller.to_string()).or_default();
        });
    }

    /// Forget `controller` (not sharded any more).
    pub fn remove(&self, controller: &str) {
        self.with(|st| st.remove(controller));
    }

    /// The rings that must all assign a parent here for it to be ours (narrowing: append the
    /// new ring; widening: the new ring alone, once every member drained for it).
    pub fn set_rings(&self, controller: &str, rings: Vec<Ring>) {
        let me = self.me.clone();
        self.with(|st| {
            let o = st.entry(controller.to_string()).or_default();
            o.rings = rings;
            let keep: BTreeSet<String> = o
                .synced
                .iter()
                .filter(|p| o.owns(&me, p))
                .cloned()
                .collect();
            o.synced = keep;
        });
    }

    /// The rings in force for `controller`.
    pub fn rings(&self, controller: &str) -> Vec<Ring> {
        self.with(|st| {
            st.get(controller)
                .map(|o| o.rings.clone())
                .unwrap_or_default()
        })
    }

    /// Our membership of `controller`'s ring is fresh until `until` (the member Lease was
    /// renewed; `until` is that moment plus the renew deadline). Past it, nothing is admitted.
    /// Returns whether it had lapsed before (keys refused meanwhile were dropped: re-queue
    /// the controller's parents).
    pub fn renewed(&self, controller: &str, until: Instant) -> bool {
        self.with(|st| {
            let o = st.entry(controller.to_string()).or_default();
            let lapsed = o.fresh_until.is_some_and(|t| t <= Instant::now());
            o.fresh_until = Some(until);
            lapsed
        })
    }

    /// Stop admitting anything for `controller` at once (leaving the ring).
    pub fn fence(&self, controller: &str) {
        self.with(|st| {
            if let Some(o) = st.get_mut(controller) {
                o.fresh_until = None;
            }
        });
    }

    /// No sync of `controller` is in flight on a parent it does not own now.
    pub fn drained(&self, controller: &str) -> bool {
        self.with(|st| {
            st.get(controller).is_none_or(|o| {
                let fresh = o.fresh();
                o.in_flight.keys().all(|p| fresh && o.owns(&self.me, p))
            })
        })
    }

    /// Wait until a sync ends (then check [`ShardGate::drained`] again).
    pub async fn sync_ended(&self) {
        self.ended.notified().await;
    }

    /// Syncs of `controller` in flight now.
    pub fn in_flight(&self, controller: &str) -> usize {
        self.with(|st| st.get(controller).map_or(0, |o| o.in_flight.values().sum()))
    }

    /// Parents of `controller` synced here and still owned.
    pub fn parents(&self, controller: &str) -> usize {
        self.with(|st| st.get(controller).map_or(0, |o| o.synced.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("default/p-{i}")).collect()
    }

    #[test]
    fn ring_splits_parents_evenly_and_moves_few_on_a_join() {
        let three = Ring::new(["a", "b", "c"], DEFAULT_VNODES);
        let four = Ring::new(["d", "c", "b", "a"], DEFAULT_VNODES);
        let parents = names(3000);
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        let mut moved = 0;
        for p in &parents {
            let o = three.owner(p).unwrap();
            *count.entry(o).or_default() += 1;
            let n = four.owner(p).unwrap();
            if n != o {
                assert_eq!(n, "d", "a join moves parents only to the new member");
                moved += 1;
            }
        }
        for (m, c) in &count {
            assert!((800..=1200).contains(c), "{m} holds {c} of 3000");
        }
        assert!((500..=1000).contains(&moved), "{moved} of 3000 moved to d");
        assert_eq!(three.id(), Ring::new(["c", "a", "b"], 4).id());
        assert_ne!(three.id(), four.id());
        assert_eq!(Ring::new(Vec::<String>::new(), 8).owner("x"), None);
    }

    #[test]
    fn the_gate_admits_only_owned_parents_while_fresh_and_tracks_the_drain() {
        let gate = ShardGate::new("a");
        assert!(
            gate.begin("other", "x").is_some(),
            "an unsharded controller"
        );
        gate.add("c");
        let p = names(200);
        assert!(gate.begin("c", &p[0]).is_none(), "no rings: nothing owned");
        let one = Ring::new(["a"], 16);
        gate.set_rings("c", vec![one.clone()]);
        assert!(gate.begin("c", &p[0]).is_none(), "not fresh yet");
        gate.renewed("c", Instant::now() + Duration::from_secs(60));
        let held: Vec<InFlight> = p.iter().map(|x| gate.begin("c", x).unwrap()).collect();
        assert_eq!(gate.in_flight("c"), 200);
        assert!(gate.drained("c"));
        // Narrow to {a, b}: b's parents in flight here keep the drain open until they end.
        let two = Ring::new(["a", "b"], 16);
        gate.set_rings("c", vec![one, two.clone()]);
        assert!(!gate.drained("c"));
        let lost: Vec<&String> = p.iter().filter(|x| two.owner(x) == Some("b")).collect();
        assert!(!lost.is_empty());
        assert!(gate.begin("c", lost[0]).is_none());
        assert_eq!(gate.parents("c"), 200 - lost.len());
        drop(held);
        assert!(gate.drained("c"));
        assert_eq!(gate.in_flight("c"), 0);
        // Fenced: nothing admitted, and anything in flight is not drained.
        let kept = p.iter().find(|x| two.owner(x) == Some("a")).unwrap();
        let f = gate.begin("c", kept).unwrap();
        gate.fence("c");
        assert!(gate.begin("c", kept).is_none());
        assert!(!gate.drained("c"));
        drop(f);
        assert!(gate.drained("c"));
    }
}
