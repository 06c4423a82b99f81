//! The dependency-limited re-execution of a strict CD (the LCSA of relaxed CDs): after an
//! escalation, only the ranks in D ([`super::dependencies`]) re-execute; the others keep the
//! result of their first execution and wait at the CD's agreement.
//!
//! A rank in D restores the strict CD's preserved state, rewinds its EC to the CD's begin,
//! gathers the writes made into it during the first execution from their initiators (the
//! ranks that noted it in their write lists), and re-executes the body:
//!
//! - operations with ranks in D (and with itself) run live, unlogged;
//! - operations with ranks outside D are served from this rank's log of the first execution
//!   (reads, atomics' results, rpc replies, fetches) or squashed after a comparison with it
//!   (writes: the target already holds them);
//! - writes from ranks outside D are applied epoch by epoch, as in a relaxed replay; writes
//!   from ranks in D are made again, live; bytes the window's writes overwrote are first
//!   given back from the writes logged before the CD began (`replay::rebuild_overwritten`);
//! - barriers (of the world team or the CD's team) run among the ranks of D that are in the
//!   team; other collectives' results come from the log, and on those teams they run the same
//!   barrier among D (they ordered D's accesses in the first execution); `cd::rng()` draws
//!   come from the log.
//!
//! A rank of D refuses to prepare where a write from outside D and another rank of D's access
//! met at the same bytes between two barriers (`phases.rs`): their order cannot be made again.
//!
//! Anything that does not match (a squashed write with other bytes, a log not used up, an
//! operation the log does not hold) fails the attempt, and the next attempt re-executes the
//! whole group: a limited re-execution is bit-exact or falls back, never a wrong answer.
//!
//! This file prepares a rank of D, hands out the logged entries, runs the barriers among D
//! and ends the re-execution; the hook serves the body's operations in the limited mode
//! (`modes/limited.rs`) and, with ranks in D, in the live mode (`modes/live.rs`).

use std::rc::Rc;

use pgas::Promise;
use pgas::runtime_hooks::{self as resilience, internal};

use crate::buddy::Bytes;
use crate::cd::Cd;
use crate::frame::Frame;

use crate::relaxed::gather;
use crate::relaxed::log_store::{EntryKind, LogEntry};
use crate::relaxed::phases::{self, Access};
use crate::relaxed::replay::{
    apply_incoming, rebuild_before_begin, rebuild_overwritten, replay_error, written_ranges,
};
use crate::relaxed::state::incoming::{Incoming, IncomingQueue, IncomingWhat};
use crate::relaxed::state::limited::Limited;
use crate::relaxed::{RecoveryTrace, ReplayEvent};
use crate::runtime::CdRuntime;

/// The arrival key of the agreement of D on its preparation (no team has this id). One key
/// serves every limited re-execution: a rank of D removes the entry when its wait ends, before
/// the attempt's agreement of all ranks, which every later preparation follows.
const PREPARED: (u64, u64) = (u64::MAX, 0);

/// True if the entry is consumed by a limited re-execution whose D is `members`.
fn served_in_limited(e: &LogEntry, members: &[usize]) -> bool {
    let outside = |r: &usize| members.binary_search(r).is_err();
    match &e.kind {
        EntryKind::Write { target, .. }
        | EntryKind::Atomic { target, .. }
        | EntryKind::Rpc { target, .. } => outside(target),
        EntryKind::Read { source, .. } => outside(source),
        EntryKind::Fetch { rank, .. } => outside(rank),
        EntryKind::Collective { barrier, .. } => !barrier,
        EntryKind::Rng { .. } => true,
        EntryKind::Alloc { .. } | EntryKind::Privatized { .. } => false,
    }
}

