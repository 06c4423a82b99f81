//! The multigrid hierarchy (coarsening rules of the reference's true distributed V-cycle),
//! the V-cycle, the FMG F-cycle solve (optionally followed by V-cycles until converged) and
//! the Richardson error analysis.

use cd_runtime as cd;

use crate::bicgstab::{BICGSTAB_NUM_VECTORS, bicgstab};
use crate::comm::world_ranks;
use crate::containment::{Containment, Smoothing};
use crate::format::fmt_e;
use crate::interpolation::{interpolation_v2, interpolation_v4};
use crate::level::{
    GridBox, Level, VECTOR_BETA_I, VECTOR_BETA_J, VECTOR_BETA_K, VECTOR_DINV, VECTOR_R, VECTOR_TEMP,
};
use crate::operator::{STENCIL_RADIUS, rebuild_operator, residual};
use crate::progress::{PROGRESS, Progress};
use crate::restriction::{RestrictionType, build_transfer, restriction};
use crate::vectors::{add_vectors, norm, scale_vector, zero_vector};
use std::io::Write;
use std::time::Instant;

/// Boxes larger than this are halved before boxes are agglomerated.
pub const MG_AGGLOMERATION_START: i32 = 8;
/// Residual reduction the bottom solver aims for.
pub const MG_DEFAULT_BOTTOM_NORM: f64 = 1e-3;
/// A solve has converged when ||F - A u|| / ||F|| is below this (the reference's `rtol`).
pub const RTOL: f64 = 1e-10;
/// V-cycles after the F-cycle at most, when they are asked for (the reference's
/// `maxVCycles` under `-DUNLIMIT_FMG_ITERATIONS`).
pub const UNLIMITED_FMG_VCYCLES: usize = 20;

/// The vectors the operators' rebuild computes: the face coefficients and D^{-1}.
pub const OPERATOR_VECTORS: [usize; 4] = [VECTOR_BETA_I, VECTOR_BETA_J, VECTOR_BETA_K, VECTOR_DINV];

/// Every level's operator (level, box, vector), as [`MgHierarchy::operators`] takes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LevelVectors(Vec<Vec<Vec<Vec<f64>>>>);

/// The levels of the hierarchy, finest first, with solve statistics.
#[derive(Debug)]
pub struct MgHierarchy {
    /// Levels, finest first.
    pub levels: Vec<Level>,
    /// Solves since the last reset.
    pub solves_performed: usize,
    /// Seconds spent in solves since the last reset.
    pub solve_seconds: f64,
    /// Seconds spent building the hierarchy.
    pub build_seconds: f64,
    /// The Containment Domains of every solve (a run with CDs is inside
    /// `cd_runtime::launch`).
    pub containment: Containment,
    /// V-cycles after each solve's F-cycle at most, until ||F - A u|| / ||F|| < [`RTOL`]
    /// (0: the F-cycle alone, the reference's default).
    pub max_vcycles: usize,
    /// The driver's record of the solves done, preserved by every solve CD so that a
    /// checkpoint of it carries the record to a relaunch ([`crate::progress`]).
    pub progress: Progress,
    /// The solutions of the levels finer than a solve's are read after it (the Richardson
    /// analysis): its CD preserves them, so that a relaunch resuming at it has them.
    pub finer_solutions_kept: bool,
}

/// Name of the per-solve CD (its table in a CD configuration is `[cd.solve]`).
pub const SOLVE_CD: &str = "solve";
/// Name of the per-V-cycle CD inside a solve (`[cd.level]`): the F-cycle's step on each
/// level, and each V-cycle after the F-cycle.
pub const LEVEL_CD: &str = "level";

/// Preserves (or, in a re-execution, restores) vector `id` of every box of `level`.
fn preserve_vector(c: &cd::Cd, level: &mut Level, id: usize, name: &str) {
    for bx in level.boxes.iter_mut() {
        c.preserve_slice(&format!("{name}.{}", bx.global_id), &mut bx.vectors[id]);
    }
}

