//! The memory a process shares with the other processes of its host: one anonymous memory
//! file (`memfd`) per process, which the others map through `/proc/PID/fd/FD`.
//!
//! Why not `MPI_Win_allocate_shared`: a process that joins after a loss (a spare taking a dead
//! rank's place) cannot map a window allocated before it existed; a window it can map is a new
//! one for the whole host, zeroed, with every survivor's segment copied in. A memory file can
//! be mapped by any process of the same user at any time, and the kernel gives it zeroed: the
//! survivors keep their memory where it is and only map the replacement's.
//!
//! Each piece ends with a page holding a token (the owner's job rank and a random number sent
//! with its identity), which a process mapping it checks: a `/proc` path of another pid
//! namespace, or of a process that reused the pid, maps other memory and is refused.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::calls::check;
use super::calls::uint8;

/// The page size the pieces are laid out on.
pub(super) const PAGE: usize = 4096;

/// What a process tells its host about its piece: enough to map it and check the mapping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub(super) struct PieceId {
    pid: u64,
    fd: u64,
    len: u64,
    rings: u64,
    token: [u64; 2],
}

impl PieceId {
    /// The rings of the piece's inbox (`inbox.rs`; 0: none).
    pub(super) fn rings(&self) -> usize {
        self.rings as usize
    }
}

