//! The xor medium's entries: a CD's preserved copies laid out over this rank's checksum group
//! (one round of the group per entry, or per batch), why an entry cannot be restored, and the
//! rebuild of the entries one member lost. The medium itself (groups, losses, staging, parity
//! arithmetic) is `xor.rs`; the layout is told there.

use pgas::GlobalPtr;
use pgas::runtime_hooks::internal;

use std::rc::Rc;

use crate::buffer_pool::BufferPool;
use crate::config::CdConfig;
use crate::frame::{CdKind, Frame, Store};
use crate::xor::{XorGroup, XorStore, chunk_len, chunk_of, xor_of_slots};

/// What the xor medium's entries work with: this rank's store and number, the buffer pool
/// its parities come from, and the configuration (for messages).
pub(crate) struct XorContext<'a> {
    pub(crate) xor: &'a XorStore,
    pub(crate) pool: &'a BufferPool,
    pub(crate) config: &'a CdConfig,
    pub(crate) rank: usize,
}

/// The group of size `k` of this rank, checked usable by `frame`.
fn group_for<'a>(rt: &XorContext<'a>, frame: &Frame) -> (usize, &'a XorGroup) {
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
pub(crate) fn preserve(rt: &XorContext, frame: &Frame, bytes: Vec<u8>) -> (Store, usize) {
    preserve_many(rt, frame, vec![bytes])
        .pop()
        .expect("one entry in, one out")
}

/// Preserves several entries of `frame` in one round of the group (`Cd::preserve_batch`):
/// one agreement on every entry's size, every chunk of every entry put into the staging
/// blocks (entry after entry, each laid out as `preserve` lays out one), one barrier, then
/// each entry's parity. Every member passes the same number of entries, in the same order.
pub(crate) fn preserve_many(
    rt: &XorContext,
    frame: &Frame,
    batch: Vec<Vec<u8>>,
) -> Vec<(Store, usize)> {
    let (k, group) = group_for(rt, frame);
    // Counted before the first collective: a member that finishes this preservation, runs on
    // and loses its memory can tell this rank while it still waits in the barrier below; that
    // loss took the member's copy of these entries, so it must count as after them. (Taken
    // at the end, it would not: the lost member's copy would never be rebuilt, and the group
    // would hang, the survivors in the rebuild and this rank past it.)
    let seen = rt.xor.heard(k);
    let team = &group.team;
    let g = team.rank_n();
    let me = team.rank_me();
    let (off, cap) = rt.xor.staging.get().unwrap_or((0, 0));
    let lens: Vec<usize> = batch.iter().map(Vec::len).collect();
    let infos: Vec<(Vec<usize>, usize, usize)> =
        internal(|| pgas::allgather_on(team, (lens, off, cap)).wait());
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
        internal(|| pgas::allgather_on(team, mine).wait())
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
                xor_of_slots(rt.pool, offsets[me] + base[e], &valid, ce)
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
pub(crate) fn loss_reason(rt: &XorContext, frame: &Frame) -> Option<String> {
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
pub(crate) fn rebuild(rt: &XorContext, frames: &[Rc<Frame>]) {
    if rt.xor.groups.is_empty() {
        return;
    }
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
        let all: Vec<Vec<bool>> = internal(|| pgas::allgather_on(&group.team, mine).wait());
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
fn rebuild_entry(rt: &XorContext, frame: &Frame, i: usize, k: usize) {
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
    let infos: Vec<(bool, usize)> = internal(|| pgas::allgather_on(team, (lost_here, off)).wait());
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
                let acc = xor_of_slots(rt.pool, x_off, &vec![c; g - 1], c);
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
