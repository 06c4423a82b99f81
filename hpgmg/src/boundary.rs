//! Homogeneous Dirichlet boundary conditions for finite-volume data: ghost cells outside the
//! domain are filled by volumetric extrapolation (quartic `v4`, quadratic `v2`, linear `v1`),
//! and the face coefficients are extrapolated into the ghost zones once per level.

use crate::level::{
    Block, CORNERS, EDGES, FACES, GridBox, Level, VECTOR_BETA_I, VECTOR_BETA_J, VECTOR_BETA_K,
};

/// Geometry of one boundary block in signed offsets from the box's first interior cell.
struct Geo {
    base: isize,
    stride: [isize; 3],
}

impl Geo {
    fn of(bx: &GridBox) -> Geo {
        Geo {
            base: bx.idx(0, 0, 0) as isize,
            stride: [1, bx.js as isize, bx.ks as isize],
        }
    }
    #[inline(always)]
    fn at(&self, off: isize) -> usize {
        (self.base + off) as usize
    }
    #[inline(always)]
    fn off(&self, i: i32, j: i32, k: i32) -> isize {
        i as isize + j as isize * self.stride[1] + k as isize * self.stride[2]
    }
}

/// Components (-1, 0, 1) of the normal vector encoded in a subtype (13 + di + 3dj + 9dk).
fn components(subtype: usize) -> [i32; 3] {
    let n = subtype as i32;
    [n % 3 - 1, (n % 9) / 3 - 1, n / 9 - 1]
}

/// Zeroes the block's region of `x`.
fn zero_block(x: &mut [f64], geo: &Geo, blk: &Block) {
    for k in 0..blk.dim[2] {
        for j in 0..blk.dim[1] {
            for i in 0..blk.dim[0] {
                x[geo.at(geo.off(i + blk.lo[0], j + blk.lo[1], k + blk.lo[2]))] = 0.0;
            }
        }
    }
}

/// For a face block: the two tangential axes (in i, j, k order) and, for the normal axis,
/// the ghost cell adjacent to the box and the step pointing into the box.
fn face_frame(blk: &Block, box_dim: i32, geo: &Geo) -> ([usize; 2], isize, isize) {
    let c = components(blk.subtype);
    let t_axis = (0..3).find(|&a| c[a] != 0).expect("face normal");
    let tang = match t_axis {
        0 => [1, 2],
        1 => [0, 2],
        _ => [0, 1],
    };
    let (t, dt) = if c[t_axis] < 0 {
        (-1, geo.stride[t_axis])
    } else {
        (box_dim, -geo.stride[t_axis])
    };
    let t_off = t as isize * geo.stride[t_axis];
    ([tang[0], tang[1]], t_off, dt)
}

/// For an edge block: the axis along the edge, the fixed offset of the ghost cell next to
/// the box corner, and the steps into the box along the two normal axes (i, j, k order).
fn edge_frame(blk: &Block, box_dim: i32, geo: &Geo) -> (usize, isize, isize, isize) {
    let c = components(blk.subtype);
    let r_axis = (0..3).find(|&a| c[a] == 0).expect("edge axis");
    let normals = match r_axis {
        0 => [1, 2],
        1 => [0, 2],
        _ => [0, 1],
    };
    let mut fixed = 0isize;
    let mut steps = [0isize; 2];
    for (n, &a) in normals.iter().enumerate() {
        let (p, d) = if c[a] < 0 {
            (-1, geo.stride[a])
        } else {
            (box_dim, -geo.stride[a])
        };
        fixed += p as isize * geo.stride[a];
        steps[n] = d;
    }
    (r_axis, fixed, steps[0], steps[1])
}

/// For a corner block: the corner ghost cell and the steps into the box along i, j, k.
fn corner_frame(blk: &Block, box_dim: i32, geo: &Geo) -> (isize, [isize; 3]) {
    let c = components(blk.subtype);
    let mut off = 0isize;
    let mut d = [0isize; 3];
    for a in 0..3 {
        let (p, s) = if c[a] < 0 {
            (-1, geo.stride[a])
        } else {
            (box_dim, -geo.stride[a])
        };
        off += p as isize * geo.stride[a];
        d[a] = s;
    }
    (off, d)
}