/// A piece of host memory mapped into this process: its own, or another process's.
#[derive(Debug)]
pub(super) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// The first byte of the piece (page-aligned).
    pub(super) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Unmaps the piece.
    ///
    /// # Safety
    /// No access to the piece through this mapping happens after the call, and no `Segment`,
    /// counters view or ring over it is used again.
    pub(super) unsafe fn unmap(self) {
        // SAFETY: `base..base + len` is a mapping made by `mmap` in this module; the caller
        // guarantees nothing uses it any more. A failure leaves it mapped, which is harmless.
        let _ = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// This process's own piece: the file, kept open for the job's life so that a process joining
/// later can open it.
#[derive(Debug)]
pub(super) struct OwnPiece {
    /// Never read: open, it keeps the piece mappable through `/proc`.
    _file: OwnedFd,
    id: PieceId,
}

impl OwnPiece {
    /// A new zeroed piece of `len` bytes (a multiple of [`PAGE`], at least two pages) for job
    /// rank `rank`, its inbox of `rings` rings, mapped here.
    pub(super) fn create(
        rank: usize,
        len: usize,
        rings: usize,
    ) -> Result<(OwnPiece, Mapping), BridgeError> {
        debug_assert!(len.is_multiple_of(PAGE) && len >= 2 * PAGE);
        let error = |what: &str| {
            BridgeError::Conduit(format!(
                "{what} for the host's shared memory ({len} bytes): {}",
                std::io::Error::last_os_error()
            ))
        };
        // SAFETY: the name is a nul-terminated literal; the flags are valid.
        let fd = unsafe { libc::memfd_create(c"pgas-segment".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(error("memfd_create"));
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by nothing else.
        let file = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: `file` is a valid memory file; extending it gives zeroed bytes.
        if unsafe { libc::ftruncate(file.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(error("ftruncate"));
        }
        let mapping = map(&file, len).map_err(|()| error("mmap"))?;
        let id = PieceId {
            pid: u64::from(std::process::id()),
            fd: file.as_raw_fd() as u64,
            len: len as u64,
            rings: rings as u64,
            token: [rank as u64, token()],
        };
        // SAFETY: the token's bytes are the last page's first ones, inside the mapping just
        // made, which nobody else maps yet.
        unsafe { crate::shared_copy::store(token_at(&mapping).cast(), id.token) };
        Ok((OwnPiece { _file: file, id }, mapping))
    }

    /// What the host is told about this piece.
    pub(super) fn id(&self) -> PieceId {
        self.id
    }
}

/// The identities of the pieces of the `size` processes of `node_comm` (collective), `mine`
/// offered.
pub(super) fn exchange(
    node_comm: ffi::MPI_Comm,
    size: usize,
    mine: PieceId,
) -> Result<Vec<PieceId>, BridgeError> {
    let mut all = vec![PieceId::default(); size];
    let bytes = std::mem::size_of::<PieceId>() as i32;
    // SAFETY: one `PieceId` (plain u64s) sent and one per process of `node_comm` received;
    // both buffers live across this blocking call.
    check(
        unsafe {
            ffi::MPI_Allgather(
                (&raw const mine).cast(),
                bytes,
                uint8(),
                all.as_mut_ptr().cast(),
                bytes,
                uint8(),
                node_comm,
            )
        },
        "MPI_Allgather(host memory)",
    )?;
    Ok(all)
}

/// Maps the piece `id` of another process of this host, after checking it is that process's
/// piece for job rank `rank`.
pub(super) fn map_peer(id: PieceId, rank: usize) -> Result<Mapping, BridgeError> {
    let path = format!("/proc/{}/fd/{}", id.pid, id.fd);
    let refused = |why: String| {
        BridgeError::Conduit(format!(
            "cannot map rank {rank}'s shared memory ({path}): {why}; run with \
             PGAS_MPI_PSHM=0 to reach the ranks of a host through MPI instead"
        ))
    };
    let c_path = std::ffi::CString::new(path.clone()).expect("no nul in a /proc path");
    // SAFETY: `c_path` is nul-terminated and lives across the call.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(refused(std::io::Error::last_os_error().to_string()));
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = id.len as usize;
    // SAFETY: `stat` is plain data written by the call.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `file` is open; `stat` lives across the call.
    if unsafe { libc::fstat(file.as_raw_fd(), &mut stat) } != 0 || (stat.st_size as usize) < len {
        return Err(refused(format!("not a piece of {len} bytes")));
    }
    if len < 2 * PAGE || !len.is_multiple_of(PAGE) {
        return Err(refused(format!(
            "a piece of {len} bytes is not whole pages"
        )));
    }
    let mapping =
        map(&file, len).map_err(|()| refused(std::io::Error::last_os_error().to_string()))?;
    // SAFETY: the token lies in the mapping's last page; the owner wrote it before offering
    // the identity, and the exchange that carried the identity orders the two.
    let token: [u64; 2] = unsafe { crate::shared_copy::load(token_at(&mapping).cast()) };
    if token != id.token {
        // SAFETY: the mapping was made just above and nothing else refers to it.
        unsafe { mapping.unmap() };
        let why = "the memory found there is not that rank's (another pid namespace, or a \
                   reused pid)";
        return Err(refused(why.into()));
    }
    Ok(mapping)
}

/// Maps `len` bytes of `file`, shared.
fn map(file: &OwnedFd, len: usize) -> Result<Mapping, ()> {
    // SAFETY: a new shared mapping of an open file; the kernel chooses the address.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(());
    }
    let base = NonNull::new(base.cast::<u8>()).ok_or(())?;
    Ok(Mapping { base, len })
}

/// Where a piece's token is: the first bytes of its last page, which no layout uses.
fn token_at(m: &Mapping) -> *mut c_void {
    m.base().wrapping_add(m.len - PAGE).cast()
}

/// A number unlikely to repeat: from the kernel's random source, else the clock.
fn token() -> u64 {
    let mut t = 0u64;
    // SAFETY: writes at most 8 bytes into `t`.
    let got = unsafe { libc::getrandom((&raw mut t).cast(), 8, 0) };
    if got == 8 {
        return t;
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_nanos() as u64) ^ u64::from(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEN: usize = 4 * PAGE;

    #[test]
    fn a_piece_starts_zeroed_and_another_mapping_sees_its_bytes() {
        let (own, mine) = OwnPiece::create(5, LEN, 1).expect("a piece");
        let mut bytes = vec![1u8; 3 * PAGE];
        // SAFETY: the first three pages are inside the fresh mapping, used by nothing else.
        unsafe { crate::shared_copy::copy_out(mine.base(), &mut bytes) };
        assert!(
            bytes.iter().all(|&b| b == 0),
            "the kernel zeroes a new memory file"
        );
        let other = map_peer(own.id(), 5).expect("the own piece maps through /proc");
        assert_ne!(other.base(), mine.base(), "a second mapping");
        // SAFETY: byte 100 is inside both mappings of the same piece.
        unsafe { crate::shared_copy::store(mine.base().wrapping_add(100), 42u8) };
        // SAFETY: as above.
        let seen: u8 = unsafe { crate::shared_copy::load(other.base().wrapping_add(100)) };
        assert_eq!(seen, 42);
        assert_eq!(own.id().rings(), 1);
        // SAFETY: neither mapping is used again.
        unsafe {
            other.unmap();
            mine.unmap();
        }
    }

    #[test]
    fn a_piece_whose_token_differs_is_refused() {
        let (own, mine) = OwnPiece::create(2, LEN, 0).expect("a piece");
        let mut id = own.id();
        id.token[1] ^= 1;
        let e = map_peer(id, 2).expect_err("another token").to_string();
        assert!(e.contains("not that rank's"), "{e}");
        assert!(e.contains("PGAS_MPI_PSHM=0"), "{e}");
        // SAFETY: not used again.
        unsafe { mine.unmap() };
    }

    #[test]
    fn a_name_that_is_no_piece_is_refused_with_what_to_do() {
        let (own, mine) = OwnPiece::create(0, LEN, 0).expect("a piece");
        let mut id = own.id();
        id.fd = 1 << 30;
        let e = map_peer(id, 7).expect_err("no such descriptor").to_string();
        assert!(e.contains("rank 7") && e.contains("PGAS_MPI_PSHM=0"), "{e}");
        let mut id = own.id();
        id.len = (LEN * 2) as u64;
        let e = map_peer(id, 0)
            .expect_err("longer than the file")
            .to_string();
        assert!(e.contains("not a piece of"), "{e}");
        // SAFETY: not used again.
        unsafe { mine.unmap() };
    }
}
