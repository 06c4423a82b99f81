//! Relaxed Containment Domains: CDs that recover alone, by replaying logged communication
//! (the protocol of RELAXED_CDS.md; told in prose in `relaxed/README.md`).
//!
//! A relaxed CD is a child of a strict CD (its LCSA, the lowest strict ancestor) or of
//! another relaxed CD. While one runs on a rank, the rank's pgas hook logs every remote
//! operation into the CD's log store ([`log_store`]); a failed relaxed CD restores its
//! preserved state and re-executes in replay mode ([`replay`], [`interceptor`]), applying the
//! writes other ranks made into it epoch by epoch ([`epochs`]), while every other rank keeps
//! running. Beginning and completing a relaxed CD involve no communication.

pub mod classes;
pub mod dependencies;
pub(crate) mod epochs;
pub(crate) mod fence;
pub(crate) mod incoming_rpc;
pub(crate) mod interceptor;
pub(crate) mod limited;
pub(crate) mod log_store;
pub(crate) mod logging;
pub(crate) mod modes;
pub(crate) mod replay;
pub(crate) mod replica;
pub(crate) mod run;
pub(crate) mod shadow;
pub(crate) mod writers;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use pgas::{RpcFn, RpcTable};

use crate::relaxed::classes::Region;
use crate::relaxed::epochs::{Incoming, IncomingQueue};
use crate::relaxed::interceptor::RelaxedHook;
use crate::relaxed::log_store::LogStore;
use crate::relaxed::replay::Replay;
use crate::runtime;

pub use classes::ClassificationError;
pub use run::relaxed;

/// The relaxed-CD part of a CD on this rank (strict CDs use only the store, which receives
/// their relaxed children's logs).
/// A region of this rank's segment a relaxed CD preserved with `preserve_global`, with the
/// IWC read just before and just after its copy was taken.
///
/// Why the IWC window: a write that lands after the CD began but before the copy is both in
/// the copy and in the incoming-write log. Replaying a replacing write again is harmless; a
/// combining one (an atomic add) would count twice. Writes counted at or before `iwc_before`
/// had fully landed before the copy started (the IWC counts a write after its bytes are in
/// place), so a recovery skips the combining ones among them; one counted inside the window
/// may or may not be in the copy, so a recovery that meets one refuses.
#[derive(Debug, Clone)]
pub(crate) struct PreservedRegion {
    pub(crate) name: String,
    /// Byte offset and length in this rank's segment.
    pub(crate) offset: usize,
    pub(crate) len: usize,
    pub(crate) iwc_before: u64,
    pub(crate) iwc_after: u64,
}

impl PreservedRegion {
    /// True if the 8-byte word at `offset` lies inside the region.
    pub(crate) fn covers_word(&self, offset: usize) -> bool {
        offset >= self.offset && offset + 8 <= self.offset + self.len
    }
}

#[derive(Debug, Default)]
pub(crate) struct RelaxedFrame {
    /// The CD's log store.
    pub(crate) store: LogStore,
    /// EC and IWC at the CD's begin.
    pub(crate) ec_begin: u64,
    pub(crate) iwc_begin: u64,
    /// Regions of this rank's segment the CD preserved with `preserve_global`, restored at
    /// once when recovery starts.
    pub(crate) globals: Vec<PreservedRegion>,
    /// Names of `globals` restored when the current recovery began.
    pub(crate) eager_restored: std::collections::HashSet<String>,
    /// IWC values of writes this rank made into itself (not in any initiator's log).
    pub(crate) own_iwcs: Vec<u64>,
    /// Regions declared private (kept until the LCSA completes: "no other CD touches the
    /// data until the relaxed group completes").
    pub(crate) private: Vec<Region>,
    /// Regions declared privatized (private while this CD runs).
    pub(crate) privatized: Vec<Region>,
    /// Privatized regions this execution computes in shadow memory (a completed CD
    /// re-executed inside an enclosing replay), freed when the execution ends.
    pub(crate) shadows: Vec<shadow::Shadow>,
    /// What this execution logged so far, added to the report when it ends (a lookup of the
    /// report's table per operation cost more than the logging itself).
    pub(crate) logged: LoggedCounts,
    /// Classification errors found in this CD's accesses.
    pub(crate) class_errors: Vec<ClassificationError>,
    /// Blocks whose `delete_` was deferred during this CD (its relaxed children's pushed
    /// up): a re-execution cancels these deferrals, since it frees the blocks again.
    pub(crate) deferred: Vec<usize>,
    /// A relaxed CD ran inside this (strict) CD: deferred frees and logs to clean up.
    pub(crate) had_relaxed: bool,
    /// For a strict CD with `dependency_tracking`: the ranks this rank read from and wrote
    /// into during the current execution.
    pub(crate) deps: dependencies::Dependencies,
    /// What of `store`, `own_iwcs` and `deps` the buddy holds (`log_medium = "buddy"`).
    pub(crate) replica: replica::Replicated,
    /// Why this CD's log is incomplete: a rank loss took entries (or dependency notes) that
    /// no replica held. Cleared with the log (`clear`).
    pub(crate) log_lost: Option<String>,
}