/// Preserves the per-level statistics a solve increments (printed in the timing breakdown).
fn preserve_counters(c: &cd::Cd, levels: &mut [Level]) {
    let mut counters: Vec<u64> = levels
        .iter()
        .flat_map(|l| [l.krylov_iterations as u64, l.vcycles_from_this_level as u64])
        .collect();
    c.preserve_slice("counters", &mut counters);
    for (l, pair) in levels.iter_mut().zip(counters.chunks_exact(2)) {
        l.krylov_iterations = pair[0] as usize;
        l.vcycles_from_this_level = pair[1] as usize;
    }
}

/// What a dependency-limited re-execution of "level" by some ranks (an SPBC cluster) must
/// find as it was at the level's begin: every plan's execution count, so that its messages
/// carry the sequence numbers of the first execution, as the replayed messages from the ranks
/// that do not re-execute do; and every arrival flag, so that no flag of the first execution
/// is taken for a message of the re-execution (`Cd::preserve_incoming`). A re-execution of
/// every rank keeps the counts it reached instead: fresh sequence numbers, no stale flag met.
/// A "level" CD from level `from` uses the plans of `from` and the coarser levels only.
fn preserve_plans(c: &cd::Cd, levels: &[Level], from: usize) {
    let used = &levels[from..];
    let mut counts: Vec<u64> = used.iter().flat_map(Level::plan_executions).collect();
    c.preserve_slice("plan_executions", &mut counts);
    if c.is_limited_reexecution() {
        let mut counts = counts.into_iter();
        for l in used {
            l.set_plan_executions(&mut counts);
        }
    }
    for (i, l) in used.iter().enumerate() {
        for (k, (flags, len)) in l.plan_flags().into_iter().enumerate() {
            c.preserve_incoming(&format!("flags.{}.{k}", from + i), flags, len);
        }
    }
}

/// A CD failure that escalated past the solve: the run stops instead of giving a wrong answer.
fn escalated(e: cd::CdError) -> std::io::Error {
    std::io::Error::other(format!("containment failed: {e}"))
}

/// Mutable access to level `l` and level `l + 1`.
fn pair(levels: &mut [Level], l: usize) -> (&mut Level, &mut Level) {
    let (lo, hi) = levels.split_at_mut(l + 1);
    (&mut lo[l], &mut hi[0])
}

/// One coarse level's shape: (ranks, cells per side, boxes per side, cells per box side).
#[derive(Debug, Clone, Copy)]
struct Shape {
    ranks: usize,
    dim: i32,
    boxes_in: i32,
    box_dim: i32,
}

/// The reference's coarsening rules (true V-cycle): halve boxes while large, then
/// agglomerate 8:1, then gather onto one box, never below the stencil radius.
fn coarse_shapes(fine: &Level, min_coarse_dim: i32) -> Vec<Shape> {
    let mut max_levels = 1;
    let mut coarse_dim = fine.dim;
    while coarse_dim >= 2 * min_coarse_dim && coarse_dim & 1 == 0 {
        max_levels += 1;
        coarse_dim /= 2;
    }
    let r = STENCIL_RADIUS;
    let mut shapes = vec![Shape {
        ranks: fine.num_ranks,
        dim: fine.dim,
        boxes_in: fine.boxes_in,
        box_dim: fine.box_dim,
    }];
    let mut do_restrict = max_levels >= 2;
    while do_restrict {
        let f = *shapes.last().expect("fine");
        let next = if f.box_dim % 2 == 0 && f.box_dim > MG_AGGLOMERATION_START && f.box_dim / 2 >= r
        {
            Some(Shape {
                dim: f.dim / 2,
                box_dim: f.box_dim / 2,
                ..f
            })
        } else if f.boxes_in % 2 == 0 && f.box_dim >= r {
            Some(Shape {
                dim: f.dim / 2,
                boxes_in: f.boxes_in / 2,
                ..f
            })
        } else if coarse_dim != 1 && f.dim == 2 * coarse_dim && f.dim / 2 >= r {
            Some(Shape {
                ranks: 1,
                dim: f.dim / 2,
                boxes_in: 1,
                box_dim: f.dim / 2,
            })
        } else if coarse_dim != 1 && f.dim == 4 * coarse_dim && f.box_dim / 2 >= r {
            Some(Shape {
                ranks: (coarse_dim as usize).min(f.ranks),
                dim: f.dim / 2,
                box_dim: f.box_dim / 2,
                ..f
            })
        } else if coarse_dim != 1 && f.dim == 8 * coarse_dim && f.box_dim / 2 >= r {
            Some(Shape {
                ranks: ((coarse_dim * coarse_dim) as usize).min(f.ranks),
                dim: f.dim / 2,
                box_dim: f.box_dim / 2,
                ..f
            })
        } else if f.box_dim % 2 == 0 && f.box_dim / 2 >= r {
            Some(Shape {
                dim: f.dim / 2,
                box_dim: f.box_dim / 2,
                ..f
            })
        } else {
            None
        };
        do_restrict = match next {
            Some(s) if s.dim >= min_coarse_dim => {
                shapes.push(s);
                true
            }
            _ => false,
        };
    }
    shapes.remove(0);
    shapes
}