/// What a loss took from the ranks of the strict CD, as every rank learned it from the
/// escalation's allgather (`dependencies::Record`).
#[derive(Debug)]
pub(crate) struct Losses {
    /// The ranks whose logs of the first execution a loss took (`Record::log_lost`), all in D
    /// (`dependencies::reexecution_set` put them and the ranks they wrote into there). Their
    /// writes are made again live, so they are not asked, and the IWCs they leave missing are
    /// accepted if no preserved copy can hold one of them. Such a rank itself re-executes with
    /// an empty first log: it has no operation with a rank outside D to serve.
    pub(crate) logs: Vec<usize>,
    /// The ranks that lost their memory and whose SPBC cluster re-executes
    /// (`Failure::ClusterLoss`): their logs came back from the buddy, but not the IWCs of
    /// their unlogged writes into their cluster, which are made again live; the IWCs they
    /// leave missing are accepted as for `logs`. Such a rank first writes back the writes
    /// from outside D that landed before the strict CD began (`replay::rebuild_before_begin`).
    pub(crate) cluster_memory: Vec<usize>,
}

/// Prepares this rank (in D) for the limited re-execution of `cd`: takes the first
/// execution's log, restores the preserved regions of the segment, rewinds the EC and
/// gathers the incoming writes from `writers`. An error means the limited re-execution
/// cannot be made correct (the caller agrees with the other ranks of D, and the next
/// attempt is the whole group's).
pub(crate) fn prepare(
    rt: &CdRuntime,
    cd: &Cd,
    members: Vec<usize>,
    writers: &[usize],
    losses: &Losses,
    accesses: &[Access],
) -> Result<(), String> {
    let frame: &Rc<Frame> = &cd.frame;
    let me = rt.rank;
    resilience::wait_for_acks();
    let lost_logs = &losses.logs[..];
    if let Some(r) = lost_logs.iter().find(|r| members.binary_search(r).is_err()) {
        return Err(format!(
            "rank {r} lost its log and is outside the re-executing ranks"
        ));
    }
    let mine_lost = lost_logs.contains(&me);
    let (store, own, ec_begin, iwc_begin, globals, barrier_ecs) = {
        let mut rx = frame.rx.borrow_mut();
        if let Some(why) = rx.log_lost.as_ref().filter(|_| !mine_lost) {
            return Err(format!(
                "this rank's log of the first execution is incomplete: {why}"
            ));
        }
        // The re-execution's log starts empty: whole again.
        rx.log_lost = None;
        (
            std::mem::take(&mut rx.store),
            std::mem::take(&mut rx.own_iwcs),
            rx.ec_begin,
            rx.iwc_begin,
            rx.globals.clone(),
            rx.deps.barrier_ecs.clone(),
        )
    };
    let mut old = if mine_lost {
        // What the loss left of it (the replicated part, if any) is no log of the whole
        // execution: nothing is served from it.
        Vec::new()
    } else {
        store
            .entries()
            .map_err(|e| format!("cannot read back the spilled log: {e}"))?
    };
    old.sort_by_key(|e| e.lsn);
    let served = old
        .iter()
        .filter(|e| served_in_limited(e, &members))
        .cloned()
        .collect();
    // Every member of the strict CD's team took the same results of its collectives (the
    // notes make sure of it: `Dependencies::log_served`); a member whose log is whole serves
    // them.
    let result_holder = match mine_lost {
        false => None,
        true => Some(
            (frame.team.members().iter().copied())
                .find(|r| *r != me && !lost_logs.contains(r))
                .ok_or("no other rank of the strict CD's team kept its log")?,
        ),
    };
    if losses.cluster_memory.contains(&me) {
        // Before the restore, which overrides them in the preserved regions.
        rebuild_before_begin(rt, frame, |r| members.binary_search(&r).is_ok())?;
    }
    *rt.relaxed.limited.borrow_mut() = Some(Limited::new(
        members.clone(),
        frame.team.clone(),
        old,
        served,
        result_holder,
    ));
    cd.restore_globals_now();
    let iwc_end = resilience::incoming_writes();
    resilience::set_epoch(ec_begin);
    let ask: Vec<usize> = (writers.iter().copied())
        .filter(|&r| r != me && !lost_logs.contains(&r))
        .collect();
    // This rank's own IWCs went with its log when it lost it.
    let own: &[u64] = if mine_lost { &[] } else { &own };
    let partial = mine_lost
        || (writers.iter()).any(|r| lost_logs.contains(r) || losses.cluster_memory.contains(r));
    let expect = match partial {
        true => gather::Expect::Acknowledged { own },
        false => gather::Expect::Complete { own },
    };
    let writes =
        gather::gather(rt, &ask, Vec::new(), iwc_begin, iwc_end, expect).map_err(|(e, _)| e)?;
    if partial {
        let gaps = crate::relaxed::epochs::missing(iwc_begin, iwc_end, &writes, own)?;
        if let Some((iwc, g)) =
            (gaps.iter()).find_map(|&i| globals.iter().find(|g| i <= g.iwc_after).map(|g| (i, g)))
        {
            return Err(format!(
                "the write with IWC {iwc}, made by a rank whose log is lost, may be in the \
                 preserved copy of `{}` already (it landed before the copy was taken), and \
                 its writer makes it again",
                g.name
            ));
        }
    }
    // Where the window's writes landed, for the rebuild of the bytes they overwrote.
    let window = written_ranges(&writes);
    let mut outside = Vec::new();
    let mut in_copy = Vec::new();
    for w in writes {
        let from_d = members.binary_search(&w.from).is_ok();
        if !from_d && matches!(w.what, IncomingWhat::Unlogged { .. }) {
            // D holds whole clusters: a writer outside D cannot be in this rank's cluster.
            return Err(crate::relaxed::epochs::unlogged(&w));
        }
        if let Some((offset, op)) = w.what.combining() {
            let Some(g) = globals.iter().find(|g| g.covers_word(offset)) else {
                return Err(format!(
                    "a combining write ({op:?} from rank {} at offset {offset}, IWC {}) \
                     landed in a region the CD does not preserve; re-executing would \
                     apply it twice",
                    w.from, w.iwc
                ));
            };
            if w.iwc <= g.iwc_after && (from_d || w.iwc > g.iwc_before) {
                // From D it is made again on top of a copy that holds it; from outside,
                // the copy may or may not hold it.
                return Err(format!(
                    "a combining write ({op:?} from rank {} at offset {offset}, IWC {}) \
                     is already in the preserved copy of `{}`",
                    w.from, w.iwc, g.name
                ));
            }
            if !from_d && w.iwc <= g.iwc_before {
                in_copy.push(w);
                continue;
            }
        }
        if let IncomingWhat::Rpc { name, .. } = &w.what {
            if !from_d {
                return Err(format!(
                    "rank {} (outside the re-executing ranks) ran the rpc `{name}` here (IWC \
                     {}); a dependency-limited re-execution does not replay incoming rpc \
                     requests",
                    w.from, w.iwc
                ));
            }
        }
        if !from_d {
            outside.push(w);
        }
    }
    let applied: Vec<&Incoming> = outside.iter().chain(&in_copy).collect();
    phases::check(&barrier_ecs, accesses, &applied)?;
    *rt.relaxed.trace.borrow_mut() = Some(RecoveryTrace {
        cd: frame.name.clone(),
        rank: me,
        ec_begin,
        iwc_begin,
        iwc_end,
        asked: ask,
        events: Vec::new(),
    });
    for w in in_copy {
        rt.relaxed.event(ReplayEvent::InCopy {
            from: w.from,
            iwc: w.iwc,
        });
    }
    // A rank running ahead may have written into this one before the strict CD began and
    // again inside its window, at the same bytes: the re-execution must find the first write.
    let restored: Vec<_> = globals.iter().map(|g| g.offset..g.offset + g.len).collect();
    rebuild_overwritten(rt, iwc_begin, window, &restored)?;
    rt.relaxed.replay_errors.borrow_mut().clear();
    *rt.relaxed.incoming.borrow_mut() = IncomingQueue::new(outside);
    apply_incoming(rt, Some(ec_begin));
    Ok(())
}

