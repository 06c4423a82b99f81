//! `kind = "strict" | "relaxed"` in the configuration decides the kind of a CD, whichever
//! function (or attribute) the program enters it with: the same halo-exchange program, its CD
//! entered by `#[cd::strict]`, `#[cd::strict(team = ..)]` or `#[cd::relaxed]`, run with the
//! CD made relaxed (one injected soft error re-executes exactly the failed rank) and made
//! strict (it re-executes every rank), both with the fault-free answer.

mod common;

use cd_runtime as cd;
use cd_runtime::{CdError, CdOutcome};
use common::{config, run};
use pgas::{GlobalPtr, barrier, rank_me, rank_n, rput};

const RANKS: usize = 3;
const N: usize = 4;
const STEPS: usize = 3;
const M: f64 = 1_000_003.0;

/// One step of a ring halo exchange on `u` (ghosts at 0 and N+1): puts the edge values into
/// the neighbours' ghosts, a barrier, the update (through the private `scratch`), a barrier.
/// Not idempotent: a re-execution is right only if `u` was restored first. The CDs preserve
/// the interior only: the ghosts are written by the neighbours, and a strict re-execution
/// restoring them could overwrite a neighbour's new put (the ranks restore without a barrier).
fn exchange(u: GlobalPtr<f64>, ptrs: &[GlobalPtr<f64>], scratch: GlobalPtr<f64>, step: usize) {
    let (me, n) = (rank_me(), rank_n());
    let (left, right) = ((me + n - 1) % n, (me + 1) % n);
    let mut v = vec![0.0; N + 2];
    u.read_local_slice(&mut v).unwrap();
    rput(v[1], ptrs[left] + (N + 1)).wait();
    rput(v[N], ptrs[right]).wait();
    barrier();
    u.read_local_slice(&mut v).unwrap();
    let w: Vec<f64> = (1..=N)
        .map(|i| (v[i - 1] + 2.0 * v[i] + v[i + 1] + step as f64) % M)
        .collect();
    scratch.write_local_slice(&w).unwrap();
    let mut back = vec![0.0; N];
    scratch.read_local_slice(&mut back).unwrap();
    (u + 1).write_local_slice(&back).unwrap();
    barrier();
}

#[cd::strict(name = "work")]
fn work_strict(
    u: GlobalPtr<f64>,
    ptrs: &[GlobalPtr<f64>],
    scratch: GlobalPtr<f64>,
    step: usize,
) -> Result<(), CdError> {
    cd::current().preserve_global("u", u + 1, N);
    exchange(u, ptrs, scratch, step);
    Ok(())
}

#[cd::strict(name = "work", team = pgas::world())]
fn work_on_team(
    u: GlobalPtr<f64>,
    ptrs: &[GlobalPtr<f64>],
    scratch: GlobalPtr<f64>,
    step: usize,
) -> Result<(), CdError> {
    cd::current().preserve_global("u", u + 1, N);
    exchange(u, ptrs, scratch, step);
    Ok(())
}

#[cd::relaxed(private(scratch = N), name = "work")]
fn work_relaxed(
    u: GlobalPtr<f64>,
    ptrs: &[GlobalPtr<f64>],
    scratch: GlobalPtr<f64>,
    step: usize,
) -> Result<(), CdError> {
    cd::current().preserve_global("u", u + 1, N);
    exchange(u, ptrs, scratch, step);
    Ok(())
}

type Work = fn(GlobalPtr<f64>, &[GlobalPtr<f64>], GlobalPtr<f64>, usize) -> Result<(), CdError>;

/// The program: a strict CD per step (the LCSA), the CD "work" inside it.
fn program(work: Work) -> impl Fn() -> Result<Vec<u64>, CdError> + Sync {
    move || {
        let me = rank_me();
        let u = pgas::new_array::<f64>(N + 2).unwrap();
        let scratch = pgas::new_array::<f64>(N).unwrap();
        let init: Vec<f64> = (1..=N).map(|i| (me * 100 + i) as f64).collect();
        (u + 1).write_local_slice(&init).unwrap();
        let ptrs = pgas::allgather(u).wait();
        for step in 0..STEPS {
            cd::strict("step", |_| work(u, &ptrs, scratch, step))?;
        }
        let mut v = vec![0.0; N];
        (u + 1).read_local_slice(&mut v).unwrap();
        Ok(v.iter().map(|x| x.to_bits()).collect())
    }
}

/// Runs `work` with `kind` (or none) for the CD "work", and a soft error on rank 1 at its
/// second instance.
fn faulty(work: Work, kind: Option<&str>) -> CdOutcome<Vec<u64>> {
    let kind = kind.map_or(String::new(), |k| format!("kind = \"{k}\"\n"));
    let toml = format!(
        "[cd.work]\n{kind}inject = {{ at = [{{ rank = 1, iteration = 1, kind = \"soft\" }}] }}\n"
    );
    run(RANKS, config(&toml), program(work)).unwrap_or_else(|e| panic!("{toml}: {e}"))
}

/// Asserts the answer, which ranks re-executed "work", and whether it ran relaxed (logged).
fn check(out: &CdOutcome<Vec<u64>>, want: &[Vec<u64>], ranks: &[usize], what: &str) {
    assert_eq!(out.results, want, "{what}: the fault-free answer");
    let work = out.report.cd("work").unwrap();
    assert_eq!(work.injected, 1, "{what}");
    assert_eq!(work.escalations, 0, "{what}");
    assert_eq!(
        work.reexecutions,
        ranks.len() as u64,
        "{what}: re-executions"
    );
    let mut failed: Vec<usize> = work
        .failures
        .iter()
        .flat_map(|f| f.ranks.iter().copied())
        .collect();
    failed.sort_unstable();
    failed.dedup();
    assert_eq!(failed, ranks, "{what}: the ranks that re-executed");
    let relaxed = ranks.len() == 1;
    assert_eq!(
        work.entries_logged > 0,
        relaxed,
        "{what}: a relaxed CD logs its puts, a strict one logs nothing"
    );
    assert_eq!(out.report.cd("step").unwrap().reexecutions, 0, "{what}");
}

#[test]
fn kind_in_the_config_decides_strict_or_relaxed() {
    let clean = run(RANKS, config(""), program(work_strict)).unwrap();
    let want = clean.results.clone();
    assert_eq!(clean.report.cd("work").unwrap().reexecutions, 0);
    let relaxed_clean = run(RANKS, config(""), program(work_relaxed)).unwrap();
    assert_eq!(
        relaxed_clean.results, want,
        "fault-free: same bits either kind"
    );

    let all = [0, 1, 2];
    let one = [1];
    for (work, entered) in [
        (work_strict as Work, "#[cd::strict]"),
        (work_on_team, "#[cd::strict(team)]"),
        (work_relaxed, "#[cd::relaxed]"),
    ] {
        let default = if entered.contains("relaxed") {
            &one[..]
        } else {
            &all[..]
        };
        for (kind, ranks) in [
            (None, default),
            (Some("relaxed"), &one[..]),
            (Some("strict"), &all[..]),
        ] {
            let what = format!("{entered} with kind = {kind:?}");
            check(&faulty(work, kind), &want, ranks, &what);
        }
    }
}
