//! `DistArray<T>`: an array of `len` plain-data elements spread over a team's shared
//! segments by a [`Layout`], addressed by global index from any member.
//!
//! Each member holds its elements contiguously in one allocation of its segment (its *local
//! block*), in increasing global index. Element access is a one-sided rget/rput/atomic on the
//! owner's block; a range is split into one contiguous run of local elements per owner
//! ([`Layout::pieces`]), all issued before any is waited for, with one future for the whole.

use std::ops::Range;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::alloc::{delete_, new_array};
use crate::array_blocks::{Block, Blocks};
use crate::array_layout::{Layout, LocalIndices};
use crate::atomic_domain::{AtomicDomain, AtomicValue};
use crate::collectives::reduce_all_on;
use crate::error::{ArrayError, PgasError};
use crate::future::{Future, when_all};
use crate::global_ptr::GlobalPtr;
use crate::rma::{rget, rget_slice, rput, rput_slice};
use crate::team::{Team, world};

/// A distributed array of `T` over a team, in a block or cyclic [`Layout`].
///
/// Construction and drop are collective over the team (every member, in the same order as its
/// other collectives). Dropping waits for every member to drop (a barrier over the team) and
/// then frees this member's block, so an access another member completed before its drop never
/// lands in freed memory; accesses must therefore be complete (their futures waited) before a
/// member drops its handle.
pub struct DistArray<T: bytemuck::Pod> {
    blocks: Blocks<GlobalPtr<T>>,
}

impl<T: bytemuck::Pod> Block for GlobalPtr<T> {
    const ARRAY: &'static str = "DistArray";
    fn null() -> Self {
        GlobalPtr::null()
    }
    fn is_null(&self) -> bool {
        GlobalPtr::is_null(self)
    }
    fn allocate(count: usize) -> Option<Self> {
        new_array::<T>(count).ok()
    }
    fn free(self) -> Result<(), PgasError> {
        delete_(self)
    }
    fn out_of_memory(rank: usize, bytes: usize) -> ArrayError {
        ArrayError::OutOfMemory { rank, bytes }
    }
}

impl<T: bytemuck::Pod> DistArray<T> {
    /// A zeroed array of `len` elements over every rank (collective over the world).
    pub fn new(len: usize, layout: Layout) -> Result<Self, ArrayError> {
        Self::new_on(&world(), len, layout)
    }

    /// A zeroed array of `len` elements over `team` (collective over it). If any member cannot
    /// allocate its block, every member returns the error naming it (nothing stays allocated).
    pub fn new_on(team: &Team, len: usize, layout: Layout) -> Result<Self, ArrayError> {
        let blocks = Blocks::new_on(team, len, layout, size_of::<T>())?;
        Ok(DistArray { blocks })
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
    #[inline]
    pub fn owner_of(&self, i: usize) -> Result<usize, ArrayError> {
        self.blocks.owner_of(i)
    }

    /// The global pointer to element `i`, for operations this type does not wrap (the
    /// `*_sync` atomics, `put_signal`, completions).
    #[inline]
    pub fn ptr(&self, i: usize) -> Result<GlobalPtr<T>, ArrayError> {
        self.blocks.ptr(i)
    }

    /// The global indices this rank owns, in increasing order (the order of its local block).
    pub fn local_range(&self) -> LocalIndices {
        self.blocks.local_range()
    }

    /// This rank's local block (its first element; `local_range().len()` of them).
    pub fn local_block(&self) -> GlobalPtr<T> {
        self.blocks.mine()
    }

    /// A copy of this rank's elements, in local order.
    pub fn read_local(&self) -> Vec<T> {
        let mut out = vec![T::zeroed(); self.local_range().len()];
        self.local_block()
            .read_local_slice(&mut out)
            .expect("a member's own block is local to it");
        out
    }

    /// Overwrites this rank's elements with `src`, which must hold exactly
    /// `local_range().len()` of them.
    pub fn write_local(&self, src: &[T]) -> Result<(), ArrayError> {
        let owned = self.local_range().len();
        if src.len() != owned {
            return Err(ArrayError::LocalLength {
                rank: self.blocks.team.to_world(self.blocks.team.rank_me()),
                given: src.len(),
                owned,
            });
        }
        self.local_block()
            .write_local_slice(src)
            .expect("a member's own block is local to it");
        Ok(())
    }

    /// Reads element `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Result<Future<T>, ArrayError> {
        Ok(rget(self.ptr(i)?))
    }

    /// Writes `value` to element `i`; the future completes when it has landed.
    #[inline]
    pub fn put(&self, i: usize, value: T) -> Result<Future<()>, ArrayError> {
        Ok(rput(value, self.ptr(i)?))
    }

