//! The relaxed-CD part of a CD's frame (`Frame::rx`): its log store, the regions it preserved
//! or declared, its shadows, its dependency notes and what of its log the buddy holds. Plain
//! state below the frames; the mechanisms that fill and read it are the other files here.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use crate::error::ClassificationError;
use crate::injector::OpFaults;
use crate::relaxed::log_store::{EntryKind, LogStore, LoggedOp};

/// A region of this rank's segment a relaxed CD preserved with `preserve_global`, with the
/// IWC read just before and just after its copy was taken.
///
/// Why the IWC window: a write that lands after the CD began but before the copy is both in
/// the copy and in the incoming-write log. Replaying a replacing write again is harmless; a
/// combining one (an atomic add) would count twice. Writes counted at or before `iwc_before`
/// had fully landed before the copy started (the IWC counts a write after its bytes are in
/// place), so a recovery skips the combining ones among them; one counted inside the window
/// may or may not be in the copy, so a recovery that meets one refuses.
#[derive(Debug, Clone)]
pub(crate) struct PreservedRegion {
    pub(crate) name: String,
    /// Byte offset and length in this rank's segment.
    pub(crate) offset: usize,
    pub(crate) len: usize,
    pub(crate) iwc_before: u64,
    pub(crate) iwc_after: u64,
}

impl PreservedRegion {
    /// True if the 8-byte word at `offset` lies inside the region.
    pub(crate) fn covers_word(&self, offset: usize) -> bool {
        offset >= self.offset && offset + 8 <= self.offset + self.len
    }
}

/// The relaxed-CD part of a CD on this rank (strict CDs use only the store, which receives
/// their relaxed children's logs).
#[derive(Debug, Default)]
pub(crate) struct RelaxedFrame {
    /// The CD's log store.
    pub(crate) store: LogStore,
    /// EC and IWC at the CD's begin.
    pub(crate) ec_begin: u64,
    pub(crate) iwc_begin: u64,
    /// Regions of this rank's segment the CD preserved with `preserve_global`, restored at
    /// once when recovery starts.
    pub(crate) globals: Vec<PreservedRegion>,
    /// Names of `globals` restored when the current recovery began.
    pub(crate) eager_restored: HashSet<String>,
    /// IWC values of writes this rank made into itself (not in any initiator's log).
    pub(crate) own_iwcs: Vec<u64>,
    /// This rank's unlogged writes into the other ranks of its SPBC cluster (`cluster.rs`).
    pub(crate) cluster: ClusterWrites,
    /// This execution escalates only because its rank's cluster must re-execute with it.
    pub(crate) for_cluster: bool,
    /// Regions declared private (kept until the LCSA completes: "no other CD touches the
    /// data until the relaxed group completes").
    pub(crate) private: Vec<Region>,
    /// Regions declared privatized (private while this CD runs).
    pub(crate) privatized: Vec<Region>,
    /// Privatized regions this execution computes in shadow memory (a completed CD
    /// re-executed inside an enclosing replay), freed when the execution ends.
    pub(crate) shadows: Vec<Shadow>,
    /// What this execution logged so far, added to the report when it ends (a lookup of the
    /// report's table per operation cost more than the logging itself).
    pub(crate) logged: LoggedCounts,
    /// Classification errors found in this CD's accesses.
    pub(crate) class_errors: Vec<ClassificationError>,
    /// Blocks whose `delete_` was deferred during this CD (its relaxed children's pushed
    /// up): a re-execution cancels these deferrals, since it frees the blocks again.
    pub(crate) deferred: Vec<usize>,
    /// A relaxed CD ran inside this (strict) CD: deferred frees and logs to clean up.
    pub(crate) had_relaxed: bool,
    /// This strict CD's current execution keeps dependency notes (its hook installed from
    /// its begin; `strict.rs` decides).
    pub(crate) tracked: bool,
    /// For a strict CD with `dependency_tracking`: the ranks this rank read from and wrote
    /// into during the current execution.
    pub(crate) deps: Dependencies,
    /// What of `store`, `own_iwcs` and `deps` the buddy holds (`log_medium = "buddy"`).
    pub(crate) replica: Replicated,
    /// Why this CD's log is incomplete: a rank loss took entries (or dependency notes) that
    /// no replica held. Cleared with the log (`clear`).
    pub(crate) log_lost: Option<String>,
    /// The faults that strike at an operation of the current execution (`op_fault.rs`).
    pub(crate) op_faults: Option<OpFaults>,
    /// Operations of the current execution counted for `op_faults`.
    pub(crate) ops: u64,
    /// The current execution lost the rank's memory at one of its operations.
    pub(crate) lost_mid_body: bool,
}