/// Gives up a prepared limited re-execution (some rank could not prepare): the whole group
/// re-executes instead.
pub(crate) fn abandon(rt: &CdRuntime) {
    rt.relaxed.limited.borrow_mut().take();
    *rt.relaxed.incoming.borrow_mut() = IncomingQueue::default();
    rt.relaxed.trace.borrow_mut().take();
    rt.relaxed.replay_errors.borrow_mut().clear();
}

/// The body starts: the hook serves its operations in the limited mode (`modes/limited.rs`).
pub(crate) fn start(rt: &CdRuntime) {
    if let Some(l) = rt.relaxed.limited.borrow_mut().as_mut() {
        l.start();
    }
}

/// The body returned: applies the incoming writes left, checks the log was used up, closes
/// the trace. Returns the errors found (any error fails the attempt).
pub(crate) fn end(rt: &CdRuntime, name: &str, level: usize) -> Vec<String> {
    let Some(l) = rt.relaxed.limited.borrow_mut().take() else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    if let Some((used, total, lsn)) = l.left_over() {
        errors.push(format!(
            "the limited re-execution ended after {used} of the {total} logged operations \
             with ranks outside it (next: LSN {lsn}): the body is not deterministic"
        ));
    }
    apply_incoming(rt, None);
    errors.extend(rt.relaxed.replay_errors.borrow_mut().drain(..));
    rt.relaxed.finish_trace();
    let mut stats = rt.stats.borrow_mut();
    let s = stats.entry(name, level);
    let (replayed, squashed) = l.counts();
    s.entries_replayed += replayed;
    s.writes_squashed += squashed;
    errors
}

