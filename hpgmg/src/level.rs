//! One multigrid level: its decomposition into cubical boxes (Z-Morton over ranks), the
//! per-box storage with ghost zones, and the precomputed block lists (reduction tiles,
//! boundary-condition regions, ghost-zone copies) that the operators walk.
//!
//! Ghost exchange copies between this rank's boxes directly; copies to and from boxes of
//! other ranks travel as messages of a [`Plan`] (see [`crate::comm`]).

use crate::comm::{Plan, Route, world_ranks};
use crate::transfer::Transfer;

/// Scratch vector (out-of-place GSRB ping-pong, residuals).
pub const VECTOR_TEMP: usize = 0;
/// Numerical solution.
pub const VECTOR_U: usize = 1;
/// Right-hand side.
pub const VECTOR_F: usize = 2;
/// Error vector (used as a stand-in temporary by the D^{-1} rebuild).
pub const VECTOR_E: usize = 3;
/// Cell-centred residual.
pub const VECTOR_R: usize = 4;
/// Inverse of the operator's diagonal.
pub const VECTOR_DINV: usize = 5;
/// Face-centred coefficient on the low i face of each cell.
pub const VECTOR_BETA_I: usize = 6;
/// Face-centred coefficient on the low j face of each cell.
pub const VECTOR_BETA_J: usize = 7;
/// Face-centred coefficient on the low k face of each cell.
pub const VECTOR_BETA_K: usize = 8;
/// Number of vectors every level holds; bottom-solver vectors start here.
pub const VECTORS_RESERVED: usize = 9;

/// Faces, edges and corners.
pub const STENCIL_SHAPE_BOX: usize = 0;
/// Faces only.
pub const STENCIL_SHAPE_STAR: usize = 1;
/// Faces and edges, no corners (the fv4 operator's shape).
pub const STENCIL_SHAPE_NO_CORNERS: usize = 2;
/// Number of stencil shapes.
pub const STENCIL_MAX_SHAPES: usize = 3;

/// Reduction tiles (the reference's BLOCKCOPY_TILE_{I,J,K}).
const TILE_I: i32 = 10000;
const TILE_J: i32 = 8;
const TILE_K: i32 = 8;

pub(crate) const FACES: [bool; 27] = mask([4, 10, 12, 14, 16, 22]);
pub(crate) const EDGES: [bool; 27] = mask([1, 3, 5, 7, 9, 11, 15, 17, 19, 21, 23, 25]);
pub(crate) const CORNERS: [bool; 27] = mask([0, 2, 6, 8, 18, 20, 24, 26]);

const fn mask<const N: usize>(dirs: [usize; N]) -> [bool; 27] {
    let mut m = [false; 27];
    let mut n = 0;
    while n < N {
        m[dirs[n]] = true;
        n += 1;
    }
    m
}

/// One cubical box of cells with `ghosts` ghost layers, holding all of a level's vectors.
#[derive(Debug, Clone)]
pub struct GridBox {
    /// Lexicographic id of the box within its level (i fastest).
    pub global_id: usize,
    /// Global coordinates of the first non-ghost cell.
    pub low: [i32; 3],
    /// Cells per side (without ghosts).
    pub dim: i32,
    /// Ghost-zone depth.
    pub ghosts: i32,
    /// Stride between j-neighbours.
    pub js: usize,
    /// Stride between k-neighbours.
    pub ks: usize,
    /// `vectors[id][index]`, ghost zones included.
    pub vectors: Vec<Vec<f64>>,
}

impl GridBox {
    /// Array index of cell (i, j, k) in box-local coordinates (ghosts are negative / >= dim).
    #[inline(always)]
    pub fn idx(&self, i: i32, j: i32, k: i32) -> usize {
        let g = self.ghosts;
        ((i + g) as usize) + ((j + g) as usize) * self.js + ((k + g) as usize) * self.ks
    }

