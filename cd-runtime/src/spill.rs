//! Demand preservation: when a rank's locally preserved bytes pass `memory_budget_bytes`, the
//! oldest copies move to the file medium (ftRMA's demand checkpoints under memory pressure).
//!
//! **Oldest first.** The CD stack is walked from the root: an outer CD's copies are older
//! than an inner CD's and are restored less often (only when an inner failure escalates that
//! far), so they are the cheapest to keep on disk. Within a CD, entries go in the order they
//! were preserved. A copy moves whole; the walk stops once the rank is under the budget.
//!
//! **What moves.** Byte copies on the local medium (`preserve_slice`, `preserve_global`, the
//! bulk of a program's state); typed values kept by `preserve` stay in memory (they are clones
//! of a type the runtime cannot encode after the fact), and the budget does not count them.
//! A buddy entry's local copy stays too: it is what
//! survives the buddy's loss (with `buddy_copies = 1` there is none: such entries take no
//! room in the rank's memory at all), and the xor medium's copies feed its parity. A moved copy is an
//! ordinary file entry from then on (`Store::File`, written off the critical path by
//! `file_medium.rs`, read back on restore, released with its CD), so recovery is unchanged
//! and bit-exact.
//!
//! **Cost.** A walk over the stack's entries on each local preservation, only when a budget
//! is set; the moves themselves are queued writes.

use std::cell::RefCell;
use std::rc::Rc;

use crate::file_medium::FileWriter;
use crate::frame::{Entry, Frame, Store};
use crate::report::Collector;

/// Moves the oldest local copies of the CDs on `frames` (this rank's stack, root first) to
/// `files` until their locally preserved bytes are within `budget` (nothing without one),
/// counting the bytes moved in `stats`.
pub(crate) fn enforce_budget(
    budget: Option<usize>,
    frames: &[Rc<Frame>],
    files: &FileWriter,
    stats: &RefCell<Collector>,
) {
    let Some(budget) = budget else {
        return;
    };
    let held: usize = frames
        .iter()
        .map(|f| local_bytes(&f.state.borrow().entries))
        .sum();
    let Some(mut excess) = held.checked_sub(budget).filter(|&e| e > 0) else {
        return;
    };
    for frame in frames {
        let mut moved = 0u64;
        {
            let mut st = frame.state.borrow_mut();
            for e in st.entries.iter_mut() {
                if excess == 0 {
                    break;
                }
                if let Store::LocalBytes(bytes) = &mut e.store {
                    let bytes = std::mem::take(bytes);
                    let len = bytes.len();
                    let what = format!("CD {:?}: entry `{}` (spilled)", frame.name, e.name);
                    e.store = Store::File(files.write(frame.level, bytes, what));
                    excess = excess.saturating_sub(len);
                    moved += len as u64;
                }
            }
        }
        if moved > 0 {
            let mut stats = stats.borrow_mut();
            let s = stats.entry(&frame.name, frame.level);
            s.bytes_spilled += moved;
        }
        if excess == 0 {
            break;
        }
    }
}

/// Bytes of local copies among `entries`.
fn local_bytes(entries: &[Entry]) -> usize {
    entries
        .iter()
        .map(|e| match &e.store {
            Store::LocalBytes(b) => b.len(),
            _ => 0,
        })
        .sum()
}
