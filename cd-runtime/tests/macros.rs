//! The `#[cd::strict]` and `#[cd::relaxed]` attributes: behaviour under injected faults, their
//! options, and the compile errors for misuse (trybuild cases in `tests/macro_fail/`).

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError, CdOutcome};
use gasnet_bridge::LaunchConfig;
use pgas::GlobalPtr;

const SOFT_RANK1_ITER2: &str = "inject = { at = [{ rank = 1, iteration = 2, kind = \"soft\" }] }";

fn run<R: Send>(config: CdConfig, body: impl Fn() -> Result<R, CdError> + Sync) -> CdOutcome<R> {
    let job = LaunchConfig::new(2).segment_bytes(1 << 20);
    cd::launch(&job, config, pgas::RpcTable::new(), body).expect("the job completes")
}

fn inject(name: &str) -> CdConfig {
    CdConfig::default()
        .with_cd(name, SOFT_RANK1_ITER2)
        .expect("valid configuration")
}

/// Not idempotent: running it twice on the same state gives a different state, so a
/// re-execution is right only if `u` was restored first.
#[cd::strict(preserve(u))]
fn step(u: &mut Vec<f64>, k: usize) -> Result<f64, cd::CdError> {
    let n = u.len();
    u[k % n] += 1.0 + k as f64;
    u.push(u[k % n] * 0.5);
    Ok(u.iter().sum())
}

/// The same body, not preserving `u`, in a CD of the same name.
#[cd::strict(name = "step")]
fn careless_step(u: &mut Vec<f64>, k: usize) -> Result<f64, cd::CdError> {
    let n = u.len();
    u[k % n] += 1.0 + k as f64;
    u.push(u[k % n] * 0.5);
    Ok(u.iter().sum())
}

fn program(
    f: fn(&mut Vec<f64>, usize) -> Result<f64, CdError>,
) -> impl Fn() -> Result<(Vec<f64>, Vec<f64>), CdError> + Sync {
    move || {
        let mut u = vec![1.0, 2.0, 3.0];
        let mut sums = Vec::new();
        for k in 0..5 {
            sums.push(f(&mut u, k + pgas::rank_me())?);
        }
        Ok((sums, u))
    }
}

#[test]
fn preserved_argument_is_restored_before_reexecution() {
    let clean = run(CdConfig::default(), program(step));
    let faulty = run(inject("step"), program(step));
    assert_eq!(
        faulty.results, clean.results,
        "same values as the fault-free run"
    );
    let stats = faulty
        .report
        .cd("step")
        .expect("the CD is named after the function");
    assert_eq!(stats.level, 1, "a child of the root CD");
    assert_eq!(stats.injected, 1);
    assert_eq!(
        stats.reexecutions, 2,
        "both ranks of the CD re-executed once"
    );
    assert_eq!(stats.executions, 2 * 5 + 2);
    assert!(stats.bytes_local > 0, "u was preserved");
    assert_eq!(clean.report.cd("step").unwrap().reexecutions, 0);
}

#[test]
fn without_preserve_the_reexecution_sees_modified_state() {
    // The control for the test above: it is the preservation that makes the results right.
    let clean = run(CdConfig::default(), program(careless_step));
    let faulty = run(inject("step"), program(careless_step));
    assert_eq!(
        clean.results,
        run(CdConfig::default(), program(step)).results
    );
    assert_eq!(faulty.report.cd("step").unwrap().reexecutions, 2);
    // Rank 0 had no fault, but re-executed with rank 1: it too ran the body twice on u.
    assert_ne!(faulty.results[0], clean.results[0]);
    assert_ne!(faulty.results[1], clean.results[1]);
}

#[cd::strict(preserve(u), name = "stage")]
fn named(u: &mut Vec<f64>, k: usize) -> Result<f64, cd::CdError> {
    assert_eq!(cd::current().name(), "stage", "the body runs in its CD");
    step(u, k)
}

