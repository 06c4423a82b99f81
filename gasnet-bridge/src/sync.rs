//! The primitives the crate's lock-free structures are built from (the shared-memory AM ring
//! `conduit/shm_ring.rs`, the smp AM lane `conduit/smp_inbox.rs`, the EC/IWC counters
//! `counters.rs`): std's in a normal build, loom's under `RUSTFLAGS="--cfg loom"`, so that the
//! loom models in `tests/loom_*.rs` (`.ci/loom`) explore every interleaving and every value
//! the memory model lets a load return in the code that runs, not in a copy of it.
//!
//! The std side costs nothing: re-exports, and wrappers whose methods are one inlined pointer
//! operation.
//!
//! Loom's atomics and cells are objects that record each access; they cannot stand in for
//! memory the code did not allocate itself, such as an mpi window shared between processes.
//! [`SharedBytes`] is that memory: a raw pointer in a normal build, a vector of loom atomics
//! in a model.

// The mpi conduit places counters and rings in memory shared between processes, where loom's
// bookkeeping types cannot live.
#[cfg(all(loom, feature = "mpi"))]
compile_error!(
    "`--cfg loom` builds the loom models of the smp conduit and the shared-memory ring; \
     build them without the `mpi` feature (see .ci/loom)"
);

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// `std::cell::UnsafeCell` with loom's access API (`with`, `with_mut`), so that one code path
/// serves both builds and loom can tell every read and write of the cell.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// A cell holding `value`.
    pub(crate) const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a pointer for reading the contents (the caller upholds aliasing).
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a pointer for writing the contents (the caller upholds aliasing).
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Memory shared with another thread or process, accessed both as atomic `u64` words (at
/// 8-aligned offsets) and as plain bytes: the same bytes may be a word at one time and data at
/// another, as in the shared-memory ring (built where the ring is: with `mpi`, for tests).
#[cfg(all(not(loom), any(feature = "mpi", test)))]
#[derive(Debug)]
pub(crate) struct SharedBytes {
    base: std::ptr::NonNull<u8>,
    len: usize,
}

#[cfg(all(not(loom), any(feature = "mpi", test)))]
impl SharedBytes {
    /// The `len` bytes at `base`.
    ///
    /// # Safety
    /// `base` is 8-aligned and points to `len` bytes that stay mapped while this value (and
    /// any reference it hands out) is used. While bytes are used as a word (see
    /// [`SharedBytes::word`]), every thread and process accesses them only atomically.
    #[inline]
    pub(crate) unsafe fn from_raw(base: *mut u8, len: usize) -> SharedBytes {
        debug_assert!(
            (base as usize).is_multiple_of(8),
            "shared bytes not aligned"
        );
        SharedBytes {
            base: std::ptr::NonNull::new(base).expect("shared bytes are not null"),
            len,
        }
    }

    /// The 8-aligned word at `offset`.
    ///
    /// # Safety
    /// `offset + 8 <= len`, and while the bytes are used as this word nobody reads or writes
    /// them other than atomically.
    #[inline(always)]
    pub(crate) unsafe fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset.is_multiple_of(8) && offset + 8 <= self.len);
        // SAFETY: in bounds and 8-aligned (`from_raw`'s base is 8-aligned), mapped while
        // `self` lives, and only accessed atomically meanwhile (the caller's contract).
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// Lets `fill` write the `len` bytes at `offset` (8-aligned); the bytes after them up to
    /// the next multiple of 8 may change too (a model writes whole words).
    ///
    /// # Safety
    /// `offset + len.next_multiple_of(8) <= self.len`, and nobody else reads or writes those
    /// bytes while this runs.
    #[inline(always)]
    pub(crate) unsafe fn write<R>(
        &self,
        offset: usize,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        debug_assert!(offset.is_multiple_of(8) && offset + len <= self.len);
        // SAFETY: in bounds and exclusive while `fill` runs (the caller's contract).
        fill(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(offset), len) })
    }

    /// Hands the `len` bytes at `offset` (8-aligned) to `take`.
    ///
    /// # Safety
    /// `offset + len <= self.len`, and nobody writes those bytes while this runs.
    #[inline(always)]
    pub(crate) unsafe fn read<R>(
        &self,
        offset: usize,
        len: usize,
        take: impl FnOnce(&[u8]) -> R,
    ) -> R {
        debug_assert!(offset.is_multiple_of(8) && offset + len <= self.len);
        // SAFETY: in bounds and not written while `take` runs (the caller's contract).
        take(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(offset), len) })
    }
}

/// Memory shared between the threads of a loom model, as 8-byte loom atomics: loom cannot
/// track one location both as an atomic and as plain memory, so bytes are written and read a
/// word at a time with Relaxed atomics. A missing happens-before therefore shows as a reader
/// getting an old value (loom lets a Relaxed load return any store not ordered before it),
/// which the models check, rather than as a data-race report.
#[cfg(loom)]
#[derive(Debug, Clone)]
pub struct SharedBytes {
    words: std::sync::Arc<[AtomicU64]>,
}

#[cfg(loom)]
impl SharedBytes {
    /// `len` zeroed bytes (a multiple of 8), shared by every clone.
    pub fn zeroed(len: usize) -> SharedBytes {
        assert!(len.is_multiple_of(8), "shared bytes of {len} bytes");
        SharedBytes {
            words: (0..len / 8).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The 8-aligned word at `offset`.
    ///
    /// # Safety
    /// None in a model (the signature matches the normal build's).
    pub(crate) unsafe fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(
            offset.is_multiple_of(8),
            "word at unaligned offset {offset}"
        );
        &self.words[offset / 8]
    }

    /// Lets `fill` write the `len` bytes at `offset` (8-aligned); the rest of the last word
    /// is written as zeros.
    ///
    /// # Safety
    /// None in a model (the signature matches the normal build's).
    pub(crate) unsafe fn write<R>(
        &self,
        offset: usize,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        assert!(
            offset.is_multiple_of(8),
            "bytes at unaligned offset {offset}"
        );
        let mut bytes = vec![0u8; len.next_multiple_of(8)];
        let result = fill(&mut bytes[..len]);
        for (i, word) in bytes.chunks_exact(8).enumerate() {
            let word = u64::from_ne_bytes(word.try_into().expect("8 bytes"));
            self.words[offset / 8 + i].store(word, Ordering::Relaxed);
        }
        result
    }

    /// Hands the `len` bytes at `offset` (8-aligned) to `take`.
    ///
    /// # Safety
    /// None in a model (the signature matches the normal build's).
    pub(crate) unsafe fn read<R>(
        &self,
        offset: usize,
        len: usize,
        take: impl FnOnce(&[u8]) -> R,
    ) -> R {
        assert!(
            offset.is_multiple_of(8),
            "bytes at unaligned offset {offset}"
        );
        let bytes: Vec<u8> = self.words[offset / 8..(offset + len).div_ceil(8)]
            .iter()
            .flat_map(|w| w.load(Ordering::Relaxed).to_ne_bytes())
            .collect();
        take(&bytes[..len])
    }
}
