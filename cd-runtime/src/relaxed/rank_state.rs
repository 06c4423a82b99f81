//! The relaxed-CD state of one rank (`CdRuntime::relaxed`): logging depth, LSNs, the replay
//! and the limited re-execution in progress, the incoming writes still to apply, recovery
//! traces, the hook and its users, writer marks and fences, and the handles of the relaxed
//! rpc functions. State only: the mechanisms that change it are the other files here.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use pgas::RpcFn;

use crate::buddy::Bytes;

use crate::relaxed::state::fenced::Fenced;
use crate::relaxed::state::incoming::{Incoming, IncomingQueue};
use crate::relaxed::state::limited::{Arrival, Limited};
use crate::relaxed::state::replay::Replay;
use crate::relaxed::state::rerunning::Rerunning;
use crate::relaxed::state::unflushed_reads::UnflushedReads;
use crate::relaxed::trace::{RecoveryTrace, ReplayEvent};
use crate::relaxed::writers;

/// Traces kept per rank (the most recent ones).
const TRACES_KEPT: usize = 64;

/// The pgas hook of relaxed CDs (its `Interceptor` impl is `interceptor.rs`); its state is
/// the rank's [`RankState`].
#[derive(Debug, Default)]
pub struct RelaxedHook;

/// The relaxed-CD state of one rank.
pub(crate) struct RankState {
    /// Relaxed CDs running on this rank that log (the hook is installed while > 0).
    pub(crate) logging_depth: Cell<usize>,
    /// Relaxed CDs running on this rank (logging or not).
    pub(crate) depth: Cell<usize>,
    /// Next LSN.
    pub(crate) lsn: Cell<u64>,
    /// The replay of the recovering CD, while its log lasts.
    pub(crate) replay: RefCell<Option<Replay>>,
    /// Incoming writes still to apply (they outlive the log when it runs out early).
    pub(crate) incoming: RefCell<IncomingQueue>,
    /// Errors found while replaying (squash mismatches), for the recovering CD.
    pub(crate) replay_errors: RefCell<Vec<String>>,
    /// The incoming rpc request whose function is being run again, if any.
    pub(crate) rerunning: RefCell<Option<Rerunning>>,
    /// The trace being written and the finished ones.
    pub(crate) trace: RefCell<Option<RecoveryTrace>>,
    pub(crate) traces: RefCell<Vec<RecoveryTrace>>,
    /// An allocation's address was just served from the log (its `after_alloc` logs nothing).
    pub(crate) alloc_served: Cell<bool>,
    pub(crate) hook: RefCell<Option<Rc<RelaxedHook>>>,
    /// Users of the hook: logging relaxed CDs and tracking strict CDs running on the rank
    /// (installed while > 0).
    pub(crate) hook_users: Cell<usize>,
    /// Strict CDs with `dependency_tracking` running on this rank (their bodies' operations
    /// are noted while > 0).
    pub(crate) tracking: Cell<usize>,
    /// The strict CDs (name, level) of which an instance held relaxed CDs on some rank of
    /// its team (learned from their agreements, so the same on every member): with
    /// `dependency_tracking` unset, their next instances track. By level, then name, so a
    /// CD's begin looks its name up without building a key.
    pub(crate) groups:
        RefCell<std::collections::BTreeMap<usize, std::collections::BTreeSet<String>>>,
    /// The dependency-limited re-execution this rank takes part in, if any.
    pub(crate) limited: RefCell<Option<Limited>>,
    /// The rank lost its memory and has not fetched its log replicas back yet: gathers are
    /// answered "ask again" meanwhile.
    pub(crate) restoring: Cell<bool>,
    /// Next key of a log replica at the buddy.
    pub(crate) log_key: Cell<u64>,
    /// Relaxed CDs running on this rank whose log is durable at every operation
    /// (`durable.rs` flushes only while > 0).
    pub(crate) durable: Cell<usize>,
    /// Results of effects (atomics, rpcs, collectives) arrived that the buddy lacks: flushed
    /// before the next operation (`durable.rs`).
    pub(crate) flush_due: Cell<bool>,
    /// Remote bytes read since the last flush (`durable.rs`): a put over them flushes first.
    pub(crate) unflushed_reads: UnflushedReads,
    /// The LSN of the atomic or rpc this rank logged and has not sent yet (it flushes its log
    /// or waits at its target's fence first): no drain waits for it (`gather.rs`).
    pub(crate) unsent: Cell<Option<u64>>,
    /// Relaxed CD executions with faults armed at their operations (`op_fault.rs` counts
    /// operations only while > 0).
    pub(crate) op_faults_armed: Cell<usize>,
    /// Arrivals at limited barriers, by (team id, sequence number).
    pub(crate) arrivals: RefCell<std::collections::HashMap<(u64, u64), Arrival>>,
    pub(crate) rpcs: RelaxedRpcs,
    /// Who wrote into this rank, so that a recovery asks only them.
    pub(crate) writers: writers::WriterMarks,
    /// The ranks whose recovery fence this rank must check before writing into them.
    pub(crate) fenced: Fenced,
}

