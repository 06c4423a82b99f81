//! Errors of the benchmark's setup (argument validation and problem sizing).

use thiserror::Error;

/// Why a run cannot start; the messages are the reference's.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HpgmgError {
    /// `log2_box_dim` above 9.
    #[error("log2_box_dim must be less than 10")]
    BoxDimTooLarge,
    /// `log2_box_dim` below 4.
    #[error("log2_box_dim must be at least 4")]
    BoxDimTooSmall,
    /// `target_boxes_per_rank` below 1.
    #[error("target_boxes_per_rank must be at least 1")]
    TooFewBoxes,
    /// No cubic box count fits the target with a coarse grid of at most 11 cells per side.
    #[error("failed to find an acceptable problem size")]
    NoProblemSize,
    /// Fewer boxes than ranks: some rank would hold no box of the finest level.
    #[error("{ranks} ranks cannot hold a layout of {boxes} boxes (at least one box per rank)")]
    TooManyRanks {
        /// Ranks asked for.
        ranks: usize,
        /// Boxes of the layout.
        boxes: usize,
    },
    /// The problem does not fit in memory.
    #[error(
        "the problem needs about {need_mib} MiB, but only {have_mib} MiB of memory are available"
    )]
    OutOfMemory {
        /// Estimated need.
        need_mib: u64,
        /// Available.
        have_mib: u64,
    },
}
