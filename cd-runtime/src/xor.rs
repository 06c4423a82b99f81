//! The xor medium: preserved bytes kept in this rank's memory, plus an XOR parity spread over
//! a *checksum group* of ranks on different nodes, so that the group survives the loss of any
//! one member (ftRMA's diskless checksum groups, seed 000/002, with m = 1: RAID-5's parity).
//!
//! **Groups.** `xor_group = k` (per CD level, [`crate::config`]) groups the ranks by k
//! (`xor_groups`): ranks ordered by (node, rank), as the buddy placement orders them
//! (`buddy::node_order`), and the rank at position `i` in group `i mod G`, with
//! `G = floor(n / k)` groups. A node's ranks are consecutive in that order, so two of them
//! share a group only if the node holds more than `G` ranks; such a topology is refused (a
//! clear error naming the node and the largest `k` it allows) rather than placing two members
//! of a group on one node. With one node (or `buddy_domain = "rank"`) the domains are the ranks.
//! **The remainder:** when k does not divide n, the `n mod k` ranks left over join the groups
//! in turn, one rank each from the first (the deal of positions goes on): groups have
//! `floor(n / G)` or `ceil(n / G)` members, the larger first; never fewer than k (a group of
//! one would have no parity). With `k <= n < 2k` that is one group of all n ranks. Every
//! group is a pgas team made once at launch (`Team::split`), and every collective of the
//! medium runs on it, never on the world.
//!
//! **Layout (RAID-5, rotated parity).** A preservation is collective over the group: every
//! member preserves the same entries in the same order (as the ranks of a strict CD do). The
//! members agree on the sizes (one allgather) and pad every copy with zeros to the largest,
//! cut into `g - 1` chunks of `c` bytes (`g` the group's size). Member `m`'s chunks fill the
//! columns `0..g` except column `m`; member `j` holds the parity of column `j`, the XOR of
//! the other members' chunks there: `c = L / (g - 1)` bytes, 1/(g-1) of a buddy copy. Each
//! member writes each of its chunks (only the bytes that hold data: the receiver knows every
//! member's size and counts the padding as zeros) with one uncounted rput
//! (`pgas::runtime_hooks::rput_uncounted`, as the buddy medium does: the program's hook and the
//! target's Incoming Write Counter never see them) into a slot of the column owner's *staging*
//! block; after one barrier of the group each member XORs its slots into its parity. The
//! next collective of the group (the next preservation's allgather) is what keeps a slot from
//! being overwritten before it was read.
//!
//! **Memory.** Per rank: its own copy (as on the buddy medium), its parity, `c` bytes, kept
//! in its private memory, and the staging block, `(g - 1) c` (about one copy) in its segment
//! from the room `buddy_segment_bytes` adds: a working buffer, allocated once at the largest
//! size met and reused by every preservation and rebuild, not a copy kept per entry. (A buddy
//! copy costs a rank `L` of its buddy's segment per entry.)
//!
//! **Cost.** Two collectives of the group per preservation (the size agreement and the
//! barrier) and about 1.5 copies of memory traffic per rank, where the buddy medium has none
//! and one put: on one machine the xor medium is the slower of the two, and its gain is
//! memory, and surviving the loss of a node in every group at once.
//!
//! **Losses.** A member that loses its memory loses its copies and its parity, and tells the
//! other members (emulating a failure detector, as the buddy medium does); an entry preserved
//! before that notice knows the member is gone. Before a re-execution
//! (`CdRuntime::rereplicate`) the group rebuilds every entry that lost exactly one member:
//! column by column, each survivor writes into the lost member's staging block its chunk of
//! that column, or its parity when the column is its own; the XOR of the `g - 1` pieces is the
//! lost chunk, and for the lost member's own column its parity. An entry two members of the
//! group lost cannot be rebuilt: the CD reports it unrestorable, naming the group and both
//! ranks ([`XorError::TwoLosses`]), and escalates.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use pgas::runtime_hooks::internal;
use pgas::{GlobalPtr, RpcFn, RpcTable, Team};
use thiserror::Error;

use crate::config::BuddyDomain;
use crate::frame::{CdKind, Frame, Store};
use crate::runtime::{self, CdRuntime};

