//! The buddy medium: preserved bytes kept in another rank's memory, so that they survive the
//! loss of this rank.
//!
//! **Placement.** With `buddy_domain = "node"` (the default) a rank's buddy is on another node
//! whenever there is another node, from the conduit's topology (hosts under mpirun, which may
//! hold different numbers of ranks; emulated nodes on smp), so a rank's copies survive the loss
//! of its whole node; with `"rank"` it is the next rank ([`buddy_map`]).
//!
//! **Copies go straight into the buddy's segment.** Each rank keeps, in its shared segment, a
//! *buddy region* for the copies of the ranks whose buddy it is (`buddy_segment_bytes` in the
//! configuration; [`crate::launch`] adds it to the job's segment, so the program's own
//! allocations keep the room they asked for). The region is allocated on the first request,
//! and handed out in *slots*: an owner asks its buddy once, by rpc, for a slot of a size
//! ([`BuddyRpcs::reserve`]), and writes its bytes there with one uncounted rput
//! (`pgas::runtime_hooks::rput_uncounted`), followed by a tag the owner remembers; a restore after
//! the owner's loss reads bytes and tag back in one rpc served in the buddy's thread, so a
//! buddy that loses its memory meanwhile (it may be on another team, and its loss notice may
//! not have arrived) yields a wrong tag, never a half-wiped copy: the entry counts as lost. A completed CD's slots go back to the owner's list of free slots, not to the
//! buddy, so the next preservation of a similar size (the same CD in the next iteration) takes
//! one back: in steady state a buddy copy is a single rput, with no message and no work on the
//! buddy. (Entry keys are no cache key: they follow the CD tree, so every iteration of a loop
//! has new ones.) The owner gives its free slots back only when the region has no room left.
//!
//! **One copy or two (`buddy_copies`).** By default (`2`) the owner also keeps the bytes in its
//! own memory (`frame::Store::Buddy`'s `local`): a soft error restores from it, and the buddy's
//! loss takes nothing the owner needs (it stores the copy again before a re-execution). That
//! copy is a second memory copy on the owner's thread. It is made chunk by chunk, each chunk
//! put to the buddy from the local copy while it is in this core's L2, so the program's array
//! is read once; still, it writes two copies' worth of bytes where a put writes one (the
//! ratios are in `preserve_buddy` of cd-bench and in ROADMAP.md). With
//! `buddy_copies = 1` the owner keeps no copy: `preserve_slice` puts straight from the program's array into the slot,
//! one rput (`preserve_buddy` / `1MiB_one_copy`), and every restore, a soft
//! error's too, fetches the bytes back by rpc ([`BuddyRpcs::fetch`], tag-checked). The buddy's
//! loss then takes the only copy: the owner's entry is unrestorable (`frame::restorable`)
//! and a CD that must restore it escalates, naming the buddy, the entries and the key
//! (`recovery::buddy_loss_reason`). **Reading chosen:** two copies stay the default,
//! because with one a single rank loss in any CD spanning a rank and its owner (every world CD)
//! cannot be contained; one copy is the documented choice for speed. A second thread per rank
//! making the local copy while the owner's thread puts is not used: the two copies share the
//! memory bandwidth and the cores, so it is slower under load.
//!
//! When the buddy's region has no room for a copy (or `buddy_segment_bytes = 0`), the copy goes
//! in a serialized rpc into the buddy's private memory (a map keyed by owner and
//! entry key), slower; the report counts those bytes (`bytes_buddy_rpc`).
//!
//! **Not the program's communication.** Every message goes through `pgas::runtime_hooks::internal`
//! and the copies through `rput_uncounted`: the program's interception hook never sees them, no
//! synchronization of them is an epoch, and the buddy's Incoming Write Counter does not count
//! them. (A put inside `internal` would be counted: the buddy's relaxed CDs check that the IWC
//! values of their incoming writes leave no gap, and a copy landing during one of them would be
//! a write no log explains, so its recovery would escalate.)
//!
//! **Losses.** A rank that loses its memory loses its segment, hence its region, and the copies
//! it held by rpc; it tells each owner which slots and keys were its ([`BuddyRpcs::notify_lost`],
//! emulating the failure detector of a real system), and the owner marks them lost: an entry
//! whose own copy is gone too can no longer be restored, and the CD escalates
//! (`frame::restorable`). The slots stay allocated (as the pgas heap's blocks do), so
//! the owner re-replicates into the same slot from its own copy before a re-execution.
//!
//! Relaxed CDs with `log_medium = "buddy"` keep replicas of their logs here too
//! (`relaxed/replica.rs`), by rpc, in a map of their own: a log key can never name a preserved
//! copy (preserved keys are hashes of CD ids and names, log keys a per-owner counter). A loss
//! wipes them too, and the owner hears of them with the rest.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};

use pgas::runtime_hooks::internal;
use pgas::{GlobalPtr, RpcFn, RpcTable};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::BuddyDomain;
use std::rc::Rc;

/// A byte vector that serializes as one block (serde's `Vec<u8>` goes byte by byte).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a byte block")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