    /// Moves vector `id` out of the box (put it back with [`GridBox::put`]).
    #[inline]
    pub fn take(&mut self, id: usize) -> Vec<f64> {
        std::mem::take(&mut self.vectors[id])
    }

    /// Returns a vector moved out by [`GridBox::take`].
    #[inline]
    pub fn put(&mut self, id: usize, v: Vec<f64>) {
        self.vectors[id] = v;
    }
}

/// A rectangular region of one box: a reduction tile or a boundary-condition region.
#[derive(Debug, Clone, Copy)]
pub struct Block {
    /// Index into the level's box list.
    pub box_id: usize,
    /// Box-local coordinates of the region's first cell.
    pub lo: [i32; 3],
    /// Extent of the region.
    pub dim: [i32; 3],
    /// For boundary conditions: the domain normal (0..27, 13 = none).
    pub subtype: usize,
}

/// A ghost-zone copy: a region of one box's interior into another box's ghost zone.
#[derive(Debug, Clone, Copy)]
pub struct GhostCopy {
    /// Box read from.
    pub send_box: usize,
    /// Box written to.
    pub recv_box: usize,
    /// First cell read (sender-local).
    pub send_lo: [i32; 3],
    /// First cell written (receiver-local).
    pub recv_lo: [i32; 3],
    /// Extent of the copy.
    pub dim: [i32; 3],
}

/// A ghost-zone copy between boxes on different ranks (global box ids).
#[derive(Debug, Clone, Copy)]
pub struct RemoteCopy {
    /// Box read from (global id).
    pub send_box: usize,
    /// Box written to (global id).
    pub recv_box: usize,
    /// First cell read (sender-local).
    pub send_lo: [i32; 3],
    /// First cell written (receiver-local).
    pub recv_lo: [i32; 3],
    /// Extent of the copy.
    pub dim: [i32; 3],
}

impl RemoteCopy {
    /// Reals the copy carries.
    pub fn len(&self) -> usize {
        (self.dim[0] * self.dim[1] * self.dim[2]) as usize
    }

