//! Allocation in the calling rank's shared segment: `new_`, `new_array`, `delete_`.
//!
//! With a hook installed, each allocation is reported (and may be placed at a logged address
//! in a replay), and each free may be deferred (see
//! [`runtime_hooks`](crate::runtime_hooks)).

use bytemuck::Pod;

use crate::error::PgasError;
use crate::global_ptr::GlobalPtr;
use crate::hook::{AllocAction, FreeAction};
use crate::runtime::{self, Runtime};

fn allocate<T: Pod>(rt: &Runtime, len: usize) -> Result<GlobalPtr<T>, PgasError> {
    let bytes = len
        .checked_mul(size_of::<T>())
        .ok_or(PgasError::OutOfMemory {
            rank: rt.rank_me(),
            requested: usize::MAX,
            largest_free: 0,
        })?;
    let align = align_of::<T>().max(8);
    let Some(hook) = rt.hook() else {
        let offset = rt.heap.borrow_mut().alloc(bytes, align)?;
        return Ok(GlobalPtr::from_raw(rt.rank_me(), offset));
    };
    let offset = match hook.before_alloc(bytes, align) {
        AllocAction::Proceed => rt.heap.borrow_mut().alloc(bytes, align)?,
        AllocAction::At(offset) => rt.heap.borrow_mut().alloc_at(offset, bytes, align)?,
    };
    hook.after_alloc(offset, bytes);
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
        free(rt, p.offset())
    })
}

/// Frees this rank's block at `offset`, unless the hook defers it.
fn free(rt: &Runtime, offset: usize) -> Result<(), PgasError> {
    let bad = |what| PgasError::BadFree {
        what,
        rank: rt.rank_me(),
        offset,
    };
    if rt.deferred_frees.borrow().contains(&offset) {
        return Err(bad("a pointer already freed (its free is deferred)"));
    }
    if let Some(h) = rt.hook() {
        let size = rt.heap.borrow().size_of(offset).ok_or(bad("a pointer"))?;
        if h.before_free(offset, size) == FreeAction::Defer {
            rt.deferred_frees.borrow_mut().insert(offset);
            return Ok(());
        }
    }
    rt.heap.borrow_mut().free(offset).map(|_| ())
}

/// Bytes of this rank's shared segment currently allocated.
pub fn shared_bytes_in_use() -> usize {
    runtime::with(|rt| rt.heap.borrow().in_use())
}
