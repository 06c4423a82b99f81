//! Element kinematics of a step (`CalcKinematicsForElems` and
//! `CalcLagrangeElements`): new relative volume, characteristic length and
//! the volumetric strain rate.

use crate::domain::Domain;
use crate::error::LuleshError;
use crate::geometry::{
    calc_elem_characteristic_length, calc_elem_shape_function_derivatives,
    calc_elem_velocity_gradient_diag, calc_elem_volume, gather,
};
use crate::par::Exec;

/// Computes `vnew`, `delv`, `arealg` and `vdov` of every element and checks
/// that no volume became non-positive.
///
/// The reference also stores the deviatoric strains `dxx - vdov/3` etc. in
/// temporaries that nothing reads; only their trace `vdov` is kept here.
pub fn calc_lagrange_elements(dom: &mut Domain, exec: &Exec) -> Result<(), LuleshError> {
    let delta_time = dom.ts.deltatime;
    let cycle = dom.ts.cycle;
    let Domain {
        nodelist,
        x,
        y,
        z,
        xd,
        yd,
        zd,
        volo,
        v,
        vnew,
        delv,
        arealg,
        vdov,
        ..
    } = dom;
    let (nodelist, x, y, z, xd, yd, zd, volo, v) =
        (&*nodelist, &*x, &*y, &*z, &*xd, &*yd, &*zd, &*volo, &*v);
    let parts = (&mut vnew[..], &mut delv[..], &mut arealg[..], &mut vdov[..]);
    exec.for_each_split(parts, |first, (vnew, delv, arealg, vdov)| {
        for i in 0..vnew.len() {
            let k = first + i;
            let nodes = &nodelist[k];
            let mut xl = gather(nodes, x);
            let mut yl = gather(nodes, y);
            let mut zl = gather(nodes, z);

            let volume = calc_elem_volume(&xl, &yl, &zl);
            let relative_volume = volume / volo[k];
            vnew[i] = relative_volume;
            delv[i] = relative_volume - v[k];
            arealg[i] = calc_elem_characteristic_length(&xl, &yl, &zl, volume);

            let xdl = gather(nodes, xd);
            let ydl = gather(nodes, yd);
            let zdl = gather(nodes, zd);
            // Evaluate the gradient at the half step.
            let dt2 = 0.5 * delta_time;
            for j in 0..8 {
                xl[j] -= dt2 * xdl[j];
                yl[j] -= dt2 * ydl[j];
                zl[j] -= dt2 * zdl[j];
            }
            let (b, det_j) = calc_elem_shape_function_derivatives(&xl, &yl, &zl);
            let d = calc_elem_velocity_gradient_diag(&xdl, &ydl, &zdl, &b, det_j);
            vdov[i] = d[0] + d[1] + d[2];

            if relative_volume <= 0.0 {
                return Err(LuleshError::Volume {
                    elem: k,
                    volume: relative_volume,
                    stage: "kinematics",
                    cycle,
                });
            }
        }
        Ok(())
    })
}
