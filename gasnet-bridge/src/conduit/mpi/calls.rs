//! Small wrappers over raw MPI calls used everywhere in the conduit: predefined handles,
//! lengths as MPI counts, request tests, and what to do with an error inside progress.

use std::ffi::{CStr, c_char, c_int};

use ::mpi::ffi;

use crate::error::BridgeError;

/// Turns an MPI return code into a result, with MPI's own text for the error. The success
/// test is inlined into every MPI call site of the polling loop; the error text is not.
#[inline]
pub(super) fn check(rc: c_int, what: &str) -> Result<(), BridgeError> {
    if rc == ffi::MPI_SUCCESS as c_int {
        return Ok(());
    }
    error_text(rc, what)
}

#[cold]
#[inline(never)]
fn error_text(rc: c_int, what: &str) -> Result<(), BridgeError> {
    #[cfg(feature = "ulfm")]
    super::ulfm::mpix::note(rc);
    let mut buf = [0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters plus a terminator. Its own
    // return code is not checked: on failure the buffer stays empty and the code is printed.
    let _ = unsafe { ffi::MPI_Error_string(rc, buf.as_mut_ptr(), &mut len) };
    let text = CStr::from_bytes_until_nul(bytemuck_bytes(&buf))
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    Err(BridgeError::Conduit(format!(
        "{what}: {text} (MPI error {rc})"
    )))
}

/// Panics with the conduit error: used inside progress, where no caller can act on it; the
/// rank then fails and the others are told. With ULFM, an error saying a peer died unwinds as
/// a peer's failure instead, which the recovery answers.
pub(super) fn must<T>(r: Result<T, BridgeError>) -> T {
    r.unwrap_or_else(|e| {
        #[cfg(feature = "ulfm")]
        if super::ulfm::mpix::failure_seen() {
            std::panic::resume_unwind(Box::new(crate::failure::PeerFailure));
        }
        panic!("{e}")
    })
}

/// `r`, except that with ULFM an MPI error (`BridgeError::Conduit`) while a peer is known dead
/// or the communicator was revoked unwinds the rank as a peer's failure, which the recovery
/// answers, instead of reaching the program; the caller's own mistakes (a range, a handler)
/// still reach it. Only where the failed call on `comm` left nothing that MPI may still read
/// or write.
#[inline]
pub(super) fn or_peer_lost<T>(
    comm: ffi::MPI_Comm,
    r: Result<T, BridgeError>,
) -> Result<T, BridgeError> {
    #[cfg(not(feature = "ulfm"))]
    let _ = comm;
    #[cfg(feature = "ulfm")]
    if let Err(BridgeError::Conduit(_)) = r {
        peer_lost_or_not(comm);
    }
    r
}

/// After an MPI error on `comm`: unwinds as a peer's failure if a peer died or `comm` was
/// revoked, else returns (the error is this process's own, and reaches the caller).
#[cfg(feature = "ulfm")]
#[cold]
#[inline(never)]
fn peer_lost_or_not(comm: ffi::MPI_Comm) {
    if super::ulfm::mpix::failure_seen() || super::ulfm::mpix::comm_has_failure(comm) {
        std::panic::resume_unwind(Box::new(crate::failure::PeerFailure));
    }
}

/// Gathers one short text from every process of `comm` (collective), in rank order: each is
/// sent as a record of `width` bytes, NUL-padded (a longer text is cut at `width - 1` bytes).
pub(super) fn allgather_text(
    comm: ffi::MPI_Comm,
    processes: usize,
    mine: &str,
    width: usize,
    what: &str,
) -> Result<Vec<String>, BridgeError> {
    let mut record = vec![0u8; width];
    let n = mine.len().min(width - 1);
    record[..n].copy_from_slice(&mine.as_bytes()[..n]);
    let mut all = vec![0u8; width * processes];
    let count = mpi_len(width)?;
    // SAFETY: `record` holds `width` bytes and `all` `width` per process of `comm`; both live
    // across this blocking call.
    let rc = unsafe {
        ffi::MPI_Allgather(
            record.as_ptr().cast(),
            count,
            uint8(),
            all.as_mut_ptr().cast(),
            count,
            uint8(),
            comm,
        )
    };
    check(rc, what)?;
    Ok(all
        .chunks(width)
        .map(|c| {
            let end = c.iter().position(|&b| b == 0).unwrap_or(width);
            String::from_utf8_lossy(&c[..end]).into_owned()
        })
        .collect())
}

pub(super) fn uint8() -> ffi::MPI_Datatype {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    unsafe { ffi::RSMPI_UINT8_T }
}

pub(super) fn null_request() -> ffi::MPI_Request {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// `len` as an MPI count. Inlined, its error out of line: every put pays the test, and a
/// call per put would be a large share of a window put flood's cycles.
#[inline]
pub(super) fn mpi_len(len: usize) -> Result<c_int, BridgeError> {
    match c_int::try_from(len) {
        Ok(count) => Ok(count),
        Err(_) => Err(too_long(len)),
    }
}

#[cold]
#[inline(never)]
fn too_long(len: usize) -> BridgeError {
    BridgeError::Conduit(format!(
        "a transfer of {len} bytes exceeds what one MPI message carries (2 GiB); split it"
    ))
}

/// Tests `req`; true once complete (then MPI has set it to `MPI_REQUEST_NULL`).
#[inline]
pub(super) fn test(req: &mut ffi::MPI_Request, what: &str) -> Result<bool, BridgeError> {
    let mut flag: c_int = 0;
    // SAFETY: `req` is a request handle this module started (or already null, which MPI_Test
    // reports as complete); STATUS_IGNORE is allowed.
    let rc = unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
    check(rc, what)?;
    Ok(flag != 0)
}

/// The bytes of a C character buffer (MPI's names and error strings).
pub(super) fn bytemuck_bytes(chars: &[c_char]) -> &[u8] {
    // SAFETY: c_char and u8 have the same size and alignment; any bit pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(chars.as_ptr().cast(), chars.len()) }
}