/// Copies this rank holds for other ranks, and what it knows of its own copies at its buddy.
#[derive(Default)]
pub(crate) struct BuddyStore {
    /// This rank, and the rank that holds its copies.
    rank: usize,
    buddy_rank: usize,
    // ---- as a buddy: what this rank holds for others ------------------------------------------
    /// Bytes of the region (0: no region, every copy goes by rpc).
    region_bytes: usize,
    /// The region in this rank's segment, once a first slot was asked for.
    region: RefCell<Region>,
    /// Slots of the region handed out: offset in the segment -> (owner, capacity).
    given: RefCell<BTreeMap<usize, (usize, usize)>>,
    /// Copies sent by rpc (the region had no room), by (owner rank, entry key).
    held: RefCell<HashMap<(usize, u64), Vec<u8>>>,
    /// Replicas of other ranks' relaxed logs, by (owner rank, log key): a key space of its own.
    logs: RefCell<HashMap<(usize, u64), Vec<u8>>>,
    // ---- as an owner: this rank's copies at its buddy ---------------------------------------
    /// Slots at the buddy holding no live entry, for the next preservations.
    free_slots: RefCell<Vec<Slot>>,
    /// Slots whose contents the buddy lost with its memory (until written again).
    lost_slots: RefCell<HashSet<usize>>,
    /// Keys of this rank's rpc copies that its buddy lost with its memory.
    lost: RefCell<HashSet<u64>>,
    /// Keys of this rank's log replicas that its buddy lost with its memory.
    lost_logs: RefCell<HashSet<u64>>,
    /// Slots this rank asked its buddy for (rpcs sent), for tests of the steady state.
    reserves: std::cell::Cell<u64>,
    /// By slot offset: the tag written after this rank's bytes in that slot by its last store
    /// (see [`BuddyRpcs::fetch`]).
    tags: RefCell<HashMap<usize, u64>>,
    /// Tags handed out so far.
    next_tag: std::cell::Cell<u64>,
}

/// Bytes of the tag that ends every slot copy.
const TAG: usize = 8;

/// Bytes per step of [`BuddyRpcs::put_tagged_copying`]: an eighth of a 1 MiB L2 cache, so a
/// chunk just copied is still there when it is put (smaller chunks pay more per-put overhead,
/// whole copies fall out of the cache).
const COPY_CHUNK: usize = 128 << 10;

/// Alignment of a buddy region in its segment (the segment's own is at least this).
pub(crate) const REGION_ALIGN: usize = 4096;

/// The buddy region of one rank.
#[derive(Debug, Default)]
enum Region {
    /// Not allocated yet.
    #[default]
    NotYet,
    /// Its allocation failed, or its size is 0: copies go by rpc.
    Unavailable,
    /// At `base` in the segment; `free` holds the offsets (from `base`) not handed out.
    At { base: usize, free: Extents },
}

/// A block of the buddy's segment that holds one of this rank's copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Slot {
    /// Offset in the buddy's segment.
    pub(crate) offset: usize,
    /// Bytes it can hold.
    pub(crate) cap: usize,
}

/// Where the buddy holds one of this rank's copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// In a slot of the buddy's region (rput, rget).
    Slot(Slot),
    /// In the buddy's private memory under the entry's key (rpc; the region had no room).
    Rpc,
}

/// What a rank that lost its memory held for one owner: the slots of its region the owner
/// had, the keys of the owner's rpc copies, the keys of its log replicas.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LostCopies {
    pub(crate) slots: Vec<usize>,
    pub(crate) keys: Vec<u64>,
    pub(crate) logs: Vec<u64>,
}

/// The capacity of a slot for `len` bytes: a sixteenth more, in 64-byte units, so that a copy
/// a little larger than last time (a serialized value) still fits the same slot.
pub(crate) fn slot_capacity(len: usize) -> usize {
    len.saturating_add(len / 16).max(1).next_multiple_of(64)
}

/// Free ranges of a region (offset -> length), first fit, neighbours merged on release.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Extents {
    free: BTreeMap<usize, usize>,
}

impl Extents {
    /// `0 .. len` free.
    pub(crate) fn new(len: usize) -> Extents {
        let mut free = BTreeMap::new();
        if len > 0 {
            free.insert(0, len);
        }
        Extents { free }
    }

    /// Takes `len` bytes (at least 1) from the first range that holds them.
    pub(crate) fn take(&mut self, len: usize) -> Option<usize> {
        let len = len.max(1);
        let (&start, &have) = self.free.iter().find(|(_, have)| **have >= len)?;
        self.free.remove(&start);
        if have > len {
            self.free.insert(start + len, have - len);
        }
        Some(start)
    }

    /// Gives back `start .. start + len` (taken before), merging it with free neighbours.
    pub(crate) fn give(&mut self, start: usize, len: usize) {
        let len = len.max(1);
        let (mut start, mut len) = (start, len);
        if let Some((&before, &blen)) = self.free.range(..start).next_back() {
            debug_assert!(before + blen <= start, "a range given back twice");
            if before + blen == start {
                self.free.remove(&before);
                start = before;
                len += blen;
            }
        }
        if let Some(after) = self.free.remove(&(start + len)) {
            len += after;
        }
        self.free.insert(start, len);
    }

