//! The benchmark driver: problem sizing from the command-line arguments, setup, the timed
//! FMG solves at h, 2h and 4h, the performance summary and the Richardson error analysis.

use crate::containment::Containment;
use crate::error::HpgmgError;
use crate::format::fmt_e;
use crate::held_report::ReportOut;
use crate::level::{Level, VECTOR_F, VECTOR_U, VECTORS_RESERVED};
use crate::mg::{MgHierarchy, SOLVE_CD, print_create_level, print_rebuild};
use crate::operator::STENCIL_RADIUS;
use crate::problem::initialize_problem;
use crate::progress::{PROGRESS, Progress};
use crate::restriction::{RestrictionType, restriction};
use crate::vectors::zero_vector;
use cd_runtime as cd;
use std::io::Write;

/// Largest coarsest-grid dimension the problem sizing accepts.
pub const MAX_COARSE_DIM: i64 = 11;
/// Solves per level in each of the warm-up and timed passes.
pub const MIN_SOLVES: usize = 10;
/// Number of problem sizes benchmarked (h, 2h, 4h).
pub const DYNAMIC_RANGE: usize = 3;

/// A validated run configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// log2 of the cells per box side.
    pub log2_box_dim: i32,
    /// Boxes per side of the cubic domain.
    pub boxes_in_i: i32,
    /// Ranks the finest level is distributed over.
    pub num_ranks: usize,
    /// Solves per level in each of the warm-up and timed passes.
    pub solves: usize,
    /// The Containment Domains of every solve (with CDs the run must be inside
    /// `cd_runtime::launch`).
    pub containment: Containment,
    /// V-cycles after each F-cycle at most, until converged (0: the reference's default;
    /// [`crate::mg::UNLIMITED_FMG_VCYCLES`] with `--unlimit-fmg-iterations`).
    pub max_vcycles: usize,
    /// Threads per rank for the operator kernels (`--threads`).
    pub threads: usize,
    /// The report held in memory and written whole at the run's end (a run over spare
    /// processes, whose rank 0 may run its body again: `crate::held_report`).
    pub hold_report: bool,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Residual norm at the end of the Richardson solves at h, 2h, 4h (after the F-cycle, or
    /// after the last V-cycle when V-cycles follow it).
    pub norms: [f64; DYNAMIC_RANGE],
    /// Average seconds per solve at h, 2h, 4h.
    pub seconds: [f64; DYNAMIC_RANGE],
    /// Degrees of freedom at h, 2h, 4h.
    pub dofs: [f64; DYNAMIC_RANGE],
    /// Richardson error ||u^2h - R u^h||max.
    pub error: f64,
    /// Estimated order of convergence.
    pub order: f64,
}

/// Validates the arguments and finds the largest cube of at most `target_boxes_per_rank`
/// boxes whose grid coarsens to at most `MAX_COARSE_DIM` cells per side.
pub fn configure(
    log2_box_dim: i64,
    target_boxes_per_rank: i64,
    num_ranks: usize,
) -> Result<Config, HpgmgError> {
    if log2_box_dim > 9 {
        return Err(HpgmgError::BoxDimTooLarge);
    }
    if log2_box_dim < 4 {
        return Err(HpgmgError::BoxDimTooSmall);
    }
    if target_boxes_per_rank < 1 {
        return Err(HpgmgError::TooFewBoxes);
    }
    let box_dim = 1i64 << log2_box_dim;
    let target_boxes = target_boxes_per_rank * num_ranks as i64;
    let mut boxes_in_i = -1;
    for bi in 1..1000i64 {
        if bi * bi * bi <= target_boxes {
            let mut coarse = box_dim * bi;
            while coarse % 2 == 0 {
                coarse /= 2;
            }
            if coarse <= MAX_COARSE_DIM {
                boxes_in_i = bi;
            }
        }
    }
    if boxes_in_i < 1 {
        return Err(HpgmgError::NoProblemSize);
    }
    let boxes = (boxes_in_i * boxes_in_i * boxes_in_i) as usize;
    if boxes < num_ranks {
        return Err(HpgmgError::TooManyRanks {
            ranks: num_ranks,
            boxes,
        });
    }
    // Every level's vectors (the coarser levels add at most 1/7 of the finest level's) on
    // every rank of this machine, against the memory available.
    let side = (box_dim + 2 * STENCIL_RADIUS as i64) as f64;
    let need = boxes as f64 * side.powi(3) * 8.0 * (VECTORS_RESERVED as f64) * 8.0 / 7.0;
    if let Some(avail) = available_memory() {
        if need > avail as f64 {
            return Err(HpgmgError::OutOfMemory {
                need_mib: (need / 1048576.0) as u64,
                have_mib: avail / 1048576,
            });
        }
    }
    Ok(Config {
        log2_box_dim: log2_box_dim as i32,
        boxes_in_i: boxes_in_i as i32,
        num_ranks,
        solves: MIN_SOLVES,
        containment: Containment::Off,
        max_vcycles: 0,
        threads: 1,
        hold_report: false,
    })
}

