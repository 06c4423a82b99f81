//! The pieces of a vector put or get as one MPI datatype, so that the transfer through the
//! RMA window is one `MPI_Put` / `MPI_Get` with its target described, not one call per piece.
//!
//! Pieces of one length at a constant positive step become an `hvector`, anything else an
//! `hindexed` of every piece; both start at the lowest piece, so every displacement is
//! non-negative and the target displacement is that piece's offset. A put whose pieces are not
//! in increasing, non-overlapping order is not described ([`TargetPieces::for_put`] returns
//! `None`): MPI leaves overlapping writes of one put undefined, where the active-message path
//! writes the pieces in order, the later winning, so such a put keeps that path.
//!
//! A datatype made, used and freed per put costs less than one `MPI_Put` per piece as soon as
//! there are more than a few pieces (docs/benchmarks.md, `put_vector`).

use std::ffi::c_int;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::calls::{check, mpi_len, uint8};

/// A committed MPI datatype describing pieces of a segment, freed on drop.
pub(super) struct TargetPieces {
    ty: ffi::MPI_Datatype,
    /// The offset the datatype's displacements start from (the lowest piece's).
    pub(super) base: usize,
    /// Bytes of all pieces together (the contiguous origin buffer's length).
    pub(super) bytes: c_int,
}

impl TargetPieces {
    /// The datatype of a put's `pieces` (non-empty, each checked against the segment), or
    /// `None` if they overlap or go backwards (module doc).
    pub(super) fn for_put(pieces: &[(usize, usize)]) -> Result<Option<TargetPieces>, BridgeError> {
        let ordered = pieces
            .windows(2)
            .all(|w| w[0].0.checked_add(w[0].1).is_some_and(|end| end <= w[1].0));
        if !ordered {
            return Ok(None);
        }
        Self::describe(pieces).map(Some)
    }

    /// The datatype of a get's `pieces` (non-empty, each checked against the segment): any
    /// order and overlap, reading twice is harmless.
    pub(super) fn for_get(pieces: &[(usize, usize)]) -> Result<TargetPieces, BridgeError> {
        Self::describe(pieces)
    }

    fn describe(pieces: &[(usize, usize)]) -> Result<TargetPieces, BridgeError> {
        let total: usize = pieces.iter().map(|&(_, len)| len).sum();
        let bytes = mpi_len(total)?;
        let count = mpi_len(pieces.len())?;
        // SAFETY: reading a link-time constant of rsmpi's C shim.
        let mut ty = unsafe { ffi::RSMPI_DATATYPE_NULL };
        let (first, len) = pieces[0];
        let step = pieces
            .get(1)
            .map_or(0, |&(second, _)| second.wrapping_sub(first));
        let regular = pieces.len() > 1
            && step > 0
            && step <= isize::MAX as usize
            && pieces
                .windows(2)
                .all(|w| w[1].1 == len && w[1].0 == w[0].0 + step);
        let base;
        if regular {
            base = first;
            // SAFETY: plain values in, the new type out into `ty`.
            check(
                unsafe {
                    ffi::MPI_Type_create_hvector(
                        count,
                        mpi_len(len)?,
                        step as ffi::MPI_Aint,
                        uint8(),
                        &mut ty,
                    )
                },
                "MPI_Type_create_hvector",
            )?;
        } else {
            base = pieces.iter().map(|&(offset, _)| offset).min().unwrap_or(0);
            let mut lens = Vec::with_capacity(pieces.len());
            let mut displacements = Vec::with_capacity(pieces.len());
            for &(offset, len) in pieces {
                lens.push(mpi_len(len)?);
                displacements.push((offset - base) as ffi::MPI_Aint);
            }
            // SAFETY: both arrays hold `count` entries and live across the call, which copies
            // them into the new type.
            check(
                unsafe {
                    ffi::MPI_Type_create_hindexed(
                        count,
                        lens.as_ptr(),
                        displacements.as_ptr(),
                        uint8(),
                        &mut ty,
                    )
                },
                "MPI_Type_create_hindexed",
            )?;
        }
        // From here on `ty` is freed by drop, also when the commit fails.
        let mut described = TargetPieces { ty, base, bytes };
        // SAFETY: the type was just created and is committed once.
        check(
            unsafe { ffi::MPI_Type_commit(&mut described.ty) },
            "MPI_Type_commit",
        )?;
        Ok(described)
    }

    /// The datatype, for one `MPI_Put` / `MPI_Get` of count 1.
    pub(super) fn datatype(&self) -> ffi::MPI_Datatype {
        self.ty
    }
}

impl Drop for TargetPieces {
    fn drop(&mut self) {
        // SAFETY: `ty` is a type this value created and nothing else frees; an operation
        // that used it may still be pending, which MPI allows (the type lives until then).
        let _ = unsafe { ffi::MPI_Type_free(&mut self.ty) };
    }
}
