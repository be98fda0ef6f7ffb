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
//! Parents are assigned by **bucket**: the top 8 bits of FNV-1a 64 of the parent's uid
//! ([`bucket`]), so a set of buckets is exactly a union of KEP-5866
//! `shardRange(object.metadata.uid, ...)` ranges ([`bucket_range`]); the ring assigns buckets
//! to members ([`Ring::bucket_owner`]). The parent of a sync is its
//! [`crate::events::EventSubject::parent`] (`namespace/name`) with its bucket: a MapController's
//! key syncs follow their parent.
//!
//! What this process **caches** of a controller follows the gate too ([`ShardGate::set_cache`],
//! [`CacheScope`]): the informers of a sharded controller's parents keep only the parents of
//! the buckets in scope (filtered by uid as they arrive), those of its children watch only the
//! children labelled with a bucket in scope or not labelled at all (`<label> notin (other
//! buckets)`; the engine labels every child it writes with its parent's bucket,
//! [`bucket_label`]). [`ShardGate::cache_ready`] says when every such informer re-listed with
//! the scope asked for.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::sync::{Notify, watch};

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

/// How many buckets parents are grouped in (the top 8 bits of their uid's hash).
pub const BUCKETS: usize = 256;

/// The bucket of a parent: the top 8 bits of FNV-1a 64 of its `metadata.uid`, the hash
/// KEP-5866's `shardRange(object.metadata.uid, ...)` compares.
pub fn bucket(uid: &str) -> u8 {
    // The shift leaves 8 bits: the cast cannot truncate.
    (fnv1a64(uid.as_bytes()) >> 56) as u8
}

/// The KEP-5866 hash range of bucket `b`: `[start, end)` (end `2^64` for the last bucket).
pub fn bucket_range(b: u8) -> (u64, u128) {
    let start = u64::from(b) << 56;
    (start, u128::from(start) + (1u128 << 56))
}

/// A KEP-5866 `shardSelector` selecting exactly `buckets` by uid (adjacent buckets joined into
/// one range); `None` for no buckets.
pub fn shard_selector(buckets: &BTreeSet<u8>) -> Option<String> {
    let mut ranges: Vec<(u64, u128)> = Vec::new();
    for b in buckets {
        let (s, e) = bucket_range(*b);
        match ranges.last_mut() {
            Some(last) if last.1 == u128::from(s) => last.1 = e,
            _ => ranges.push((s, e)),
        }
    }
    if ranges.is_empty() {
        return None;
    }
    let parts: Vec<String> = ranges
        .iter()
        .map(|(s, e)| {
            let end = if *e == 1u128 << 64 {
                "0x10000000000000000".to_string()
            } else {
                format!("0x{e:016x}")
            };
            format!("shardRange(object.metadata.uid, '0x{s:016x}', '{end}')")
        })
        .collect();
    Some(parts.join(" || "))
}

/// The label the engine puts on every child (and MapController output) a sharded controller
/// writes: `shard.kubectl-meta.dev/<controller>` (a name longer than 63 characters replaced by
/// `ring-<hash>`), value its parent's bucket ([`bucket_value`]).
pub fn bucket_label(controller: &str) -> String {
    if controller.len() <= 63 {
        format!("shard.kubectl-meta.dev/{controller}")
    } else {
        format!(
            "shard.kubectl-meta.dev/ring-{:016x}",
            fnv1a64(controller.as_bytes())
        )
    }
}

