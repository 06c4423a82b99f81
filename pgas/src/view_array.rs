//! `ViewArray<T>`: a distributed array, as [`DistArray`](crate::DistArray) is, whose local
//! blocks live in viewable memory, so that each member reads and updates its own block in
//! place as a Rust slice ([`ViewArray::with_local_mut`], [`ViewArray::with_local`]).
//!
//! # Why a type of its own
//!
//! A `DistArray`'s block is segment memory, which conduits write directly (an `rput` cannot be
//! refused), so a slice of it could be written under. This array keeps each block in viewable
//! memory (`local_view.rs`), where every access that is not the owner's view goes through the
//! area's handshake: element and range gets and puts are `view_get` / `view_put`, element
//! atomics are applied inside the same handshake (by the accessor on a block this process
//! maps, by the owner's thread otherwise), and reductions fold each block under a shared
//! view. An access overlapping an open view is refused with [`ViewError::Viewed`](crate::ViewError::Viewed)
//! (inside [`ArrayError::View`]) naming accessor, owner and both byte ranges; nothing is written or
//! read. The soundness argument is the one of `pgas/src/README.md`.
//!
//! Accesses complete before they return (a view access is answered by its owner, so it has
//! no future to hold): a range spanning several owners is one access per owner, in turn.

use std::ops::Range;

use bytemuck::Pod;

use crate::array_blocks::{Block, Blocks};
use crate::array_layout::{Layout, LocalIndices};
use crate::atomic_domain::AtomicValue;
use crate::collectives::reduce_all_on;
use crate::dist_array::{Reducible, add_partials, local_extreme, local_sum, pick_partial};
use crate::error::{ArrayError, PgasError};
use crate::local_view::{
    ViewPtr, delete_viewable, new_viewable, view_atomic, view_get, view_put, with_local,
    with_local_mut,
};
use crate::team::{Team, world};
use gasnet_bridge::AtomicOp;

/// A distributed array of `T` over a team, in a block or cyclic [`Layout`], whose members view
/// their own blocks in place.
///
/// Construction and drop are collective over the team, as for `DistArray`; drop waits for
/// every member (a barrier) before freeing this member's block.
pub struct ViewArray<T: Pod> {
    blocks: Blocks<ViewPtr<T>>,
}

impl<T: Pod> Block for ViewPtr<T> {
    const ARRAY: &'static str = "ViewArray";
    fn null() -> Self {
        ViewPtr::null()
    }
    fn is_null(&self) -> bool {
        ViewPtr::is_null(self)
    }
    fn allocate(count: usize) -> Option<Self> {
        new_viewable::<T>(count).ok()
    }
    fn free(self) -> Result<(), PgasError> {
        delete_viewable(self)
    }
    fn out_of_memory(rank: usize, bytes: usize) -> ArrayError {
        ArrayError::OutOfViewable { rank, bytes }
    }
}

impl<T: Pod> ViewArray<T> {
    /// A zeroed array of `len` elements over every rank (collective over the world).
    pub fn new(len: usize, layout: Layout) -> Result<Self, ArrayError> {
        Self::new_on(&world(), len, layout)
    }

    /// A zeroed array of `len` elements over `team` (collective over it). If any member cannot
    /// allocate its block, every member returns the error naming it (nothing stays allocated).
    pub fn new_on(team: &Team, len: usize, layout: Layout) -> Result<Self, ArrayError> {
        let blocks = Blocks::new_on(team, len, layout, size_of::<T>())?;
        Ok(ViewArray { blocks })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.blocks.len
    }

    /// True for an array of no elements.
    pub fn is_empty(&self) -> bool {
        self.blocks.len == 0
    }

    /// How the elements are spread over the team.
    pub fn layout(&self) -> Layout {
        self.blocks.layout
    }

    /// The team the array is spread over.
    pub fn team(&self) -> &Team {
        &self.blocks.team
    }

    /// The world rank that holds element `i`.
    pub fn owner_of(&self, i: usize) -> Result<usize, ArrayError> {
        self.blocks.owner_of(i)
    }

    /// The view pointer to element `i`, for `view_put` / `view_get` of runs this type does not
    /// wrap.
    pub fn ptr(&self, i: usize) -> Result<ViewPtr<T>, ArrayError> {
        self.blocks.ptr(i)
    }

    /// The global indices this rank owns, in increasing order (the order of its local block).
    pub fn local_range(&self) -> LocalIndices {
        self.blocks.local_range()
    }

    /// Runs `f` on this rank's elements (in local order, `local_range()`) as one `&mut [T]`,
    /// in place. While `f` runs, every other access to them (from any rank, and from handlers
    /// that `f`'s own pgas calls run) is refused with [`ArrayError::View`].
    ///
    /// # Errors
    /// [`ArrayError::View`] with [`ViewError::Overlapping`](crate::ViewError::Overlapping) inside another view of the block.
    pub fn with_local_mut<R>(&self, f: impl FnOnce(&mut [T]) -> R) -> Result<R, ArrayError> {
        let mine = self.blocks.mine();
        Ok(with_local_mut(mine, self.local_range().len(), f)?)
    }

