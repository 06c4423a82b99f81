//! LULESH under Containment Domains (`--cd-config FILE.toml`): every time
//! step is one strict CD that spans all ranks, preserves the state the step
//! changes, and on a failure (a failed check, an injected soft error, a lost
//! rank) is restored and re-executed by every rank together, so the run ends
//! with exactly the numbers of a fault-free run.
//!
//! The tree:
//!
//! - the root CD (level 0, all ranks) is the whole run, started by
//!   [`cd_runtime::launch`]. It preserves the data no step changes once,
//!   after setup: the nodal masses (summed over ranks by a halo exchange)
//!   and the mesh (connectivity, boundary conditions, reference volumes,
//!   element masses, symmetry planes, regions, the node-to-corner index) by
//!   copy, the constants and the block layout by regeneration;
//! - the CD "step" (level 1, the root's ranks) is one cycle:
//!   `TimeIncrement` + `LagrangeLeapFrog` (or n cycles with `[cd.step]
//!   interval = n`, see [`cycles_per_step`]). It preserves what a cycle
//!   changes and reads again in the next: node positions and velocities
//!   (`preserve_slice`, a raw copy), element energy, pressure and viscosity
//!   (`preserve_slice`), and the time, time step, cycle count and the two
//!   time-step constraints (`preserve`). The relative volume and the sound
//!   speed a cycle begins with are functions of those (the committed volume
//!   of the positions, the EOS's sound speed of the final energy, pressure
//!   and volume): a re-execution regenerates them bit for bit instead of
//!   copying them every cycle. Everything else a cycle writes (forces,
//!   accelerations, gradients, `vnew`, `delv`, `vdov`, the characteristic
//!   lengths, the q terms, the scratch buffers) is recomputed before it is
//!   read.
//!
//! Detection: the cycle checks that the time step is positive and finite
//! and the time finite (`cd::check!`). A `VolumeError` or `QStopError`
//! still ends the run with its exit status, as without CDs.
//!
//! Halo exchanges need nothing preserved or reset: the receive buffers in
//! the pgas segment (which a rank loss wipes) are filled by the sender
//! before every read, no segment data lives from one cycle to the next, and
//! the arrival counters are back to zero on every rank at the end of every
//! cycle (see [`crate::distributed::halo_idle`], asserted here in debug
//! builds). A rank loss also takes the rank's locally preserved copies, so
//! a run that injects rank losses must keep the step's copies at a buddy
//! (`[cd.step] medium = "buddy"`); with `"local"` the loss escalates and the
//! run stops with an error instead of a wrong answer.
//!
//! ## Relaxed CDs: one rank re-executes
//!
//! With `kind = "relaxed"` for the CD "rank_step" ([`RANK_CD`], level 2) in
//! the configuration (`lulesh/configs/relaxed.toml`), every cycle is the
//! strict CD "step" as above and, inside it, one relaxed CD "rank_step" per
//! rank around the rank's cycle body (around the n cycles of a step with
//! `interval = n`: the step's agreement and copy, the inner CD's comparison
//! with them, come once per n cycles; a recovery replays n cycles' logs). The inner CD is entered with
//! [`cd::relaxed()`] when, and only when, the configuration says `relaxed` for
//! it (read once before the run with [`CdConfig::settings`]); without that
//! there is no inner CD and the run is exactly the strict one. This does not
//! depend on whether `kind` also turns a `cd::strict` call into a relaxed CD.
//! `logging` (default on) switches the relaxed CD's logging; without it a
//! failure of the relaxed CD escalates to "step".
//!
//! Access classes: the rank's arrays are Rust memory outside the pgas
//! segment, private by construction (nothing to declare: no other rank can
//! reach them); the halo receive buffers and arrival flags in the segment
//! receive the neighbours' puts and are *potentially shared* (the default:
//! logged by the senders, replayed into a recovering rank epoch by epoch).
//! The inner CD preserves the cycle state with the same calls as "step",
//! which the runtime turns into references to the parent's copies (no second
//! copy). A soft error in "rank_step" on rank F is then recovered by F
//! alone: it restores, replays its log (the time-step reduction's result,
//! its own puts squashed, the neighbours' puts re-applied), and every other
//! rank waits in the agreement of "step".
//!
//! Halo arrivals under relaxed CDs are flags, not rpcs
//! ([`distributed::Arrival::Flags`]): a recovery replays an incoming rpc by
//! running its function again on F, and the arrival rpc counts into rank
//! state no CD restores (it would count twice). The flags'
//! sequence numbers ([`distributed::halo_sequence`]) are preserved with the
//! cycle state so that a replayed exchange squashes exactly the puts it
//! logged.

