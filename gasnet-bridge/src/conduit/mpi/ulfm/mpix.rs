//! The few ULFM calls of Open MPI 5's `mpi-ext.h` the recovery needs, which rsmpi does not bind.
//!
//! Declared by hand from `mpiext_ftmpi_c.h`; the error classes are not written down here but
//! taken from the `mpi.h` rsmpi's build read (`MPIX_ERR_*` are `#define`d as the `MPI_ERR_*`
//! of the same name there), so a build against an MPI without them does not compile. The test
//! `ulfm_headers` checks both against the headers of the MPI this crate was built with.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use ::mpi::ffi;

/// `MPIX_ERR_PROC_FAILED`: an operation could not complete because a process it involves died.
pub(crate) const ERR_PROC_FAILED: c_int = ffi::MPI_ERR_PROC_FAILED as c_int;
/// `MPIX_ERR_PROC_FAILED_PENDING`: a receive from any source waits while some possible sender
/// is dead (the request stays valid).
pub(crate) const ERR_PROC_FAILED_PENDING: c_int = ffi::MPI_ERR_PROC_FAILED_PENDING as c_int;
/// `MPIX_ERR_REVOKED`: the communicator was revoked by some process; only shrink and agree work
/// on it any more.
pub(crate) const ERR_REVOKED: c_int = ffi::MPI_ERR_REVOKED as c_int;

// SAFETY (of the declarations): these are the prototypes of mpiext_ftmpi_c.h in Open MPI 5.0,
// with `MPI_Comm` and `MPI_Group` the handle types of the same library's mpi.h
// (which rsmpi's bindgen read), and `int` as `c_int`. The `ulfm_headers` test compares this
// text's signatures with the installed header's.
unsafe extern "C" {
    /// Marks `comm` revoked at every member: their pending and future operations on it (but
    /// shrink and agree) complete with `MPIX_ERR_REVOKED`.
    pub(crate) fn MPIX_Comm_revoke(comm: ffi::MPI_Comm) -> c_int;
    /// Collective over the live members of `comm`: a new communicator of exactly those, the
    /// same group at every member (the set of the dead is agreed by it).
    pub(crate) fn MPIX_Comm_shrink(comm: ffi::MPI_Comm, newcomm: *mut ffi::MPI_Comm) -> c_int;
    /// Fault-tolerant agreement: `*flag` becomes the bitwise AND of every live member's flag.
    pub(crate) fn MPIX_Comm_agree(comm: ffi::MPI_Comm, flag: *mut c_int) -> c_int;
    /// Whether `comm` was revoked (`*flag` nonzero).
    pub(crate) fn MPIX_Comm_is_revoked(comm: ffi::MPI_Comm, flag: *mut c_int) -> c_int;
    /// The group of the members of `comm` this process knows to have failed.
    pub(crate) fn MPIX_Comm_get_failed(
        comm: ffi::MPI_Comm,
        failedgroup: *mut ffi::MPI_Group,
    ) -> c_int;
}

/// Whether `comm` was revoked or this process knows a member of it died: after an error of a
/// call on `comm`, whose class alone may not say so (a failed non-blocking collective's
/// schedule reports `MPI_ERR_OTHER`), this tells a peer's loss from a fault of this process.
/// Notes it for [`failure_seen`].
pub(crate) fn comm_has_failure(comm: ffi::MPI_Comm) -> bool {
    let mut revoked: c_int = 0;
    // SAFETY: `comm` is a valid communicator of this process; one int written.
    let rc = unsafe { MPIX_Comm_is_revoked(comm, &mut revoked) };
    let mut failed = rc == ffi::MPI_SUCCESS as c_int && revoked != 0;
    if !failed {
        // SAFETY: reading a link-time constant of rsmpi's C shim.
        let mut group = unsafe { ffi::RSMPI_GROUP_NULL };
        // SAFETY: as above; `group` is written with a new group, freed below.
        if unsafe { MPIX_Comm_get_failed(comm, &mut group) } == ffi::MPI_SUCCESS as c_int {
            let mut size: c_int = 0;
            // SAFETY: `group` was just made; one int written, then the group freed once.
            unsafe {
                ffi::MPI_Group_size(group, &mut size);
                ffi::MPI_Group_free(&mut group);
            }
            failed = size > 0;
        }
    }
    if failed {
        FAILURE_SEEN.store(true, Ordering::Release);
    }
    failed
}

/// The MPI error class of return code `rc`.
pub(crate) fn error_class(rc: c_int) -> c_int {
    let mut class: c_int = rc;
    // SAFETY: MPI_Error_class reads a code and writes one int; on failure `class` keeps `rc`.
    unsafe { ffi::MPI_Error_class(rc, &mut class) };
    class
}

/// Set once an MPI call of this process reported a dead process or a revoked communicator.
static FAILURE_SEEN: AtomicBool = AtomicBool::new(false);