/// A bucket as a label value: two lower-case hex digits (`00` to `ff`).
pub fn bucket_value(b: u8) -> String {
    format!("{b:02x}")
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
    /// The member (index) of each bucket (empty: no members).
    buckets: Vec<usize>,
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
        let mut ring = Ring {
            members,
            points,
            buckets: Vec::new(),
        };
        if !ring.points.is_empty() {
            ring.buckets = ring.bounded_buckets();
        }
        ring
    }

    /// Each bucket's member by consistent hashing with bounded loads (Mirrokni, Thorup and
    /// Zadimoghaddam, 2018): a bucket goes to the first member clockwise from its point that
    /// holds fewer than `ceil(BUCKETS / members)` buckets. Plain consistent hashing with 128
    /// points per member left one of three members 20% over its third, and the most loaded
    /// member bounds a sharded controller's throughput; bounded, every member holds the floor
    /// or the ceiling of its share. Buckets are placed in a fixed order, so every member
    /// computes the same assignment. A join still moves about `1/n` of the buckets; a few of
    /// them may move between old members (an overflow's next member changed), which the drain
    /// handshake covers like any other move.
    fn bounded_buckets(&self) -> Vec<usize> {
        let cap = BUCKETS.div_ceil(self.members.len());
        let mut load = vec![0usize; self.members.len()];
        (0..BUCKETS)
            .map(|b| {
                let h = point(format!("bucket-{b:02x}").as_bytes());
                let start = self.points.partition_point(|(p, _)| *p < h);
                let m = (0..self.points.len())
                    .map(|k| self.points[(start + k) % self.points.len()].1)
                    .find(|m| load[*m] < cap)
                    .unwrap_or(self.points[start % self.points.len()].1);
                load[m] += 1;
                m
            })
            .collect()
    }

    fn owner_index(&self, name: &str) -> usize {
        let h = point(name.as_bytes());
        let i = self.points.partition_point(|(p, _)| *p < h);
        self.points[i % self.points.len()].1
    }

    /// The member bucket `b` is assigned to (`None`: no members).
    pub fn bucket_owner(&self, b: u8) -> Option<&str> {
        let m = *self.buckets.get(usize::from(b))?;
        self.members.get(m).map(String::as_str)
    }

    /// The buckets assigned to `member`.
    pub fn buckets_of(&self, member: &str) -> BTreeSet<u8> {
        (0..=u8::MAX)
            .filter(|b| self.bucket_owner(*b) == Some(member))
            .collect()
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
        let m = self.owner_index(parent);
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
    /// Parents synced here (pruned to the owned ones when the rings change), with their
    /// buckets (a parent no longer cached, deleted or moved, is still known by its bucket).
    synced: BTreeMap<String, u8>,
    /// What the controller's informers cache (see [`CacheScope`]).
    scope: Option<watch::Sender<CacheScope>>,
    /// The informers' acknowledgements: the generation of the scope each last listed with.
    acks: Vec<Arc<AtomicU64>>,
}

impl Owned {
    fn owns(&self, me: &str, bucket: u8) -> bool {
        !self.rings.is_empty()
            && self
                .rings
                .iter()
                .all(|r| r.bucket_owner(bucket) == Some(me))
    }

    fn scope(&mut self) -> &watch::Sender<CacheScope> {
        self.scope.get_or_insert_with(|| {
            watch::channel(CacheScope {
                generation: 0,
                buckets: Arc::new(BTreeSet::new()),
            })
            .0
        })
    }

    fn fresh(&self) -> bool {
        self.fresh_until.is_some_and(|t| Instant::now() < t)
    }
}

/// What the informers of a sharded controller's parents and children cache: the parents of
/// these buckets, and their children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheScope {
    /// Bumped on every change ([`ShardGate::set_cache`]).
    pub generation: u64,
    /// The buckets kept.
    pub buckets: Arc<BTreeSet<u8>>,
}

/// An informer's view of a controller's [`CacheScope`]: the scope to follow and where to say
/// which generation it listed with (store [`u64::MAX`] when it caches everything).
#[derive(Debug, Clone)]
pub struct CacheFollower {
    /// The scope (closed when the controller is not sharded any more: cache everything).
    pub scope: watch::Receiver<CacheScope>,
    /// The generation of the scope the informer last completed a list with.
    pub ack: Arc<AtomicU64>,
    /// The server filters by KEP-5866 `shardSelector` ([`ShardGate::set_server_selector`]):
    /// the parents' informer lists and watches with one.
    pub server_selector: bool,
}