use std::convert::Infallible;
use std::path::Path;

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdKindSetting, Interval, Report};
use pgas::{LaunchConfig, RpcTable};

use crate::distributed::{self, Arrival, FirstFailure};
use crate::domain::{Domain, Params};
use crate::eos;
use crate::error::LuleshError;
use crate::geometry::{calc_elem_volume, gather};
use crate::lagrange::Simulation;
use crate::layout::BlockLayout;
use crate::options::Options;
use crate::verify::FinalReport;

/// Name of the per-cycle CD (its table in the configuration is `[cd.step]`).
pub const STEP_CD: &str = "step";

/// Name of the per-rank CD inside "step" (`[cd.rank_step]`; level 2): a
/// relaxed CD when the configuration says `kind = "relaxed"` for it, absent
/// otherwise.
pub const RANK_CD: &str = "rank_step";

/// Whether `config` asks for the relaxed per-rank CD [`RANK_CD`].
pub fn relaxed_configured(config: &CdConfig) -> bool {
    config.settings(RANK_CD, 2).kind == Some(CdKindSetting::Relaxed)
}

/// Segment of a one-rank CD job (the rank exchanges no halos).
const SOLO_SEGMENT_BYTES: usize = 1 << 20;

/// What a run under CDs returns.
#[derive(Debug, Clone)]
pub struct CdRunOutput {
    /// Rank 0's report, as without CDs.
    pub report: FinalReport,
    /// The CD report, summed over ranks (print it with [`Report::table`]).
    pub cd_report: Report,
}

/// Reads the CD configuration of `--cd-config`; the error names the file,
/// line and key at fault.
pub fn load_config(path: &Path) -> Result<CdConfig, LuleshError> {
    CdConfig::from_file(path).map_err(|e| LuleshError::CdConfig(format!("--cd-config: {e}")))
}

/// The CD configuration of a run, by the rule of every binary
/// ([`CdConfig::for_program`]): `--cd-config`, else the file named by
/// `CD_CONFIG`, else none (a run without CDs).
pub fn program_config(cli: Option<&Path>) -> Result<Option<CdConfig>, LuleshError> {
    CdConfig::for_program(cli).map_err(|e| LuleshError::CdConfig(e.to_string()))
}

/// `config` with what a checkpoint records of this run (the options that shape the state; `-i`
/// may differ in a relaunch that goes further) and the restart `--restart` or `CD_RESTART`
/// asks for (which needs a CD configuration).
pub fn restartable(
    config: Option<CdConfig>,
    opts: &Options,
) -> Result<Option<CdConfig>, LuleshError> {
    let restart = cd::RestartFrom::for_program(opts.restart.as_deref());
    let Some(mut c) = config else {
        return match restart {
            Some(_) => Err(LuleshError::CdConfig(
                "--restart (or CD_RESTART) resumes a run under Containment Domains: give its \
                 --cd-config too"
                    .into(),
            )),
            None => Ok(None),
        };
    };
    c.program = format!(
        "lulesh -s {} -r {} -b {} -c {}",
        opts.nx, opts.num_reg, opts.balance, opts.cost
    );
    c.restart = restart;
    Ok(Some(c))
}

/// Preserves, in the current CD, the data a cycle changes and reads again
/// in the next (in a re-execution: restores it).
fn preserve_cycle_state(c: &cd::Cd, d: &mut Domain, relaxed: bool) {
    // One batch: on the xor medium the group encodes all of it in one round.
    c.preserve_batch(|c| preserve_cycle_entries(c, d, relaxed, false));
}

/// The entries of [`preserve_cycle_state`]; the arrays `by_reference` to the parent's copies
/// (the relaxed CD right inside "step", which just preserved them: nothing copied or compared).
fn preserve_cycle_entries(c: &cd::Cd, d: &mut Domain, relaxed: bool, by_reference: bool) {
    if relaxed {
        let mut seq = distributed::halo_sequence();
        c.preserve("halo_sequence", &mut seq);
        distributed::set_halo_sequence(seq);
    }
    let Domain {
        x,
        y,
        z,
        xd,
        yd,
        zd,
        e,
        p,
        q,
        ts,
        ..
    } = d;
    for (name, field) in [
        ("x", x),
        ("y", y),
        ("z", z),
        ("xd", xd),
        ("yd", yd),
        ("zd", zd),
        ("e", e),
        ("p", p),
        ("q", q),
    ] {
        if by_reference {
            c.preserve_slice_reference(name, field);
        } else {
            c.preserve_slice(name, field);
        }
    }
    c.preserve("time", &mut ts.time);
    c.preserve("deltatime", &mut ts.deltatime);
    c.preserve("cycle", &mut ts.cycle);
    c.preserve("dtcourant", &mut ts.dtcourant);
    c.preserve("dthydro", &mut ts.dthydro);
}

