//! The fourth-order finite-volume variable-coefficient operator (25-point stencil without
//! corners): apply, residual, the out-of-place GSRB smoother, and the black-box D^{-1} rebuild.
//! Expression order mirrors the reference exactly (bit-exactness).

use crate::boundary::{apply_bcs, extrapolate_betas};
use crate::kernels::{NUM_SMOOTHS, Stencil, apply_box, gsrb_box, residual_box};
use crate::level::{
    GridBox, Level, STENCIL_SHAPE_BOX, STENCIL_SHAPE_NO_CORNERS, VECTOR_BETA_I, VECTOR_BETA_J,
    VECTOR_BETA_K, VECTOR_DINV, VECTOR_TEMP,
};
use crate::restriction::{RestrictionType, restriction};
use crate::vectors::{color_vector, zero_vector};

/// Radius of the stencil (ghost zones needed).
pub const STENCIL_RADIUS: i32 = 2;

const TWELFTH: f64 = 1.0 / 12.0;

/// Loads `s[i]`; every caller stays within a box's ghost-padded volume (checked per box).
#[inline(always)]
fn ld(s: &[f64], i: usize) -> f64 {
    debug_assert!(i < s.len());
    // SAFETY: the stencil reaches at most 2 cells out of the interior and every box has
    // 2 ghost layers, so all indices are below the box volume; `check_box` asserts the lengths.
    unsafe { *s.get_unchecked(i) }
}

/// The slices one stencil evaluation reads.
struct Coefs<'a> {
    bi: &'a [f64],
    bj: &'a [f64],
    bk: &'a [f64],
    js: usize,
    ks: usize,
    /// `-b * h2inv`, as the reference evaluates `-b*h2inv*(...)` left to right.
    scale: f64,
}