#[test]
fn name_option_names_the_cd() {
    let out = run(inject("stage"), || {
        let mut u = vec![1.0, 2.0];
        let mut last = 0.0;
        for k in 0..4 {
            last = named(&mut u, k)?;
        }
        Ok((last, u))
    });
    let clean = run(CdConfig::default(), || {
        let mut u = vec![1.0, 2.0];
        let mut last = 0.0;
        for k in 0..4 {
            last = named(&mut u, k)?;
        }
        Ok((last, u))
    });
    assert_eq!(out.results, clean.results);
    let stage = out.report.cd("stage").expect("the CD takes the given name");
    assert_eq!(stage.reexecutions, 2);
    assert_eq!(stage.level, 1);
    let inner = out.report.cd("step").expect("step nests inside stage");
    assert_eq!(inner.level, 2);
    assert_eq!(
        inner.executions,
        2 * (4 + 1),
        "re-executing stage re-ran step"
    );
    assert_eq!(inner.reexecutions, 0);
}

#[cd::strict(preserve(u), team = pgas::world())]
fn on_world(u: &mut Vec<f64>, k: usize) -> Result<f64, cd::CdError> {
    step(u, k)
}

#[cd::strict(preserve(u), local)]
fn on_this_rank(u: &mut Vec<f64>, k: usize) -> Result<f64, cd::CdError> {
    // A local CD agrees with no other rank, so it must not communicate inside.
    let n = u.len();
    u[k % n] *= 3.0;
    u.push(k as f64);
    Ok(u.iter().sum())
}

/// Runs `f` five times per rank with and without a fault injected into CD `name`; asserts the
/// same results.
fn drive(name: &str, f: fn(&mut Vec<f64>, usize) -> Result<f64, CdError>) {
    let config = inject(name);
    let body = move || {
        let mut u = vec![1.0, 2.0, 3.0];
        let mut last = 0.0;
        for k in 0..5 {
            last = f(&mut u, k)?;
        }
        Ok((last, u))
    };
    let faulty = run(config, body);
    let clean = run(CdConfig::default(), body);
    assert_eq!(faulty.results, clean.results);
}

#[test]
fn team_option_spans_the_team() {
    drive("on_world", on_world);
    let out = run(inject("on_world"), || {
        let mut u = vec![0.5; 3];
        for k in 0..3 {
            on_world(&mut u, k)?;
        }
        Ok(u)
    });
    assert_eq!(
        out.report.cd("on_world").unwrap().reexecutions,
        2,
        "all of world"
    );
}

#[test]
fn local_option_reexecutes_this_rank_alone() {
    drive("on_this_rank", on_this_rank);
    let out = run(inject("on_this_rank"), || {
        let mut u = vec![0.5; 3];
        for k in 0..3 {
            on_this_rank(&mut u, k)?;
        }
        Ok(u)
    });
    let stats = out.report.cd("on_this_rank").unwrap();
    assert_eq!(stats.reexecutions, 1, "only rank 1 re-executed");
    assert_eq!(stats.executions, 2 * 3 + 1);
}

/// `v` is a slice of plain data: preserved as raw bytes.
#[cd::strict(preserve(v))]
fn scale(v: &mut [f64], by: f64) -> Result<f64, cd::CdError> {
    for x in v.iter_mut() {
        *x = *x * by + 1.0;
    }
    Ok(v.iter().sum())
}

#[test]
fn slice_argument_is_restored() {
    let body = || {
        let mut v = [1.0f64, 2.0, 3.0, 4.0];
        let mut sums = Vec::new();
        for i in 0..4 {
            sums.push(scale(&mut v[1..], 2.0 + i as f64)?);
        }
        Ok((sums, v))
    };
    let clean = run(CdConfig::default(), body);
    let faulty = run(inject("scale"), body);
    assert_eq!(faulty.results, clean.results);
    assert_eq!(faulty.results[0].1[0], 1.0, "outside the slice: untouched");
    let stats = faulty.report.cd("scale").unwrap();
    assert_eq!(stats.reexecutions, 2);
    assert_eq!(
        stats.bytes_local,
        2 * 4 * 3 * 8,
        "3 f64 raw per execution and rank"
    );
}

/// A `Copy` argument taken by value, mutated in the body: without `preserve(k)` the mutation
/// would carry over into the re-execution (the body closure borrows `k`).
#[cd::strict(preserve(k))]
fn bump(mut k: u64, fail_first: bool) -> Result<u64, cd::CdError> {
    k = k * 10 + 1;
    if fail_first && !cd::current().is_reexecution() {
        return Err(CdError::detected("first attempt fails"));
    }
    Ok(k)
}

