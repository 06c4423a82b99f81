//! The sum of per-element corner forces into the node forces, shared by the stress and the
//! hourglass passes of the force calculation.

use crate::domain::Domain;
use crate::par::Exec;
use crate::workspace::Workspace;

/// Sums per-element corner values into node fields through the
/// node-to-corner list; `accumulate` adds the sum to the existing node value
/// (hourglass pass) instead of replacing it (stress pass).
pub fn gather_corner_forces(dom: &mut Domain, ws: &Workspace, exec: &Exec, accumulate: bool) {
    let start = &dom.node_elem_start;
    let list = &dom.node_elem_corner_list;
    let fxe = ws.fx_elem.as_flattened();
    let fye = ws.fy_elem.as_flattened();
    let fze = ws.fz_elem.as_flattened();
    let parts = (&mut dom.fx[..], &mut dom.fy[..], &mut dom.fz[..]);
    let result = exec.for_each_split(parts, |first, (fx, fy, fz)| {
        for (i, ((fx, fy), fz)) in fx.iter_mut().zip(fy).zip(fz).enumerate() {
            let g = first + i;
            let corners = &list[start[g] as usize..start[g + 1] as usize];
            let (mut sx, mut sy, mut sz) = (0.0, 0.0, 0.0);
            for &c in corners {
                sx += fxe[c as usize];
                sy += fye[c as usize];
                sz += fze[c as usize];
            }
            if accumulate {
                *fx += sx;
                *fy += sy;
                *fz += sz;
            } else {
                *fx = sx;
                *fy = sy;
                *fz = sz;
            }
        }
        Ok(())
    });
    result.expect("the gather cannot fail");
}