impl<'a> Coefs<'a> {
    fn new(bx: &'a GridBox, b: f64, h2inv: f64) -> Coefs<'a> {
        Coefs {
            bi: &bx.vectors[VECTOR_BETA_I],
            bj: &bx.vectors[VECTOR_BETA_J],
            bk: &bx.vectors[VECTOR_BETA_K],
            js: bx.js,
            ks: bx.ks,
            scale: -b * h2inv,
        }
    }

    /// A x at array index `ijk` (Poisson, a = 0).
    #[inline(always)]
    fn apply(&self, x: &[f64], ijk: usize) -> f64 {
        let (js, ks) = (self.js, self.ks);
        let (bi, bj, bk) = (self.bi, self.bj, self.bk);
        let xc = ld(x, ijk);
        let xv = |o: usize| ld(x, o);
        let faces = ld(bi, ijk) * (15.0 * (xv(ijk - 1) - xc) - (xv(ijk - 2) - xv(ijk + 1)))
            + ld(bi, ijk + 1) * (15.0 * (xv(ijk + 1) - xc) - (xv(ijk + 2) - xv(ijk - 1)))
            + ld(bj, ijk) * (15.0 * (xv(ijk - js) - xc) - (xv(ijk - 2 * js) - xv(ijk + js)))
            + ld(bj, ijk + js) * (15.0 * (xv(ijk + js) - xc) - (xv(ijk + 2 * js) - xv(ijk - js)))
            + ld(bk, ijk) * (15.0 * (xv(ijk - ks) - xc) - (xv(ijk - 2 * ks) - xv(ijk + ks)))
            + ld(bk, ijk + ks) * (15.0 * (xv(ijk + ks) - xc) - (xv(ijk + 2 * ks) - xv(ijk - ks)));
        let edges = (ld(bi, ijk + js) - ld(bi, ijk - js))
            * (xv(ijk - 1 + js) - xv(ijk + js) - xv(ijk - 1 - js) + xv(ijk - js))
            + (ld(bi, ijk + ks) - ld(bi, ijk - ks))
                * (xv(ijk - 1 + ks) - xv(ijk + ks) - xv(ijk - 1 - ks) + xv(ijk - ks))
            + (ld(bj, ijk + 1) - ld(bj, ijk - 1))
                * (xv(ijk - js + 1) - xv(ijk + 1) - xv(ijk - js - 1) + xv(ijk - 1))
            + (ld(bj, ijk + ks) - ld(bj, ijk - ks))
                * (xv(ijk - js + ks) - xv(ijk + ks) - xv(ijk - js - ks) + xv(ijk - ks))
            + (ld(bk, ijk + 1) - ld(bk, ijk - 1))
                * (xv(ijk - ks + 1) - xv(ijk + 1) - xv(ijk - ks - 1) + xv(ijk - 1))
            + (ld(bk, ijk + js) - ld(bk, ijk - js))
                * (xv(ijk - ks + js) - xv(ijk + js) - xv(ijk - ks - js) + xv(ijk - js))
            + (ld(bi, ijk + 1 + js) - ld(bi, ijk + 1 - js))
                * (xv(ijk + 1 + js) - xv(ijk + js) - xv(ijk + 1 - js) + xv(ijk - js))
            + (ld(bi, ijk + 1 + ks) - ld(bi, ijk + 1 - ks))
                * (xv(ijk + 1 + ks) - xv(ijk + ks) - xv(ijk + 1 - ks) + xv(ijk - ks))
            + (ld(bj, ijk + js + 1) - ld(bj, ijk + js - 1))
                * (xv(ijk + js + 1) - xv(ijk + 1) - xv(ijk + js - 1) + xv(ijk - 1))
            + (ld(bj, ijk + js + ks) - ld(bj, ijk + js - ks))
                * (xv(ijk + js + ks) - xv(ijk + ks) - xv(ijk + js - ks) + xv(ijk - ks))
            + (ld(bk, ijk + ks + 1) - ld(bk, ijk + ks - 1))
                * (xv(ijk + ks + 1) - xv(ijk + 1) - xv(ijk + ks - 1) + xv(ijk - 1))
            + (ld(bk, ijk + ks + js) - ld(bk, ijk + ks - js))
                * (xv(ijk + ks + js) - xv(ijk + js) - xv(ijk + ks - js) + xv(ijk - js));
        self.scale * (TWELFTH * faces + 0.25 * TWELFTH * edges)
    }
}

/// Asserts that every vector of the box spans the full ghost-padded volume.
fn check_box(bx: &GridBox) {
    let volume = bx.ks * (bx.dim + 2 * bx.ghosts) as usize;
    assert!(bx.ghosts >= STENCIL_RADIUS);
    assert!(bx.vectors.iter().all(|v| v.len() == volume || v.is_empty()));
}

/// The vectorized kernels' view of a box.
fn stencil(bx: &GridBox, b: f64, h2inv: f64) -> Stencil<'_> {
    check_box(bx);
    Stencil {
        bi: &bx.vectors[VECTOR_BETA_I],
        bj: &bx.vectors[VECTOR_BETA_J],
        bk: &bx.vectors[VECTOR_BETA_K],
        js: bx.js,
        ks: bx.ks,
        scale: -b * h2inv,
        dim: bx.dim as usize,
        base: bx.idx(0, 0, 0),
    }
}

/// `Ax = A x` over the interior (after filling x's ghost zones).
pub fn apply_op(level: &mut Level, ax_id: usize, x_id: usize, b: f64) {
    level.exchange_boundary(x_id, STENCIL_SHAPE_NO_CORNERS);
    apply_bcs(level, x_id, STENCIL_SHAPE_NO_CORNERS);
    let h2inv = 1.0 / (level.h * level.h);
    for bx in level.boxes.iter_mut() {
        let mut out = bx.take(ax_id);
        apply_box(&stencil(bx, b, h2inv), &bx.vectors[x_id], &mut out);
        bx.put(ax_id, out);
    }
}

/// `res = rhs - A x` over the interior (after filling x's ghost zones).
pub fn residual(level: &mut Level, res_id: usize, x_id: usize, rhs_id: usize, b: f64) {
    level.exchange_boundary(x_id, STENCIL_SHAPE_NO_CORNERS);
    apply_bcs(level, x_id, STENCIL_SHAPE_NO_CORNERS);
    let h2inv = 1.0 / (level.h * level.h);
    for bx in level.boxes.iter_mut() {
        let mut out = bx.take(res_id);
        let st = stencil(bx, b, h2inv);
        residual_box(&st, &bx.vectors[x_id], &bx.vectors[rhs_id], &mut out);
        bx.put(res_id, out);
    }
}

