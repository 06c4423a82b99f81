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
//! (`recovery::rereplicate`, by `xor_entries::rebuild`) the group rebuilds every entry that lost exactly one member:
//! column by column, each survivor writes into the lost member's staging block its chunk of
//! that column, or its parity when the column is its own; the XOR of the `g - 1` pieces is the
//! lost chunk, and for the lost member's own column its parity. An entry two members of the
//! group lost cannot be rebuilt: the CD reports it unrestorable, naming the group and both
//! ranks ([`XorError::TwoLosses`]), and escalates.
//!
//! This file is the medium: the groups, the losses heard of, the staging block and the parity
//! arithmetic. Laying a CD's entries out over the group and rebuilding them is
//! `xor_entries.rs`, above the frames it reads.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use pgas::runtime_hooks::internal;
use pgas::{GlobalPtr, RpcFn, RpcTable, Team};
use thiserror::Error;

use std::rc::Rc;

use crate::buffer_pool::BufferPool;
use crate::config::BuddyDomain;

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
    pub(crate) groups: BTreeMap<usize, XorGroup>,
    /// By `k`: the members of this rank's group that lost their memory, in the order this rank
    /// heard of them. An entry notes how many it had heard of when preserved (`seen`); the
    /// ones after are the losses it suffered.
    losses: RefCell<BTreeMap<usize, Vec<usize>>>,
    /// (offset, bytes) of the staging block in this rank's segment, once allocated.
    pub(crate) staging: Cell<Option<(usize, usize)>>,
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
    pub(crate) fn lost_since(&self, k: usize, seen: usize) -> BTreeSet<usize> {
        self.losses
            .borrow()
            .get(&k)
            .map(|l| l.iter().skip(seen).copied().collect())
            .unwrap_or_default()
    }

    /// How many losses of `k`'s group this rank has heard of.
    pub(crate) fn heard(&self, k: usize) -> usize {
        self.losses.borrow().get(&k).map_or(0, Vec::len)
    }

    /// True when this rank can restore an xor entry of group size `k` that had heard of `seen`
    /// losses: its own copy is there (`own`), or it is the only member that lost it.
    pub(crate) fn restorable(&self, k: usize, seen: usize, own: bool) -> bool {
        own || self.lost_since(k, seen).is_empty()
    }

    /// Why an entry of group size `k` (heard of `seen` losses) cannot be rebuilt on `rank`,
    /// which lost its copy: the group and the lost members.
    pub(crate) fn two_losses(&self, k: usize, seen: usize, rank: usize) -> Option<XorError> {
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
    pub(crate) fn ensure_staging(&self, bytes: usize) -> usize {
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

thread_local! {
    /// This rank's store, for the rpc handler: it is registered once for every rank before
    /// launch, so it cannot capture a rank's store; set while the rank's CD runtime lives
    /// ([`serve`]).
    static SERVED: RefCell<Option<Rc<XorStore>>> = const { RefCell::new(None) };
}

/// While alive, this rank's xor rpc handler serves a store ([`serve`]).
pub(crate) struct Serving(());

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = SERVED.try_with(|s| s.try_borrow_mut().map(|mut s| *s = None));
    }
}

/// Makes this rank's xor rpc handler serve `store` until the guard drops.
pub(crate) fn serve(store: Rc<XorStore>) -> Serving {
    SERVED.with(|s| *s.borrow_mut() = Some(store));
    Serving(())
}

impl XorRpcs {
    /// Registers the functions in `rpcs` (before launch, on every rank alike).
    pub(crate) fn register(rpcs: &mut RpcTable) -> XorRpcs {
        XorRpcs {
            lost: rpcs.register("cd.xor.lost", |(k, member): (usize, usize)| {
                // A rank past its runtime has no entries left to restore: nothing to note.
                if let Some(xor) = SERVED.with(|s| s.borrow().clone()) {
                    xor.losses.borrow_mut().entry(k).or_default().push(member)
                }
            }),
        }
    }

    /// This rank (`me`) lost its memory: tells the other members of each of its groups in
    /// `xor`, and waits until they know (before the agreement that follows, so that every
    /// member's restorability check sees every loss of this execution).
    pub(crate) fn notify_loss(&self, xor: &XorStore, me: usize) {
        for (&k, group) in &xor.groups {
            for &m in group.team.members() {
                if m != me {
                    internal(|| pgas::rpc(m, self.lost, (k, me)).wait());
                }
            }
        }
    }
}

/// Member `owner`'s chunk in column `col` (`owner != col`) of a copy of `data` cut into
/// chunks of `c` bytes, zero-padded.
pub(crate) fn chunk_of(data: &[u8], owner: usize, col: usize, c: usize) -> Cow<'_, [u8]> {
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
pub(crate) fn chunk_len(len: usize, owner: usize, col: usize, c: usize) -> usize {
    let i = if col < owner { col } else { col - 1 };
    len.saturating_sub(i * c).min(c)
}

/// Bytes of the staging block read at a time: small enough to stay in cache while it is
/// XORed in.
pub(crate) const PIECE: usize = 16 << 10;

/// The XOR of the staging slots of `c` bytes at `offset` in this rank's segment, of which
/// slot `s` holds `valid[s]` bytes (the rest counts as zeros), in a buffer of `pool`.
pub(crate) fn xor_of_slots(pool: &BufferPool, offset: usize, valid: &[usize], c: usize) -> Vec<u8> {
    let me = pgas::rank_me();
    let mut acc = pool.zeroed(c);
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