    /// Bytes free in all.
    #[cfg(test)]
    fn free_bytes(&self) -> usize {
        self.free.values().sum()
    }
}

impl BuddyStore {
    /// A store whose region (allocated on the first request) is `region_bytes` long.
    pub(crate) fn new(region_bytes: usize, rank: usize, buddy_rank: usize) -> BuddyStore {
        BuddyStore {
            region_bytes,
            rank,
            buddy_rank,
            ..BuddyStore::default()
        }
    }

    /// As a buddy: takes back the slots `give_back` of `owner` (its free slots, when the region
    /// had no room), then hands `owner` a slot for `len` bytes, allocating the region first if
    /// this is the first request. `None` if the region has no room (or cannot be allocated).
    fn reserve(&self, owner: usize, len: usize, give_back: &[usize]) -> Option<Slot> {
        let mut region = self.region.borrow_mut();
        if matches!(*region, Region::NotYet) {
            // An internal allocation (the rpc is internal): the program's hook does not see it.
            // Page-aligned (segments are), with slots at multiples of 64 bytes from there: copies
            // into cache-line-aligned slots do not straddle lines.
            *region = match pgas::new_array::<u8>(self.region_bytes + REGION_ALIGN) {
                Ok(p) if self.region_bytes > 0 => Region::At {
                    base: p.offset().next_multiple_of(REGION_ALIGN),
                    free: Extents::new(self.region_bytes),
                },
                _ => Region::Unavailable,
            };
        }
        let Region::At { base, free } = &mut *region else {
            return None;
        };
        let mut given = self.given.borrow_mut();
        for offset in give_back {
            if let Some(&(o, cap)) = given.get(offset) {
                if o == owner {
                    given.remove(offset);
                    free.give(offset - *base, cap);
                }
            }
        }
        let cap = slot_capacity(len);
        let at = free.take(cap)?;
        let slot = Slot {
            offset: *base + at,
            cap,
        };
        given.insert(slot.offset, (owner, cap));
        Some(slot)
    }

    /// Forgets everything held for others (this rank's memory was lost); returns, by owner,
    /// what each lost. The region's slots stay allocated to their owners.
    pub(crate) fn wipe(&self) -> BTreeMap<usize, LostCopies> {
        let mut by_owner: BTreeMap<usize, LostCopies> = BTreeMap::new();
        for (&offset, &(owner, _)) in self.given.borrow().iter() {
            by_owner.entry(owner).or_default().slots.push(offset);
        }
        for ((owner, key), _) in self.held.borrow_mut().drain() {
            by_owner.entry(owner).or_default().keys.push(key);
        }
        for ((owner, key), _) in self.logs.borrow_mut().drain() {
            by_owner.entry(owner).or_default().logs.push(key);
        }
        by_owner
    }

    /// Slots this rank asked its buddy for so far (tests of the steady state).
    #[cfg(feature = "testing")]
    pub(crate) fn slot_requests(&self) -> u64 {
        self.reserves.get()
    }

    /// The rank that holds this rank's copies.
    pub(crate) fn buddy_rank(&self) -> usize {
        self.buddy_rank
    }

    /// True if the buddy lost this rank's log replica under `key`.
    pub(crate) fn is_log_lost(&self, key: u64) -> bool {
        self.lost_logs.borrow().contains(&key)
    }

    /// True if the buddy lost this rank's copy (`key`, held as `held`).
    pub(crate) fn is_lost(&self, key: u64, held: Held) -> bool {
        match held {
            Held::Slot(s) => self.lost_slots.borrow().contains(&s.offset),
            Held::Rpc => self.lost.borrow().contains(&key),
        }
    }

    /// Notes that the buddy holds a fresh copy (`key`, held as `held`).
    fn mark_stored(&self, key: u64, held: Held) {
        match held {
            Held::Slot(s) => self.lost_slots.borrow_mut().remove(&s.offset),
            Held::Rpc => self.lost.borrow_mut().remove(&key),
        };
    }

    /// Notes what the buddy lost of this rank's copies and log replicas.
    fn mark_lost(&self, lost: LostCopies) {
        self.lost_slots.borrow_mut().extend(lost.slots);
        self.lost.borrow_mut().extend(lost.keys);
        self.lost_logs.borrow_mut().extend(lost.logs);
    }

    /// Forgets that log replicas under `keys` were lost (they are deleted at the owner).
    pub(crate) fn unmark_logs(&self, keys: &[u64]) {
        let mut lost = self.lost_logs.borrow_mut();
        if !lost.is_empty() {
            for k in keys {
                lost.remove(k);
            }
        }
    }

    /// A free slot at the buddy for `len` bytes: the smallest that holds them without wasting
    /// more than half of it (as the buffer pool does).
    fn take_free_slot(&self, len: usize) -> Option<Slot> {
        let mut free = self.free_slots.borrow_mut();
        let i = free
            .iter()
            .enumerate()
            .filter(|(_, s)| s.cap >= len && s.cap / 2 <= len.max(64))
            .min_by_key(|(_, s)| s.cap)
            .map(|(i, _)| i)?;
        Some(free.swap_remove(i))
    }
}

