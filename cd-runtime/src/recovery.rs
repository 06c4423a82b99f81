//! Loss handling: what a rank loss takes from this rank (its segment, its local copies, the
//! copies and log replicas it held for others, its relaxed logs) and how redundancy comes back
//! before a re-execution; the injected faults' effect; and why a CD's entries cannot be
//! restored, for the line of an escalation.
//!
//! Above the runtime, the media and the relaxed log replicas (`relaxed/replica.rs`), whose
//! pieces a loss touches; below the policies (`strict.rs`, `relaxed/run.rs`) that call it.

use std::cell::RefCell;
use std::rc::Rc;

use crate::error::FaultKinds;
use crate::frame::{CdKind, Frame, Store, find_in_ancestors};
use crate::injector::Injected;
use crate::relaxed::{durable, fence, replica};
use crate::runtime::CdRuntime;
use crate::xor_entries;

/// Stores again at the buddy the copies the buddy lost (it lost its memory), from this
/// rank's own copies: called before a re-execution, so redundancy is back before the next
/// failure (without it, a second loss, of this rank, in the same CD would escalate).
/// The xor medium's entries that one member of their group lost are rebuilt here too.
pub(crate) fn rereplicate(rt: &CdRuntime) {
    let frames: Vec<Rc<Frame>> = rt.frames.borrow().clone();
    xor_entries::rebuild(&rt.xor_context(), &frames);
    for f in rt.frames.borrow().iter() {
        for e in f.state.borrow().entries.iter() {
            if let Store::Buddy {
                key,
                held,
                local: Some(bytes),
                ..
            } = &e.store
            {
                if rt.buddy.is_lost(*key, *held) {
                    rt.rpcs.store_again(&rt.buddy, *key, *held, bytes);
                }
            }
        }
    }
}

/// Emulates the loss of this rank's memory: its segment, the locally preserved state of
/// every CD it is in, the relaxed logs of every CD (entries, own IWCs, dependency notes),
/// and the copies and log replicas it held for its buddies; then fetches back the log
/// replicas this rank's buddy holds (`relaxed/replica.rs`), as a restarted rank would.
pub(crate) fn lose_memory(rt: &CdRuntime) {
    lose(rt, false);
}

/// [`lose_memory`] in the middle of the body of the innermost CD, a relaxed CD
/// (`relaxed/op_fault.rs`): a log durable at every operation is cut back to what its
/// replicas hold (`replica::wipe`); any other log that lost entries escalates. Everything but
/// the segment: the caller fills it ([`poison_segment`]) now, when the CD recovers alone, or
/// when the body ends, when it escalates (the body goes on to take part in the group's
/// synchronizations, and a program's spin on its own words, a lock's, must still end).
pub(crate) fn lose_memory_mid_body(rt: &CdRuntime) {
    lose(rt, true);
}

/// The lost memory's segment: filled with the poison byte, its fence word set again (raised
/// while the rank replays after a loss in the middle of its body).
pub(crate) fn poison_segment(rt: &CdRuntime, raised: bool) {
    pgas::runtime_hooks::emulate_memory_loss();
    fence::after_loss(rt, raised);
}

fn lose(rt: &CdRuntime, mid_body: bool) {
    crate::timeline::loss(mid_body);
    // Until the replicas are back, other ranks' gathers are told to ask again (telling
    // the owners below waits for rpcs, so this rank serves requests meanwhile).
    rt.relaxed.restoring.set(true);
    // Mid-body, the others are still running and may read what the lost memory held: they
    // are fenced off first.
    if mid_body {
        fence::announce_loss(rt);
    }
    let top = rt.top();
    let truncate = mid_body && durable::durable(&top);
    if !mid_body {
        poison_segment(rt, false);
    }
    let frames: Vec<Rc<Frame>> = rt.frames.borrow().clone();
    for f in &frames {
        f.lose_local();
        let redone = truncate && Rc::ptr_eq(f, &top);
        replica::wipe(f, redone, truncate && f.kind == CdKind::Strict);
    }
    rt.pool.clear();
    for (owner, lost) in rt.buddy.wipe() {
        rt.rpcs.notify_lost(&rt.buddy, owner, lost);
    }
    rt.xor_rpcs.notify_loss(&rt.xor, rt.rank);
    rt.count_loss();
    replica::restore_logs(rt);
}

/// Makes the fault chosen for an execution of `frame` happen at the end of its body (a rank
/// loss wipes the rank's memory now) and records it as the execution's failure; the kinds
/// to add to the execution's failure set.
pub(crate) fn take_effect(rt: &CdRuntime, frame: &Frame, injected: Option<Injected>) -> FaultKinds {
    match injected {
        Some(Injected::SoftError) => {
            crate::timeline::fault(&frame.name, frame.iteration, "soft");
            frame.fail(
                FaultKinds::SOFT,
                format!("injected soft error on rank {}", rt.rank),
            );
            FaultKinds::SOFT
        }
        Some(Injected::RankLoss) => {
            crate::timeline::fault(&frame.name, frame.iteration, "rank_loss");
            lose_memory(rt);
            frame.fail(
                FaultKinds::RANK_LOSS,
                format!("injected loss of rank {}", rt.rank),
            );
            FaultKinds::RANK_LOSS
        }
        None => FaultKinds::NONE,
    }
}

/// Why entries that the innermost CD on this rank would restore from files (its own on the
/// file medium or moved there by the memory budget, or the ancestors' its references name)
/// cannot be restored: a file fails its checksum or cannot be read. `None` if every one reads
/// back intact. Reads them all back, so it is asked only before a re-execution: an entry
/// changed on disk then escalates, like one lost with a rank, instead of being restored.
pub(crate) fn unreadable_files(rt: &CdRuntime) -> Option<String> {
    let frames = rt.frames.borrow();
    let index = frames.len() - 1;
    let why = RefCell::new(Vec::new());
    let check = |name: &str, store: &Store| {
        if let Store::File(slot) = store {
            if let Err(e) = rt.files.read(slot) {
                why.borrow_mut().push(format!(
                    "the preserved copy of `{name}` on rank {} cannot be restored: {e}",
                    rt.rank
                ));
                return false;
            }
        }
        true
    };
    for e in frames[index].state.borrow().entries.iter() {
        match &e.store {
            Store::Reference => {
                find_in_ancestors(&frames, index, &e.name, &|s| check(&e.name, s));
            }
            s => {
                check(&e.name, s);
            }
        }
    }
    let why = why.into_inner();
    (!why.is_empty()).then(|| why.join("; "))
}

/// Why entries of `frame` on the buddy medium can no longer be restored on this rank (no
/// local copy, and the buddy lost its copy with its memory), for the line of an escalation;
/// `None` if none.
pub(crate) fn buddy_loss_reason(rt: &CdRuntime, frame: &Frame) -> Option<String> {
    let st = frame.state.borrow();
    let names: Vec<&str> = st
        .entries
        .iter()
        .filter(|e| {
            matches!(&e.store, Store::Buddy { key, held, local: None, .. }
                if rt.buddy.is_lost(*key, *held))
        })
        .map(|e| e.name.as_str())
        .collect();
    if names.is_empty() {
        return None;
    }
    let why = if rt.config.buddy_copies == 1 {
        "the only copy (buddy_copies = 1)"
    } else {
        "the copy this rank needed, having lost its own"
    };
    Some(format!(
        "buddy rank {} lost its memory and with it {why} of {} on rank {}",
        rt.buddy.buddy_rank(),
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", "),
        rt.rank
    ))
}