/// Applies the boundary conditions of the fv4 operator (quartic, dropping order on small boxes).
pub fn apply_bcs(level: &mut Level, id: usize, shape: usize) {
    apply_bcs_v4(level, id, shape);
}

/// Volumetric linear extrapolation (a 1-point reflection with sign by region type).
pub fn apply_bcs_v1(level: &mut Level, id: usize, shape: usize) {
    let Level {
        bc_blocks, boxes, ..
    } = level;
    for blk in &bc_blocks[shape] {
        let scale = if FACES[blk.subtype] || CORNERS[blk.subtype] {
            -1.0
        } else {
            1.0
        };
        let bx = &mut boxes[blk.box_id];
        let geo = Geo::of(bx);
        let n = components(26 - blk.subtype);
        let stride = geo.off(n[0], n[1], n[2]);
        let x = &mut bx.vectors[id];
        for k in 0..blk.dim[2] {
            for j in 0..blk.dim[1] {
                for i in 0..blk.dim[0] {
                    let ijk = geo.off(i + blk.lo[0], j + blk.lo[1], k + blk.lo[2]);
                    x[geo.at(ijk)] = scale * x[geo.at(ijk + stride)];
                }
            }
        }
    }
}

/// Volumetric quadratic extrapolation (one ghost layer; deeper layers are zeroed).
pub fn apply_bcs_v2(level: &mut Level, id: usize, shape: usize) {
    if level.box_dim < 2 {
        apply_bcs_v1(level, id, shape);
        return;
    }
    let box_dim = level.box_dim;
    let ghosts = level.ghosts;
    let Level {
        bc_blocks, boxes, ..
    } = level;
    for blk in &bc_blocks[shape] {
        let bx = &mut boxes[blk.box_id];
        let geo = Geo::of(bx);
        let x = &mut bx.vectors[id];
        if ghosts > 1 {
            zero_block(x, &geo, blk);
        }
        let st = blk.subtype;
        if FACES[st] {
            let ([ra, sa], t_off, dt) = face_frame(blk, box_dim, &geo);
            for s in 0..blk.dim[sa] {
                for r in 0..blk.dim[ra] {
                    let ijk = (r + blk.lo[ra]) as isize * geo.stride[ra]
                        + (s + blk.lo[sa]) as isize * geo.stride[sa]
                        + t_off;
                    x[geo.at(ijk)] = -2.5 * x[geo.at(ijk + dt)] + 0.5 * x[geo.at(ijk + 2 * dt)];
                }
            }
        } else if EDGES[st] {
            let (ra, fixed, ds, dt) = edge_frame(blk, box_dim, &geo);
            for r in 0..blk.dim[ra] {
                let ijk = (r + blk.lo[ra]) as isize * geo.stride[ra] + fixed;
                x[geo.at(ijk)] = 6.25 * x[geo.at(ijk + ds + dt)]
                    - 1.25 * x[geo.at(ijk + 2 * ds + dt)]
                    - 1.25 * x[geo.at(ijk + ds + 2 * dt)]
                    + 0.25 * x[geo.at(ijk + 2 * ds + 2 * dt)];
            }
        } else if CORNERS[st] {
            let (ijk, [di, dj, dk]) = corner_frame(blk, box_dim, &geo);
            let v = |o: isize| x[geo.at(ijk + o)];
            let val = -15.625 * v(di + dj + dk)
                + 3.125 * v(2 * di + dj + dk)
                + 3.125 * v(di + 2 * dj + dk)
                + 3.125 * v(di + dj + 2 * dk)
                - 0.625 * v(2 * di + 2 * dj + dk)
                - 0.625 * v(di + 2 * dj + 2 * dk)
                - 0.625 * v(2 * di + dj + 2 * dk)
                + 0.125 * v(2 * di + 2 * dj + 2 * dk);
            x[geo.at(ijk)] = val;
        }
    }
}

const ONE_TWELFTH: f64 = 1.0 / 12.0;