/// Which parents this process may sync, per controller, and the syncs in flight.
#[derive(Debug)]
pub struct ShardGate {
    me: String,
    state: Mutex<BTreeMap<String, Owned>>,
    /// Woken when a sync ends (a drain may have completed).
    ended: Notify,
    /// The server honours `shardSelector` (probed once per client at start).
    server_selector: AtomicBool,
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
            server_selector: AtomicBool::new(false),
        })
    }

    /// Say whether the server filters lists and watches by KEP-5866 `shardSelector`
    /// ([`crate::k8s::shard_query::server_filters_shards`]); informers started afterwards
    /// send the parents' selector when it does.
    pub fn set_server_selector(&self, honoured: bool) {
        self.server_selector.store(honoured, Ordering::Release);
    }

    /// Whether the parents' informers list and watch with a `shardSelector`.
    pub fn server_selector(&self) -> bool {
        self.server_selector.load(Ordering::Acquire)
    }

    /// This member's identity.
    pub fn identity(&self) -> &str {
        &self.me
    }

    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<String, Owned>) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether a sync of `parent` (of bucket `bucket`: `None` when the parent is not cached
    /// here, then the bucket it had when last synced here counts) by `controller` may start
    /// now, and if so the sync's token. A controller the gate does not know is not sharded:
    /// always admitted.
    pub fn begin(
        self: &Arc<Self>,
        controller: &str,
        parent: &str,
        bucket: Option<u8>,
    ) -> Option<InFlight> {
        let admitted = self.with(|st| match st.get_mut(controller) {
            None => true,
            Some(o) => {
                let Some(b) = bucket.or_else(|| o.synced.get(parent).copied()) else {
                    return false;
                };
                if o.fresh() && o.owns(&self.me, b) {
                    *o.in_flight.entry(parent.to_string()).or_default() += 1;
                    o.synced.insert(parent.to_string(), b);
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

    /// Whether `controller`'s parents of bucket `bucket` are ours now (fresh membership, every
    /// ring agrees).
    pub fn owns(&self, controller: &str, bucket: u8) -> bool {
        self.with(|st| {
            st.get(controller)
                .is_none_or(|o| o.fresh() && o.owns(&self.me, bucket))
        })
    }

    /// Whether `controller` is sharded here (its caches follow a [`CacheScope`]).
    pub fn knows(&self, controller: &str) -> bool {
        self.with(|st| st.contains_key(controller))
    }

    /// Follow `controller`'s cache scope (an informer of its parents or children); `None`
    /// when it is not sharded.
    pub fn cache_follower(&self, controller: &str) -> Option<CacheFollower> {
        self.with(|st| {
            let o = st.get_mut(controller)?;
            let scope = o.scope().subscribe();
            let ack = Arc::new(AtomicU64::new(u64::MAX - 1));
            o.acks.retain(|a| Arc::strong_count(a) > 1);
            o.acks.push(Arc::clone(&ack));
            Some(CacheFollower {
                scope,
                ack,
                server_selector: self.server_selector(),
            })
        })
    }

    /// Cache the parents of `buckets` (and their children) for `controller` from now on;
    /// returns the scope's generation ([`ShardGate::cache_ready`]). Unchanged buckets keep
    /// the generation (no re-list).
    pub fn set_cache(&self, controller: &str, buckets: BTreeSet<u8>) -> u64 {
        self.with(|st| {
            let o = st.entry(controller.to_string()).or_default();
            let tx = o.scope();
            let cur = tx.borrow().clone();
            if *cur.buckets == buckets {
                return cur.generation;
            }
            let generation = cur.generation + 1;
            tx.send_replace(CacheScope {
                generation,
                buckets: Arc::new(buckets),
            });
            generation
        })
    }

    /// The buckets `controller`'s caches keep now.
    pub fn cached_buckets(&self, controller: &str) -> BTreeSet<u8> {
        self.with(|st| {
            st.get_mut(controller)
                .map(|o| (*o.scope().borrow().buckets).clone())
                .unwrap_or_default()
        })
    }

    /// Every live informer following `controller`'s scope completed a list with generation
    /// `generation` or later (or caches everything).
    pub fn cache_ready(&self, controller: &str, generation: u64) -> bool {
        self.with(|st| {
            st.get(controller).is_none_or(|o| {
                o.acks.iter().filter(|a| Arc::strong_count(a) > 1).all(|a| {
                    let g = a.load(Ordering::Acquire);
                    g != u64::MAX - 1 && g >= generation
                })
            })
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
            let keep: BTreeMap<String, u8> = o
                .synced
                .iter()
                .filter(|(_, b)| o.owns(&me, **b))
                .map(|(p, b)| (p.clone(), *b))
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
                o.in_flight
                    .keys()
                    .all(|p| fresh && o.synced.get(p).is_some_and(|b| o.owns(&self.me, *b)))
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
    fn buckets_are_kep_5866_uid_ranges_split_evenly_by_the_ring() {
        // bucket = top 8 bits of FNV-1a 64: the uid's hash lies in its bucket's range.
        for i in 0..500 {
            let uid = format!("3f2b{i:04}-0000-4000-8000-00000000{i:04}");
            let (s, e) = bucket_range(bucket(&uid));
            let h = u128::from(fnv1a64(uid.as_bytes()));
            assert!(u128::from(s) <= h && h < e, "{uid}");
        }
        assert_eq!(bucket_range(255).1, 1u128 << 64);
        let sel = shard_selector(&BTreeSet::from([0, 1, 2, 7, 255])).unwrap();
        assert_eq!(
            sel,
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x0300000000000000') || \
             shardRange(object.metadata.uid, '0x0700000000000000', '0x0800000000000000') || \
             shardRange(object.metadata.uid, '0xff00000000000000', '0x10000000000000000')"
        );
        assert_eq!(shard_selector(&BTreeSet::new()), None);
        let three = Ring::new(["a", "b", "c"], DEFAULT_VNODES);
        let four = Ring::new(["a", "b", "c", "d"], DEFAULT_VNODES);
        let mut total = 0;
        for m in ["a", "b", "c"] {
            let n = three.buckets_of(m).len();
            // Bounded loads: at most the ceiling of a third, so at least 256 - 2 * 86.
            assert!((84..=86).contains(&n), "{m} holds {n} of 256 buckets");
            total += n;
        }
        assert_eq!(total, BUCKETS);
        for m in ["a", "b", "c", "d"] {
            let n = four.buckets_of(m).len();
            assert_eq!(n, 64, "{m} holds {n} of 256 buckets with four members");
        }
        // A join moves about a quarter of the buckets, nearly all of them to the new member.
        let moved: Vec<u8> = (0..=u8::MAX)
            .filter(|b| three.bucket_owner(*b) != four.bucket_owner(*b))
            .collect();
        let to_new = moved
            .iter()
            .filter(|b| four.bucket_owner(**b) == Some("d"))
            .count();
        assert_eq!(to_new, 64, "d gets its share");
        assert!(
            moved.len() <= 64 + 16,
            "{} of 256 buckets moved on a join ({to_new} to d)",
            moved.len()
        );
        // Every member computes the same assignment whatever order it lists the members in.
        assert_eq!(
            Ring::new(["c", "b", "a"], DEFAULT_VNODES).buckets_of("a"),
            three.buckets_of("a")
        );
        assert_eq!(Ring::new(Vec::<String>::new(), 8).bucket_owner(3), None);
        assert_eq!(bucket_value(7), "07");
        assert_eq!(bucket_label("c"), "shard.kubectl-meta.dev/c");
        assert!(bucket_label(&"x".repeat(80)).len() <= 63 + 23);
    }

    #[test]
    fn the_gate_admits_only_owned_parents_while_fresh_and_tracks_the_drain() {
        let gate = ShardGate::new("a");
        assert!(
            gate.begin("other", "x", None).is_some(),
            "an unsharded controller"
        );
        gate.add("c");
        // (name, bucket) of 256 parents, one per bucket.
        let p: Vec<(String, u8)> = (0..=u8::MAX)
            .map(|b| (format!("default/p-{b}"), b))
            .collect();
        let begin = |(n, b): &(String, u8)| gate.begin("c", n, Some(*b));
        assert!(begin(&p[0]).is_none(), "no rings: nothing owned");
        let one = Ring::new(["a"], 16);
        gate.set_rings("c", vec![one.clone()]);
        assert!(begin(&p[0]).is_none(), "not fresh yet");
        gate.renewed("c", Instant::now() + Duration::from_secs(60));
        let held: Vec<InFlight> = p.iter().map(|x| begin(x).unwrap()).collect();
        assert_eq!(gate.in_flight("c"), 256);
        assert!(gate.drained("c"));
        // Narrow to {a, b}: b's parents in flight here keep the drain open until they end.
        let two = Ring::new(["a", "b"], 16);
        gate.set_rings("c", vec![one, two.clone()]);
        assert!(!gate.drained("c"));
        let lost: Vec<&(String, u8)> = p
            .iter()
            .filter(|x| two.bucket_owner(x.1) == Some("b"))
            .collect();
        assert!(!lost.is_empty());
        assert!(begin(lost[0]).is_none());
        // Not cached any more (no bucket given): refused as well, by the bucket it had.
        assert!(gate.begin("c", &lost[0].0, None).is_none());
        assert_eq!(gate.parents("c"), 256 - lost.len());
        drop(held);
        assert!(gate.drained("c"));
        assert_eq!(gate.in_flight("c"), 0);
        // Fenced: nothing admitted, and anything in flight is not drained.
        let kept = p
            .iter()
            .find(|x| two.bucket_owner(x.1) == Some("a"))
            .unwrap();
        let f = begin(kept).unwrap();
        // A deleted parent (no bucket given) synced here before is still ours.
        drop(gate.begin("c", &kept.0, None).expect("known bucket"));
        gate.fence("c");
        assert!(begin(kept).is_none());
        assert!(!gate.drained("c"));
        drop(f);
        assert!(gate.drained("c"));
        assert!(gate.begin("c", "default/never-seen", None).is_none());
    }

    #[test]
    fn cache_scopes_are_followed_and_acknowledged() {
        let gate = ShardGate::new("a");
        assert!(gate.cache_follower("c").is_none(), "not sharded");
        gate.add("c");
        let f = gate.cache_follower("c").unwrap();
        assert_eq!(f.scope.borrow().buckets.len(), 0, "nothing before the ring");
        assert!(!gate.cache_ready("c", 0), "not listed yet");
        f.ack.store(0, Ordering::Release);
        assert!(gate.cache_ready("c", 0));
        let g = gate.set_cache("c", BTreeSet::from([1, 2]));
        assert_eq!(g, 1);
        assert_eq!(gate.set_cache("c", BTreeSet::from([1, 2])), 1, "unchanged");
        assert!(f.scope.has_changed().unwrap());
        assert!(!gate.cache_ready("c", g));
        f.ack.store(g, Ordering::Release);
        assert!(gate.cache_ready("c", g));
        let f2 = gate.cache_follower("c").unwrap();
        assert!(!gate.cache_ready("c", g));
        drop(f2);
        assert!(
            gate.cache_ready("c", g),
            "a dropped follower is not waited for"
        );
        assert_eq!(gate.cached_buckets("c"), BTreeSet::from([1, 2]));
    }
}
