//! Limited mode: in a dependency-limited re-execution (`limited.rs`), an operation with a
//! rank outside the re-executing set D is served from this rank's log of the first
//! execution, in LSN order: reads, atomics' results, rpc replies, fetches, non-barrier
//! collectives and `cd::rng()` draws come from the entry, puts are squashed; a barrier runs
//! among the ranks of D in its team. A rank whose log a loss took has no operation with a rank
//! outside D; its collectives' results come from another member's log. An operation the log
//! does not hold is non-determinism: the attempt fails, and the next one re-executes the
//! whole group.

use gasnet_bridge::{AtomicOp, AtomicResult, WriteAck};
use pgas::runtime_hooks::internal;
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, CollectiveKind, Fetch, FetchAction,
    GetAction, OpId, PutAction, Rma, RpcAction, RpcCall,
};

use crate::relaxed::ReplayEvent;
use crate::relaxed::limited::{
    barrier, count_served, count_squashed, next, next_collective, synchronize,
};
use crate::relaxed::log_store::{LogEntry, LoggedOp};
use crate::relaxed::modes::Mode;
use crate::relaxed::modes::squash::squash;
use crate::relaxed::replay::replay_error;
use crate::runtime::CdRuntime;

/// Serves an operation with a rank outside D from the first execution's log.
pub(crate) struct LimitedMode;

/// Records that the body did `doing` where the log holds `e` (or nothing more).
fn unexpected(rt: &CdRuntime, doing: String, e: Option<&LogEntry>) {
    let logged = e.map_or("nothing more".to_string(), |e| format!("LSN {}", e.lsn));
    replay_error(
        rt,
        format!(
            "the limited re-execution did {doing} where the log has {logged}: the body is \
             not deterministic"
        ),
    );
}

/// Counts the entry served and traces it.
fn served(rt: &CdRuntime, lsn: u64, what: &'static str) {
    count_served(rt);
    rt.relaxed.event(ReplayEvent::Served { lsn, what });
}

/// The LSN of `e`, for events (0 when the log ran out).
fn lsn(e: Option<&LogEntry>) -> u64 {
    e.map_or(0, |e| e.lsn)
}

impl Mode for LimitedMode {
    fn put(&self, rt: &CdRuntime, _id: OpId, rma: &Rma, bytes: &[u8]) -> PutAction {
        let e = next(rt);
        if e.as_ref().is_some_and(|e| squash(rt, rma, bytes, e)) {
            count_squashed(rt);
        } else {
            unexpected(
                rt,
                format!("a put to rank {} at offset {}", rma.rank, rma.offset),
                e.as_ref(),
            );
        }
        PutAction::Suppress
    }

    fn get(&self, rt: &CdRuntime, _id: OpId, rma: &Rma, dst: &mut [u8]) -> GetAction {
        let e = next(rt);
        match e
            .as_ref()
            .and_then(|e| e.read_from(rma.rank, rma.offset, dst.len()))
        {
            Some(bytes) => {
                dst.copy_from_slice(bytes);
                served(rt, lsn(e.as_ref()), "read");
            }
            None => {
                unexpected(
                    rt,
                    format!("a get from rank {} at offset {}", rma.rank, rma.offset),
                    e.as_ref(),
                );
                dst.fill(0);
            }
        }
        GetAction::Served
    }

    fn rpc(&self, rt: &CdRuntime, _id: OpId, call: &RpcCall, args: &[u8]) -> RpcAction {
        let e = next(rt);
        let Some((logged, reply)) = e.as_ref().and_then(|e| e.rpc_to(call.rank, call.name)) else {
            unexpected(
                rt,
                format!("an rpc `{}` to rank {}", call.name, call.rank),
                e.as_ref(),
            );
            return RpcAction::Served(Vec::new());
        };
        if logged != args {
            replay_error(
                rt,
                format!(
                    "rpc `{}` to rank {} has other arguments than logged",
                    call.name, call.rank
                ),
            );
        }
        served(rt, lsn(e.as_ref()), "rpc reply");
        RpcAction::Served(reply)
    }

