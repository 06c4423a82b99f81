//! Recovery of one relaxed CD C on rank F: restore, rewind the EC, gather the incoming
//! writes from the initiators' logs, then re-execute C's body with the log serving it until
//! the log runs out (`relaxed/README.md`, "Recovery of C on F, in order"). The body's
//! operations meanwhile are served by the replay mode (`modes/replay.rs`), which takes its
//! entries from here.

use pgas::GlobalPtr;
use pgas::runtime_hooks::{self as resilience, internal};

use crate::cd::Cd;
use crate::frame::Frame;
use crate::relaxed::epochs;
use crate::relaxed::fence;
use crate::relaxed::gather;
use crate::relaxed::incoming_rpc;
use crate::relaxed::log_store::{EntryKind, LogEntry};
use crate::relaxed::state::incoming::{Incoming, IncomingQueue, IncomingWhat};
use crate::relaxed::state::replay::Replay;
use crate::relaxed::{RecoveryTrace, ReplayEvent};
use crate::runtime::CdRuntime;

/// Records an error of the running replay: the recovering CD escalates when its body ends.
pub(crate) fn replay_error(rt: &CdRuntime, what: String) {
    rt.relaxed.replay_errors.borrow_mut().push(what);
}

/// While the recovering CD's log serves its body: the next logged entry. `None` outside a
/// replay, and when the log ran out: the replay then switches to forward mode, for this
/// operation on.
pub(crate) fn next_entry(rt: &CdRuntime) -> Option<LogEntry> {
    let mut replay = rt.relaxed.replay.borrow_mut();
    let r = replay.as_mut().filter(|r| !r.forward)?;
    if let Some(e) = r.next() {
        return Some(e);
    }
    let landed = r.switch_to_forward();
    drop(replay);
    fence::lower(rt);
    if let Err(e) = landed {
        replay_error(rt, e);
    }
    rt.relaxed.event(ReplayEvent::Forward {
        ec: resilience::epoch(),
    });
    None
}

/// Applies the gathered incoming writes of epochs up to `ec` (all when `None`).
pub(crate) fn apply_incoming(rt: &CdRuntime, ec: Option<u64>) {
    let due = {
        let mut q = rt.relaxed.incoming.borrow_mut();
        if q.is_empty() {
            return;
        }
        match ec {
            Some(ec) => q.take_through(ec),
            None => q.take_all(),
        }
    };
    for w in &due {
        if let Err(e) = epochs::apply(rt, w) {
            replay_error(rt, e);
        }
        rt.relaxed.event(match &w.what {
            IncomingWhat::Rpc { name, .. } => ReplayEvent::IncomingRpc {
                from: w.from,
                ec: w.ec,
                iwc: w.iwc,
                name: name.clone(),
            },
            _ => ReplayEvent::Incoming {
                from: w.from,
                ec: w.ec,
                iwc: w.iwc,
            },
        });
    }
}

/// After this rank lost its memory: writes the logged puts that landed in its segment
/// before the CD began (IWC up to `iwc_begin`, as far as the logs of the LCSA's other members
/// still hold them) back into it, in IWC order, before the recovery restores the preserved
/// regions (which override them) and replays the CD's own window.
///
/// Without them, a neighbour that began its CD first and put into this rank before this
/// rank's begin (nothing orders the two) leaves bytes the loss took and no replay brings
/// back: a re-execution waiting for them would wait forever (a flag set by `put_signal` is
/// an atomic store, rebuilt like a put). Writes no log holds (made outside logging relaxed
/// CDs, before the LCSA), combining atomics and rpcs are not rebuilt: the region they wrote
/// must be preserved (`preserve_global`) to survive a loss.
///
/// The puts were made in the LCSA's instance; any that landed before this rank switched
/// counting on carry no IWC (`CdRuntime::count_incoming_writes`), so their order is unknown:
/// if the logs hold one, the rebuild is refused (an error: the CD escalates).
///
/// `remade(r)`: rank r re-executes from the CD's begin and makes its writes again (the ranks
/// of a dependency-limited re-execution, `limited.rs`): its writes are left to it, unlogged
/// ones (from this rank's SPBC cluster) included.
pub(crate) fn rebuild_before_begin(
    rt: &CdRuntime,
    frame: &Frame,
    remade: impl Fn(usize) -> bool,
) -> Result<(), String> {
    let iwc_begin = frame.rx.borrow().iwc_begin;
    let (mut got, uncounted) = logged_before_begin(rt, iwc_begin)?;
    got.retain(|w| !remade(w.from));
    if uncounted > 0 {
        return Err(format!(
            "rank {} lost its memory in CD {:?}; {uncounted} write(s) into it that other \
             ranks logged before the CD began landed before it counted incoming writes (it \
             switches counting on at its first relaxed or dependency-tracking CD), so they \
             cannot be put back in order",
            rt.rank, frame.name
        ));
    }
    if let Some(w) = got
        .iter()
        .find(|w| matches!(w.what, IncomingWhat::Unlogged { .. }))
    {
        return Err(epochs::unlogged(w));
    }
    // Puts and replacing atomics: a combining one cannot be applied on top of what it left.
    for w in got
        .iter()
        .filter(|w| range_of(w).is_some() && w.what.combining().is_none())
    {
        // Inside the segment: the initiator's write landed there.
        let _ = epochs::apply(rt, w);
    }
    Ok(())
}