    /// Runs `f` on this rank's elements as one `&[T]`, in place. While `f` runs, gets of them
    /// are served and puts and atomics (but loads) refused; read-only views nest.
    ///
    /// # Errors
    /// [`ArrayError::View`] with [`ViewError::Overlapping`](crate::ViewError::Overlapping) inside an exclusive view.
    pub fn with_local<R>(&self, f: impl FnOnce(&[T]) -> R) -> Result<R, ArrayError> {
        let mine = self.blocks.mine();
        Ok(with_local(mine, self.local_range().len(), f)?)
    }

    /// Reads element `i`.
    ///
    /// # Errors
    /// [`ArrayError::View`] if its owner holds an exclusive view of it.
    pub fn get(&self, i: usize) -> Result<T, ArrayError> {
        let mut out = [T::zeroed()];
        view_get(self.ptr(i)?, &mut out)?;
        Ok(out[0])
    }

    /// Writes `value` to element `i`, landed on return.
    ///
    /// # Errors
    /// [`ArrayError::View`] if its owner holds a view of it (nothing is written).
    pub fn put(&self, i: usize, value: T) -> Result<(), ArrayError> {
        Ok(view_put(&[value], self.ptr(i)?)?)
    }

    /// Reads the elements of `range`, which may span several owners (one get per owner).
    ///
    /// # Errors
    /// [`ArrayError::View`] for the first owner whose view covers part of the range.
    pub fn get_range(&self, range: Range<usize>) -> Result<Vec<T>, ArrayError> {
        self.blocks.check_range(&range)?;
        let mut out = vec![T::zeroed(); range.len()];
        let mut run = Vec::new();
        for p in self
            .blocks
            .layout
            .pieces(range, self.blocks.len, self.blocks.team.rank_n())
        {
            run.resize(p.count, T::zeroed());
            view_get(self.blocks.of(p.rank) + p.local_start, &mut run)?;
            for (k, &v) in run.iter().enumerate() {
                out[p.first + k * p.stride] = v;
            }
        }
        Ok(out)
    }

    /// Writes `src` to the elements from `start` on, which may span several owners (one put
    /// per owner), landed on return.
    ///
    /// # Errors
    /// [`ArrayError::View`] for the first owner whose view covers part of the range: the
    /// pieces of owners before it in the range's order have landed, the others not.
    pub fn put_range(&self, start: usize, src: &[T]) -> Result<(), ArrayError> {
        let range = start..start.saturating_add(src.len());
        self.blocks.check_range(&range)?;
        for p in self
            .blocks
            .layout
            .pieces(range, self.blocks.len, self.blocks.team.rank_n())
        {
            let dst = self.blocks.of(p.rank) + p.local_start;
            if p.stride == 1 {
                view_put(&src[p.first..p.first + p.count], dst)?;
            } else {
                let run: Vec<T> = (0..p.count).map(|k| src[p.first + k * p.stride]).collect();
                view_put(&run, dst)?;
            }
        }
        Ok(())
    }
}

/// Reductions over the whole array, collective over its team, with `DistArray`'s results and
/// reproducibility (see its reductions). Each member folds its block in place under a shared
/// view (no copy), so writes into the array must be complete before the members call.
///
/// # Errors
/// [`ArrayError::ReducedInView`] on every member if one of them holds an exclusive view of its
/// own block (it calls from inside [`ViewArray::with_local_mut`]).
impl<T: Reducible> ViewArray<T> {
    /// The sum of every element (0 for an empty array).
    pub fn sum(&self) -> Result<T, ArrayError> {
        let partial = self.fold(|block| local_sum(block));
        let total = reduce_all_on(&self.blocks.team, partial, |a, b| match (a, b) {
            (Ok(a), Ok(b)) => Ok(add_partials(a, b)),
            (Err(r), _) | (_, Err(r)) => Err(r),
        })
        .wait();
        total
            .map(|s| s.unwrap_or_else(T::zeroed))
            .map_err(|rank| ArrayError::ReducedInView { rank })
    }

    /// The smallest element (`None` for an empty array), the lowest index among ties.
    pub fn min(&self) -> Result<Option<T>, ArrayError> {
        self.extreme(|x, y| x < y)
    }

    /// The largest element (`None` for an empty array), the lowest index among ties.
    pub fn max(&self) -> Result<Option<T>, ArrayError> {
        self.extreme(|x, y| x > y)
    }

    fn extreme(&self, better: fn(&T, &T) -> bool) -> Result<Option<T>, ArrayError> {
        let local = self.local_range();
        let partial = self.fold(|block| local_extreme(&local, block, better));
        let best = reduce_all_on(&self.blocks.team, partial, move |a, b| match (a, b) {
            (Ok(a), Ok(b)) => Ok(pick_partial(better, a, b)),
            (Err(r), _) | (_, Err(r)) => Err(r),
        })
        .wait();
        best.map(|m| m.map(|(_, v)| v))
            .map_err(|rank| ArrayError::ReducedInView { rank })
    }

