//! The plans of the messages between a level and the next coarser one, kept by the finer
//! level: built by `restriction.rs`, run by restriction and interpolation.

use crate::comm::Plan;

/// A fine box restricted into a coarse box on another rank (global box ids).
#[derive(Debug, Clone, Copy)]
pub struct RestrictItem {
    /// The fine box (read).
    pub fine: usize,
    /// The coarse box (written).
    pub coarse: usize,
    /// Where the fine box lands in the coarse box (coarse cells, box-local).
    pub off: [i32; 3],
}

/// The inter-level messages between a level and the next coarser one.
#[derive(Debug, Clone)]
pub struct Transfer {
    /// Restriction per `RestrictionType` (cell, faces i, j, k).
    pub restrict: [Plan<RestrictItem>; 4],
    /// Interpolation: coarse regions (with 2 ghost layers) sent to fine boxes' owners.
    pub interp: Plan<RestrictItem>,
}