/// Why the xor medium cannot form its groups or restore an entry.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum XorError {
    /// The job has fewer ranks than one group needs.
    #[error(
        "xor_group = {k} needs {k} ranks for one checksum group, but the job has {ranks}: set \
         xor_group to at most {ranks}"
    )]
    GroupLargerThanJob {
        /// The configured group size.
        k: usize,
        /// Ranks in the job.
        ranks: usize,
    },
    /// A node holds more ranks than there are groups, so two members of a group would share
    /// it (and one node's loss would take both).
    #[error(
        "xor_group = {k} makes {groups} checksum group(s) of the {ranks} ranks, but node {node} \
         holds {on_node} of them, so two members of one group would share node {node}: set \
         xor_group to at most {largest} for this topology, or buddy_domain = \"rank\" to place \
         groups over ranks instead of nodes"
    )]
    NodeHoldsTooMany {
        /// The configured group size.
        k: usize,
        /// Groups of that size.
        groups: usize,
        /// Ranks in the job.
        ranks: usize,
        /// The largest node.
        node: usize,
        /// Ranks on it.
        on_node: usize,
        /// The largest group size this topology allows with members on different nodes.
        largest: usize,
    },
    /// Two members of one group lost their copies of an entry before it was rebuilt.
    #[error(
        "xor checksum group {group} of xor_group = {k} (ranks {members:?}) lost two members, \
         ranks {first} and {second}, before its parity rebuilt the first: one parity restores \
         one member"
    )]
    TwoLosses {
        /// The configured group size.
        k: usize,
        /// The group's number.
        group: usize,
        /// Its members (world ranks, in group order).
        members: Vec<usize>,
        /// The lost members, lowest first.
        first: usize,
        /// The other lost member (the highest, when more were lost).
        second: usize,
    },
}

/// The checksum groups of `k` members for ranks on `nodes` (`nodes[r]` the node of rank `r`),
/// each group's members in group order (see the module doc: position `i` of the (node, rank)
/// order goes to group `i mod floor(n / k)`; the remainder makes the first groups one longer).
/// Deterministic: every rank computes the same groups.
pub(crate) fn xor_groups(
    nodes: &[usize],
    k: usize,
    domain: BuddyDomain,
) -> Result<Vec<Vec<usize>>, XorError> {
    let n = nodes.len();
    if k < 2 || k > n {
        return Err(XorError::GroupLargerThanJob { k, ranks: n });
    }
    let (node_order, sizes) = crate::buddy::node_order(nodes);
    let groups = n / k;
    let order: Vec<usize> = if domain == BuddyDomain::Rank || sizes.len() < 2 {
        (0..n).collect()
    } else {
        let &(node, on_node) = sizes
            .iter()
            .max_by_key(|&&(node, size)| (size, std::cmp::Reverse(node)))
            .expect("two nodes or more");
        if on_node > groups {
            return Err(XorError::NodeHoldsTooMany {
                k,
                groups,
                ranks: n,
                node,
                on_node,
                largest: n / on_node,
            });
        }
        node_order
    };
    let mut out = vec![Vec::with_capacity(k + 1); groups];
    for (i, &r) in order.iter().enumerate() {
        out[i % groups].push(r);
    }
    Ok(out)
}

/// The probability of a catastrophic failure (ftRMA's P_cf, seed 000 §5.2) for ranks on
/// `nodes` protected by `groups` (checksum groups of the xor medium, or the pairs {rank, its
/// buddy} of the buddy medium), given one node failure.
///
/// The reading: nodes fail independently, each at the constant rate λ = 1 / `node_mtbf_seconds`
/// (exponential lifetimes). A node F fails; its ranks' copies are rebuilt within
/// `recovery_seconds` (T). The failure is catastrophic if F itself holds more members of one
/// group than the group survives (two members; one for a group of one rank, which has no copy
/// elsewhere), or if any *partner* node fails within T: a node other than F that holds a member
/// of a group that has a member on F. With p(F) partners, the probability that none of them
/// fails within T is exp(−λ·T·p(F)), so
///
/// ```text
/// P_cf = (1 / N) · Σ_F  [ 1                      if F holds two members of one group
///                         1 − exp(−T·p(F) / M)   otherwise ]
/// ```
///
/// over the N nodes that hold ranks (the failing node is any of them, equally likely), with
/// M = `node_mtbf_seconds`. (ftRMA sums over the numbers of concurrent failures at each level
/// of the hierarchy with measured distributions; this is its node level with failures as a
/// Poisson process: the chance that the window after one failure holds a second that matters.)
pub fn p_cf(
    nodes: &[usize],
    groups: &[Vec<usize>],
    node_mtbf_seconds: f64,
    recovery_seconds: f64,
) -> f64 {
    let all: BTreeSet<usize> = nodes.iter().copied().collect();
    if all.is_empty() {
        return 0.0;
    }
    let mut total = 0.0;
    for &f in &all {
        let mut partners = BTreeSet::new();
        let mut lost_outright = false;
        for g in groups {
            let on_f = g.iter().filter(|&&r| nodes[r] == f).count();
            if on_f == 0 {
                continue;
            }
            let survives = usize::from(g.len() >= 2);
            if on_f > survives {
                lost_outright = true;
            }
            partners.extend(g.iter().map(|&r| nodes[r]).filter(|&n| n != f));
        }
        total += if lost_outright {
            1.0
        } else {
            -(-recovery_seconds * partners.len() as f64 / node_mtbf_seconds).exp_m1()
        };
    }
    total / all.len() as f64
}