/// Prints the reference's level-creation lines.
pub fn print_create_level(out: &mut impl Write, level: &Level) -> std::io::Result<()> {
    writeln!(
        out,
        "\nattempting to create a {}^3 level from {} x {}^3 boxes distributed among {} tasks...",
        level.dim,
        level.boxes_in * level.boxes_in * level.boxes_in,
        level.box_dim,
        level.num_ranks
    )?;
    writeln!(out, "  boundary condition = BC_DIRICHLET")?;
    writeln!(out, "  Decomposing level via Z-mort ordering... done")?;
    writeln!(out, "  Allocating vectors... done")?;
    let total = (level.boxes_in * level.boxes_in * level.boxes_in) as f64;
    let mut per_rank = vec![0usize; level.num_ranks];
    for &r in &level.rank_of_box {
        if r < per_rank.len() {
            per_rank[r] += 1;
        }
    }
    writeln!(
        out,
        "  Calculating boxes per process... target={:.3}, max={}",
        total / level.num_ranks as f64,
        per_rank.iter().max().copied().unwrap_or(0)
    )
}

/// Prints the reference's D^{-1} rebuild line for a level.
pub fn print_rebuild(out: &mut impl Write, level: &Level) -> std::io::Result<()> {
    let colors = 4.min(level.dim);
    writeln!(
        out,
        "  calculating D^{{-1}} exactly for level h={} using {:3} colors...  done",
        fmt_e(level.h, 6),
        colors * colors * colors
    )
}

impl MgHierarchy {
    /// Creates the levels below `fine` and the transfers between them, without their
    /// operators ([`MgHierarchy::rebuild_operators`]).
    pub fn create(
        fine: Level,
        min_coarse_dim: i32,
        out: &mut impl Write,
    ) -> std::io::Result<MgHierarchy> {
        let start = Instant::now();
        let shapes = coarse_shapes(&fine, min_coarse_dim);
        let mut levels = vec![fine];
        for (n, s) in shapes.iter().enumerate() {
            let prev = levels.last().expect("fine");
            let mut vectors = prev.num_vectors();
            if n + 1 == shapes.len() {
                vectors += BICGSTAB_NUM_VECTORS;
            }
            let mut level = Level::new(
                s.boxes_in,
                s.box_dim,
                prev.ghosts,
                vectors,
                prev.my_rank,
                s.ranks,
            );
            level.h = 2.0 * prev.h;
            if world_ranks() > 1 {
                let t = build_transfer(prev, &level);
                levels.last_mut().expect("fine").transfer = Some(t);
            }
            print_create_level(out, &level)?;
            levels.push(level);
        }
        writeln!(
            out,
            "\n  Building restriction and interpolation lists... done"
        )?;
        writeln!(out)?;
        Ok(MgHierarchy {
            levels,
            solves_performed: 0,
            solve_seconds: 0.0,
            build_seconds: start.elapsed().as_secs_f64(),
            containment: Containment::Off,
            max_vcycles: 0,
            progress: Progress::default(),
            finer_solutions_kept: false,
        })
    }

