//! Recovery of one relaxed CD C on rank F: restore, rewind the EC, gather the incoming
//! writes from the initiators' logs, then re-execute C's body with the log serving it until
//! the log runs out (`relaxed/README.md`, "Recovery of C on F, in order"). The body's
//! operations meanwhile are served by the replay mode (`modes/replay.rs`), which takes its
//! entries from here.

use std::rc::Rc;

use pgas::GlobalPtr;
use pgas::runtime_hooks::{self as resilience, internal};

use crate::cd::Cd;
use crate::frame::Frame;
use crate::relaxed::epochs::{self, Incoming, IncomingQueue, IncomingWhat};
use crate::relaxed::fence;
use crate::relaxed::incoming_rpc;
use crate::relaxed::log_store::{EntryKind, LogEntry};
use crate::relaxed::writers;
use crate::relaxed::{RecoveryTrace, ReplayEvent};
use crate::runtime::CdRuntime;

/// How often F asks again for writes whose ack had not reached their initiator yet.
const GATHER_ROUNDS: usize = 1000;

/// The `pending` a server answers while it fetches its log replicas back after losing its
/// memory: F asks again, and such rounds do not count against [`GATHER_ROUNDS`] (the server's
/// fetch waits only on rpcs that other ranks serve from their progress, so it ends).
const RESTORING: u64 = u64::MAX;

/// The replay of the recovering CD's log.
#[derive(Debug)]
pub(crate) struct Replay {
    pub(crate) cd: String,
    pub(crate) level: usize,
    entries: Vec<LogEntry>,
    cursor: usize,
    pub(crate) replayed: u64,
    pub(crate) squashed: u64,
    /// The log ran out: the body runs forward (the replay stays for the privatized regions
    /// at the end and the counts).
    pub(crate) forward: bool,
    /// F's IWC when recovery started, and the writes F made into itself while replaying:
    /// any other write landing before the switch to forward mode may have been overwritten
    /// by (or read in place of) an older replayed one.
    iwc_end: u64,
    pub(crate) own_during: u64,
}

impl Replay {
    /// Switches to forward mode; an error if writes of other ranks landed while replaying.
    pub(crate) fn switch_to_forward(&mut self) -> Result<(), String> {
        self.forward = true;
        let landed = resilience::incoming_writes() - self.iwc_end - self.own_during;
        if landed > 0 {
            return Err(format!(
                "{landed} write(s) from other ranks landed while the log was replayed (the \
                 writers did not wait for this rank); the replay may have overwritten them"
            ));
        }
        Ok(())
    }
}

impl Replay {
    /// The next entry for the re-executed body; `None` when the log ran out. A privatized
    /// region's entry is returned like any other (an operation meeting it diverged): a
    /// re-executed CD consumes its own at its completion ([`Replay::take_privatized`]).
    pub(crate) fn next(&mut self) -> Option<LogEntry> {
        let e = self.entries.get(self.cursor)?;
        self.cursor += 1;
        Some(e.clone())
    }

    /// The entries not replayed yet.
    pub(crate) fn remaining(&self) -> &[LogEntry] {
        &self.entries[self.cursor.min(self.entries.len())..]
    }

    /// Consumes the entry at the cursor if it is the privatized region at `offset`: its LSN
    /// and logged bytes.
    pub(crate) fn take_privatized(&mut self, offset: usize) -> Option<(u64, Vec<u8>)> {
        match &self.entries.get(self.cursor)?.kind {
            EntryKind::Privatized {
                offset: o, bytes, ..
            } if *o == offset => {
                let lsn = self.entries[self.cursor].lsn;
                let bytes = bytes.0.clone();
                self.cursor += 1;
                self.replayed += 1;
                Some((lsn, bytes))
            }
            _ => None,
        }
    }
}

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

/// Serves a gather request from `target`: the writes into it with IWC in
/// `(iwc_begin, iwc_end]` from every store of this rank (the running CDs' and those their
/// completed children pushed up), how many of its writes into `target` still wait for
/// their ack, and how many landed uncounted (`target` had not switched counting on).
pub(crate) fn serve_gather(
    rt: &CdRuntime,
    target: usize,
    iwc_begin: u64,
    iwc_end: u64,
) -> (Vec<Incoming>, u64, u64) {
    let mut out = Vec::new();
    let mut uncounted = 0;
    let pending = for_each_logged(rt, target, |e| {
        if e.write_into(target).is_some_and(|c| c.iwc == 0) {
            uncounted += 1;
        }
        if let Some(w) = incoming_of(rt.rank, e, target, iwc_begin, iwc_end) {
            out.push(w);
        }
    });
    (out, pending, uncounted)
}

/// How many of this rank's writes into `target` still wait for their ack ([`RESTORING`]
/// while this rank fetches its own log replicas back).
pub(crate) fn pending_writes_into(rt: &CdRuntime, target: usize) -> u64 {
    for_each_logged(rt, target, |_| {})
}

