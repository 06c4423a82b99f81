//! The test problem: beta = 1 + 0.25 sin(2 pi x) sin(2 pi y) sin(2 pi z) on faces and
//! f = -div beta grad u for u = sin^7 sin^7 sin^7, both as 4th-order cell/face averages.

use crate::level::{Level, VECTOR_BETA_I, VECTOR_BETA_J, VECTOR_BETA_K, VECTOR_F};
use std::f64::consts::PI;

/// Face-averaged beta at (x, y, z): the point value plus h^2/24 of the chosen second derivatives.
pub fn evaluate_beta(
    x: f64,
    y: f64,
    z: f64,
    h: f64,
    add_bxx: bool,
    add_byy: bool,
    add_bzz: bool,
) -> f64 {
    let b = 0.25;
    let a = 2.0 * PI;
    let mut beta = 1.0 + b * (a * x).sin() * (a * y).sin() * (a * z).sin();
    let bxx = -a * a * b * (a * x).sin() * (a * y).sin() * (a * z).sin();
    let byy = bxx;
    let bzz = bxx;
    if add_bxx {
        beta += (h * h / 24.0) * bxx;
    }
    if add_byy {
        beta += (h * h / 24.0) * byy;
    }
    if add_bzz {
        beta += (h * h / 24.0) * bzz;
    }
    beta
}

/// Cell-averaged right-hand side f = sin^7(2 pi x) sin^7(2 pi y) sin^7(2 pi z) at (x, y, z),
/// plus h^2/24 of the chosen second derivatives (the reference's `evaluateF`).
pub fn evaluate_f(
    x: f64,
    y: f64,
    z: f64,
    h: f64,
    add_fxx: bool,
    add_fyy: bool,
    add_fzz: bool,
) -> f64 {
    let a = 2.0 * PI;
    let p = 7.0;
    let (sx, sy, sz) = ((a * x).sin(), (a * y).sin(), (a * z).sin());
    let (cx, cy, cz) = ((a * x).cos(), (a * y).cos(), (a * z).cos());
    let (px, py, pz) = (sx.powf(p), sy.powf(p), sz.powf(p));
    let (qx, qy, qz) = (sx.powf(p - 2.0), sy.powf(p - 2.0), sz.powf(p - 2.0));
    let mut f = px * py * pz;
    let fxx = -a * a * p * px * py * pz + a * a * p * (p - 1.0) * qx * py * pz * (cx * cx);
    let fyy = -a * a * p * px * py * pz + a * a * p * (p - 1.0) * px * qy * pz * (cy * cy);
    let fzz = -a * a * p * px * py * pz + a * a * p * (p - 1.0) * px * py * qz * (cz * cz);
    if add_fxx {
        f += (h * h / 24.0) * fxx;
    }
    if add_fyy {
        f += (h * h / 24.0) * fyy;
    }
    if add_fzz {
        f += (h * h / 24.0) * fzz;
    }
    f
}

/// Sets the level's spacing and fills beta on faces (high faces included) and the right-hand side.
pub fn initialize_problem(level: &mut Level, h: f64) {
    level.h = h;
    let d = level.box_dim;
    for bx in level.boxes.iter_mut() {
        let low = bx.low;
        for k in 0..=d {
            for j in 0..=d {
                for i in 0..=d {
                    let n = bx.idx(i, j, k);
                    let x = h * ((i + low[0]) as f64 + 0.5);
                    let y = h * ((j + low[1]) as f64 + 0.5);
                    let z = h * ((k + low[2]) as f64 + 0.5);
                    bx.vectors[VECTOR_BETA_I][n] =
                        evaluate_beta(x - h * 0.5, y, z, h, false, true, true);
                    bx.vectors[VECTOR_BETA_J][n] =
                        evaluate_beta(x, y - h * 0.5, z, h, true, false, true);
                    bx.vectors[VECTOR_BETA_K][n] =
                        evaluate_beta(x, y, z - h * 0.5, h, true, true, false);
                    bx.vectors[VECTOR_F][n] = evaluate_f(x, y, z, h, true, true, true);
                }
            }
        }
    }
}