    /// True for an empty region.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One level of the multigrid hierarchy, as seen by one rank.
#[derive(Debug, Clone)]
pub struct Level {
    /// Grid spacing.
    pub h: f64,
    /// Cells per box side.
    pub box_dim: i32,
    /// Ghost-zone depth.
    pub ghosts: i32,
    /// Boxes per side of the domain.
    pub boxes_in: i32,
    /// Cells per side of the domain.
    pub dim: i32,
    /// This rank.
    pub my_rank: usize,
    /// Ranks sharing this level.
    pub num_ranks: usize,
    /// Owner of each box (lexicographic box id); `usize::MAX` for none.
    pub rank_of_box: Vec<usize>,
    /// The boxes this rank owns, in lexicographic order.
    pub boxes: Vec<GridBox>,
    /// Reduction tiles over the owned boxes (the order of dot products and means).
    pub blocks: Vec<Block>,
    /// Boundary-condition regions per stencil shape.
    pub bc_blocks: [Vec<Block>; STENCIL_MAX_SHAPES],
    /// Ghost-zone copies per stencil shape.
    pub exchange: [Vec<GhostCopy>; STENCIL_MAX_SHAPES],
    /// Ghost-zone copies to and from other ranks per stencil shape.
    pub remote: [Plan<RemoteCopy>; STENCIL_MAX_SHAPES],
    /// Index in `boxes` of each global box id (`usize::MAX` if not on this rank).
    pub local_of: Vec<usize>,
    /// Messages to and from the next coarser level (multi-rank runs).
    pub transfer: Option<Transfer>,
    /// Bottom-solver iterations performed on this level.
    pub krylov_iterations: usize,
    /// V-cycles started from this level.
    pub vcycles_from_this_level: usize,
}

/// Assigns ranks to boxes along a Z-Morton curve over the valid domain; returns the new offset.
#[allow(clippy::too_many_arguments)]
pub fn decompose_zmort(
    rank_of_box: &mut [usize],
    boxes_in: [i32; 3],
    lo: [i32; 3],
    dim: [i32; 3],
    ranks: usize,
    sfc_offset: usize,
    sfc_max_length: usize,
) -> usize {
    if dim.iter().any(|&d| d < 1) || lo.iter().any(|&l| l < 0) {
        return sfc_offset;
    }
    if dim == [1, 1, 1] {
        if lo[0] < boxes_in[0] && lo[1] < boxes_in[1] && lo[2] < boxes_in[2] {
            let b = (lo[0] + lo[1] * boxes_in[0] + lo[2] * boxes_in[0] * boxes_in[1]) as usize;
            rank_of_box[b] = ((ranks as u64 * sfc_offset as u64) / sfc_max_length as u64) as usize;
            return sfc_offset + 1;
        }
        return sfc_offset;
    }
    let mid = [lo[0] + dim[0] / 2, lo[1] + dim[1] / 2, lo[2] + dim[2] / 2];
    let half = [dim[0] / 2, dim[1] / 2, dim[2] / 2];
    let rest = [dim[0] - half[0], dim[1] - half[1], dim[2] - half[2]];
    let mut off = sfc_offset;
    for octant in 0..8 {
        let pick = |d: usize| (octant >> d) & 1 == 1;
        let l = [0, 1, 2].map(|d| if pick(d) { mid[d] } else { lo[d] });
        let n = [0, 1, 2].map(|d| if pick(d) { rest[d] } else { half[d] });
        off = decompose_zmort(rank_of_box, boxes_in, l, n, ranks, off, sfc_max_length);
    }
    off
}

/// Appends `dim` split into tiles of `tile` (k, then j, then i outermost-first) to `list`.
fn append_tiles(
    list: &mut Vec<Block>,
    box_id: usize,
    lo: [i32; 3],
    dim: [i32; 3],
    tile: [i32; 3],
    subtype: usize,
) {
    let mut kk = 0;
    while kk < dim[2] {
        let mut jj = 0;
        while jj < dim[1] {
            let mut ii = 0;
            while ii < dim[0] {
                list.push(Block {
                    box_id,
                    lo: [lo[0] + ii, lo[1] + jj, lo[2] + kk],
                    dim: [
                        (dim[0] - ii).min(tile[0]),
                        (dim[1] - jj).min(tile[1]),
                        (dim[2] - kk).min(tile[2]),
                    ],
                    subtype,
                });
                ii += tile[0];
            }
            jj += tile[1];
        }
        kk += tile[2];
    }
}

impl Level {
    /// The execution counts of this level's ghost and transfer plans, in a fixed order.
    pub fn plan_executions(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.remote.iter().map(Plan::executions).collect();
        if let Some(t) = &self.transfer {
            v.extend(t.restrict.iter().map(Plan::executions));
            v.push(t.interp.executions());
        }
        v
    }

    /// Puts back counts from [`Level::plan_executions`], taking this level's from `counts`.
    pub fn set_plan_executions(&self, counts: &mut impl Iterator<Item = u64>) {
        let mut next = || counts.next().expect("one count per plan");
        for p in &self.remote {
            p.set_executions(next());
        }
        if let Some(t) = &self.transfer {
            for p in &t.restrict {
                p.set_executions(next());
            }
            t.interp.set_executions(next());
        }
    }

    /// The arrival flags of this level's ghost and transfer plans (those that have some).
    pub fn plan_flags(&self) -> Vec<(pgas::GlobalPtr<u64>, usize)> {
        let mut v: Vec<_> = self.remote.iter().filter_map(Plan::flags).collect();
        if let Some(t) = &self.transfer {
            v.extend(t.restrict.iter().filter_map(Plan::flags));
            v.extend(t.interp.flags());
        }
        v
    }

