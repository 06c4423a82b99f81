//! A rank's handle on the job: every operation a rank initiates goes through its `Endpoint`.
//!
//! An endpoint belongs to its rank's thread (it is `!Sync`); AM handlers run on that thread,
//! inside [`Endpoint::poll`], and get the same endpoint through their [`Token`].
//!
//! Every operation dispatches on the endpoint's `Conduit` with one `match`; the smp arm is
//! the code the smp conduit always ran, the mpi arm forwards to the mpi world.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::active_message::{HandlerId, MAX_MEDIUM, MessageView, Token};
use crate::atomic::{AtomicOp, AtomicResult};
use crate::barrier::Phase;
use crate::completion::{AccessRegion, AtomicHandle, GetHandle, OwnedGetHandle, WriteHandle};
use crate::conduit::Conduit;
use crate::conduit::smp::SmpWorld;
use crate::conduit::smp_inbox::Outgoing;
use crate::counters::{WriteAck, WriteCounters, WriteCounting};
use crate::error::BridgeError;
use crate::sleep::{Awaiting, Backoff};
use crate::topology::Topology;

/// What a rank in a barrier waits for (hang report).
pub(crate) const BARRIER: &str = "a barrier";
/// What a rank whose body returned waits for (hang report).
pub(crate) const FINISH: &str = "the end of the job (every rank's body to return)";

/// `0, 1, 2` for at most 16 ranks, then how many more.
fn rank_list(ranks: &[usize]) -> String {
    let mut s: Vec<String> = ranks.iter().take(16).map(usize::to_string).collect();
    if ranks.len() > 16 {
        s.push(format!("and {} more", ranks.len() - 16));
    }
    if s.is_empty() {
        "none".into()
    } else {
        s.join(", ")
    }
}

/// Most messages one `poll` runs before returning, so a flood cannot starve the caller.
pub(crate) const POLL_BATCH: usize = 64;

/// One rank's view of the job: identity, segments, AMs, RMA, atomics, barrier, counters.
#[derive(Debug)]
pub struct Endpoint {
    rank: usize,
    conduit: Conduit,
    in_handler: Cell<bool>,
    phase: Cell<Phase>,
    /// The smp inbox lane `poll` starts with.
    next_lane: Cell<usize>,
}

/// Resets the in-handler flag even if the handler unwinds.
struct HandlerScope<'a>(&'a Cell<bool>);

impl Drop for HandlerScope<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

impl Endpoint {
    pub(crate) fn new(rank: usize, world: Arc<SmpWorld>) -> Self {
        Self::with_conduit(rank, Conduit::Smp(world))
    }

    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn with_conduit(rank: usize, conduit: Conduit) -> Self {
        Endpoint {
            rank,
            conduit,
            in_handler: Cell::new(false),
            phase: Cell::new(Phase::Idle),
            next_lane: Cell::new(0),
        }
    }

    /// This rank's index, `0..ranks()`.
    #[inline]
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks in the job.
    #[inline]
    pub fn ranks(&self) -> usize {
        match &self.conduit {
            Conduit::Smp(world) => world.ranks(),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.ranks(),
        }
    }

    /// The conduit this job runs on.
    pub fn conduit(&self) -> crate::conduit::ConduitKind {
        match &self.conduit {
            Conduit::Smp(_) => crate::conduit::ConduitKind::Smp,
            #[cfg(feature = "mpi")]
            Conduit::Mpi(_) => crate::conduit::ConduitKind::Mpi,
        }
    }

    /// The node grouping of the job (on mpi: the real hosts).
    pub fn topology(&self) -> Topology {
        match &self.conduit {
            Conduit::Smp(world) => world.topology,
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.topology(),
        }
    }

    /// The node this rank is on.
    pub fn node(&self) -> usize {
        self.topology().node_of(self.rank)
    }

    /// Size of every rank's segment in bytes.
    pub fn segment_len(&self) -> usize {
        match &self.conduit {
            Conduit::Smp(world) => world.segments[self.rank].len(),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.segment_len(),
        }
    }

