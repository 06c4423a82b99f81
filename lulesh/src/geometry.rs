//! Per-element geometric kernels of the hexahedral element (volume, shape
//! function derivatives, face normals, volume derivatives, characteristic
//! length, velocity gradient). Every expression keeps the reference's
//! operation order so results are bit-identical.

/// Eight corner values of one element.
pub type Corners = [f64; 8];

/// Gathers the eight corner values of a node field.
#[inline(always)]
pub fn gather(nodes: &[u32; 8], field: &[f64]) -> Corners {
    let mut out = [0.0; 8];
    for (o, &n) in out.iter_mut().zip(nodes) {
        *o = field[n as usize];
    }
    out
}

/// Jacobian volume of the element from its corner coordinates (`CalcElemVolume`).
#[inline]
pub fn calc_elem_volume(x: &Corners, y: &Corners, z: &Corners) -> f64 {
    let [x0, x1, x2, x3, x4, x5, x6, x7] = *x;
    let [y0, y1, y2, y3, y4, y5, y6, y7] = *y;
    let [z0, z1, z2, z3, z4, z5, z6, z7] = *z;
    let twelveth = 1.0 / 12.0;

    let dx61 = x6 - x1;
    let dy61 = y6 - y1;
    let dz61 = z6 - z1;
    let dx70 = x7 - x0;
    let dy70 = y7 - y0;
    let dz70 = z7 - z0;
    let dx63 = x6 - x3;
    let dy63 = y6 - y3;
    let dz63 = z6 - z3;
    let dx20 = x2 - x0;
    let dy20 = y2 - y0;
    let dz20 = z2 - z0;
    let dx50 = x5 - x0;
    let dy50 = y5 - y0;
    let dz50 = z5 - z0;
    let dx64 = x6 - x4;
    let dy64 = y6 - y4;
    let dz64 = z6 - z4;
    let dx31 = x3 - x1;
    let dy31 = y3 - y1;
    let dz31 = z3 - z1;
    let dx72 = x7 - x2;
    let dy72 = y7 - y2;
    let dz72 = z7 - z2;
    let dx43 = x4 - x3;
    let dy43 = y4 - y3;
    let dz43 = z4 - z3;
    let dx57 = x5 - x7;
    let dy57 = y5 - y7;
    let dz57 = z5 - z7;
    let dx14 = x1 - x4;
    let dy14 = y1 - y4;
    let dz14 = z1 - z4;
    let dx25 = x2 - x5;
    let dy25 = y2 - y5;
    let dz25 = z2 - z5;

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn triple(
        x1: f64,
        y1: f64,
        z1: f64,
        x2: f64,
        y2: f64,
        z2: f64,
        x3: f64,
        y3: f64,
        z3: f64,
    ) -> f64 {
        x1 * (y2 * z3 - z2 * y3) + x2 * (z1 * y3 - y1 * z3) + x3 * (y1 * z2 - z1 * y2)
    }

    let volume = triple(
        dx31 + dx72,
        dx63,
        dx20,
        dy31 + dy72,
        dy63,
        dy20,
        dz31 + dz72,
        dz63,
        dz20,
    ) + triple(
        dx43 + dx57,
        dx64,
        dx70,
        dy43 + dy57,
        dy64,
        dy70,
        dz43 + dz57,
        dz64,
        dz70,
    ) + triple(
        dx14 + dx25,
        dx61,
        dx50,
        dy14 + dy25,
        dy61,
        dy50,
        dz14 + dz25,
        dz61,
        dz50,
    );
    volume * twelveth
}

