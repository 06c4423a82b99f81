//! Log replicas at the buddy rank (`log_medium = "buddy"`): how a rank that lost its memory
//! inside a relaxed CD gets its logs back and recovers alone (told in prose in
//! `relaxed/README.md`, "Rank loss and log replication").
//!
//! A relaxed CD's log, its own IWCs and the dependency notes of a tracking LCSA live in the
//! rank's memory, so a rank loss takes them. Without them the rank cannot replay, and the
//! other ranks' later recoveries cannot gather the writes it made into them.
//!
//! **When.** The log is replicated when the body ends and, with `log_durable = "operation"`,
//! at every flush point of `durable.rs` (before what the log records becomes visible):
//! [`replicate`] ships, in one internal rpc, what no replica holds yet of the log
//! of *every* CD on the rank's stack: this CD's entries, the entries its completed relaxed
//! children and siblings pushed into the CDs above, the own IWCs, and a snapshot of the
//! tracking LCSA's dependency notes when they changed. Each CD's part is one replica under a
//! key of its own (a per-rank counter, in the buddy's log map, apart from preserved copies).
//!
//! **Bookkeeping.** Per CD, [`Replicated`] says which prefix of its store (and of its own
//! IWCs) the replicas under its keys hold, in order. A completed (or escalated) relaxed CD
//! pushes its store to its parent with its keys; the parent's replicas then cover its grown
//! store whenever they covered all of it before the push (they do: the child's replication
//! covered the whole stack). A strict CD that deletes the logs inside it forgets their
//! replicas at the buddy ([`forget`]).
//!
//! **After a loss** ([`restore_logs`]): the rank fetches every replica of every CD on its
//! stack back in one rpc and rebuilds the stores. A CD whose log held entries no replica
//! covered, or whose replica the buddy lost with its own memory (`notify_lost`), is marked
//! [`super::RelaxedFrame::log_lost`]: a relaxed CD below it cannot recover alone and
//! escalates, and the rank's answers to gathers lack its writes (the asker's gap check
//! refuses, and that CD escalates too). No replica is shipped again after the buddy's loss.
//!
//! What survives a loss in the emulation (as for strict CDs): the CD tree itself (names, ids,
//! the keys of preserved entries and of log replicas, the EC/IWC at each CD's begin, the
//! regions a relaxed CD preserved), which a restarted rank rebuilds by re-entering it.

use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::buddy::Bytes;
use crate::config::{LogMedium, Medium};
use crate::error::FaultKinds;
use crate::frame::{CdKind, Frame};
use crate::relaxed::dependencies::Dependencies;
use crate::relaxed::frame_state::RelaxedFrame;
use crate::relaxed::log_store::LogEntry;
use crate::runtime::CdRuntime;

pub(crate) use super::frame_state::Replicated;

/// One replica: the next entries of one CD's store, its next own IWCs, (tracking strict
/// CDs, when they changed) a snapshot of its dependency notes, and the LSNs of atomics or
/// rpcs that left before their entries were complete (`durable.rs`): a restored log that
/// lacks one of them escalates rather than perform it again.
#[derive(Serialize, Deserialize)]
struct Part {
    entries: Vec<LogEntry>,
    own_iwcs: Vec<u64>,
    deps: Option<Dependencies>,
    pending: Vec<u64>,
}

/// True if `frame` (a relaxed CD) replicates the logs when its body ends: it logs, its
/// `log_medium` is `"buddy"` and it contains rank losses.
pub(crate) fn replicates(frame: &Frame) -> bool {
    frame.kind == CdKind::Relaxed
        && frame.settings.logging
        && frame.settings.log_medium == LogMedium::Buddy
        && frame.settings.contain.contains(FaultKinds::RANK_LOSS)
}

/// True if the dependency notes of `frame` are kept (a strict CD with tracking).
fn tracks(frame: &Frame, rx: &RelaxedFrame) -> bool {
    frame.kind == CdKind::Strict && rx.tracked
}