/// Entries and bytes a CD's execution logged, and the time spent ([`crate::clock`] ticks).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LoggedCounts {
    pub(crate) entries: u64,
    pub(crate) bytes: u64,
    pub(crate) ticks: u64,
}

impl RelaxedFrame {
    /// Forgets everything logged inside (a strict CD completes or re-executes); returns the
    /// keys of the log's replicas at the buddy, which the caller forgets there
    /// ([`replica::forget`]).
    #[must_use = "the buddy still holds the replicas: pass the keys to replica::forget"]
    pub(crate) fn clear(&mut self) -> Vec<u64> {
        self.store.clear();
        self.own_iwcs.clear();
        self.private.clear();
        self.privatized.clear();
        self.class_errors.clear();
        self.deferred.clear();
        self.deps = dependencies::Dependencies::default();
        self.log_lost = None;
        std::mem::take(&mut self.replica).keys
    }

    /// Cancels the frees deferred during a failed execution of this CD (the re-execution
    /// frees those blocks again; a second `delete_` of a deferred block is an error), except
    /// the blocks in `keep`.
    pub(crate) fn cancel_deferred(&mut self, keep: &[usize]) -> Result<(), String> {
        for offset in std::mem::take(&mut self.deferred) {
            if keep.contains(&offset) {
                continue;
            }
            pgas::resilience::cancel_deferred_free(offset)
                .map_err(|e| format!("cannot cancel the deferred free at {offset}: {e}"))?;
        }
        Ok(())
    }
}

/// One event of a recovery, in the order it happened (for tests and diagnostics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayEvent {
    /// An incoming write applied: its initiator, EC and IWC.
    Incoming {
        /// The initiator rank.
        from: usize,
        /// Its epoch at the target.
        ec: u64,
        /// Its IWC at the target.
        iwc: u64,
    },
    /// An incoming rpc request replayed: its function ran again (a result other than the
    /// logged reply is a replay error).
    IncomingRpc {
        /// The initiator rank.
        from: usize,
        /// Its epoch at the target.
        ec: u64,
        /// Its IWC at the target.
        iwc: u64,
        /// The function's registered name.
        name: String,
    },
    /// An incoming combining write that had landed before the CD's copy of its region was
    /// taken: the restored copy holds it, so it is not applied again.
    InCopy {
        /// The initiator rank.
        from: usize,
        /// Its IWC at the target.
        iwc: u64,
    },
    /// A synchronization of the re-executed body advanced the EC to this value.
    Epoch(u64),
    /// A logged entry served to the re-executed body (read, atomic, rpc reply, fetch,
    /// collective, rng draw, allocation).
    Served {
        /// The entry's LSN.
        lsn: u64,
        /// What it was.
        what: &'static str,
    },
    /// An outgoing write squashed (matched the log).
    Squashed {
        /// The entry's LSN.
        lsn: u64,
    },
    /// A completed CD's privatized region (its byte offset) re-executed into shadow memory.
    Shadowed {
        /// The region's byte offset in this rank's segment.
        offset: usize,
    },
    /// The log ran out: forward mode from this EC on.
    Forward {
        /// The EC at the switch.
        ec: u64,
    },
}

/// What one recovery of a relaxed CD on this rank did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryTrace {
    /// The CD's name.
    pub cd: String,
    /// This rank.
    pub rank: usize,
    /// The CD's EC and IWC at begin.
    pub ec_begin: u64,
    /// See `ec_begin`.
    pub iwc_begin: u64,
    /// This rank's IWC when recovery started (the last incoming write to replay).
    pub iwc_end: u64,
    /// The ranks asked for their logs.
    pub asked: Vec<usize>,
    /// The events in order.
    pub events: Vec<ReplayEvent>,
}

