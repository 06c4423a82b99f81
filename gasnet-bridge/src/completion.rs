//! Completion handles of non-blocking operations, and the implicit-handle access region.
//!
//! On the smp conduit every operation is complete when its call returns, so handles are born
//! complete; the handle types are what a program writes against so that the same code waits
//! correctly on conduits where completion arrives later (the mpi conduit's puts to another
//! host complete when the target's acknowledgement comes back).

use std::marker::PhantomData;

use crate::atomic::AtomicResult;
use crate::counters::WriteAck;
use crate::endpoint::Endpoint;
use crate::error::BridgeError;

/// A write that a flush completes, reduced to its number ([`WriteHandle::into_flush_id`]): no
/// reference, nothing to drop, eight bytes. What a layer above keeps per put when it tracks
/// many (a future's state); [`Endpoint::flushed`] tests it, [`Endpoint::complete_flush`]
/// completes it. Its ack is [`WriteAck::UNCOUNTED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushId(pub(crate) u64);

impl FlushId {
    /// True if this write's completion implies `earlier`'s (a later put to the same target:
    /// a flush completes every put started toward its target before it), so a caller tracking
    /// a flood may keep this number alone.
    #[inline]
    pub fn implies(self, earlier: FlushId) -> bool {
        #[cfg(feature = "mpi")]
        {
            crate::conduit::mpi::put_completes_after(earlier.0, self.0)
        }
        #[cfg(not(feature = "mpi"))]
        {
            let _ = earlier;
            false
        }
    }
}

/// Completion of a non-blocking write (put or long AM); yields the target's EC/IWC.
#[derive(Debug)]
#[must_use = "a write handle must be waited on or tested to learn its completion"]
pub struct WriteHandle {
    state: WriteState,
}

#[derive(Debug)]
enum WriteState {
    Done(WriteAck),
    /// Waiting for the target's ack of operation `id` (mpi conduit).
    #[cfg(feature = "mpi")]
    Pending(std::rc::Rc<crate::conduit::mpi::MpiWorld>, u64),
}

impl WriteHandle {
    #[inline]
    pub(crate) fn complete(ack: WriteAck) -> Self {
        WriteHandle {
            state: WriteState::Done(ack),
        }
    }

    #[cfg(feature = "mpi")]
    pub(crate) fn pending(world: std::rc::Rc<crate::conduit::mpi::MpiWorld>, id: u64) -> Self {
        WriteHandle {
            state: WriteState::Pending(world, id),
        }
    }

    /// Whether the write completed when it was started (always on smp and into memory this
    /// process maps): then the handle holds its ack and no progress is needed.
    #[inline]
    pub fn completed_at_once(&self) -> Option<WriteAck> {
        match &self.state {
            WriteState::Done(ack) => Some(*ack),
            #[cfg(feature = "mpi")]
            WriteState::Pending(..) => None,
        }
    }

    /// The ack if it has arrived, making no progress (for a caller that polls many handles
    /// after one round of progress, [`Endpoint::poll`]).
    pub fn arrived(&self) -> Option<WriteAck> {
        match &self.state {
            WriteState::Done(ack) => Some(*ack),
            #[cfg(feature = "mpi")]
            WriteState::Pending(world, id) => world.peek_ack(*id),
        }
    }

    /// The ack if the write has completed at the target, without waiting (on mpi this makes
    /// one round of progress on the conduit's own messages first).
    pub fn test(&self) -> Option<WriteAck> {
        match &self.state {
            WriteState::Done(ack) => Some(*ack),
            #[cfg(feature = "mpi")]
            WriteState::Pending(world, id) => world.test_ack(*id),
        }
    }

    /// The write's number if a flush of the one-sided path completes it, with no message
    /// (the mpi conduit's window puts; [`Endpoint::flush_rma`]), else the handle back.
    #[inline]
    pub fn into_flush_id(self) -> Result<FlushId, WriteHandle> {
        match &self.state {
            #[cfg(feature = "mpi")]
            WriteState::Pending(world, id) if world.is_window_write(*id) => Ok(FlushId(*id)),
            _ => Err(self),
        }
    }

    /// True if this write's completion implies `earlier`'s, with the same ack (on the mpi
    /// conduit: window puts to one target, this one started later); a caller tracking many
    /// writes may then keep this handle alone. False whenever that is not known.
    #[inline]
    pub fn completes_after(&self, earlier: &WriteHandle) -> bool {
        match (&self.state, &earlier.state) {
            #[cfg(feature = "mpi")]
            (WriteState::Pending(world, later), WriteState::Pending(other, first)) => {
                std::rc::Rc::ptr_eq(world, other) && world.write_completes_after(*first, *later)
            }
            _ => false,
        }
    }