/// The same, preserving a value the attribute makes `mut`, and not preserving it.
#[cd::strict(preserve(k))]
fn bump_immutable_binding(k: u64) -> Result<u64, cd::CdError> {
    Ok(k + 1)
}

#[cd::strict]
fn bump_unpreserved(mut k: u64) -> Result<u64, cd::CdError> {
    k = k * 10 + 1;
    if !cd::current().is_reexecution() {
        cd::current().fail("first attempt fails");
    }
    Ok(k)
}

#[test]
fn by_value_argument_and_early_return() {
    let out = run(CdConfig::default(), || {
        Ok((
            bump(4, false)?,
            bump(4, true)?,
            bump_immutable_binding(4)?,
            bump_unpreserved(4)?,
        ))
    });
    assert_eq!(out.results, vec![(41, 41, 5, 411); 2]);
    assert_eq!(out.report.cd("bump").unwrap().reexecutions, 2);
    assert_eq!(out.report.cd("bump_unpreserved").unwrap().reexecutions, 2);
}

/// A non-`Copy` argument taken by value can be preserved and mutated as long as the body does
/// not move it out.
#[cd::strict(preserve(v))]
fn owned(mut v: Vec<u32>, extra: &[u32]) -> Result<usize, cd::CdError> {
    v.extend_from_slice(extra);
    cd::check!(v.len() < 6 || cd::current().is_reexecution());
    Ok(v.len())
}

/// Generic functions and `?` on errors of the body.
#[cd::strict(preserve(x))]
fn generic<T: cd::Preservable + std::ops::AddAssign + Copy>(
    x: &mut T,
    d: T,
    inner: Result<(), CdError>,
) -> Result<T, CdError> {
    *x += d;
    inner.clone()?; // not `inner?`: the body runs in an FnMut closure, which cannot move `inner` out
    Ok(*x)
}

struct Grid {
    cells: Vec<f64>,
    steps: u32,
}

impl Grid {
    /// A method: `self` is usable in the body, and other arguments are preserved.
    #[cd::strict(preserve(halo))]
    fn relax(&mut self, halo: &mut [f64]) -> Result<f64, CdError> {
        self.steps += 1;
        for (c, h) in self.cells.iter_mut().zip(halo.iter_mut()) {
            *h += 1.0;
            *c = *h;
        }
        if self.steps == 1 {
            cd::current().fail("first relax fails");
        }
        Ok(self.cells.iter().sum())
    }
}

#[test]
fn owned_generic_and_method_forms() {
    let out = run(CdConfig::default(), || {
        let a = owned(vec![1, 2, 3], &[4, 5, 6])?;
        let mut x = 1.5f64;
        let g = generic(&mut x, 2.0, Ok(()))?;
        let mut grid = Grid {
            cells: vec![0.0; 3],
            steps: 0,
        };
        let mut halo = [1.0, 2.0, 3.0];
        let r = grid.relax(&mut halo)?;
        Ok((a, g, x, r, halo, grid.steps))
    });
    assert_eq!(out.results, vec![(6, 3.5, 3.5, 9.0, [2.0, 3.0, 4.0], 2); 2]);
    assert_eq!(out.report.cd("owned").unwrap().reexecutions, 2);
    assert_eq!(out.report.cd("relax").unwrap().reexecutions, 2);
}

#[test]
fn error_returned_by_the_body_is_retried_then_escalates() {
    // A persistent error: the CD re-executes up to its retries, then escalates to the caller,
    // which sees it through `?` (here as the error of the outer `strict`).
    let out = run(CdConfig::default(), || {
        let mut x = 1i64;
        let r = cd::strict("outer", |c| {
            c.preserve("x", &mut x);
            generic(&mut x, 1, Err(CdError::detected("always")))?;
            Ok(())
        });
        let escalated = matches!(r, Err(CdError::Escalated { .. }));
        Ok((escalated, x))
    });
    for (escalated, x) in out.results {
        assert!(escalated);
        assert_eq!(x, 2, "restored before each re-execution: incremented once");
    }
    assert!(out.report.cd("generic").unwrap().escalations > 0);
}