/// Shape function derivatives `b[dim][corner]` and the Jacobian
/// determinant (`CalcElemShapeFunctionDerivatives`).
#[inline(always)]
pub fn calc_elem_shape_function_derivatives(
    x: &Corners,
    y: &Corners,
    z: &Corners,
) -> ([Corners; 3], f64) {
    let [x0, x1, x2, x3, x4, x5, x6, x7] = *x;
    let [y0, y1, y2, y3, y4, y5, y6, y7] = *y;
    let [z0, z1, z2, z3, z4, z5, z6, z7] = *z;

    let fjxxi = 0.125 * ((x6 - x0) + (x5 - x3) - (x7 - x1) - (x4 - x2));
    let fjxet = 0.125 * ((x6 - x0) - (x5 - x3) + (x7 - x1) - (x4 - x2));
    let fjxze = 0.125 * ((x6 - x0) + (x5 - x3) + (x7 - x1) + (x4 - x2));

    let fjyxi = 0.125 * ((y6 - y0) + (y5 - y3) - (y7 - y1) - (y4 - y2));
    let fjyet = 0.125 * ((y6 - y0) - (y5 - y3) + (y7 - y1) - (y4 - y2));
    let fjyze = 0.125 * ((y6 - y0) + (y5 - y3) + (y7 - y1) + (y4 - y2));

    let fjzxi = 0.125 * ((z6 - z0) + (z5 - z3) - (z7 - z1) - (z4 - z2));
    let fjzet = 0.125 * ((z6 - z0) - (z5 - z3) + (z7 - z1) - (z4 - z2));
    let fjzze = 0.125 * ((z6 - z0) + (z5 - z3) + (z7 - z1) + (z4 - z2));

    let cjxxi = (fjyet * fjzze) - (fjzet * fjyze);
    let cjxet = -(fjyxi * fjzze) + (fjzxi * fjyze);
    let cjxze = (fjyxi * fjzet) - (fjzxi * fjyet);

    let cjyxi = -(fjxet * fjzze) + (fjzet * fjxze);
    let cjyet = (fjxxi * fjzze) - (fjzxi * fjxze);
    let cjyze = -(fjxxi * fjzet) + (fjzxi * fjxet);

    let cjzxi = (fjxet * fjyze) - (fjyet * fjxze);
    let cjzet = -(fjxxi * fjyze) + (fjyxi * fjxze);
    let cjzze = (fjxxi * fjyet) - (fjyxi * fjxet);

    // By symmetry corners (6,7,4,5) are the negatives of (0,1,2,3).
    let row = |cxi: f64, cet: f64, cze: f64| {
        let b0 = -cxi - cet - cze;
        let b1 = cxi - cet - cze;
        let b2 = cxi + cet - cze;
        let b3 = -cxi + cet - cze;
        [b0, b1, b2, b3, -b2, -b3, -b0, -b1]
    };
    let b = [
        row(cjxxi, cjxet, cjxze),
        row(cjyxi, cjyet, cjyze),
        row(cjzxi, cjzet, cjzze),
    ];
    let volume = 8.0 * (fjxet * cjxet + fjyet * cjyet + fjzet * cjzet);
    (b, volume)
}

/// Adds one face's area vector to its four corners (`SumElemFaceNormal`).
#[inline(always)]
fn sum_elem_face_normal(
    pf: &mut [Corners; 3],
    corners: [usize; 4],
    x: &Corners,
    y: &Corners,
    z: &Corners,
) {
    let [i0, i1, i2, i3] = corners;
    let bisect_x0 = 0.5 * (x[i3] + x[i2] - x[i1] - x[i0]);
    let bisect_y0 = 0.5 * (y[i3] + y[i2] - y[i1] - y[i0]);
    let bisect_z0 = 0.5 * (z[i3] + z[i2] - z[i1] - z[i0]);
    let bisect_x1 = 0.5 * (x[i2] + x[i1] - x[i3] - x[i0]);
    let bisect_y1 = 0.5 * (y[i2] + y[i1] - y[i3] - y[i0]);
    let bisect_z1 = 0.5 * (z[i2] + z[i1] - z[i3] - z[i0]);
    let area_x = 0.25 * (bisect_y0 * bisect_z1 - bisect_z0 * bisect_y1);
    let area_y = 0.25 * (bisect_z0 * bisect_x1 - bisect_x0 * bisect_z1);
    let area_z = 0.25 * (bisect_x0 * bisect_y1 - bisect_y0 * bisect_x1);
    for i in corners {
        pf[0][i] += area_x;
        pf[1][i] += area_y;
        pf[2][i] += area_z;
    }
}

