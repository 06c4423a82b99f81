//! Equation of state and material update (`ApplyMaterialPropertiesForElems`,
//! `EvalEOSForElems`, `CalcEnergyForElems`, `CalcPressureForElems`,
//! `CalcSoundSpeedForElems`, `UpdateVolumesForElems`).
//!
//! The reference runs each stage as a loop over a region's elements through
//! temporary arrays. Every stage only combines values of the same element, so
//! here the stages run one element at a time with the same operations in the
//! same order, which needs no temporaries.

use crate::domain::{Domain, Params};
use crate::error::LuleshError;
use crate::par::Exec;
use crate::workspace::Workspace;

/// Old state of one element read by the EOS.
#[derive(Clone, Copy)]
struct EosIn {
    e_old: f64,
    delvc: f64,
    p_old: f64,
    q_old: f64,
    qq_old: f64,
    ql_old: f64,
    vnewc: f64,
}

/// New state of one element: pressure, energy, q, sound speed.
#[derive(Clone, Copy)]
struct EosOut {
    p: f64,
    e: f64,
    q: f64,
    ss: f64,
}

/// `(p, bvc, pbvc)` of one element (`CalcPressureForElems`).
#[inline(always)]
fn calc_pressure(e: f64, compression: f64, vnewc: f64, c: &Params) -> (f64, f64, f64) {
    let c1s = 2.0 / 3.0;
    let bvc = c1s * (compression + 1.0);
    let pbvc = c1s;
    let mut p = bvc * e;
    if p.abs() < c.p_cut {
        p = 0.0;
    }
    if vnewc >= c.eosvmax {
        // impossible condition here?
        p = 0.0;
    }
    if p < c.pmin {
        p = c.pmin;
    }
    (p, bvc, pbvc)
}

/// Sound speed estimate with the reference's floor for tiny values.
#[inline(always)]
fn sound_speed(pbvc: f64, e: f64, v2: f64, bvc: f64, p: f64, rho0: f64) -> f64 {
    let ssc = (pbvc * e + v2 * bvc * p) / rho0;
    if ssc <= 0.1111111e-36 {
        0.3333333e-18
    } else {
        ssc.sqrt()
    }
}

/// One evaluation of the EOS for one element (the body of the `rep` loop
/// of `EvalEOSForElems` with `CalcEnergyForElems` inlined), and the sound
/// speed of the result.
#[inline(always)]
fn eval_eos_elem(inp: EosIn, c: &Params) -> EosOut {
    let EosIn {
        e_old,
        delvc,
        mut p_old,
        q_old,
        qq_old,
        ql_old,
        vnewc,
    } = inp;
    let rho0 = c.refdens;

    let mut compression = 1.0 / vnewc - 1.0;
    let vchalf = vnewc - delvc * 0.5;
    let mut comp_half_step = 1.0 / vchalf - 1.0;
    if c.eosvmin != 0.0 && vnewc <= c.eosvmin {
        comp_half_step = compression;
    }
    if c.eosvmax != 0.0 && vnewc >= c.eosvmax {
        p_old = 0.0;
        compression = 0.0;
        comp_half_step = 0.0;
    }
    let work = 0.0;

    let mut e_new = e_old - 0.5 * delvc * (p_old + q_old) + 0.5 * work;
    if e_new < c.emin {
        e_new = c.emin;
    }

    let (p_half_step, bvc, pbvc) = calc_pressure(e_new, comp_half_step, vnewc, c);
    let vhalf = 1.0 / (1.0 + comp_half_step);
    let mut q_new = if delvc > 0.0 {
        0.0
    } else {
        let ssc = sound_speed(pbvc, e_new, vhalf * vhalf, bvc, p_half_step, rho0);
        ssc * ql_old + qq_old
    };
    e_new += 0.5 * delvc * (3.0 * (p_old + q_old) - 4.0 * (p_half_step + q_new));

    e_new += 0.5 * work;
    if e_new.abs() < c.e_cut {
        e_new = 0.0;
    }
    if e_new < c.emin {
        e_new = c.emin;
    }

    let (p_new, bvc, pbvc) = calc_pressure(e_new, compression, vnewc, c);
    let q_tilde = if delvc > 0.0 {
        0.0
    } else {
        let ssc = sound_speed(pbvc, e_new, vnewc * vnewc, bvc, p_new, rho0);
        ssc * ql_old + qq_old
    };
    let sixth = 1.0 / 6.0;
    e_new -=
        (7.0 * (p_old + q_old) - 8.0 * (p_half_step + q_new) + (p_new + q_tilde)) * delvc * sixth;
    if e_new.abs() < c.e_cut {
        e_new = 0.0;
    }
    if e_new < c.emin {
        e_new = c.emin;
    }

    let (p_new, bvc, pbvc) = calc_pressure(e_new, compression, vnewc, c);
    if delvc <= 0.0 {
        let ssc = sound_speed(pbvc, e_new, vnewc * vnewc, bvc, p_new, rho0);
        q_new = ssc * ql_old + qq_old;
        if q_new.abs() < c.q_cut {
            q_new = 0.0;
        }
    }

    let ss = sound_speed(pbvc, e_new, vnewc * vnewc, bvc, p_new, rho0);
    EosOut {
        p: p_new,
        e: e_new,
        q: q_new,
        ss,
    }
}

