//! `GlobalPtr<T>`: the address of a `T` in some rank's shared segment (rank + byte offset).
//!
//! Arithmetic is in elements of `T`, as with raw pointers; it never dereferences, so it is
//! safe, and every access through the pointer is bounds-checked by the communication core.
//! Only plain-old-data types (`bytemuck::Pod`) can be pointed to, because their bytes travel
//! between ranks as they are.
//!
//! A pointer can be made to any offset (from raw parts, by arithmetic, by casting or
//! deserializing bytes), so accesses, not constructors, keep the program out of the bytes
//! every segment keeps for the runtime below the first allocation: each one refuses a pointer
//! there ([`PgasError::Reserved`]).

use std::marker::PhantomData;
use std::ops::{Add, Sub};

use bytemuck::{Pod, Zeroable};
use gasnet_bridge::shared_copy;
use serde::{Deserialize, Serialize};

use crate::error::PgasError;
use crate::runtime::{self, RESERVED};

const NULL_RANK: u32 = u32::MAX;

/// A typed pointer into the shared segment of a rank.
#[repr(C)]
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct GlobalPtr<T: 'static> {
    offset: u64,
    rank: u32,
    _pad: u32,
    #[serde(skip)]
    _type: PhantomData<fn() -> T>,
}

// SAFETY: `repr(C)` of u64 + u32 + u32 + a zero-sized marker: no padding, every bit pattern is
// a valid value (a pointer is only ever dereferenced through bounds-checked operations).
unsafe impl<T: 'static> Zeroable for GlobalPtr<T> {}
// SAFETY: as above; the marker is a ZST and the struct is Copy + 'static.
unsafe impl<T: 'static> Pod for GlobalPtr<T> {}

impl<T: 'static> Clone for GlobalPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: 'static> Copy for GlobalPtr<T> {}

impl<T: 'static> PartialEq for GlobalPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.rank, self.offset) == (other.rank, other.offset)
    }
}
impl<T: 'static> Eq for GlobalPtr<T> {}
impl<T: 'static> std::hash::Hash for GlobalPtr<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.rank, self.offset).hash(state)
    }
}
/// Pointers order by rank, then by address, as UPC++ global pointers do.
impl<T: 'static> PartialOrd for GlobalPtr<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T: 'static> Ord for GlobalPtr<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.rank, self.offset).cmp(&(other.rank, other.offset))
    }
}

impl<T: 'static> std::fmt::Debug for GlobalPtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_null() {
            write!(f, "GlobalPtr(null)")
        } else {
            write!(
                f,
                "GlobalPtr(rank {}, offset {:#x})",
                self.rank, self.offset
            )
        }
    }
}

/// The pointer `n` elements further on.
///
/// # Panics
/// On a null pointer or on address overflow.
impl<T: 'static> Add<usize> for GlobalPtr<T> {
    type Output = GlobalPtr<T>;
    fn add(self, n: usize) -> Self {
        assert!(!self.is_null(), "arithmetic on a null global pointer");
        let offset = (n as u64)
            .checked_mul(size_of::<T>() as u64)
            .and_then(|b| self.offset.checked_add(b))
            .expect("global pointer arithmetic overflowed");
        GlobalPtr { offset, ..self }
    }
}

/// The pointer `n` elements back.
///
/// # Panics
/// On a null pointer or if it would go below offset 0.
impl<T: 'static> Sub<usize> for GlobalPtr<T> {
    type Output = GlobalPtr<T>;
    fn sub(self, n: usize) -> Self {
        assert!(!self.is_null(), "arithmetic on a null global pointer");
        let offset = (n as u64)
            .checked_mul(size_of::<T>() as u64)
            .and_then(|b| self.offset.checked_sub(b))
            .expect("global pointer arithmetic went below the segment start");
        GlobalPtr { offset, ..self }
    }
}

impl<T: 'static> Default for GlobalPtr<T> {
    fn default() -> Self {
        Self::null()
    }
}

impl<T: 'static> GlobalPtr<T> {
    /// The pointer at byte `offset` of `rank`'s segment. Nothing is checked until it is used.
    pub fn from_raw(rank: usize, offset: usize) -> Self {
        GlobalPtr {
            offset: offset as u64,
            rank: u32::try_from(rank).expect("rank fits in 32 bits"),
            _pad: 0,
            _type: PhantomData,
        }
    }

    /// The null pointer.
    pub const fn null() -> Self {
        GlobalPtr {
            offset: 0,
            rank: NULL_RANK,
            _pad: 0,
            _type: PhantomData,
        }
    }

    /// True for the null pointer.
    pub fn is_null(&self) -> bool {
        self.rank == NULL_RANK
    }

    /// The rank whose segment holds the pointee.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Byte offset in that segment.
    pub fn offset(&self) -> usize {
        self.offset as usize
    }

    /// Elements from `origin` to `self` (both on the same rank).
    ///
    /// # Panics
    /// If the ranks differ or the distance is not a whole number of elements.
    pub fn offset_from(self, origin: Self) -> isize {
        assert_eq!(
            self.rank, origin.rank,
            "offset_from between pointers to different ranks"
        );
        let bytes = self.offset as i128 - origin.offset as i128;
        let size = size_of::<T>().max(1) as i128;
        assert_eq!(
            bytes % size,
            0,
            "pointers are not a whole number of elements apart"
        );
        (bytes / size) as isize
    }

    /// The same address viewed as another type (UPC++ `reinterpret_pointer_cast`).
    pub fn cast<U: 'static>(self) -> GlobalPtr<U> {
        GlobalPtr {
            offset: self.offset,
            rank: self.rank,
            _pad: 0,
            _type: PhantomData,
        }
    }

    /// True if this rank can address the pointee directly (same node).
    pub fn is_local(&self) -> bool {
        !self.is_null() && runtime::with(|rt| rt.is_local_rank(self.rank()))
    }

    /// Panics, naming `op`, unless an access may start here: not at the null pointer, nor in
    /// the bytes every segment keeps for the runtime (see [`PgasError::Reserved`]). The
    /// communication core checks the end of the range against the segment. One comparison:
    /// the null pointer's offset, 0, lies in the reserved bytes too.
    #[inline]
    pub(crate) fn check_access(self, op: &str) {
        if self.offset < RESERVED as u64 {
            self.refuse(op)
        }
    }

    #[cold]
    #[inline(never)]
    fn refuse(self, op: &str) -> ! {
        if self.is_null() {
            panic!("{op} through a null global pointer");
        }
        panic!("{op}: {}", runtime::reserved(self.rank(), self.offset()))
    }
}