thread_local! {
    /// This rank's store, for the rpc handlers: they are registered once for every rank before
    /// launch, so they cannot capture a rank's store; set while the rank's CD runtime lives
    /// ([`serve`]).
    static SERVED: RefCell<Option<Rc<BuddyStore>>> = const { RefCell::new(None) };
}

/// Runs `f` with the store this rank serves, if it still serves one: a rank serves rpcs after
/// its body has returned (pgas finalize), and a `forget` sent by a buddy's last CDs can
/// arrive after its runtime is gone; it then finds nothing to do.
fn served<R>(f: impl FnOnce(&BuddyStore) -> R) -> Option<R> {
    let store = SERVED.with(|s| s.borrow().clone())?;
    Some(f(&store))
}

/// While alive, this rank's rpc handlers serve `store` ([`serve`]).
pub(crate) struct Serving(());

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = SERVED.try_with(|s| s.try_borrow_mut().map(|mut s| *s = None));
    }
}

/// Makes this rank's buddy rpc handlers serve `store` until the guard drops.
pub(crate) fn serve(store: Rc<BuddyStore>) -> Serving {
    SERVED.with(|s| *s.borrow_mut() = Some(store));
    Serving(())
}

/// The rpc functions of the buddy medium.
#[derive(Clone, Copy)]
pub(crate) struct BuddyRpcs {
    reserve: RpcFn<(usize, usize, Vec<usize>), Option<Slot>>,
    store: RpcFn<(usize, u64, Bytes), ()>,
    fetch: RpcFn<(usize, u64), Option<Bytes>>,
    fetch_slot: RpcFn<(usize, usize), Option<Bytes>>,
    forget: RpcFn<(usize, u64), ()>,
    lost: RpcFn<LostCopies, ()>,
    store_logs: RpcFn<(usize, Vec<(u64, Bytes)>), ()>,
    fetch_logs: RpcFn<(usize, Vec<u64>), Vec<Option<Bytes>>>,
    forget_logs: RpcFn<(usize, Vec<u64>), ()>,
}

impl BuddyRpcs {
    /// Registers the functions in `rpcs` (before launch, on every rank alike).
    pub(crate) fn register(rpcs: &mut RpcTable) -> BuddyRpcs {
        BuddyRpcs {
            reserve: rpcs.register(
                "cd.buddy.reserve",
                |(owner, len, give_back): (usize, usize, Vec<usize>)| {
                    served(|b| b.reserve(owner, len, &give_back)).flatten()
                },
            ),
            store: rpcs.register(
                "cd.buddy.store",
                |(owner, key, bytes): (usize, u64, Bytes)| {
                    served(|b| b.held.borrow_mut().insert((owner, key), bytes.0));
                },
            ),
            fetch: rpcs.register("cd.buddy.fetch", |(owner, key): (usize, u64)| {
                served(|b| b.held.borrow().get(&(owner, key)).cloned().map(Bytes)).flatten()
            }),
            // Read in the buddy's own thread, so never torn by a memory loss of the buddy
            // (which runs in that thread too).
            fetch_slot: rpcs.register("cd.buddy.fetch_slot", |(offset, len): (usize, usize)| {
                let mut bytes = vec![0u8; len];
                GlobalPtr::<u8>::from_raw(pgas::rank_me(), offset)
                    .read_local_slice(&mut bytes)
                    .ok()
                    .map(|()| Bytes(bytes))
            }),
            forget: rpcs.register("cd.buddy.forget", |(owner, key): (usize, u64)| {
                served(|b| b.held.borrow_mut().remove(&(owner, key)));
            }),
            lost: rpcs.register("cd.buddy.lost", |lost: LostCopies| {
                served(|b| b.mark_lost(lost));
            }),
            store_logs: rpcs.register(
                "cd.buddy.store_logs",
                |(owner, parts): (usize, Vec<(u64, Bytes)>)| {
                    served(|b| {
                        let mut logs = b.logs.borrow_mut();
                        for (key, bytes) in parts {
                            logs.insert((owner, key), bytes.0);
                        }
                    });
                },
            ),
            fetch_logs: rpcs.register("cd.buddy.fetch_logs", |(owner, keys): (usize, Vec<u64>)| {
                served(|b| {
                    let logs = b.logs.borrow();
                    keys.iter()
                        .map(|k| logs.get(&(owner, *k)).cloned().map(Bytes))
                        .collect()
                })
                .unwrap_or_default()
            }),
            forget_logs: rpcs.register(
                "cd.buddy.forget_logs",
                |(owner, keys): (usize, Vec<u64>)| {
                    served(|b| {
                        let mut logs = b.logs.borrow_mut();
                        for k in keys {
                            logs.remove(&(owner, k));
                        }
                    });
                },
            ),
        }
    }

    /// Tells `owner` what it kept here that is gone (this rank lost its memory), and waits
    /// until it knows: the owner's next agreement then reports such an entry unrestorable once
    /// its own copy is gone too, and the CD escalates instead of failing to fetch it in a
    /// re-execution. (Emulates the failure detector of a real system, which tells the
    /// survivors whose copies died with a node.)
    pub(crate) fn notify_lost(&self, b: &BuddyStore, owner: usize, lost: LostCopies) {
        if owner == b.rank {
            b.mark_lost(lost);
        } else {
            internal(|| pgas::rpc(owner, self.lost, lost).wait());
        }
    }