/// The P_cf entry of the report for a CD with settings `s` (buddy or xor medium; `None`
/// otherwise), for ranks on `nodes` and a node MTBF of `mtbf` seconds.
pub(crate) fn pcf_of(
    s: &crate::config::CdSettings,
    nodes: &[usize],
    config: &crate::config::CdConfig,
    mtbf: f64,
) -> Option<crate::report::Pcf> {
    let (medium, size, groups) = match s.medium {
        crate::config::Medium::Buddy => {
            let buddy = crate::buddy::buddy_map(nodes, config.buddy_domain);
            let pairs: Vec<Vec<usize>> = buddy
                .iter()
                .enumerate()
                .map(|(r, &b)| if r == b { vec![r] } else { vec![r, b] })
                .collect();
            ("buddy", 2, pairs)
        }
        crate::config::Medium::Xor => {
            let k = s.xor_group?;
            ("xor", k, xor_groups(nodes, k, config.buddy_domain).ok()?)
        }
        _ => return None,
    };
    let p = p_cf(nodes, &groups, mtbf, config.recovery_seconds);
    let node_count = nodes.iter().collect::<BTreeSet<_>>().len();
    Some(crate::report::Pcf {
        medium: medium.into(),
        group_size: size,
        groups: groups.len(),
        nodes: node_count,
        node_mtbf_seconds: mtbf,
        recovery_seconds: config.recovery_seconds,
        p_cf: p,
        per_hour: node_count as f64 * 3600.0 / mtbf * p,
    })
}

/// One group this rank is a member of.
pub(crate) struct XorGroup {
    /// The group's number among the groups of its size.
    pub(crate) index: usize,
    /// The members, in group order (this rank included).
    pub(crate) team: Team,
}

/// This rank's xor state: its groups, the losses it heard of, its staging block.
#[derive(Default)]
pub(crate) struct XorStore {
    /// By configured group size `k`.
    groups: BTreeMap<usize, XorGroup>,
    /// By `k`: the members of this rank's group that lost their memory, in the order this rank
    /// heard of them. An entry notes how many it had heard of when preserved (`seen`); the
    /// ones after are the losses it suffered.
    losses: RefCell<BTreeMap<usize, Vec<usize>>>,
    /// (offset, bytes) of the staging block in this rank's segment, once allocated.
    staging: Cell<Option<(usize, usize)>>,
    /// The allocation holding the staging block (freed when a larger one replaces it).
    staging_block: Cell<Option<GlobalPtr<u8>>>,
}

impl XorStore {
    /// Forms this rank's groups for every size `sizes` (a collective over the world: every
    /// rank calls it at launch with the same sizes); `nodes[r]` is the node of rank `r`.
    pub(crate) fn new(
        sizes: &[usize],
        nodes: &[usize],
        domain: BuddyDomain,
    ) -> Result<XorStore, XorError> {
        let me = pgas::rank_me();
        let world = pgas::world();
        let mut groups = BTreeMap::new();
        for &k in sizes {
            let all = xor_groups(nodes, k, domain)?;
            let (index, position) = all
                .iter()
                .enumerate()
                .find_map(|(g, m)| m.iter().position(|&r| r == me).map(|p| (g, p)))
                .expect("every rank is in a group");
            let team = internal(|| world.split(index as u64, position as u64));
            groups.insert(k, XorGroup { index, team });
        }
        Ok(XorStore {
            groups,
            ..XorStore::default()
        })
    }

    /// The members of `k`'s group that lost their memory after an entry that had heard of
    /// `seen` losses was preserved (this rank excluded: its own loss shows in the entry).
    fn lost_since(&self, k: usize, seen: usize) -> BTreeSet<usize> {
        self.losses
            .borrow()
            .get(&k)
            .map(|l| l.iter().skip(seen).copied().collect())
            .unwrap_or_default()
    }

    /// How many losses of `k`'s group this rank has heard of.
    fn heard(&self, k: usize) -> usize {
        self.losses.borrow().get(&k).map_or(0, Vec::len)
    }

    /// True when this rank can restore an xor entry of group size `k` that had heard of `seen`
    /// losses: its own copy is there (`own`), or it is the only member that lost it.
    pub(crate) fn restorable(&self, k: usize, seen: usize, own: bool) -> bool {
        own || self.lost_since(k, seen).is_empty()
    }

    /// Why an entry of group size `k` (heard of `seen` losses) cannot be rebuilt on `rank`,
    /// which lost its copy: the group and the lost members.
    fn two_losses(&self, k: usize, seen: usize, rank: usize) -> Option<XorError> {
        let mut lost = self.lost_since(k, seen);
        if lost.is_empty() {
            return None;
        }
        lost.insert(rank);
        let group = self.groups.get(&k)?;
        Some(XorError::TwoLosses {
            k,
            group: group.index,
            members: group.team.members().to_vec(),
            first: *lost.first()?,
            second: *lost.last()?,
        })
    }