/// Calls `f` on every entry of this rank's logs (the running CDs' stores, those their
/// completed children pushed up, and a limited re-execution's first log); returns how many
/// writes into `target` still wait for their ack, or [`RESTORING`].
fn for_each_logged(rt: &CdRuntime, target: usize, mut f: impl FnMut(&LogEntry)) -> u64 {
    if rt.relaxed.restoring.get() {
        // This rank lost its memory and is fetching its log replicas back: ask again.
        return RESTORING;
    }
    let mut pending = 0;
    let frames: Vec<Rc<Frame>> = rt.frames.borrow().clone();
    for fr in frames {
        let Ok(rx) = fr.rx.try_borrow() else {
            // Being written this instant (a safeguard: progress is not expected to run while a
            // store is borrowed): ask again.
            pending += 1;
            continue;
        };
        let read = rx.store.for_each(|e| {
            if e.pending_write_into(target) {
                pending += 1;
            }
            f(e);
        });
        if let Err(e) = read {
            panic!(
                "rank {}: cannot read back a spilled log of CD {:?} to serve rank {target}: {e}",
                rt.rank, fr.name
            );
        }
    }
    // A rank preparing a limited re-execution moved its first execution's log out of its CD.
    crate::relaxed::limited::with_old(rt, |old| old.iter().for_each(&mut f));
    pending
}

/// The write into `target` that entry `e` of rank `from` records, if its IWC is in
/// `(iwc_begin, iwc_end]`.
fn incoming_of(
    from: usize,
    e: &LogEntry,
    target: usize,
    iwc_begin: u64,
    iwc_end: u64,
) -> Option<Incoming> {
    let c = e.write_into(target)?;
    if c.iwc <= iwc_begin || c.iwc > iwc_end {
        return None;
    }
    let what = match &e.kind {
        EntryKind::Write { offset, bytes, .. } => IncomingWhat::Put {
            offset: *offset,
            bytes: bytes.clone(),
        },
        EntryKind::Atomic { offset, op, .. } => IncomingWhat::Atomic {
            offset: *offset,
            op: *op,
        },
        EntryKind::Rpc {
            name,
            args,
            reply,
            fire_and_forget,
            ..
        } => IncomingWhat::Rpc {
            name: name.clone(),
            args: args.clone(),
            reply: if *fire_and_forget {
                None
            } else {
                reply.clone()
            },
        },
        _ => return None,
    };
    Some(Incoming {
        from,
        ec: c.ec,
        iwc: c.iwc,
        what,
    })
}

/// The members of `lcsa`'s team other than `me`.
pub(crate) fn other_members(lcsa: &Frame, me: usize) -> Vec<usize> {
    lcsa.team
        .members()
        .iter()
        .copied()
        .filter(|&r| r != me)
        .collect()
}

/// The ranks among `members` marked as writers into this rank under `lcsa`'s generation.
pub(crate) fn marked_writers(rt: &CdRuntime, lcsa: &Frame, members: &[usize]) -> Vec<usize> {
    let generation = writers::generation(lcsa.id);
    rt.relaxed
        .writers
        .writers(rt.rank, generation)
        .into_iter()
        .filter(|r| members.contains(r))
        .collect()
}

/// Gathers the writes into this rank with IWC in `(iwc_begin, iwc_end]`: from the ranks
/// marked as its writers under the LCSA's generation first (`writers.rs`); when those leave
/// a gap in the IWC sequence, from every other member of the LCSA's team too. Returns the
/// ranks asked, in the order asked, and the writes.
fn gather_writes(
    rt: &CdRuntime,
    iwc_begin: u64,
    iwc_end: u64,
    own: &[u64],
) -> Result<(Vec<usize>, Vec<Incoming>), String> {
    let lcsa = rt.lcsa();
    let members = other_members(&lcsa, rt.rank);
    let mut asked = marked_writers(rt, &lcsa, &members);
    let first = gather(rt, &asked, Vec::new(), iwc_begin, iwc_end, own);
    let got = match first {
        Ok(writes) => return Ok((asked, writes)),
        Err((_, got)) => got,
    };
    let rest: Vec<usize> = members.into_iter().filter(|r| !asked.contains(r)).collect();
    if rest.is_empty() {
        // Nobody else to ask: the same gap again, with its message.
        return gather(rt, &[], got, iwc_begin, iwc_end, own)
            .map(|w| (asked, w))
            .map_err(|(e, _)| e);
    }
    asked.extend(&rest);
    let writes = gather(rt, &rest, got, iwc_begin, iwc_end, own).map_err(|(e, _)| e)?;
    Ok((asked, writes))
}

