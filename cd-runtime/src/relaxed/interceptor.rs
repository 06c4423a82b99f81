//! The pgas [`Interceptor`] of relaxed CDs, installed while a logging relaxed CD runs on the
//! rank and removed after (strict-only programs never get a hook).
//!
//! Forward mode logs: every remote operation gets an entry in the innermost logging relaxed
//! CD's store at `before_*` (so LSNs follow program order) and is completed at `after_*`
//! (acks, replies, fetched bytes). Replay mode serves reads, atomics' results, rpc replies,
//! fetches, collectives and allocations from the recovering CD's log in LSN order, squashes
//! outgoing writes after comparing them with the logged bytes, and applies the gathered
//! incoming writes at each epoch step. Operations on the rank's own memory are local
//! accesses: never logged, simply re-executed.

use std::rc::Rc;

use gasnet_bridge::{AtomicOp, AtomicResult, WriteAck};
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, CollectiveKind, Fetch, FetchAction,
    FreeAction, GetAction, Interceptor, OpId, PutAction, Rma, RpcAction, RpcCall, SyncEvent,
};

use crate::buddy::Bytes;
use crate::clock;
use crate::frame::{CdKind, Frame};
use crate::relaxed::ReplayEvent;
use crate::relaxed::classes;
use crate::relaxed::dependencies;
use crate::relaxed::epochs::{self, IncomingWhat};
use crate::relaxed::incoming_rpc::refuse_operation;
use crate::relaxed::limited;
use crate::relaxed::log_store::{EntryKind, LogEntry, LoggedOp, TargetCounters};
use crate::relaxed::writers;
use crate::runtime::{self, CdRuntime};

/// The hook; its state lives in the rank's CD runtime.
#[derive(Debug, Default)]
pub struct RelaxedHook;

/// The innermost relaxed CD that logs.
pub(crate) fn logging_frame(rt: &CdRuntime) -> Option<Rc<Frame>> {
    rt.frames
        .borrow()
        .iter()
        .rev()
        .find(|f| f.kind == CdKind::Relaxed && f.settings.logging)
        .cloned()
}

/// Appends an entry to the innermost logging relaxed CD's store.
fn log(rt: &CdRuntime, op: u64, kind: EntryKind) {
    let start = clock::now();
    let frame = logging_frame(rt);
    dependencies::note(rt, &kind, frame.is_some());
    let Some(frame) = frame else {
        return;
    };
    let written = match &kind {
        EntryKind::Write { target, .. } | EntryKind::Rpc { target, .. } => Some(*target),
        EntryKind::Atomic { target, op, .. } if *op != LoggedOp::Load => Some(*target),
        _ => None,
    };
    if let Some(target) = written {
        let generation = writers::generation(rt.lcsa().id);
        let marked = rt.relaxed.writers.mark(rt.rank, target, generation);
        crate::relaxed::fence::before_write(rt, target, marked);
    }
    let e = LogEntry {
        lsn: rt.relaxed.next_lsn(),
        ec: pgas::runtime_hooks::epoch(),
        op,
        // An rpc function serving another rank's request started it: a replay of that
        // request must know (see `incoming_rpc`).
        request: pgas::runtime_hooks::serving_request().map(|r| r.iwc),
        kind,
    };
    let size = e.size() as u64;
    frame.rx.borrow_mut().store.push(e);
    if let Some(limit) = frame.settings.log_spill_bytes {
        crate::relaxed::run::spill(rt, &frame, limit);
    }
    let mut rx = frame.rx.borrow_mut();
    rx.logged.entries += 1;
    rx.logged.bytes += size;
    rx.logged.ticks += clock::since(start);
}

/// Completes the entry of operation `op` in the innermost logging relaxed CD's store.
fn complete(rt: &CdRuntime, op: u64, f: impl FnOnce(&mut EntryKind)) {
    let Some(frame) = logging_frame(rt) else {
        return;
    };
    let mut rx = frame.rx.borrow_mut();
    if let Some(e) = rx.store.find_op_mut(op) {
        let before = e.size();
        f(&mut e.kind);
        let grown = e.size().saturating_sub(before) as u64;
        rx.logged.bytes += grown;
    }
}

