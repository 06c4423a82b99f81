//! A rank's handle on the job: every operation a rank initiates goes through its `Endpoint`.
//!
//! An endpoint belongs to its rank's thread (it is `!Sync`); AM handlers run on that thread,
//! inside [`Endpoint::poll`], and get the same endpoint through their
//! [`Token`](crate::Token). The endpoint is the thin API over its conduit's driver
//! (`conduit/driver.rs`), which dispatches each operation once; what stays here is what
//! belongs to the rank whatever its conduit: the in-handler rule, the barrier phase, the
//! message checks, and the handlers.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Duration;

use crate::atomic::{AtomicOp, AtomicResult};
use crate::barrier::Phase;
use crate::completion::{AtomicHandle, FlushId, GetHandle, OwnedGetHandle, WriteHandle};
use crate::conduit::context::HandlerContext;
use crate::conduit::driver::{AmBody, Driver};
use crate::conduit::kind::ConduitKind;
use crate::counters::{WriteAck, WriteCounters, WriteCounting};
use crate::error::BridgeError;
use crate::message::{HandlerId, MAX_ARGS, MAX_MEDIUM, MessageView};
use crate::recovered::Recovered;
use crate::sleep::Awaiting;
use crate::topology::Topology;

/// The job's handlers as the endpoint runs them. The table's handlers take a `Token`, which
/// holds the endpoint, so the endpoint holds the table through this trait (implemented in
/// `handler_table.rs`, above this file).
pub(crate) trait RunHandlers: std::fmt::Debug + Send + Sync {
    /// Runs the handler `message` names, with a token for `endpoint`.
    fn run(&self, endpoint: &Endpoint, message: MessageView<'_>);
    /// Number of registered handlers.
    fn registered(&self) -> usize;
}

/// One rank's view of the job: identity, segments, AMs, RMA, atomics, barrier, counters.
#[derive(Debug)]
pub struct Endpoint {
    rank: usize,
    driver: Driver,
    handlers: Arc<dyn RunHandlers>,
    /// `handlers.registered()`, read by every message send.
    registered: usize,
    in_handler: Cell<bool>,
    phase: Cell<Phase>,
    /// What the latest recovery told this rank (`None` in a job that lost no process).
    recovered: RefCell<Option<Recovered>>,
}

/// Resets the in-handler flag even if the handler unwinds.
struct HandlerScope<'a>(&'a Cell<bool>);

impl Drop for HandlerScope<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

impl HandlerContext for Endpoint {
    fn run_handler(&self, message: MessageView<'_>) {
        self.in_handler.set(true);
        let scope = HandlerScope(&self.in_handler);
        self.handlers.run(self, message);
        drop(scope);
        // Only now, after any replies or requests the handler sent were counted.
        self.driver.handled();
    }

    #[cold]
    fn report_hang(&self, awaiting: Awaiting, waited: Duration) {
        let detail = self.driver.hang_detail(awaiting.what, self.phase.get());
        crate::hang_report::print(self.rank, self.ranks(), awaiting, waited, &detail);
    }
}

impl Endpoint {
    /// The endpoint of `rank` over `driver`, running `handlers`.
    pub(crate) fn new(rank: usize, driver: Driver, handlers: Arc<dyn RunHandlers>) -> Self {
        Endpoint {
            rank,
            driver,
            registered: handlers.registered(),
            handlers,
            in_handler: Cell::new(false),
            phase: Cell::new(Phase::Idle),
            recovered: RefCell::new(None),
        }
    }

