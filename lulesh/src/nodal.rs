//! Node-centred update of a leapfrog step (`LagrangeNodal`): forces,
//! accelerations, symmetry-plane conditions, velocities and positions.

use crate::comm::{Comm, Msg};
use crate::domain::Domain;
use crate::error::LuleshError;
use crate::force::calc_force_for_nodes;
use crate::par::Exec;
use crate::workspace::Workspace;

/// `a = F / m` at every node (`CalcAccelerationForNodes`).
fn calc_acceleration_for_nodes(dom: &mut Domain) {
    let Domain {
        fx,
        fy,
        fz,
        xdd,
        ydd,
        zdd,
        nodal_mass,
        ..
    } = dom;
    for (i, &m) in nodal_mass.iter().enumerate() {
        xdd[i] = fx[i] / m;
        ydd[i] = fy[i] / m;
        zdd[i] = fz[i] / m;
    }
}

/// Zero normal acceleration on the symmetry planes
/// (`ApplyAccelerationBoundaryConditionsForNodes`).
fn apply_acceleration_boundary_conditions(dom: &mut Domain) {
    for &n in &dom.symm_x {
        dom.xdd[n as usize] = 0.0;
    }
    for &n in &dom.symm_y {
        dom.ydd[n as usize] = 0.0;
    }
    for &n in &dom.symm_z {
        dom.zdd[n as usize] = 0.0;
    }
}

/// Advances velocities (with the `u_cut` snap to zero) and then positions
/// (`CalcVelocityForNodes` + `CalcPositionForNodes`; per node the second
/// uses the velocity the first just wrote, so one pass gives the same values).
fn calc_velocity_and_position_for_nodes(dom: &mut Domain, dt: f64, u_cut: f64) {
    let Domain {
        x,
        y,
        z,
        xd,
        yd,
        zd,
        xdd,
        ydd,
        zdd,
        ..
    } = dom;
    let advance = |pos: &mut [f64], vel: &mut [f64], acc: &[f64]| {
        for ((p, v), &a) in pos.iter_mut().zip(vel.iter_mut()).zip(acc) {
            let mut vtmp = *v + a * dt;
            if vtmp.abs() < u_cut {
                vtmp = 0.0;
            }
            *v = vtmp;
            *p += vtmp * dt;
        }
    };
    advance(x, xd, xdd);
    advance(y, yd, ydd);
    advance(z, zd, zdd);
}

/// The node half of the leapfrog step.
pub fn lagrange_nodal(
    dom: &mut Domain,
    ws: &mut Workspace,
    exec: &Exec,
    comm: &mut dyn Comm,
) -> Result<(), LuleshError> {
    let delt = dom.ts.deltatime;
    let u_cut = dom.params.u_cut;

    // Boundary conditions are evaluated at the beginning of the step.
    calc_force_for_nodes(dom, ws, exec, comm)?;
    comm.post_recv(&dom.layout, Msg::SyncPosVel, 6);
    calc_acceleration_for_nodes(dom);
    apply_acceleration_boundary_conditions(dom);
    calc_velocity_and_position_for_nodes(dom, delt, u_cut);

    let Domain {
        layout,
        x,
        y,
        z,
        xd,
        yd,
        zd,
        ..
    } = dom;
    comm.sync_pos_vel(
        layout,
        &mut [
            &mut x[..],
            &mut y[..],
            &mut z[..],
            &mut xd[..],
            &mut yd[..],
            &mut zd[..],
        ],
    );
    Ok(())
}
