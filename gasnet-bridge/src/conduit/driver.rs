//! The conduit a rank's endpoint drives: one enum over the conduits' drivers, and each
//! operation's single `match` over it. Without the `mpi` feature the enum has one variant and
//! every match disappears, so the smp paths compile to what the smp driver does.
//!
//! Handles are made here, from what a conduit returns ([`Started`] on mpi), so the conduits'
//! files know nothing of the API's handle types.

use crate::atomic::{AtomicOp, AtomicResult};
use crate::barrier::Phase;
use crate::completion::{AtomicHandle, FlushId, OwnedGetHandle, WriteHandle};
use crate::conduit::context::HandlerContext;
#[cfg(feature = "mpi")]
use crate::conduit::context::POLL_BATCH;
use crate::conduit::kind::ConduitKind;
use crate::conduit::smp::SmpDriver;
use crate::conduit::smp_inbox::Outgoing;
use crate::counters::{WriteAck, WriteCounters, WriteCounting};
use crate::error::BridgeError;
use crate::recovered::Recovered;
use crate::sleep::Awaiting;
use crate::topology::Topology;

#[cfg(feature = "mpi")]
use crate::conduit::mpi::{AmHead, Link, MpiWorld, OutBody, Pending, Started};
#[cfg(feature = "mpi")]
use std::cell::RefCell;
#[cfg(feature = "mpi")]
use std::rc::Rc;

/// A rank's conduit: the smp driver, or this process's mpi world with the link its handles
/// hold (the driver may invalidate it, see `conduit/README.md`). The mpi world sits in a
/// cell because a recovery rebuilds it and replaces its link through `&self`; the smp arm has
/// no cell, so its operations pay nothing for that.
#[derive(Debug)]
pub(crate) enum Driver {
    Smp(SmpDriver),
    // Boxed: a pointer-sized arm, as the two `Rc`s before the cell were, keeps the enum's
    // layout, which the smp put's tight loop is sensitive to.
    #[cfg(feature = "mpi")]
    Mpi(Box<RefCell<MpiDriver>>),
}

/// This process's mpi world and the link its pending handles hold. Every operation borrows it
/// shared (handlers run inside waits, so borrows nest); only a recovery borrows it mutably, to
/// rebuild the world in place and put a new link in, and it is refused while any operation is
/// on the stack.
#[cfg(feature = "mpi")]
#[derive(Debug)]
pub(crate) struct MpiDriver {
    pub(crate) world: Rc<MpiWorld>,
    pub(crate) link: Rc<Link>,
}

/// The mpi arm of [`Driver::put`], out of line with its arguments by value: the borrow of the
/// cell (and its release when the put unwinds) inlined into every put's callers slowed the smp
/// arm of the same match (`pgas-bench` `rput_flood`'s `bridge_put_rate_8B`), as the rest of
/// the mpi put would (`MpiWorld::put` is kept out of line for the same reason).
#[cfg(feature = "mpi")]
#[inline(never)]
fn mpi_put(
    m: &RefCell<MpiDriver>,
    in_handler: bool,
    rank: usize,
    offset: usize,
    src: &[u8],
) -> Result<WriteAck, BridgeError> {
    let MpiDriver { world, .. } = &*m.borrow();
    world.or_peer_lost(world.put(in_handler, rank, offset, src))
}

/// What a message carries besides its handler and arguments, as the endpoint gives it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AmBody<'a> {
    Short,
    Medium(&'a [u8]),
}

impl Driver {
    #[cfg(feature = "mpi")]
    fn pending(link: &Rc<Link>, id: u64) -> Pending {
        Pending::new(link.clone(), id)
    }