/// Bytes of memory available to this machine's processes (Linux `MemAvailable`).
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Runs the whole benchmark for `cfg`, printing the reference's report to `out` (in one piece
/// at the end with [`Config::hold_report`]).
pub fn run(cfg: Config, out: &mut impl Write) -> std::io::Result<Report> {
    let mut out = ReportOut::new(out, cfg.hold_report);
    let report = run_to(cfg, &mut out)?;
    out.finish()?;
    Ok(report)
}

/// [`run`], its report written to `out`.
fn run_to<W: Write>(cfg: Config, out: &mut ReportOut<'_, W>) -> std::io::Result<Report> {
    let (a, b) = (0.0f64, 1.0f64);
    writeln!(out, "\n")?;
    writeln!(
        out,
        "********************************************************************************"
    )?;
    writeln!(
        out,
        "***                            HPGMG-FV Benchmark                            ***"
    )?;
    writeln!(
        out,
        "********************************************************************************"
    )?;
    crate::kernels::set_threads(cfg.threads).map_err(std::io::Error::other)?;
    writeln!(
        out,
        "{} MPI Tasks of {} threads",
        cfg.num_ranks,
        crate::kernels::threads()
    )?;
    writeln!(
        out,
        "\n\n===== Benchmark setup =========================================================="
    )?;

    let box_dim = 1 << cfg.log2_box_dim;
    let mut fine = Level::new(
        cfg.boxes_in_i,
        box_dim,
        STENCIL_RADIUS,
        VECTORS_RESERVED,
        if pgas::in_launch() {
            pgas::rank_me()
        } else {
            0
        },
        cfg.num_ranks,
    );
    let h = 1.0 / (cfg.boxes_in_i as f64 * box_dim as f64);
    print_create_level(out, &fine)?;
    writeln!(out, "  Creating Poisson (a={a:.6}, b={b:.6}) test problem")?;
    initialize_problem(&mut fine, h);
    print_rebuild(out, &fine)?;
    let mut mg = MgHierarchy::create(fine, 1, out)?;
    if cfg.containment.is_on() {
        // A rerun after a lost process takes the operators back (a replacement from its
        // buddy's copy) instead of every rank computing them again.
        let operators = cd::setup_once("hpgmg.operators", || {
            mg.rebuild_operators(b);
            mg.operators()
        });
        mg.set_operators(operators);
    } else {
        mg.rebuild_operators(b);
    }
    mg.print_rebuilds(out)?;
    mg.containment = cfg.containment;
    mg.max_vcycles = cfg.max_vcycles;
    // A relaunch from a checkpoint skips the solves before the resumed one (`progress.rs`).
    let (resume_at, mut progress) = if cfg.containment.is_on() {
        resumed()?
    } else {
        (0, Progress::new(DYNAMIC_RANGE))
    };
    // A held report takes up the resumed solve's text when the run reaches it.
    let mut printed = progress.printed.take();
    mg.progress = progress;
    // The index of the next solve of the run, the iteration of its CD.
    let next = std::cell::Cell::new(0u64);
    let mut solve = |mg: &mut MgHierarchy, l: usize, out: &mut ReportOut<'_, W>| {
        let index = next.get();
        next.set(index + 1);
        if index < resume_at {
            return Ok(None);
        }
        if let Some(text) = printed.take() {
            out.resume_from(&text);
        }
        // Kept with the solve's preserved state (its CD preserves `mg.progress`).
        mg.progress.printed = out.held();
        zero_vector(&mut mg.levels[l], VECTOR_U);
        mg.fmg_solve(l, VECTOR_U, VECTOR_F, b, out).map(Some)
    };

    for l in 0..DYNAMIC_RANGE {
        if l > 0 {
            restrict_f(&mut mg, l);
        }
        for timed in [false, true] {
            if timed {
                writeln!(
                    out,
                    "\n\n===== Running {} solves ========================================================",
                    cfg.solves
                )?;
            } else {
                writeln!(
                    out,
                    "\n\n===== Warming up by running {} solves ==========================================",
                    cfg.solves
                )?;
            }
            mg.reset_timers();
            for _ in 0..cfg.solves {
                solve(&mut mg, l, &mut *out)?;
            }
        }
        let bottom = mg.levels.len() - 1;
        if next.get() > resume_at {
            // The timed pass ran here (at least its last solve): its timers are this level's.
            let p = &mut mg.progress;
            p.seconds[l] = mg.solve_seconds / mg.solves_performed as f64;
            p.vcycles[l] = mg.levels[l].vcycles_from_this_level / mg.solves_performed;
            p.bottom[l] = mg.levels[bottom].krylov_iterations / mg.solves_performed;
        }
        let p = &mg.progress;
        writeln!(
            out,
            "\n\n===== Timing Breakdown =========================================================\n\n"
        )?;
        writeln!(
            out,
            "   Total time in MGBuild  {:12.6} seconds",
            mg.build_seconds
        )?;
        writeln!(
            out,
            "   Total time in MGSolve  {:12.6} seconds",
            p.seconds[l]
        )?;
        writeln!(out, "      number of v-cycles  {:12}", p.vcycles[l])?;
        writeln!(out, "Bottom solver iterations  {:12}\n\n", p.bottom[l])?;
    }
    let seconds: [f64; DYNAMIC_RANGE] = std::array::from_fn(|l| mg.progress.seconds[l]);

    writeln!(
        out,
        "\n\n===== Performance Summary ======================================================"
    )?;
    let mut dofs = [0.0; DYNAMIC_RANGE];
    for l in 0..DYNAMIC_RANGE {
        let d = mg.levels[l].dim as f64;
        dofs[l] = d * d * d;
        writeln!(
            out,
            "  h={}  DOF={}  time={:.6}  DOF/s={}  MPI={}  OMP={}",
            fmt_e(mg.levels[l].h, 15),
            fmt_e(dofs[l], 15),
            seconds[l],
            fmt_e(dofs[l] / seconds[l], 3),
            cfg.num_ranks,
            crate::kernels::threads()
        )?;
    }

    writeln!(
        out,
        "\n\n===== Richardson error analysis ================================================"
    )?;
    mg.reset_timers();
    // The error below reads every level's solution: each solve keeps the finer ones.
    mg.finer_solutions_kept = true;
    for l in 0..DYNAMIC_RANGE {
        if l > 0 {
            restrict_f(&mut mg, l);
        }
        if let Some((norm, _)) = solve(&mut mg, l, &mut *out)? {
            mg.progress.norms[l] = norm;
        }
    }
    let norms: [f64; DYNAMIC_RANGE] = std::array::from_fn(|l| mg.progress.norms[l]);
    let (error, order) = mg.richardson_error(0, VECTOR_U, out)?;
    writeln!(
        out,
        "\n\n===== Done ====================================================================="
    )?;
    Ok(Report {
        norms,
        seconds,
        dofs,
        error,
        order,
    })
}