/// True if `frame` (a tracking strict CD) ships its dependency notes whenever they grow: it
/// contains rank losses and keeps its preserved state where a loss leaves it, so a loss
/// inside it can end in a limited re-execution, which needs the lost rank's notes.
pub(crate) fn ships_notes(frame: &Frame) -> bool {
    frame.settings.contain.contains(FaultKinds::RANK_LOSS) && frame.settings.medium != Medium::Local
}

/// Ships the dependency notes of `frame` (a tracking strict CD) to the buddy, in one internal
/// rpc whose reply is waited for, under one key per execution (each snapshot replaces the one
/// before). Called before the operation that grew them is performed, so a loss at any point
/// leaves the notes of everything the rank did at the buddy, whatever its log medium.
pub(crate) fn ship_notes(rt: &CdRuntime, frame: &Frame) {
    let (key, deps) = {
        let mut rx = frame.rx.borrow_mut();
        let key = match rx.replica.notes_key {
            Some(k) if !rt.buddy.is_log_lost(k) => k,
            stale => {
                if let Some(k) = stale {
                    rt.buddy.unmark_logs(&[k]);
                }
                let k = rt.relaxed.log_key.get();
                rt.relaxed.log_key.set(k + 1);
                rx.replica.notes_key = Some(k);
                k
            }
        };
        (key, rx.deps.clone())
    };
    let part = Part {
        entries: Vec::new(),
        own_iwcs: Vec::new(),
        deps: Some(deps.clone()),
        pending: Vec::new(),
    };
    let bytes = postcard::to_allocvec(&part).expect("dependency notes serialize");
    let len = bytes.len() as u64;
    rt.rpcs
        .store_logs(rt.buddy.buddy_rank(), vec![(key, Bytes(bytes))]);
    frame.rx.borrow_mut().replica.deps = Some(deps);
    rt.stats
        .borrow_mut()
        .entry(&frame.name, frame.level)
        .bytes_replicated += len;
}

/// The body of `frame` ended (a relaxed CD that [`replicates`]), or a flush point of
/// `durable.rs` came: waits for the rank's acks, then ships to the buddy, in one internal
/// rpc, what no replica holds yet of the log of every CD on this rank's stack. Only complete
/// entries go (an entry still waiting for its reply is shipped by a later replication);
/// `pending`, the LSN of the incomplete entry of an atomic or rpc about to leave, goes with
/// `frame`'s part. Counted in `frame`'s `bytes_replicated`.
pub(crate) fn replicate(rt: &CdRuntime, frame: &Frame, pending: Option<u64>) {
    pgas::runtime_hooks::wait_for_acks();
    rt.relaxed.unflushed_reads.clear();
    let frames: Vec<Rc<Frame>> = rt.frames.borrow().clone();
    let mut parts = Vec::new();
    // (frame index, key, entries covered, own IWCs covered, notes sent)
    let mut covered = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let rx = f.rx.borrow();
        if rx.log_lost.is_some() {
            // Incomplete since a loss: no replica can make it whole again.
            continue;
        }
        let done = &rx.replica;
        let mut entries = rx.store.entries_from(done.entries).unwrap_or_else(|e| {
            panic!(
                "rank {}: cannot read back a spilled log of CD {:?} to replicate it: {e}",
                rt.rank, f.name
            )
        });
        let complete = entries.iter().take_while(|e| e.is_complete()).count();
        entries.truncate(complete);
        let own_iwcs = rx.own_iwcs.get(done.iwcs..).unwrap_or_default().to_vec();
        let deps = (tracks(f, &rx)
            && done.deps.as_ref().unwrap_or(&Dependencies::default()) != &rx.deps)
            .then(|| rx.deps.clone());
        let pending: Vec<u64> = pending
            .filter(|_| std::ptr::eq(&**f, frame))
            .into_iter()
            .collect();
        if entries.is_empty() && own_iwcs.is_empty() && deps.is_none() && pending.is_empty() {
            continue;
        }
        let key = rt.relaxed.log_key.get();
        rt.relaxed.log_key.set(key + 1);
        covered.push((
            i,
            key,
            done.entries + complete,
            rx.own_iwcs.len(),
            deps.clone(),
        ));
        let part = Part {
            entries,
            own_iwcs,
            deps,
            pending,
        };
        let bytes = postcard::to_allocvec(&part).expect("log entries serialize");
        parts.push((key, Bytes(bytes)));
    }
    if parts.is_empty() {
        return;
    }
    let bytes: usize = parts.iter().map(|(_, b)| b.0.len()).sum();
    rt.rpcs.store_logs(rt.buddy.buddy_rank(), parts);
    for (i, key, entries, iwcs, deps) in covered {
        let mut rx = frames[i].rx.borrow_mut();
        rx.replica.keys.push(key);
        rx.replica.entries = entries;
        rx.replica.iwcs = iwcs;
        if deps.is_some() {
            rx.replica.deps = deps;
        }
    }
    rt.stats
        .borrow_mut()
        .entry(&frame.name, frame.level)
        .bytes_replicated += bytes as u64;
}