    /// Keeps a copy of `bytes` (entry `key`) at the buddy and returns where: in a slot of its
    /// region (a free slot of this rank's if one fits: one uncounted rput; else a new one,
    /// asked for by rpc), or by rpc when the region has no room.
    ///
    /// With `local`, also makes the owner's own copy there (`buddy_copies = 2`): on the slot
    /// path chunk by chunk, each chunk put to the buddy from the local copy while it is still
    /// in this core's cache ([`put_tagged_copying`](Self::put_tagged_copying)).
    pub(crate) fn store(
        &self,
        b: &BuddyStore,
        key: u64,
        bytes: &[u8],
        local: Option<&mut Vec<u8>>,
    ) -> Held {
        let buddy = b.buddy_rank;
        let slot = b.take_free_slot(bytes.len() + TAG).or_else(|| {
            let me = b.rank;
            let ask = |give_back: Vec<usize>| {
                b.reserves.set(b.reserves.get() + 1);
                internal(|| {
                    pgas::rpc(buddy, self.reserve, (me, bytes.len() + TAG, give_back)).wait()
                })
            };
            ask(Vec::new()).or_else(|| {
                // No room: give back this rank's free slots (the region merges them) and ask
                // once more.
                let free: Vec<usize> = std::mem::take(&mut *b.free_slots.borrow_mut())
                    .into_iter()
                    .map(|s| s.offset)
                    .collect();
                if free.is_empty() { None } else { ask(free) }
            })
        });
        let held = match slot {
            Some(slot) => {
                match local {
                    Some(local) => self.put_tagged_copying(b, slot, bytes, local),
                    None => self.put_tagged(b, slot, bytes),
                }
                Held::Slot(slot)
            }
            None => {
                if let Some(local) = local {
                    local.extend_from_slice(bytes);
                }
                let me = b.rank;
                let copy = Bytes(bytes.to_vec());
                internal(|| pgas::rpc(buddy, self.store, (me, key, copy)).wait());
                Held::Rpc
            }
        };
        // A CD re-run under a re-executed parent has the same keys: a fresh copy is held.
        b.mark_stored(key, held);
        held
    }

    /// Writes `bytes` again where the buddy held them before it lost them (`held`).
    pub(crate) fn store_again(&self, b: &BuddyStore, key: u64, held: Held, bytes: &[u8]) {
        match held {
            Held::Slot(slot) => self.put_tagged(b, slot, bytes),
            Held::Rpc => {
                let copy = Bytes(bytes.to_vec());
                internal(|| pgas::rpc(b.buddy_rank, self.store, (b.rank, key, copy)).wait());
            }
        }
        b.mark_stored(key, held);
    }

    /// Writes `bytes` into `slot` at the buddy, then a fresh tag after them, which this rank
    /// remembers for the slot.
    fn put_tagged(&self, b: &BuddyStore, slot: Slot, bytes: &[u8]) {
        let at = GlobalPtr::<u8>::from_raw(b.buddy_rank, slot.offset);
        pgas::runtime_hooks::rput_uncounted(bytes, at);
        self.put_tag(b, slot, bytes.len());
    }

    /// [`put_tagged`](Self::put_tagged) that also appends `bytes` to `local`, one chunk of
    /// [`COPY_CHUNK`] at a time: each chunk is copied into `local`, then put to the buddy from
    /// there. The program's array is read once, and the second copy reads a chunk this core
    /// has just written, from its L2; two whole copies in a row read the array twice.
    fn put_tagged_copying(&self, b: &BuddyStore, slot: Slot, bytes: &[u8], local: &mut Vec<u8>) {
        let at = GlobalPtr::<u8>::from_raw(b.buddy_rank, slot.offset);
        let start = local.len();
        // Room for all of it up front: a chunk's bytes are not moved while being put.
        local.reserve(bytes.len());
        for chunk in bytes.chunks(COPY_CHUNK) {
            let from = local.len();
            local.extend_from_slice(chunk);
            pgas::runtime_hooks::rput_uncounted(&local[from..], at + (from - start));
        }
        self.put_tag(b, slot, bytes.len());
    }

    /// Writes a fresh tag after the `len` bytes of `slot`, and remembers it for the slot.
    fn put_tag(&self, b: &BuddyStore, slot: Slot, len: usize) {
        let tag = pgas::mix64(((b.rank as u64) << 40) ^ (b.next_tag.get() + 1));
        b.next_tag.set(b.next_tag.get() + 1);
        let at = GlobalPtr::<u8>::from_raw(b.buddy_rank, slot.offset);
        pgas::runtime_hooks::rput_uncounted(&tag.to_ne_bytes(), at + len);
        b.tags.borrow_mut().insert(slot.offset, tag);
    }

