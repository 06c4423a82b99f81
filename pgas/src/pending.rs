//! Operations still in flight: what each put completes when its ack arrives, and each get
//! or atomic when its reply arrives.
//!
//! A put into memory this process maps (every rank on smp, the ranks of the host under mpirun)
//! is complete when the call returns, and never comes here. A put to another host (or with
//! `PGAS_MPI_PSHM=0`) leaves as a message and returns at once: its source buffer is free
//! (the conduit copied it), its operation completion waits for the target's ack. Such a put
//! is kept here with what its completion does: fulfil the operation future, remove the
//! dependency it holds on a promise, show the ack to the hook that saw it start, send the
//! remote-completion rpc (after the data landed, so the rpc sees it).
//!
//! **Progress completes them.** Every round of pgas progress (any wait, [`crate::progress`])
//! polls the conduit once and then checks each put's handle without further progress. A wait
//! first completes the puts that need no message (the mpi conduit's window: one flush per
//! target, `Endpoint::flush_rma`) and returns at once if that was what it waited for.
//!
//! **A flood costs one record.** A put that asks for nothing but a promise's count (or for
//! nothing at all), with no hook, is folded into the latest record ([`fold_put`]) when the
//! conduit says its completion implies that one's (window puts to one target,
//! `WriteHandle::completes_after`): the record keeps the later handle and counts both puts,
//! and its completion removes both dependencies at once. Each put still adds its dependency
//! when it starts, so `Promise` counting is unchanged; a hooked put or one with a remote rpc
//! keeps a record of its own, so the hook sees each put's ack.
//!
//! **A window put's operation future holds its number** (`Future::of_write`, no record here):
//! waiting on it is one flush of its target. Such puts are in no list, so [`Runtime::quiet`]
//! flushes the window first; the flush completes them whether or not anyone waits.
//!
//! **Gets and atomics** to another host travel the same way ([`PendingRead`]): `rget`,
//! `rget_slice` and the atomic domain's operations return a pending future that the reply
//! fulfils during progress, after the hook's `after_get` / `after_atomic` saw the data; the
//! value never borrows the caller's memory (`rget_into` still waits, as it writes into a
//! borrowed slice).
//!
//! **Synchronizations and resilience traffic complete them first** ([`Runtime::quiet`]): a
//! barrier, a collective, and the entry of an internal scope (a Containment Domain's
//! preservation, agreement or recovery) wait until this rank has no put in flight (except
//! inside a message handler, which may not wait). UPC++
//! leaves a put whose future was dropped unordered with a later barrier; here the barrier
//! orders it, so a program that forgets a future still finds the data at the target after
//! the barrier, and a CD never preserves or restores around a write still landing.
//!
//! [`Runtime::quiet`]: crate::runtime::Runtime::quiet

use std::cell::RefCell;
use std::rc::Rc;

use gasnet_bridge::FlushId;
use gasnet_bridge::{AtomicHandle, OwnedGetHandle, WriteHandle};
use gasnet_bridge::{AtomicOp, AtomicResult, WriteAck};

use crate::future::Fulfiller;
use crate::hook::{Interceptor, OpId, Rma};
use crate::promise::Promise;
use crate::runtime::{InFlight, Runtime};

/// The puts, gets and atomics of a rank still in flight (the runtime's [`InFlight`]).
#[derive(Default)]
pub(crate) struct Pending {
    /// Puts still waiting for their acks (another host's memory).
    puts: RefCell<Vec<PendingPut>>,
    /// Room for the puts one round of progress completes (kept from round to round).
    arrived: RefCell<Vec<(PendingPut, WriteAck)>>,
    /// Gets and atomics to other hosts whose reply has not come yet.
    reads: RefCell<Vec<PendingRead>>,
}

/// A remote-completion rpc still to send: the target rank and the sending closure.
pub(crate) type RemoteSend = (usize, Box<dyn FnOnce(usize)>);

/// The hook's view of a put in flight: the hook, its operation and the range written.
pub(crate) type HookedPut = (Rc<dyn Interceptor>, OpId, Rma);

/// How a put in flight is known to the conduit.
pub(crate) enum PutHandle {
    /// A handle that yields the target's EC and IWC.
    Write(WriteHandle),
    /// The number of a window put that a flush completes (`Endpoint::put_nb_flush`); its ack
    /// is `WriteAck::UNCOUNTED`.
    Flush(FlushId),
}

impl PutHandle {
    /// The ack if it has arrived, making no progress.
    fn arrived(&self, rt: &Runtime) -> Option<WriteAck> {
        match self {
            PutHandle::Write(h) => h.arrived(),
            PutHandle::Flush(id) => rt.ep().flushed(*id).then_some(WriteAck::UNCOUNTED),
        }
    }
}