/// Area-weighted normals at the eight corners (`CalcElemNodeNormals`).
#[inline(always)]
pub fn calc_elem_node_normals(x: &Corners, y: &Corners, z: &Corners) -> [Corners; 3] {
    let mut pf = [[0.0; 8]; 3];
    sum_elem_face_normal(&mut pf, [0, 1, 2, 3], x, y, z);
    sum_elem_face_normal(&mut pf, [0, 4, 5, 1], x, y, z);
    sum_elem_face_normal(&mut pf, [1, 5, 6, 2], x, y, z);
    sum_elem_face_normal(&mut pf, [2, 6, 7, 3], x, y, z);
    sum_elem_face_normal(&mut pf, [3, 7, 4, 0], x, y, z);
    sum_elem_face_normal(&mut pf, [4, 7, 6, 5], x, y, z);
    pf
}

/// Derivative of the volume with respect to one corner (`VoluDer`).
#[inline(always)]
fn volu_der(c: [usize; 6], x: &Corners, y: &Corners, z: &Corners) -> (f64, f64, f64) {
    let [x0, x1, x2, x3, x4, x5] = [x[c[0]], x[c[1]], x[c[2]], x[c[3]], x[c[4]], x[c[5]]];
    let [y0, y1, y2, y3, y4, y5] = [y[c[0]], y[c[1]], y[c[2]], y[c[3]], y[c[4]], y[c[5]]];
    let [z0, z1, z2, z3, z4, z5] = [z[c[0]], z[c[1]], z[c[2]], z[c[3]], z[c[4]], z[c[5]]];
    let twelfth = 1.0 / 12.0;

    let dvdx = (y1 + y2) * (z0 + z1) - (y0 + y1) * (z1 + z2) + (y0 + y4) * (z3 + z4)
        - (y3 + y4) * (z0 + z4)
        - (y2 + y5) * (z3 + z5)
        + (y3 + y5) * (z2 + z5);
    let dvdy = -(x1 + x2) * (z0 + z1) + (x0 + x1) * (z1 + z2) - (x0 + x4) * (z3 + z4)
        + (x3 + x4) * (z0 + z4)
        + (x2 + x5) * (z3 + z5)
        - (x3 + x5) * (z2 + z5);
    let dvdz = -(y1 + y2) * (x0 + x1) + (y0 + y1) * (x1 + x2) - (y0 + y4) * (x3 + x4)
        + (y3 + y4) * (x0 + x4)
        + (y2 + y5) * (x3 + x5)
        - (y3 + y5) * (x2 + x5);
    (dvdx * twelfth, dvdy * twelfth, dvdz * twelfth)
}

/// Volume derivatives at the eight corners (`CalcElemVolumeDerivative`).
#[inline(always)]
pub fn calc_elem_volume_derivative(x: &Corners, y: &Corners, z: &Corners) -> [Corners; 3] {
    // Corner k's derivative depends on its six neighbouring corners in this order.
    const STENCIL: [[usize; 6]; 8] = [
        [1, 2, 3, 4, 5, 7],
        [2, 3, 0, 5, 6, 4],
        [3, 0, 1, 6, 7, 5],
        [0, 1, 2, 7, 4, 6],
        [7, 6, 5, 0, 3, 1],
        [4, 7, 6, 1, 0, 2],
        [5, 4, 7, 2, 1, 3],
        [6, 5, 4, 3, 2, 0],
    ];
    let mut d = [[0.0; 8]; 3];
    // Written out so every corner index is a compile-time constant.
    macro_rules! corner {
        ($k:literal) => {
            let (dx, dy, dz) = volu_der(STENCIL[$k], x, y, z);
            d[0][$k] = dx;
            d[1][$k] = dy;
            d[2][$k] = dz;
        };
    }
    corner!(0);
    corner!(1);
    corner!(2);
    corner!(3);
    corner!(4);
    corner!(5);
    corner!(6);
    corner!(7);
    d
}

