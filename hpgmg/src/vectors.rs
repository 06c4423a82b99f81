//! Level-wide vector operations (the reference's BLAS1): element-wise updates over the
//! interior of every box, and reductions summed per tile, then tile by tile in list order.

use crate::comm::world_ranks;
use crate::level::Level;

/// Applies `out = f(a, b)` element-wise over the interior; any of the ids may coincide.
fn map2(level: &mut Level, c: usize, a: usize, b: usize, f: impl Fn(f64, f64) -> f64) {
    let d = level.box_dim;
    for bx in level.boxes.iter_mut() {
        let mut out = bx.take(c);
        for k in 0..d {
            for j in 0..d {
                let row = bx.idx(0, j, k);
                for n in row..row + d as usize {
                    let av = if a == c { out[n] } else { bx.vectors[a][n] };
                    let bv = if b == c { out[n] } else { bx.vectors[b][n] };
                    out[n] = f(av, bv);
                }
            }
        }
        bx.put(c, out);
    }
}

/// Sets vector `id` to zero everywhere, ghost zones included.
pub fn zero_vector(level: &mut Level, id: usize) {
    for bx in level.boxes.iter_mut() {
        bx.vectors[id].fill(0.0);
    }
}

/// `c = scale_a * a` over the interior.
pub fn scale_vector(level: &mut Level, c: usize, scale_a: f64, a: usize) {
    map2(level, c, a, a, |x, _| scale_a * x);
}

/// `c = scale_a * a + scale_b * b` over the interior.
pub fn add_vectors(level: &mut Level, c: usize, scale_a: f64, a: usize, scale_b: f64, b: usize) {
    map2(level, c, a, b, |x, y| scale_a * x + scale_b * y);
}

/// `c = scale * a * b` over the interior.
pub fn mul_vectors(level: &mut Level, c: usize, scale: f64, a: usize, b: usize) {
    map2(level, c, a, b, |x, y| scale * x * y);
}

/// `c = a + shift` over the interior.
pub fn shift_vector(level: &mut Level, c: usize, a: usize, shift: f64) {
    map2(level, c, a, a, |x, _| x + shift);
}

/// Sum over tiles of `f(a, b)`, each tile summed k, j, i, tiles added in the order of the
/// global box ids (then tile order): the same association on any number of ranks.
fn reduce_sum(level: &Level, a: usize, b: usize, f: impl Fn(f64, f64) -> f64) -> f64 {
    let tile_sum = |blk: &crate::level::Block| {
        let bx = &level.boxes[blk.box_id];
        let (va, vb) = (&bx.vectors[a], &bx.vectors[b]);
        let mut block_sum = 0.0;
        for k in blk.lo[2]..blk.lo[2] + blk.dim[2] {
            for j in blk.lo[1]..blk.lo[1] + blk.dim[1] {
                let row = bx.idx(blk.lo[0], j, k);
                for n in row..row + blk.dim[0] as usize {
                    block_sum += f(va[n], vb[n]);
                }
            }
        }
        block_sum
    };
    if world_ranks() == 1 {
        let mut level_sum = 0.0;
        for blk in &level.blocks {
            level_sum += tile_sum(blk);
        }
        return level_sum;
    }
    let mine: Vec<(u32, f64)> = level
        .blocks
        .iter()
        .map(|blk| (level.boxes[blk.box_id].global_id as u32, tile_sum(blk)))
        .collect();
    let mut all: Vec<(u32, f64)> = pgas::allgather(mine).wait().into_iter().flatten().collect();
    // Stable: the tiles of one box come from one rank, in tile order.
    all.sort_by_key(|&(id, _)| id);
    let mut level_sum = 0.0;
    for (_, t) in all {
        level_sum += t;
    }
    level_sum
}

/// Dot product of vectors `a` and `b` over the interior.
pub fn dot(level: &Level, a: usize, b: usize) -> f64 {
    reduce_sum(level, a, b, |x, y| x * y)
}

/// Mean of vector `a` over the interior.
pub fn mean(level: &Level, a: usize) -> f64 {
    let sum = reduce_sum(level, a, a, |x, _| x);
    let cells = level.dim as f64 * level.dim as f64 * level.dim as f64;
    sum / cells
}

/// Max norm of vector `a` over the interior.
pub fn norm(level: &Level, a: usize) -> f64 {
    let mut max_norm = 0.0;
    for blk in &level.blocks {
        let bx = &level.boxes[blk.box_id];
        let va = &bx.vectors[a];
        let mut block_norm = 0.0;
        for k in blk.lo[2]..blk.lo[2] + blk.dim[2] {
            for j in blk.lo[1]..blk.lo[1] + blk.dim[1] {
                let row = bx.idx(blk.lo[0], j, k);
                for &v in &va[row..row + blk.dim[0] as usize] {
                    let f = v.abs();
                    if f > block_norm {
                        block_norm = f;
                    }
                }
            }
        }
        if block_norm > max_norm {
            max_norm = block_norm;
        }
    }
    if world_ranks() > 1 {
        max_norm = pgas::reduce_all(max_norm, pgas::ops::max).wait();
    }
    max_norm
}

/// Sets the interior of `id` to 1.0 on cells of colour (icolor, jcolor, kcolor), else 0.0.
pub fn color_vector(
    level: &mut Level,
    id: usize,
    colors: i32,
    icolor: i32,
    jcolor: i32,
    kcolor: i32,
) {
    let d = level.box_dim;
    for bx in level.boxes.iter_mut() {
        let low = bx.low;
        let mut out = bx.take(id);
        for k in 0..d {
            let sk = if (k + low[2] + kcolor) % colors == 0 {
                1.0
            } else {
                0.0
            };
            for j in 0..d {
                let sj = if (j + low[1] + jcolor) % colors == 0 {
                    1.0
                } else {
                    0.0
                };
                for i in 0..d {
                    let si = if (i + low[0] + icolor) % colors == 0 {
                        1.0
                    } else {
                        0.0
                    };
                    out[bx.idx(i, j, k)] = si * sj * sk;
                }
            }
        }
        bx.put(id, out);
    }
}