/// In replay: the next logged entry (and the switch to forward mode when the log ran out).
fn next_entry(rt: &CdRuntime) -> Option<LogEntry> {
    let mut replay = rt.relaxed.replay.borrow_mut();
    let r = replay.as_mut().filter(|r| !r.forward)?;
    match r.next() {
        Some(e) => Some(e),
        None => {
            let landed = r.switch_to_forward();
            drop(replay);
            crate::relaxed::fence::lower(rt);
            if let Err(e) = landed {
                replay_error(rt, e);
            }
            rt.relaxed.event(ReplayEvent::Forward {
                ec: pgas::runtime_hooks::epoch(),
            });
            None
        }
    }
}

fn replaying(rt: &CdRuntime) -> bool {
    rt.relaxed
        .replay
        .borrow()
        .as_ref()
        .is_some_and(|r| !r.forward)
}

fn served(rt: &CdRuntime, lsn: u64, what: &'static str) {
    if let Some(r) = rt.relaxed.replay.borrow_mut().as_mut() {
        r.replayed += 1;
    }
    rt.relaxed.event(ReplayEvent::Served { lsn, what });
}

/// Records an error of the running replay: the recovering CD escalates when its body ends.
pub(crate) fn replay_error(rt: &CdRuntime, what: String) {
    rt.relaxed.replay_errors.borrow_mut().push(what);
}

fn counters(ack: WriteAck) -> TargetCounters {
    TargetCounters {
        ec: ack.ec,
        iwc: ack.iwc,
    }
}

