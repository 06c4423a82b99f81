//! Monotonic artificial viscosity (`CalcQForElems`,
//! `CalcMonotonicQGradientsForElems`, `CalcMonotonicQRegionForElems`).

use crate::comm::{Comm, Msg};
use crate::domain::{Domain, Params, bc};
use crate::error::LuleshError;
use crate::geometry::gather;
use crate::par::Exec;
use crate::workspace::Workspace;

const PTINY: f64 = 1.0e-36;

/// Position and velocity gradients of one element along xi, eta, zeta:
/// `[delx_xi, delx_eta, delx_zeta, delv_xi, delv_eta, delv_zeta]`.
#[inline(always)]
fn monoq_gradients(dom: &Domain, i: usize) -> [f64; 6] {
    let nodes = &dom.nodelist[i];
    let [x0, x1, x2, x3, x4, x5, x6, x7] = gather(nodes, &dom.x);
    let [y0, y1, y2, y3, y4, y5, y6, y7] = gather(nodes, &dom.y);
    let [z0, z1, z2, z3, z4, z5, z6, z7] = gather(nodes, &dom.z);
    let [xv0, xv1, xv2, xv3, xv4, xv5, xv6, xv7] = gather(nodes, &dom.xd);
    let [yv0, yv1, yv2, yv3, yv4, yv5, yv6, yv7] = gather(nodes, &dom.yd);
    let [zv0, zv1, zv2, zv3, zv4, zv5, zv6, zv7] = gather(nodes, &dom.zd);

    let vol = dom.volo[i] * dom.vnew[i];
    let norm = 1.0 / (vol + PTINY);

    let dxj = -0.25 * ((x0 + x1 + x5 + x4) - (x3 + x2 + x6 + x7));
    let dyj = -0.25 * ((y0 + y1 + y5 + y4) - (y3 + y2 + y6 + y7));
    let dzj = -0.25 * ((z0 + z1 + z5 + z4) - (z3 + z2 + z6 + z7));

    let dxi = 0.25 * ((x1 + x2 + x6 + x5) - (x0 + x3 + x7 + x4));
    let dyi = 0.25 * ((y1 + y2 + y6 + y5) - (y0 + y3 + y7 + y4));
    let dzi = 0.25 * ((z1 + z2 + z6 + z5) - (z0 + z3 + z7 + z4));

    let dxk = 0.25 * ((x4 + x5 + x6 + x7) - (x0 + x1 + x2 + x3));
    let dyk = 0.25 * ((y4 + y5 + y6 + y7) - (y0 + y1 + y2 + y3));
    let dzk = 0.25 * ((z4 + z5 + z6 + z7) - (z0 + z1 + z2 + z3));

    // zeta: i cross j
    let mut ax = dyi * dzj - dzi * dyj;
    let mut ay = dzi * dxj - dxi * dzj;
    let mut az = dxi * dyj - dyi * dxj;
    let delx_zeta = vol / (ax * ax + ay * ay + az * az + PTINY).sqrt();
    ax *= norm;
    ay *= norm;
    az *= norm;
    let dxv = 0.25 * ((xv4 + xv5 + xv6 + xv7) - (xv0 + xv1 + xv2 + xv3));
    let dyv = 0.25 * ((yv4 + yv5 + yv6 + yv7) - (yv0 + yv1 + yv2 + yv3));
    let dzv = 0.25 * ((zv4 + zv5 + zv6 + zv7) - (zv0 + zv1 + zv2 + zv3));
    let delv_zeta = ax * dxv + ay * dyv + az * dzv;

    // xi: j cross k
    ax = dyj * dzk - dzj * dyk;
    ay = dzj * dxk - dxj * dzk;
    az = dxj * dyk - dyj * dxk;
    let delx_xi = vol / (ax * ax + ay * ay + az * az + PTINY).sqrt();
    ax *= norm;
    ay *= norm;
    az *= norm;
    let dxv = 0.25 * ((xv1 + xv2 + xv6 + xv5) - (xv0 + xv3 + xv7 + xv4));
    let dyv = 0.25 * ((yv1 + yv2 + yv6 + yv5) - (yv0 + yv3 + yv7 + yv4));
    let dzv = 0.25 * ((zv1 + zv2 + zv6 + zv5) - (zv0 + zv3 + zv7 + zv4));
    let delv_xi = ax * dxv + ay * dyv + az * dzv;

    // eta: k cross i
    ax = dyk * dzi - dzk * dyi;
    ay = dzk * dxi - dxk * dzi;
    az = dxk * dyi - dyk * dxi;
    let delx_eta = vol / (ax * ax + ay * ay + az * az + PTINY).sqrt();
    ax *= norm;
    ay *= norm;
    az *= norm;
    let dxv = -0.25 * ((xv0 + xv1 + xv5 + xv4) - (xv3 + xv2 + xv6 + xv7));
    let dyv = -0.25 * ((yv0 + yv1 + yv5 + yv4) - (yv3 + yv2 + yv6 + yv7));
    let dzv = -0.25 * ((zv0 + zv1 + zv5 + zv4) - (zv3 + zv2 + zv6 + zv7));
    let delv_eta = ax * dxv + ay * dyv + az * dzv;

    [delx_xi, delx_eta, delx_zeta, delv_xi, delv_eta, delv_zeta]
}