/// Recomputes the relative volumes and sound speeds a cycle begins with
/// from the preserved positions, energies and pressures (after they are
/// restored, before a re-execution): the previous cycle left in `v` the
/// committed volume of its positions and in `ss` the sound speed of its
/// final energy, pressure and volume, computed by the same operations here,
/// so the values are bit for bit those of the first execution. The first
/// cycle begins from the initial `v = 1`, `ss = 0`.
///
/// Regenerating them instead of copying saves two of the eleven arrays a
/// cycle would preserve (18% of the copy, the bulk of the CDs' failure-free
/// cost) at the price of one volume evaluation per element per re-execution.
fn regenerate_volume_and_sound_speed(d: &mut Domain) {
    if d.ts.cycle == 0 {
        d.v.fill(1.0);
        d.ss.fill(0.0);
        return;
    }
    let Domain {
        params,
        nodelist,
        x,
        y,
        z,
        volo,
        e,
        p,
        v,
        ss,
        ..
    } = d;
    for (k, nodes) in nodelist.iter().enumerate() {
        let volume = calc_elem_volume(&gather(nodes, x), &gather(nodes, y), &gather(nodes, z));
        let vnew = volume / volo[k];
        v[k] = eos::committed_volume(vnew, params.v_cut);
        ss[k] = eos::sound_speed_after_eos(e[k], p[k], vnew, params);
    }
}

/// Preserves, in the current (root) CD, the data no cycle changes.
fn preserve_read_only(c: &cd::Cd, d: &mut Domain, nx: usize) {
    c.preserve_slice("nodal_mass", &mut d.nodal_mass);
    c.preserve_slice("volo", &mut d.volo);
    c.preserve_slice("elem_mass", &mut d.elem_mass);
    c.preserve_slice("nodelist", &mut d.nodelist);
    for (name, list) in [
        ("lxim", &mut d.lxim),
        ("lxip", &mut d.lxip),
        ("letam", &mut d.letam),
        ("letap", &mut d.letap),
        ("lzetam", &mut d.lzetam),
        ("lzetap", &mut d.lzetap),
        ("symm_x", &mut d.symm_x),
        ("symm_y", &mut d.symm_y),
        ("symm_z", &mut d.symm_z),
        ("node_elem_start", &mut d.node_elem_start),
        ("node_elem_corner_list", &mut d.node_elem_corner_list),
    ] {
        c.preserve_slice(name, list);
    }
    c.preserve_slice("elem_bc", &mut d.elem_bc);
    c.preserve_slice("reg_num_list", &mut d.regions.reg_num_list);
    c.preserve("reg_elem_list", &mut d.regions.reg_elem_list);
    let ts = &mut d.ts;
    for (name, value) in [
        ("stoptime", &mut ts.stoptime),
        ("dtmax", &mut ts.dtmax),
        ("dtfixed", &mut ts.dtfixed),
        ("deltatimemultlb", &mut ts.deltatimemultlb),
        ("deltatimemultub", &mut ts.deltatimemultub),
    ] {
        c.preserve(name, value);
    }
    c.preserve_regenerate("params", &mut d.params, Params::default);
    let (num_ranks, rank) = (d.layout.num_ranks, d.layout.rank);
    c.preserve_regenerate("layout", &mut d.layout, move || {
        BlockLayout::decompose(num_ranks, rank, nx).expect("the layout of a running block")
    });
}

/// Cycles one execution of "step" spans: `[cd.step] interval = n` (default: every cycle is
/// one execution). A failure that escalates to "step" re-executes its n cycles from the state
/// preserved before the first; a relaxed "rank_step" spans the same n cycles, so the
/// agreement of "step" and its preservation come once per n cycles.
pub fn cycles_per_step(config: &CdConfig) -> Result<StepInterval, LuleshError> {
    let settings = config.settings(STEP_CD, 1);
    match settings.interval {
        Interval::Every => Ok(StepInterval::Fixed(1)),
        Interval::Steps(n) => u32::try_from(n).map(StepInterval::Fixed).map_err(|_| {
            LuleshError::CdConfig(format!(
                "[cd.step] interval = {n}: at most {} cycles",
                u32::MAX
            ))
        }),
        // The configuration refuses "daly" without `mtbf_seconds`.
        Interval::Daly => Ok(StepInterval::Daly {
            mtbf_seconds: settings.mtbf_seconds.unwrap_or(f64::INFINITY),
        }),
    }
}