    /// Records what the recovery that made this rank's process a replacement told it.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn set_recovered(&self, recovered: Recovered) {
        *self.recovered.borrow_mut() = Some(recovered);
    }

    /// The driver, once the rank's body and its end are over.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn into_driver(self) -> Driver {
        self.driver
    }

    /// This rank's index, `0..ranks()`.
    #[inline]
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks in the job.
    #[inline]
    pub fn ranks(&self) -> usize {
        self.driver.ranks()
    }

    /// The conduit this job runs on.
    pub fn conduit(&self) -> ConduitKind {
        self.driver.kind()
    }

    /// The node grouping of the job (on mpi: the real hosts).
    pub fn topology(&self) -> Topology {
        self.driver.topology()
    }

    /// The node this rank is on.
    pub fn node(&self) -> usize {
        self.topology().node_of(self.rank)
    }

    /// Size of every rank's segment in bytes.
    pub fn segment_len(&self) -> usize {
        self.driver.segment_len()
    }

    /// Base address of `rank`'s segment if this process can address it directly: always on
    /// smp; on mpi the ranks of this host (their segments are mapped from a shared-memory
    /// window), and [`BridgeError::NotAddressable`] for the others. Use it only as the
    /// segment module allows: raw copies or atomics, no references.
    pub fn segment_base(&self, rank: usize) -> Result<*mut u8, BridgeError> {
        self.driver.segment_base(rank)
    }

    /// True if a put to `rank` travels as an active message (mpi, a rank this process does
    /// not map, in a job without the RMA window or toward a rank that counts writes now: see
    /// the mpi conduit's README).
    pub fn rma_by_messages(&self, rank: usize) -> bool {
        self.driver.rma_by_messages(rank)
    }

    /// True if this process maps `rank`'s segment (every rank on smp; on mpi the ranks of
    /// this host, unless `PGAS_MPI_PSHM=0`): RMA to it completes before its call returns.
    #[inline]
    pub fn maps(&self, rank: usize) -> bool {
        self.driver.maps(rank)
    }

    /// Runs `f` on this rank's counters.
    #[inline]
    pub(crate) fn with_counters<T>(&self, f: impl FnOnce(&WriteCounters) -> T) -> T {
        self.driver.with_counters(f)
    }

    /// Whether this rank is running an AM handler now (where a blocking call panics), for
    /// layers that must not wait there.
    pub fn in_handler(&self) -> bool {
        self.in_handler.get()
    }

    // ---- counters -------------------------------------------------------------------------

    /// This rank's Epoch Counter.
    pub fn epoch(&self) -> u64 {
        self.with_counters(WriteCounters::ec)
    }

    /// Sets this rank's Epoch Counter (a replaying CD rewinds it this way).
    pub fn set_epoch(&self, ec: u64) {
        self.with_counters(|c| c.set_ec(ec));
    }

    /// Advances this rank's Epoch Counter by `steps` and returns the new value.
    pub fn advance_epoch(&self, steps: u64) -> u64 {
        self.with_counters(|c| {
            let ec = c.ec() + steps;
            c.set_ec(ec);
            ec
        })
    }

    /// Number of writes that have landed in this rank's segment (0 in a job that does not
    /// count writes, [`crate::WriteCounting::Off`]).
    pub fn incoming_writes(&self) -> u64 {
        self.with_counters(WriteCounters::iwc)
    }

    /// Whether this job counts incoming writes (fixed at launch, the same on every rank;
    /// [`WriteCounting::Switched`] asked for runs as [`WriteCounting::On`] where the kernel
    /// lacks `membarrier(2)`).
    pub fn write_counting(&self) -> WriteCounting {
        self.driver.write_counting()
    }

    /// Starts counting the writes into this rank's segment, in a job launched with
    /// [`WriteCounting::Switched`] (elsewhere nothing changes). When it returns, every write
    /// into the segment that was not counted has landed, so [`Endpoint::incoming_writes`]
    /// read afterwards is a valid start of a gapless sequence. Costs a `membarrier(2)` the
    /// first time; nothing while already on.
    pub fn count_incoming_writes(&self) {
        self.driver.switch_counting(true);
    }

    /// Stops counting the writes into this rank's segment ([`WriteCounting::Switched`] only):
    /// acks of later writes are [`WriteAck::UNCOUNTED`] (a writer racing with the switch may
    /// still count).
    pub fn stop_counting_incoming_writes(&self) {
        self.driver.switch_counting(false);
    }

    /// Whether writes into this rank's segment are counted now.
    pub fn counts_incoming_writes(&self) -> bool {
        match self.write_counting() {
            WriteCounting::On => true,
            WriteCounting::Off => false,
            WriteCounting::Switched => self.with_counters(WriteCounters::switched_on),
        }
    }

    /// Counts a write into this rank's own segment (a message that modifies its memory), if
    /// the job counts writes.
    pub(crate) fn count_own_write(&self) -> WriteAck {
        let counting = self.write_counting();
        self.with_counters(|c| counting.count(c))
    }

    // ---- RMA ------------------------------------------------------------------------------

    /// Writes `src` into `rank`'s segment at `offset`; returns once the bytes are there, with
    /// the target's EC and the IWC value this write produced.
    // Always inlined: the hottest call of the smp conduit; with the `mpi` feature's arm it is
    // too large to be inlined by default, and its ack would travel through memory.
    #[inline(always)]
    pub fn put(&self, rank: usize, offset: usize, src: &[u8]) -> Result<WriteAck, BridgeError> {
        self.driver.put(self.in_handler.get(), rank, offset, src)
    }

    /// Writes `src` into `rank`'s segment at `offset` like [`Endpoint::put`], but the target's
    /// Incoming Write Counter does not count it; returns once the bytes are there.
    ///
    /// For memory a resilience runtime keeps for itself at the target (copies of another
    /// rank's state it preserves there), which the program never reads and which a replay of
    /// the program's incoming writes must not have to account for: the IWC counts the
    /// program's writes, and an uncounted write would otherwise show as a gap in its sequence.
    /// A NIC does this for a memory region registered without a counting event.
    #[inline]
    pub fn put_uncounted(&self, rank: usize, offset: usize, src: &[u8]) -> Result<(), BridgeError> {
        self.driver
            .put_uncounted(self.in_handler.get(), rank, offset, src)
    }

    /// Starts a put; `src` is reusable on return, the handle yields the ack on completion.
    #[inline]
    pub fn put_nb(
        &self,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<WriteHandle, BridgeError> {
        self.driver.put_nb(self.in_handler.get(), rank, offset, src)
    }

    /// Starts a put that a flush completes, if this put takes such a path (the mpi conduit's
    /// window: a rank this process does not map and that does not count writes now): `src` is
    /// reusable on return and the put is known by its number alone, no handle, no reference
    /// (a flood's form; [`FlushId::implies`] folds many into one). `None` if the put takes
    /// another path (then use [`Endpoint::put_nb`]), or the rank does not exist.
    ///
    /// [`FlushId::implies`]: crate::FlushId::implies
    #[inline]
    pub fn put_nb_flush(
        &self,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Option<Result<FlushId, BridgeError>> {
        self.driver.put_nb_flush(rank, offset, src)
    }

    /// Completes the one-sided operations in flight that need no message to complete (the mpi
    /// conduit's window puts and gets: one flush per target), without taking messages off the
    /// wire or running handlers; returns whether there were any. Free when there are none (smp:
    /// always). Lets a wait for a put's completion skip a full round of [`Endpoint::poll`].
    #[inline]
    pub fn flush_rma(&self) -> bool {
        self.driver.flush_rma()
    }

    /// Whether write `id` has completed (no progress, no flush).
    #[inline]
    pub fn flushed(&self, id: FlushId) -> bool {
        self.driver.flushed(id)
    }

    /// The handle of write `id` again, for a caller that tracks it with other handles.
    pub fn write_handle(&self, id: FlushId) -> WriteHandle {
        self.driver.write_handle(id)
    }

    /// Completes write `id`: a flush of its target unless that came already. Runs no handler
    /// (so it may be used inside one).
    #[inline]
    pub fn complete_flush(&self, id: FlushId) {
        self.driver.complete_flush(id)
    }

    /// Reads `dst.len()` bytes from `rank`'s segment at `offset`.
    #[inline]
    pub fn get(&self, rank: usize, offset: usize, dst: &mut [u8]) -> Result<(), BridgeError> {
        self.driver.get(self.in_handler.get(), rank, offset, dst)
    }

    /// Writes a vector of pieces into `rank`'s segment: piece `i` is `(offset, len)` there, and
    /// `src` holds the bytes of all pieces back to back. Across hosts it travels as one
    /// request; between ranks that share memory each piece is copied directly. Counts one
    /// incoming write per piece, consecutively; the ack describes the last piece (see
    /// [`crate::vector::piece_iwc`]). An empty list writes nothing and returns a default ack.
    /// Nothing is written if any piece lies outside the segment, the sizes differ, or the
    /// transfer is larger than one may be (see `vector.rs`: a segment's size in bytes, at
    /// most `vector::max_pieces` pieces).
    pub fn put_vector(
        &self,
        rank: usize,
        pieces: &[(usize, usize)],
        src: &[u8],
    ) -> Result<WriteAck, BridgeError> {
        self.driver
            .put_vector(self.in_handler.get(), rank, pieces, src)
    }

    /// Reads a vector of pieces of `rank`'s segment into `dst`, back to back: the get
    /// counterpart of [`Endpoint::put_vector`] (one request and one reply across hosts).
    pub fn get_vector(
        &self,
        rank: usize,
        pieces: &[(usize, usize)],
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        self.driver
            .get_vector(self.in_handler.get(), rank, pieces, dst)
    }

    /// Messages this rank has sent through the conduit so far: active messages, and on mpi
    /// also the requests, acks and credits of RMA across hosts (not payloads that follow their
    /// header, nor direct shared-memory copies). For tests and benchmarks that count messages.
    pub fn messages_sent(&self) -> u64 {
        self.driver.messages_sent()
    }

    /// Starts a get into `dst`, which stays borrowed until the handle completes. (On mpi a
    /// get from another host completes before this returns: a handle that could be leaked
    /// with `mem::forget` must not leave a transfer writing into `dst` after the borrow ends.)
    #[inline]
    pub fn get_nb<'buf>(
        &self,
        rank: usize,
        offset: usize,
        dst: &'buf mut [u8],
    ) -> Result<GetHandle<'buf>, BridgeError> {
        self.get(rank, offset, dst).map(|()| GetHandle::complete())
    }

    /// Starts a get of `len` bytes of `rank`'s segment at `offset` into a buffer the handle
    /// owns. From memory this process maps (every rank on smp) the data is read before this
    /// returns; from another host a request leaves with an id and the reply completes the
    /// handle during progress, so many gets can be in flight.
    pub fn get_nb_owned(
        &self,
        rank: usize,
        offset: usize,
        len: usize,
    ) -> Result<OwnedGetHandle, BridgeError> {
        self.driver
            .get_nb_owned(self.in_handler.get(), rank, offset, len)
    }

    /// Starts a remote atomic on the 8-byte aligned word at `offset` of `rank`'s segment. On
    /// memory this process maps it is done before this returns; on another host the reply
    /// completes the handle during progress.
    pub fn atomic_nb(
        &self,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<AtomicHandle, BridgeError> {
        self.driver
            .atomic_nb(self.in_handler.get(), rank, offset, op)
    }

    /// Runs a remote atomic on the 8-byte aligned word at `offset` of `rank`'s segment.
    #[inline]
    pub fn atomic(
        &self,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<AtomicResult, BridgeError> {
        self.driver.atomic(self.in_handler.get(), rank, offset, op)
    }

    // ---- active messages ------------------------------------------------------------------

    /// Sends a short request (arguments only) to `rank`.
    pub fn am_request_short(
        &self,
        rank: usize,
        handler: HandlerId,
        args: &[u64],
    ) -> Result<(), BridgeError> {
        self.send_short(rank, handler, args, false)
    }

    /// Sends a medium request: `payload` (at most [`MAX_MEDIUM`] bytes) is copied to `rank`.
    pub fn am_request_medium(
        &self,
        rank: usize,
        handler: HandlerId,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), BridgeError> {
        self.send_medium(rank, handler, args, payload, false)
    }

    /// Sends a long request: `payload` is written into `rank`'s segment at `offset` (counted as
    /// an incoming write there), then the handler runs.
    pub fn am_request_long(
        &self,
        rank: usize,
        handler: HandlerId,
        args: &[u64],
        payload: &[u8],
        offset: usize,
    ) -> Result<WriteHandle, BridgeError> {
        self.send_long(rank, handler, args, payload, offset, false)
    }

    /// Sends a short message (a request, or a reply if `is_reply`).
    pub(crate) fn send_short(
        &self,
        target: usize,
        handler: HandlerId,
        args: &[u64],
        is_reply: bool,
    ) -> Result<(), BridgeError> {
        self.check(target, handler, args)?;
        self.driver.send(
            self.in_handler.get(),
            target,
            handler.0,
            is_reply,
            args,
            AmBody::Short,
        )
    }

    /// Sends a medium message (a request, or a reply if `is_reply`).
    pub(crate) fn send_medium(
        &self,
        target: usize,
        handler: HandlerId,
        args: &[u64],
        payload: &[u8],
        is_reply: bool,
    ) -> Result<(), BridgeError> {
        if payload.len() > MAX_MEDIUM {
            return Err(BridgeError::PayloadTooLarge {
                len: payload.len(),
                max: MAX_MEDIUM,
            });
        }
        self.check(target, handler, args)?;
        self.driver.send(
            self.in_handler.get(),
            target,
            handler.0,
            is_reply,
            args,
            AmBody::Medium(payload),
        )
    }

    /// Sends a long message (a request, or a reply if `is_reply`). Everything is checked
    /// before the payload lands, so a refused message leaves no counted write behind.
    pub(crate) fn send_long(
        &self,
        target: usize,
        handler: HandlerId,
        args: &[u64],
        payload: &[u8],
        offset: usize,
        is_reply: bool,
    ) -> Result<WriteHandle, BridgeError> {
        self.check(target, handler, args)?;
        self.driver.send_long(
            self.in_handler.get(),
            target,
            handler.0,
            is_reply,
            args,
            payload,
            offset,
        )
    }

    /// Checks a message's target, handler and argument count.
    #[inline]
    fn check(&self, target: usize, handler: HandlerId, args: &[u64]) -> Result<(), BridgeError> {
        let ranks = self.ranks();
        if target >= ranks {
            return Err(BridgeError::NoSuchRank {
                rank: target,
                ranks,
            });
        }
        handler.check(self.registered)?;
        if args.len() > MAX_ARGS {
            return Err(BridgeError::TooManyArgs {
                given: args.len(),
                max: MAX_ARGS,
            });
        }
        Ok(())
    }

    // ---- progress -------------------------------------------------------------------------

    /// Runs queued active-message handlers (at most a batch); returns how many ran. Inside a
    /// handler it does nothing: handlers never nest.
    pub fn poll(&self) -> usize {
        if self.in_handler.get() {
            return 0;
        }
        self.driver.poll(self)
    }

    /// Polls until `done()` is true, spinning, then yielding, then parking (see `sleep`).
    /// Unwinds if another rank has failed. Panics inside an AM handler, where waiting would
    /// deadlock the rank.
    pub fn wait_until(&self, done: impl FnMut() -> bool) {
        self.wait_for(Awaiting::default(), done)
    }

    /// [`Endpoint::wait_until`], telling what is awaited: with `PGAS_HANG_REPORT=SECONDS` a
    /// wait that long without progress prints `awaiting` (and, for a barrier, the ranks that
    /// have not arrived) once to stderr, and keeps waiting.
    pub fn wait_for(&self, awaiting: Awaiting, done: impl FnMut() -> bool) {
        self.assert_may_block();
        self.driver.wait_for(self, awaiting, done)
    }

    fn assert_may_block(&self) {
        assert!(
            !self.in_handler.get(),
            "rank {}: a blocking call inside an active-message handler would deadlock; \
             use non-blocking operations there",
            self.rank
        );
    }

    // ---- barrier --------------------------------------------------------------------------

    /// Blocks until every rank has entered the barrier.
    pub fn barrier(&self) -> Result<(), BridgeError> {
        self.barrier_notify()?;
        self.barrier_wait()
    }

    /// First half of a split-phase barrier: announces arrival and returns at once.
    pub fn barrier_notify(&self) -> Result<(), BridgeError> {
        if self.phase.get() != Phase::Idle {
            return Err(BridgeError::BarrierOrder(
                "barrier_notify called again before barrier_wait completed the previous barrier",
            ));
        }
        let phase = self.driver.barrier_notify()?;
        self.phase.set(phase);
        Ok(())
    }

    /// Second half: true (and the barrier is over) if every rank has notified; never blocks.
    pub fn barrier_try(&self) -> Result<bool, BridgeError> {
        let Phase::Notified(generation) = self.phase.get() else {
            return Err(BridgeError::BarrierOrder(
                "barrier_try called without barrier_notify",
            ));
        };
        self.poll();
        let done = self.driver.barrier_try(generation)?;
        if done {
            self.phase.set(Phase::Idle);
        }
        Ok(done)
    }

    /// Second half: waits (polling) until every rank has notified.
    ///
    /// Panics, naming the cause, if the barrier can no longer complete because some rank has
    /// already returned from the job (the ranks called `barrier` different numbers of times).
    pub fn barrier_wait(&self) -> Result<(), BridgeError> {
        let Phase::Notified(generation) = self.phase.get() else {
            return Err(BridgeError::BarrierOrder(
                "barrier_wait called without barrier_notify",
            ));
        };
        self.assert_may_block();
        let result = self.driver.barrier_wait(self, generation);
        self.phase.set(Phase::Idle);
        result
    }

    // ---- recovery after a lost process ---------------------------------------------------------

    /// Goes on after another rank's process was lost (mpi conduit with the `ulfm` feature,
    /// spares started with `PGAS_SPARES`): call it after catching the unwind a peer's failure
    /// starts ([`PeerFailure`](crate::for_runtimes::PeerFailure), `std::panic::catch_unwind`
    /// around the work this rank can redo). Collective over every live process: the job's
    /// communicator is revoked and shrunk, the live processes agree on the dead, a spare takes
    /// each lost rank's number, and the conduit is rebuilt over the new communicator. This
    /// rank keeps its number, its segment's contents and every `(rank, offset)` address;
    /// handles of operations started before answer [`BridgeError::WorldRebuilt`]. The lost
    /// ranks' replacements run the job's body from its start, [`Endpoint::recovered`] telling
    /// them so. When the job cannot go on (no spare left, another loss during the recovery)
    /// the process ends, the first live one printing one line that says why.
    ///
    /// Refused inside a handler or an operation, on smp, without the `ulfm` feature, and when
    /// no process was lost.
    pub fn recover(&self) -> Result<Recovered, BridgeError> {
        if self.in_handler.get() {
            return Err(BridgeError::RecoverRefused(
                "called inside an active-message handler: catch the unwind in the rank's body",
            ));
        }
        let recovered = self.driver.recover()?;
        self.phase.set(Phase::Idle);
        *self.recovered.borrow_mut() = Some(recovered.clone());
        Ok(recovered)
    }

    /// What the latest recovery told this rank: `None` in a job that lost no process; on a
    /// survivor after [`Endpoint::recover`], and on a replacement from the start of its body
    /// (`replacement: true`).
    pub fn recovered(&self) -> Option<Recovered> {
        self.recovered.borrow().clone()
    }

    // ---- end of the job -------------------------------------------------------------------

    /// Completes this rank's part of the job after its body returned: finishes a notified
    /// barrier, then keeps serving AMs until every rank has returned and no message is queued
    /// or being handled anywhere (handlers may still send replies and new requests).
    pub(crate) fn finish(&self) {
        if self.phase.get() != Phase::Idle {
            self.barrier_wait()
                .expect("a notified barrier is waited on");
        }
        self.assert_may_block();
        self.driver.finish(self);
    }
}