    /// Creates a Dirichlet level of `boxes_in`^3 boxes of `box_dim`^3 cells, distributed over
    /// `num_ranks` ranks, keeping the boxes of `my_rank`, each with `num_vectors` zeroed vectors.
    pub fn new(
        boxes_in: i32,
        box_dim: i32,
        ghosts: i32,
        num_vectors: usize,
        my_rank: usize,
        num_ranks: usize,
    ) -> Level {
        let total = (boxes_in * boxes_in * boxes_in) as usize;
        let mut rank_of_box = vec![usize::MAX; total];
        decompose_zmort(
            &mut rank_of_box,
            [boxes_in; 3],
            [0; 3],
            [boxes_in; 3],
            num_ranks,
            0,
            total,
        );
        let js = (box_dim + 2 * ghosts) as usize;
        let ks = js * js;
        let volume = ks * js;
        let mut boxes = Vec::new();
        for b in 0..total {
            if rank_of_box[b] != my_rank {
                continue;
            }
            let bi = b as i32 % boxes_in;
            let bj = (b as i32 / boxes_in) % boxes_in;
            let bk = b as i32 / (boxes_in * boxes_in);
            boxes.push(GridBox {
                global_id: b,
                low: [bi * box_dim, bj * box_dim, bk * box_dim],
                dim: box_dim,
                ghosts,
                js,
                ks,
                vectors: vec![vec![0.0; volume]; num_vectors],
            });
        }
        let mut level = Level {
            h: 0.0,
            box_dim,
            ghosts,
            boxes_in,
            dim: boxes_in * box_dim,
            my_rank,
            num_ranks,
            rank_of_box,
            boxes,
            blocks: Vec::new(),
            bc_blocks: Default::default(),
            exchange: Default::default(),
            remote: [Plan::empty(), Plan::empty(), Plan::empty()],
            local_of: vec![usize::MAX; total],
            transfer: None,
            krylov_iterations: 0,
            vcycles_from_this_level: 0,
        };
        for (n, bx) in level.boxes.iter().enumerate() {
            level.local_of[bx.global_id] = n;
        }
        for b in 0..level.boxes.len() {
            append_tiles(
                &mut level.blocks,
                b,
                [0; 3],
                [box_dim; 3],
                [TILE_I, TILE_J, TILE_K],
                0,
            );
        }
        for shape in 0..STENCIL_MAX_SHAPES {
            level.exchange[shape] = level.build_exchange(shape);
            level.bc_blocks[shape] = level.build_boundary_conditions(shape);
        }
        if world_ranks() > 1 {
            for shape in 0..STENCIL_MAX_SHAPES {
                level.remote[shape] = Plan::build(level.build_remote_exchange(shape));
            }
        }
        level
    }

    /// Number of vectors each box holds.
    pub fn num_vectors(&self) -> usize {
        self.boxes.first().map_or(0, |b| b.vectors.len())
    }

    /// Box coordinates (in boxes) of owned box `b`.
    fn box_coords(&self, b: usize) -> [i32; 3] {
        self.boxes[b].low.map(|l| l / self.box_dim)
    }

    /// Lexicographic id of the box at box coordinates `c`, if inside the domain.
    fn box_id_at(&self, c: [i32; 3]) -> Option<usize> {
        if c.iter().all(|&x| x >= 0 && x < self.boxes_in) {
            Some((c[0] + c[1] * self.boxes_in + c[2] * self.boxes_in * self.boxes_in) as usize)
        } else {
            None
        }
    }

