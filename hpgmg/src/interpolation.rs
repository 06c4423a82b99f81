//! Prolongation from a coarse level to the next finer one: volumetric quadratic (`v2`, inside
//! V-cycles) and volumetric quartic (`v4`, for the F-cycle's new initial guesses), both as
//! tensor products evaluated 8 fine cells at a time, `fine = prescale * fine + P coarse`.

use crate::boundary::{apply_bcs_v2, apply_bcs_v4};
use crate::level::{Level, STENCIL_SHAPE_BOX};
use crate::restriction::{coarse_regions, covering_box};

/// Walks every 2x2x2 group of fine cells with the coarse array and the index of its parent.
fn for_each_group(
    fine: &mut Level,
    id_f: usize,
    prescale: f64,
    coarse: &Level,
    id_c: usize,
    eval: impl Fn(&[f64], usize, isize, isize) -> [f64; 8],
) {
    let d = fine.box_dim;
    let received = coarse_regions(fine, coarse, id_c);
    let s = (d / 2 + 4) as usize;
    for fb in 0..fine.boxes.len() {
        let (cb, off) = covering_box(coarse, fine, fb);
        // The parent of fine cell (i, j, k) is at o + (i/2, j/2, k/2) in `read`.
        let (read, o, dj, dk): (&[f64], [usize; 3], usize, usize) = match cb {
            Some(cb) => {
                let cbx = &coarse.boxes[cb];
                let g = cbx.ghosts;
                (
                    &cbx.vectors[id_c],
                    off.map(|x| (x + g) as usize),
                    cbx.js,
                    cbx.ks,
                )
            }
            None => (
                received[fb].as_deref().expect("coarse region received"),
                [2, 2, 2],
                s,
                s * s,
            ),
        };
        let fbx = &mut fine.boxes[fb];
        let (wjs, wks) = (fbx.js, fbx.ks);
        let mut write = fbx.take(id_f);
        for k in (0..d).step_by(2) {
            for j in (0..d).step_by(2) {
                for i in (0..d).step_by(2) {
                    let r = (o[0] + i as usize / 2)
                        + (o[1] + j as usize / 2) * dj
                        + (o[2] + k as usize / 2) * dk;
                    let f = eval(read, r, dj as isize, dk as isize);
                    let w = fbx.idx(i, j, k);
                    let targets = [
                        w,
                        w + 1,
                        w + wjs,
                        w + 1 + wjs,
                        w + wks,
                        w + 1 + wks,
                        w + wjs + wks,
                        w + 1 + wjs + wks,
                    ];
                    for (t, v) in targets.into_iter().zip(f) {
                        write[t] = prescale * write[t] + v;
                    }
                }
            }
        }
        fbx.put(id_f, write);
    }
}

/// Piecewise quadratic (volume-averaged) interpolation: `fine[id_f] = prescale*fine + P coarse[id_c]`.
pub fn interpolation_v2(
    fine: &mut Level,
    id_f: usize,
    prescale: f64,
    coarse: &mut Level,
    id_c: usize,
) {
    coarse.exchange_boundary(id_c, STENCIL_SHAPE_BOX);
    apply_bcs_v2(coarse, id_c, STENCIL_SHAPE_BOX);
    let c1 = 1.0 / 8.0;
    for_each_group(fine, id_f, prescale, coarse, id_c, |read, r, dj, dk| {
        let c = |a: isize, b: isize, e: isize| read[(r as isize + a + b * dj + e * dk) as usize];
        // f0/f1[e][b]: interpolated in i (fine i half 0 / 1) at coarse (j, k) offsets (b-1, e-1).
        let mut f0 = [[0.0; 3]; 3];
        let mut f1 = [[0.0; 3]; 3];
        for e in 0..3 {
            for b in 0..3 {
                let (jb, ke) = (b as isize - 1, e as isize - 1);
                let (m, z, p) = (c(-1, jb, ke), c(0, jb, ke), c(1, jb, ke));
                f0[e][b] = z + c1 * (m - p);
                f1[e][b] = z - c1 * (m - p);
            }
        }
        // then in j, giving [fine i][fine j] at coarse k index e.
        let ij = |fi: &[[f64; 3]; 3], e: usize, plus: bool| {
            if plus {
                fi[e][1] + c1 * (fi[e][0] - fi[e][2])
            } else {
                fi[e][1] - c1 * (fi[e][0] - fi[e][2])
            }
        };
        let g = |e: usize| {
            [
                ij(&f0, e, true),
                ij(&f1, e, true),
                ij(&f0, e, false),
                ij(&f1, e, false),
            ]
        };
        let (g0, g1, g2) = (g(0), g(1), g(2));
        let k0 = |n: usize| g1[n] + c1 * (g0[n] - g2[n]);
        let k1 = |n: usize| g1[n] - c1 * (g0[n] - g2[n]);
        [k0(0), k0(1), k0(2), k0(3), k1(0), k1(1), k1(2), k1(3)]
    });
}

/// Piecewise quartic (volume-averaged) interpolation: `fine[id_f] = prescale*fine + P coarse[id_c]`.
pub fn interpolation_v4(
    fine: &mut Level,
    id_f: usize,
    prescale: f64,
    coarse: &mut Level,
    id_c: usize,
) {
    coarse.exchange_boundary(id_c, STENCIL_SHAPE_BOX);
    apply_bcs_v4(coarse, id_c, STENCIL_SHAPE_BOX);
    let c2 = -3.0 / 128.0;
    let c1 = 22.0 / 128.0;
    for_each_group(fine, id_f, prescale, coarse, id_c, |read, r, dj, dk| {
        let c = |a: isize, b: isize, e: isize| read[(r as isize + a + b * dj + e * dk) as usize];
        let lo = |m2: f64, m1: f64, z: f64, p1: f64, p2: f64| z + c1 * (m1 - p1) + c2 * (m2 - p2);
        let hi = |m2: f64, m1: f64, z: f64, p1: f64, p2: f64| z - c1 * (m1 - p1) - c2 * (m2 - p2);
        // In i: f0/f1[e][b] at coarse (j, k) offsets (b-2, e-2).
        let mut f0 = [[0.0; 5]; 5];
        let mut f1 = [[0.0; 5]; 5];
        for e in 0..5 {
            for b in 0..5 {
                let (jb, ke) = (b as isize - 2, e as isize - 2);
                let v = [
                    c(-2, jb, ke),
                    c(-1, jb, ke),
                    c(0, jb, ke),
                    c(1, jb, ke),
                    c(2, jb, ke),
                ];
                f0[e][b] = lo(v[0], v[1], v[2], v[3], v[4]);
                f1[e][b] = hi(v[0], v[1], v[2], v[3], v[4]);
            }
        }
        // In j: [f00, f10, f01, f11] at coarse k offset e.
        let g = |e: usize| {
            let a = &f0[e];
            let b = &f1[e];
            [
                lo(a[0], a[1], a[2], a[3], a[4]),
                lo(b[0], b[1], b[2], b[3], b[4]),
                hi(a[0], a[1], a[2], a[3], a[4]),
                hi(b[0], b[1], b[2], b[3], b[4]),
            ]
        };
        let gs = [g(0), g(1), g(2), g(3), g(4)];
        let k0 = |n: usize| lo(gs[0][n], gs[1][n], gs[2][n], gs[3][n], gs[4][n]);
        let k1 = |n: usize| hi(gs[0][n], gs[1][n], gs[2][n], gs[3][n], gs[4][n]);
        [k0(0), k0(1), k0(2), k0(3), k1(0), k1(1), k1(2), k1(3)]
    });
}
