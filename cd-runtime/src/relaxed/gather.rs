//! The writes into a recovering rank, from their initiators' logs: serving another rank's
//! gather request from this rank's logs, and gathering from the writers (the marked ones
//! first, `writers.rs`) until the IWC sequence is complete. Used by a relaxed recovery
//! (`replay.rs`), a limited re-execution (`limited.rs`) and the recovery fence (`fence.rs`).
//! A rank of an SPBC cluster answers its unlogged writes into the cluster by their IWCs
//! (`cluster.rs`).

use std::rc::Rc;

use pgas::runtime_hooks::internal;

use crate::frame::Frame;
use crate::relaxed::log_store::{EntryKind, LogEntry};
use crate::relaxed::state::incoming::{Incoming, IncomingWhat};
use crate::relaxed::writers;
use crate::relaxed::{cluster, epochs};
use crate::runtime::CdRuntime;

/// How often F asks again for writes whose ack had not reached their initiator yet.
pub(crate) const GATHER_ROUNDS: usize = 1000;

/// The `pending` a server answers while it fetches its log replicas back after losing its
/// memory: F asks again, and such rounds do not count against [`GATHER_ROUNDS`] (the server's
/// fetch waits only on rpcs that other ranks serve from their progress, so it ends).
const RESTORING: u64 = u64::MAX;

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
    if pending == RESTORING {
        return (out, pending, uncounted);
    }
    // The unlogged writes into a rank of this rank's SPBC cluster: their IWCs only.
    let frames: Vec<Rc<Frame>> = rt.frames.borrow().clone();
    let (p, u) = cluster::serve(rt, &frames, target, iwc_begin, iwc_end, &mut out);
    (out, pending + p, uncounted + u)
}

/// How many of this rank's writes into `target` still wait for their ack ([`RESTORING`]
/// while this rank fetches its own log replicas back).
pub(crate) fn pending_writes_into(rt: &CdRuntime, target: usize) -> u64 {
    let pending = for_each_logged(rt, target, |_| {});
    if pending == RESTORING {
        return pending;
    }
    let frames: Vec<Rc<Frame>> = rt.frames.borrow().clone();
    pending + cluster::serve(rt, &frames, target, 0, 0, &mut Vec::new()).0
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
        let unsent = rt.relaxed.unsent.get();
        let read = rx.store.for_each(|e| {
            if e.pending_write_into(target) && Some(e.lsn) != unsent {
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
    with_old(rt, |old| old.iter().for_each(&mut f));
    pending
}

/// Entries of the first execution's log kept while a limited re-execution runs.
fn with_old<R>(rt: &CdRuntime, f: impl FnOnce(&[LogEntry]) -> R) -> Option<R> {
    let l = rt.relaxed.limited.try_borrow().ok()?;
    l.as_ref().map(|l| f(&l.old))
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

/// What a gather waits for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expect<'a> {
    /// The IWC sequence complete, with this rank's own writes into itself.
    Complete { own: &'a [u64] },
    /// Every asked rank's writes acknowledged, each IWC at most once: writes of ranks whose
    /// logs are lost are missing (a limited re-execution takes them live).
    Acknowledged { own: &'a [u64] },
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
pub(crate) fn gather_writes(
    rt: &CdRuntime,
    iwc_begin: u64,
    iwc_end: u64,
    own: &[u64],
) -> Result<(Vec<usize>, Vec<Incoming>), String> {
    let lcsa = rt.lcsa();
    let members = other_members(&lcsa, rt.rank);
    let mut asked = marked_writers(rt, &lcsa, &members);
    let expect = Expect::Complete { own };
    let first = gather(rt, &asked, Vec::new(), iwc_begin, iwc_end, expect);
    let got = match first {
        Ok(writes) => return Ok((asked, writes)),
        Err((_, got)) => got,
    };
    let rest: Vec<usize> = members.into_iter().filter(|r| !asked.contains(r)).collect();
    if rest.is_empty() {
        // Nobody else to ask: the same gap again, with its message.
        return gather(rt, &[], got, iwc_begin, iwc_end, expect)
            .map(|w| (asked, w))
            .map_err(|(e, _)| e);
    }
    asked.extend(&rest);
    let writes = gather(rt, &rest, got, iwc_begin, iwc_end, expect).map_err(|(e, _)| e)?;
    Ok((asked, writes))
}

/// Asks `ranks` for the writes into this rank with IWC in `(iwc_begin, iwc_end]`, again for
/// those still waiting for acks, until the writes (with those `got` already gathered from
/// other ranks) are what `expect` says or the rounds run out. An error carries the reason
/// and the writes gathered.
pub(crate) fn gather(
    rt: &CdRuntime,
    ranks: &[usize],
    mut got: Vec<Incoming>,
    iwc_begin: u64,
    iwc_end: u64,
    expect: Expect<'_>,
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
        let checked = match expect {
            Expect::Complete { own } => epochs::check_sequence(iwc_begin, iwc_end, &got, own),
            Expect::Acknowledged { own } => epochs::missing(iwc_begin, iwc_end, &got, own)
                .and_then(|_| match again.is_empty() {
                    true => Ok(()),
                    false => Err(format!(
                        "ranks {again:?} still wait for acks of writes here"
                    )),
                }),
        };
        match checked {
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