    /// Builds every level's operator: the finest from its coefficients, each coarser one by
    /// restricting the coefficients of the level above and rebuilding D^{-1} (collective).
    pub fn rebuild_operators(&mut self, b: f64) {
        rebuild_operator(&mut self.levels[0], None, b);
        // The reference's MGBuild times the coarse levels only.
        let start = Instant::now();
        for l in 1..self.levels.len() {
            let (lo, hi) = self.levels.split_at_mut(l);
            rebuild_operator(&mut hi[0], Some(&lo[l - 1]), b);
        }
        self.build_seconds += start.elapsed().as_secs_f64();
    }

    /// Prints what building the coarse levels' operators printed in the reference.
    pub fn print_rebuilds(&self, out: &mut impl Write) -> std::io::Result<()> {
        for level in &self.levels[1..] {
            print_rebuild(out, level)?;
        }
        writeln!(out)
    }

    /// Every level's operator ([`OPERATOR_VECTORS`]), by level, box and vector: what the
    /// operators' rebuild computed, which a rerun after a lost process takes back
    /// (`cd::setup_once`).
    pub fn operators(&self) -> LevelVectors {
        let of = |l: &Level| {
            let of_box = |b: &GridBox| OPERATOR_VECTORS.map(|id| b.vectors[id].clone()).to_vec();
            l.boxes.iter().map(of_box).collect()
        };
        LevelVectors(self.levels.iter().map(of).collect())
    }

    /// Puts back every level's [`MgHierarchy::operators`].
    ///
    /// # Panics
    /// If `v` has another shape than this hierarchy (another problem's).
    pub fn set_operators(&mut self, v: LevelVectors) {
        assert_eq!(v.0.len(), self.levels.len(), "the kept operators' levels");
        for (level, boxes) in self.levels.iter_mut().zip(v.0) {
            assert_eq!(boxes.len(), level.boxes.len(), "the kept operators' boxes");
            for (bx, vectors) in level.boxes.iter_mut().zip(boxes) {
                for (id, v) in OPERATOR_VECTORS.into_iter().zip(vectors) {
                    bx.vectors[id] = v;
                }
            }
        }
    }

    /// Clears the per-level and solve statistics.
    pub fn reset_timers(&mut self) {
        for l in &mut self.levels {
            l.krylov_iterations = 0;
            l.vcycles_from_this_level = 0;
        }
        self.solves_performed = 0;
        self.solve_seconds = 0.0;
    }