/// Entries and bytes a CD's execution logged, and the time spent ([`crate::clock`] ticks).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LoggedCounts {
    pub(crate) entries: u64,
    pub(crate) bytes: u64,
    pub(crate) ticks: u64,
}

impl RelaxedFrame {
    /// Forgets everything logged inside (a strict CD completes or re-executes); returns the
    /// keys of the log's replicas at the buddy, which the caller forgets there
    /// (`replica::forget`).
    #[must_use = "the buddy still holds the replicas: pass the keys to replica::forget"]
    pub(crate) fn clear(&mut self) -> Vec<u64> {
        self.store.clear();
        self.own_iwcs.clear();
        self.cluster = ClusterWrites::default();
        self.private.clear();
        self.privatized.clear();
        self.class_errors.clear();
        self.deferred.clear();
        self.deps = Dependencies::default();
        self.log_lost = None;
        let replica = std::mem::take(&mut self.replica);
        replica.keys.into_iter().chain(replica.notes_key).collect()
    }

    /// Cancels the frees deferred during a failed execution of this CD (the re-execution
    /// frees those blocks again; a second `delete_` of a deferred block is an error), except
    /// the blocks in `keep`.
    pub(crate) fn cancel_deferred(&mut self, keep: &[usize]) -> Result<(), String> {
        for offset in std::mem::take(&mut self.deferred) {
            if keep.contains(&offset) {
                continue;
            }
            pgas::runtime_hooks::cancel_deferred_free(offset)
                .map_err(|e| format!("cannot cancel the deferred free at {offset}: {e}"))?;
        }
        Ok(())
    }
}

/// A write into another rank of this rank's SPBC cluster: not logged, only its IWC at the
/// target is kept, so that the target's gap check still proves its logged writes complete.
#[derive(Debug, Clone)]
pub(crate) struct ClusterWrite {
    pub(crate) target: usize,
    /// The word and operation of a writing atomic (`None`: a put or an rpc request).
    pub(crate) atomic: Option<(usize, LoggedOp)>,
    /// The target's EC and IWC from the ack (`None` while the ack has not come).
    pub(crate) counters: Option<(u64, u64)>,
    /// The operation's id, to complete it by.
    pub(crate) op: u64,
}

/// A CD's unlogged writes into its rank's cluster, in program order.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClusterWrites {
    pub(crate) writes: Vec<ClusterWrite>,
}

/// A declared region of this rank's segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    /// The CD that declared it.
    pub cd: String,
    /// The name the program gave it.
    pub name: String,
    /// Byte offset in the segment.
    pub offset: usize,
    /// Byte length.
    pub len: usize,
}

impl Region {
    /// True if `len` bytes at `offset` touch the region.
    pub(crate) fn overlaps(&self, offset: usize, len: usize) -> bool {
        offset < self.offset + self.len && self.offset < offset + len
    }
}

/// A privatized region re-executed into shadow memory.
#[derive(Debug, Clone)]
pub(crate) struct Shadow {
    /// The region's byte offset in this rank's segment.
    pub(crate) region: usize,
    /// The shadow block's byte offset.
    pub(crate) block: usize,
    /// Bytes.
    pub(crate) len: usize,
}

/// The ranges of bytes kept per (rank, phase) in `Dependencies::extents`: past it the two
/// closest merge, so the notes stay bounded and the check errs only towards refusing. A rank's
/// messages to a neighbour interleave with other ranks' in its inboxes and flags (a slot per
/// sender), so the bound is that of the slots a program writes, not a handful.
pub(crate) const EXTENTS: usize = 256;

/// Adds `[lo, hi)` to the sorted disjoint ranges `v`, merging what it touches and, past
/// [`EXTENTS`] ranges, the two closest; true if `v` changed.
fn add_range(v: &mut Vec<(usize, usize)>, lo: usize, hi: usize) -> bool {
    // The first range that ends at or after `lo`: the ones before cannot touch it.
    let at = v.partition_point(|&(_, h)| h < lo);
    if v.get(at).is_some_and(|&(l, h)| l <= lo && hi <= h) {
        return false;
    }
    let end = at + v[at..].iter().take_while(|&&(l, _)| l <= hi).count();
    let merged = v[at..end]
        .iter()
        .fold((lo, hi), |(lo, hi), &(l, h)| (lo.min(l), hi.max(h)));
    v.splice(at..end, [merged]);
    if v.len() > EXTENTS {
        let i = (0..v.len() - 1)
            .min_by_key(|&i| v[i + 1].0 - v[i].1)
            .expect("more than one range");
        v[i].1 = v[i + 1].1;
        v.remove(i + 1);
    }
    true
}