/// Quartic value of the ghost cell next to the boundary from four interior values.
#[inline(always)]
fn near(a: f64, b: f64, c: f64, d: f64) -> f64 {
    ONE_TWELFTH * (-77.0 * a + 43.0 * b - 17.0 * c + 3.0 * d)
}

/// Quartic value of the second ghost cell from four interior values.
#[inline(always)]
fn far(a: f64, b: f64, c: f64, d: f64) -> f64 {
    ONE_TWELFTH * (-505.0 * a + 335.0 * b - 145.0 * c + 27.0 * d)
}

/// Volumetric quartic extrapolation into both ghost layers (quadratic on boxes below 4^3).
pub fn apply_bcs_v4(level: &mut Level, id: usize, shape: usize) {
    assert!(
        level.ghosts >= 2,
        "called quartic BC's with only 1 ghost zone"
    );
    if level.box_dim < 4 {
        apply_bcs_v2(level, id, shape);
        return;
    }
    let box_dim = level.box_dim;
    let ghosts = level.ghosts;
    let Level {
        bc_blocks, boxes, ..
    } = level;
    for blk in &bc_blocks[shape] {
        let bx = &mut boxes[blk.box_id];
        let geo = Geo::of(bx);
        let x = &mut bx.vectors[id];
        if ghosts > 2 {
            zero_block(x, &geo, blk);
        }
        let st = blk.subtype;
        if FACES[st] {
            let ([ra, sa], t_off, dt) = face_frame(blk, box_dim, &geo);
            let (sr, ss) = (geo.stride[ra], geo.stride[sa]);
            let first = geo.base + blk.lo[ra] as isize * sr + blk.lo[sa] as isize * ss + t_off;
            let (nr, ns) = (blk.dim[ra] as isize, blk.dim[sa] as isize);
            // Every index below is first + r sr + s ss + m dt with r < nr, s < ns and m in
            // -1..=4: affine, so in bounds if the eight extreme combinations are.
            let len = x.len() as isize;
            if nr > 0 && ns > 0 {
                for (r, s, m) in [(0, 0), (nr - 1, 0), (0, ns - 1), (nr - 1, ns - 1)]
                    .into_iter()
                    .flat_map(|(r, s)| [(r, s, -1), (r, s, 4)])
                {
                    let at = first + r * sr + s * ss + m * dt;
                    assert!((0..len).contains(&at), "boundary block outside the box");
                }
            }
            let p = x.as_mut_ptr();
            for s in 0..ns {
                let row = first + s * ss;
                for r in 0..nr {
                    let ijk = row + r * sr;
                    // SAFETY: in bounds by the check above; no reference into `x` is live.
                    unsafe {
                        let v = |m: isize| *p.offset(ijk + m * dt);
                        let (x1, x2, x3, x4) = (v(1), v(2), v(3), v(4));
                        *p.offset(ijk) = near(x1, x2, x3, x4);
                        *p.offset(ijk - dt) = far(x1, x2, x3, x4);
                    }
                }
            }
        } else if EDGES[st] {
            let (ra, fixed, ds, dt) = edge_frame(blk, box_dim, &geo);
            for r in 0..blk.dim[ra] {
                let ijk = (r + blk.lo[ra]) as isize * geo.stride[ra] + fixed;
                let v = |a: isize, b: isize| x[geo.at(ijk + a * ds + b * dt)];
                let mut n = [0.0; 4];
                let mut f = [0.0; 4];
                for b in 0..4 {
                    let m = b as isize + 1;
                    let (x1, x2, x3, x4) = (v(1, m), v(2, m), v(3, m), v(4, m));
                    n[b] = near(x1, x2, x3, x4);
                    f[b] = far(x1, x2, x3, x4);
                }
                x[geo.at(ijk)] = near(n[0], n[1], n[2], n[3]);
                x[geo.at(ijk - dt)] = far(n[0], n[1], n[2], n[3]);
                x[geo.at(ijk - ds)] = near(f[0], f[1], f[2], f[3]);
                x[geo.at(ijk - ds - dt)] = far(f[0], f[1], f[2], f[3]);
            }
        } else if CORNERS[st] {
            let (ijk, [di, dj, dk]) = corner_frame(blk, box_dim, &geo);
            let v = |a: isize, b: isize, c: isize| x[geo.at(ijk + a * di + b * dj + c * dk)];
            // n[b][c] / f[b][c]: extrapolated along i at (j, k) = (b, c) cells in.
            let mut n = [[0.0; 4]; 4];
            let mut f = [[0.0; 4]; 4];
            for b in 0..4 {
                for c in 0..4 {
                    let (mb, mc) = (b as isize + 1, c as isize + 1);
                    let (x1, x2, x3, x4) = (v(1, mb, mc), v(2, mb, mc), v(3, mb, mc), v(4, mb, mc));
                    n[b][c] = near(x1, x2, x3, x4);
                    f[b][c] = far(x1, x2, x3, x4);
                }
            }
            let along_j = |m: &[[f64; 4]; 4], g: fn(f64, f64, f64, f64) -> f64| {
                [0, 1, 2, 3].map(|c| g(m[0][c], m[1][c], m[2][c], m[3][c]))
            };
            let nn = along_j(&n, near);
            let nf = along_j(&n, far);
            let fnn = along_j(&f, near);
            let ff = along_j(&f, far);
            let along_k =
                |m: &[f64; 4], g: fn(f64, f64, f64, f64) -> f64| g(m[0], m[1], m[2], m[3]);
            let vals = [
                (0, along_k(&nn, near)),
                (-dk, along_k(&nn, far)),
                (-dj, along_k(&nf, near)),
                (-dj - dk, along_k(&nf, far)),
                (-di, along_k(&fnn, near)),
                (-di - dk, along_k(&fnn, far)),
                (-di - dj, along_k(&ff, near)),
                (-di - dj - dk, along_k(&ff, far)),
            ];
            for (o, val) in vals {
                x[geo.at(ijk + o)] = val;
            }
        }
    }
}