/// Notes the error `rc` of a conduit call: a process failure makes [`failure_seen`] true.
pub(crate) fn note(rc: c_int) {
    if is_process_failure(rc) {
        FAILURE_SEEN.store(true, Ordering::Release);
    }
}

/// Forgets the failures seen so far, once a rebuilt job replaced the one they happened in: an
/// error of the new job is a peer's loss only if it says so itself.
pub(crate) fn forget_failure() {
    FAILURE_SEEN.store(false, Ordering::Release);
}

/// Whether an MPI call of this process reported a dead process or a revoked communicator: the
/// error that unwound the rank is then a peer's loss, not a fault of this rank.
pub(crate) fn failure_seen() -> bool {
    FAILURE_SEEN.load(Ordering::Acquire)
}

/// Whether `rc` says a process of the communicator died or the communicator was revoked: the
/// errors a recovery answers, where any other error is a fault of this process.
pub(crate) fn is_process_failure(rc: c_int) -> bool {
    matches!(
        error_class(rc),
        ERR_PROC_FAILED | ERR_PROC_FAILED_PENDING | ERR_REVOKED
    )
}

#[cfg(test)]
mod ulfm_headers {
    use super::*;
    use std::path::PathBuf;

    /// The include directories of the MPI on PATH (`mpicc --showme:incdirs`, Open MPI's), the
    /// one `.ci/ulfm-env` puts first and rsmpi's build script asked.
    fn include_dirs() -> Vec<PathBuf> {
        let out = std::process::Command::new("mpicc")
            .arg("--showme:incdirs")
            .output()
            .expect("mpicc runs (source .ci/ulfm-env first)");
        assert!(out.status.success(), "mpicc --showme:incdirs failed");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(PathBuf::from)
            .collect()
    }

    fn header(name: &str) -> String {
        let dirs = include_dirs();
        dirs.iter()
            .find_map(|d| std::fs::read_to_string(d.join(name)).ok())
            .unwrap_or_else(|| panic!("{name} not under {dirs:?}: not an Open MPI with ULFM"))
    }

    /// The value of `#define name value` in `text`.
    fn define<'a>(text: &'a str, name: &str) -> Option<&'a str> {
        text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("#define") && w.next() == Some(name))
                .then(|| w.next())
                .flatten()
        })
    }

    #[test]
    fn error_classes_are_the_headers() {
        let ext = header("openmpi/mpiext/mpiext_ftmpi_c.h");
        let mpi_h = header("mpi.h");
        for (mpix, ours) in [
            ("MPIX_ERR_PROC_FAILED", ERR_PROC_FAILED),
            ("MPIX_ERR_PROC_FAILED_PENDING", ERR_PROC_FAILED_PENDING),
            ("MPIX_ERR_REVOKED", ERR_REVOKED),
        ] {
            let alias = define(&ext, mpix).unwrap_or_else(|| panic!("{mpix} not defined"));
            let value: c_int = define(&mpi_h, alias)
                .unwrap_or_else(|| panic!("{alias} not in mpi.h"))
                .parse()
                .unwrap_or_else(|e| panic!("{alias}: {e}"));
            assert_eq!(value, ours, "{mpix} = {alias} = {value}");
        }
    }

    #[test]
    fn declarations_match_the_prototypes() {
        let ext = header("openmpi/mpiext/mpiext_ftmpi_c.h");
        let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let ext = squeeze(&ext);
        for proto in [
            "int MPIX_Comm_revoke(MPI_Comm comm);",
            "int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);",
            "int MPIX_Comm_agree(MPI_Comm comm, int *flag);",
            "int MPIX_Comm_is_revoked(MPI_Comm comm, int *flag);",
            "int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgroup);",
        ] {
            assert!(
                ext.contains(&format!("OMPI_DECLSPEC {proto}")),
                "{proto} not declared so in mpiext_ftmpi_c.h"
            );
        }
    }

    #[test]
    fn the_library_loaded_is_open_mpi_5() {
        let mut buf = vec![0 as std::ffi::c_char; ffi::MPI_MAX_LIBRARY_VERSION_STRING as usize + 1];
        let mut len: c_int = 0;
        // SAFETY: the buffer holds MPI_MAX_LIBRARY_VERSION_STRING characters and a terminator;
        // the call may be made before MPI_Init.
        unsafe { ffi::MPI_Get_library_version(buf.as_mut_ptr(), &mut len) };
        let text: String = buf[..len as usize]
            .iter()
            .map(|&c| c as u8 as char)
            .collect();
        // LD_LIBRARY_PATH decides which libmpi.so.40 the loader takes: Debian's is 4.1.
        assert!(
            text.contains("Open MPI v5"),
            "loaded {text:?}: put the ULFM MPI's lib first (. .ci/ulfm-env)"
        );
    }
}
