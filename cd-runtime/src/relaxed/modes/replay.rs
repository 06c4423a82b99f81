//! Replay mode: the recovering CD's log serves the re-executed body, one entry per
//! operation in LSN order (`replay.rs` hands out the entries and switches to forward mode
//! when they run out). Reads, atomics' results, rpc replies, fetches, collectives,
//! allocations and `cd::rng()` draws come from the entry; puts are squashed. An operation
//! that does not match its entry is non-determinism: a replay error, and an answer that
//! neither sends a wrong write nor blocks (reads get zeros, a barrier is skipped).

use gasnet_bridge::{AtomicOp, AtomicResult, WriteAck};
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, CollectiveKind, Fetch, FetchAction,
    GetAction, OpId, PutAction, Rma, RpcAction, RpcCall,
};

use crate::relaxed::ReplayEvent;
use crate::relaxed::log_store::{EntryKind, LogEntry, LoggedOp};
use crate::relaxed::modes::Mode;
use crate::relaxed::modes::squash::squash;
use crate::relaxed::replay::replay_error;
use crate::runtime::CdRuntime;

/// Serves one operation from `entry`, the recovering CD's next logged entry.
pub(crate) struct Replaying {
    /// The entry the operation must match; it is consumed whether it does or not.
    pub(crate) entry: LogEntry,
}

/// Counts the entry served and traces it.
fn served(rt: &CdRuntime, lsn: u64, what: &'static str) {
    if let Some(r) = rt.relaxed.replay.borrow_mut().as_mut() {
        r.replayed += 1;
    }
    rt.relaxed.event(ReplayEvent::Served { lsn, what });
}

fn describe(e: &LogEntry) -> String {
    match &e.kind {
        EntryKind::Write { target, offset, .. } => {
            format!("a put to rank {target} at offset {offset}")
        }
        EntryKind::Read { source, offset, .. } => {
            format!("a get from rank {source} at offset {offset}")
        }
        EntryKind::Atomic { target, op, .. } => format!("an atomic {op:?} on rank {target}"),
        EntryKind::Rpc { target, name, .. } => format!("an rpc `{name}` to rank {target}"),
        EntryKind::Fetch { rank, .. } => format!("a fetch from rank {rank}"),
        EntryKind::Collective { .. } => "a collective".into(),
        EntryKind::Rng { .. } => "an rng draw".into(),
        EntryKind::Alloc { size, .. } => format!("an allocation of {size} bytes"),
        EntryKind::Privatized { offset, .. } => format!("a privatized region at {offset}"),
    }
}

impl Replaying {
    /// Records that the body did `doing` where the log holds another operation.
    fn diverged(&self, rt: &CdRuntime, doing: String) {
        replay_error(
            rt,
            format!(
                "the re-execution did {doing} where the log (LSN {}) has {}: the body is not \
                 deterministic",
                self.entry.lsn,
                describe(&self.entry)
            ),
        );
    }
}

impl Mode for Replaying {
    fn put(&self, rt: &CdRuntime, _id: OpId, rma: &Rma, bytes: &[u8]) -> PutAction {
        if squash(rt, rma, bytes, &self.entry) {
            if let Some(r) = rt.relaxed.replay.borrow_mut().as_mut() {
                r.squashed += 1;
            }
        } else {
            self.diverged(
                rt,
                format!("a put to rank {} at offset {}", rma.rank, rma.offset),
            );
        }
        // Never send: the target already holds this write (or, after a divergence, must not
        // get a wrong one).
        PutAction::Suppress
    }

    fn get(&self, rt: &CdRuntime, _id: OpId, rma: &Rma, dst: &mut [u8]) -> GetAction {
        match self.entry.read_from(rma.rank, rma.offset, dst.len()) {
            Some(bytes) => {
                dst.copy_from_slice(bytes);
                served(rt, self.entry.lsn, "read");
            }
            None => {
                self.diverged(
                    rt,
                    format!("a get from rank {} at offset {}", rma.rank, rma.offset),
                );
                dst.fill(0);
            }
        }
        GetAction::Served
    }

    fn rpc(&self, rt: &CdRuntime, _id: OpId, call: &RpcCall, args: &[u8]) -> RpcAction {
        let Some((logged, reply)) = self.entry.rpc_to(call.rank, call.name) else {
            self.diverged(rt, format!("an rpc `{}` to rank {}", call.name, call.rank));
            return RpcAction::Served(Vec::new());
        };
        if logged != args {
            replay_error(
                rt,
                format!(
                    "rpc `{}` to rank {} (LSN {}) has other arguments than logged: the body is \
                     not deterministic",
                    call.name, call.rank, self.entry.lsn
                ),
            );
        }
        served(rt, self.entry.lsn, "rpc reply");
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
        let Some((previous, counters)) = self.entry.atomic_on(rank, offset, logged_op) else {
            self.diverged(rt, format!("an atomic {logged_op:?} on rank {rank}"));
            return AtomicAction::Served(AtomicResult {
                previous: 0,
                ack: None,
            });
        };
        served(rt, self.entry.lsn, "atomic");
        AtomicAction::Served(AtomicResult {
            previous,
            ack: counters.map(|c| WriteAck {
                ec: c.ec,
                iwc: c.iwc,
            }),
        })
    }

    fn fetch(&self, rt: &CdRuntime, _id: OpId, fetch: &Fetch) -> FetchAction {
        let Some(bytes) = self.entry.fetch_of(fetch.rank, fetch.object) else {
            self.diverged(rt, format!("a fetch from rank {}", fetch.rank));
            return FetchAction::Proceed;
        };
        served(rt, self.entry.lsn, "fetch");
        FetchAction::Served(bytes)
    }

    fn collective(&self, rt: &CdRuntime, _id: OpId, collective: &Collective) -> CollectiveAction {
        let Some(result) = self.entry.collective_result() else {
            self.diverged(rt, "a collective".into());
            // A barrier can be skipped safely; others would hang if joined.
            if collective.kind == CollectiveKind::Barrier {
                return CollectiveAction::Served(Vec::new());
            }
            return CollectiveAction::Proceed;
        };
        served(rt, self.entry.lsn, "collective");
        CollectiveAction::Served(result)
    }

    fn alloc(&self, rt: &CdRuntime, size: usize) -> AllocAction {
        // Either way `after_alloc` logs nothing: a replayed operation is not logged again,
        // and after a divergence the recovery fails anyway.
        rt.relaxed.alloc_served.set(true);
        match &self.entry.kind {
            EntryKind::Alloc { offset, size: s } if *s == size => {
                served(rt, self.entry.lsn, "allocation");
                AllocAction::At(*offset)
            }
            _ => {
                self.diverged(rt, format!("an allocation of {size} bytes"));
                AllocAction::Proceed
            }
        }
    }

    fn rng(&self, rt: &CdRuntime, dst: &mut [u8], draw: &mut dyn FnMut(&mut [u8])) {
        if let Some(bytes) = self.entry.rng_of(dst.len()) {
            dst.copy_from_slice(bytes);
            served(rt, self.entry.lsn, "rng draw");
            return;
        }
        self.diverged(rt, "an rng draw".into());
        draw(dst);
    }
}
