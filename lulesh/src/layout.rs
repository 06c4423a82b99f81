//! Where a rank's block sits in the cube of ranks (`InitMeshDecomp` and the
//! neighbour flags of `SetupCommBuffers`). A single rank has no neighbours;
//! a multi-rank run uses the same flags to decide which of the 26 halo
//! exchanges exist.

use crate::error::LuleshError;

/// Position of one rank's `nx`^3 block inside the `tp`^3 cube of blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockLayout {
    /// Total ranks (`tp`^3).
    pub num_ranks: i32,
    /// This rank.
    pub rank: i32,
    /// Blocks along each edge of the global cube.
    pub tp: i32,
    /// Block coordinate along x (xi).
    pub col_loc: i32,
    /// Block coordinate along y (eta).
    pub row_loc: i32,
    /// Block coordinate along z (zeta).
    pub plane_loc: i32,
    /// Elements along x in this block.
    pub size_x: usize,
    /// Elements along y in this block.
    pub size_y: usize,
    /// Elements along z in this block.
    pub size_z: usize,
    /// A neighbour exists on the -y side.
    pub row_min: bool,
    /// A neighbour exists on the +y side.
    pub row_max: bool,
    /// A neighbour exists on the -x side.
    pub col_min: bool,
    /// A neighbour exists on the +x side.
    pub col_max: bool,
    /// A neighbour exists on the -z side.
    pub plane_min: bool,
    /// A neighbour exists on the +z side.
    pub plane_max: bool,
    /// Communication buffer stride for a face, in reals (cache-line aligned).
    pub max_plane_size: usize,
    /// Communication buffer stride for an edge, in reals (cache-line aligned).
    pub max_edge_size: usize,
}

/// Reals per 128-byte coherence unit, used to pad communication buffers.
pub const CACHE_COHERENCE_PAD_REAL: usize = 128 / std::mem::size_of::<f64>();

fn cache_align_real(n: usize) -> usize {
    (n + (CACHE_COHERENCE_PAD_REAL - 1)) & !(CACHE_COHERENCE_PAD_REAL - 1)
}

impl BlockLayout {
    /// Places `rank` of `num_ranks` (which must be a cube) and sizes its
    /// block as `nx`^3 elements, like `InitMeshDecomp` plus `SetupCommBuffers`.
    pub fn decompose(num_ranks: i32, rank: i32, nx: usize) -> Result<Self, LuleshError> {
        let test_procs = ((num_ranks as f64).cbrt() + 0.5) as i32;
        if test_procs * test_procs * test_procs != num_ranks || num_ranks < 1 {
            return Err(LuleshError::NotACube(num_ranks));
        }
        let (dx, dy, dz) = (test_procs, test_procs, test_procs);
        let remainder = dx * dy * dz % num_ranks;
        let my_dom = if rank < remainder {
            rank * (1 + (dx * dy * dz / num_ranks))
        } else {
            remainder * (1 + (dx * dy * dz / num_ranks))
                + (rank - remainder) * (dx * dy * dz / num_ranks)
        };
        let col_loc = my_dom % dx;
        let row_loc = (my_dom / dx) % dy;
        let plane_loc = my_dom / (dx * dy);
        let tp = test_procs;
        let max_edge = nx + 1;
        Ok(BlockLayout {
            num_ranks,
            rank,
            tp,
            col_loc,
            row_loc,
            plane_loc,
            size_x: nx,
            size_y: nx,
            size_z: nx,
            row_min: row_loc != 0,
            row_max: row_loc != tp - 1,
            col_min: col_loc != 0,
            col_max: col_loc != tp - 1,
            plane_min: plane_loc != 0,
            plane_max: plane_loc != tp - 1,
            max_plane_size: cache_align_real(max_edge * max_edge),
            max_edge_size: cache_align_real(max_edge),
        })
    }

    /// The layout of a single-rank run.
    pub fn single(nx: usize) -> Self {
        Self::decompose(1, 0, nx).expect("one rank is a cube")
    }

    /// Elements including the ghost layers that receive the neighbours'
    /// monotonic-Q gradients (the reference's `allElem`).
    pub fn all_elem(&self) -> usize {
        self.size_x * self.size_y * self.size_z
            + 2 * self.size_x * self.size_y
            + 2 * self.size_x * self.size_z
            + 2 * self.size_y * self.size_z
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cube_decomposition() {
        let l = BlockLayout::single(10);
        assert_eq!((l.col_loc, l.row_loc, l.plane_loc, l.tp), (0, 0, 0, 1));
        assert!(!l.col_min && !l.col_max && !l.plane_max);
        let l = BlockLayout::decompose(8, 5, 4).unwrap();
        assert_eq!((l.col_loc, l.row_loc, l.plane_loc), (1, 0, 1));
        assert!(l.col_min && !l.col_max && !l.row_min && l.row_max && l.plane_min);
        assert_eq!(
            BlockLayout::decompose(4, 0, 4),
            Err(LuleshError::NotACube(4))
        );
    }
}