/// The writes into this rank with IWC up to `iwc_begin` that the LCSA's other members
/// logged, in IWC order, and how many of theirs landed before this rank counted writes.
fn logged_before_begin(rt: &CdRuntime, iwc_begin: u64) -> Result<(Vec<Incoming>, u64), String> {
    let mut uncounted = 0;
    let mut got: Vec<Incoming> = Vec::new();
    let mut ask = gather::other_members(&rt.lcsa(), rt.rank);
    for _ in 0..gather::GATHER_ROUNDS {
        if ask.is_empty() {
            break;
        }
        let futures: Vec<_> = internal(|| {
            ask.iter()
                .map(|&r| {
                    (
                        r,
                        pgas::rpc(r, rt.relaxed.rpcs.gather, (rt.rank, 0u64, iwc_begin)),
                    )
                })
                .collect()
        });
        let mut again = Vec::new();
        for (r, fut) in futures {
            let (writes, pending, not_counted) = internal(|| fut.wait());
            got.retain(|w| w.from != r);
            got.extend(writes);
            uncounted += not_counted;
            if pending > 0 {
                again.push(r);
            }
        }
        ask = again;
        pgas::progress();
    }
    if !ask.is_empty() {
        return Err(format!(
            "ranks {ask:?} still wait for the acks of writes into rank {} made before its CD \
             began",
            rt.rank
        ));
    }
    got.sort_by_key(|w| w.iwc);
    got.dedup_by_key(|w| w.iwc);
    Ok((got, uncounted))
}

/// The byte ranges that `writes` cover in this rank's segment.
pub(crate) fn written_ranges(writes: &[Incoming]) -> Vec<std::ops::Range<usize>> {
    writes.iter().filter_map(range_of).collect()
}

/// The byte range a gathered write covers in this rank's segment (`None`: an rpc request or
/// an unlogged write, whose bytes no log holds).
pub(crate) fn range_of(w: &Incoming) -> Option<std::ops::Range<usize>> {
    match &w.what {
        IncomingWhat::Put { offset, bytes } => Some(*offset..*offset + bytes.0.len()),
        IncomingWhat::Atomic { offset, .. } => Some(*offset..*offset + 8),
        IncomingWhat::Rpc { .. } | IncomingWhat::Unlogged { .. } => None,
    }
}

/// After a soft error: gives back the bytes that the CD's window overwrote where they came
/// from a write logged before the CD began. The body may have read such bytes (a neighbour ran
/// ahead and its message landed before this rank's begin) and a later write in the window
/// replaced them (the neighbour's next message into the same slot); the replay, which
/// applies the window's writes epoch by epoch from the begin's memory, must read them again.
/// For each range the window's writes cover outside the regions the CD restored, the logged
/// puts and replacing atomics before the begin that overlap it are applied, in IWC order.
/// Assumes the rank does not write locally into memory that other ranks put into (the seed's
/// proper synchronization); a range no logged write reached before the begin is left as it
/// is.
///
/// A dependency-limited re-execution of the strict CD around (`limited.rs`) meets the same
/// hazard on each re-executing rank, with the strict CD's window and restored regions.
pub(crate) fn rebuild_overwritten(
    rt: &CdRuntime,
    iwc_begin: u64,
    window: Vec<std::ops::Range<usize>>,
    restored: &[std::ops::Range<usize>],
) -> Result<(), String> {
    let overlaps =
        |a: &std::ops::Range<usize>, b: &std::ops::Range<usize>| a.start < b.end && b.start < a.end;
    let covered: Vec<std::ops::Range<usize>> = window
        .into_iter()
        .filter(|r| {
            !restored
                .iter()
                .any(|g| g.start <= r.start && r.end <= g.end)
        })
        .collect();
    if covered.is_empty() {
        return Ok(());
    }
    let (before, _) = logged_before_begin(rt, iwc_begin)?;
    if let Some(w) = before
        .iter()
        .find(|w| matches!(w.what, IncomingWhat::Unlogged { .. }))
    {
        return Err(epochs::unlogged(w));
    }
    // Puts and replacing atomics (a store or swap) replace the bytes they cover, so applying
    // every one that overlaps an overwritten range, in IWC order, leaves the begin's bytes.
    // A combining atomic cannot be applied on top of a value that may already hold it.
    for w in before
        .iter()
        .filter(|w| range_of(w).is_some_and(|r| covered.iter().any(|c| overlaps(&r, c))))
    {
        if let Some((offset, op)) = w.what.combining() {
            return Err(format!(
                "a combining write ({op:?} from rank {} at offset {offset}, IWC {}) landed \
                 before the CD began where a write of its window landed after; its value at \
                 the begin cannot be rebuilt",
                w.from, w.iwc
            ));
        }
        epochs::apply(rt, w)?;
        rt.relaxed.event(ReplayEvent::Rebuilt {
            from: w.from,
            iwc: w.iwc,
        });
    }
    Ok(())
}

