//! SPBC clusters of relaxed CDs (the seed's "logging only between clusters"; `cluster` in the
//! configuration): accesses between two ranks of one cluster are performed unlogged, and a
//! failure of a relaxed CD re-executes its rank's whole cluster instead of replaying alone.
//!
//! The failed rank's incoming writes from its cluster are in no log, so neither its replay
//! nor a rank-loss recovery from buddy logs can rebuild them: the relaxed CD escalates at
//! once (`run.rs`), and the LCSA re-executes the cluster by the dependency-limited
//! re-execution (`limited.rs`), whose D holds whole clusters (`dependencies.rs`): operations
//! among D run live, and the writes from outside D, which are logged, are applied epoch by
//! epoch.
//!
//! What is kept of an unlogged write is its IWC at the target (`ClusterWrite`), a few words
//! per write, no bytes: the target's gather (`gather.rs`) gets it as an `Unlogged` write, so
//! its gap check still proves that every write from outside the cluster was found; a
//! recovery that would have to apply one refuses (`epochs::unlogged`).

use std::rc::Rc;

use gasnet_bridge::WriteAck;

use crate::frame::Frame;
use crate::relaxed::state::incoming::{Incoming, IncomingWhat};
use crate::runtime::CdRuntime;

/// True if `rank` is another rank of this rank's cluster (never without clusters).
pub(crate) fn same(rt: &CdRuntime, rank: usize) -> bool {
    let c = rt.config.cluster;
    c.is_on() && rank != rt.rank && c.of(rank) == c.of(rt.rank)
}

/// True if this rank's cluster holds another rank: its relaxed CDs cannot recover alone.
pub(crate) fn spans_others(rt: &CdRuntime) -> bool {
    (0..pgas::rank_n()).any(|r| same(rt, r))
}

/// True if this rank's cluster holds every rank of `members` (at least one other): a failure
/// re-executes them all, so nothing needs logging.
pub(crate) fn holds_team(rt: &CdRuntime, members: &[usize]) -> bool {
    let c = rt.config.cluster;
    c.is_on() && members.len() > 1 && members.iter().all(|&r| c.of(r) == c.of(rt.rank))
}

/// The ack of a write into `rank` came: if `rank` is of this cluster, keeps the target's
/// counters in its note (searched from the innermost CD out, newest first: a child CD may have
/// begun since the write left).
pub(crate) fn acked(rt: &CdRuntime, op: u64, rank: usize, ack: WriteAck) {
    if !same(rt, rank) {
        return;
    }
    let frames: Vec<Rc<Frame>> = rt.frames.borrow().clone();
    for f in frames.iter().rev() {
        let mut rx = f.rx.borrow_mut();
        if let Some(w) = rx.cluster.writes.iter_mut().rev().find(|w| w.op == op) {
            w.counters = Some((ack.ec, ack.iwc));
            return;
        }
    }
}

/// Serves a gather from `target`: this rank's unlogged writes into it with IWC in
/// `(iwc_begin, iwc_end]` (as `Unlogged` writes), how many still wait for their ack, and how
/// many landed uncounted.
pub(crate) fn serve(
    rt: &CdRuntime,
    frames: &[Rc<Frame>],
    target: usize,
    iwc_begin: u64,
    iwc_end: u64,
    out: &mut Vec<Incoming>,
) -> (u64, u64) {
    let (mut pending, mut uncounted) = (0, 0);
    for fr in frames {
        let Ok(rx) = fr.rx.try_borrow() else {
            continue;
        };
        for w in rx.cluster.writes.iter().filter(|w| w.target == target) {
            match w.counters {
                None => pending += 1,
                Some((_, 0)) => uncounted += 1,
                Some((ec, iwc)) if iwc > iwc_begin && iwc <= iwc_end => out.push(Incoming {
                    from: rt.rank,
                    ec,
                    iwc,
                    what: IncomingWhat::Unlogged { atomic: w.atomic },
                }),
                Some(_) => {}
            }
        }
    }
    (pending, uncounted)
}
