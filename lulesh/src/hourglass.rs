//! Flanagan-Belytschko hourglass control (`CalcHourglassControlForElems`
//! and `CalcFBHourglassForceForElems`). The reference first stores every
//! element's volume derivatives and coordinates in 6 * 8 * numElem arrays and
//! then loops again; here both loops run per element in one pass, with the
//! same arithmetic.

use crate::corner_sum::gather_corner_forces;
use crate::domain::Domain;
use crate::error::LuleshError;
use crate::geometry::{Corners, calc_elem_volume_derivative, gather};
use crate::libm::cbrt;
use crate::par::Exec;
use crate::workspace::Workspace;

/// The four hourglass base vectors.
const GAMMA: [Corners; 4] = [
    [1., 1., -1., -1., -1., -1., 1., 1.],
    [1., -1., -1., 1., -1., 1., 1., -1.],
    [1., -1., 1., -1., 1., -1., 1., -1.],
    [-1., 1., -1., 1., 1., -1., 1., -1.],
];

/// Inputs of one element's hourglass force.
struct HgElem {
    x: Corners,
    y: Corners,
    z: Corners,
    xd: Corners,
    yd: Corners,
    zd: Corners,
    determ: f64,
    ss: f64,
    mass: f64,
}

/// `hourgam * (hourgam^T * vel)` scaled by `coefficient` (`CalcElemFBHourglassForce`).
#[inline(always)]
fn fb_hourglass_component(hourgam: &[[f64; 4]; 8], vel: &Corners, coefficient: f64) -> Corners {
    let mut hxx = [0.0; 4];
    for (i, h) in hxx.iter_mut().enumerate() {
        *h = hourgam[0][i] * vel[0]
            + hourgam[1][i] * vel[1]
            + hourgam[2][i] * vel[2]
            + hourgam[3][i] * vel[3]
            + hourgam[4][i] * vel[4]
            + hourgam[5][i] * vel[5]
            + hourgam[6][i] * vel[6]
            + hourgam[7][i] * vel[7];
    }
    let mut hgf = [0.0; 8];
    for (h, g) in hgf.iter_mut().zip(hourgam) {
        *h = coefficient * (g[0] * hxx[0] + g[1] * hxx[1] + g[2] * hxx[2] + g[3] * hxx[3]);
    }
    hgf
}

/// Hourglass corner forces of one element.
#[inline(always)]
fn elem_hourglass_force(e: &HgElem, hourg: f64) -> [Corners; 3] {
    let dv = calc_elem_volume_derivative(&e.x, &e.y, &e.z);
    let volinv = 1.0 / e.determ;
    let mut hourgam = [[0.0; 4]; 8];
    for (i1, gamma) in GAMMA.iter().enumerate() {
        let modes = |c: &Corners| {
            c[0] * gamma[0]
                + c[1] * gamma[1]
                + c[2] * gamma[2]
                + c[3] * gamma[3]
                + c[4] * gamma[4]
                + c[5] * gamma[5]
                + c[6] * gamma[6]
                + c[7] * gamma[7]
        };
        let hourmodx = modes(&e.x);
        let hourmody = modes(&e.y);
        let hourmodz = modes(&e.z);
        for j in 0..8 {
            hourgam[j][i1] = gamma[j]
                - volinv * (dv[0][j] * hourmodx + dv[1][j] * hourmody + dv[2][j] * hourmodz);
        }
    }
    let volume13 = cbrt(e.determ);
    let coefficient = -hourg * 0.01 * e.ss * e.mass / volume13;
    [
        fb_hourglass_component(&hourgam, &e.xd, coefficient),
        fb_hourglass_component(&hourgam, &e.yd, coefficient),
        fb_hourglass_component(&hourgam, &e.zd, coefficient),
    ]
}

/// Loads one element's inputs and checks its relative volume.
#[inline(always)]
fn load_elem(dom: &Domain, i: usize) -> Result<HgElem, LuleshError> {
    let nodes = &dom.nodelist[i];
    if dom.v[i] <= 0.0 {
        return Err(LuleshError::Volume {
            elem: i,
            volume: dom.v[i],
            stage: "hourglass control",
            cycle: dom.ts.cycle,
        });
    }
    Ok(HgElem {
        x: gather(nodes, &dom.x),
        y: gather(nodes, &dom.y),
        z: gather(nodes, &dom.z),
        xd: gather(nodes, &dom.xd),
        yd: gather(nodes, &dom.yd),
        zd: gather(nodes, &dom.zd),
        determ: dom.volo[i] * dom.v[i],
        ss: dom.ss[i],
        mass: dom.elem_mass[i],
    })
}

/// Adds the hourglass-resisting forces of all elements to the node forces.
pub fn calc_hourglass_control_for_elems(
    dom: &mut Domain,
    ws: &mut Workspace,
    exec: &Exec,
) -> Result<(), LuleshError> {
    let hourg = dom.params.hgcoef;
    let hourglass_on = hourg > 0.0;
    if !hourglass_on {
        // No hourglass forces; only the volume check of the reference remains.
        return match dom.v.iter().position(|&v| v <= 0.0) {
            Some(i) => load_elem(dom, i).map(|_| ()),
            None => Ok(()),
        };
    }
    if exec.is_parallel() {
        let d: &Domain = dom;
        let parts = (
            &mut ws.fx_elem[..],
            &mut ws.fy_elem[..],
            &mut ws.fz_elem[..],
        );
        exec.for_each_split(parts, |first, (fxe, fye, fze)| {
            for i in 0..fxe.len() {
                let f = elem_hourglass_force(&load_elem(d, first + i)?, hourg);
                fxe[i] = f[0];
                fye[i] = f[1];
                fze[i] = f[2];
            }
            Ok(())
        })?;
        gather_corner_forces(dom, ws, exec, true);
    } else {
        for i in 0..dom.num_elem() {
            let f = elem_hourglass_force(&load_elem(dom, i)?, hourg);
            let nodes = dom.nodelist[i];
            for (c, &n) in nodes.iter().enumerate() {
                let n = n as usize;
                dom.fx[n] += f[0][c];
                dom.fy[n] += f[1][c];
                dom.fz[n] += f[2][c];
            }
        }
    }
    Ok(())
}