/// Starts the recovery of `cd` (a relaxed CD whose execution failed): steps 1-2 of the
/// protocol and the replay state for step 3, with this rank's fence raised (`fence.rs`;
/// `after_loss`: the writer marks were lost with the rank's memory). An error means the CD
/// cannot recover alone (the fence is lowered again).
pub(crate) fn begin(rt: &CdRuntime, cd: &Cd, after_loss: bool) -> Result<(), String> {
    let started = begin_fenced(rt, cd, after_loss);
    if started.is_err() {
        fence::lower(rt);
    }
    started
}

fn begin_fenced(rt: &CdRuntime, cd: &Cd, after_loss: bool) -> Result<(), String> {
    let frame = &cd.frame;
    let me = rt.rank;
    if rt.relaxed.limited.borrow().is_some() {
        // Its incoming writes and trace are the limited re-execution's (`limited.rs`).
        return Err(
            "this rank re-executes its strict CD limited to the ranks that depend on a failure \
             (dependency tracking), and a relaxed CD failing inside that re-execution escalates"
                .into(),
        );
    }
    if rt.relaxed.replay.borrow().is_some() || rt.relaxed.trace.borrow().is_some() {
        return Err("an enclosing relaxed CD is replaying on this rank".into());
    }
    // Every write's log entry is complete before the log is read.
    resilience::wait_for_acks();
    let entries = frame
        .rx
        .borrow()
        .store
        .entries()
        .map_err(|e| format!("cannot read back the spilled log: {e}"))?;
    // Allocations made in the failed execution get their addresses back in the replay, so
    // they must be free again (their frees were deferred, or they are still live).
    // Frees of older blocks C deferred are cancelled: the replay frees them again.
    let allocated: Vec<usize> = entries
        .iter()
        .filter_map(|e| match e.kind {
            EntryKind::Alloc { offset, .. } => Some(offset),
            _ => None,
        })
        .collect();
    frame.rx.borrow_mut().cancel_deferred(&allocated)?;
    let deferred = resilience::deferred_frees();
    for e in &entries {
        if let EntryKind::Alloc { offset, .. } = e.kind {
            let r = if deferred.binary_search(&offset).is_ok() {
                resilience::free_deferred(offset)
            } else {
                internal(|| pgas::delete_(GlobalPtr::<u8>::from_raw(me, offset)))
            };
            r.map_err(|err| {
                format!("cannot free the allocation at {offset} for its replay: {err}")
            })?;
        }
    }
    // Step 1: restore the preserved regions of the segment now, before any incoming write
    // of the first epoch is applied (the body's own `preserve_global` calls then do nothing).
    cd.restore_globals_now();
    let (ec_begin, iwc_begin, own, globals) = {
        let rx = frame.rx.borrow();
        (
            rx.ec_begin,
            rx.iwc_begin,
            rx.own_iwcs.clone(),
            rx.globals.clone(),
        )
    };
    // Writers wait from now on, and every write they made into this rank is counted: the
    // IWC read next bounds the replay, and none lands during it (`fence.rs`).
    fence::raise_and_drain(rt, after_loss)?;
    let iwc_end = resilience::incoming_writes();
    resilience::set_epoch(ec_begin);
    // Step 2: gather and sort.
    let (asked, mut writes) = gather::gather_writes(rt, iwc_begin, iwc_end, &own)?;
    // A write from the rank's cluster was not logged: this rank cannot recover alone.
    if let Some(w) = writes
        .iter()
        .find(|w| matches!(w.what, IncomingWhat::Unlogged { .. }))
    {
        return Err(epochs::unlogged(w));
    }
    // Combining writes replayed on top of their own effect corrupt data: each must land in
    // a region this CD restored, after that region's copy was taken; one already in the copy
    // is not replayed again (see `PreservedRegion`).
    let mut in_copy = Vec::new();
    for (i, w) in writes.iter().enumerate() {
        match &w.what {
            IncomingWhat::Atomic { offset, op } if op.is_combining() => {
                let Some(g) = globals.iter().find(|g| g.covers_word(*offset)) else {
                    return Err(format!(
                        "a combining write ({op:?} from rank {} at offset {offset}, IWC {}) \
                         landed in a region this CD does not preserve; replaying it would \
                         apply it twice",
                        w.from, w.iwc
                    ));
                };
                if w.iwc <= g.iwc_before {
                    in_copy.push(i);
                } else if w.iwc <= g.iwc_after {
                    return Err(format!(
                        "a combining write ({op:?} from rank {} at offset {offset}, IWC {}) \
                         landed while `{}` was being preserved, so the copy may or may not \
                         hold it; synchronize before preserving regions that others update",
                        w.from, w.iwc, g.name
                    ));
                }
            }
            _ => {}
        }
    }
    // Incoming rpc requests are replayed by running their functions again, which must not
    // have communicated and must not be in a preserved copy already.
    incoming_rpc::check(&entries, &writes, &globals)?;
    *rt.relaxed.trace.borrow_mut() = Some(RecoveryTrace {
        cd: frame.name.clone(),
        rank: me,
        ec_begin,
        iwc_begin,
        iwc_end,
        asked,
        events: Vec::new(),
    });
    for &i in in_copy.iter().rev() {
        let w = writes.remove(i);
        rt.relaxed.event(ReplayEvent::InCopy {
            from: w.from,
            iwc: w.iwc,
        });
    }
    if !after_loss {
        let restored: Vec<_> = globals.iter().map(|g| g.offset..g.offset + g.len).collect();
        rebuild_overwritten(rt, iwc_begin, written_ranges(&writes), &restored)?;
    }
    rt.relaxed.replay_errors.borrow_mut().clear();
    let own_in_window = own
        .iter()
        .copied()
        .filter(|&i| i > iwc_begin && i <= iwc_end)
        .collect();
    *rt.relaxed.incoming.borrow_mut() = IncomingQueue::with_own(writes, own_in_window);
    // Epoch `ec_begin` starts now: its incoming writes first, then the body.
    apply_incoming(rt, Some(ec_begin));
    *rt.relaxed.replay.borrow_mut() = Some(Replay::new(
        frame.name.clone(),
        frame.level,
        entries,
        iwc_end,
    ));
    Ok(())
}