/// Evaluates the EOS of one element `rep` times, as the reference does to
/// model costlier materials. Every repetition starts from the same state and
/// gives the same result, so an optimising compiler may keep only one: GCC
/// does so for the reference at -O3 (its run time does not change with
/// `-c`), and LLVM does the same here.
#[inline(always)]
fn eval_eos_repeated(dom: &Domain, vnewc: &[f64], ielem: usize, rep: i32) -> EosOut {
    let inp = EosIn {
        e_old: dom.e[ielem],
        delvc: dom.delv[ielem],
        p_old: dom.p[ielem],
        q_old: dom.q[ielem],
        qq_old: dom.qq[ielem],
        ql_old: dom.ql[ielem],
        vnewc: vnewc[ielem],
    };
    let mut out = eval_eos_elem(inp, &dom.params);
    for _ in 1..rep {
        out = eval_eos_elem(inp, &dom.params);
    }
    out
}

/// The sound speed the EOS leaves in `ss` for an element whose final
/// energy, pressure and unclamped new relative volume are `e`, `p` and
/// `vnew`: the last `sound_speed` of [`eval_eos_elem`], with the same
/// operations, so bit for bit the same value (`ss` is a function of the
/// step's results and need not be preserved, see `crate::containment`).
pub(crate) fn sound_speed_after_eos(e: f64, p: f64, vnew: f64, c: &Params) -> f64 {
    let mut vnewc = vnew;
    if c.eosvmin != 0.0 && vnewc < c.eosvmin {
        vnewc = c.eosvmin;
    }
    if c.eosvmax != 0.0 && vnewc > c.eosvmax {
        vnewc = c.eosvmax;
    }
    let mut compression = 1.0 / vnewc - 1.0;
    if c.eosvmax != 0.0 && vnewc >= c.eosvmax {
        compression = 0.0;
    }
    let (_, bvc, pbvc) = calc_pressure(e, compression, vnewc, c);
    sound_speed(pbvc, e, vnewc * vnewc, bvc, p, c.refdens)
}

/// The relative volume [`update_volumes_for_elems`] commits for `vnew`.
pub(crate) fn committed_volume(vnew: f64, v_cut: f64) -> f64 {
    if (vnew - 1.0).abs() < v_cut {
        1.0
    } else {
        vnew
    }
}

/// Updates p, e, q and ss of every element, region by region with each
/// region's repetition count.
pub fn apply_material_properties_for_elems(
    dom: &mut Domain,
    ws: &mut Workspace,
    exec: &Exec,
) -> Result<(), LuleshError> {
    if dom.num_elem() == 0 {
        return Ok(());
    }
    let eosvmin = dom.params.eosvmin;
    let eosvmax = dom.params.eosvmax;
    let clamp = |mut v: f64| {
        if eosvmin != 0.0 && v < eosvmin {
            v = eosvmin;
        }
        if eosvmax != 0.0 && v > eosvmax {
            v = eosvmax;
        }
        v
    };
    for (c, &v) in ws.vnewc.iter_mut().zip(&dom.vnew) {
        *c = clamp(v);
    }
    // Representative of a check in the full code (the reference asks to keep it).
    if let Some(i) = dom.v.iter().position(|&v| clamp(v) <= 0.0) {
        return Err(LuleshError::Volume {
            elem: i,
            volume: dom.v[i],
            stage: "material properties",
            cycle: dom.ts.cycle,
        });
    }

    let lists = std::mem::take(&mut dom.regions.reg_elem_list);
    for (r, list) in lists.iter().enumerate() {
        let rep = dom.regions.repetitions(r);
        if exec.is_parallel() {
            let d: &Domain = dom;
            let vnewc = &ws.vnewc;
            let out = &mut ws.region_out[..list.len()];
            exec.for_each_split(out, |first, out| {
                for (o, &ielem) in out.iter_mut().zip(&list[first..]) {
                    let r = eval_eos_repeated(d, vnewc, ielem as usize, rep);
                    *o = [r.p, r.e, r.q, r.ss];
                }
                Ok(())
            })?;
            for (o, &ielem) in ws.region_out.iter().zip(list) {
                let i = ielem as usize;
                dom.p[i] = o[0];
                dom.e[i] = o[1];
                dom.q[i] = o[2];
                dom.ss[i] = o[3];
            }
        } else if rep >= 1 {
            for &ielem in list {
                let i = ielem as usize;
                let r = eval_eos_repeated(dom, &ws.vnewc, i, rep);
                dom.p[i] = r.p;
                dom.e[i] = r.e;
                dom.q[i] = r.q;
                dom.ss[i] = r.ss;
            }
        }
    }
    dom.regions.reg_elem_list = lists;
    Ok(())
}

/// Commits the new relative volumes, snapping values within `v_cut` of 1
/// (`UpdateVolumesForElems`).
pub fn update_volumes_for_elems(dom: &mut Domain) {
    let v_cut = dom.params.v_cut;
    for (v, &vnew) in dom.v.iter_mut().zip(&dom.vnew) {
        *v = committed_volume(vnew, v_cut);
    }
}
