//! Time-step selection (`TimeIncrement`, `CalcTimeConstraintsForElems`,
//! `CalcCourantConstraintForElems`, `CalcHydroConstraintForElems`).

use crate::comm::Comm;
use crate::domain::Domain;

/// Chooses the next time increment from last cycle's constraints and
/// advances time and cycle count.
pub fn time_increment(dom: &mut Domain, comm: &mut dyn Comm) {
    let ts = &mut dom.ts;
    let mut targetdt = ts.stoptime - ts.time;

    if ts.dtfixed <= 0.0 && ts.cycle != 0 {
        let olddt = ts.deltatime;
        let mut gnewdt = 1.0e+20;
        if ts.dtcourant < gnewdt {
            gnewdt = ts.dtcourant / 2.0;
        }
        if ts.dthydro < gnewdt {
            gnewdt = ts.dthydro * 2.0 / 3.0;
        }
        let mut newdt = comm.allreduce_min(gnewdt);

        let ratio = newdt / olddt;
        if ratio >= 1.0 {
            if ratio < ts.deltatimemultlb {
                newdt = olddt;
            } else if ratio > ts.deltatimemultub {
                newdt = olddt * ts.deltatimemultub;
            }
        }
        if newdt > ts.dtmax {
            newdt = ts.dtmax;
        }
        ts.deltatime = newdt;
    }

    // Try to prevent very small scaling on the next cycle.
    if targetdt > ts.deltatime && targetdt < 4.0 * ts.deltatime / 3.0 {
        targetdt = 2.0 * ts.deltatime / 3.0;
    }
    if targetdt < ts.deltatime {
        ts.deltatime = targetdt;
    }
    ts.time += ts.deltatime;
    ts.cycle += 1;
}

/// Courant limit over one region's elements; keeps `dtcourant` if no
/// element of the region constrains it.
fn calc_courant_constraint(dom: &Domain, list: &[u32], qqc: f64, dtcourant: &mut f64) {
    let qqc2 = 64.0 * qqc * qqc;
    let mut dtcourant_tmp = *dtcourant;
    let mut found = false;
    for &indx in list {
        let i = indx as usize;
        let ss = dom.ss[i];
        let vdov = dom.vdov[i];
        let arealg = dom.arealg[i];
        let mut dtf = ss * ss;
        if vdov < 0.0 {
            dtf += qqc2 * arealg * arealg * vdov * vdov;
        }
        dtf = dtf.sqrt();
        dtf = arealg / dtf;
        if vdov != 0.0 && dtf < dtcourant_tmp {
            dtcourant_tmp = dtf;
            found = true;
        }
    }
    if found {
        *dtcourant = dtcourant_tmp;
    }
}

/// Volume-change limit over one region's elements.
fn calc_hydro_constraint(dom: &Domain, list: &[u32], dvovmax: f64, dthydro: &mut f64) {
    let mut dthydro_tmp = *dthydro;
    let mut found = false;
    for &indx in list {
        let vdov = dom.vdov[indx as usize];
        if vdov != 0.0 {
            let dtdvov = dvovmax / (vdov.abs() + 1.0e-20);
            if dthydro_tmp > dtdvov {
                dthydro_tmp = dtdvov;
                found = true;
            }
        }
    }
    if found {
        *dthydro = dthydro_tmp;
    }
}

/// Recomputes `dtcourant` and `dthydro` for the next time increment.
pub fn calc_time_constraints_for_elems(dom: &mut Domain) {
    let mut dtcourant = 1.0e+20;
    let mut dthydro = 1.0e+20;
    for list in &dom.regions.reg_elem_list {
        calc_courant_constraint(dom, list, dom.params.qqc, &mut dtcourant);
        calc_hydro_constraint(dom, list, dom.params.dvovmax, &mut dthydro);
    }
    dom.ts.dtcourant = dtcourant;
    dom.ts.dthydro = dthydro;
}