    /// Waits until the write completed, and returns its ack. It runs no AM handlers (on mpi
    /// it makes progress on the conduit's own messages only), so it may be used inside a
    /// handler.
    #[inline]
    pub fn wait(self, endpoint: &Endpoint) -> WriteAck {
        let _ = endpoint;
        match &self.state {
            WriteState::Done(ack) => *ack,
            #[cfg(feature = "mpi")]
            WriteState::Pending(world, id) => world.wait_ack(*id),
        }
    }
}

#[cfg(feature = "mpi")]
impl Drop for WriteHandle {
    /// Inline: every put drops its handle, and a completed one (smp, mapped memory) has
    /// nothing to do; a call per put here cost the smp put path of the mpi build.
    #[inline]
    fn drop(&mut self) {
        if let WriteState::Pending(world, id) = &self.state {
            // Taken by `wait`, or abandoned: a late ack for it is then ignored.
            world.forget_ack(*id);
        }
    }
}

/// Completion of a non-blocking atomic ([`Endpoint::atomic_nb`]); yields its result (the
/// word's previous value, and the target's EC/IWC if it wrote).
#[derive(Debug)]
#[must_use = "an atomic handle must be waited on or tested to learn the result"]
pub struct AtomicHandle {
    state: AtomicState,
}

#[derive(Debug)]
enum AtomicState {
    Done(AtomicResult),
    /// Waiting for the target's reply to operation `id` (mpi conduit).
    #[cfg(feature = "mpi")]
    Pending(std::rc::Rc<crate::conduit::mpi::MpiWorld>, u64),
}

impl AtomicHandle {
    #[inline]
    pub(crate) fn complete(result: AtomicResult) -> Self {
        AtomicHandle {
            state: AtomicState::Done(result),
        }
    }

    #[cfg(feature = "mpi")]
    pub(crate) fn pending(world: std::rc::Rc<crate::conduit::mpi::MpiWorld>, id: u64) -> Self {
        AtomicHandle {
            state: AtomicState::Pending(world, id),
        }
    }

    /// The result if the atomic completed when it was started (always on smp and on memory
    /// this process maps).
    #[inline]
    pub fn completed_at_once(&self) -> Option<AtomicResult> {
        match &self.state {
            AtomicState::Done(r) => Some(*r),
            #[cfg(feature = "mpi")]
            AtomicState::Pending(..) => None,
        }
    }

    /// The result if the reply has arrived, making no progress (poll many handles after one
    /// round of [`Endpoint::poll`]).
    pub fn arrived(&self) -> Option<AtomicResult> {
        match &self.state {
            AtomicState::Done(r) => Some(*r),
            #[cfg(feature = "mpi")]
            AtomicState::Pending(world, id) => world.peek_atomic(*id),
        }
    }

    /// Waits until the atomic completed, and returns its result. It runs no AM handlers (on
    /// mpi it makes progress on the conduit's own messages only).
    pub fn wait(self, endpoint: &Endpoint) -> AtomicResult {
        let _ = endpoint;
        match &self.state {
            AtomicState::Done(r) => *r,
            #[cfg(feature = "mpi")]
            AtomicState::Pending(world, id) => world.wait_atomic(*id),
        }
    }
}

#[cfg(feature = "mpi")]
impl Drop for AtomicHandle {
    fn drop(&mut self) {
        if let AtomicState::Pending(world, id) = &self.state {
            // Taken by `wait`, or abandoned: a late reply for it is then ignored.
            world.forget_ack(*id);
        }
    }
}

/// Completion of a non-blocking get into a buffer the handle owns
/// ([`Endpoint::get_nb_owned`]): nothing is borrowed, so it can outlive the call that
/// started it (a future's state), and dropping it early only discards the data.
#[derive(Debug)]
#[must_use = "a get handle must be waited on or polled to obtain the data"]
pub struct OwnedGetHandle {
    state: GetState,
}

#[derive(Debug)]
enum GetState {
    Done(Option<Vec<u8>>),
    /// Waiting for the reply to operation `id` (mpi conduit).
    #[cfg(feature = "mpi")]
    Pending(std::rc::Rc<crate::conduit::mpi::MpiWorld>, u64),
}

impl OwnedGetHandle {
    #[inline]
    pub(crate) fn complete(bytes: Vec<u8>) -> Self {
        OwnedGetHandle {
            state: GetState::Done(Some(bytes)),
        }
    }

    #[cfg(feature = "mpi")]
    pub(crate) fn pending(world: std::rc::Rc<crate::conduit::mpi::MpiWorld>, id: u64) -> Self {
        OwnedGetHandle {
            state: GetState::Pending(world, id),
        }
    }

