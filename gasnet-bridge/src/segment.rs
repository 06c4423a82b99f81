//! A rank's registered segment: the bytes other ranks may read and write one-sidedly.
//!
//! # Safety invariant
//!
//! `base` points to `len` bytes mapped by [`Segment::new`] (anonymous pages: zeroed,
//! page-aligned), or
//! lent by a conduit (`Segment::borrowed`), that stay valid until the `Segment` is dropped;
//! the job keeps every segment alive until all rank threads have been joined. The bytes are
//! shared by all ranks at once, so no Rust reference to them (`&[u8]`, `&mut [u8]`) is ever
//! created: bytes move only through [`shared_copy`] (inline-assembly copies outside the
//! Rust abstract machine, see its model) after a bounds check, and 64-bit words are touched
//! as `AtomicU64`.
//!
//! Conflicting accesses to the same bytes from two ranks without synchronization between
//! them are a program error, as in UPC++ and GASNet. Two racing transfers read torn or stale
//! bytes, nothing else. A transfer racing with a remote atomic on the same word is a
//! mixed-size race that Rust's model does not define; its outcome is x86-64's (the
//! `shared_copy` module doc says exactly what is and is not promised). Every access is
//! bounds-checked, so none can leave the segment.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use crate::error::BridgeError;
use crate::shared_copy;

/// Alignment of every segment's base address (a page, so the base is aligned for any scalar).
pub const SEGMENT_ALIGN: usize = 4096;

/// One rank's shared bytes.
pub struct Segment {
    rank: usize,
    base: NonNull<u8>,
    len: usize,
    /// False for memory owned by someone else (the mpi conduit's shared-memory window).
    owned: bool,
}