/// What a put's ack completes.
pub(crate) struct PendingPut {
    /// The conduit's handle or number; yields the target's EC and IWC.
    pub(crate) handle: PutHandle,
    /// The hook that saw the put start, its operation and range (`after_put` on the ack).
    pub(crate) hooked: Option<HookedPut>,
    /// The operation future to fulfil.
    pub(crate) operation: Option<Fulfiller<()>>,
    /// A promise counting operation completion (one dependency held).
    pub(crate) promise: Option<Promise<()>>,
    /// The remote-completion rpc, sent once the data has landed.
    pub(crate) remote: Option<RemoteSend>,
    /// What a continuation on the future of a write known by its number runs
    /// ([`InFlight::track_write`]).
    then: Option<Box<dyn FnOnce()>>,
    /// Puts this record completes: more than one once later puts were folded into it.
    puts: usize,
}

impl PendingPut {
    /// A put that only its handle tracks (no completion asked for).
    pub(crate) fn new(handle: WriteHandle, hooked: Option<HookedPut>) -> Self {
        PendingPut {
            handle: PutHandle::Write(handle),
            hooked,
            operation: None,
            promise: None,
            remote: None,
            then: None,
            puts: 1,
        }
    }

    /// A put known by `handle` that completes nothing but `promise`'s count (its dependency
    /// added already), if any.
    pub(crate) fn flushed(handle: PutHandle, promise: Option<Promise<()>>) -> Self {
        PendingPut {
            handle,
            hooked: None,
            operation: None,
            promise,
            remote: None,
            then: None,
            puts: 1,
        }
    }

    /// Runs what the ack completes (`ack`: what the handle yielded).
    fn complete(self, rt: &Runtime, ack: WriteAck) {
        if let Some((hook, id, rma)) = self.hooked {
            rt.acks_pending.set(rt.acks_pending.get() - 1);
            hook.after_put(id, &rma, ack);
        }
        if let Some((target, send)) = self.remote {
            send(target);
        }
        if let Some(f) = self.operation {
            f.fulfill(());
        }
        if let Some(then) = self.then {
            then();
        }
        if let Some(p) = self.promise {
            p.fulfill_anonymous(self.puts);
        }
    }
}

/// True if a record counting on `held` completes the same promise as a put counting on
/// `promise` (the very promise, or neither counts on one).
#[inline]
fn same_promise(held: &Option<Promise<()>>, promise: Option<&Promise<()>>) -> bool {
    match (held, promise) {
        (None, None) => true,
        (Some(a), Some(b)) => a.same_as(b),
        _ => false,
    }
}

/// [`fold_put`] for a window put known by its number: folds it into the latest record if
/// that record is one of such puts (which complete nothing but a promise's count) for the same
/// promise and an earlier put to the same target. Returns whether it folded.
///
/// Such a put never has a handle made: a promise flood across hosts costs the conduit's put,
/// a dependency and this check per put.
#[inline]
pub(crate) fn fold_flush(rt: &Runtime, id: FlushId, promise: Option<&Promise<()>>) -> bool {
    let mut list = rt.in_flight::<Pending>().puts.borrow_mut();
    let Some(last) = list.last_mut() else {
        return false;
    };
    let PutHandle::Flush(first) = last.handle else {
        return false;
    };
    if !same_promise(&last.promise, promise) || !id.implies(first) {
        return false;
    }
    last.handle = PutHandle::Flush(id);
    last.puts += 1;
    true
}

/// Keeps `p` until its ack arrives.
#[inline]
pub(crate) fn push_put(rt: &Runtime, p: PendingPut) {
    rt.in_flight::<Pending>().puts.borrow_mut().push(p);
    rt.in_flight_added();
}

/// Keeps `r` until its reply arrives.
#[inline]
pub(crate) fn push_read(rt: &Runtime, r: PendingRead) {
    rt.in_flight::<Pending>().reads.borrow_mut().push(r);
    rt.in_flight_added();
}

/// Folds an unhooked put that completes nothing but `promise`'s count (one dependency, added
/// already), or nothing, into the latest record, if that record completes the same and
/// `handle`'s completion implies its own; else hands the handle back. (A window put known by
/// its number folds through [`fold_flush`].)
#[inline]
pub(crate) fn fold_put(
    rt: &Runtime,
    handle: WriteHandle,
    promise: Option<&Promise<()>>,
) -> Result<(), WriteHandle> {
    let mut list = rt.in_flight::<Pending>().puts.borrow_mut();
    let Some(last) = list.last_mut() else {
        return Err(handle);
    };
    let PutHandle::Write(first) = &last.handle else {
        return Err(handle);
    };
    if !same_promise(&last.promise, promise)
        || last.hooked.is_some()
        || last.operation.is_some()
        || last.remote.is_some()
        || !handle.completes_after(first)
    {
        return Err(handle);
    }
    // The earlier handle is dropped: the later one's completion stands for it.
    last.handle = PutHandle::Write(handle);
    last.puts += 1;
    Ok(())
}

