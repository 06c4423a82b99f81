//! Nodal forces from element stresses (`CalcForceForNodes`,
//! `CalcVolumeForceForElems`, `IntegrateStressForElems`).
//!
//! Serial mode adds each element's corner forces straight into the node
//! arrays in element order, as the single-thread reference does. Threaded
//! mode stores them per element corner and then sums per node through the
//! node-to-corner list, as the OpenMP reference does.

use crate::comm::{Comm, Msg};
use crate::corner_sum::gather_corner_forces;
use crate::domain::Domain;
use crate::error::LuleshError;
use crate::geometry::{
    Corners, calc_elem_node_normals, calc_elem_shape_function_derivatives, gather,
};
use crate::hourglass::calc_hourglass_control_for_elems;
use crate::par::Exec;
use crate::workspace::Workspace;

/// Corner forces of one element from its stress and the determinant of its Jacobian.
#[inline(always)]
fn elem_stress_forces(
    nodes: &[u32; 8],
    x: &[f64],
    y: &[f64],
    z: &[f64],
    sig: f64,
) -> ([Corners; 3], f64) {
    let xl = gather(nodes, x);
    let yl = gather(nodes, y);
    let zl = gather(nodes, z);
    // Only the determinant is used: the derivatives are overwritten by the normals.
    let (_, determ) = calc_elem_shape_function_derivatives(&xl, &yl, &zl);
    let b = calc_elem_node_normals(&xl, &yl, &zl);
    let mut f = [[0.0; 8]; 3];
    for (fd, bd) in f.iter_mut().zip(&b) {
        for (fi, &bi) in fd.iter_mut().zip(bd) {
            *fi = -(sig * bi);
        }
    }
    (f, determ)
}

/// Integrates the element stresses `-p - q` into nodal forces and records
/// each element's Jacobian determinant (`IntegrateStressForElems`).
fn integrate_stress_for_elems(dom: &mut Domain, ws: &mut Workspace, exec: &Exec) {
    if exec.is_parallel() {
        let (nodelist, x, y, z, p, q) = (&dom.nodelist, &dom.x, &dom.y, &dom.z, &dom.p, &dom.q);
        let parts = (
            &mut ws.determ[..],
            &mut ws.fx_elem[..],
            &mut ws.fy_elem[..],
            &mut ws.fz_elem[..],
        );
        exec.for_each_split(parts, |first, (det, fxe, fye, fze)| {
            for i in 0..det.len() {
                let k = first + i;
                let sig = -p[k] - q[k];
                let (f, d) = elem_stress_forces(&nodelist[k], x, y, z, sig);
                det[i] = d;
                fxe[i] = f[0];
                fye[i] = f[1];
                fze[i] = f[2];
            }
            Ok(())
        })
        .expect("stress integration cannot fail");
        gather_corner_forces(dom, ws, exec, false);
    } else {
        let Domain {
            nodelist,
            x,
            y,
            z,
            p,
            q,
            fx,
            fy,
            fz,
            ..
        } = dom;
        for (k, (nodes, det)) in nodelist.iter().zip(ws.determ.iter_mut()).enumerate() {
            let sig = -p[k] - q[k];
            let (f, d) = elem_stress_forces(nodes, x, y, z, sig);
            *det = d;
            for (c, &n) in nodes.iter().enumerate() {
                let n = n as usize;
                fx[n] += f[0][c];
                fy[n] += f[1][c];
                fz[n] += f[2][c];
            }
        }
    }
}

/// Stress and hourglass forces of all elements (`CalcVolumeForceForElems`).
fn calc_volume_force_for_elems(
    dom: &mut Domain,
    ws: &mut Workspace,
    exec: &Exec,
) -> Result<(), LuleshError> {
    if dom.num_elem() == 0 {
        return Ok(());
    }
    integrate_stress_for_elems(dom, ws, exec);
    if let Some(k) = ws.determ.iter().position(|&d| d <= 0.0) {
        return Err(LuleshError::Volume {
            elem: k,
            volume: ws.determ[k],
            stage: "stress integration",
            cycle: dom.ts.cycle,
        });
    }
    calc_hourglass_control_for_elems(dom, ws, exec)
}

/// Computes all nodal forces of the step (`CalcForceForNodes`), including the
/// sum over ranks of forces on shared nodes.
pub fn calc_force_for_nodes(
    dom: &mut Domain,
    ws: &mut Workspace,
    exec: &Exec,
    comm: &mut dyn Comm,
) -> Result<(), LuleshError> {
    comm.post_recv(&dom.layout, Msg::SumBoundaryNodes, 3);
    dom.fx.fill(0.0);
    dom.fy.fill(0.0);
    dom.fz.fill(0.0);
    calc_volume_force_for_elems(dom, ws, exec)?;
    let Domain {
        layout, fx, fy, fz, ..
    } = dom;
    comm.sum_boundary_nodes(layout, &mut [&mut fx[..], &mut fy[..], &mut fz[..]]);
    Ok(())
}
