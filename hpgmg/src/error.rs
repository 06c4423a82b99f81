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
}