    /// Reads the elements of `range`, which may span several owners: one get per owner, all
    /// in flight together, one future for the whole range.
    pub fn get_range(&self, range: Range<usize>) -> Result<Future<Vec<T>>, ArrayError> {
        self.blocks.check_range(&range)?;
        let total = range.len();
        let pieces = self
            .blocks
            .layout
            .pieces(range, self.blocks.len, self.blocks.team.rank_n());
        let gets = pieces
            .iter()
            .map(|p| rget_slice(self.blocks.of(p.rank) + p.local_start, p.count))
            .collect();
        Ok(when_all(gets).then(move |parts| {
            let mut out = vec![T::zeroed(); total];
            for (p, part) in pieces.iter().zip(parts) {
                for (k, v) in part.into_iter().enumerate() {
                    out[p.first + k * p.stride] = v;
                }
            }
            out
        }))
    }

    /// Writes `src` to the elements from `start` on (`start .. start + src.len()`), which may
    /// span several owners: one put per owner, all in flight together; the future completes
    /// when every one has landed.
    pub fn put_range(&self, start: usize, src: &[T]) -> Result<Future<()>, ArrayError> {
        let range = start..start.saturating_add(src.len());
        self.blocks.check_range(&range)?;
        let pieces = self
            .blocks
            .layout
            .pieces(range, self.blocks.len, self.blocks.team.rank_n());
        if let [p] = pieces[..]
            && p.stride == 1
        {
            // Within one owner's block: the put's own future.
            return Ok(rput_slice(src, self.blocks.of(p.rank) + p.local_start));
        }
        let puts = pieces
            .into_iter()
            .map(|p| {
                let dst = self.blocks.of(p.rank) + p.local_start;
                if p.stride == 1 {
                    rput_slice(&src[p.first..p.first + p.count], dst)
                } else {
                    let run: Vec<T> = (0..p.count).map(|k| src[p.first + k * p.stride]).collect();
                    rput_slice(&run, dst)
                }
            })
            .collect();
        Ok(when_all(puts).then(|_| ()))
    }
}

/// An element type the reductions of [`DistArray`] support: how two values add, and their
/// order (`PartialOrd`).
pub trait Reducible: bytemuck::Pod + PartialOrd + Serialize + DeserializeOwned {
    /// `a + b`; integers wrap (as [`AtomicDomain`]'s `fetch_add` does), so that an overflow
    /// gives the same bits on every member rather than a panic on some.
    fn add(a: Self, b: Self) -> Self;
}

macro_rules! wrapping_sum {
    ($($t:ty),*) => {$(
        impl Reducible for $t {
            fn add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
        }
    )*};
}
wrapping_sum!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize
);

impl Reducible for f32 {
    fn add(a: Self, b: Self) -> Self {
        a + b
    }
}
impl Reducible for f64 {
    fn add(a: Self, b: Self) -> Self {
        a + b
    }
}

/// Reductions over the whole array, collective over its team.
///
/// Each member folds its own block in increasing global index, then the members' partials are
/// combined by [`reduce_all_on`], in team-rank order with a parenthesisation fixed by the team
/// size (see the collectives module). What is reproducible:
///
/// * **`sum` of integers, `min`, `max`**: exact, so the same value for every team size and both
///   layouts. Integer addition (wrapping) is associative and commutative; `min` and `max`
///   return the extreme value and, among equal ones (`-0.0` and `0.0`), the one with the lowest
///   global index, which no grouping changes. This holds for values `<` orders totally: with a
///   NaN in the array, `min`/`max` get only the guarantee of the next point.
/// * **`sum` of `f32`/`f64`**: the same bits on every run, every conduit and every collective
///   algorithm for the same length, layout and team size; a different team size or layout
///   groups the additions differently and may change the last bits.
///
/// Each member reads its block when it calls: writes into the array must be complete (e.g.
/// waited, then a barrier) before the members call.
impl<T: Reducible> DistArray<T> {
    /// The sum of every element (0 for an empty array).
    pub fn sum(&self) -> Future<T> {
        let partial = local_sum(&self.read_local());
        reduce_all_on(&self.blocks.team, partial, add_partials)
            .then(|s| s.unwrap_or_else(T::zeroed))
    }

    /// The smallest element (`None` for an empty array).
    pub fn min(&self) -> Future<Option<T>> {
        self.extreme(|x, y| x < y)
    }

    /// The largest element (`None` for an empty array).
    pub fn max(&self) -> Future<Option<T>> {
        self.extreme(|x, y| x > y)
    }

    /// The element preferred over every other (`better(x, y)`: `x` is preferred to `y`), the
    /// lowest index among ties.
    fn extreme(&self, better: fn(&T, &T) -> bool) -> Future<Option<T>> {
        let partial = local_extreme(&self.local_range(), &self.read_local(), better);
        reduce_all_on(&self.blocks.team, partial, move |a, b| {
            pick_partial(better, a, b)
        })
        .then(|m| m.map(|(_, v)| v))
    }
}

/// A member's part of a sum: its `local` elements folded in local order (`None` for none).
pub(crate) fn local_sum<T: Reducible>(local: &[T]) -> Option<T> {
    local.iter().copied().reduce(T::add)
}