/// Fills the six gradient arrays for the owned elements.
fn calc_monotonic_q_gradients_for_elems(dom: &mut Domain, exec: &Exec) {
    let n = dom.num_elem();
    let mut dx_xi = std::mem::take(&mut dom.delx_xi);
    let mut dx_eta = std::mem::take(&mut dom.delx_eta);
    let mut dx_zeta = std::mem::take(&mut dom.delx_zeta);
    let mut dv_xi = std::mem::take(&mut dom.delv_xi);
    let mut dv_eta = std::mem::take(&mut dom.delv_eta);
    let mut dv_zeta = std::mem::take(&mut dom.delv_zeta);
    {
        let d: &Domain = dom;
        let parts = (
            &mut dx_xi[..],
            &mut dx_eta[..],
            &mut dx_zeta[..],
            &mut dv_xi[..n],
            &mut dv_eta[..n],
            &mut dv_zeta[..n],
        );
        exec.for_each_split(parts, |first, (a, b, c, e, f, g)| {
            for i in 0..a.len() {
                let r = monoq_gradients(d, first + i);
                a[i] = r[0];
                b[i] = r[1];
                c[i] = r[2];
                e[i] = r[3];
                f[i] = r[4];
                g[i] = r[5];
            }
            Ok(())
        })
        .expect("gradients cannot fail");
    }
    dom.delx_xi = dx_xi;
    dom.delx_eta = dx_eta;
    dom.delx_zeta = dx_zeta;
    dom.delv_xi = dv_xi;
    dom.delv_eta = dv_eta;
    dom.delv_zeta = dv_zeta;
}

/// Limiter value of one direction from the gradients of the element and
/// of its two neighbours across the faces.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn limiter(
    delv: &[f64],
    ielem: usize,
    bc_mask: i32,
    masks: [i32; 6],
    neighbour_m: u32,
    neighbour_p: u32,
    p: &Params,
) -> f64 {
    let [m_mask, m_symm, m_free, p_mask, p_symm, p_free] = masks;
    let norm = 1.0 / (delv[ielem] + PTINY);
    // A shared (COMM) face reads the ghost slot filled by the halo exchange;
    // an impossible bit combination contributes zero, as in the reference.
    let pick = |bits: i32, mask: i32, symm: i32, free: i32, neighbour: u32| {
        let comm = mask & !(symm | free);
        match bits & mask {
            m if m == 0 || m == comm => delv[neighbour as usize],
            m if m == symm => delv[ielem],
            _ => 0.0,
        }
    };
    let mut delvm = pick(bc_mask, m_mask, m_symm, m_free, neighbour_m);
    let mut delvp = pick(bc_mask, p_mask, p_symm, p_free, neighbour_p);
    delvm *= norm;
    delvp *= norm;
    let mut phi = 0.5 * (delvm + delvp);
    delvm *= p.monoq_limiter_mult;
    delvp *= p.monoq_limiter_mult;
    if delvm < phi {
        phi = delvm;
    }
    if delvp < phi {
        phi = delvp;
    }
    if phi < 0.0 {
        phi = 0.0;
    }
    if phi > p.monoq_max_slope {
        phi = p.monoq_max_slope;
    }
    phi
}

