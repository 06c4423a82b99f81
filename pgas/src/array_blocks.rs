//! What [`DistArray`](crate::DistArray) and [`ViewArray`](crate::ViewArray) share: the team,
//! the layout, the length and every member's local block, allocated and freed collectively,
//! and the checks that turn a global index or range into places. The arrays differ only in
//! where a block lives (segment or viewable memory) and so in how its elements move.

use std::ops::{Add, Range};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::array_layout::{Layout, LocalIndices};
use crate::collectives::{allgather_on, barrier_on};
use crate::error::{ArrayError, PgasError};
use crate::runtime;
use crate::team::Team;

/// A pointer to a member's local block: where it is allocated, and how that is undone.
pub(crate) trait Block:
    Copy + Serialize + DeserializeOwned + Add<usize, Output = Self> + 'static
{
    /// The array's name, for the message of a failed free.
    const ARRAY: &'static str;
    /// The pointer an allocation that failed exchanges.
    fn null() -> Self;
    /// Whether this is [`Block::null`].
    fn is_null(&self) -> bool;
    /// A new block of `count` zeroed elements of this rank's memory, or `None`.
    fn allocate(count: usize) -> Option<Self>;
    /// Frees a block [`Block::allocate`] gave.
    fn free(self) -> Result<(), PgasError>;
    /// The error of a member (`rank`, world) that could not allocate `bytes`.
    fn out_of_memory(rank: usize, bytes: usize) -> ArrayError;
}

/// Every member's local block of one array, by team rank, and how indices map onto them.
///
/// Creation and drop are collective over the team. Drop waits for every member (a barrier)
/// before freeing this member's block, so an access another member completed before its drop
/// never lands in freed memory.
pub(crate) struct Blocks<P: Block> {
    pub(crate) team: Team,
    pub(crate) layout: Layout,
    pub(crate) len: usize,
    blocks: Vec<P>,
}

impl<P: Block> Blocks<P> {
    /// Allocates every member's block of `len` elements of `elem_bytes` bytes over `team`
    /// (collective). If any member cannot, every member returns the error naming it and
    /// nothing stays allocated.
    pub(crate) fn new_on(
        team: &Team,
        len: usize,
        layout: Layout,
        elem_bytes: usize,
    ) -> Result<Self, ArrayError> {
        let (me, n) = (team.rank_me(), team.rank_n());
        // At least one element: every member has a distinct, non-null block, and a null
        // pointer in the exchange below means a failed allocation.
        let count = layout.local_len(me, len, n).max(1);
        let mine = P::allocate(count).unwrap_or_else(P::null);
        let blocks = allgather_on(team, mine).wait();
        if let Some(failed) = blocks.iter().position(P::is_null) {
            if !mine.is_null() {
                mine.free()
                    .expect("this rank's block was allocated just above");
            }
            let bytes = layout.local_len(failed, len, n).max(1) * elem_bytes;
            return Err(P::out_of_memory(team.to_world(failed), bytes));
        }
        Ok(Blocks {
            team: team.clone(),
            layout,
            len,
            blocks,
        })
    }

    /// The team rank holding element `i` and its index in that member's block.
    pub(crate) fn place(&self, i: usize) -> Result<(usize, usize), ArrayError> {
        if i >= self.len {
            return Err(ArrayError::IndexOutOfRange {
                index: i,
                len: self.len,
            });
        }
        Ok(self.layout.place(i, self.len, self.team.rank_n()))
    }

    /// Refuses a range that is reversed or reaches past the end.
    pub(crate) fn check_range(&self, range: &Range<usize>) -> Result<(), ArrayError> {
        if range.start > range.end || range.end > self.len {
            return Err(ArrayError::RangeOutOfBounds {
                start: range.start,
                end: range.end,
                len: self.len,
            });
        }
        Ok(())
    }

    /// The world rank that holds element `i`.
    pub(crate) fn owner_of(&self, i: usize) -> Result<usize, ArrayError> {
        let (rank, _) = self.place(i)?;
        Ok(self.team.to_world(rank))
    }

    /// The pointer to element `i`.
    pub(crate) fn ptr(&self, i: usize) -> Result<P, ArrayError> {
        let (rank, local) = self.place(i)?;
        Ok(self.blocks[rank] + local)
    }

    /// Team rank `rank`'s block.
    pub(crate) fn of(&self, rank: usize) -> P {
        self.blocks[rank]
    }

    /// This member's block.
    pub(crate) fn mine(&self) -> P {
        self.blocks[self.team.rank_me()]
    }

    /// The global indices this member owns, in increasing (local) order.
    pub(crate) fn local_range(&self) -> LocalIndices {
        let n = self.team.rank_n();
        self.layout.local_indices(self.team.rank_me(), self.len, n)
    }
}

impl<P: Block> Drop for Blocks<P> {
    fn drop(&mut self) {
        if !runtime::in_launch() || std::thread::panicking() {
            // Past the job, or unwinding from a failed rank: no collective can complete, and
            // the memory goes with the job.
            return;
        }
        barrier_on(&self.team);
        self.mine()
            .free()
            .unwrap_or_else(|e| panic!("freeing this rank's block of a {}: {e}", P::ARRAY));
    }
}
