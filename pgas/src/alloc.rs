//! Allocation in the calling rank's shared segment: `new_`, `new_array`, `delete_`.

use bytemuck::Pod;

use crate::error::PgasError;
use crate::global_ptr::GlobalPtr;
use crate::runtime::{self, Runtime};

fn allocate<T: Pod>(rt: &Runtime, len: usize) -> Result<GlobalPtr<T>, PgasError> {
    let bytes = len
        .checked_mul(size_of::<T>())
        .ok_or(PgasError::OutOfMemory {
            rank: rt.rank_me(),
            requested: usize::MAX,
            largest_free: 0,
        })?;
    let offset = rt.heap.borrow_mut().alloc(bytes, align_of::<T>().max(8))?;
    Ok(GlobalPtr::from_raw(rt.rank_me(), offset))
}

/// Allocates a `T` holding `value` in this rank's shared segment.
pub fn new_<T: Pod>(value: T) -> Result<GlobalPtr<T>, PgasError> {
    runtime::with(|rt| {
        let p = allocate::<T>(rt, 1)?;
        p.write_local(value)?;
        Ok(p)
    })
}

/// Allocates `len` zeroed `T`s in this rank's shared segment.
pub fn new_array<T: Pod>(len: usize) -> Result<GlobalPtr<T>, PgasError> {
    runtime::with(|rt| {
        let p = allocate::<T>(rt, len)?;
        let bytes = len * size_of::<T>();
        let base = p.cast::<u8>().local_slice_ptr(bytes)?;
        // SAFETY: `local_slice_ptr` checked that the whole range lies in this rank's segment;
        // the block was just allocated, so no other rank holds a pointer into it yet.
        unsafe { gasnet_bridge::shared_copy::fill(base.cast(), 0, bytes) };
        Ok(p)
    })
}

/// Frees memory allocated by `new_` / `new_array` on this rank.
pub fn delete_<T: 'static>(p: GlobalPtr<T>) -> Result<(), PgasError> {
    if p.is_null() {
        return Err(PgasError::Null { op: "delete_" });
    }
    runtime::with(|rt| {
        if p.rank() != rt.rank_me() {
            return Err(PgasError::BadFree {
                what: "another rank's pointer",
                rank: p.rank(),
                offset: p.offset(),
            });
        }
        rt.heap.borrow_mut().free(p.offset()).map(|_| ())
    })
}

/// Bytes of this rank's shared segment currently allocated.
pub fn shared_bytes_in_use() -> usize {
    runtime::with(|rt| rt.heap.borrow().in_use())
}