    /// The `len` bytes the buddy holds for this rank (entry `key`, held as `held`); `None` if
    /// the buddy lost them.
    ///
    /// A slot's bytes come back by rpc, read in the buddy's thread with the tag written after
    /// them; a tag other than the one this rank last wrote there means the buddy lost its
    /// memory after that store (the loss notice may not have arrived yet: a buddy on another
    /// team loses its memory at any time, and an rget could read its segment half wiped).
    pub(crate) fn fetch(
        &self,
        b: &BuddyStore,
        key: u64,
        held: Held,
        len: usize,
    ) -> Option<Vec<u8>> {
        if b.is_lost(key, held) {
            return None;
        }
        let buddy = b.buddy_rank;
        match held {
            Held::Slot(slot) => {
                let want = *b.tags.borrow().get(&slot.offset)?;
                let got = internal(|| {
                    pgas::rpc(buddy, self.fetch_slot, (slot.offset, len + TAG)).wait()
                })?;
                let (bytes, tag) = got.0.split_at(len);
                (tag == want.to_ne_bytes()).then(|| bytes.to_vec())
            }
            Held::Rpc => {
                internal(|| pgas::rpc(buddy, self.fetch, (b.rank, key)).wait()).map(|b| b.0)
            }
        }
    }

    /// The entry is gone: its slot goes back to this rank's free slots (no message); an rpc
    /// copy is dropped at the buddy (no need to wait).
    pub(crate) fn release(&self, b: &BuddyStore, key: u64, held: Held) {
        match held {
            Held::Slot(slot) => b.free_slots.borrow_mut().push(slot),
            Held::Rpc => {
                let me = b.rank;
                internal(|| pgas::rpc_ff(b.buddy_rank, self.forget, (me, key)));
            }
        }
    }

    /// Stores log replicas (key, bytes) at the buddy, all in one rpc, and waits until it
    /// holds them.
    pub(crate) fn store_logs(&self, buddy: usize, parts: Vec<(u64, Bytes)>) {
        let me = pgas::rank_me();
        internal(|| pgas::rpc(buddy, self.store_logs, (me, parts)).wait());
    }

    /// Fetches this rank's log replicas under `keys` from the buddy, in one rpc (`None`
    /// where the buddy does not hold one).
    pub(crate) fn fetch_logs(&self, buddy: usize, keys: Vec<u64>) -> Vec<Option<Vec<u8>>> {
        let me = pgas::rank_me();
        let n = keys.len();
        let mut got: Vec<Option<Vec<u8>>> =
            internal(|| pgas::rpc(buddy, self.fetch_logs, (me, keys)).wait())
                .into_iter()
                .map(|b| b.map(|b| b.0))
                .collect();
        // A buddy past its runtime answers nothing: every replica is missing.
        got.resize(n, None);
        got
    }

    /// Tells the buddy it may drop the log replicas under `keys` (one rpc, no need to wait).
    pub(crate) fn forget_logs(&self, buddy: usize, keys: Vec<u64>) {
        if keys.is_empty() {
            return;
        }
        let me = pgas::rank_me();
        internal(|| pgas::rpc_ff(buddy, self.forget_logs, (me, keys)));
    }
}

/// The ranks ordered by (node, rank), so that each node's ranks are consecutive, and the
/// (node, size) of every node in that order: the placement of the buddy medium
/// ([`buddy_map`]) and of the xor medium's checksum groups (`xor::xor_groups`) start from it.
pub(crate) fn node_order(nodes: &[usize]) -> (Vec<usize>, Vec<(usize, usize)>) {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by_key(|&r| (nodes[r], r));
    let mut sizes: Vec<(usize, usize)> = Vec::new();
    for &r in &order {
        match sizes.last_mut() {
            Some((node, size)) if *node == nodes[r] => *size += 1,
            _ => sizes.push((nodes[r], 1)),
        }
    }
    (order, sizes)
}

/// The buddy of every rank: `nodes[r]` is the node of rank `r` (the conduit's topology: hosts
/// under mpirun, which may hold different numbers of ranks; emulated nodes on smp).
///
/// With [`BuddyDomain::Node`], a rank's buddy is on another node whenever there is another
/// node. Ranks are ordered by (node, rank), so each node's ranks are consecutive; let `n` be
/// the rank count and `m` the size of the largest node.
///
/// - `2m <= n`: the rank at position `i` has the rank at position `(i + m) mod n`. A node's
///   block `[a, a + s)` with `s <= m` maps to `[a + m, a + s + m)` mod `n`, which wraps back at
///   most to `a + s + m - n <= a + s - m <= a`: never into the block. It is a permutation, so
///   every rank is exactly one rank's buddy (with nodes of equal size: the rank of the same
///   place on the next node).
/// - `2m > n`: one node holds more than half of the ranks, so some rank must be the buddy of
///   several. Its ranks take the other ranks in turn, and the other ranks take its ranks (at
///   most one each); every rank is a buddy at most `ceil(m / (n - m))` times.
/// - One node (or [`BuddyDomain::Rank`]): rank `r` has `r + 1 mod n` (a rank alone is its own
///   buddy).
///
/// Deterministic: every rank computes the same map from the same topology.
pub(crate) fn buddy_map(nodes: &[usize], domain: BuddyDomain) -> Vec<usize> {
    let n = nodes.len();
    let next = |r: usize| (r + 1) % n;
    let (order, sizes) = node_order(nodes);
    if domain == BuddyDomain::Rank || sizes.len() < 2 {
        return (0..n).map(next).collect();
    }
    let (big_node, m) = sizes
        .iter()
        .copied()
        .max_by_key(|&(node, size)| (size, std::cmp::Reverse(node)))
        .expect("two nodes or more");
    let mut buddy = vec![0; n];
    if 2 * m <= n {
        for (i, &r) in order.iter().enumerate() {
            buddy[r] = order[(i + m) % n];
        }
    } else {
        let (big, others): (Vec<usize>, Vec<usize>) =
            order.iter().partition(|&&r| nodes[r] == big_node);
        for (j, &r) in big.iter().enumerate() {
            buddy[r] = others[j % others.len()];
        }
        for (j, &r) in others.iter().enumerate() {
            buddy[r] = big[j];
        }
    }
    buddy
}