/// Linear and quadratic q terms `(ql, qq)` of one element.
#[inline(always)]
fn monoq_elem(dom: &Domain, ielem: usize) -> (f64, f64) {
    use bc::*;
    let p = &dom.params;
    let mask = dom.elem_bc[ielem];
    let phixi = limiter(
        &dom.delv_xi,
        ielem,
        mask,
        [XI_M, XI_M_SYMM, XI_M_FREE, XI_P, XI_P_SYMM, XI_P_FREE],
        dom.lxim[ielem],
        dom.lxip[ielem],
        p,
    );
    let phieta = limiter(
        &dom.delv_eta,
        ielem,
        mask,
        [ETA_M, ETA_M_SYMM, ETA_M_FREE, ETA_P, ETA_P_SYMM, ETA_P_FREE],
        dom.letam[ielem],
        dom.letap[ielem],
        p,
    );
    let phizeta = limiter(
        &dom.delv_zeta,
        ielem,
        mask,
        [
            ZETA_M,
            ZETA_M_SYMM,
            ZETA_M_FREE,
            ZETA_P,
            ZETA_P_SYMM,
            ZETA_P_FREE,
        ],
        dom.lzetam[ielem],
        dom.lzetap[ielem],
        p,
    );

    // Remove the length scale.
    if dom.vdov[ielem] > 0.0 {
        return (0.0, 0.0);
    }
    let mut delvxxi = dom.delv_xi[ielem] * dom.delx_xi[ielem];
    let mut delvxeta = dom.delv_eta[ielem] * dom.delx_eta[ielem];
    let mut delvxzeta = dom.delv_zeta[ielem] * dom.delx_zeta[ielem];
    if delvxxi > 0.0 {
        delvxxi = 0.0;
    }
    if delvxeta > 0.0 {
        delvxeta = 0.0;
    }
    if delvxzeta > 0.0 {
        delvxzeta = 0.0;
    }
    let rho = dom.elem_mass[ielem] / (dom.volo[ielem] * dom.vnew[ielem]);
    let qlin = -p.qlc_monoq
        * rho
        * (delvxxi * (1.0 - phixi) + delvxeta * (1.0 - phieta) + delvxzeta * (1.0 - phizeta));
    let qquad = p.qqc_monoq
        * rho
        * (delvxxi * delvxxi * (1.0 - phixi * phixi)
            + delvxeta * delvxeta * (1.0 - phieta * phieta)
            + delvxzeta * delvxzeta * (1.0 - phizeta * phizeta));
    (qlin, qquad)
}

/// Computes `ql` and `qq` region by region (`CalcMonotonicQForElems`).
fn calc_monotonic_q_for_elems(dom: &mut Domain, ws: &mut Workspace, exec: &Exec) {
    let lists = std::mem::take(&mut dom.regions.reg_elem_list);
    for list in lists.iter().filter(|l| !l.is_empty()) {
        if exec.is_parallel() {
            let d: &Domain = dom;
            let out = &mut ws.region_out[..list.len()];
            exec.for_each_split(out, |first, out| {
                for (o, &ielem) in out.iter_mut().zip(&list[first..]) {
                    let (ql, qq) = monoq_elem(d, ielem as usize);
                    o[0] = ql;
                    o[1] = qq;
                }
                Ok(())
            })
            .expect("monotonic q cannot fail");
            for (o, &ielem) in ws.region_out.iter().zip(list) {
                dom.ql[ielem as usize] = o[0];
                dom.qq[ielem as usize] = o[1];
            }
        } else {
            for &ielem in list {
                let (ql, qq) = monoq_elem(dom, ielem as usize);
                dom.qq[ielem as usize] = qq;
                dom.ql[ielem as usize] = ql;
            }
        }
    }
    dom.regions.reg_elem_list = lists;
}

/// Artificial viscosity terms of the step, with the halo exchange of the
/// velocity gradients and the excessive-q check (`CalcQForElems`).
pub fn calc_q_for_elems(
    dom: &mut Domain,
    ws: &mut Workspace,
    exec: &Exec,
    comm: &mut dyn Comm,
) -> Result<(), LuleshError> {
    if dom.num_elem() == 0 {
        return Ok(());
    }
    comm.post_recv(&dom.layout, Msg::MonoQ, 3);
    calc_monotonic_q_gradients_for_elems(dom, exec);
    {
        let Domain {
            layout,
            delv_xi,
            delv_eta,
            delv_zeta,
            ..
        } = dom;
        comm.exchange_monoq(
            layout,
            &mut [&mut delv_xi[..], &mut delv_eta[..], &mut delv_zeta[..]],
        );
    }
    calc_monotonic_q_for_elems(dom, ws, exec);

    // Don't allow excessive artificial viscosity.
    let qstop = dom.params.qstop;
    if let Some(i) = dom.q.iter().position(|&q| q > qstop) {
        return Err(LuleshError::QStop {
            elem: i,
            q: dom.q[i],
            qstop,
            cycle: dom.ts.cycle,
        });
    }
    Ok(())
}