    /// True if the data was read when the get was started (always on smp and from memory
    /// this process maps).
    #[inline]
    pub fn completed_at_once(&self) -> bool {
        match &self.state {
            GetState::Done(_) => true,
            #[cfg(feature = "mpi")]
            GetState::Pending(..) => false,
        }
    }

    /// Takes the data if it has arrived, making no progress; `None` before it arrived, and
    /// after it was taken once.
    pub fn take_arrived(&mut self) -> Option<Vec<u8>> {
        match &mut self.state {
            GetState::Done(bytes) => bytes.take(),
            #[cfg(feature = "mpi")]
            GetState::Pending(world, id) => {
                let bytes = world.take_got(*id)?;
                self.state = GetState::Done(None);
                Some(bytes)
            }
        }
    }

    /// Waits until the data arrived and returns it (empty if it was taken already). It runs
    /// no AM handlers (on mpi it makes progress on the conduit's own messages only).
    pub fn wait(mut self, endpoint: &Endpoint) -> Vec<u8> {
        let _ = endpoint;
        match &mut self.state {
            GetState::Done(bytes) => bytes.take().unwrap_or_default(),
            #[cfg(feature = "mpi")]
            GetState::Pending(world, id) => {
                let bytes = world.wait_got(*id);
                self.state = GetState::Done(None);
                bytes
            }
        }
    }
}

#[cfg(feature = "mpi")]
impl Drop for OwnedGetHandle {
    fn drop(&mut self) {
        if let GetState::Pending(world, id) = &self.state {
            // Abandoned: a late reply is then discarded.
            world.forget_ack(*id);
        }
    }
}

/// Completion of a non-blocking get; borrows the destination until it completes.
#[derive(Debug)]
#[must_use = "the destination holds the data only after the handle completes"]
pub struct GetHandle<'buf> {
    _dst: PhantomData<&'buf mut [u8]>,
}

impl GetHandle<'_> {
    pub(crate) fn complete() -> Self {
        GetHandle { _dst: PhantomData }
    }

    /// True if the data is in the destination.
    pub fn test(&self) -> bool {
        true
    }

    /// Waits (polling `endpoint`) until the data is in the destination.
    pub fn wait(self, endpoint: &Endpoint) {
        let _ = endpoint;
    }
}

/// Implicit-handle operations, completed together by [`AccessRegion::wait_all`] (or on drop).
///
/// Put sources are reusable as soon as `put` returns; get destinations stay borrowed by the
/// region until it completes, which is what makes the implicit form safe.
#[derive(Debug)]
pub struct AccessRegion<'ep, 'buf> {
    endpoint: &'ep Endpoint,
    issued: usize,
    /// Puts still waiting for their ack (never any on smp, so nothing is allocated there).
    pending: Vec<WriteHandle>,
    _dsts: PhantomData<&'buf mut [u8]>,
}

impl<'ep, 'buf> AccessRegion<'ep, 'buf> {
    pub(crate) fn new(endpoint: &'ep Endpoint) -> Self {
        AccessRegion {
            endpoint,
            issued: 0,
            pending: Vec::new(),
            _dsts: PhantomData,
        }
    }

    /// Starts a put of `src` to `rank` at `offset`.
    pub fn put(&mut self, rank: usize, offset: usize, src: &[u8]) -> Result<(), BridgeError> {
        let handle = self.endpoint.put_nb(rank, offset, src)?;
        if handle.test().is_none() {
            self.pending.push(handle);
        }
        self.issued += 1;
        Ok(())
    }

    /// Starts a get from `rank` at `offset` into `dst`.
    pub fn get(
        &mut self,
        rank: usize,
        offset: usize,
        dst: &'buf mut [u8],
    ) -> Result<(), BridgeError> {
        self.endpoint.get(rank, offset, dst)?;
        self.issued += 1;
        Ok(())
    }

    /// Number of operations started in this region.
    pub fn issued(&self) -> usize {
        self.issued
    }

    /// Waits for every operation of the region; returns how many there were.
    pub fn wait_all(mut self) -> usize {
        self.complete();
        self.issued
    }

    fn complete(&mut self) {
        for handle in self.pending.drain(..) {
            handle.wait(self.endpoint);
        }
    }
}

impl Drop for AccessRegion<'_, '_> {
    /// Completes the region, except during an unwind (another rank failed, or this one
    /// panicked): a wait there would unwind again and abort the process. Its puts' sources
    /// were free when `put` returned and its gets completed in `get`, so nothing is left that
    /// uses the caller's memory; the acks are forgotten with the handles.
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.pending.clear();
            return;
        }
        self.complete();
    }
}
