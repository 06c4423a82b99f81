//! The buddy medium: preserved bytes kept in another rank's memory, reached by pgas rpc.
//!
//! Rank r's buddy is the first rank of the next node (with emulated nodes) or r + 1 (with one
//! node), so a rank's copies survive the loss of its node whenever there is another node.
//! Each rank keeps the copies it holds for others in a map keyed by (owner rank, entry key).
//!
//! Relaxed CDs with `log_medium = "buddy"` keep replicas of their logs here too
//! (`relaxed/replica.rs`), in a second map: the two key spaces are separate maps, so a log key
//! can never name a preserved copy (preserved keys are hashes of CD ids and names, log keys a
//! per-owner counter). A loss wipes both, and the owner hears of both.
//!
//! This is the CD runtime's own traffic, not the program's: every rpc goes through
//! `pgas::resilience::internal`, so the program's hook never logs or replays it and the
//! buddy does not count it as an incoming write.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};

use pgas::resilience::internal;
use pgas::{RpcFn, RpcTable};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::runtime;

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

/// Copies this rank holds for other ranks.
#[derive(Default)]
pub(crate) struct BuddyStore {
    held: RefCell<HashMap<(usize, u64), Vec<u8>>>,
    /// Replicas of other ranks' relaxed logs, by (owner rank, log key): a key space of its own.
    logs: RefCell<HashMap<(usize, u64), Vec<u8>>>,
    /// Keys of this rank's own copies that its buddy lost with its memory.
    lost: RefCell<HashSet<u64>>,
    /// Keys of this rank's log replicas that its buddy lost with its memory.
    lost_logs: RefCell<HashSet<u64>>,
}

/// What a rank that lost its memory held for one owner: preserved copies' keys and log
/// replicas' keys.
pub(crate) type HeldKeys = (Vec<u64>, Vec<u64>);

impl BuddyStore {
    /// Forgets everything (this rank's memory was lost); returns the keys it held, by owner.
    pub(crate) fn wipe(&self) -> BTreeMap<usize, HeldKeys> {
        let mut by_owner: BTreeMap<usize, HeldKeys> = BTreeMap::new();
        for ((owner, key), _) in self.held.borrow_mut().drain() {
            by_owner.entry(owner).or_default().0.push(key);
        }
        for ((owner, key), _) in self.logs.borrow_mut().drain() {
            by_owner.entry(owner).or_default().1.push(key);
        }
        by_owner
    }

    /// True if the buddy lost this rank's log replica under `key`.
    pub(crate) fn is_log_lost(&self, key: u64) -> bool {
        self.lost_logs.borrow().contains(&key)
    }

    /// True if the buddy lost this rank's copy under `key`.
    pub(crate) fn is_lost(&self, key: u64) -> bool {
        self.lost.borrow().contains(&key)
    }

    /// Notes that the buddy holds a fresh copy under `key`.
    pub(crate) fn mark_stored(&self, key: u64) {
        self.lost.borrow_mut().remove(&key);
    }

    /// Notes that the buddy lost this rank's copies under `keys`.
    pub(crate) fn mark_lost(&self, keys: impl IntoIterator<Item = u64>) {
        self.lost.borrow_mut().extend(keys);
    }

