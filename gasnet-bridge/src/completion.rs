//! Completion handles of non-blocking operations, and the implicit-handle access region.
//!
//! On the smp conduit every operation is complete when its call returns, so handles are born
//! complete; the handle types are what a program writes against so that the same code waits
//! correctly on conduits where completion arrives later.

use std::marker::PhantomData;

use crate::counters::WriteAck;
use crate::endpoint::Endpoint;
use crate::error::BridgeError;

/// Completion of a non-blocking write (put or long AM); yields the target's EC/IWC.
#[derive(Debug)]
#[must_use = "a write handle must be waited on or tested to learn its completion"]
pub struct WriteHandle {
    ack: WriteAck,
}

impl WriteHandle {
    pub(crate) fn complete(ack: WriteAck) -> Self {
        WriteHandle { ack }
    }

    /// The ack if the write has completed at the target, without waiting.
    pub fn test(&self) -> Option<WriteAck> {
        Some(self.ack)
    }

    /// Waits (polling `endpoint`) until the write completed, and returns its ack.
    pub fn wait(self, endpoint: &Endpoint) -> WriteAck {
        let _ = endpoint;
        self.ack
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
    _dsts: PhantomData<&'buf mut [u8]>,
}

impl<'ep, 'buf> AccessRegion<'ep, 'buf> {
    pub(crate) fn new(endpoint: &'ep Endpoint) -> Self {
        AccessRegion {
            endpoint,
            issued: 0,
            _dsts: PhantomData,
        }
    }

    /// Starts a put of `src` to `rank` at `offset`.
    pub fn put(&mut self, rank: usize, offset: usize, src: &[u8]) -> Result<(), BridgeError> {
        self.endpoint.put(rank, offset, src)?;
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
    pub fn wait_all(self) -> usize {
        self.issued
    }
}