/// How many cycles an execution of "step" spans.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepInterval {
    /// `interval = n` (or every cycle: 1).
    Fixed(u32),
    /// `interval = "daly"`: the first execution runs one cycle and measures the step's
    /// preservation time δ and the cycle's time t (the largest over the ranks); the later ones
    /// run n cycles, n = round(τ / t) with Daly's τ for δ and `mtbf_seconds`
    /// ([`cd::daly_steps`], which the CD report prints).
    Daly {
        /// M, the configured mean time between the failures "step" contains.
        mtbf_seconds: f64,
    },
}

/// How a run under CDs steps: the fixed arguments of [`cycles`].
struct Stepping<'a> {
    fail: &'a dyn Fn(LuleshError) -> Infallible,
    relaxed: bool,
    /// The relaxed CD's configured medium is the local one.
    inner_local: bool,
    /// Cycles per execution of "step" ([`cycles_per_step`]; 1 until Daly's interval is
    /// chosen).
    per_step: std::cell::Cell<u32>,
    /// `interval = "daly"` not chosen yet: M, and the last execution's preservation and cycle
    /// times (ns).
    daly: std::cell::Cell<Option<(f64, (u64, u64))>>,
    max_cycles: i32,
    /// Called after every cycle the first time it completes (a re-execution of "step"
    /// repeats cycles already reported, with the same numbers).
    progress: &'a dyn Fn(&Domain),
    /// The last cycle reported.
    reported: std::cell::Cell<i32>,
}

/// Up to `per_step` cycles (`TimeIncrement` + `LagrangeLeapFrog`, fewer if the run ends) as
/// one execution of the strict CD "step", spanning the ranks of its parent, the root: all of
/// them; with `relaxed`, they run in one relaxed CD [`RANK_CD`] per rank inside it.
/// A `VolumeError` or `QStopError` goes to `fail`, which ends the run.
#[cd::strict(name = "step")]
fn cycles(sim: &mut Simulation, how: &Stepping) -> Result<(), cd::CdError> {
    let c = cd::current();
    let start = std::time::Instant::now();
    preserve_cycle_state(&c, &mut sim.domain, how.relaxed);
    let preserved = start.elapsed();
    let out = cycles_after_preservation(sim, how, &c);
    if let Some((m, _)) = how.daly.get() {
        // This execution's δ and t; the last execution's are the ones measured.
        let t = start.elapsed().saturating_sub(preserved);
        how.daly.set(Some((
            m,
            (preserved.as_nanos() as u64, t.as_nanos() as u64),
        )));
    }
    out
}

/// Chooses the cycles per execution of "step" after its first execution, with
/// `interval = "daly"` (collective over the ranks of the root).
fn after_step(how: &Stepping) {
    if let Some((mtbf, measured)) = how.daly.take() {
        let n = cd::daly_steps(STEP_CD, measured, mtbf, u64::MAX);
        how.per_step.set(u32::try_from(n).unwrap_or(u32::MAX));
    }
}

/// [`cycles`] after the step's preservation.
fn cycles_after_preservation(
    sim: &mut Simulation,
    how: &Stepping,
    c: &cd::Cd,
) -> Result<(), cd::CdError> {
    if how.relaxed {
        // With `dependency_tracking`, an escalation re-executes only the ranks that depend on
        // the failed one: they start from the flags of the cycle's begin, and the others'
        // flag puts are replayed into them with the same generation.
        if let Some((flags, n)) = distributed::arrival_flags() {
            c.preserve_incoming("arrival_flags", flags, n);
        }
    }
    if c.is_reexecution() {
        regenerate_volume_and_sound_speed(&mut sim.domain);
        if !c.is_limited_reexecution() {
            distributed::next_halo_generation();
        }
    }
    if !how.relaxed {
        return cycle_run(sim, how);
    }
    cd::relaxed(RANK_CD, |r| {
        // On the local medium, references to the copies "step" just made: nothing copied
        // or compared. (On another medium, e.g. the buddy's for a rank loss, its own copies.)
        preserve_cycle_entries(r, &mut sim.domain, true, how.inner_local);
        if r.is_reexecution() {
            regenerate_volume_and_sound_speed(&mut sim.domain);
        }
        cycle_run(sim, how)
    })
}