    /// One FMG F-cycle solving `A u = F` on `on_level`, then up to `max_vcycles` V-cycles
    /// until converged; prints the residual's max norm and its ratio to the norm of F after
    /// each cycle, as the reference does, and returns the last pair.
    pub fn fmg_solve(
        &mut self,
        on_level: usize,
        u_id: usize,
        f_id: usize,
        b: f64,
        out: &mut impl Write,
    ) -> std::io::Result<(f64, f64)> {
        self.solves_performed += 1;
        let start = Instant::now();
        write!(out, "FMGSolve... ")?;
        let solve = Solve {
            on_level,
            u_id,
            f_id,
            b,
            containment: self.containment,
            max_vcycles: self.max_vcycles,
        };
        let levels = &mut self.levels;
        let (progress, finer) = (&mut self.progress, self.finer_solutions_kept);
        let mut timers = (self.solves_performed as u64, self.solve_seconds);
        let (norm_of_f, history) = if solve.containment.is_on() {
            cd::strict(SOLVE_CD, |c| {
                preserve_vector(c, &mut levels[on_level], u_id, "u");
                preserve_counters(c, levels);
                // Unchanged by the solve (nothing to restore in a re-execution), but read by
                // the rest of the run: a relaunch resuming at this solve finds them here.
                c.preserve(PROGRESS, progress);
                c.preserve("timers", &mut timers);
                if finer {
                    for (l, level) in levels[..on_level].iter_mut().enumerate() {
                        preserve_vector(c, level, u_id, &format!("u{l}"));
                    }
                }
                let r = fmg_body(levels, &solve)?;
                cd::check!(r.1.iter().all(|n| n.is_finite()));
                Ok(r)
            })
            .map_err(escalated)?
        } else {
            fmg_body(levels, &solve).map_err(escalated)?
        };
        // A relaunch resuming at this solve continues the interrupted pass's timers.
        self.solves_performed = timers.0 as usize;
        self.solve_seconds = timers.1;
        let seconds = start.elapsed().as_secs_f64();
        self.solve_seconds += seconds;
        for (v, &norm_of_residual) in history.iter().enumerate() {
            let (norm, rel) = (
                fmt_e(norm_of_residual, 15),
                fmt_e(norm_of_residual / norm_of_f, 15),
            );
            if v == 0 {
                write!(out, "f-cycle     norm={norm}  rel={rel}  ")?;
            } else {
                write!(out, "\n            v-cycle={v:2}  norm={norm}  rel={rel}  ")?;
            }
        }
        writeln!(out, "done ({seconds:.6} seconds)")?;
        let last = *history.last().expect("the F-cycle's norm");
        Ok((last, last / norm_of_f))
    }

    /// Richardson error estimate from solutions on levels h, 2h, 4h (starting at `level_h`):
    /// returns (||u^2h - R u^h||max, order) and prints them as the reference does.
    pub fn richardson_error(
        &mut self,
        level_h: usize,
        u_id: usize,
        out: &mut impl Write,
    ) -> std::io::Result<(f64, f64)> {
        let levels = &mut self.levels;
        {
            let (f, c) = pair(levels, level_h);
            restriction(c, VECTOR_TEMP, f, u_id, RestrictionType::Cell);
        }
        {
            let (f, c) = pair(levels, level_h + 1);
            restriction(c, VECTOR_TEMP, f, u_id, RestrictionType::Cell);
        }
        add_vectors(
            &mut levels[level_h + 1],
            VECTOR_TEMP,
            1.0,
            u_id,
            -1.0,
            VECTOR_TEMP,
        );
        add_vectors(
            &mut levels[level_h + 2],
            VECTOR_TEMP,
            1.0,
            u_id,
            -1.0,
            VECTOR_TEMP,
        );
        let e2h = norm(&levels[level_h + 1], VECTOR_TEMP);
        let e4h = norm(&levels[level_h + 2], VECTOR_TEMP);
        let order = (e4h / e2h).ln() / std::f64::consts::LN_2;
        writeln!(
            out,
            "  h={}  ||error||={}",
            fmt_e(levels[level_h].h, 15),
            fmt_e(e2h, 15)
        )?;
        writeln!(out, "  order={order:.3}")?;
        Ok((e2h, order))
    }
}

/// One solve's parameters.
#[derive(Debug, Clone, Copy)]
struct Solve {
    on_level: usize,
    u_id: usize,
    f_id: usize,
    b: f64,
    containment: Containment,
    max_vcycles: usize,
}