/// The recovery of `frame` could not start after its rank was lost in the middle of the body
/// (it escalates when the body ends): serves the body from its log (collectives, reads, its
/// own puts squashed) so that the rank takes part in the synchronizations it had not reached,
/// with no incoming writes applied; forward mode when the log runs out.
pub(crate) fn begin_without_writes(rt: &CdRuntime, frame: &Frame) {
    let entries = frame.rx.borrow().store.entries().unwrap_or_default();
    *rt.relaxed.incoming.borrow_mut() = IncomingQueue::new(Vec::new());
    rt.relaxed.replay_errors.borrow_mut().clear();
    *rt.relaxed.replay.borrow_mut() = Some(Replay::new(
        frame.name.clone(),
        frame.level,
        entries,
        resilience::incoming_writes(),
    ));
}

/// Ends the replay when the re-executed body returned: the remaining incoming writes are
/// applied, and a log not used up means the re-execution did less than the first one.
/// Returns the errors found while replaying.
pub(crate) fn end(rt: &CdRuntime) -> Vec<String> {
    let replay = rt.relaxed.replay.borrow_mut().take();
    let mut errors = Vec::new();
    if let Some(mut r) = replay {
        if let Some((used, total, lsn)) = r.left_over() {
            errors.push(format!(
                "the re-execution ended after {used} of {total} logged entries (next: LSN \
                 {lsn}): the body is not deterministic"
            ));
        }
        if !r.forward {
            if let Err(e) = r.switch_to_forward() {
                errors.push(e);
            }
            fence::lower(rt);
            rt.relaxed.event(ReplayEvent::Forward {
                ec: resilience::epoch(),
            });
        }
        let mut stats = rt.stats.borrow_mut();
        let s = stats.entry(&r.cd, r.level);
        s.entries_replayed += r.replayed;
        s.writes_squashed += r.squashed;
    }
    apply_incoming(rt, None);
    errors.extend(rt.relaxed.replay_errors.borrow_mut().drain(..));
    rt.relaxed.finish_trace();
    errors
}