    fn atomic(
        &self,
        rt: &CdRuntime,
        _id: OpId,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> AtomicAction {
        let logged_op = LoggedOp::from(op);
        let e = next(rt);
        let Some((previous, counters)) = e
            .as_ref()
            .and_then(|e| e.atomic_on(rank, offset, logged_op))
        else {
            unexpected(
                rt,
                format!("an atomic {logged_op:?} on rank {rank}"),
                e.as_ref(),
            );
            return AtomicAction::Served(AtomicResult {
                previous: 0,
                ack: None,
            });
        };
        served(rt, lsn(e.as_ref()), "atomic");
        AtomicAction::Served(AtomicResult {
            previous,
            ack: counters.map(|c| WriteAck {
                ec: c.ec,
                iwc: c.iwc,
            }),
        })
    }

    fn fetch(&self, rt: &CdRuntime, _id: OpId, f: &Fetch) -> FetchAction {
        let e = next(rt);
        let Some(bytes) = e.as_ref().and_then(|e| e.fetch_of(f.rank, f.object)) else {
            unexpected(rt, format!("a fetch from rank {}", f.rank), e.as_ref());
            return FetchAction::Proceed;
        };
        served(rt, lsn(e.as_ref()), "fetch");
        FetchAction::Served(bytes)
    }

    fn collective(&self, rt: &CdRuntime, _id: OpId, c: &Collective) -> CollectiveAction {
        if c.kind == CollectiveKind::Barrier {
            barrier(rt, c.team);
            return CollectiveAction::Served(Vec::new());
        }
        let result = logged_result(rt, c);
        // Its result comes from a log, but it still orders the accesses of the ranks of D
        // before it against theirs after it, as it did in the first execution. After the
        // result: a rank of D that holds it for this one cannot pass this point before.
        synchronize(rt, c.team);
        CollectiveAction::Served(result)
    }

    /// Allocations are live in a limited re-execution: the hook does not choose this mode
    /// for them (a relaxed CD replaying inside it serves them from its own log).
    fn alloc(&self, _rt: &CdRuntime, _size: usize) -> AllocAction {
        AllocAction::Proceed
    }

    fn rng(&self, rt: &CdRuntime, dst: &mut [u8], _draw: &mut dyn FnMut(&mut [u8])) {
        let e = next(rt);
        match e.as_ref().and_then(|e| e.rng_of(dst.len())) {
            Some(bytes) => {
                dst.copy_from_slice(bytes);
                served(rt, lsn(e.as_ref()), "rng draw");
            }
            None => {
                unexpected(rt, "an rng draw".into(), e.as_ref());
                dst.fill(0);
            }
        }
    }
}

/// The result of the collective `c` from the first execution's log (this rank's, or, when it
/// lost it, another member's).
fn logged_result(rt: &CdRuntime, c: &Collective) -> Vec<u8> {
    if let Some((holder, k)) = next_collective(rt, c.team) {
        // This rank's log is lost: the result every member got, from one that kept it.
        let got =
            internal(|| pgas::rpc(holder, rt.relaxed.rpcs.collective_result, (c.team, k)).wait());
        let Some(result) = got else {
            replay_error(
                rt,
                format!(
                    "rank {holder}'s log holds no collective {k} on team {}",
                    c.team
                ),
            );
            panic!(
                "rank {}: a limited re-execution met a collective that rank {holder}'s log does \
                 not hold (the body is not deterministic); set dependency_tracking = false for \
                 this CD",
                rt.rank
            );
        };
        count_served(rt);
        return result.0;
    }
    let e = next(rt);
    // Barrier entries are not served from the log, so any collective entry is this one.
    let Some(result) = e.as_ref().and_then(LogEntry::collective_result) else {
        // Joining it would wait for ranks that are not re-executing, and no result can be made
        // up. Unreachable for a deterministic body: every non-barrier collective of a tracking
        // CD's body is logged (or the rank is `unlogged` and D is everyone).
        unexpected(rt, "a collective".into(), e.as_ref());
        panic!(
            "rank {}: a limited re-execution met a collective its log does not hold (the body \
             is not deterministic); set dependency_tracking = false for this CD",
            rt.rank
        );
    };
    served(rt, lsn(e.as_ref()), "collective");
    result
}
