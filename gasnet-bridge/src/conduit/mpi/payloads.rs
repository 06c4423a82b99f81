//! Payloads that follow their header as a second message on `TAG_PAYLOAD`, still arriving,
//! each with what to do once it has.

use std::ffi::c_int;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::calls::{check, mpi_len, must, null_request, test, uint8};
use super::wire::TAG_PAYLOAD;

/// A payload still arriving, and what to do when it has.
pub(super) enum Inflight {
    /// A put's bytes into this segment: count (unless `counted` is false), then ack `id` to
    /// `origin`.
    Put {
        req: ffi::MPI_Request,
        origin: usize,
        id: u64,
        counted: bool,
    },
    /// A long AM's bytes into this segment: count, ack, then its handler may run.
    Long {
        req: ffi::MPI_Request,
        origin: usize,
        id: u64,
        key: u64,
    },
    /// The piece list (and, for a put, the packed bytes) of a vector put or get from
    /// `origin` into `buf`: then scatter, count and ack `id`, or gather and send the data.
    Vector {
        req: ffi::MPI_Request,
        buf: Vec<u8>,
        origin: usize,
        id: u64,
        pieces: usize,
        groups: usize,
        put: bool,
    },
    /// The data of this rank's non-blocking get `id`, arriving into `buf`.
    GetReply {
        req: ffi::MPI_Request,
        buf: Vec<u8>,
        id: u64,
    },
    /// A medium AM's bytes into `buf`.
    Medium {
        req: ffi::MPI_Request,
        buf: Vec<u8>,
        key: u64,
    },
}

impl Inflight {
    fn req(&mut self) -> &mut ffi::MPI_Request {
        match self {
            Inflight::Put { req, .. }
            | Inflight::Long { req, .. }
            | Inflight::Vector { req, .. }
            | Inflight::GetReply { req, .. }
            | Inflight::Medium { req, .. } => req,
        }
    }
}

/// The payloads still arriving.
pub(super) struct Payloads {
    list: Vec<Inflight>,
}

impl Payloads {
    /// None arriving.
    pub(super) fn new() -> Payloads {
        Payloads { list: Vec::new() }
    }

    /// Whether no payload is arriving.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Remembers a payload whose receive was posted.
    pub(super) fn push(&mut self, payload: Inflight) {
        self.list.push(payload);
    }

    /// Posts a receive of `len` payload bytes from `source` into `dst` on `comm`.
    pub(super) fn post(
        comm: ffi::MPI_Comm,
        dst: *mut u8,
        len: usize,
        source: usize,
    ) -> Result<ffi::MPI_Request, BridgeError> {
        let mut req = null_request();
        // SAFETY: callers pass either a checked range of this rank's segment (valid until
        // teardown, which waits for every payload) or a Vec's buffer that is moved, not
        // reallocated, into this list alongside the request.
        let rc = unsafe {
            ffi::MPI_Irecv(
                dst.cast(),
                mpi_len(len)?,
                uint8(),
                source as c_int,
                TAG_PAYLOAD,
                comm,
                &mut req,
            )
        };
        check(rc, "MPI_Irecv(payload)")?;
        Ok(req)
    }

    /// Tests the payloads from position `*at` on and takes out the first that has arrived,
    /// leaving `*at` where the next call goes on; `None` once every one was tested.
    #[inline]
    pub(super) fn next_arrived(&mut self, at: &mut usize) -> Option<Inflight> {
        while *at < self.list.len() {
            match test(self.list[*at].req(), "MPI_Test(payload)") {
                Ok(false) => *at += 1,
                // Inside progress no caller can act on it: the rank fails, or with ULFM
                // unwinds as a peer's failure when the communicator was revoked.
                Err(e) => must::<()>(Err(e)),
                Ok(true) => return Some(self.list.swap_remove(*at)),
            }
        }
        None
    }
}