    #[inline]
    pub(crate) fn ranks(&self) -> usize {
        match self {
            Driver::Smp(d) => d.ranks(),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.ranks()
            }
        }
    }

    pub(crate) fn kind(&self) -> ConduitKind {
        match self {
            Driver::Smp(_) => ConduitKind::Smp,
            #[cfg(feature = "mpi")]
            Driver::Mpi(_) => ConduitKind::Mpi,
        }
    }

    pub(crate) fn topology(&self) -> Topology {
        match self {
            Driver::Smp(d) => d.world().topology,
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.topology()
            }
        }
    }

    pub(crate) fn segment_len(&self) -> usize {
        match self {
            Driver::Smp(d) => d.segment_len(),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.segment_len()
            }
        }
    }

    pub(crate) fn segment_base(&self, rank: usize) -> Result<*mut u8, BridgeError> {
        match self {
            Driver::Smp(d) => Ok(d.segment(rank)?.base()),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.segment_base(rank)
            }
        }
    }

    pub(crate) fn rma_by_messages(&self, rank: usize) -> bool {
        match self {
            Driver::Smp(_) => {
                let _ = rank; // every rank is mapped on smp
                false
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.puts_by_messages(rank)
            }
        }
    }

    #[inline]
    pub(crate) fn maps(&self, rank: usize) -> bool {
        match self {
            Driver::Smp(d) => rank < d.ranks(),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.maps(rank)
            }
        }
    }

    /// Runs `f` on this rank's counters (a closure, because the mpi world they live in is
    /// borrowed from its cell only for the call).
    #[inline]
    pub(crate) fn with_counters<T>(&self, f: impl FnOnce(&WriteCounters) -> T) -> T {
        match self {
            Driver::Smp(d) => f(d.counters()),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => f(m.borrow().world.counters()),
        }
    }

    #[inline]
    pub(crate) fn write_counting(&self) -> WriteCounting {
        match self {
            Driver::Smp(d) => d.world().write_counting,
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.write_counting()
            }
        }
    }

    pub(crate) fn switch_counting(&self, on: bool) {
        match self {
            Driver::Smp(d) => d.switch_counting(on),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.switch_counting(on)
            }
        }
    }

    pub(crate) fn messages_sent(&self) -> u64 {
        match self {
            Driver::Smp(d) => d.messages_sent(),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.messages_sent()
            }
        }
    }

    // ---- RMA and atomics ------------------------------------------------------------------

    // Always inlined: the endpoint's put is the hottest call of the smp conduit, and with the
    // `mpi` feature's arm it is no longer small enough to be inlined by default.
    #[inline(always)]
    pub(crate) fn put(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<WriteAck, BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                d.put(rank, offset, src)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => mpi_put(m, in_handler, rank, offset, src),
        }
    }

    #[inline]
    pub(crate) fn put_uncounted(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<(), BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                d.put_uncounted(rank, offset, src)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.or_peer_lost(world.put_uncounted(in_handler, rank, offset, src))
            }
        }
    }

    #[inline]
    pub(crate) fn put_nb(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<WriteHandle, BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                d.put(rank, offset, src).map(WriteHandle::complete)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, link } = &*m.borrow();
                Ok(
                    match world.or_peer_lost(world.put_nb(in_handler, rank, offset, src))? {
                        Started::Done(ack) => WriteHandle::complete(ack),
                        Started::Pending(id) => WriteHandle::pending(Self::pending(link, id)),
                    },
                )
            }
        }
    }

    #[inline]
    pub(crate) fn put_nb_flush(
        &self,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Option<Result<FlushId, BridgeError>> {
        match self {
            Driver::Smp(_) => {
                let _ = (rank, offset, src);
                None
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world
                    .put_nb_flush(rank, offset, src)
                    .map(|r| world.or_peer_lost(r).map(FlushId))
            }
        }
    }

    #[inline]
    pub(crate) fn flush_rma(&self) -> bool {
        match self {
            Driver::Smp(_) => false,
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.flush_rma()
            }
        }
    }

    #[inline]
    pub(crate) fn flushed(&self, id: FlushId) -> bool {
        match self {
            Driver::Smp(_) => {
                let _ = id;
                true
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.flushed(id.0)
            }
        }
    }

    pub(crate) fn write_handle(&self, id: FlushId) -> WriteHandle {
        match self {
            Driver::Smp(_) => {
                let _ = id; // never made on smp, where every write completes at once
                WriteHandle::complete(WriteAck::UNCOUNTED)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { link, .. } = &*m.borrow();
                WriteHandle::pending(Self::pending(link, id.0))
            }
        }
    }

    #[inline]
    pub(crate) fn complete_flush(&self, id: FlushId) {
        match self {
            Driver::Smp(_) => {
                let _ = id;
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.wait_ack(id.0);
            }
        }
    }

    #[inline]
    pub(crate) fn get(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                d.get(rank, offset, dst)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.or_peer_lost(world.get(in_handler, rank, offset, dst))
            }
        }
    }

    pub(crate) fn put_vector(
        &self,
        in_handler: bool,
        rank: usize,
        pieces: &[(usize, usize)],
        src: &[u8],
    ) -> Result<WriteAck, BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                d.put_vector(rank, pieces, src)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.or_peer_lost(world.put_vector(in_handler, rank, pieces, src))
            }
        }
    }

    pub(crate) fn get_vector(
        &self,
        in_handler: bool,
        rank: usize,
        pieces: &[(usize, usize)],
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                d.get_vector(rank, pieces, dst)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.or_peer_lost(world.get_vector(in_handler, rank, pieces, dst))
            }
        }
    }

    pub(crate) fn get_nb_owned(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        len: usize,
    ) -> Result<OwnedGetHandle, BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                d.get_owned(rank, offset, len).map(OwnedGetHandle::complete)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, link } = &*m.borrow();
                Ok(
                    match world.or_peer_lost(world.get_nb_owned(in_handler, rank, offset, len))? {
                        Started::Done(bytes) => OwnedGetHandle::complete(bytes),
                        Started::Pending(id) => OwnedGetHandle::pending(Self::pending(link, id)),
                    },
                )
            }
        }
    }

    #[inline]
    pub(crate) fn atomic(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<AtomicResult, BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                d.atomic(rank, offset, op)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.or_peer_lost(world.atomic(in_handler, rank, offset, op))
            }
        }
    }

    pub(crate) fn atomic_nb(
        &self,
        in_handler: bool,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<AtomicHandle, BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                d.atomic(rank, offset, op).map(AtomicHandle::complete)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, link } = &*m.borrow();
                Ok(
                    match world.or_peer_lost(world.atomic_nb(in_handler, rank, offset, op))? {
                        Started::Done(r) => AtomicHandle::complete(r),
                        Started::Pending(id) => AtomicHandle::pending(Self::pending(link, id)),
                    },
                )
            }
        }
    }

    // ---- active messages (target, handler and arguments checked by the endpoint) ---------

    /// Sends a short or medium message.
    #[inline]
    pub(crate) fn send(
        &self,
        in_handler: bool,
        target: usize,
        handler: u16,
        is_reply: bool,
        args: &[u64],
        body: AmBody<'_>,
    ) -> Result<(), BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                let body = match body {
                    AmBody::Short => Outgoing::Short,
                    AmBody::Medium(p) => Outgoing::Medium(p),
                };
                d.send(target, handler, is_reply, args, body);
                Ok(())
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                let head = AmHead {
                    handler,
                    is_reply,
                    args,
                };
                let body = match body {
                    AmBody::Short => OutBody::Short,
                    AmBody::Medium(p) => OutBody::Medium(p),
                };
                world
                    .or_peer_lost(world.send_am(in_handler, target, head, body))
                    .map(|_| ())
            }
        }
    }

    /// Sends a long message: `payload` lands in `target`'s segment at `offset`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_long(
        &self,
        in_handler: bool,
        target: usize,
        handler: u16,
        is_reply: bool,
        args: &[u64],
        payload: &[u8],
        offset: usize,
    ) -> Result<WriteHandle, BridgeError> {
        match self {
            Driver::Smp(d) => {
                let _ = in_handler;
                d.send_long(target, handler, is_reply, args, payload, offset)
                    .map(WriteHandle::complete)
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, link } = &*m.borrow();
                let head = AmHead {
                    handler,
                    is_reply,
                    args,
                };
                let body = OutBody::Long { payload, offset };
                match world.or_peer_lost(world.send_am(in_handler, target, head, body))? {
                    Some(Started::Done(ack)) => Ok(WriteHandle::complete(ack)),
                    Some(Started::Pending(id)) => Ok(WriteHandle::pending(Self::pending(link, id))),
                    None => unreachable!("a long message is acknowledged"),
                }
            }
        }
    }

    // ---- progress -------------------------------------------------------------------------

    /// Runs queued handlers (at most a batch) through `cx`; the caller is not in a handler.
    pub(crate) fn poll(&self, cx: &impl HandlerContext) -> usize {
        match self {
            Driver::Smp(d) => d.poll(cx),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.poll(cx, POLL_BATCH)
            }
        }
    }

    /// Counts a message whose handler has returned.
    #[inline]
    pub(crate) fn handled(&self) {
        match self {
            Driver::Smp(d) => d.handled(),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.handled()
            }
        }
    }

    /// Polls until `done()`; the caller is not in a handler.
    pub(crate) fn wait_for(
        &self,
        cx: &impl HandlerContext,
        awaiting: Awaiting,
        done: impl FnMut() -> bool,
    ) {
        match self {
            Driver::Smp(d) => d.wait_for(cx, awaiting, done),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.wait_until(cx, awaiting, done)
            }
        }
    }

    /// What the hang report of a wait for `what` adds on this conduit.
    pub(crate) fn hang_detail(&self, what: &str, phase: Phase) -> String {
        match self {
            Driver::Smp(d) => d.hang_detail(what, phase),
            #[cfg(feature = "mpi")]
            Driver::Mpi(_) if what == crate::hang_report::BARRIER => {
                "; MPI does not tell which ranks have arrived (look for a stopped process)".into()
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(_) => String::new(),
        }
    }

    // ---- recovery ----------------------------------------------------------------------------

    /// Recovers the job after a lost process and puts the rebuilt world in place of the old
    /// one (mpi with ULFM; `conduit/mpi/ulfm/RECOVERY.md`). Refused while an operation of this
    /// driver is on the stack (its world is borrowed), and on smp.
    pub(crate) fn recover(&self) -> Result<Recovered, BridgeError> {
        match self {
            Driver::Smp(_) => Err(BridgeError::RecoverRefused(
                "the smp conduit's ranks are threads of one process, which is never lost alone",
            )),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let mut slot = m.try_borrow_mut().map_err(|_| {
                    BridgeError::RecoverRefused(
                        "called while an operation of this rank is running (inside a wait's \
                         condition): call it after the operation returned or unwound",
                    )
                })?;
                let MpiDriver { world, link } = &mut *slot;
                crate::conduit::mpi::recover(world, link)
            }
        }
    }

    /// The mpi world and link, once the endpoint is done with them (`launch` ends the job
    /// with them); `None` on smp.
    #[cfg(feature = "mpi")]
    pub(crate) fn into_mpi(self) -> Option<(Rc<MpiWorld>, Rc<Link>)> {
        match self {
            Driver::Smp(_) => None,
            Driver::Mpi(m) => {
                let MpiDriver { world, link } = m.into_inner();
                Some((world, link))
            }
        }
    }

    // ---- barrier and end of job -----------------------------------------------------------

    /// Enters the barrier; returns the phase the rank is in now.
    pub(crate) fn barrier_notify(&self) -> Result<Phase, BridgeError> {
        match self {
            Driver::Smp(d) => Ok(d.barrier_notify()),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.or_peer_lost(world.barrier_notify())?;
                Ok(Phase::Notified(0))
            }
        }
    }

    /// True if barrier `generation` has completed; never blocks.
    pub(crate) fn barrier_try(&self, generation: u64) -> Result<bool, BridgeError> {
        match self {
            Driver::Smp(d) => Ok(d.barrier_try(generation)),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.or_peer_lost(world.barrier_test())
            }
        }
    }

    /// Waits (polling through `cx`) until barrier `generation` completes.
    pub(crate) fn barrier_wait(
        &self,
        cx: &impl HandlerContext,
        generation: u64,
    ) -> Result<(), BridgeError> {
        match self {
            Driver::Smp(d) => {
                d.barrier_wait(cx, generation);
                Ok(())
            }
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                let mut failed = None;
                let awaiting = Awaiting::new(crate::hang_report::BARRIER).woken();
                world.wait_until(cx, awaiting, || match world.barrier_test() {
                    Ok(done) => done,
                    Err(e) => {
                        failed = Some(e);
                        true
                    }
                });
                world.or_peer_lost(failed.map_or(Ok(()), Err))
            }
        }
    }

    /// Serves AMs through `cx` until the whole job is quiescent.
    pub(crate) fn finish(&self, cx: &impl HandlerContext) {
        match self {
            Driver::Smp(d) => d.finish(cx),
            #[cfg(feature = "mpi")]
            Driver::Mpi(m) => {
                let MpiDriver { world, .. } = &*m.borrow();
                world.finish(cx)
            }
        }
    }
}