    /// Notes that the buddy lost this rank's log replicas under `keys`.
    pub(crate) fn mark_logs_lost(&self, keys: impl IntoIterator<Item = u64>) {
        self.lost_logs.borrow_mut().extend(keys);
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
}

/// The rpc functions of the buddy medium.
#[derive(Clone, Copy)]
pub(crate) struct BuddyRpcs {
    store: RpcFn<(usize, u64, Bytes), ()>,
    fetch: RpcFn<(usize, u64), Option<Bytes>>,
    forget: RpcFn<(usize, u64), ()>,
    lost: RpcFn<HeldKeys, ()>,
    store_logs: RpcFn<(usize, Vec<(u64, Bytes)>), ()>,
    fetch_logs: RpcFn<(usize, Vec<u64>), Vec<Option<Bytes>>>,
    forget_logs: RpcFn<(usize, Vec<u64>), ()>,
}

impl BuddyRpcs {
    /// Registers the functions in `rpcs` (before launch, on every rank alike).
    pub(crate) fn register(rpcs: &mut RpcTable) -> BuddyRpcs {
        BuddyRpcs {
            store: rpcs.register(
                "cd.buddy.store",
                |(owner, key, bytes): (usize, u64, Bytes)| {
                    runtime::try_with(|rt| {
                        rt.buddy.held.borrow_mut().insert((owner, key), bytes.0)
                    });
                },
            ),
            fetch: rpcs.register("cd.buddy.fetch", |(owner, key): (usize, u64)| {
                runtime::try_with(|rt| {
                    rt.buddy
                        .held
                        .borrow()
                        .get(&(owner, key))
                        .cloned()
                        .map(Bytes)
                })
                .flatten()
            }),
            forget: rpcs.register("cd.buddy.forget", |(owner, key): (usize, u64)| {
                runtime::try_with(|rt| rt.buddy.held.borrow_mut().remove(&(owner, key)));
            }),
            lost: rpcs.register("cd.buddy.lost", |(keys, logs): HeldKeys| {
                runtime::try_with(|rt| {
                    rt.buddy.mark_lost(keys);
                    rt.buddy.mark_logs_lost(logs);
                });
            }),
            store_logs: rpcs.register(
                "cd.buddy.store_logs",
                |(owner, parts): (usize, Vec<(u64, Bytes)>)| {
                    runtime::try_with(|rt| {
                        let mut logs = rt.buddy.logs.borrow_mut();
                        for (key, bytes) in parts {
                            logs.insert((owner, key), bytes.0);
                        }
                    });
                },
            ),
            fetch_logs: rpcs.register("cd.buddy.fetch_logs", |(owner, keys): (usize, Vec<u64>)| {
                runtime::try_with(|rt| {
                    let logs = rt.buddy.logs.borrow();
                    keys.iter()
                        .map(|k| logs.get(&(owner, *k)).cloned().map(Bytes))
                        .collect()
                })
                .unwrap_or_default()
            }),
            forget_logs: rpcs.register(
                "cd.buddy.forget_logs",
                |(owner, keys): (usize, Vec<u64>)| {
                    runtime::try_with(|rt| {
                        let mut logs = rt.buddy.logs.borrow_mut();
                        for k in keys {
                            logs.remove(&(owner, k));
                        }
                    });
                },
            ),
        }
    }

    /// Tells `owner` that the copies it kept here under `keys` are gone (this rank lost its
    /// memory), and waits until it knows: the owner's next agreement then reports such an
    /// entry unrestorable once its own copy is gone too, and the CD escalates instead of
    /// failing to fetch it in a re-execution. (Emulates the failure detector of a real
    /// system, which tells the survivors whose copies died with a node.)
    pub(crate) fn notify_lost(&self, owner: usize, keys: HeldKeys) {
        if owner == pgas::rank_me() {
            runtime::with(|rt| {
                rt.buddy.mark_lost(keys.0);
                rt.buddy.mark_logs_lost(keys.1);
            });
        } else {
            internal(|| pgas::rpc(owner, self.lost, keys).wait());
        }
    }

    /// Stores `bytes` at the buddy and waits until it holds them.
    pub(crate) fn store(&self, buddy: usize, key: u64, bytes: Vec<u8>) {
        let me = pgas::rank_me();
        internal(|| pgas::rpc(buddy, self.store, (me, key, Bytes(bytes))).wait());
    }

    /// Fetches the bytes the buddy holds under `key` for this rank.
    pub(crate) fn fetch(&self, buddy: usize, key: u64) -> Option<Vec<u8>> {
        let me = pgas::rank_me();
        internal(|| pgas::rpc(buddy, self.fetch, (me, key)).wait()).map(|b| b.0)
    }

    /// Tells the buddy it may drop `key` (no need to wait).
    pub(crate) fn forget(&self, buddy: usize, key: u64) {
        let me = pgas::rank_me();
        internal(|| pgas::rpc_ff(buddy, self.forget, (me, key)));
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

/// The buddy of `rank`: on the next node if nodes are emulated, else the next rank.
pub(crate) fn buddy_of(rank: usize, ranks: usize, ranks_per_node: usize) -> usize {
    if ranks == 1 {
        return 0;
    }
    let step = if ranks_per_node < ranks {
        ranks_per_node
    } else {
        1
    };
    (rank + step) % ranks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buddies_are_elsewhere() {
        assert_eq!(buddy_of(0, 4, 4), 1);
        assert_eq!(buddy_of(3, 4, 4), 0);
        assert_eq!(buddy_of(1, 8, 2), 3, "next node");
        assert_eq!(buddy_of(7, 8, 2), 1);
        assert_eq!(buddy_of(0, 1, 1), 0);
    }

    #[test]
    fn bytes_serialize_as_one_block() {
        let b = Bytes(vec![1, 2, 3, 200]);
        let wire = postcard::to_allocvec(&b).unwrap();
        assert_eq!(wire, vec![4, 1, 2, 3, 200]);
        assert_eq!(postcard::from_bytes::<Bytes>(&wire).unwrap(), b);
    }
}