// SAFETY: the segment is memory shared on purpose; see the module invariant: only
// `shared_copy` and atomics touch it, so sharing the pointer across threads creates neither
// aliasing references nor data races.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl Segment {
    /// Maps `len` zeroed bytes for `rank`. Anonymous pages, not the allocator: the allocator
    /// zeroes a page-aligned block by writing every byte (making the whole segment resident at
    /// once), where untouched anonymous pages cost no physical memory.
    pub fn new(rank: usize, len: usize) -> Segment {
        assert!(len > 0, "segment length must be positive");
        // SAFETY: a fresh private anonymous mapping (no address hint, no file): it aliases no
        // existing memory; its pages read as zero until written.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let base = if raw == libc::MAP_FAILED {
            None
        } else {
            NonNull::new(raw.cast::<u8>())
        };
        let Some(base) = base else {
            let layout = Layout::from_size_align(len, SEGMENT_ALIGN).expect("segment layout");
            std::alloc::handle_alloc_error(layout)
        };
        Segment {
            rank,
            base,
            len,
            owned: true,
        }
    }

    /// A segment over memory the caller owns (a conduit's registered window); it is not freed
    /// on drop.
    ///
    /// # Safety
    /// `base` must point to `len` bytes, 8-byte aligned, that stay valid for the lifetime of the
    /// returned `Segment` and are touched by everyone under this module's invariant only.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) unsafe fn borrowed(rank: usize, base: NonNull<u8>, len: usize) -> Segment {
        Segment {
            rank,
            base,
            len,
            owned: false,
        }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Base address, for conduits and the owner's local views. Dereferencing it is subject to
    /// the module's invariant: [`shared_copy`] or atomics only, never a
    /// Rust reference or a plain copy.
    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Checks that `offset .. offset + len` lies inside the segment.
    #[inline]
    pub fn check(&self, offset: usize, len: usize) -> Result<(), BridgeError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(BridgeError::OutOfSegment {
                rank: self.rank,
                offset,
                len,
                segment_len: self.len,
            }),
        }
    }

    /// Copies `src` into the segment at `offset`.
    #[inline]
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), BridgeError> {
        self.check(offset, src.len())?;
        // SAFETY: the range is inside the segment (checked above), which is shared memory in
        // the sense of `shared_copy`'s contract.
        unsafe { shared_copy::copy_in(self.base.as_ptr().add(offset), src) };
        Ok(())
    }

    /// Copies bytes at `offset` into `dst`.
    #[inline]
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), BridgeError> {
        self.check(offset, dst.len())?;
        // SAFETY: as in `write`.
        unsafe { shared_copy::copy_out(self.base.as_ptr().add(offset), dst) };
        Ok(())
    }

    /// The 64-bit word at `offset` as an atomic; `offset` must be 8-byte aligned.
    #[inline]
    pub fn atomic_u64(&self, offset: usize) -> Result<&AtomicU64, BridgeError> {
        self.check(offset, 8)?;
        if !offset.is_multiple_of(8) {
            return Err(BridgeError::Misaligned {
                rank: self.rank,
                offset,
                align: 8,
            });
        }
        // SAFETY: in bounds and 8-byte aligned (the base is page-aligned); the memory lives as
        // long as `self`, which bounds the returned lifetime. Copies of the same word by other
        // ranks happen in `shared_copy`'s assembly, outside the Rust abstract machine, so even
        // a racy program has no data race here (module note).
        Ok(unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(offset).cast::<u64>()) })
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // SAFETY: mapped in `new` with this length, unmapped once; the job has joined every
        // rank thread (module invariant), so nothing reaches the pages any more. A failure
        // leaves the pages mapped: nothing to undo.
        let _ = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("rank", &self.rank)
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn starts_zeroed_and_round_trips() {
        let s = Segment::new(3, 4096);
        let mut buf = [1u8; 16];
        s.read(100, &mut buf).unwrap();
        assert_eq!(buf, [0; 16]);
        s.write(100, b"hello, segment!!").unwrap();
        s.read(100, &mut buf).unwrap();
        assert_eq!(&buf, b"hello, segment!!");
        assert_eq!(s.base() as usize % SEGMENT_ALIGN, 0);
    }

    /// Resident memory of this process in KiB (Linux's `VmRSS`).
    fn resident_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn untouched_pages_are_not_resident() {
        const LEN: usize = 512 << 20;
        let before = resident_kib();
        let s = Segment::new(0, LEN);
        s.write(LEN - 8, &[1; 8]).unwrap();
        let grown = resident_kib().saturating_sub(before);
        // Other tests of this binary run meanwhile; half the segment is far above their noise.
        assert!(
            grown < (LEN as u64 >> 10) / 2,
            "a fresh {LEN}-byte segment made {grown} KiB resident"
        );
        let mut last = [0u8; 8];
        s.read(LEN - 8, &mut last).unwrap();
        assert_eq!(last, [1; 8]);
    }

    #[test]
    fn edges_of_the_segment() {
        let s = Segment::new(2, 64);
        s.write(56, &[7; 8]).unwrap();
        s.write(64, &[]).unwrap();
        let err = s.write(57, &[7; 8]).unwrap_err();
        assert_eq!(
            err,
            BridgeError::OutOfSegment {
                rank: 2,
                offset: 57,
                len: 8,
                segment_len: 64
            }
        );
        let msg = err.to_string();
        assert!(msg.contains("rank 2") && msg.contains("offset 57") && msg.contains("length 8"));
        assert!(
            s.read(usize::MAX, &mut [0; 2]).is_err(),
            "overflowing range must not wrap"
        );
    }

    #[test]
    fn atomics_need_alignment_and_bounds() {
        let s = Segment::new(0, 64);
        s.atomic_u64(8).unwrap().store(5, Ordering::Relaxed);
        let mut b = [0u8; 8];
        s.read(8, &mut b).unwrap();
        assert_eq!(u64::from_ne_bytes(b), 5);
        assert!(matches!(
            s.atomic_u64(4),
            Err(BridgeError::Misaligned { offset: 4, .. })
        ));
        assert!(matches!(
            s.atomic_u64(64),
            Err(BridgeError::OutOfSegment { .. })
        ));
        assert!(matches!(
            s.atomic_u64(60),
            Err(BridgeError::OutOfSegment { .. })
        ));
    }
}