/// Traces kept per rank (the most recent ones).
const TRACES_KEPT: usize = 64;

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
    pub(crate) rerunning: RefCell<Option<incoming_rpc::Rerunning>>,
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
    /// The dependency-limited re-execution this rank takes part in, if any.
    pub(crate) limited: RefCell<Option<limited::Limited>>,
    /// The rank lost its memory and has not fetched its log replicas back yet: gathers are
    /// answered "ask again" meanwhile.
    pub(crate) restoring: Cell<bool>,
    /// Next key of a log replica at the buddy.
    pub(crate) log_key: Cell<u64>,
    /// Arrivals at limited barriers, by (team id, sequence number).
    pub(crate) arrivals: RefCell<std::collections::HashMap<(u64, u64), limited::Arrival>>,
    pub(crate) rpcs: RelaxedRpcs,
    /// Who wrote into this rank, so that a recovery asks only them.
    pub(crate) writers: writers::WriterMarks,
    /// The ranks whose recovery fence this rank must check before writing into them.
    pub(crate) fenced: fence::Fenced,
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
            limited: RefCell::new(None),
            restoring: Cell::new(false),
            log_key: Cell::new(0),
            arrivals: RefCell::new(std::collections::HashMap::new()),
            rpcs,
            writers: writers::WriterMarks::new(),
            fenced: fence::Fenced::default(),
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
            pgas::set_hook(hook);
        }
    }

    /// One user less; the hook goes with the last one.
    pub(crate) fn release_hook(&self) {
        let n = self.hook_users.get() - 1;
        self.hook_users.set(n);
        if n == 0 {
            pgas::clear_hook();
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

/// What the gather request returns: the writes into the asker, and how many of its writes
/// into the asker still wait for their ack (the asker asks again).
/// The writes asked for, how many writes into the asker still wait for their ack, and how
/// many the logs hold that the asker did not count (it had not switched counting on).
type GatherReply = (Vec<Incoming>, u64, u64);

/// A class check: (asker rank, asker CD, offset, len) → the touched region, as (declaring
/// CD, "class:region").
type CheckRequest = (usize, String, usize, usize);
type CheckReply = Option<(String, String)>;

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
}

impl RelaxedRpcs {
    /// Registers the functions in `rpcs` (before launch, on every rank alike).
    pub(crate) fn register(rpcs: &mut RpcTable) -> RelaxedRpcs {
        RelaxedRpcs {
            gather: rpcs.register(
                "cd.relaxed.gather",
                |(target, from, to): (usize, u64, u64)| {
                    // Served from progress: this rank stays in its own CD.
                    runtime::try_with(|rt| replay::serve_gather(rt, target, from, to))
                        .unwrap_or_default()
                },
            ),
            check: rpcs.register(
                "cd.relaxed.check",
                |(asker, cd, offset, len): (usize, String, usize, usize)| {
                    runtime::try_with(|rt| classes::serve_check(rt, asker, &cd, offset, len))
                        .flatten()
                },
            ),
            arrive: rpcs.register(
                "cd.relaxed.arrive",
                |(team, seq, failed): (u64, u64, bool)| {
                    runtime::try_with(|rt| limited::arrive(rt, team, seq, failed));
                },
            ),
            fence: rpcs.register("cd.relaxed.fence", |target: usize| {
                // A rank without a CD runtime (its program ended) writes no more.
                runtime::try_with(|rt| fence::serve(rt, target)).unwrap_or(0)
            }),
        }
    }
}

/// Entries in the log stores of every CD this rank is in (0 after a strict CD completed
/// with nothing relaxed around it).
pub fn logged_entries() -> usize {
    runtime::with(|rt| {
        rt.frames
            .borrow()
            .iter()
            .map(|f| f.rx.borrow().store.len())
            .sum()
    })
}

/// The recoveries of relaxed CDs this rank performed (most recent last; the last 64 kept).
pub fn recoveries() -> Vec<RecoveryTrace> {
    runtime::with(|rt| rt.relaxed.traces.borrow().clone())
}

/// Draws random bytes for `cd::rng()`: inside a logging relaxed CD the draw is logged, and
/// in a replay it is served from the log.
pub(crate) fn rng_draw(
    rt: &crate::runtime::CdRuntime,
    dst: &mut [u8],
    draw: impl FnOnce(&mut [u8]),
) {
    if rt.relaxed.logging_depth.get() == 0 {
        draw(dst);
        return;
    }
    interceptor::rng_draw(rt, dst, draw);
}