/// Extrapolates the face coefficients into the ghost zones outside the domain (needed by the
/// operator's mixed-derivative terms), in the reference's block and loop order.
pub fn extrapolate_betas(level: &mut Level) {
    let box_dim = level.box_dim;
    let Level {
        bc_blocks, boxes, ..
    } = level;
    for blk in &bc_blocks[0] {
        let mut subtype: i32 = 13;
        let weight = [1, 3, 9];
        for a in 0..3 {
            if blk.lo[a] < 0 {
                subtype -= weight[a];
            }
            if blk.lo[a] >= box_dim {
                subtype += weight[a];
            }
        }
        let bx = &mut boxes[blk.box_id];
        let geo = Geo::of(bx);
        let n = components((26 - subtype) as usize);
        let strides = [
            geo.off(0, n[1], n[2]),
            geo.off(n[0], 0, n[2]),
            geo.off(n[0], n[1], 0),
        ];
        let skip = [[14, 12], [16, 10], [22, 4]];
        let ids = [VECTOR_BETA_I, VECTOR_BETA_J, VECTOR_BETA_K];
        for k in 0..blk.dim[2] {
            for j in 0..blk.dim[1] {
                for i in 0..blk.dim[0] {
                    let ijk = geo.off(i + blk.lo[0], j + blk.lo[1], k + blk.lo[2]);
                    for c in 0..3 {
                        if subtype == skip[c][0] || subtype == skip[c][1] {
                            continue;
                        }
                        let s = strides[c];
                        let b = &mut bx.vectors[ids[c]];
                        let v = |m: isize| b[geo.at(ijk + m * s)];
                        let val = if box_dim >= 5 {
                            5.0 * v(1) - 10.0 * v(2) + 10.0 * v(3) - 5.0 * v(4) + v(5)
                        } else if box_dim >= 4 {
                            4.0 * v(1) - 6.0 * v(2) + 4.0 * v(3) - v(4)
                        } else if box_dim >= 2 {
                            2.0 * v(1) - v(2)
                        } else {
                            continue;
                        };
                        b[geo.at(ijk)] = val;
                    }
                }
            }
        }
    }
}