    /// A staging block of at least `bytes` in this rank's segment; its offset.
    fn ensure_staging(&self, bytes: usize) -> usize {
        if let Some((offset, cap)) = self.staging.get() {
            if cap >= bytes {
                return offset;
            }
        }
        if let Some(old) = self.staging_block.take() {
            let _ = internal(|| pgas::delete_(old));
        }
        // A little more than asked, so that a copy slightly larger next time fits (as the
        // buddy medium's slots do); 64-byte aligned, so chunk copies are.
        let cap = crate::buddy::slot_capacity(bytes);
        let block = internal(|| pgas::new_array::<u8>(cap + 64)).unwrap_or_else(|e| {
            panic!(
                "xor medium: no room for {cap} bytes of parity staging in rank {}'s segment \
                 ({e}); raise buddy_segment_bytes (the room the CD runtime adds to every \
                 segment) or use smaller copies",
                pgas::rank_me()
            )
        });
        let offset = block.offset().next_multiple_of(64);
        self.staging_block.set(Some(block));
        self.staging.set(Some((offset, cap)));
        offset
    }
}

/// The rpc functions of the xor medium.
#[derive(Clone, Copy)]
pub(crate) struct XorRpcs {
    lost: RpcFn<(usize, usize), ()>,
}

impl XorRpcs {
    /// Registers the functions in `rpcs` (before launch, on every rank alike).
    pub(crate) fn register(rpcs: &mut RpcTable) -> XorRpcs {
        XorRpcs {
            lost: rpcs.register("cd.xor.lost", |(k, member): (usize, usize)| {
                runtime::try_with(|rt| {
                    rt.xor
                        .losses
                        .borrow_mut()
                        .entry(k)
                        .or_default()
                        .push(member)
                });
            }),
        }
    }
}

/// This rank lost its memory: tells the other members of each of its groups, and waits until
/// they know (before the agreement that follows, so that every member's restorability check
/// sees every loss of this execution).
pub(crate) fn notify_loss(rt: &CdRuntime) {
    for (&k, group) in &rt.xor.groups {
        for &m in group.team.members() {
            if m != rt.rank {
                internal(|| pgas::rpc(m, rt.xor_rpcs.lost, (k, rt.rank)).wait());
            }
        }
    }
}

/// Member `owner`'s chunk in column `col` (`owner != col`) of a copy of `data` cut into
/// chunks of `c` bytes, zero-padded.
fn chunk_of(data: &[u8], owner: usize, col: usize, c: usize) -> Cow<'_, [u8]> {
    debug_assert_ne!(owner, col, "a member has no chunk in its own column");
    let i = if col < owner { col } else { col - 1 };
    let start = (i * c).min(data.len());
    let end = ((i + 1) * c).min(data.len());
    if end - start == c {
        Cow::Borrowed(&data[start..end])
    } else {
        let mut v = vec![0u8; c];
        v[..end - start].copy_from_slice(&data[start..end]);
        Cow::Owned(v)
    }
}

/// `acc ^= src`, byte by byte (the compiler vectorizes it).
fn xor_into(acc: &mut [u8], src: &[u8]) {
    for (a, b) in acc.iter_mut().zip(src) {
        *a ^= *b;
    }
}

/// The bytes of member `owner`'s chunk in column `col` that hold data (the rest of the `c`
/// bytes are padding, zeros) for a copy of `len` bytes.
fn chunk_len(len: usize, owner: usize, col: usize, c: usize) -> usize {
    let i = if col < owner { col } else { col - 1 };
    len.saturating_sub(i * c).min(c)
}

/// Bytes of the staging block read at a time: small enough to stay in cache while it is
/// XORed in.
const PIECE: usize = 16 << 10;

/// The XOR of the staging slots of `c` bytes at `offset` in this rank's segment, of which
/// slot `s` holds `valid[s]` bytes (the rest counts as zeros), in a buffer of `rt`'s pool.
fn xor_of_slots(rt: &CdRuntime, offset: usize, valid: &[usize], c: usize) -> Vec<u8> {
    let me = pgas::rank_me();
    let mut acc = rt.pool.zeroed(c);
    let mut piece = vec![0u8; PIECE.min(c)];
    for (s, &n) in valid.iter().enumerate() {
        let mut at = 0;
        while at < n {
            let len = PIECE.min(n - at);
            GlobalPtr::<u8>::from_raw(me, offset + s * c + at)
                .read_local_slice(&mut piece[..len])
                .unwrap_or_else(|e| panic!("xor medium: reading the staging block: {e}"));
            xor_into(&mut acc[at..at + len], &piece[..len]);
            at += len;
        }
    }
    acc
}