/// The hook's view of a get in flight: the hook, its operation and the range read.
pub(crate) type HookedGet = (Rc<dyn Interceptor>, OpId, Rma);
/// The hook's view of an atomic in flight: the hook, its operation, rank, offset and op.
pub(crate) type HookedAtomic = (Rc<dyn Interceptor>, OpId, usize, usize, AtomicOp);

/// A get or an atomic still in flight to another host: what its reply completes (the hook's
/// `after_get` / `after_atomic`, then the future's value).
pub(crate) enum PendingRead {
    Get {
        handle: OwnedGetHandle,
        hooked: Option<HookedGet>,
        deliver: Box<dyn FnOnce(Vec<u8>)>,
    },
    Atomic {
        handle: AtomicHandle,
        hooked: Option<HookedAtomic>,
        deliver: Box<dyn FnOnce(AtomicResult)>,
    },
}

/// What a reply brought.
enum Reply {
    Bytes(Vec<u8>),
    Atomic(AtomicResult),
}

impl PendingRead {
    /// The reply if it has arrived (taken out of the handle), making no progress.
    fn arrived(&mut self) -> Option<Reply> {
        match self {
            PendingRead::Get { handle, .. } => handle.take_arrived().map(Reply::Bytes),
            PendingRead::Atomic { handle, .. } => handle.arrived().map(Reply::Atomic),
        }
    }

    /// Runs what the reply completes.
    fn complete(self, rt: &Runtime, reply: Reply) {
        match (self, reply) {
            (
                PendingRead::Get {
                    hooked, deliver, ..
                },
                Reply::Bytes(bytes),
            ) => {
                if let Some((hook, id, rma)) = hooked {
                    rt.acks_pending.set(rt.acks_pending.get() - 1);
                    hook.after_get(id, &rma, &bytes);
                }
                deliver(bytes);
            }
            (
                PendingRead::Atomic {
                    hooked, deliver, ..
                },
                Reply::Atomic(r),
            ) => {
                if let Some((hook, id, rank, offset, op)) = hooked {
                    rt.acks_pending.set(rt.acks_pending.get() - 1);
                    hook.after_atomic(id, rank, offset, op, &r);
                }
                deliver(r);
            }
            _ => unreachable!("a reply of the operation's own kind"),
        }
    }
}

impl InFlight for Pending {
    fn records(&self) -> usize {
        self.puts.borrow().len() + self.reads.borrow().len()
    }

    /// Completes the puts whose acks and the gets and atomics whose replies have arrived
    /// (after the caller's round of progress); the completions run after the lists are
    /// released, as they may start new operations.
    fn complete_arrived(&self, rt: &Runtime) {
        // The list of arrived puts is reused from round to round (a latency loop would
        // allocate one per put otherwise); a completion that makes progress itself finds it
        // taken and uses a fresh one.
        let mut arrived = std::mem::take(&mut *self.arrived.borrow_mut());
        {
            let mut list = self.puts.borrow_mut();
            let mut i = 0;
            while i < list.len() {
                match list[i].handle.arrived(rt) {
                    Some(ack) => arrived.push((list.swap_remove(i), ack)),
                    None => i += 1,
                }
            }
        }
        rt.in_flight_done(arrived.len());
        for (p, ack) in arrived.drain(..) {
            p.complete(rt, ack);
        }
        *self.arrived.borrow_mut() = arrived;
        let replies: Vec<(PendingRead, Reply)> = {
            let mut list = self.reads.borrow_mut();
            let mut replies = Vec::new();
            let mut i = 0;
            while i < list.len() {
                match list[i].arrived() {
                    Some(reply) => replies.push((list.swap_remove(i), reply)),
                    None => i += 1,
                }
            }
            replies
        };
        rt.in_flight_done(replies.len());
        for (op, reply) in replies {
            op.complete(rt, reply);
        }
    }

    fn track_write(&self, rt: &Runtime, id: FlushId, done: Box<dyn FnOnce()>) {
        let mut p = PendingPut::new(rt.ep().write_handle(id), None);
        p.then = Some(done);
        self.puts.borrow_mut().push(p);
        rt.in_flight_added();
    }
}
