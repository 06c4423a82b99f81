//! Waiting on completion handles, and the implicit-handle access region: the calls that take
//! the rank's endpoint. The handles themselves (`completion.rs`) sit below the conduit's driver,
//! which makes them; these calls sit above the endpoint they name.

use std::marker::PhantomData;

use crate::atomic::AtomicResult;
use crate::completion::{AtomicHandle, GetHandle, OwnedGetHandle, WriteHandle};
use crate::counters::WriteAck;
use crate::endpoint::Endpoint;
use crate::error::BridgeError;

impl WriteHandle {
    /// Waits until the write completed, and returns its ack. It runs no AM handlers (on mpi
    /// it makes progress on the conduit's own messages only), so it may be used inside a
    /// handler.
    #[inline]
    pub fn wait(self, endpoint: &Endpoint) -> WriteAck {
        let _ = endpoint;
        self.wait_done()
    }
}

impl AtomicHandle {
    /// Waits until the atomic completed, and returns its result. It runs no AM handlers (on
    /// mpi it makes progress on the conduit's own messages only).
    pub fn wait(self, endpoint: &Endpoint) -> AtomicResult {
        let _ = endpoint;
        self.wait_done()
    }
}

impl OwnedGetHandle {
    /// Waits until the data arrived and returns it (empty if it was taken already). It runs
    /// no AM handlers (on mpi it makes progress on the conduit's own messages only).
    pub fn wait(self, endpoint: &Endpoint) -> Vec<u8> {
        let _ = endpoint;
        self.wait_done()
    }
}

impl GetHandle<'_> {
    /// Waits (polling `endpoint`) until the data is in the destination.
    pub fn wait(self, endpoint: &Endpoint) {
        let _ = endpoint;
    }
}

impl Endpoint {
    /// Opens a region of implicit-handle puts and gets, completed by one `wait_all`.
    pub fn access_region<'buf>(&self) -> AccessRegion<'_, 'buf> {
        AccessRegion::new(self)
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
            handle.wait_done();
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