    /// Regions of ghost zones outside the domain, tagged with the domain normal, in the
    /// reference's order (box, then dk, dj, di, then 16x16 tiles in j and k).
    fn build_boundary_conditions(&self, shape: usize) -> Vec<Block> {
        let mut list = Vec::new();
        let g = self.ghosts;
        let d = self.box_dim;
        for b in 0..self.boxes.len() {
            let me = self.box_coords(b);
            for dk in -1..=1 {
                for dj in -1..=1 {
                    for di in -1..=1 {
                        let dir = (13 + di + 3 * dj + 9 * dk) as usize;
                        let delta = [di, dj, dk];
                        let mut outside = false;
                        let mut normal: i32 = 13;
                        let weight = [1, 3, 9];
                        for a in 0..3 {
                            let n = me[a] + delta[a];
                            if n < 0 {
                                outside = true;
                                normal -= weight[a];
                            }
                            if n >= self.boxes_in {
                                outside = true;
                                normal += weight[a];
                            }
                        }
                        let (lo, dim): (Vec<i32>, Vec<i32>) = delta
                            .iter()
                            .map(|&dd| match dd {
                                -1 => (-g, g),
                                0 => (0, d),
                                _ => (d, g),
                            })
                            .unzip();
                        match shape {
                            STENCIL_SHAPE_STAR if EDGES[dir] || CORNERS[dir] => outside = false,
                            STENCIL_SHAPE_NO_CORNERS if CORNERS[dir] => outside = false,
                            _ => {}
                        }
                        if outside {
                            let tile = [TILE_I.max(g), 16.max(g), 16.max(g)];
                            append_tiles(
                                &mut list,
                                b,
                                [lo[0], lo[1], lo[2]],
                                [dim[0], dim[1], dim[2]],
                                tile,
                                normal as usize,
                            );
                        }
                    }
                }
            }
        }
        list
    }

    /// Copies of neighbouring boxes' interiors into ghost zones for `shape`.
    fn build_exchange(&self, shape: usize) -> Vec<GhostCopy> {
        let mut list = Vec::new();
        let g = self.ghosts;
        let d = self.box_dim;
        for send in 0..self.boxes.len() {
            let me = self.box_coords(send);
            for dk in -1..=1 {
                for dj in -1..=1 {
                    for di in -1..=1 {
                        let dir = (13 + di + 3 * dj + 9 * dk) as usize;
                        let communicate = match shape {
                            STENCIL_SHAPE_STAR => FACES[dir],
                            STENCIL_SHAPE_NO_CORNERS => FACES[dir] || EDGES[dir],
                            _ => FACES[dir] || EDGES[dir] || CORNERS[dir],
                        };
                        if !communicate {
                            continue;
                        }
                        let Some(nid) = self.box_id_at([me[0] + di, me[1] + dj, me[2] + dk]) else {
                            continue;
                        };
                        if self.rank_of_box[nid] != self.my_rank {
                            // Remote neighbours: a distributed version sends this region.
                            continue;
                        }
                        let recv = self
                            .boxes
                            .iter()
                            .position(|bx| bx.global_id == nid)
                            .expect("local box");
                        let mut c = GhostCopy {
                            send_box: send,
                            recv_box: recv,
                            send_lo: [0; 3],
                            recv_lo: [0; 3],
                            dim: [0; 3],
                        };
                        for (a, dd) in [di, dj, dk].into_iter().enumerate() {
                            let (s, n, r) = match dd {
                                -1 => (0, g, d),
                                0 => (0, d, 0),
                                _ => (d - g, g, -g),
                            };
                            c.send_lo[a] = s;
                            c.dim[a] = n;
                            c.recv_lo[a] = r;
                        }
                        list.push(c);
                    }
                }
            }
        }
        list
    }