/// In a limited re-execution whose body runs: whether `rank` re-executes too (`None`
/// outside one).
pub(crate) fn peer_live(rt: &CdRuntime, rank: usize) -> Option<bool> {
    let l = rt.relaxed.limited.borrow();
    let l = l.as_ref().filter(|l| l.active())?;
    Some(rank == rt.rank || l.members.binary_search(&rank).is_ok())
}

/// True while the body of a limited re-execution runs on this rank.
pub(crate) fn active(rt: &CdRuntime) -> bool {
    rt.relaxed
        .limited
        .borrow()
        .as_ref()
        .is_some_and(|l| l.active())
}

/// Where the next non-barrier collective's result on `team_id` comes from when this rank's
/// log is lost (`state::limited::Limited::next_collective`).
pub(crate) fn next_collective(rt: &CdRuntime, team_id: u64) -> Option<(usize, u64)> {
    rt.relaxed
        .limited
        .borrow_mut()
        .as_mut()?
        .next_collective(team_id)
}

/// The result of collective `k` (from 0) on the team `team_id` in the first execution of the
/// strict CD this rank re-executes or waits to agree on, from its log (a rank whose log is
/// lost asks, `next_collective`); `None` if the log does not hold it.
pub(crate) fn serve_collective(rt: &CdRuntime, team_id: u64, k: u64) -> Option<Bytes> {
    let nth = |entries: &mut dyn Iterator<Item = &LogEntry>| {
        entries
            .filter_map(|e| match &e.kind {
                EntryKind::Collective {
                    result,
                    barrier: false,
                    team,
                    ..
                } if *team == team_id => Some(result.clone()),
                _ => None,
            })
            .nth(k as usize)
            .flatten()
    };
    if let Ok(l) = rt.relaxed.limited.try_borrow() {
        if let Some(l) = l.as_ref() {
            // A rank of D: its first execution's log moved out of the CD, in LSN order.
            return nth(&mut l.old.iter());
        }
    }
    let lcsa = rt.lcsa();
    let rx = lcsa.rx.try_borrow().ok()?;
    let mut entries = rx.store.entries().ok()?;
    entries.sort_by_key(|e| e.lsn);
    nth(&mut entries.iter())
}