/// Where this launch resumes (inside a CD launch): the index of the first solve to run (0 in
/// a run from the beginning) and the progress of the solves before it.
fn resumed() -> std::io::Result<(u64, Progress)> {
    let Some(at) = cd::restarted() else {
        return Ok((0, Progress::new(DYNAMIC_RANGE)));
    };
    if at.cd != SOLVE_CD {
        return Err(std::io::Error::other(format!(
            "the checkpoint resumes the CD {:?}; hpgmg resumes at a solve: checkpoint the CD \
             {SOLVE_CD:?} (`checkpoint` in [cd.{SOLVE_CD}])",
            at.cd
        )));
    }
    let progress: Progress = cd::restarted_value(PROGRESS).ok_or_else(|| {
        std::io::Error::other(format!(
            "the checkpoint of {SOLVE_CD:?} holds no `{PROGRESS}`: not written by hpgmg"
        ))
    })?;
    Ok((at.iteration, progress))
}

/// F on level `l` = R F on level `l - 1`.
fn restrict_f(mg: &mut MgHierarchy, l: usize) {
    let (lo, hi) = mg.levels.split_at_mut(l);
    restriction(
        &mut hi[0],
        VECTOR_F,
        &lo[l - 1],
        VECTOR_F,
        RestrictionType::Cell,
    );
}
