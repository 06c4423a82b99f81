//! Point-to-point synchronization through a flag word: a rank waits until a word of its own
//! segment holds ([`wait_until`]), and another rank puts data and then updates that word
//! ([`put_signal`], OpenSHMEM's `put_signal`).
//!
//! Both are synchronizations of the program, so both step the epoch counter (EC): the
//! signaling rank *before* its data leaves (the writes into it that the signal lets others
//! make land in a later epoch than its accesses before the signal), the waiting rank *after*
//! its flag held (the writes that land after the wait are in a later epoch than those the
//! wait observed). A relaxed CD replaying the waiting rank applies its incoming writes epoch
//! by epoch, so it sees them in the order of the first run.

use bytemuck::Pod;
use gasnet_bridge::AtomicOp;

use crate::atomic_domain::AtomicDomain;
use crate::error::PgasError;
use crate::global_ptr::GlobalPtr;
use crate::hook::SyncEvent;
use crate::rma::rput_slice;
use crate::runtime::{self, poll_until};

/// How [`put_signal`] updates the flag, after the data landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Stores the value (OpenSHMEM `SHMEM_SIGNAL_SET`).
    Set(u64),
    /// Adds the value (OpenSHMEM `SHMEM_SIGNAL_ADD`): many senders to one counter.
    Add(u64),
}

/// Waits until `pred` holds for the word `flag` of this rank's segment, which other ranks set
/// by put, atomic or [`put_signal`]; returns the value that satisfied it. Runs progress
/// meanwhile (rpcs to this rank are served). Then steps the EC ([`SyncEvent::FlagWait`]).
///
/// # Errors
/// [`PgasError::WaitNotOwn`] if `flag` is another rank's.
pub fn wait_until(
    flag: GlobalPtr<u64>,
    mut pred: impl FnMut(u64) -> bool,
) -> Result<u64, PgasError> {
    flag.check_access("wait_until");
    let me = runtime::rank_me();
    if flag.rank() != me {
        return Err(PgasError::WaitNotOwn {
            rank: flag.rank(),
            me,
        });
    }
    let offset = flag.offset();
    // The core's atomic load on this rank's own word: a local access, which no hook sees and
    // which races with no concurrent put or atomic into the word.
    let read = || {
        runtime::with(|rt| rt.ep().atomic(me, offset, AtomicOp::Load))
            .map(|r| r.previous)
            .map_err(PgasError::from)
    };
    let mut seen = read()?;
    if !pred(seen) {
        let mut failed = None;
        poll_until(|| match read() {
            Ok(v) => {
                seen = v;
                pred(v)
            }
            Err(e) => {
                failed = Some(e);
                true
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
    }
    runtime::with(|rt| rt.sync(SyncEvent::FlagWait));
    Ok(seen)
}

/// Puts `src` at `dst`, then, once the bytes landed, updates `flag` (on the same rank as
/// `dst`) as `signal` says: the receiver's [`wait_until`] on `flag` then sees the data.
/// Before anything leaves, this rank's operations in flight complete and its EC steps
/// ([`SyncEvent::Signal`]). Returns when the flag was updated.
///
/// # Errors
/// [`PgasError::SignalRanks`] if `dst` and `flag` are on different ranks.
pub fn put_signal<T: Pod>(
    src: &[T],
    dst: GlobalPtr<T>,
    flag: GlobalPtr<u64>,
    signal: Signal,
) -> Result<(), PgasError> {
    if dst.rank() != flag.rank() {
        return Err(PgasError::SignalRanks {
            data_rank: dst.rank(),
            flag_rank: flag.rank(),
        });
    }
    runtime::with(|rt| rt.sync(SyncEvent::Signal));
    if !src.is_empty() {
        rput_slice(src, dst).wait();
    }
    let ad = AtomicDomain::<u64>::new();
    match signal {
        Signal::Set(v) => ad.store(flag, v).wait(),
        Signal::Add(v) => ad.add(flag, v).wait(),
    }
    Ok(())
}