/// The group of size `k` of this rank, checked usable by `frame`.
fn group_for<'a>(rt: &'a CdRuntime, frame: &Frame) -> (usize, &'a XorGroup) {
    let k = frame.settings.xor_group.unwrap_or_else(|| {
        panic!(
            "CD {:?}: medium xor without xor_group: set xor_group in {}",
            frame.name,
            rt.config.table_of(&frame.name)
        )
    });
    let group = rt.xor.groups.get(&k).unwrap_or_else(|| {
        panic!(
            "CD {:?}: no checksum groups of {k} were formed at launch (xor_group = {k} is not in \
             the configuration the job started with)",
            frame.name
        )
    });
    assert!(
        frame.kind == CdKind::Strict
            && group
                .team
                .members()
                .iter()
                .all(|m| frame.team.members().contains(m)),
        "CD {:?}: medium xor preserves together with checksum group {} (ranks {:?}), so the CD \
         must be strict and span all of them (it spans {:?}); use medium = \"buddy\" here",
        frame.name,
        group.index,
        group.team.members(),
        frame.team.members()
    );
    (k, group)
}

/// Preserves `bytes` of entry `name` of `frame` on the xor medium (collective over this rank's
/// checksum group): the parity of the group's copies is computed and this rank keeps its
/// column's share. Returns the store of the entry and the parity bytes this rank holds.
pub(crate) fn preserve(rt: &CdRuntime, frame: &Frame, bytes: Vec<u8>) -> (Store, usize) {
    preserve_many(rt, frame, vec![bytes])
        .pop()
        .expect("one entry in, one out")
}

/// Preserves several entries of `frame` in one round of the group (`Cd::preserve_batch`):
/// one agreement on every entry's size, every chunk of every entry put into the staging
/// blocks (entry after entry, each laid out as `preserve` lays out one), one barrier, then
/// each entry's parity. Every member passes the same number of entries, in the same order.
pub(crate) fn preserve_many(
    rt: &CdRuntime,
    frame: &Frame,
    batch: Vec<Vec<u8>>,
) -> Vec<(Store, usize)> {
    let (k, group) = group_for(rt, frame);
    // Counted before the first collective: a member that finishes this preservation, runs on
    // and loses its memory can tell this rank while it still waits in the barrier below; that
    // loss took the member's copy of these entries, so it must count as after them. (Taken
    // at the end, it did not, the lost member's copy was never rebuilt, and the group hung,
    // the survivors in the rebuild and this rank past it.)
    let seen = rt.xor.heard(k);
    let team = &group.team;
    let g = team.rank_n();
    let me = team.rank_me();
    let (off, cap) = rt.xor.staging.get().unwrap_or((0, 0));
    let lens: Vec<usize> = batch.iter().map(Vec::len).collect();
    let infos: Vec<(Vec<usize>, usize, usize)> =
        internal(|| pgas::allgather(team, (lens, off, cap)).wait());
    assert!(
        infos.iter().all(|i| i.0.len() == batch.len()),
        "CD {:?}: the members of xor checksum group {} preserved different numbers of entries          in one batch ({:?}); every member must preserve the same entries in the same order",
        frame.name,
        group.index,
        infos.iter().map(|i| i.0.len()).collect::<Vec<_>>()
    );
    // Entry e: chunks of c[e] bytes at base[e] in every staging block (64-byte aligned, so
    // chunk copies are).
    let c: Vec<usize> = (0..batch.len())
        .map(|e| {
            let largest = infos.iter().map(|i| i.0[e]).max().unwrap_or(0);
            largest.div_ceil(g - 1)
        })
        .collect();
    let base: Vec<usize> = c
        .iter()
        .scan(0, |at, &ce| {
            let b = *at;
            *at += ((g - 1) * ce).next_multiple_of(64);
            Some(b)
        })
        .collect();
    let need: usize = c
        .iter()
        .map(|&ce| ((g - 1) * ce).next_multiple_of(64))
        .sum();
    let offsets: Vec<usize> = if infos.iter().any(|i| i.2 < need) {
        // Every member sees the same sizes, so all take this branch together.
        let mine = rt.xor.ensure_staging(need);
        internal(|| pgas::allgather(team, mine).wait())
    } else {
        infos.iter().map(|i| i.1).collect()
    };
    if need > 0 {
        for (e, bytes) in batch.iter().enumerate() {
            let ce = c[e];
            for (col, &at) in offsets.iter().enumerate() {
                let n = if col == me {
                    0
                } else {
                    chunk_len(bytes.len(), me, col, ce)
                };
                if n == 0 {
                    continue;
                }
                // Only the bytes that hold data: the receiver counts the rest as zeros.
                let i = if col < me { col } else { col - 1 };
                let slot = if me < col { me } else { me - 1 };
                pgas::runtime_hooks::rput_uncounted(
                    &bytes[i * ce..i * ce + n],
                    GlobalPtr::<u8>::from_raw(team.to_world(col), at + base[e] + slot * ce),
                );
            }
        }
        internal(|| pgas::barrier_on(team));
    }
    batch
        .into_iter()
        .enumerate()
        .map(|(e, bytes)| {
            let ce = c[e];
            let parity = if ce == 0 {
                Vec::new()
            } else {
                // Slot s holds the chunk of member s (s < me) or s + 1 (s >= me).
                let valid: Vec<usize> = (0..g)
                    .filter(|&m| m != me)
                    .map(|m| chunk_len(infos[m].0[e], m, me, ce))
                    .collect();
                xor_of_slots(rt, offsets[me] + base[e], &valid, ce)
            };
            let held = parity.len();
            let store = Store::Xor {
                k,
                len: bytes.len(),
                chunk: ce,
                local: Some(bytes),
                parity: Some(parity),
                seen,
            };
            (store, held)
        })
        .collect()
}

