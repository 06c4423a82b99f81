//! Barrier phases of a tracking strict CD's execution, and the check that a
//! dependency-limited re-execution can order the writes from outside D against the accesses
//! among the ranks of D.
//!
//! A rank Y of D applies the writes from outside D at its own epochs (`limited.rs`), as a
//! replay does. That orders them against Y's own accesses, not against another rank of D
//! reading or writing Y's memory live: Y's epochs do not step when a rank X takes a lock on
//! Y, or reads Y after a signal from outside. In the first execution such an access may have
//! come between two writes from outside into the same bytes (a lock handed from a rank
//! outside D to X and back), and the re-execution would put it elsewhere: a wrong answer.
//!
//! Barriers do order them: a barrier among D ends every access of D before it, and Y has
//! applied the writes that landed before it once it arrives. So each rank numbers the
//! barriers it leaves in the execution (phase `k` lies between barrier `k - 1` and barrier
//! `k`), keeps its EC after each one, and notes per (rank, phase) the range of bytes it
//! accessed in other ranks' segments (`Dependencies::extents`). A write that landed at Y with
//! EC `e` is of the phase the barriers before `e` end (one landing inside barrier `k`, which
//! Y applies when it enters it, is of phase `k`). Before a limited re-execution, Y refuses it
//! (the whole group re-executes) if a write from outside D into Y and an access by another
//! rank of D to the same bytes of Y fall in one phase: their order is not known. A bounded
//! number of ranges is kept per (rank, phase), the closest merged past `frame_state::EXTENTS`, so the check
//! may refuse where the bytes were in fact disjoint, never the other way.

use std::ops::Range;

use crate::relaxed::dependencies::{Record, tracking_frame};
use crate::relaxed::replay::range_of;
use crate::relaxed::replica;
use crate::relaxed::state::incoming::Incoming;
use crate::runtime::CdRuntime;

/// An access by another rank of D to this rank's segment in the first execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Access {
    /// The rank that made it.
    pub(crate) from: usize,
    /// Its phase there.
    pub(crate) phase: u32,
    /// A byte range holding some of its accesses of that phase.
    pub(crate) bytes: (usize, usize),
}

/// The accesses to `me` by the other ranks of `d`, from every rank's notes.
pub(crate) fn accesses_into(me: usize, records: &[Record], d: &[usize]) -> Vec<Access> {
    records
        .iter()
        .filter(|r| r.rank != me && d.binary_search(&r.rank).is_ok())
        .flat_map(|r| {
            (r.extents.iter())
                .filter(|((target, _), _)| *target == me)
                .flat_map(move |(&(_, phase), ranges)| {
                    ranges.iter().map(move |&bytes| Access {
                        from: r.rank,
                        phase,
                        bytes,
                    })
                })
        })
        .collect()
}

/// This rank left a barrier with EC `ec`: a tracking strict CD starts a new phase.
pub(crate) fn barrier_left(rt: &CdRuntime, ec: u64) {
    let Some(f) = tracking_frame(rt) else {
        return;
    };
    f.rx.borrow_mut().deps.barrier_ecs.push(ec);
    if replica::ships_notes(&f) {
        replica::ship_notes(rt, &f);
    }
}

/// Notes, for a tracking strict CD, an access to `bytes` of `rank`'s segment that the log
/// does not describe when it starts (a get's bytes arrive later, a cluster access is not
/// logged); grown notes go to the buddy when a loss could use them.
pub(crate) fn note_extent(rt: &CdRuntime, rank: usize, bytes: Range<usize>) {
    let Some(f) = tracking_frame(rt) else {
        return;
    };
    let grew = f.rx.borrow_mut().deps.note_extent(rank, bytes);
    if grew && replica::ships_notes(&f) {
        replica::ship_notes(rt, &f);
    }
}

/// The phase of a write that landed at EC `ec` on a rank that left its barriers with
/// `barrier_ecs`.
fn phase_of(barrier_ecs: &[u64], ec: u64) -> u32 {
    barrier_ecs.partition_point(|&b| b <= ec) as u32
}

/// Refuses a limited re-execution on this rank if one of the writes from outside D that it
/// will apply (`outside`) and an access by another rank of D (`accesses`) touch the same
/// bytes in one phase.
pub(crate) fn check(
    barrier_ecs: &[u64],
    accesses: &[Access],
    outside: &[&Incoming],
) -> Result<(), String> {
    for w in outside {
        let Some(r) = range_of(w) else { continue };
        let phase = phase_of(barrier_ecs, w.ec);
        let hit = accesses
            .iter()
            .find(|a| a.phase == phase && a.bytes.0 < r.end && r.start < a.bytes.1);
        if let Some(a) = hit {
            return Err(format!(
                "rank {} (outside the re-executing ranks) wrote bytes {}..{} here (IWC {}) \
                 and rank {} (re-executing) accessed them between the same two barriers \
                 (phase {phase}): their order cannot be made again",
                w.from, r.start, r.end, w.iwc, a.from
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buddy::Bytes;
    use crate::relaxed::state::incoming::IncomingWhat;

    fn put(from: usize, ec: u64, offset: usize, len: usize) -> Incoming {
        Incoming {
            from,
            ec,
            iwc: 1,
            what: IncomingWhat::Put {
                offset,
                bytes: Bytes(vec![0; len]),
            },
        }
    }

    #[test]
    fn a_write_is_of_the_phase_its_epoch_lies_in() {
        // Barriers left at EC 4 and 9 (entered at 3 and 8).
        let b = [4, 9];
        assert_eq!(phase_of(&b, 0), 0);
        assert_eq!(
            phase_of(&b, 3),
            0,
            "inside barrier 0: applied when it is entered"
        );
        assert_eq!(phase_of(&b, 4), 1);
        assert_eq!(phase_of(&b, 8), 1);
        assert_eq!(phase_of(&b, 9), 2);
    }

    #[test]
    fn only_overlapping_bytes_of_one_phase_refuse() {
        let b = [4];
        let acc = [Access {
            from: 2,
            phase: 1,
            bytes: (64, 72),
        }];
        let same_phase_disjoint = put(0, 5, 72, 8);
        let other_phase = put(0, 2, 64, 8);
        let overlap = put(0, 6, 60, 8);
        assert!(check(&b, &acc, &[&same_phase_disjoint, &other_phase]).is_ok());
        let e = check(&b, &acc, &[&overlap]).unwrap_err();
        assert!(
            e.contains("rank 0") && e.contains("rank 2") && e.contains("phase 1"),
            "{e}"
        );
    }
}