/// Out-of-place Gauss-Seidel red-black: `NUM_SMOOTHS` red+black sweeps ping-ponging between
/// x and VECTOR_TEMP (each sweep copies the other colour).
pub fn smooth(level: &mut Level, x_id: usize, rhs_id: usize, b: f64) {
    let h2inv = 1.0 / (level.h * level.h);
    for s in 0..2 * NUM_SMOOTHS {
        let (from, to) = if s & 1 == 0 {
            (x_id, VECTOR_TEMP)
        } else {
            (VECTOR_TEMP, x_id)
        };
        level.exchange_boundary(from, STENCIL_SHAPE_NO_CORNERS);
        apply_bcs(level, from, STENCIL_SHAPE_NO_CORNERS);
        for bx in level.boxes.iter_mut() {
            let color000 = ((bx.low[0] ^ bx.low[1] ^ bx.low[2] ^ s as i32) & 1) as usize;
            let mut out = bx.take(to);
            let st = stencil(bx, b, h2inv);
            let v = &bx.vectors;
            gsrb_box(
                &st,
                color000,
                &v[from],
                &v[rhs_id],
                &v[VECTOR_DINV],
                &mut out,
            );
            bx.put(to, out);
        }
    }
}

/// Computes D^{-1} exactly by probing the operator with up to 4x4x4 colourings (boundary
/// effects included), after restricting beta from `from` (if any) and extrapolating it.
pub fn rebuild_operator(level: &mut Level, from: Option<&Level>, b: f64) {
    if let Some(fine) = from {
        restriction(
            level,
            VECTOR_BETA_I,
            fine,
            VECTOR_BETA_I,
            RestrictionType::FaceI,
        );
        restriction(
            level,
            VECTOR_BETA_J,
            fine,
            VECTOR_BETA_J,
            RestrictionType::FaceJ,
        );
        restriction(
            level,
            VECTOR_BETA_K,
            fine,
            VECTOR_BETA_K,
            RestrictionType::FaceK,
        );
    }
    extrapolate_betas(level);
    for id in [VECTOR_BETA_I, VECTOR_BETA_J, VECTOR_BETA_K] {
        level.exchange_boundary(id, STENCIL_SHAPE_BOX);
    }
    let colors = 4.min(level.dim);
    let d = level.box_dim;
    let h2inv = 1.0 / (level.h * level.h);
    zero_vector(level, VECTOR_DINV);
    for kcolor in 0..colors {
        for jcolor in 0..colors {
            for icolor in 0..colors {
                color_vector(level, VECTOR_TEMP, colors, icolor, jcolor, kcolor);
                level.exchange_boundary(VECTOR_TEMP, STENCIL_SHAPE_NO_CORNERS);
                apply_bcs(level, VECTOR_TEMP, STENCIL_SHAPE_NO_CORNERS);
                for bx in level.boxes.iter_mut() {
                    let mut aii = bx.take(VECTOR_DINV);
                    check_box(bx);
                    let c = Coefs::new(bx, b, h2inv);
                    let x = &bx.vectors[VECTOR_TEMP];
                    for k in 0..d {
                        for j in 0..d {
                            let row = bx.idx(0, j, k);
                            for ijk in row..row + d as usize {
                                aii[ijk] += x[ijk] * c.apply(x, ijk);
                            }
                        }
                    }
                    bx.put(VECTOR_DINV, aii);
                }
            }
        }
    }
    for bx in level.boxes.iter_mut() {
        for k in 0..d {
            for j in 0..d {
                let row = bx.idx(0, j, k);
                for v in &mut bx.vectors[VECTOR_DINV][row..row + d as usize] {
                    if *v == 0.0 {
                        *v = b * h2inv; // the reference's fallback (a = 0)
                    }
                    *v = 1.0 / *v;
                }
            }
        }
    }
    level.exchange_boundary(VECTOR_DINV, STENCIL_SHAPE_BOX);
}