/// Two members' parts of a sum combined, in team-rank order (`a` before `b`).
pub(crate) fn add_partials<T: Reducible>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(T::add(a, b)),
        (a, b) => a.or(b),
    }
}

/// `a` or `b` (global index, value), whichever `better` prefers, the lower index among ties.
fn pick<T>(better: fn(&T, &T) -> bool, a: (u64, T), b: (u64, T)) -> (u64, T) {
    let b_wins = better(&b.1, &a.1) || (!better(&a.1, &b.1) && b.0 < a.0);
    if b_wins { b } else { a }
}

/// A member's part of `min` / `max`: the preferred of its `values` (its local block, whose
/// global indices are `local`), with its global index.
pub(crate) fn local_extreme<T: Reducible>(
    local: &LocalIndices,
    values: &[T],
    better: fn(&T, &T) -> bool,
) -> Option<(u64, T)> {
    (values.iter().enumerate())
        .map(|(k, &v)| (local.global(k) as u64, v))
        .reduce(|a, b| pick(better, a, b))
}

/// Two members' parts of `min` / `max` combined.
pub(crate) fn pick_partial<T: Reducible>(
    better: fn(&T, &T) -> bool,
    a: Option<(u64, T)>,
    b: Option<(u64, T)>,
) -> Option<(u64, T)> {
    match (a, b) {
        (Some(a), Some(b)) => Some(pick(better, a, b)),
        (a, b) => a.or(b),
    }
}

/// Element-wise atomics on any [`AtomicValue`] element (through [`AtomicDomain`]).
impl<T: AtomicValue> DistArray<T> {
    /// Atomically reads element `i`.
    #[inline]
    pub fn load(&self, i: usize) -> Result<Future<T>, ArrayError> {
        Ok(AtomicDomain::new().load(self.ptr(i)?))
    }

    /// Atomically writes `v` to element `i`.
    #[inline]
    pub fn store(&self, i: usize, v: T) -> Result<Future<()>, ArrayError> {
        Ok(AtomicDomain::new().store(self.ptr(i)?, v))
    }

    /// Atomically writes `v` to element `i`; returns the previous value.
    #[inline]
    pub fn exchange(&self, i: usize, v: T) -> Result<Future<T>, ArrayError> {
        Ok(AtomicDomain::new().exchange(self.ptr(i)?, v))
    }

    /// Writes `new` to element `i` if it equals `current`; returns the previous value.
    #[inline]
    pub fn compare_exchange(&self, i: usize, current: T, new: T) -> Result<Future<T>, ArrayError> {
        Ok(AtomicDomain::new().compare_exchange(self.ptr(i)?, current, new))
    }
}

/// The element-wise forms of [`AtomicDomain`]'s operations of one type.
macro_rules! element_atomics {
    ($t:ty: $($op:ident: $doc:literal),*) => {
        impl DistArray<$t> {
            $(
                #[doc = $doc]
                #[inline]
                pub fn $op(&self, i: usize, v: $t) -> Result<Future<$t>, ArrayError> {
                    Ok(AtomicDomain::<$t>::new().$op(self.ptr(i)?, v))
                }
            )*
        }
    };
}

element_atomics!(u64:
    fetch_add: "Atomically adds `v` (wrapping) to element `i`; returns the previous value.",
    fetch_sub: "Atomically subtracts `v` (wrapping) from element `i`; returns the previous value.",
    fetch_min: "Atomically stores the minimum of element `i` and `v`; returns the previous value.",
    fetch_max: "Atomically stores the maximum of element `i` and `v`; returns the previous value.",
    fetch_and: "Atomically ands `v` into element `i`; returns the previous value.",
    fetch_or: "Atomically ors `v` into element `i`; returns the previous value.",
    fetch_xor: "Atomically xors `v` into element `i`; returns the previous value."
);
element_atomics!(i64:
    fetch_add: "Atomically adds `v` (wrapping) to element `i`; returns the previous value.",
    fetch_sub: "Atomically subtracts `v` (wrapping) from element `i`; returns the previous value.",
    fetch_min: "Atomically stores the minimum of element `i` and `v`; returns the previous value.",
    fetch_max: "Atomically stores the maximum of element `i` and `v`; returns the previous value.",
    fetch_and: "Atomically ands `v` into element `i`; returns the previous value.",
    fetch_or: "Atomically ors `v` into element `i`; returns the previous value.",
    fetch_xor: "Atomically xors `v` into element `i`; returns the previous value."
);
element_atomics!(f64:
    fetch_add: "Atomically adds `v` to element `i` (a compare-exchange loop); returns the \
                previous value.",
    fetch_min: "Atomically stores the minimum of element `i` and `v`; returns the previous value.",
    fetch_max: "Atomically stores the maximum of element `i` and `v`; returns the previous value."
);