    /// `f` of this member's block under a shared view, or this member's world rank if its own
    /// exclusive view refused that.
    fn fold<P>(&self, f: impl FnOnce(&[T]) -> P) -> Result<P, usize> {
        self.with_local(f)
            .map_err(|_| self.blocks.team.to_world(self.blocks.team.rank_me()))
    }
}

/// Element-wise atomics on any [`AtomicValue`] element, `SeqCst`, each complete on return,
/// applied under the view handshake.
///
/// # Errors
/// [`ArrayError::View`] if the element's owner holds a view of it (a shared view refuses all
/// but `load`); nothing is applied.
impl<T: AtomicValue> ViewArray<T> {
    /// Applies `op` to element `i`; returns the previous value.
    fn atomic(&self, i: usize, op: AtomicOp) -> Result<T, ArrayError> {
        Ok(T::from_bits(view_atomic(self.ptr(i)?, op)?))
    }

    /// Atomically reads element `i`.
    pub fn load(&self, i: usize) -> Result<T, ArrayError> {
        self.atomic(i, AtomicOp::Load)
    }

    /// Atomically writes `v` to element `i`.
    pub fn store(&self, i: usize, v: T) -> Result<(), ArrayError> {
        self.atomic(i, AtomicOp::Store(v.to_bits())).map(|_| ())
    }

    /// Atomically writes `v` to element `i`; returns the previous value.
    pub fn exchange(&self, i: usize, v: T) -> Result<T, ArrayError> {
        self.atomic(i, AtomicOp::Swap(v.to_bits()))
    }

    /// Writes `new` to element `i` if it equals `current` (bitwise); returns the previous
    /// value.
    pub fn compare_exchange(&self, i: usize, current: T, new: T) -> Result<T, ArrayError> {
        let op = AtomicOp::CompareExchange {
            current: current.to_bits(),
            new: new.to_bits(),
        };
        self.atomic(i, op)
    }

    /// Applies `f` to element `i` with a compare-exchange loop; returns the previous value.
    fn update(&self, i: usize, f: impl Fn(T) -> T) -> Result<T, ArrayError> {
        let mut current = self.load(i)?;
        loop {
            let seen = self.compare_exchange(i, current, f(current))?;
            if seen.to_bits() == current.to_bits() {
                return Ok(seen);
            }
            current = seen;
        }
    }
}

/// The element-wise integer atomics of one type, one operation each.
macro_rules! integer_atomics {
    ($t:ty, $min:ident, $max:ident) => {
        impl ViewArray<$t> {
            /// Atomically adds `v` (wrapping) to element `i`; returns the previous value.
            pub fn fetch_add(&self, i: usize, v: $t) -> Result<$t, ArrayError> {
                self.atomic(i, AtomicOp::FetchAdd(v.to_bits()))
            }
            /// Atomically subtracts `v` (wrapping) from element `i`; returns the previous value.
            pub fn fetch_sub(&self, i: usize, v: $t) -> Result<$t, ArrayError> {
                self.atomic(i, AtomicOp::FetchSub(v.to_bits()))
            }
            /// Atomically stores the minimum of element `i` and `v`; returns the previous value.
            pub fn fetch_min(&self, i: usize, v: $t) -> Result<$t, ArrayError> {
                self.atomic(i, AtomicOp::$min(v as _))
            }
            /// Atomically stores the maximum of element `i` and `v`; returns the previous value.
            pub fn fetch_max(&self, i: usize, v: $t) -> Result<$t, ArrayError> {
                self.atomic(i, AtomicOp::$max(v as _))
            }
            /// Atomically ands `v` into element `i`; returns the previous value.
            pub fn fetch_and(&self, i: usize, v: $t) -> Result<$t, ArrayError> {
                self.atomic(i, AtomicOp::And(v.to_bits()))
            }
            /// Atomically ors `v` into element `i`; returns the previous value.
            pub fn fetch_or(&self, i: usize, v: $t) -> Result<$t, ArrayError> {
                self.atomic(i, AtomicOp::Or(v.to_bits()))
            }
            /// Atomically xors `v` into element `i`; returns the previous value.
            pub fn fetch_xor(&self, i: usize, v: $t) -> Result<$t, ArrayError> {
                self.atomic(i, AtomicOp::Xor(v.to_bits()))
            }
        }
    };
}

integer_atomics!(u64, Min, Max);
integer_atomics!(i64, MinI64, MaxI64);

/// The `f64` atomics, compare-exchange loops (one handshake or request per attempt).
impl ViewArray<f64> {
    /// Atomically adds `v` to element `i`; returns the previous value.
    pub fn fetch_add(&self, i: usize, v: f64) -> Result<f64, ArrayError> {
        self.update(i, |x| x + v)
    }
    /// Atomically stores the minimum of element `i` and `v`; returns the previous value.
    pub fn fetch_min(&self, i: usize, v: f64) -> Result<f64, ArrayError> {
        self.update(i, |x| x.min(v))
    }
    /// Atomically stores the maximum of element `i` and `v`; returns the previous value.
    pub fn fetch_max(&self, i: usize, v: f64) -> Result<f64, ArrayError> {
        self.update(i, |x| x.max(v))
    }
}