#[cfg(test)]
pub(crate) mod test_topologies {
    //! Node layouts the placement tests of the buddy and xor media both walk.

    /// The node of every rank, for nodes of these sizes in rank order.
    pub(crate) fn contiguous(sizes: &[usize]) -> Vec<usize> {
        sizes
            .iter()
            .enumerate()
            .flat_map(|(node, &s)| std::iter::repeat_n(node, s))
            .collect()
    }

    /// Every split of `n` ranks into consecutive nodes (all 2^(n-1) compositions of `n`), as
    /// node sizes.
    pub(crate) fn every_split(n: usize) -> impl Iterator<Item = Vec<usize>> {
        (0..1u32 << (n - 1)).map(move |cuts| {
            let mut sizes = vec![1];
            for i in 0..n - 1 {
                if cuts & (1 << i) != 0 {
                    sizes.push(1);
                } else {
                    *sizes.last_mut().unwrap() += 1;
                }
            }
            sizes
        })
    }
}

#[cfg(test)]
mod tests {
    use super::test_topologies::{contiguous, every_split};
    use super::*;

    /// Checks the properties `buddy_map` promises for `nodes`.
    fn check(nodes: &[usize]) {
        let n = nodes.len();
        let buddy = buddy_map(nodes, BuddyDomain::Node);
        assert_eq!(buddy, buddy_map(nodes, BuddyDomain::Node), "deterministic");
        assert_eq!(buddy.len(), n);
        let mut node_sizes: BTreeMap<usize, usize> = BTreeMap::new();
        for &node in nodes {
            *node_sizes.entry(node).or_default() += 1;
        }
        let m = node_sizes.values().copied().max().unwrap_or(0);
        let mut times = vec![0usize; n];
        for (r, &b) in buddy.iter().enumerate() {
            assert!(b < n, "{nodes:?}: rank {r} -> {b}");
            if n > 1 {
                assert_ne!(b, r, "{nodes:?}: rank {r} is its own buddy");
            }
            if node_sizes.len() > 1 {
                assert_ne!(
                    nodes[b], nodes[r],
                    "{nodes:?}: rank {r} and its buddy {b} share node {}",
                    nodes[r]
                );
            }
            times[b] += 1;
        }
        let most = times.iter().copied().max().unwrap_or(0);
        if node_sizes.len() > 1 && 2 * m <= n {
            assert!(
                times.iter().all(|&t| t == 1),
                "{nodes:?}: {buddy:?} is no permutation"
            );
        } else if node_sizes.len() > 1 {
            let bound = m.div_ceil(n - m);
            assert!(
                most <= bound,
                "{nodes:?}: a rank is buddy {most} times, bound {bound}"
            );
        } else {
            assert!(most <= 1, "{nodes:?}: one node, a ring");
        }
    }

    #[test]
    fn buddies_are_on_another_node_for_every_split_into_nodes() {
        // Every split of up to 10 ranks into consecutive nodes (all 2^(n-1) compositions).
        for n in 1..=10usize {
            for sizes in every_split(n) {
                check(&contiguous(&sizes));
            }
        }
        // Larger uneven hosts, as under mpirun, and nodes not numbered in rank order.
        for sizes in [
            vec![1, 3],
            vec![2, 3, 1],
            vec![8, 8, 8, 3],
            vec![16, 1],
            vec![5, 7, 9, 11, 13],
            vec![1, 1, 1, 40],
            vec![32, 31, 1],
        ] {
            check(&contiguous(&sizes));
        }
        let mut x = 12345u64;
        for _ in 0..200 {
            x = pgas::mix64(x);
            let n = 2 + (x % 63) as usize;
            let k = 1 + (x >> 8) as usize % n.min(9);
            let nodes: Vec<usize> = (0..n)
                .map(|r| pgas::mix64(x ^ r as u64) as usize % k)
                .collect();
            check(&nodes);
        }
    }