/// A completed (or escalated) relaxed CD's log was appended to its parent's: the parent's
/// replicas now cover the child's part too if they covered the whole parent log before
/// (`before`: the parent's store length and own IWCs before the append); otherwise the
/// child's replicas are of no use (the parent's next replication ships the rest) and are
/// returned to be forgotten.
pub(crate) fn adopt(
    parent: &mut super::RelaxedFrame,
    before: (usize, usize),
    child: Replicated,
    child_lost: Option<String>,
) -> Vec<u64> {
    if parent.log_lost.is_none() {
        parent.log_lost = child_lost;
    }
    let p = &mut parent.replica;
    if parent.log_lost.is_none() && p.entries == before.0 && p.iwcs == before.1 {
        p.keys.extend(child.keys);
        p.entries += child.entries;
        p.iwcs += child.iwcs;
        Vec::new()
    } else {
        child.keys
    }
}

/// Tells the buddy it may drop the log replicas under `keys` (the logs were deleted).
pub(crate) fn forget(rt: &CdRuntime, keys: Vec<u64>) {
    if keys.is_empty() {
        return;
    }
    rt.buddy.unmark_logs(&keys);
    rt.rpcs.forget_logs(rt.buddy.buddy_rank(), keys);
}

/// Deletes the logs of `frame` (a strict CD completes, re-executes or gives up) and their
/// replicas at the buddy.
pub(crate) fn clear(rt: &CdRuntime, frame: &Frame) {
    let keys = frame.rx.borrow_mut().clear();
    forget(rt, keys);
}