/// The next logged entry for an operation with a rank outside D (`None`: the log ran out).
pub(crate) fn next(rt: &CdRuntime) -> Option<LogEntry> {
    let mut l = rt.relaxed.limited.borrow_mut();
    l.as_mut()?.next()
}

/// Counts an entry served to the body, for the report.
pub(crate) fn count_served(rt: &CdRuntime) {
    if let Some(l) = rt.relaxed.limited.borrow_mut().as_mut() {
        l.count_served();
    }
}

/// Counts a write squashed, for the report.
pub(crate) fn count_squashed(rt: &CdRuntime) {
    if let Some(l) = rt.relaxed.limited.borrow_mut().as_mut() {
        l.count_squashed();
    }
}

/// A barrier among the re-executing ranks of the team `team_id` (the world's or the CD's).
pub(crate) fn barrier(rt: &CdRuntime, team_id: u64) {
    let next = rt
        .relaxed
        .limited
        .borrow_mut()
        .as_mut()
        .expect("a limited re-execution")
        .next_barrier(team_id);
    let Some((peers, seq)) = next else {
        replay_error(
            rt,
            "a barrier on a team other than the world's or the CD's: its re-executing \
             members are not known"
                .into(),
        );
        return;
    };
    debug_assert!(team_id != PREPARED.0, "a team with the reserved id");
    arrive_all(rt, (team_id, seq), &peers, false);
}

/// The synchronization of a collective on `team_id` whose result a log serves: a barrier among
/// the re-executing ranks of the team, in the sequence of its barriers; nothing on a team
/// other than the world's or the CD's, whose re-executing members are not known.
pub(crate) fn synchronize(rt: &CdRuntime, team_id: u64) {
    let next = (rt.relaxed.limited.borrow_mut().as_mut()).and_then(|l| l.next_barrier(team_id));
    if let Some((peers, seq)) = next {
        arrive_all(rt, (team_id, seq), &peers, false);
    }
}

/// The ranks of D (`members`, this rank among them) agree that each prepared (`ok`): true if
/// all did. Over the same arrival rpc as the barriers, among D only.
pub(crate) fn agree_prepared(rt: &CdRuntime, members: &[usize], ok: bool) -> bool {
    !arrive_all(rt, PREPARED, members, !ok) && ok
}

/// Tells the other ranks of `peers` that this rank arrived at `key` (and whether it
/// `failed`), waits until each of them arrived; true if one of them failed.
fn arrive_all(rt: &CdRuntime, key: (u64, u64), peers: &[usize], failed: bool) -> bool {
    let others: Vec<usize> = peers.iter().copied().filter(|&p| p != rt.rank).collect();
    if others.is_empty() {
        return false;
    }
    internal(|| {
        for &p in &others {
            pgas::rpc_ff(p, rt.relaxed.rpcs.arrive, (key.0, key.1, failed));
        }
    });
    let promise = Promise::new();
    let already = {
        let mut a = rt.relaxed.arrivals.borrow_mut();
        a.entry(key).or_default().wait_on(promise.clone())
    };
    if already < others.len() {
        promise.require_anonymous(others.len() - already);
    }
    internal(|| promise.finalize().wait());
    rt.relaxed
        .arrivals
        .borrow_mut()
        .remove(&key)
        .is_some_and(|a| a.failed())
}

/// Another rank arrived at limited barrier `(team_id, seq)`, or at D's agreement on its
/// preparation, having `failed` it (served from progress).
pub(crate) fn arrive(rt: &CdRuntime, team_id: u64, seq: u64, failed: bool) {
    let mut a = rt.relaxed.arrivals.borrow_mut();
    a.entry((team_id, seq)).or_default().arrived(failed);
}