    /// The global list of ghost copies between boxes of different ranks for `shape`, in
    /// (sending box, direction) order: the same on every rank.
    fn build_remote_exchange(&self, shape: usize) -> Vec<(Route, RemoteCopy)> {
        let mut list = Vec::new();
        let g = self.ghosts;
        let d = self.box_dim;
        let n = self.boxes_in;
        for send in 0..self.rank_of_box.len() {
            let me = [
                send as i32 % n,
                (send as i32 / n) % n,
                send as i32 / (n * n),
            ];
            for dk in -1..=1 {
                for dj in -1..=1 {
                    for di in -1..=1 {
                        let dir = (13 + di + 3 * dj + 9 * dk) as usize;
                        let communicate = match shape {
                            STENCIL_SHAPE_STAR => FACES[dir],
                            STENCIL_SHAPE_NO_CORNERS => FACES[dir] || EDGES[dir],
                            _ => FACES[dir] || EDGES[dir] || CORNERS[dir],
                        };
                        if !communicate {
                            continue;
                        }
                        let Some(nid) = self.box_id_at([me[0] + di, me[1] + dj, me[2] + dk]) else {
                            continue;
                        };
                        let (src, dst) = (self.rank_of_box[send], self.rank_of_box[nid]);
                        if src == dst {
                            continue;
                        }
                        let mut c = RemoteCopy {
                            send_box: send,
                            recv_box: nid,
                            send_lo: [0; 3],
                            recv_lo: [0; 3],
                            dim: [0; 3],
                        };
                        for (a, dd) in [di, dj, dk].into_iter().enumerate() {
                            let (s, n, r) = match dd {
                                -1 => (0, g, d),
                                0 => (0, d, 0),
                                _ => (d - g, g, -g),
                            };
                            c.send_lo[a] = s;
                            c.dim[a] = n;
                            c.recv_lo[a] = r;
                        }
                        list.push((
                            Route {
                                src,
                                dst,
                                len: c.len(),
                            },
                            c,
                        ));
                    }
                }
            }
        }
        list
    }

    /// Fills the ghost zones of vector `id` that lie inside the domain from neighbouring boxes.
    pub fn exchange_boundary(&mut self, id: usize, shape: usize) {
        let plan = &self.remote[shape];
        let slot = if plan.is_idle() {
            None
        } else {
            let (boxes, local_of) = (&self.boxes, &self.local_of);
            Some(plan.send(|c: &RemoteCopy, buf: &mut Vec<f64>| {
                let bx = &boxes[local_of[c.send_box]];
                let v = &bx.vectors[id];
                for k in 0..c.dim[2] {
                    for j in 0..c.dim[1] {
                        let s = bx.idx(c.send_lo[0], c.send_lo[1] + j, c.send_lo[2] + k);
                        buf.extend_from_slice(&v[s..s + c.dim[0] as usize]);
                    }
                }
            }))
        };
        self.exchange_local(id, shape);
        if let Some(slot) = slot {
            let plan = &self.remote[shape];
            let (boxes, local_of) = (&mut self.boxes, &self.local_of);
            plan.receive(slot, RemoteCopy::len, |c, data| {
                let bx = &mut boxes[local_of[c.recv_box]];
                let (js, ks, g) = (bx.js, bx.ks, bx.ghosts);
                let v = &mut bx.vectors[id];
                let w = c.dim[0] as usize;
                let mut at = 0;
                for k in 0..c.dim[2] {
                    for j in 0..c.dim[1] {
                        let r = (c.recv_lo[0] + g) as usize
                            + (c.recv_lo[1] + j + g) as usize * js
                            + (c.recv_lo[2] + k + g) as usize * ks;
                        v[r..r + w].copy_from_slice(&data[at..at + w]);
                        at += w;
                    }
                }
            });
        }
    }

    /// The ghost copies between boxes of this rank.
    fn exchange_local(&mut self, id: usize, shape: usize) {
        for n in 0..self.exchange[shape].len() {
            let c = self.exchange[shape][n];
            let src = self.boxes[c.send_box].take(id);
            let mut dst = self.boxes[c.recv_box].take(id);
            let bx = &self.boxes[c.recv_box];
            for k in 0..c.dim[2] {
                for j in 0..c.dim[1] {
                    for i in 0..c.dim[0] {
                        let s = bx.idx(c.send_lo[0] + i, c.send_lo[1] + j, c.send_lo[2] + k);
                        let r = bx.idx(c.recv_lo[0] + i, c.recv_lo[1] + j, c.recv_lo[2] + k);
                        dst[r] = src[s];
                    }
                }
            }
            self.boxes[c.recv_box].put(id, dst);
            self.boxes[c.send_box].put(id, src);
        }
    }
}
