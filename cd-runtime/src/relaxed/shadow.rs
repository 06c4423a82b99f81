//! Shadow memory for privatized regions (docs/relaxed-cds.md, "Access classes"): a relaxed CD that
//! completed, and so made its privatized region usable by other CDs, re-executes into a
//! shadow copy when an enclosing relaxed CD replays it, so the readers of the region never
//! see the re-execution's intermediate values.
//!
//! The protocol, per privatized region R of a CD C on this rank:
//! - **Forward execution**: [`Cd::privatized`](crate::Cd::privatized) returns R's own pointer;
//!   at C's completion R's final bytes are logged once (`run::log_privatized`).
//! - **Re-execution of a C that had completed** (C runs inside the recovering CD, and the
//!   replayed log holds C's privatized entry for R ahead of the cursor): `privatized` allocates a block of the same size in this rank's
//!   segment (outside the program's hook: the allocation log does not see it), copies R's
//!   current bytes into it and returns the block's pointer; the body computes there. At C's
//!   completion the shadow's bytes are compared with the logged ones (a difference is a
//!   replay error: the body is not deterministic), R is left alone unless its bytes differ
//!   from the logged ones (then the logged bytes are written back: R was damaged), the
//!   logged entry is consumed, and the shadow is freed.
//! - **Re-execution of a C that had not completed** (C is the recovering CD, or the log ran
//!   out inside it): R is still private to C, so C re-executes in place (also when C's log
//!   holds a child's entry for the same region).
//!
//! Reading chosen where the spec is silent: the shadow starts as a copy of R's bytes when
//! `privatized` is called (a body that reads R before writing it reads the values R holds
//! then, as in the first execution when nothing else wrote R between); a shadow that cannot
//! be allocated is a replay error (the enclosing CD escalates) after an in-place
//! re-execution, never a wrong answer. A dependency-limited re-execution of the LCSA runs in
//! place: the ranks outside it are waiting at the LCSA's agreement and read nothing.

use bytemuck::Pod;
use pgas::GlobalPtr;
use pgas::runtime_hooks::internal;

use crate::frame::Frame;
use crate::relaxed::frame_state::Region;
use crate::relaxed::log_store::EntryKind;
use crate::relaxed::{ReplayEvent, interceptor};
use crate::runtime::CdRuntime;

pub(crate) use super::frame_state::Shadow;

/// The pointer the body of `frame` uses for privatized `region` (`ptr`, `len` elements):
/// `ptr`, or a shadow copy when an enclosing replay re-executes a completed CD.
pub(crate) fn open<T: Pod>(
    rt: &CdRuntime,
    frame: &Frame,
    region: &Region,
    ptr: GlobalPtr<T>,
    len: usize,
) -> GlobalPtr<T> {
    if !completed_before(rt, frame, region) {
        return ptr;
    }
    if let Some(s) = frame
        .rx
        .borrow()
        .shadows
        .iter()
        .find(|s| s.region == region.offset)
    {
        // Declared again in the same execution: the same shadow.
        return GlobalPtr::from_raw(rt.rank, s.block);
    }
    let block = match internal(|| pgas::new_array::<T>(len)) {
        Ok(b) => b,
        Err(e) => {
            interceptor::replay_error(
                rt,
                format!(
                    "no segment space for the shadow copy of privatized region `{}` ({} \
                     bytes): {e}; it was re-executed in place (enlarge the segment)",
                    region.name, region.len
                ),
            );
            return ptr;
        }
    };
    let mut bytes = vec![0u8; region.len];
    let copied = ptr
        .cast::<u8>()
        .read_local_slice(&mut bytes)
        .and_then(|()| block.cast::<u8>().write_local_slice(&bytes));
    if let Err(e) = copied {
        panic!(
            "rank {}: cannot copy privatized region `{}` into its shadow: {e}",
            rt.rank, region.name
        );
    }
    frame.rx.borrow_mut().shadows.push(Shadow {
        region: region.offset,
        block: block.offset(),
        len: region.len,
    });
    rt.relaxed.event(ReplayEvent::Shadowed {
        offset: region.offset,
    });
    block
}

/// Whether `frame` runs inside the CD a replay on this rank re-executes, and that replay holds,
/// ahead of its cursor, the privatized entry of `region` (its CD completed in the first
/// execution). The recovering CD itself never completed: its own regions are still private
/// (an entry for the same region would be a child's).
fn completed_before(rt: &CdRuntime, frame: &Frame, region: &Region) -> bool {
    let replay = rt.relaxed.replay.borrow();
    let Some(r) = replay
        .as_ref()
        .filter(|r| !r.forward && frame.level > r.level)
    else {
        return false;
    };
    r.remaining().iter().any(|e| {
        matches!(&e.kind, EntryKind::Privatized { offset, bytes, .. }
            if *offset == region.offset && bytes.0.len() == region.len)
    })
}

/// Where the bytes of privatized region `offset` of `frame` are: its shadow block, or itself.
pub(crate) fn bytes_at(frame: &Frame, offset: usize) -> usize {
    frame
        .rx
        .borrow()
        .shadows
        .iter()
        .find(|s| s.region == offset)
        .map_or(offset, |s| s.block)
}

/// At the completion of `frame` inside a replay: consumes the log's privatized entries of its
/// regions, comparing them with `finals` (region offset, recomputed bytes, in declaration
/// order), and repairs a shadowed region whose bytes differ from the logged ones.
pub(crate) fn complete(rt: &CdRuntime, frame: &Frame, finals: &[(Region, Vec<u8>)]) {
    for (region, recomputed) in finals {
        let taken = {
            let mut replay = rt.relaxed.replay.borrow_mut();
            let Some(r) = replay.as_mut().filter(|r| !r.forward) else {
                return;
            };
            r.take_privatized(region.offset)
        };
        let Some((lsn, bytes)) = taken else {
            interceptor::replay_error(
                rt,
                format!(
                    "the re-executed CD {:?} completed with privatized region `{}`, which the \
                     log does not hold at this point: the body is not deterministic",
                    frame.name, region.name
                ),
            );
            continue;
        };
        if bytes != *recomputed {
            interceptor::replay_error(
                rt,
                format!(
                    "privatized region `{}` of CD {:?} was recomputed with other bytes than \
                     its first execution logged (LSN {lsn}): the body is not deterministic",
                    region.name, frame.name
                ),
            );
        }
        let shadowed = bytes_at(frame, region.offset) != region.offset;
        if shadowed {
            let own = GlobalPtr::<u8>::from_raw(rt.rank, region.offset);
            let mut now = vec![0u8; region.len];
            let damaged = own.read_local_slice(&mut now).is_ok() && now != bytes;
            if damaged && let Err(e) = own.write_local_slice(&bytes) {
                interceptor::replay_error(
                    rt,
                    format!("cannot repair privatized region `{}`: {e}", region.name),
                );
            }
        }
        rt.relaxed.event(ReplayEvent::Served {
            lsn,
            what: "privatized",
        });
    }
}

/// Frees the shadow blocks of `frame` (its execution ended, completed or not).
pub(crate) fn close(rt: &CdRuntime, frame: &Frame) {
    let shadows = std::mem::take(&mut frame.rx.borrow_mut().shadows);
    for s in shadows {
        if let Err(e) = internal(|| pgas::delete_(GlobalPtr::<u8>::from_raw(rt.rank, s.block))) {
            panic!(
                "rank {}: cannot free the shadow block at {} ({} bytes): {e}",
                rt.rank, s.block, s.len
            );
        }
    }
}