/// Asks `ranks` for the writes into this rank with IWC in `(iwc_begin, iwc_end]`, again for
/// those still waiting for acks, until the sequence (with the writes `got` already gathered
/// from other ranks) is complete or the rounds run out. An error carries the reason and
/// the writes gathered.
pub(crate) fn gather(
    rt: &CdRuntime,
    ranks: &[usize],
    mut got: Vec<Incoming>,
    iwc_begin: u64,
    iwc_end: u64,
    own: &[u64],
) -> Result<Vec<Incoming>, (String, Vec<Incoming>)> {
    let mut ask: Vec<usize> = ranks.to_vec();
    let mut last_err = String::new();
    let mut rounds = 0;
    while rounds < GATHER_ROUNDS {
        // All requests in flight at once, then the answers.
        let futures: Vec<_> = internal(|| {
            ask.iter()
                .map(|&r| {
                    (
                        r,
                        pgas::rpc(r, rt.relaxed.rpcs.gather, (rt.rank, iwc_begin, iwc_end)),
                    )
                })
                .collect()
        });
        let mut again = Vec::new();
        let mut restoring = false;
        for (r, fut) in futures {
            let (writes, pending, _) = internal(|| fut.wait());
            if pending == RESTORING {
                restoring = true;
                again.push(r);
                continue;
            }
            got.retain(|w| w.from != r);
            got.extend(writes);
            if pending > 0 {
                again.push(r);
            }
        }
        if !restoring {
            rounds += 1;
        }
        match epochs::check_sequence(iwc_begin, iwc_end, &got, own) {
            Ok(()) => return Ok(got),
            Err(e) => last_err = e,
        }
        if again.is_empty() {
            break;
        }
        ask = again;
        pgas::progress();
    }
    Err((last_err, got))
}

/// After this rank lost its memory: writes the logged puts that landed in its segment
/// before the CD began (IWC up to `iwc_begin`, as far as the logs of the LCSA's other members
/// still hold them) back into it, in IWC order, before the recovery restores the preserved
/// regions (which override them) and replays the CD's own window.
///
/// Without them, a neighbour that began its CD first and put into this rank before this
/// rank's begin (nothing orders the two) leaves bytes the loss took and no replay brings
/// back: a re-execution waiting for them would wait forever. Writes no log holds (made
/// outside logging relaxed CDs, before the LCSA) and atomics or rpcs are not rebuilt: the
/// region they wrote must be preserved (`preserve_global`) to survive a loss.
///
/// The puts were made in the LCSA's instance; any that landed before this rank switched
/// counting on carry no IWC (`CdRuntime::count_incoming_writes`), so their order is unknown:
/// if the logs hold one, the rebuild is refused (an error: the CD escalates).
pub(crate) fn rebuild_before_begin(rt: &CdRuntime, frame: &Frame) -> Result<(), String> {
    let mut uncounted = 0;
    let iwc_begin = frame.rx.borrow().iwc_begin;
    let mut got: Vec<Incoming> = Vec::new();
    let mut ask = other_members(&rt.lcsa(), rt.rank);
    for _ in 0..GATHER_ROUNDS {
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
    if uncounted > 0 {
        return Err(format!(
            "rank {} lost its memory in CD {:?}; {uncounted} write(s) into it that other \
             ranks logged before the CD began landed before it counted incoming writes (it \
             switches counting on at its first relaxed or dependency-tracking CD), so they \
             cannot be put back in order",
            rt.rank, frame.name
        ));
    }
    got.sort_by_key(|w| w.iwc);
    got.dedup_by_key(|w| w.iwc);
    for w in got {
        if matches!(w.what, IncomingWhat::Put { .. }) {
            // Inside the segment: the initiator's put landed there.
            let _ = epochs::apply(rt, &w);
        }
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
    let (asked, mut writes) = gather_writes(rt, iwc_begin, iwc_end, &own)?;
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
    rt.relaxed.replay_errors.borrow_mut().clear();
    *rt.relaxed.incoming.borrow_mut() = IncomingQueue::new(writes);
    // Epoch `ec_begin` starts now: its incoming writes first, then the body.
    apply_incoming(rt, Some(ec_begin));
    *rt.relaxed.replay.borrow_mut() = Some(Replay {
        cd: frame.name.clone(),
        level: frame.level,
        entries,
        cursor: 0,
        replayed: 0,
        squashed: 0,
        forward: false,
        iwc_end,
        own_during: 0,
    });
    Ok(())
}

/// Ends the replay when the re-executed body returned: the remaining incoming writes are
/// applied, and a log not used up means the re-execution did less than the first one.
/// Returns the errors found while replaying.
pub(crate) fn end(rt: &CdRuntime) -> Vec<String> {
    let replay = rt.relaxed.replay.borrow_mut().take();
    let mut errors = Vec::new();
    if let Some(mut r) = replay {
        if let Some(e) = r.entries.get(r.cursor) {
            errors.push(format!(
                "the re-execution ended after {} of {} logged entries (next: LSN {}): the body \
                 is not deterministic",
                r.cursor,
                r.entries.len(),
                e.lsn
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