/// A write into this rank by this rank: no initiator's log will hold it, remember its IWC.
fn own_write(rt: &CdRuntime, ack: WriteAck) {
    if let Some(r) = rt.relaxed.replay.borrow_mut().as_mut() {
        if !r.forward {
            r.own_during += 1;
        }
    }
    if let Some(frame) = logging_frame(rt) {
        frame.rx.borrow_mut().own_iwcs.push(ack.iwc);
    }
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

fn diverged(rt: &CdRuntime, doing: String, e: &LogEntry) {
    replay_error(
        rt,
        format!(
            "the re-execution did {doing} where the log (LSN {}) has {}: the body is not \
             deterministic",
            e.lsn,
            describe(e)
        ),
    );
}

impl Interceptor for RelaxedHook {
    fn before_put(&self, id: OpId, rma: &Rma, bytes: &[u8]) -> PutAction {
        runtime::with(|rt| {
            if rma.rank == rt.rank {
                return PutAction::Proceed;
            }
            if refuse_operation(rt, || format!("a put to rank {}", rma.rank)) {
                return PutAction::Suppress;
            }
            if let Some(a) = limited::put(rt, rma, bytes) {
                return a;
            }
            if replaying(rt) {
                if let Some(e) = next_entry(rt) {
                    match e.put_to(rma.rank, rma.offset) {
                        Some(logged) => {
                            if logged != bytes {
                                replay_error(
                                    rt,
                                    format!(
                                        "squashed put to rank {} at offset {} (LSN {}) differs \
                                         from the logged bytes: the body is not deterministic \
                                         or an access is misclassified",
                                        rma.rank, rma.offset, e.lsn
                                    ),
                                );
                            }
                            if let Some(r) = rt.relaxed.replay.borrow_mut().as_mut() {
                                r.squashed += 1;
                            }
                            rt.relaxed.event(ReplayEvent::Squashed { lsn: e.lsn });
                        }
                        None => diverged(
                            rt,
                            format!("a put to rank {} at offset {}", rma.rank, rma.offset),
                            &e,
                        ),
                    }
                    // Never send: the target already holds this write (or, after a
                    // divergence, must not get a wrong one).
                    return PutAction::Suppress;
                }
            }
            classes::check_access(rt, rma.rank, rma.offset, rma.len);
            log(
                rt,
                id.0,
                EntryKind::Write {
                    target: rma.rank,
                    offset: rma.offset,
                    bytes: Bytes(bytes.to_vec()),
                    counters: None,
                },
            );
            PutAction::Proceed
        })
    }

    fn after_put(&self, id: OpId, rma: &Rma, ack: WriteAck) {
        runtime::with(|rt| {
            if rma.rank == rt.rank {
                own_write(rt, ack);
                return;
            }
            complete(rt, id.0, |k| {
                if let EntryKind::Write { counters: c, .. } = k {
                    *c = Some(counters(ack));
                }
            });
        })
    }

    fn before_get(&self, id: OpId, rma: &Rma, dst: &mut [u8]) -> GetAction {
        runtime::with(|rt| {
            if rma.rank == rt.rank {
                return GetAction::Proceed;
            }
            if refuse_operation(rt, || format!("a get from rank {}", rma.rank)) {
                dst.fill(0);
                return GetAction::Served;
            }
            if let Some(a) = limited::get(rt, rma, dst) {
                return a;
            }
            if replaying(rt) {
                if let Some(e) = next_entry(rt) {
                    match e.read_from(rma.rank, rma.offset, dst.len()) {
                        Some(bytes) => {
                            dst.copy_from_slice(bytes);
                            served(rt, e.lsn, "read");
                        }
                        None => {
                            diverged(
                                rt,
                                format!("a get from rank {} at offset {}", rma.rank, rma.offset),
                                &e,
                            );
                            dst.fill(0);
                        }
                    }
                    return GetAction::Served;
                }
            }
            classes::check_access(rt, rma.rank, rma.offset, rma.len);
            log(
                rt,
                id.0,
                EntryKind::Read {
                    source: rma.rank,
                    offset: rma.offset,
                    bytes: Bytes(Vec::new()),
                },
            );
            GetAction::Proceed
        })
    }

    fn after_get(&self, id: OpId, rma: &Rma, data: &[u8]) {
        runtime::with(|rt| {
            if rma.rank == rt.rank {
                return;
            }
            complete(rt, id.0, |k| {
                if let EntryKind::Read { bytes, .. } = k {
                    bytes.0 = data.to_vec();
                }
            });
        })
    }

    fn before_rpc(&self, id: OpId, call: &RpcCall, args: &[u8]) -> RpcAction {
        runtime::with(|rt| {
            if call.rank == rt.rank {
                return RpcAction::Proceed;
            }
            if refuse_operation(rt, || {
                format!("an rpc `{}` to rank {}", call.name, call.rank)
            }) {
                // Not sent: the recovery fails (a reply the function waits for never comes).
                return RpcAction::Served(Vec::new());
            }
            if let Some(a) = limited::rpc(rt, call, args) {
                return a;
            }
            if replaying(rt) {
                if let Some(e) = next_entry(rt) {
                    let Some((logged, reply)) = e.rpc_to(call.rank, call.name) else {
                        diverged(
                            rt,
                            format!("an rpc `{}` to rank {}", call.name, call.rank),
                            &e,
                        );
                        return RpcAction::Served(Vec::new());
                    };
                    if logged != args {
                        replay_error(
                            rt,
                            format!(
                                "rpc `{}` to rank {} (LSN {}) has other arguments than logged: \
                                 the body is not deterministic",
                                call.name, call.rank, e.lsn
                            ),
                        );
                    }
                    served(rt, e.lsn, "rpc reply");
                    return RpcAction::Served(reply);
                }
            }
            log(
                rt,
                id.0,
                EntryKind::Rpc {
                    target: call.rank,
                    name: call.name.to_string(),
                    args: Bytes(args.to_vec()),
                    reply: None,
                    fire_and_forget: call.fire_and_forget,
                    counters: None,
                },
            );
            RpcAction::Proceed
        })
    }

    fn after_rpc(&self, id: OpId, call: &RpcCall, ack: WriteAck, reply: &[u8]) {
        runtime::with(|rt| {
            if call.rank == rt.rank {
                own_write(rt, ack);
                return;
            }
            complete(rt, id.0, |k| {
                if let EntryKind::Rpc {
                    reply: r,
                    counters: c,
                    ..
                } = k
                {
                    *r = Some(Bytes(reply.to_vec()));
                    *c = Some(counters(ack));
                }
            });
        })
    }

    fn before_atomic(&self, id: OpId, rank: usize, offset: usize, op: AtomicOp) -> AtomicAction {
        runtime::with(|rt| {
            if rank == rt.rank {
                return AtomicAction::Proceed;
            }
            if refuse_operation(rt, || format!("an atomic on rank {rank}")) {
                return AtomicAction::Served(AtomicResult {
                    previous: 0,
                    ack: None,
                });
            }
            if let Some(a) = limited::atomic(rt, rank, offset, op) {
                return a;
            }
            let logged_op = LoggedOp::from(op);
            if replaying(rt) {
                if let Some(e) = next_entry(rt) {
                    let Some((previous, counters)) = e.atomic_on(rank, offset, logged_op) else {
                        diverged(rt, format!("an atomic {logged_op:?} on rank {rank}"), &e);
                        return AtomicAction::Served(AtomicResult {
                            previous: 0,
                            ack: None,
                        });
                    };
                    served(rt, e.lsn, "atomic");
                    return AtomicAction::Served(AtomicResult {
                        previous,
                        ack: counters.map(|c| WriteAck {
                            ec: c.ec,
                            iwc: c.iwc,
                        }),
                    });
                }
            }
            classes::check_access(rt, rank, offset, 8);
            log(
                rt,
                id.0,
                EntryKind::Atomic {
                    target: rank,
                    offset,
                    op: logged_op,
                    previous: None,
                    counters: None,
                    done: false,
                },
            );
            AtomicAction::Proceed
        })
    }

    fn after_atomic(
        &self,
        id: OpId,
        rank: usize,
        _offset: usize,
        _op: AtomicOp,
        result: &AtomicResult,
    ) {
        runtime::with(|rt| {
            if rank == rt.rank {
                if let Some(ack) = result.ack {
                    own_write(rt, ack);
                }
                return;
            }
            complete(rt, id.0, |k| {
                if let EntryKind::Atomic {
                    previous,
                    counters: c,
                    done,
                    ..
                } = k
                {
                    *previous = Some(result.previous);
                    *c = result.ack.map(counters);
                    *done = true;
                }
            });
        })
    }

    fn before_fetch(&self, id: OpId, fetch: &Fetch) -> FetchAction {
        runtime::with(|rt| {
            if refuse_operation(rt, || format!("a fetch from rank {}", fetch.rank)) {
                return FetchAction::Served(Vec::new());
            }
            if let Some(a) = limited::fetch(rt, fetch) {
                return a;
            }
            if replaying(rt) {
                if let Some(e) = next_entry(rt) {
                    let Some(bytes) = e.fetch_of(fetch.rank, fetch.object) else {
                        diverged(rt, format!("a fetch from rank {}", fetch.rank), &e);
                        return FetchAction::Proceed;
                    };
                    served(rt, e.lsn, "fetch");
                    return FetchAction::Served(bytes);
                }
            }
            log(
                rt,
                id.0,
                EntryKind::Fetch {
                    rank: fetch.rank,
                    object: fetch.object,
                    bytes: None,
                },
            );
            FetchAction::Proceed
        })
    }

    fn after_fetch(&self, id: OpId, _fetch: &Fetch, bytes: &[u8]) {
        runtime::with(|rt| {
            complete(rt, id.0, |k| {
                if let EntryKind::Fetch { bytes: b, .. } = k {
                    *b = Some(Bytes(bytes.to_vec()));
                }
            });
        })
    }

    fn before_collective(&self, id: OpId, collective: &Collective) -> CollectiveAction {
        runtime::with(|rt| {
            if refuse_operation(rt, || "a collective".into()) {
                // Taking part would make the others wait for a rank that is replaying.
                if collective.kind == CollectiveKind::Barrier {
                    return CollectiveAction::Served(Vec::new());
                }
                return CollectiveAction::Proceed;
            }
            if let Some(a) = limited::collective(rt, collective) {
                return a;
            }
            if replaying(rt) {
                if let Some(e) = next_entry(rt) {
                    let Some(result) = e.collective_result() else {
                        diverged(rt, "a collective".into(), &e);
                        // A barrier can be skipped safely; others would hang if joined.
                        if collective.kind == CollectiveKind::Barrier {
                            return CollectiveAction::Served(Vec::new());
                        }
                        return CollectiveAction::Proceed;
                    };
                    served(rt, e.lsn, "collective");
                    return CollectiveAction::Served(result);
                }
            }
            log(
                rt,
                id.0,
                EntryKind::Collective {
                    result: None,
                    barrier: collective.kind == CollectiveKind::Barrier,
                },
            );
            CollectiveAction::Proceed
        })
    }

    fn after_collective(&self, id: OpId, _collective: &Collective, result: &[u8]) {
        runtime::with(|rt| {
            complete(rt, id.0, |k| {
                if let EntryKind::Collective { result: r, .. } = k {
                    *r = Some(Bytes(result.to_vec()));
                }
            });
        })
    }

    fn before_alloc(&self, size: usize, _align: usize) -> AllocAction {
        runtime::with(|rt| {
            if refuse_operation(rt, || format!("an allocation of {size} bytes")) {
                // Live, and not logged: the recovery fails anyway.
                rt.relaxed.alloc_served.set(true);
                return AllocAction::Proceed;
            }
            if replaying(rt) {
                if let Some(e) = next_entry(rt) {
                    match &e.kind {
                        EntryKind::Alloc { offset, size: s } if *s == size => {
                            served(rt, e.lsn, "allocation");
                            rt.relaxed.alloc_served.set(true);
                            return AllocAction::At(*offset);
                        }
                        _ => {
                            diverged(rt, format!("an allocation of {size} bytes"), &e);
                            rt.relaxed.alloc_served.set(true);
                            return AllocAction::Proceed;
                        }
                    }
                }
            }
            AllocAction::Proceed
        })
    }

    fn after_alloc(&self, offset: usize, size: usize) {
        runtime::with(|rt| {
            if rt.relaxed.alloc_served.replace(false) {
                return;
            }
            log(rt, 0, EntryKind::Alloc { offset, size });
        })
    }

    fn before_free(&self, offset: usize, _size: usize) -> FreeAction {
        // Deferred to the completion of the CD spanning allocation and free (the LCSA at
        // the latest), so a re-execution gets the same addresses from the allocation log.
        runtime::with(|rt| {
            // Remembered by the CD: its re-execution (or the LCSA's) frees the block again.
            if let Some(f) = rt
                .frames
                .borrow()
                .iter()
                .rev()
                .find(|f| f.kind == CdKind::Relaxed)
            {
                f.rx.borrow_mut().deferred.push(offset);
            }
            rt.lcsa().rx.borrow_mut().had_relaxed = true;
        });
        FreeAction::Defer
    }

    fn on_sync(&self, _sync: SyncEvent, ec: u64) {
        runtime::with(|rt| {
            let recovering = rt.relaxed.trace.borrow().is_some();
            if !recovering {
                return;
            }
            rt.relaxed.event(ReplayEvent::Epoch(ec));
            apply_incoming(rt, Some(ec));
        })
    }
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

/// A `cd::rng()` draw inside a logging relaxed CD: logged, or served in a replay.
pub(crate) fn rng_draw(rt: &CdRuntime, dst: &mut [u8], draw: impl FnOnce(&mut [u8])) {
    if refuse_operation(rt, || "an rng draw".into()) {
        draw(dst);
        return;
    }
    if limited::rng(rt, dst) {
        return;
    }
    if replaying(rt) {
        if let Some(e) = next_entry(rt) {
            if let Some(bytes) = e.rng_of(dst.len()) {
                dst.copy_from_slice(bytes);
                served(rt, e.lsn, "rng draw");
                return;
            }
            diverged(rt, "an rng draw".into(), &e);
            draw(dst);
            return;
        }
    }
    draw(dst);
    log(
        rt,
        0,
        EntryKind::Rng {
            bytes: Bytes(dst.to_vec()),
        },
    );
}