/// The cycles of one execution of "step", in whichever CD runs them; reports each cycle the
/// first time it completes.
fn cycle_run(sim: &mut Simulation, how: &Stepping) -> Result<(), cd::CdError> {
    for k in 0..how.per_step.get() {
        if k > 0 && !sim.running(how.max_cycles) {
            break;
        }
        cycle_body(sim, how.fail)?;
        let cycle = sim.domain.ts.cycle;
        if cycle > how.reported.get() {
            how.reported.set(cycle);
            (how.progress)(&sim.domain);
        }
    }
    Ok(())
}

/// The body of a cycle, in whichever CD runs it.
#[allow(unreachable_code)] // `fail` never returns
fn cycle_body(
    sim: &mut Simulation,
    fail: &dyn Fn(LuleshError) -> Infallible,
) -> Result<(), cd::CdError> {
    if let Err(e) = sim.step() {
        match fail(e) {}
    }
    let ts = &sim.domain.ts;
    cd::check!(ts.deltatime.is_finite() && ts.deltatime > 0.0 && ts.time.is_finite());
    debug_assert!(
        distributed::halo_idle(),
        "a halo message of this cycle is unconsumed at its end"
    );
    Ok(())
}

/// Runs `opts` on `ranks` ranks (1, or a cube) under Containment Domains
/// configured by `config`, and returns rank 0's report and the CD report if
/// this process ran rank 0: always on the smp conduit, only in rank 0's
/// process under mpi (`None` in the others). `progress` runs on rank 0 after
/// each completed cycle.
///
/// The CD report is returned, not printed (`config.report` is ignored);
/// `config.report_file` is written.
pub fn run(
    opts: &Options,
    ranks: usize,
    mut config: CdConfig,
    progress: impl Fn(&Domain) + Sync,
) -> Result<Option<CdRunOutput>, LuleshError> {
    let nx = opts.nx as usize;
    let num_ranks = i32::try_from(ranks).map_err(|_| LuleshError::NotACube(i32::MAX))?;
    let job = if ranks == 1 {
        BlockLayout::decompose(1, 0, nx)?;
        LaunchConfig::new(1).segment_bytes(SOLO_SEGMENT_BYTES)
    } else {
        distributed::launch_config(ranks, nx)?
    };
    config.report = false;
    let relaxed = relaxed_configured(&config);
    let inner_local = config.settings(RANK_CD, 2).medium == cd_runtime::Medium::Local;
    let per_step = cycles_per_step(&config)?;
    let arrival = if relaxed {
        Arrival::Flags
    } else {
        Arrival::Rpc
    };
    let failure = FirstFailure::default();

    let outcome = cd::launch(&job, config, RpcTable::new(), || {
        let mut sim = distributed::start_rank(opts, ranks, ranks == 1, arrival, &failure);
        preserve_read_only(&cd::current(), &mut sim.domain, nx);
        let rank0 = pgas::rank_me() == 0;
        let fail = |e| -> Infallible { failure.fail(e) };
        let report = |dom: &Domain| {
            if rank0 {
                progress(dom)
            }
        };
        let how = Stepping {
            fail: &fail,
            relaxed,
            inner_local,
            per_step: std::cell::Cell::new(match per_step {
                StepInterval::Fixed(n) => n,
                StepInterval::Daly { .. } => 1,
            }),
            daly: std::cell::Cell::new(match per_step {
                StepInterval::Fixed(_) => None,
                StepInterval::Daly { mtbf_seconds } => Some((mtbf_seconds, (0, 0))),
            }),
            max_cycles: opts.its,
            progress: &report,
            reported: std::cell::Cell::new(sim.domain.ts.cycle),
        };
        let elapsed = sim.run_with(
            opts.its,
            |sim| {
                cycles(sim, &how)?;
                after_step(&how);
                Ok::<(), cd::CdError>(())
            },
            |_| {},
        )?;
        Ok(rank0.then(|| FinalReport::new(&sim.domain, elapsed, opts.nx, num_ranks)))
    });
    match outcome {
        Ok(out) => {
            // The CD report (summed over the ranks, in every process) goes with rank 0's report.
            let cd_report = out.report;
            Ok(distributed::rank0_result(out.results)
                .map(|report| CdRunOutput { report, cd_report }))
        }
        // Checked against the job before it starts (exact faults on ranks
        // the job does not have, an unusable `file_dir` or `report_file`).
        Err(cd::CdLaunchError::Config(e)) => Err(LuleshError::CdConfig(e.to_string())),
        Err(e) => Err(failure.or(|| LuleshError::Cd(e.to_string()))),
    }
}