/// The loss wiped the logs of every CD on this rank's stack (`CdRuntime::lose_memory`):
/// fetches their replicas back from the buddy in one rpc and rebuilds each CD's store, own
/// IWCs and dependency notes. A CD whose log cannot be made whole is marked `log_lost` with
/// the reason (its replicas are forgotten). Ends the window in which gathers are told to ask
/// again.
pub(crate) fn restore_logs(rt: &CdRuntime) {
    let frames: Vec<Rc<Frame>> = rt.frames.borrow().clone();
    let mut keys: Vec<u64> = Vec::new();
    // Per frame: its keys' range in `keys` (None: nothing to fetch).
    let mut ranges = Vec::with_capacity(frames.len());
    for f in &frames {
        let mut rx = f.rx.borrow_mut();
        if rx.log_lost.is_none() {
            if let Some(k) = rx.replica.keys.iter().find(|k| rt.buddy.is_log_lost(**k)) {
                rx.log_lost = Some(format!(
                    "buddy rank {} lost the replica {k} of CD {:?}'s log with its own memory \
                     (both ranks lost theirs)",
                    rt.buddy.buddy_rank(),
                    f.name
                ));
            }
        }
        // The notes shipped alone (`ship_notes`) come back whether or not the log does.
        let notes = (rx.replica.notes_key).filter(|_| tracks(f, &rx)).map(|k| {
            keys.push(k);
            keys.len() - 1
        });
        if rx.log_lost.is_some() && tracks(f, &rx) && notes.is_none() && rx.replica.deps.is_some() {
            // The notes went to the buddy only with the log's replicas, not fetched now.
            rx.deps.notes_lost = true;
        }
        if rx.log_lost.is_some() || rx.replica.keys.is_empty() {
            ranges.push((None, notes));
            continue;
        }
        ranges.push((Some(keys.len()..keys.len() + rx.replica.keys.len()), notes));
        keys.extend(&rx.replica.keys);
    }
    let got = if keys.is_empty() {
        Vec::new()
    } else {
        rt.rpcs.fetch_logs(rt.buddy.buddy_rank(), keys.clone())
    };
    for (f, (range, notes)) in frames.iter().zip(ranges) {
        let mut rx = f.rx.borrow_mut();
        if let Some(i) = notes {
            let part = decode(&keys[i..=i], &got[i..=i], &Replicated::default());
            match part.map(|p| p.deps) {
                Ok(Some(deps)) => rx.deps.merge(deps),
                Ok(None) | Err(_) => rx.deps.notes_lost = true,
            }
        }
        if let Some(range) = range {
            match decode(&keys[range.clone()], &got[range], &rx.replica) {
                Ok(part) => {
                    let unresolved = (part.pending.iter())
                        .find(|lsn| !part.entries.iter().any(|e| e.lsn == **lsn));
                    if let Some(lsn) = unresolved {
                        rx.log_lost = Some(format!(
                            "an atomic or rpc of CD {:?} (LSN {lsn}) had left when the rank \
                             was lost, before its result reached the buddy: performing it \
                             again would apply it twice",
                            f.name
                        ));
                    }
                    rx.store.clear();
                    for e in part.entries {
                        rx.store.push(e);
                    }
                    rx.own_iwcs = part.own_iwcs;
                    if tracks(f, &rx) {
                        if let Some(deps) = part.deps {
                            rx.deps.merge(deps);
                        }
                    }
                }
                Err(why) => {
                    rx.log_lost = Some(format!(
                        "the replica of CD {:?}'s log at buddy rank {}: {why}",
                        f.name,
                        rt.buddy.buddy_rank()
                    ));
                    if tracks(f, &rx) {
                        rx.deps.notes_lost = true;
                    }
                }
            }
        }
        if rx.log_lost.is_some() && !rx.replica.keys.is_empty() {
            // The log's replicas are of no use any more; the notes shipped alone still are.
            let notes_key = rx.replica.notes_key;
            let deps = rx.replica.deps.take().filter(|_| notes_key.is_some());
            let keys = std::mem::replace(
                &mut rx.replica,
                Replicated {
                    notes_key,
                    deps,
                    ..Replicated::default()
                },
            )
            .keys;
            drop(rx);
            forget(rt, keys);
        }
    }
    rt.relaxed.restoring.set(false);
}

/// The replicas fetched for one CD, joined and checked against what they should hold.
fn decode(keys: &[u64], got: &[Option<Vec<u8>>], want: &Replicated) -> Result<Part, String> {
    let mut all = Part {
        entries: Vec::new(),
        own_iwcs: Vec::new(),
        deps: None,
        pending: Vec::new(),
    };
    for (k, bytes) in keys.iter().zip(got) {
        let Some(bytes) = bytes else {
            return Err(format!(
                "replica {k} is missing (the buddy lost its memory)"
            ));
        };
        let part: Part =
            postcard::from_bytes(bytes).map_err(|e| format!("replica {k} does not decode: {e}"))?;
        all.entries.extend(part.entries);
        all.own_iwcs.extend(part.own_iwcs);
        all.pending.extend(part.pending);
        if part.deps.is_some() {
            all.deps = part.deps;
        }
    }
    if all.entries.len() != want.entries
        || all.own_iwcs.len() != want.iwcs
        || !all.entries.windows(2).all(|w| w[0].lsn < w[1].lsn)
    {
        return Err(format!(
            "the replicas hold {} entries and {} own IWCs, {} and {} expected in LSN order",
            all.entries.len(),
            all.own_iwcs.len(),
            want.entries,
            want.iwcs
        ));
    }
    Ok(all)
}