    /// Base address of `rank`'s segment if this process can address it directly: always on
    /// smp; on mpi the ranks of this host (their segments are mapped from a shared-memory
    /// window), and [`BridgeError::NotAddressable`] for the others. Use it only as the
    /// segment module allows: raw copies or atomics, no references.
    pub fn segment_base(&self, rank: usize) -> Result<*mut u8, BridgeError> {
        match &self.conduit {
            Conduit::Smp(world) => Ok(world.segment(rank)?.base()),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.segment_base(rank),
        }
    }

    /// True if a put to `rank` travels as an active message (mpi, a rank this process does
    /// not map, in a job without the RMA window or toward a rank that counts writes now: see
    /// the mpi conduit's README).
    pub fn rma_by_messages(&self, rank: usize) -> bool {
        match &self.conduit {
            Conduit::Smp(_) => {
                let _ = rank; // every rank is mapped on smp
                false
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.puts_by_messages(rank),
        }
    }

    /// True if this process maps `rank`'s segment (every rank on smp; on mpi the ranks of
    /// this host, unless `PGAS_MPI_PSHM=0`): RMA to it completes before its call returns.
    #[inline]
    pub fn maps(&self, rank: usize) -> bool {
        match &self.conduit {
            Conduit::Smp(_) => rank < self.ranks(),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.maps(rank),
        }
    }

    pub(crate) fn counters(&self) -> &WriteCounters {
        match &self.conduit {
            Conduit::Smp(world) => &world.counters[self.rank],
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.counters(),
        }
    }

    /// Whether this rank is running an AM handler now (where a blocking call panics), for
    /// layers that must not wait there.
    pub fn in_handler(&self) -> bool {
        self.in_handler.get()
    }

    // ---- counters -------------------------------------------------------------------------

    /// This rank's Epoch Counter.
    pub fn epoch(&self) -> u64 {
        self.counters().ec()
    }

    /// Sets this rank's Epoch Counter (a replaying CD rewinds it this way).
    pub fn set_epoch(&self, ec: u64) {
        self.counters().set_ec(ec);
    }

    /// Advances this rank's Epoch Counter by `steps` and returns the new value.
    pub fn advance_epoch(&self, steps: u64) -> u64 {
        let ec = self.counters().ec() + steps;
        self.counters().set_ec(ec);
        ec
    }

    /// Number of writes that have landed in this rank's segment (0 in a job that does not
    /// count writes, [`crate::WriteCounting::Off`]).
    pub fn incoming_writes(&self) -> u64 {
        self.counters().iwc()
    }

    /// Whether this job counts incoming writes (fixed at launch, the same on every rank;
    /// [`WriteCounting::Switched`] asked for runs as [`WriteCounting::On`] where the kernel
    /// lacks `membarrier(2)`).
    pub fn write_counting(&self) -> WriteCounting {
        match &self.conduit {
            Conduit::Smp(world) => world.write_counting,
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.write_counting(),
        }
    }

    /// Starts counting the writes into this rank's segment, in a job launched with
    /// [`WriteCounting::Switched`] (elsewhere nothing changes). When it returns, every write
    /// into the segment that was not counted has landed, so [`Endpoint::incoming_writes`]
    /// read afterwards is a valid start of a gapless sequence. Costs a `membarrier(2)` the
    /// first time; nothing while already on.
    pub fn count_incoming_writes(&self) {
        match &self.conduit {
            Conduit::Smp(world) => world.switch_counting(self.rank, true),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.switch_counting(true),
        }
    }

    /// Stops counting the writes into this rank's segment ([`WriteCounting::Switched`] only):
    /// acks of later writes are [`WriteAck::UNCOUNTED`] (a writer racing with the switch may
    /// still count).
    pub fn stop_counting_incoming_writes(&self) {
        match &self.conduit {
            Conduit::Smp(world) => world.switch_counting(self.rank, false),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.switch_counting(false),
        }
    }

    /// Whether writes into this rank's segment are counted now.
    pub fn counts_incoming_writes(&self) -> bool {
        match self.write_counting() {
            WriteCounting::On => true,
            WriteCounting::Off => false,
            WriteCounting::Switched => self.counters().switched_on(),
        }
    }

    /// Counts a write into this rank's own segment (a message that modifies its memory), if
    /// the job counts writes.
    pub(crate) fn count_own_write(&self) -> WriteAck {
        self.write_counting().count(self.counters())
    }

    // ---- RMA ------------------------------------------------------------------------------

    /// Writes `src` into `rank`'s segment at `offset`; returns once the bytes are there, with
    /// the target's EC and the IWC value this write produced.
    // Always inlined: in a binary with the `mpi` feature the counting switch's arm tipped it
    // over the inlining threshold, and an 8-byte smp put returning its ack through memory
    // took 4.7 ns instead of 1.15 (bridge-bench, `put_latency` / `8B`).
    #[inline(always)]
    pub fn put(&self, rank: usize, offset: usize, src: &[u8]) -> Result<WriteAck, BridgeError> {
        match &self.conduit {
            Conduit::Smp(world) => {
                world.segment(rank)?.write(offset, src)?;
                Ok(world.count_write(rank))
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.put(self, rank, offset, src),
        }
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
        match &self.conduit {
            Conduit::Smp(world) => world.segment(rank)?.write(offset, src),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.put_uncounted(self, rank, offset, src),
        }
    }

    /// Starts a put; `src` is reusable on return, the handle yields the ack on completion.
    #[inline]
    pub fn put_nb(
        &self,
        rank: usize,
        offset: usize,
        src: &[u8],
    ) -> Result<WriteHandle, BridgeError> {
        match &self.conduit {
            Conduit::Smp(_) => self.put(rank, offset, src).map(WriteHandle::complete),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.put_nb(self, rank, offset, src),
        }
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
    ) -> Option<Result<crate::completion::FlushId, BridgeError>> {
        match &self.conduit {
            Conduit::Smp(_) => {
                let _ = (rank, offset, src);
                None
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.put_nb_flush(rank, offset, src),
        }
    }

    /// Completes the one-sided operations in flight that need no message to complete (the mpi
    /// conduit's window puts and gets: one flush per target), without taking messages off the
    /// wire or running handlers; returns whether there were any. Free when there are none (smp:
    /// always). Lets a wait for a put's completion skip a full round of [`Endpoint::poll`].
    #[inline]
    pub fn flush_rma(&self) -> bool {
        match &self.conduit {
            Conduit::Smp(_) => false,
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.flush_rma(),
        }
    }

    /// Whether write `id` has completed (no progress, no flush).
    #[inline]
    pub fn flushed(&self, id: crate::completion::FlushId) -> bool {
        match &self.conduit {
            Conduit::Smp(_) => {
                let _ = id;
                true
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.flushed(id.0),
        }
    }

    /// The handle of write `id` again, for a caller that tracks it with other handles.
    pub fn write_handle(&self, id: crate::completion::FlushId) -> WriteHandle {
        match &self.conduit {
            Conduit::Smp(_) => {
                let _ = id; // never made on smp, where every write completes at once
                WriteHandle::complete(WriteAck::UNCOUNTED)
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => WriteHandle::pending(world.clone(), id.0),
        }
    }

    /// Completes write `id`: a flush of its target unless that came already. Runs no handler
    /// (so it may be used inside one).
    #[inline]
    pub fn complete_flush(&self, id: crate::completion::FlushId) {
        match &self.conduit {
            Conduit::Smp(_) => {
                let _ = id;
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => {
                world.wait_ack(id.0);
            }
        }
    }

    /// Reads `dst.len()` bytes from `rank`'s segment at `offset`.
    #[inline]
    pub fn get(&self, rank: usize, offset: usize, dst: &mut [u8]) -> Result<(), BridgeError> {
        match &self.conduit {
            Conduit::Smp(world) => world.segment(rank)?.read(offset, dst),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.get(self, rank, offset, dst),
        }
    }

    /// Writes a vector of pieces into `rank`'s segment: piece `i` is `(offset, len)` there, and
    /// `src` holds the bytes of all pieces back to back. Across hosts it travels as one
    /// request; between ranks that share memory each piece is copied directly. Counts one
    /// incoming write per piece, consecutively; the ack describes the last piece (see
    /// [`crate::vector::piece_iwc`]). An empty list writes nothing and returns a default ack.
    /// Nothing is written if any piece lies outside the segment, the sizes differ, or the
    /// transfer is larger than one may be (see [`crate::vector`]: a segment's size in bytes, at
    /// most [`crate::vector::max_pieces`] pieces).
    pub fn put_vector(
        &self,
        rank: usize,
        pieces: &[(usize, usize)],
        src: &[u8],
    ) -> Result<WriteAck, BridgeError> {
        match &self.conduit {
            Conduit::Smp(world) => crate::vector::scatter_counted(
                world.segment(rank)?,
                world.write_counting,
                &world.counters[rank],
                pieces,
                src,
            ),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.put_vector(self, rank, pieces, src),
        }
    }

    /// Reads a vector of pieces of `rank`'s segment into `dst`, back to back: the get
    /// counterpart of [`Endpoint::put_vector`] (one request and one reply across hosts).
    pub fn get_vector(
        &self,
        rank: usize,
        pieces: &[(usize, usize)],
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        match &self.conduit {
            Conduit::Smp(world) => crate::vector::gather(world.segment(rank)?, pieces, dst),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.get_vector(self, rank, pieces, dst),
        }
    }

    /// Messages this rank has sent through the conduit so far: active messages, and on mpi
    /// also the requests, acks and credits of RMA across hosts (not payloads that follow their
    /// header, nor direct shared-memory copies). For tests and benchmarks that count messages.
    pub fn messages_sent(&self) -> u64 {
        match &self.conduit {
            Conduit::Smp(world) => world.traffic[self.rank].sent.load(Ordering::Relaxed),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.messages_sent(),
        }
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
        match &self.conduit {
            Conduit::Smp(world) => {
                let mut bytes = vec![0u8; len];
                world.segment(rank)?.read(offset, &mut bytes)?;
                Ok(OwnedGetHandle::complete(bytes))
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.get_nb_owned(self, rank, offset, len),
        }
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
        match &self.conduit {
            Conduit::Smp(_) => self.atomic(rank, offset, op).map(AtomicHandle::complete),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.atomic_nb(self, rank, offset, op),
        }
    }

    /// Opens a region of implicit-handle puts and gets, completed by one `wait_all`.
    pub fn access_region<'buf>(&self) -> AccessRegion<'_, 'buf> {
        AccessRegion::new(self)
    }

    /// Runs a remote atomic on the 8-byte aligned word at `offset` of `rank`'s segment.
    #[inline]
    pub fn atomic(
        &self,
        rank: usize,
        offset: usize,
        op: AtomicOp,
    ) -> Result<AtomicResult, BridgeError> {
        match &self.conduit {
            Conduit::Smp(world) => {
                let word = world.segment(rank)?.atomic_u64(offset)?;
                let (previous, wrote) = op.apply(word);
                let ack = wrote.then(|| world.count_write(rank));
                Ok(AtomicResult { previous, ack })
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.atomic(self, rank, offset, op),
        }
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
        match &self.conduit {
            Conduit::Smp(world) => {
                self.check(target, handler, args)?;
                // SAFETY: this endpoint is its rank's only one, so this thread is the only
                // sender from `self.rank`.
                unsafe {
                    world.deliver(
                        self.rank,
                        target,
                        handler.0,
                        is_reply,
                        args,
                        Outgoing::Short,
                    )
                };
                Ok(())
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => {
                let head = self.am_head(target, handler, args, is_reply)?;
                world
                    .send_am(self, target, head, crate::conduit::mpi::OutBody::Short)
                    .map(|_| ())
            }
        }
    }

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
        match &self.conduit {
            Conduit::Smp(world) => {
                self.check(target, handler, args)?;
                // SAFETY: as in `send_short`.
                unsafe {
                    world.deliver(
                        self.rank,
                        target,
                        handler.0,
                        is_reply,
                        args,
                        Outgoing::Medium(payload),
                    )
                };
                Ok(())
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => {
                let head = self.am_head(target, handler, args, is_reply)?;
                world
                    .send_am(
                        self,
                        target,
                        head,
                        crate::conduit::mpi::OutBody::Medium(payload),
                    )
                    .map(|_| ())
            }
        }
    }

    pub(crate) fn send_long(
        &self,
        target: usize,
        handler: HandlerId,
        args: &[u64],
        payload: &[u8],
        offset: usize,
        is_reply: bool,
    ) -> Result<WriteHandle, BridgeError> {
        // Everything is checked before the payload lands, so a refused message leaves no
        // counted write behind.
        match &self.conduit {
            Conduit::Smp(world) => {
                self.check(target, handler, args)?;
                world.segments[target].write(offset, payload)?;
                let ack = world.count_write(target);
                let body = Outgoing::Long {
                    offset,
                    len: payload.len(),
                    ack,
                };
                // SAFETY: as in `send_short`.
                unsafe { world.deliver(self.rank, target, handler.0, is_reply, args, body) };
                Ok(WriteHandle::complete(ack))
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => {
                let head = self.am_head(target, handler, args, is_reply)?;
                world
                    .send_am(
                        self,
                        target,
                        head,
                        crate::conduit::mpi::OutBody::Long { payload, offset },
                    )
                    .map(|h| h.expect("a long message is acknowledged"))
            }
        }
    }

    /// Checks a message (as [`Endpoint::check`]) and names its handler, reply flag and
    /// arguments for the mpi conduit.
    #[cfg(feature = "mpi")]
    #[inline]
    fn am_head<'a>(
        &self,
        target: usize,
        handler: HandlerId,
        args: &'a [u64],
        is_reply: bool,
    ) -> Result<crate::conduit::mpi::AmHead<'a>, BridgeError> {
        self.check(target, handler, args)?;
        Ok(crate::conduit::mpi::AmHead {
            handler: handler.0,
            is_reply,
            args,
        })
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
        self.handlers().validate(handler)?;
        if args.len() > crate::active_message::MAX_ARGS {
            return Err(BridgeError::TooManyArgs {
                given: args.len(),
                max: crate::active_message::MAX_ARGS,
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
        match &self.conduit {
            Conduit::Smp(world) => {
                // One pass over the lanes, each drained up to what is left of the batch,
                // starting one lane further each time so that no source is always last.
                let inbox = &world.inboxes[self.rank];
                let lanes = inbox.len();
                let first = self.next_lane.get();
                let mut ran = 0;
                let mut source = first;
                loop {
                    while ran < POLL_BATCH {
                        // SAFETY: this endpoint is the only one of its rank, so this thread
                        // is the only target of its inbox; handlers do not nest (the guard
                        // above), so no `pop` runs inside another.
                        let Some(message) = (unsafe { inbox.lane(source).pop() }) else {
                            break;
                        };
                        self.run_handler(message.view(source));
                        ran += 1;
                    }
                    source += 1;
                    if source == lanes {
                        source = 0;
                    }
                    if source == first || ran == POLL_BATCH {
                        break;
                    }
                }
                self.next_lane
                    .set(if first + 1 == lanes { 0 } else { first + 1 });
                ran
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.poll(self, POLL_BATCH),
        }
    }

    fn handlers(&self) -> &crate::active_message::HandlerTable {
        match &self.conduit {
            Conduit::Smp(world) => &world.handlers,
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => &world.handlers,
        }
    }

    pub(crate) fn run_handler(&self, message: MessageView<'_>) {
        let handlers = self.handlers();
        let Some(handler) = handlers.get(message.handler as usize) else {
            panic!(
                "malformed active message from rank {}: handler {} is not registered here ({} are)",
                message.source,
                message.handler,
                handlers.len()
            );
        };
        self.in_handler.set(true);
        let _scope = HandlerScope(&self.in_handler);
        let token = Token {
            endpoint: self,
            message,
            replied: Cell::new(false),
        };
        handler(&token);
        // Only now, after any replies or requests the handler sent were counted.
        match &self.conduit {
            Conduit::Smp(world) => world.handled(self.rank),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.handled(),
        }
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
    pub fn wait_for(&self, awaiting: Awaiting, mut done: impl FnMut() -> bool) {
        self.assert_may_block();
        let world = match &self.conduit {
            Conduit::Smp(world) => &**world,
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => return world.wait_until(self, awaiting, done),
        };
        let inbox = &world.inboxes[self.rank];
        let mut backoff = Backoff::for_wait(&awaiting);
        loop {
            if done() {
                return;
            }
            if self.poll() > 0 {
                // Traffic tends to come in bursts (a round trip, a flood): stay responsive.
                backoff.reset();
            } else {
                world.failure.check();
                backoff.snooze(&world.sleepers[self.rank], || {
                    // SAFETY: this thread is the inbox's target (see `poll`).
                    (unsafe { inbox.is_empty() }) && !world.failure.is_failed() && !done()
                });
                if let Some(waited) = backoff.hang_due() {
                    self.report_hang(awaiting, waited);
                }
            }
        }
    }

    /// Prints the hang report of a wait for `awaiting` that has lasted `waited`: one line.
    #[cold]
    pub(crate) fn report_hang(&self, awaiting: Awaiting, waited: std::time::Duration) {
        let from = awaiting
            .rank
            .map_or(String::new(), |r| format!(" from rank {r}"));
        let detail = match (&self.conduit, awaiting.what, self.phase.get()) {
            (Conduit::Smp(world), BARRIER, Phase::Notified(g)) => format!(
                " #{}; ranks not arrived: {}",
                g + 1,
                rank_list(&world.barrier.missing(g))
            ),
            (Conduit::Smp(world), FINISH, _) => format!(
                "; {} of {} ranks have returned",
                world.finished(),
                world.ranks()
            ),
            #[cfg(feature = "mpi")]
            (Conduit::Mpi(_), BARRIER, _) => {
                "; MPI does not tell which ranks have arrived (look for a stopped process)".into()
            }
            _ => String::new(),
        };
        crate::stderr_line::stderr_line(format_args!(
            "pgas: hang report: rank {} of {} has waited {:.1} s without progress for {}{from}{detail} \
             (PGAS_HANG_REPORT; still waiting)",
            self.rank,
            self.ranks(),
            waited.as_secs_f64(),
            awaiting.what,
        ));
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
        let phase = match &self.conduit {
            Conduit::Smp(world) => {
                let (phase, released) = world.barrier.notify();
                world.barrier.record(self.rank, phase);
                if released {
                    world.wake_all();
                }
                phase
            }
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => {
                world.barrier_notify()?;
                Phase::Notified(0)
            }
        };
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
        let done = match &self.conduit {
            Conduit::Smp(world) => world.barrier.is_complete(generation),
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => world.barrier_test()?,
        };
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
        let world = match &self.conduit {
            Conduit::Smp(world) => &**world,
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => {
                let mut failed = None;
                self.wait_for(Awaiting::new(BARRIER).woken(), || {
                    match world.barrier_test() {
                        Ok(done) => done,
                        Err(e) => {
                            failed = Some(e);
                            true
                        }
                    }
                });
                self.phase.set(Phase::Idle);
                return failed.map_or(Ok(()), Err);
            }
        };
        self.wait_for(Awaiting::new(BARRIER).woken(), || {
            if world.barrier.is_complete(generation) {
                return true;
            }
            let finished = world.finished();
            // A finished rank completed all its barriers; re-read after acquiring its count.
            if finished > 0 && !world.barrier.is_complete(generation) {
                panic!(
                    "rank {} waits in barrier #{} but {finished} rank(s) already returned from \
                     the job: every rank must enter the same number of barriers",
                    self.rank,
                    generation + 1
                );
            }
            false
        });
        self.phase.set(Phase::Idle);
        Ok(())
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
        let world = match &self.conduit {
            Conduit::Smp(world) => &**world,
            #[cfg(feature = "mpi")]
            Conduit::Mpi(world) => return world.finish(self),
        };
        let ranks = world.ranks();
        world.finished.fetch_add(1, Ordering::AcqRel);
        world.wake_all();
        // Every message must run, including replies and requests that handlers send while
        // other ranks are already done: wait for global quiescence (see `SmpWorld::quiet`),
        // not just for this rank's inbox to drain.
        self.wait_for(Awaiting::new(FINISH).woken(), || {
            world.finished() == ranks && world.quiet()
        });
    }
}
