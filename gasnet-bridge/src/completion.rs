//! Completion handles of non-blocking operations, and the implicit-handle access region.
//!
//! On the smp conduit every operation is complete when its call returns, so handles are born
//! complete; the handle types are what a program writes against so that the same code waits
//! correctly on conduits where completion arrives later (the mpi conduit's puts to another
//! host complete when the target's acknowledgement comes back).

use std::marker::PhantomData;

use crate::atomic::AtomicResult;
use crate::counters::WriteAck;

#[cfg(feature = "mpi")]
use crate::conduit::mpi::Pending;

/// A write that a flush completes, reduced to its number ([`WriteHandle::into_flush_id`]): no
/// reference, nothing to drop, eight bytes. What a layer above keeps per put when it tracks
/// many (a future's state); [`Endpoint::flushed`](crate::Endpoint::flushed) tests it, [`Endpoint::complete_flush`](crate::Endpoint::complete_flush)
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
    Pending(Pending),
}

impl WriteHandle {
    #[inline]
    pub(crate) fn complete(ack: WriteAck) -> Self {
        WriteHandle {
            state: WriteState::Done(ack),
        }
    }

    #[cfg(feature = "mpi")]
    pub(crate) fn pending(p: Pending) -> Self {
        WriteHandle {
            state: WriteState::Pending(p),
        }
    }

    /// Whether the write completed when it was started (always on smp and into memory this
    /// process maps): then the handle holds its ack and no progress is needed.
    #[inline]
    pub fn completed_at_once(&self) -> Option<WriteAck> {
        match &self.state {
            WriteState::Done(ack) => Some(*ack),
            #[cfg(feature = "mpi")]
            WriteState::Pending(_) => None,
        }
    }

    /// The ack if it has arrived, making no progress (for a caller that polls many handles
    /// after one round of progress, [`Endpoint::poll`](crate::Endpoint::poll)).
    pub fn arrived(&self) -> Option<WriteAck> {
        match &self.state {
            WriteState::Done(ack) => Some(*ack),
            #[cfg(feature = "mpi")]
            WriteState::Pending(p) => p.peek_ack(),
        }
    }

    /// The ack if the write has completed at the target, without waiting (on mpi this makes
    /// one round of progress on the conduit's own messages first).
    pub fn test(&self) -> Option<WriteAck> {
        match &self.state {
            WriteState::Done(ack) => Some(*ack),
            #[cfg(feature = "mpi")]
            WriteState::Pending(p) => p.test_ack(),
        }
    }

    /// The write's number if a flush of the one-sided path completes it, with no message
    /// (the mpi conduit's window puts; [`Endpoint::flush_rma`](crate::Endpoint::flush_rma)), else the handle back.
    #[inline]
    pub fn into_flush_id(self) -> Result<FlushId, WriteHandle> {
        match &self.state {
            #[cfg(feature = "mpi")]
            WriteState::Pending(p) if p.is_window_write() => Ok(FlushId(p.id())),
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
            (WriteState::Pending(later), WriteState::Pending(first)) => {
                later.completes_after(first)
            }
            _ => false,
        }
    }

    /// The result once complete (the waits of `completion_wait.rs`).
    pub(crate) fn wait_done(self) -> WriteAck {
        match &self.state {
            WriteState::Done(ack) => *ack,
            #[cfg(feature = "mpi")]
            WriteState::Pending(p) => p.wait_ack(),
        }
    }
}

/// Completion of a non-blocking atomic ([`Endpoint::atomic_nb`](crate::Endpoint::atomic_nb)); yields its result (the
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
    Pending(Pending),
}

impl AtomicHandle {
    #[inline]
    pub(crate) fn complete(result: AtomicResult) -> Self {
        AtomicHandle {
            state: AtomicState::Done(result),
        }
    }

    #[cfg(feature = "mpi")]
    pub(crate) fn pending(p: Pending) -> Self {
        AtomicHandle {
            state: AtomicState::Pending(p),
        }
    }

    /// The result if the atomic completed when it was started (always on smp and on memory
    /// this process maps).
    #[inline]
    pub fn completed_at_once(&self) -> Option<AtomicResult> {
        match &self.state {
            AtomicState::Done(r) => Some(*r),
            #[cfg(feature = "mpi")]
            AtomicState::Pending(_) => None,
        }
    }

    /// The result if the reply has arrived, making no progress (poll many handles after one
    /// round of [`Endpoint::poll`](crate::Endpoint::poll)).
    pub fn arrived(&self) -> Option<AtomicResult> {
        match &self.state {
            AtomicState::Done(r) => Some(*r),
            #[cfg(feature = "mpi")]
            AtomicState::Pending(p) => p.peek_atomic(),
        }
    }

    /// The result once complete (the waits of `completion_wait.rs`).
    pub(crate) fn wait_done(self) -> AtomicResult {
        match &self.state {
            AtomicState::Done(r) => *r,
            #[cfg(feature = "mpi")]
            AtomicState::Pending(p) => p.wait_atomic(),
        }
    }
}

/// Completion of a non-blocking get into a buffer the handle owns
/// ([`Endpoint::get_nb_owned`](crate::Endpoint::get_nb_owned)): nothing is borrowed, so it can outlive the call that
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
    Pending(Pending),
}

impl OwnedGetHandle {
    #[inline]
    pub(crate) fn complete(bytes: Vec<u8>) -> Self {
        OwnedGetHandle {
            state: GetState::Done(Some(bytes)),
        }
    }

    #[cfg(feature = "mpi")]
    pub(crate) fn pending(p: Pending) -> Self {
        OwnedGetHandle {
            state: GetState::Pending(p),
        }
    }

    /// True if the data was read when the get was started (always on smp and from memory
    /// this process maps).
    #[inline]
    pub fn completed_at_once(&self) -> bool {
        match &self.state {
            GetState::Done(_) => true,
            #[cfg(feature = "mpi")]
            GetState::Pending(_) => false,
        }
    }

    /// Takes the data if it has arrived, making no progress; `None` before it arrived, and
    /// after it was taken once.
    pub fn take_arrived(&mut self) -> Option<Vec<u8>> {
        match &mut self.state {
            GetState::Done(bytes) => bytes.take(),
            #[cfg(feature = "mpi")]
            GetState::Pending(p) => {
                let bytes = p.take_got()?;
                self.state = GetState::Done(None);
                Some(bytes)
            }
        }
    }

    /// The result once complete (the waits of `completion_wait.rs`).
    pub(crate) fn wait_done(mut self) -> Vec<u8> {
        match &mut self.state {
            GetState::Done(bytes) => bytes.take().unwrap_or_default(),
            #[cfg(feature = "mpi")]
            GetState::Pending(p) => {
                let bytes = p.wait_got();
                self.state = GetState::Done(None);
                bytes
            }
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
}