/// Squared-area measure of one face (`AreaFace`).
#[inline(always)]
fn area_face(c: [usize; 4], x: &Corners, y: &Corners, z: &Corners) -> f64 {
    let [x0, x1, x2, x3] = [x[c[0]], x[c[1]], x[c[2]], x[c[3]]];
    let [y0, y1, y2, y3] = [y[c[0]], y[c[1]], y[c[2]], y[c[3]]];
    let [z0, z1, z2, z3] = [z[c[0]], z[c[1]], z[c[2]], z[c[3]]];
    let fx = (x2 - x0) - (x3 - x1);
    let fy = (y2 - y0) - (y3 - y1);
    let fz = (z2 - z0) - (z3 - z1);
    let gx = (x2 - x0) + (x3 - x1);
    let gy = (y2 - y0) + (y3 - y1);
    let gz = (z2 - z0) + (z3 - z1);
    (fx * fx + fy * fy + fz * fz) * (gx * gx + gy * gy + gz * gz)
        - (fx * gx + fy * gy + fz * gz) * (fx * gx + fy * gy + fz * gz)
}

/// Characteristic length: four times the volume over the largest face
/// diagonal measure (`CalcElemCharacteristicLength`).
#[inline(always)]
pub fn calc_elem_characteristic_length(x: &Corners, y: &Corners, z: &Corners, volume: f64) -> f64 {
    const FACES: [[usize; 4]; 6] = [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [0, 1, 5, 4],
        [1, 2, 6, 5],
        [2, 3, 7, 6],
        [3, 0, 4, 7],
    ];
    let mut char_length = 0.0;
    // std::max(a, charLength) keeps `a` unless it is smaller.
    macro_rules! face {
        ($f:literal) => {
            let a = area_face(FACES[$f], x, y, z);
            char_length = if a < char_length { char_length } else { a };
        };
    }
    face!(0);
    face!(1);
    face!(2);
    face!(3);
    face!(4);
    face!(5);
    4.0 * volume / char_length.sqrt()
}

/// Diagonal of the velocity gradient `(dxx, dyy, dzz)`
/// (`CalcElemVelocityGradient`; the off-diagonal terms it also computes are
/// never read by the reference and are left out).
#[inline(always)]
pub fn calc_elem_velocity_gradient_diag(
    xvel: &Corners,
    yvel: &Corners,
    zvel: &Corners,
    b: &[Corners; 3],
    det_j: f64,
) -> [f64; 3] {
    let inv_det_j = 1.0 / det_j;
    let pfx = &b[0];
    let pfy = &b[1];
    let pfz = &b[2];
    let d0 = inv_det_j
        * (pfx[0] * (xvel[0] - xvel[6])
            + pfx[1] * (xvel[1] - xvel[7])
            + pfx[2] * (xvel[2] - xvel[4])
            + pfx[3] * (xvel[3] - xvel[5]));
    let d1 = inv_det_j
        * (pfy[0] * (yvel[0] - yvel[6])
            + pfy[1] * (yvel[1] - yvel[7])
            + pfy[2] * (yvel[2] - yvel[4])
            + pfy[3] * (yvel[3] - yvel[5]));
    let d2 = inv_det_j
        * (pfz[0] * (zvel[0] - zvel[6])
            + pfz[1] * (zvel[1] - zvel[7])
            + pfz[2] * (zvel[2] - zvel[4])
            + pfz[3] * (zvel[3] - zvel[5]));
    [d0, d1, d2]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit_cube() -> (Corners, Corners, Corners) {
        (
            [0., 1., 1., 0., 0., 1., 1., 0.],
            [0., 0., 1., 1., 0., 0., 1., 1.],
            [0., 0., 0., 0., 1., 1., 1., 1.],
        )
    }

    #[test]
    fn unit_cube_measures() {
        let (x, y, z) = unit_cube();
        assert_eq!(calc_elem_volume(&x, &y, &z), 1.0);
        let (_, det) = calc_elem_shape_function_derivatives(&x, &y, &z);
        assert_eq!(det, 1.0);
        assert_eq!(calc_elem_characteristic_length(&x, &y, &z, 1.0), 1.0);
        let n = calc_elem_node_normals(&x, &y, &z);
        assert_eq!(n[0][0], -0.25);
        let dv = calc_elem_volume_derivative(&x, &y, &z);
        let sum: f64 = dv[0].iter().sum();
        assert!(sum.abs() < 1e-15);
    }
}