/// The F-cycle of [`MgHierarchy::fmg_solve`] and the V-cycles after it; returns ||F|| and
/// ||F - A u|| after the F-cycle and after each V-cycle. With CDs, each V-cycle (the
/// F-cycle's on each level, interpolating from the coarser level first, and each one after
/// the F-cycle) is a strict child CD preserving what it reads and does not recompute: the
/// coarser level's solution (F-cycle) or this level's (after it), and this level's
/// right-hand side.
fn fmg_body(levels: &mut [Level], s: &Solve) -> Result<(f64, Vec<f64>), cd::CdError> {
    let (on_level, f_id, b) = (s.on_level, s.f_id, s.b);
    let e_id = s.u_id;
    let r_id = VECTOR_R;
    let bottom = levels.len() - 1;
    let cd_on = s.containment.is_on();
    let mut smoothing = Smoothing::new(s.containment);
    let norm_of_f = norm(&levels[on_level], f_id);
    scale_vector(&mut levels[on_level], r_id, 1.0, f_id);
    for l in on_level..bottom {
        let (f, c) = pair(levels, l);
        restriction(c, r_id, f, r_id, RestrictionType::Cell);
    }
    if bottom > on_level {
        zero_vector(&mut levels[bottom], e_id);
    }
    bicgstab(&mut levels[bottom], e_id, r_id, b, MG_DEFAULT_BOTTOM_NORM);
    // The F-cycle's levels (interpolate, then V-cycle), then V-cycles on `on_level` alone.
    let fcycle = (on_level..bottom).rev().map(|l| (l, true));
    let mut history = Vec::new();
    let mut vcycles_after = 0;
    for (l, interpolate) in fcycle.chain(std::iter::repeat((on_level, false))) {
        if !interpolate {
            // Before each V-cycle after the F-cycle, the residual of the last one.
            residual(&mut levels[on_level], VECTOR_TEMP, e_id, f_id, b);
            let n = norm(&levels[on_level], VECTOR_TEMP);
            history.push(n);
            if n / norm_of_f < RTOL || vcycles_after == s.max_vcycles {
                break;
            }
            vcycles_after += 1;
        }
        let step = |levels: &mut [Level], smoothing: &mut Smoothing| {
            if interpolate {
                let (f, c) = pair(levels, l);
                interpolation_v4(f, e_id, 0.0, c, e_id);
            }
            levels[l].vcycles_from_this_level += 1;
            vcycle(levels, smoothing, e_id, r_id, b, l);
        };
        if cd_on {
            let solution = if interpolate { l + 1 } else { l };
            let preserve = |c: &cd::Cd, levels: &mut &mut [Level]| {
                preserve_vector(c, &mut levels[solution], e_id, "e");
                preserve_vector(c, &mut levels[l], r_id, "r");
                preserve_counters(c, levels);
            };
            let mut levels = &mut *levels;
            cd::strict(LEVEL_CD, |c| {
                preserve(c, &mut levels);
                if smoothing.clustered() {
                    preserve_plans(c, levels, l);
                    pgas::barrier();
                }
                smoothing.rank_level(&mut levels, preserve, |levels, smoothing| {
                    step(levels, smoothing)
                })
            })?;
        } else {
            step(levels, &mut smoothing);
        }
    }
    Ok((norm_of_f, history))
}

/// Recursive V-cycle: smooth, restrict the residual, recurse (BiCGStab at the bottom),
/// interpolate the correction (quadratic) and smooth again.
fn vcycle(
    levels: &mut [Level],
    smoothing: &mut Smoothing,
    e_id: usize,
    r_id: usize,
    b: f64,
    level: usize,
) {
    let bottom = levels.len() - 1;
    if level == bottom {
        bicgstab(&mut levels[level], e_id, r_id, b, MG_DEFAULT_BOTTOM_NORM);
        return;
    }
    smoothing.smooth(&mut levels[level], e_id, r_id, b);
    residual(&mut levels[level], VECTOR_TEMP, e_id, r_id, b);
    {
        let (f, c) = pair(levels, level);
        restriction(c, r_id, f, VECTOR_TEMP, RestrictionType::Cell);
        zero_vector(c, e_id);
    }
    vcycle(levels, smoothing, e_id, r_id, b, level + 1);
    {
        let (f, c) = pair(levels, level);
        interpolation_v2(f, e_id, 1.0, c, e_id);
    }
    smoothing.smooth(&mut levels[level], e_id, r_id, b);
}