/// What one rank noted during the current execution of a tracking strict CD.
///
/// The notes live in the rank's memory: a rank loss takes them. A relaxed CD with
/// `log_medium = "buddy"` replicates them with its log (`replica.rs`), so a rank that recovers
/// alone gets them back; a strict CD whose state survives a loss ships them to the buddy
/// whenever they grow (`replica::ship_notes`), so an escalation after a loss that took the
/// logs is still limited. Otherwise they stay lost (`notes_lost`) and an escalation at this
/// CD re-executes the whole group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Dependencies {
    /// Ranks this rank read from (gets, fetched values of atomics, rpc replies, fetches).
    pub(crate) reads_from: BTreeSet<usize>,
    /// Ranks this rank wrote into (puts, writing atomics, rpc requests).
    pub(crate) writes_to: BTreeSet<usize>,
    /// This rank communicated outside any logging relaxed CD (or began a strict child CD
    /// spanning other ranks): nothing logged can serve that to a limited re-execution.
    pub(crate) unlogged: bool,
    /// A relaxed child of the strict CD escalated on this rank in this execution.
    pub(crate) escalated_child: bool,
    /// A relaxed child failed and escalated only because its rank's SPBC cluster must
    /// re-execute with it (`cluster.rs`): the cluster, not the dependents, re-executes.
    #[serde(default)]
    pub(crate) cluster_child: bool,
    /// Such a child escalated after a loss in the middle of its body: its log holds what came
    /// before the loss only, while the body went on to its end, so a limited re-execution of
    /// its cluster could not serve its operations (the whole group re-executes).
    #[serde(default)]
    pub(crate) cluster_loss_mid_body: bool,
    /// A rank loss took these notes and no replica brought them back.
    pub(crate) notes_lost: bool,
    /// This rank took a `cd::rng()` draw or a collective result no other rank's log can give
    /// again (a `reduce_one`'s, or one on a team other than the strict CD's): a limited
    /// re-execution serves those from this rank's log, so if the rank lost its log it cannot
    /// take part in one.
    #[serde(default)]
    pub(crate) log_served: bool,
    /// This rank's EC after each barrier it left in the execution, in order: barrier `k`
    /// ends phase `k` (`phases.rs`).
    #[serde(default)]
    pub(crate) barrier_ecs: Vec<u64>,
    /// The bytes of other ranks' segments this rank accessed, per phase: (rank, phase) → at
    /// most [`EXTENTS`] disjoint ranges, sorted, that hold them all (`phases.rs`).
    #[serde(default)]
    pub(crate) extents: BTreeMap<(usize, u32), Vec<(usize, usize)>>,
}

impl Dependencies {
    /// Notes an access to `rank` that reads from it, writes into it, or both.
    pub(crate) fn note_access(&mut self, rank: usize, read: bool, write: bool) {
        if read {
            self.reads_from.insert(rank);
        }
        if write {
            self.writes_to.insert(rank);
        }
    }

    /// The phase this rank is in: the number of barriers it left in the execution.
    pub(crate) fn phase(&self) -> u32 {
        self.barrier_ecs.len() as u32
    }

    /// Notes an access to `bytes` of `rank`'s segment in the current phase; true if the
    /// extents grew.
    pub(crate) fn note_extent(&mut self, rank: usize, bytes: std::ops::Range<usize>) -> bool {
        let ranges = self.extents.entry((rank, self.phase())).or_default();
        add_range(ranges, bytes.start, bytes.end)
    }