    #[test]
    fn buddies_by_node_and_by_rank() {
        let node = |sizes: &[usize]| buddy_map(&contiguous(sizes), BuddyDomain::Node);
        assert_eq!(
            node(&[2, 2, 2, 2]),
            [2, 3, 4, 5, 6, 7, 0, 1],
            "next node, same place"
        );
        assert_eq!(node(&[4]), [1, 2, 3, 0], "one node: the next rank");
        assert_eq!(node(&[1]), [0]);
        assert_eq!(node(&[2, 3, 1]), [3, 4, 5, 0, 1, 2]);
        // Node 0 holds 4 of 6: its ranks share the two others, which take two of its ranks.
        assert_eq!(node(&[4, 2]), [4, 5, 4, 5, 0, 1]);
        assert_eq!(
            buddy_map(&contiguous(&[2, 2]), BuddyDomain::Rank),
            [1, 2, 3, 0],
            "rank domain: the next rank, same node or not"
        );
    }

    #[test]
    fn region_extents_take_first_fit_and_merge_on_release() {
        let mut e = Extents::new(1000);
        let a = e.take(100).unwrap();
        let b = e.take(300).unwrap();
        let c = e.take(500).unwrap();
        assert_eq!((a, b, c), (0, 100, 400));
        assert_eq!(e.take(101), None, "100 bytes left");
        e.give(b, 300);
        assert_eq!(e.take(250), Some(100), "first fit, in the hole");
        e.give(100, 250);
        e.give(a, 100);
        e.give(c, 500);
        assert_eq!(e, Extents::new(1000), "all merged back into one range");
        assert_eq!(e.free_bytes(), 1000);
        assert_eq!(e.take(1000), Some(0));
        assert_eq!(e.take(1), None);
        assert_eq!(Extents::new(0).take(1), None);
    }

    #[test]
    fn slots_hold_a_little_more_and_are_reused_by_size() {
        assert_eq!(slot_capacity(0), 64);
        assert_eq!(slot_capacity(64), 128);
        assert_eq!(slot_capacity(1 << 20), (1 << 20) + (1 << 16));
        for len in [1, 63, 100, 4095, 1 << 20, 3_000_001] {
            let cap = slot_capacity(len);
            assert!(
                cap >= len + len / 16 && cap.is_multiple_of(64),
                "{len}: {cap}"
            );
        }
        let store = BuddyStore::new(0, 0, 1);
        let big = Slot {
            offset: 0,
            cap: slot_capacity(1 << 20),
        };
        let small = Slot {
            offset: 1 << 21,
            cap: 128,
        };
        store.free_slots.borrow_mut().extend([big, small]);
        assert_eq!(store.take_free_slot(100), Some(small));
        assert_eq!(
            store.take_free_slot(100),
            None,
            "1 MiB is not spent on 100 bytes"
        );
        assert_eq!(
            store.take_free_slot((1 << 20) + 5),
            Some(big),
            "a bit larger still fits"
        );
        assert_eq!(store.take_free_slot(10), None);
    }

    #[test]
    fn a_region_hands_out_slots_takes_them_back_and_tells_what_a_loss_took() {
        // The region itself lives in a segment: exercise the bookkeeping with a placed region.
        let store = BuddyStore::new(4096, 0, 1);
        *store.region.borrow_mut() = Region::At {
            base: 1000,
            free: Extents::new(4096),
        };
        let a = store.reserve(7, 1000, &[]).unwrap();
        let b = store.reserve(8, 2000, &[]).unwrap();
        assert_eq!((a.offset, a.cap, b.offset), (1000, 1088, 2088));
        assert_eq!(store.reserve(7, 1000, &[]), None, "full");
        // Rank 8's slot is not rank 7's to give back.
        assert_eq!(store.reserve(7, 1000, &[b.offset]), None);
        let again = store.reserve(7, 1000, &[a.offset]).unwrap();
        assert_eq!(again.offset, a.offset, "given back, then handed out again");
        store.held.borrow_mut().insert((8, 42), vec![1]);
        store.logs.borrow_mut().insert((7, 5), vec![2]);
        let lost = store.wipe();
        assert_eq!(
            lost.get(&7),
            Some(&LostCopies {
                slots: vec![1000],
                keys: vec![],
                logs: vec![5]
            })
        );
        assert_eq!(
            lost.get(&8),
            Some(&LostCopies {
                slots: vec![2088],
                keys: vec![42],
                logs: vec![]
            })
        );
        assert!(store.held.borrow().is_empty() && store.logs.borrow().is_empty());
        // The owner's side: a lost slot until written again.
        let owner = BuddyStore::new(0, 0, 1);
        owner.mark_lost(lost[&7].clone());
        assert!(owner.is_lost(0, Held::Slot(again)));
        assert!(!owner.is_lost(0, Held::Rpc));
        owner.mark_stored(0, Held::Slot(again));
        assert!(!owner.is_lost(0, Held::Slot(again)));
        assert!(owner.is_log_lost(5));
    }

    #[test]
    fn bytes_serialize_as_one_block() {
        let b = Bytes(vec![1, 2, 3, 200]);
        let wire = postcard::to_allocvec(&b).unwrap();
        assert_eq!(wire, vec![4, 1, 2, 3, 200]);
        assert_eq!(postcard::from_bytes::<Bytes>(&wire).unwrap(), b);
    }
}
