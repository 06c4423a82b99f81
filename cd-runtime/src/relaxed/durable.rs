//! Logs durable at every operation (`log_medium = "buddy"`, `log_durable = "operation"`):
//! the log reaches the buddy before anything the operations it records did can be seen by
//! another rank, so a rank lost at any operation of a relaxed body replays from what the
//! buddy holds and recovers alone (the rule and why it suffices: `relaxed/README.md`,
//! "Logs durable at every operation").
//!
//! Two flush points, each one `replica::replicate` (one rpc to the buddy, only when there is
//! something new):
//! - a synchronization by which this rank lets others see its accesses (a barrier or other
//!   collective, a fence, a release atomic, a signaling put, a lock release), before it
//!   leaves: under the relaxed premise nothing the rank put or read since the last flush
//!   can have been seen or changed by another rank before it, so losing those entries is
//!   harmless (the replay performs them again, with the same bytes, from the same inputs);
//! - a writing atomic, an rpc to another rank or a collective (barriers included), before it
//!   leaves: its effect is seen at once (and a collective is matched by the other members),
//!   so performing it again would apply it twice; its entry goes to the buddy as *pending*,
//!   and a loss before its result was replicated escalates instead of repeating it. The
//!   result follows before the rank's next operation starts.
//!
//! A third, for the rank's own accesses: a put over remote bytes the rank read since the
//! last flush flushes first (`UnflushedReads`), or the get performed again after a loss would
//! read what the put wrote. Other puts and gets in between pay nothing.

use pgas::runtime_hooks::{Rma, SyncEvent};

use crate::config::{LogDurable, LogMedium};
use crate::error::FaultKinds;
use crate::frame::{CdKind, Frame};
use crate::relaxed::logging::logging_frame;
use crate::relaxed::replica;
use crate::runtime::CdRuntime;

/// True if `frame` (a relaxed CD) keeps its log durable at every operation.
pub(crate) fn durable(frame: &Frame) -> bool {
    frame.kind == CdKind::Relaxed
        && frame.settings.logging
        && frame.settings.log_medium == LogMedium::Buddy
        && frame.settings.log_durable == LogDurable::Operation
        && frame.settings.contain.contains(FaultKinds::RANK_LOSS)
}

/// True if a synchronization of this kind lets other ranks see this rank's accesses before it
/// (collectives, barriers included, flush in [`before_effect`], where they start).
fn publishes(sync: SyncEvent) -> bool {
    match sync {
        SyncEvent::Fence
        | SyncEvent::AtomicRelease
        | SyncEvent::Signal
        | SyncEvent::LockRelease => true,
        SyncEvent::BarrierEnter
        | SyncEvent::Collective
        | SyncEvent::BarrierExit
        | SyncEvent::AtomicAcquire
        | SyncEvent::FlagWait
        | SyncEvent::LockAcquire => false,
    }
}

/// The innermost logging relaxed CD, if it keeps its log durable at every operation (one
/// counter read when none does).
fn durable_frame(rt: &CdRuntime) -> Option<std::rc::Rc<Frame>> {
    if rt.relaxed.durable.get() == 0 || pgas::runtime_hooks::serving_request().is_some() {
        return None;
    }
    logging_frame(rt).filter(|f| durable(f))
}

/// This rank steps its EC for `sync`: before a publishing one leaves, the log goes to the
/// buddy.
pub(crate) fn on_sync(rt: &CdRuntime, sync: SyncEvent) {
    if !publishes(sync) {
        return;
    }
    if let Some(frame) = durable_frame(rt) {
        replica::replicate(rt, &frame, None);
    }
}

/// A writing atomic, an rpc or a collective, logged with `lsn`, is about to leave in forward
/// mode: the log goes to the buddy with that entry marked pending.
pub(crate) fn before_effect(rt: &CdRuntime, lsn: Option<u64>) {
    let Some(lsn) = lsn else {
        return;
    };
    if let Some(frame) = durable_frame(rt) {
        replica::replicate(rt, &frame, Some(lsn));
    }
}

/// The result of a writing atomic, an rpc or a collective arrived, or this rank wrote into its
/// own memory (an own IWC): it goes to the buddy before this rank's next operation starts
/// ([`before_op`]). Not at once: the result may
/// arrive in a callback of the progress engine, where a blocking rpc may not run.
pub(crate) fn effect_done(rt: &CdRuntime) {
    if rt.relaxed.durable.get() > 0 {
        rt.relaxed.flush_due.set(true);
    }
}

/// A point-to-point operation is about to start in forward mode: the results that arrived
/// since the last flush go to the buddy first.
pub(crate) fn before_op(rt: &CdRuntime) {
    if !rt.relaxed.flush_due.get() {
        return;
    }
    if let Some(frame) = durable_frame(rt) {
        rt.relaxed.flush_due.set(false);
        replica::replicate(rt, &frame, None);
    }
}

/// A get is about to be performed in forward mode: its bytes are noted until the next flush.
pub(crate) fn before_get(rt: &CdRuntime, rma: &Rma) {
    if rt.relaxed.durable.get() > 0 {
        rt.relaxed
            .unflushed_reads
            .note(rma.rank, rma.offset, rma.len);
    }
}

/// A put is about to be performed in forward mode: over bytes read since the last flush, the
/// log goes to the buddy first.
pub(crate) fn before_put(rt: &CdRuntime, rma: &Rma) {
    if rt.relaxed.durable.get() == 0
        || !rt
            .relaxed
            .unflushed_reads
            .overlaps(rma.rank, rma.offset, rma.len)
    {
        return;
    }
    if let Some(frame) = durable_frame(rt) {
        replica::replicate(rt, &frame, None);
    }
}