impl RankState {
    /// The state of a rank at launch: collective (the writer marks' tables).
    pub(crate) fn new(rpcs: RelaxedRpcs) -> RankState {
        RankState {
            logging_depth: Cell::new(0),
            depth: Cell::new(0),
            lsn: Cell::new(0),
            replay: RefCell::new(None),
            incoming: RefCell::new(IncomingQueue::default()),
            replay_errors: RefCell::new(Vec::new()),
            rerunning: RefCell::new(None),
            trace: RefCell::new(None),
            traces: RefCell::new(Vec::new()),
            alloc_served: Cell::new(false),
            hook: RefCell::new(None),
            hook_users: Cell::new(0),
            tracking: Cell::new(0),
            groups: RefCell::new(std::collections::BTreeMap::new()),
            limited: RefCell::new(None),
            restoring: Cell::new(false),
            log_key: Cell::new(0),
            durable: Cell::new(0),
            flush_due: Cell::new(false),
            unflushed_reads: UnflushedReads::default(),
            unsent: Cell::new(None),
            op_faults_armed: Cell::new(0),
            arrivals: RefCell::new(std::collections::HashMap::new()),
            rpcs,
            writers: writers::WriterMarks::new(),
            fenced: Fenced::default(),
        }
    }

    /// The next LSN.
    pub(crate) fn next_lsn(&self) -> u64 {
        let l = self.lsn.get();
        self.lsn.set(l + 1);
        l
    }

    /// Installs the relaxed hook for one more user (a logging relaxed CD, a tracking strict
    /// CD).
    pub(crate) fn acquire_hook(&self) {
        let n = self.hook_users.get();
        self.hook_users.set(n + 1);
        if n == 0 {
            let hook = self
                .hook
                .borrow_mut()
                .get_or_insert_with(|| Rc::new(RelaxedHook))
                .clone();
            pgas::runtime_hooks::set_hook(hook);
        }
    }

    /// One user less; the hook goes with the last one.
    pub(crate) fn release_hook(&self) {
        let n = self.hook_users.get() - 1;
        self.hook_users.set(n);
        if n == 0 {
            pgas::runtime_hooks::clear_hook();
        }
    }

    /// Adds an event to the current recovery's trace, if one is being written.
    pub(crate) fn event(&self, e: ReplayEvent) {
        if let Some(t) = self.trace.borrow_mut().as_mut() {
            t.events.push(e);
        }
    }

    /// Closes the current trace.
    pub(crate) fn finish_trace(&self) {
        if let Some(t) = self.trace.borrow_mut().take() {
            let mut all = self.traces.borrow_mut();
            if all.len() == TRACES_KEPT {
                all.remove(0);
            }
            all.push(t);
        }
    }
}

/// The writes asked for, how many writes into the asker still wait for their ack, and how
/// many the logs hold that the asker did not count (it had not switched counting on).
pub(crate) type GatherReply = (Vec<Incoming>, u64, u64);

/// A class check: (asker rank, asker CD, offset, len) → the touched region, as (declaring
/// CD, "class:region").
pub(crate) type CheckRequest = (usize, String, usize, usize);
pub(crate) type CheckReply = Option<(String, String)>;

/// The rpc functions of relaxed CDs (the runtime's own traffic, always `internal`).
#[derive(Clone, Copy)]
pub(crate) struct RelaxedRpcs {
    /// (target, iwc_begin, iwc_end): the writes into `target` with IWC in that range from
    /// this rank's logs, with the counts of [`GatherReply`].
    pub(crate) gather: RpcFn<(usize, u64, u64), GatherReply>,
    /// (asker rank, asker CD, offset, len): the declared private/privatized region of this
    /// rank the access touches, if any, as (this rank's CD, region name).
    pub(crate) check: RpcFn<CheckRequest, CheckReply>,
    /// (team id, sequence number): the sender reached that limited barrier.
    pub(crate) arrive: RpcFn<(u64, u64, bool), ()>,
    /// (target): `target` raised its recovery fence; the answer is how many of this rank's
    /// writes into it wait for their ack (`fence.rs`).
    pub(crate) fence: RpcFn<usize, u64>,
    /// (team id, k): the result of this rank's k-th non-barrier collective on that team in
    /// the first execution of the strict CD being re-executed (`limited::serve_collective`).
    pub(crate) collective_result: RpcFn<(u64, u64), Option<Bytes>>,
}