/// Why a relaxed CD in which this rank lost its memory cannot recover alone, if it cannot:
/// its log is not replicated, its preserved state went with the memory (`.1`: true), or the
/// log of a CD on the stack could not be restored.
pub(crate) fn cannot_recover_alone(rt: &CdRuntime, frame: &Frame) -> Option<(String, bool)> {
    if !frame.settings.logging {
        return Some(("logging is off for this CD, so it has no log".into(), false));
    }
    if frame.settings.log_medium == LogMedium::Local {
        return Some((
            "its log was kept in that memory only (log_medium = \"local\")".into(),
            false,
        ));
    }
    if !frame.settings.contain.contains(FaultKinds::RANK_LOSS) {
        return Some((
            "it does not contain rank losses, so its log was not replicated".into(),
            false,
        ));
    }
    let frames = rt.frames.borrow();
    let index = frames
        .iter()
        .position(|f| std::ptr::eq(&**f, frame))
        .expect("a running CD is on the stack");
    if !crate::frame::restorable(&frames, index, &rt.buddy, &rt.xor) {
        return Some((
            "the loss took its preserved state (kept in this rank's memory: medium = \"local\", \
             or the buddy lost its copy too)"
                .into(),
            true,
        ));
    }
    frames
        .iter()
        .find_map(|f| f.rx.borrow().log_lost.clone())
        .map(|why| (why, false))
}

/// The rank lost its memory: `frame`'s log, own IWCs and dependency notes are gone. What no
/// replica holds is lost for good (`log_lost`); [`restore_logs`] brings back the rest.
///
/// `truncate`: the loss struck in the middle of the body of `frame`, a relaxed CD whose log is
/// durable at every operation (`durable.rs`): what no replica holds was logged after the last
/// flush point, seen by no other rank, and the replay performs it again in forward mode, so
/// the log is cut back to what the replicas hold instead (an atomic or rpc among it is
/// refused by [`restore_logs`] from the pending LSNs; own IWCs among it leave a gap that the
/// replay's sequence check refuses). `notes_redone`: the same for the dependency notes of a
/// tracking strict CD, which that replay makes again (notes of operations no replay redoes
/// come with entries of a CD in between that are lost, and that CD escalates).
pub(crate) fn wipe(frame: &Frame, truncate: bool, notes_redone: bool) {
    let mut rx = frame.rx.borrow_mut();
    let sent = if tracks(frame, &rx) {
        rx.replica.deps.clone().unwrap_or_default()
    } else {
        Dependencies::default()
    };
    let notes_uncovered = tracks(frame, &rx) && rx.deps != sent && !notes_redone;
    // The IWCs of unlogged writes into the rank's SPBC cluster are never replicated, and are
    // no part of the log: only a re-execution of the cluster makes those writes again, and
    // its members then accept the IWCs the loss left missing (`limited::Losses`).
    let uncovered = rx.store.len() > rx.replica.entries
        || rx.own_iwcs.len() > rx.replica.iwcs
        || notes_uncovered;
    if uncovered && !truncate && rx.log_lost.is_none() {
        rx.log_lost = Some(format!(
            "the loss took entries of CD {:?}'s log (or its dependency notes) that no replica \
             held (log_medium = \"local\", or logged after the last replication)",
            frame.name
        ));
    }
    rx.store.clear();
    rx.own_iwcs.clear();
    rx.cluster = Default::default();
    // What the replicas hold comes back with `restore_logs`; what they lack is lost unless
    // the replay makes it again.
    rx.deps = Dependencies {
        notes_lost: notes_uncovered,
        ..Dependencies::default()
    };
}