/// Why this rank cannot restore entry `name` of `frame` (an xor entry it lost, which another
/// member of its group lost too), as a sentence for the escalation.
pub(crate) fn loss_reason(rt: &CdRuntime, frame: &Frame) -> Option<String> {
    let st = frame.state.borrow();
    st.entries.iter().find_map(|e| match &e.store {
        Store::Xor {
            k,
            seen,
            local: None,
            ..
        } => rt
            .xor
            .two_losses(*k, *seen, rt.rank)
            .map(|why| format!("`{}`: {why}", e.name)),
        _ => None,
    })
}

/// Before a re-execution: rebuilds, with the other members of its group, every xor entry on
/// the stack that exactly one member lost. The members first agree on which (one allgather
/// per group, of which entries each lost, in stack order: every member holds the same entries
/// in the same order), so they enter the same collectives whatever losses they heard of and
/// when. Entries two members lost are left: the CD that holds them reports them unrestorable.
///
/// Only groups whose members all re-execute now (the re-executing CD, on top of the stack,
/// spans them) rebuild: a CD over a smaller team leaves its ancestors' xor entries as they
/// are, and the ancestor that holds them rebuilds them when it re-executes itself (the entries
/// still count the loss, so a second loss in the group before then is still caught).
pub(crate) fn rebuild(rt: &CdRuntime) {
    if rt.xor.groups.is_empty() {
        return;
    }
    let frames: Vec<_> = rt.frames.borrow().clone();
    let Some(top) = frames.last() else { return };
    for (&k, group) in &rt.xor.groups {
        let spanned = group
            .team
            .members()
            .iter()
            .all(|m| top.team.members().contains(m));
        if !spanned {
            continue;
        }
        // (frame, entry, lost here) of every xor entry of this group size, in stack order.
        let mut entries = Vec::new();
        for (fi, f) in frames.iter().enumerate() {
            for (i, e) in f.state.borrow().entries.iter().enumerate() {
                if let Store::Xor { k: ek, local, .. } = &e.store {
                    if *ek == k {
                        entries.push((fi, i, local.is_none()));
                    }
                }
            }
        }
        if entries.is_empty() {
            continue;
        }
        let mine: Vec<bool> = entries.iter().map(|e| e.2).collect();
        let all: Vec<Vec<bool>> = internal(|| pgas::allgather(&group.team, mine).wait());
        assert!(
            all.iter().all(|v| v.len() == entries.len()),
            "xor checksum group {} (ranks {:?}): its members hold different numbers of xor \
             entries ({:?}); every member must preserve the same names in the same CDs",
            group.index,
            group.team.members(),
            all.iter().map(Vec::len).collect::<Vec<_>>()
        );
        for (j, &(fi, i, _)) in entries.iter().enumerate() {
            if all.iter().filter(|v| v[j]).count() == 1 {
                rebuild_entry(rt, &frames[fi], i, k);
            }
        }
    }
}