/// The cells `u` points to, preserved with `u = n`: not idempotent, so a re-execution is
/// right only if they were restored first.
#[cd::strict(preserve(u = n), name = "cells")]
fn cells_step(u: GlobalPtr<f64>, n: usize, k: usize) -> Result<f64, cd::CdError> {
    let mut v = vec![0.0; n];
    u.read_local_slice(&mut v).unwrap();
    for (i, x) in v.iter_mut().enumerate() {
        *x = *x * 1.5 + (i + k) as f64;
    }
    u.write_local_slice(&v).unwrap();
    Ok(v.iter().sum())
}

/// The same body, preserving nothing, in a CD of the same name (the control).
#[cd::strict(name = "cells")]
fn cells_step_unpreserved(u: GlobalPtr<f64>, n: usize, k: usize) -> Result<f64, cd::CdError> {
    let mut v = vec![0.0; n];
    u.read_local_slice(&mut v).unwrap();
    for (i, x) in v.iter_mut().enumerate() {
        *x = *x * 1.5 + (i + k) as f64;
    }
    u.write_local_slice(&v).unwrap();
    Ok(v.iter().sum())
}

fn cells_program(
    f: fn(GlobalPtr<f64>, usize, usize) -> Result<f64, CdError>,
) -> impl Fn() -> Result<(Vec<f64>, Vec<f64>), CdError> + Sync {
    move || {
        let n = 5;
        let u = pgas::new_array::<f64>(n).unwrap();
        u.write_local_slice(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let mut sums = Vec::new();
        for k in 0..4 {
            sums.push(f(u, n, k + pgas::rank_me())?);
        }
        let mut cells = vec![0.0; n];
        u.read_local_slice(&mut cells).unwrap();
        Ok((sums, cells))
    }
}

#[test]
fn preserved_pointee_is_restored_after_a_soft_error() {
    let clean = run(CdConfig::default(), cells_program(cells_step));
    let faulty = run(inject("cells"), cells_program(cells_step));
    let stats = faulty.report.cd("cells").unwrap();
    assert_eq!((stats.injected, stats.reexecutions), (1, 2));
    assert_eq!(
        stats.bytes_local,
        2 * 4 * 5 * 8,
        "5 f64 cells per step and rank (a re-execution restores, saves nothing): the cells, \
         not the pointer"
    );
    assert_eq!(faulty.results, clean.results, "the fault-free answer");
    // The control: without preserving the cells, the re-execution computes on cells the
    // first execution already changed.
    let careless = run(inject("cells"), cells_program(cells_step_unpreserved));
    assert_eq!(careless.report.cd("cells").unwrap().reexecutions, 2);
    assert_ne!(careless.results[1], clean.results[1]);
}

/// Relaxed: the cells of a private region preserved with `u = n`, re-executed on rank 1 alone.
#[cd::relaxed(preserve(u = n), private(u = n), name = "relaxed_cells")]
fn relaxed_cells(u: GlobalPtr<f64>, n: usize, k: usize) -> Result<f64, cd::CdError> {
    cells_step_body(u, n, k)
}

fn cells_step_body(u: GlobalPtr<f64>, n: usize, k: usize) -> Result<f64, cd::CdError> {
    let mut v = vec![0.0; n];
    u.read_local_slice(&mut v).unwrap();
    for (i, x) in v.iter_mut().enumerate() {
        *x = *x * 1.5 + (i + k) as f64;
    }
    u.write_local_slice(&v).unwrap();
    Ok(v.iter().sum())
}

#[test]
fn relaxed_preserved_pointee_is_restored_on_one_rank() {
    let clean = run(CdConfig::default(), cells_program(relaxed_cells));
    let faulty = run(inject("relaxed_cells"), cells_program(relaxed_cells));
    let stats = faulty.report.cd("relaxed_cells").unwrap();
    assert_eq!(stats.reexecutions, 1, "rank 1 alone re-executed");
    assert_eq!(stats.failures[0].ranks, [1]);
    assert_eq!(faulty.results, clean.results, "the fault-free answer");
}

/// Relaxed: `u` preserved, `scratch` private, `out` privatized (logged once at completion).
#[cd::relaxed(preserve(u), private(scratch = u.len()), privatized(out = 2))]
fn relaxed_step(
    u: &mut Vec<f64>,
    scratch: GlobalPtr<f64>,
    out: GlobalPtr<f64>,
    k: usize,
) -> Result<f64, cd::CdError> {
    assert_eq!(cd::current().name(), "relaxed_step");
    for (i, x) in u.iter_mut().enumerate() {
        *x = *x * 2.0 + (i + k) as f64;
    }
    scratch.write_local_slice(u).unwrap();
    let sum: f64 = u.iter().sum();
    out.write_local_slice(&[sum, k as f64]).unwrap();
    Ok(sum)
}

#[test]
fn relaxed_attribute_reexecutes_one_rank_with_its_classes() {
    let body = || {
        let scratch = pgas::new_array::<f64>(3).unwrap();
        let out = pgas::new_array::<f64>(2).unwrap();
        let mut u = vec![1.0, 2.0, 3.0];
        let mut sums = Vec::new();
        for k in 0..4 {
            sums.push(relaxed_step(&mut u, scratch, out, k + pgas::rank_me())?);
        }
        let mut last = [0.0; 2];
        out.read_local_slice(&mut last).unwrap();
        Ok((sums, u, last))
    };
    let clean = run(CdConfig::default(), body);
    let faulty = run(inject("relaxed_step"), body);
    assert_eq!(faulty.results, clean.results);
    let stats = faulty.report.cd("relaxed_step").unwrap();
    assert_eq!(stats.level, 1, "a child of the root CD");
    assert_eq!(stats.reexecutions, 1, "rank 1 alone re-executed");
    assert_eq!(stats.failures[0].ranks, [1]);
    assert_eq!(stats.executions, 2 * 4 + 1);
    assert!(stats.bytes_local > 0, "u was preserved");
    assert_eq!(
        clean.report.cd("relaxed_step").unwrap().entries_logged,
        2 * 4,
        "one privatized entry per completion and rank"
    );
}

/// Rank 0 writes into the region rank 1's CD declared private through the attribute.
#[cd::relaxed(private(mine = 4), name = "cls")]
fn classified(mine: GlobalPtr<u64>, target: Option<GlobalPtr<u64>>) -> Result<(), cd::CdError> {
    let _ = mine;
    pgas::runtime_hooks::internal(pgas::barrier);
    if let Some(t) = target {
        pgas::rput(1u64, t).wait();
    }
    pgas::runtime_hooks::internal(pgas::barrier);
    Ok(())
}

#[test]
fn relaxed_attribute_declares_private_regions() {
    let config = CdConfig::default()
        .with_cd("cls", "check_classes = true")
        .unwrap();
    let out = run(config, || {
        let buf = pgas::new_array::<u64>(4).unwrap();
        let bufs = pgas::allgather(buf).wait();
        let target = (pgas::rank_me() == 0).then(|| bufs[1] + 2);
        let r = classified(buf, target);
        pgas::barrier();
        Ok(r)
    });
    assert_eq!(out.results[1], Ok(()));
    match &out.results[0] {
        Err(CdError::Classification(e)) => {
            assert_eq!((e.owner, e.owner_cd.as_str()), (1, "cls"));
            assert_eq!((e.region.as_str(), e.class.as_str()), ("mine", "private"));
        }
        other => panic!("expected a classification error, got {other:?}"),
    }
}

/// The function `cd::relaxed` and the attribute `#[cd::relaxed]` side by side, nested: a
/// relaxed CD's child is relaxed.
#[cd::relaxed(preserve(x))]
fn inner(x: &mut u64) -> Result<u64, cd::CdError> {
    *x += 1;
    Ok(*x)
}

#[test]
fn relaxed_function_and_attribute_share_the_name() {
    let out = run(inject("inner"), || {
        let mut x = 0u64;
        let mut last = 0;
        cd::relaxed("outer", |c| {
            c.preserve("x", &mut x);
            for _ in 0..3 {
                last = inner(&mut x)?;
            }
            Ok(())
        })?;
        Ok((last, x))
    });
    assert_eq!(out.results, vec![(3, 3); 2]);
    let s = out.report.cd("inner").unwrap();
    assert_eq!((s.level, s.reexecutions), (2, 1));
}

#[test]
fn compile_errors() {
    trybuild::TestCases::new().compile_fail("tests/macro_fail/*.rs");
}