    /// Notes the operation an entry records (`logged`: a logging relaxed CD logs it) under a
    /// strict CD whose team has id `team`; true if the notes grew.
    pub(crate) fn note(&mut self, kind: &EntryKind, logged: bool, team: u64) -> bool {
        let before = (self.reads_from.len(), self.writes_to.len(), self.log_served);
        let extended = match kind.extent() {
            Some((rank, bytes)) => self.note_extent(rank, bytes),
            None => false,
        };
        match kind {
            EntryKind::Write { target, .. } => {
                self.writes_to.insert(*target);
            }
            EntryKind::Read { source, .. } => {
                self.reads_from.insert(*source);
            }
            EntryKind::Atomic { target, op, .. } => {
                self.reads_from.insert(*target);
                if *op != LoggedOp::Load {
                    self.writes_to.insert(*target);
                }
            }
            EntryKind::Rpc { target, .. } => {
                self.writes_to.insert(*target);
                self.reads_from.insert(*target);
            }
            EntryKind::Fetch { rank, .. } => {
                self.reads_from.insert(*rank);
            }
            // A barrier is a synchronization: never a dependency, and a limited
            // re-execution runs it among the re-executing ranks without a log.
            EntryKind::Collective { barrier: true, .. } => return false,
            EntryKind::Collective {
                shared, team: t, ..
            } => self.log_served |= !(*shared && *t == team),
            EntryKind::Rng { .. } => {
                let grew = !self.log_served;
                self.log_served = true;
                return grew;
            }
            EntryKind::Alloc { .. } | EntryKind::Privatized { .. } => return false,
        }
        let grew =
            extended || before != (self.reads_from.len(), self.writes_to.len(), self.log_served);
        if !logged && !self.unlogged {
            self.unlogged = true;
            return true;
        }
        grew
    }

    /// Adds the notes of `other` (an earlier or later snapshot of the same execution's: the
    /// notes only grow, so the union is the later one).
    pub(crate) fn merge(&mut self, other: Dependencies) {
        self.reads_from.extend(other.reads_from);
        self.writes_to.extend(other.writes_to);
        self.unlogged |= other.unlogged;
        self.escalated_child |= other.escalated_child;
        self.cluster_child |= other.cluster_child;
        self.cluster_loss_mid_body |= other.cluster_loss_mid_body;
        self.notes_lost |= other.notes_lost;
        self.log_served |= other.log_served;
        if other.barrier_ecs.len() > self.barrier_ecs.len() {
            self.barrier_ecs = other.barrier_ecs;
        }
        for (key, ranges) in other.extents {
            let mine = self.extents.entry(key).or_default();
            for (lo, hi) in ranges {
                add_range(mine, lo, hi);
            }
        }
    }
}

/// What of a CD's log its buddy holds: the replicas under `keys`, in order, hold the store's
/// first `entries` entries and the first `iwcs` of its own IWCs; `deps` is the last snapshot
/// of its dependency notes sent (tracking strict CDs), with a replica or alone under
/// `notes_key` (`replica::ship_notes`, each snapshot replacing the one before).
#[derive(Debug, Default)]
pub(crate) struct Replicated {
    pub(crate) keys: Vec<u64>,
    pub(crate) entries: usize,
    pub(crate) iwcs: usize,
    pub(crate) deps: Option<Dependencies>,
    pub(crate) notes_key: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_what_they_touch_and_the_closest_past_the_limit() {
        let mut v = Vec::new();
        assert!(add_range(&mut v, 10, 20));
        assert!(!add_range(&mut v, 12, 18), "inside: no change");
        assert!(add_range(&mut v, 30, 40));
        assert!(add_range(&mut v, 20, 25), "touching: merged");
        assert_eq!(v, vec![(10, 25), (30, 40)]);
        assert!(add_range(&mut v, 0, 35), "over both");
        assert_eq!(v, vec![(0, 40)]);
        let mut v = Vec::new();
        for i in 0..EXTENTS {
            add_range(&mut v, 100 * i, 100 * i + 10);
        }
        assert_eq!(v.len(), EXTENTS);
        // One more range 5 bytes after the third: those two merge.
        add_range(&mut v, 215, 220);
        assert_eq!(v.len(), EXTENTS);
        assert!(v.contains(&(200, 220)), "{v:?}");
        assert!(
            v.windows(2).all(|w| w[0].1 < w[1].0),
            "sorted, disjoint: {v:?}"
        );
    }

    #[test]
    fn every_range_added_stays_covered() {
        let mut v = Vec::new();
        let mut added = Vec::new();
        let mut x: u64 = 7;
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let lo = (x >> 33) as usize % 5000;
            let hi = lo + 1 + (x >> 20) as usize % 16;
            add_range(&mut v, lo, hi);
            added.push((lo, hi));
            assert!(v.len() <= EXTENTS);
            assert!(v.windows(2).all(|w| w[0].1 < w[1].0), "sorted, disjoint");
        }
        for (lo, hi) in added {
            assert!(
                v.iter().any(|&(l, h)| l <= lo && hi <= h),
                "{lo}..{hi} lost"
            );
        }
    }
}