/// Rebuilds entry `i` of `frame` (group size `k`), which one member of the group lost.
fn rebuild_entry(rt: &CdRuntime, frame: &Frame, i: usize, k: usize) {
    let group = &rt.xor.groups[&k];
    // Before the first collective, as in `preserve`: a loss heard during the rebuild happened
    // after it.
    let heard = rt.xor.heard(k);
    let team = &group.team;
    let g = team.rank_n();
    let me = team.rank_me();
    let (c, len, lost_here) = match &frame.state.borrow().entries[i].store {
        Store::Xor {
            chunk, len, local, ..
        } => (*chunk, *len, local.is_none()),
        _ => unreachable!("planned on an xor entry"),
    };
    let off = if lost_here {
        rt.xor.ensure_staging((g - 1) * c)
    } else {
        rt.xor.staging.get().map_or(0, |s| s.0)
    };
    let infos: Vec<(bool, usize)> = internal(|| pgas::allgather(team, (lost_here, off)).wait());
    let lost: Vec<usize> = (0..g).filter(|&m| infos[m].0).collect();
    assert_eq!(
        lost.len(),
        1,
        "CD {:?}: xor checksum group {} (ranks {:?}) disagrees on which member lost its copy",
        frame.name,
        group.index,
        team.members()
    );
    let x = lost[0];
    let x_off = infos[x].1;
    let mut data = vec![0u8; if me == x { (g - 1) * c } else { 0 }];
    let mut parity = Vec::new();
    if c > 0 {
        for col in 0..g {
            if me != x {
                // Copied out: no borrow of the CD's state is held while the put runs.
                let piece: Vec<u8> = {
                    let st = frame.state.borrow();
                    let Store::Xor {
                        local: Some(mine),
                        parity: Some(my_parity),
                        ..
                    } = &st.entries[i].store
                    else {
                        unreachable!("a survivor holds its copy and its parity");
                    };
                    if col == me {
                        my_parity.clone()
                    } else {
                        chunk_of(mine, me, col, c).into_owned()
                    }
                };
                let slot = if me < x { me } else { me - 1 };
                pgas::runtime_hooks::rput_uncounted(
                    &piece,
                    GlobalPtr::<u8>::from_raw(team.to_world(x), x_off + slot * c),
                );
            }
            internal(|| pgas::barrier_on(team));
            if me == x {
                // The survivors wrote whole chunks (padded) and parities.
                let acc = xor_of_slots(rt, x_off, &vec![c; g - 1], c);
                if col == x {
                    parity = acc;
                } else {
                    let j = if col < x { col } else { col - 1 };
                    data[j * c..(j + 1) * c].copy_from_slice(&acc);
                    rt.pool.give_back(acc);
                }
            }
            if col + 1 < g {
                // The lost member has read its slots before they are written again.
                internal(|| pgas::barrier_on(team));
            }
        }
    }
    if let Store::Xor {
        local,
        parity: p,
        seen,
        ..
    } = &mut frame.state.borrow_mut().entries[i].store
    {
        if me == x {
            data.truncate(len);
            *local = Some(data);
            *p = Some(parity);
        }
        *seen = heard;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buddy::test_topologies::{contiguous, every_split};

    /// Checks what `xor_groups` promises for `nodes` and `k`: every rank in exactly one group,
    /// floor(n / k) groups of k or more (sizes differ by one at most), members on different nodes whenever there are two
    /// nodes or more; refused exactly when a node holds more ranks than there are groups.
    fn check(nodes: &[usize], k: usize) {
        let n = nodes.len();
        let mut on: BTreeMap<usize, usize> = BTreeMap::new();
        for &node in nodes {
            *on.entry(node).or_default() += 1;
        }
        let most = on.values().copied().max().unwrap_or(0);
        let got = xor_groups(nodes, k, BuddyDomain::Node);
        if k < 2 || k > n {
            assert_eq!(got, Err(XorError::GroupLargerThanJob { k, ranks: n }));
            return;
        }
        if on.len() > 1 && most > n / k {
            let e = got.expect_err("two members would share a node");
            let XorError::NodeHoldsTooMany { largest, .. } = e else {
                panic!("{nodes:?}, k = {k}: {e}");
            };
            assert!(largest < k, "{nodes:?}: {e}");
            // The largest size it names works.
            if largest >= 2 {
                check(nodes, largest);
                assert!(xor_groups(nodes, largest, BuddyDomain::Node).is_ok());
            }
            return;
        }
        let groups = got.unwrap_or_else(|e| panic!("{nodes:?}, k = {k}: {e}"));
        assert_eq!(groups, xor_groups(nodes, k, BuddyDomain::Node).unwrap());
        assert_eq!(groups.len(), n / k, "{nodes:?}, k = {k}");
        let mut seen = vec![0; n];
        let (small, large) = (n / groups.len(), n.div_ceil(groups.len()));
        for g in &groups {
            assert!(
                g.len() >= k && (g.len() == small || g.len() == large),
                "{nodes:?}, k = {k}: {g:?}"
            );
            for &r in g {
                seen[r] += 1;
            }
            if on.len() > 1 {
                let distinct: BTreeSet<usize> = g.iter().map(|&r| nodes[r]).collect();
                assert_eq!(
                    distinct.len(),
                    g.len(),
                    "{nodes:?}, k = {k}: group {g:?} has two members on one node"
                );
            }
        }
        assert!(seen.iter().all(|&s| s == 1), "{nodes:?}, k = {k}: {seen:?}");
        // The remainder joins the first groups, one rank each in turn.
        let long = groups.iter().take_while(|g| g.len() > small).count();
        assert_eq!(long, n % groups.len(), "{nodes:?}, k = {k}");
    }

    #[test]
    fn groups_never_put_two_members_on_one_node() {
        // Every split of up to 10 ranks into consecutive nodes, every k.
        for n in 1..=10usize {
            for sizes in every_split(n) {
                for k in 1..=n + 1 {
                    check(&contiguous(&sizes), k);
                }
            }
        }
        // Uneven hosts as under mpirun, and nodes not numbered in rank order.
        for sizes in [vec![8, 8, 8, 3], vec![5, 7, 9, 11, 13], vec![32, 31, 1]] {
            for k in 2..6 {
                check(&contiguous(&sizes), k);
            }
        }
        let mut x = 99u64;
        for _ in 0..200 {
            x = pgas::mix64(x);
            let n = 2 + (x % 63) as usize;
            let nodes_n = 1 + (x >> 8) as usize % n.min(12);
            let nodes: Vec<usize> = (0..n)
                .map(|r| pgas::mix64(x ^ r as u64) as usize % nodes_n)
                .collect();
            check(&nodes, 2 + (x >> 20) as usize % 5);
        }
    }

    #[test]
    fn groups_interleave_nodes_and_name_the_node_that_is_too_large() {
        let g = |sizes: &[usize], k| xor_groups(&contiguous(sizes), k, BuddyDomain::Node);
        assert_eq!(
            g(&[2, 2, 2, 2], 4),
            Ok(vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]])
        );
        assert_eq!(
            g(&[3, 3, 1], 2),
            Ok(vec![vec![0, 3, 6], vec![1, 4], vec![2, 5]])
        );
        // One node: the domains are the ranks.
        assert_eq!(g(&[5], 2), Ok(vec![vec![0, 2, 4], vec![1, 3]]));
        let e = g(&[3, 3, 1], 3).unwrap_err();
        assert_eq!(
            e,
            XorError::NodeHoldsTooMany {
                k: 3,
                groups: 2,
                ranks: 7,
                node: 0,
                on_node: 3,
                largest: 2
            }
        );
        assert!(e.to_string().contains("at most 2"), "{e}");
        assert_eq!(
            xor_groups(&contiguous(&[3, 3, 1]), 3, BuddyDomain::Rank),
            Ok(vec![vec![0, 2, 4, 6], vec![1, 3, 5]])
        );
    }

    /// P_cf for given inputs, against the formula worked by hand.
    #[test]
    fn p_cf_follows_the_formula() {
        let (m, t): (f64, f64) = (3600.0 * 1000.0, 60.0);
        // 4 nodes of 2 ranks, groups of 4 across all nodes: every node has 3 partners.
        let nodes = contiguous(&[2, 2, 2, 2]);
        let groups = vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]];
        let want = 1.0 - (-3.0 * t / m).exp();
        assert!((p_cf(&nodes, &groups, m, t) - want).abs() < 1e-15);
        // Groups of 2 within pairs of nodes: one partner each, a third of the risk (nearly).
        let pairs = vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]];
        let want = 1.0 - (-t / m).exp();
        assert!((p_cf(&nodes, &pairs, m, t) - want).abs() < 1e-15);
        assert!(p_cf(&nodes, &pairs, m, t) < p_cf(&nodes, &groups, m, t));
        // Two members of a group on node 0 (ranks 0, 1) and on node 3 (ranks 6, 7): their
        // failures are catastrophic (1 each); node 1 (ranks 2, 3) has partners 0 and 2, node 2
        // (ranks 4, 5) has 1 and 3.
        let bad = vec![vec![0, 1, 2], vec![3, 4], vec![5, 6, 7]];
        let want = (1.0 + (1.0 - (-2.0 * t / m).exp()) * 2.0 + 1.0) / 4.0;
        assert!((p_cf(&nodes, &bad, m, t) - want).abs() < 1e-15);
        // A rank alone (its own buddy): its node's loss is catastrophic.
        assert_eq!(p_cf(&[0], &[vec![0]], m, t), 1.0);
        // Longer recovery, shorter MTBF: more risk; the probability stays below 1.
        assert!(p_cf(&nodes, &groups, m / 10.0, t) > p_cf(&nodes, &groups, m, t));
        assert!(p_cf(&nodes, &groups, 1.0, 1e9) <= 1.0);
    }

    #[test]
    fn chunks_are_padded_with_zeros_and_skip_the_owners_column() {
        let data: Vec<u8> = (1..=10).collect();
        // Owner 1 of 4 members, chunks of 4: columns 0, 2, 3 hold chunks 0, 1, 2.
        assert_eq!(&*chunk_of(&data, 1, 0, 4), &[1, 2, 3, 4]);
        assert_eq!(&*chunk_of(&data, 1, 2, 4), &[5, 6, 7, 8]);
        assert_eq!(&*chunk_of(&data, 1, 3, 4), &[9, 10, 0, 0]);
        assert_eq!(&*chunk_of(&[], 0, 1, 3), &[0, 0, 0]);
        let mut acc = vec![0b1010u8, 1];
        xor_into(&mut acc, &[0b0110, 1]);
        assert_eq!(acc, [0b1100, 0]);
    }
}