impl<T: Pod> GlobalPtr<T> {
    /// A raw pointer to the pointee, for co-located data; checked for locality, bounds and
    /// alignment. Dereferencing it is `unsafe`: no other rank may write it concurrently.
    pub fn local(&self) -> Result<*mut T, PgasError> {
        self.local_slice_ptr(1)
    }

    /// A raw pointer to `len` elements from here, checked like [`GlobalPtr::local`].
    pub fn local_slice_ptr(&self, len: usize) -> Result<*mut T, PgasError> {
        if self.is_null() {
            return Err(PgasError::Null { op: "local()" });
        }
        runtime::with(|rt| {
            let me = rt.rank_me();
            if !rt.is_local_rank(self.rank()) {
                return Err(PgasError::NotLocal {
                    rank: self.rank(),
                    me,
                });
            }
            let bytes = len.saturating_mul(size_of::<T>());
            rt.check_range(self.rank(), self.offset(), bytes)?;
            let base = rt.segment_base(self.rank())?;
            // SAFETY (pointer arithmetic only): the range was checked to lie in the segment.
            let p = unsafe { base.add(self.offset()) }.cast::<T>();
            if !(p as usize).is_multiple_of(align_of::<T>()) {
                return Err(PgasError::Bridge(gasnet_bridge::BridgeError::Misaligned {
                    rank: self.rank(),
                    offset: self.offset(),
                    align: align_of::<T>(),
                }));
            }
            Ok(p)
        })
    }

    /// Reads a co-located value by copy (no communication, checked like `local()`).
    pub fn read_local(&self) -> Result<T, PgasError> {
        let p = self.local()?;
        // SAFETY: `local()` checked that the value lies in a segment this process maps;
        // `shared_copy` reads it without a reference and without a data race, even against a
        // concurrent remote write (a program error that may then read a torn value).
        Ok(unsafe { shared_copy::load(p) })
    }

    /// Copies `dst.len()` co-located elements from here into `dst` (one bounds check, one
    /// copy; no communication).
    pub fn read_local_slice(&self, dst: &mut [T]) -> Result<(), PgasError> {
        let p = self.local_slice_ptr(dst.len())?;
        // SAFETY: `local_slice_ptr` checked that `dst.len()` elements from `p` lie in a segment
        // this process maps; `shared_copy` is the race-free way to read it.
        unsafe { shared_copy::copy_out(p.cast(), bytemuck::cast_slice_mut(dst)) };
        Ok(())
    }

    /// Copies `src` into co-located memory from here (one bounds check, one copy).
    pub fn write_local_slice(&self, src: &[T]) -> Result<(), PgasError> {
        let p = self.local_slice_ptr(src.len())?;
        // SAFETY: as in `read_local_slice`, with the copy reversed.
        unsafe { shared_copy::copy_in(p.cast(), bytemuck::cast_slice(src)) };
        Ok(())
    }

    /// Writes a co-located value by copy (no communication, checked like `local()`).
    pub fn write_local(&self, value: T) -> Result<(), PgasError> {
        let p = self.local()?;
        // SAFETY: as in `read_local`.
        unsafe { shared_copy::store(p, value) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_in_elements() {
        let p = GlobalPtr::<u64>::from_raw(2, 64);
        let q = p + 3;
        assert_eq!((q.rank(), q.offset()), (2, 88));
        assert_eq!(q - 3, p);
        assert_eq!(q.offset_from(p), 3);
        assert_eq!(p.offset_from(q), -3);
        assert!(p < q);
        assert!(GlobalPtr::<u64>::from_raw(1, 1000) < p, "rank orders first");
        let bytes = p.cast::<u8>();
        assert_eq!((bytes + 8).cast::<u64>(), p + 1);
    }

    #[test]
    fn null_pointer() {
        let n = GlobalPtr::<u32>::null();
        assert!(n.is_null());
        assert_eq!(n, GlobalPtr::default());
        assert!(!GlobalPtr::<u32>::from_raw(0, 0).is_null());
        assert_eq!(format!("{n:?}"), "GlobalPtr(null)");
    }

    #[test]
    #[should_panic(expected = "below the segment start")]
    fn underflow_panics() {
        let _ = GlobalPtr::<u64>::from_raw(0, 8) - 2;
    }

    #[test]
    fn pointers_are_pod_and_serializable() {
        let p = GlobalPtr::<f64>::from_raw(5, 4096);
        let bytes: &[u8] = bytemuck::bytes_of(&p);
        assert_eq!(bytes.len(), 16);
        let back: GlobalPtr<f64> = *bytemuck::from_bytes(bytes);
        assert_eq!(back, p);
        let wire = postcard::to_allocvec(&p).unwrap();
        let de: GlobalPtr<f64> = postcard::from_bytes(&wire).unwrap();
        assert_eq!(de, p);
    }
}
