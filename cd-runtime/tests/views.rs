//! CDs over viewable memory: `preserve_view` (and `preserve(x = len)` of a `ViewPtr`) restores
//! a rank's viewable cells in a re-execution, from the buddy after a rank loss (which poisons
//! viewable memory as it does the segment); another rank's viewable memory is refused; under
//! a relaxed CD viewable memory is private to its owner (a `view_put` into another rank's is
//! refused).

mod common;

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdError};
use common::{M, config, message, run, step};
use pgas::{ViewError, ViewPtr};

const N: usize = 16;

/// One update of the viewable cells at `v` in place from `salt` (integer-valued, exact).
fn update_view(v: ViewPtr<f64>, salt: u64) -> Result<(), CdError> {
    v.with_local_mut(N, |v| {
        step(v, salt);
        v.iter_mut().for_each(|a| *a = (*a * 3.0 + 1.0) % M);
    })?;
    Ok(())
}

/// A fresh viewable array with rank-dependent contents.
fn new_view() -> ViewPtr<f64> {
    let v = pgas::new_viewable::<f64>(N).unwrap();
    let init: Vec<f64> = (0..N).map(|i| (i * 5 + pgas::rank_me()) as f64).collect();
    pgas::view_put(&init, v).unwrap();
    v
}

fn cells(v: ViewPtr<f64>) -> Vec<f64> {
    let mut out = vec![0.0; N];
    pgas::view_get(v, &mut out).unwrap();
    out
}

/// `iters` strict CDs "step", each preserving the viewable cells (if `preserve`) and
/// updating them in place; a barrier makes it a CD of every rank. Returns the cells.
fn steps(ranks: usize, cfg: CdConfig, iters: usize, preserve: bool) -> cd::CdOutcome<Vec<f64>> {
    run(ranks, cfg, || {
        let v = new_view();
        for it in 0..iters {
            cd::strict("step", |c| {
                if preserve {
                    c.preserve_view("v", v, N);
                }
                update_view(v, it as u64)?;
                pgas::barrier();
                Ok(())
            })?;
        }
        Ok(cells(v))
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// "step" on `medium` with a fault of `kind` on `rank` at `iteration`.
fn fault(kind: &str, medium: &str, rank: usize, iteration: usize) -> CdConfig {
    config(&format!(
        "[cd.step]\nmedium = \"{medium}\"\n\
         inject = {{ at = [{{ rank = {rank}, iteration = {iteration}, kind = \"{kind}\" }}] }}\n"
    ))
}

fn loss(medium: &str, rank: usize, iteration: usize) -> CdConfig {
    fault("rank_loss", medium, rank, iteration)
}

#[test]
fn a_rank_loss_restores_viewable_cells_from_the_buddy() {
    let clean = steps(3, CdConfig::default(), 4, true);
    let faulty = steps(3, loss("buddy", 1, 2), 4, true);
    assert_eq!(faulty.results, clean.results);
    assert_eq!(faulty.report.cd("step").unwrap().reexecutions, 3);
}

#[test]
fn the_rank_loss_is_real_viewable_cells_not_preserved_are_lost() {
    // The control of the test above: without preserve_view the lost rank's cells differ from
    // those of the same re-execution after a soft error (where nothing is lost), and the other
    // ranks' do not, so the answer above was restored, not merely left alone.
    let soft = steps(3, fault("soft", "buddy", 1, 2), 4, false);
    let lost = steps(3, loss("buddy", 1, 2), 4, false);
    assert_ne!(lost.results[1], soft.results[1]);
    assert_eq!(lost.results[0], soft.results[0]);
    assert_eq!(lost.results[2], soft.results[2]);
}

#[test]
fn a_rank_loss_poisons_the_viewable_area() {
    // Read right after the loss, before anything is restored: every byte is the poison.
    let out = run(2, loss("buddy", 1, 0), || {
        let v = new_view();
        let mut seen = Vec::new();
        cd::strict("step", |c| {
            if c.attempt() > 0 {
                seen = cells(v);
            }
            pgas::barrier();
            Ok(())
        })?;
        Ok(seen)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let poison = f64::from_ne_bytes([pgas::runtime_hooks::POISON; 8]);
    assert!(
        out.results[1]
            .iter()
            .all(|c| c.to_bits() == poison.to_bits())
    );
    // The rank not lost keeps its cells (as `new_view` made them).
    let kept: Vec<f64> = (0..N).map(|i| (i * 5) as f64).collect();
    assert_eq!(out.results[0], kept);
}

#[test]
fn a_soft_error_restores_viewable_cells_on_the_local_medium() {
    let clean = steps(2, CdConfig::default(), 3, true);
    let faulty = steps(
        2,
        config(
            "[cd.step]\nmedium = \"local\"\n\
             inject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }] }\n",
        ),
        3,
        true,
    );
    assert_eq!(faulty.results, clean.results);
    assert_eq!(faulty.report.cd("step").unwrap().reexecutions, 2);
}

#[cd::strict(preserve(v = N))]
fn strict_step(v: ViewPtr<f64>, salt: u64) -> Result<(), CdError> {
    update_view(v, salt)?;
    pgas::barrier();
    Ok(())
}

#[cd::relaxed(preserve(v = N))]
fn relaxed_step(v: ViewPtr<f64>, salt: u64) -> Result<(), CdError> {
    update_view(v, salt)
}

/// `iters` of the attribute forms: a strict step, then a relaxed one, on the same cells.
fn macro_steps(cfg: CdConfig, iters: u64) -> cd::CdOutcome<Vec<f64>> {
    run(2, cfg, || {
        let v = new_view();
        for it in 0..iters {
            strict_step(v, it)?;
            relaxed_step(v, it + 100)?;
        }
        Ok(cells(v))
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_attributes_preserve_a_view_pointer_with_a_length() {
    let clean = macro_steps(CdConfig::default(), 3);
    let faulty = macro_steps(
        config(
            "[cd.strict_step]\nmedium = \"buddy\"\n\
             inject = { at = [{ rank = 1, iteration = 1, kind = \"rank_loss\" }] }\n\
             [cd.relaxed_step]\n\
             inject = { at = [{ rank = 0, iteration = 2, kind = \"soft\" }] }\n",
        ),
        3,
    );
    assert_eq!(faulty.results, clean.results);
    assert_eq!(faulty.report.cd("strict_step").unwrap().reexecutions, 2);
    assert_eq!(faulty.report.cd("relaxed_step").unwrap().reexecutions, 1);
}

#[test]
fn preserving_another_ranks_viewable_memory_is_refused_naming_the_cause() {
    let r = run(2, CdConfig::default(), || {
        let v = new_view();
        let all = pgas::allgather(v).wait();
        cd::strict("step", |c| {
            c.preserve_view("other", all[1 - pgas::rank_me()], N);
            Ok(())
        })
    });
    let m = message(r);
    assert!(m.contains("preserve_view(`other`)"), "{m}");
    assert!(m.contains("own viewable memory"), "{m}");
}

#[test]
fn a_view_put_into_another_ranks_memory_is_refused_inside_a_relaxed_cd() {
    let out = run(2, CdConfig::default(), || {
        let v = new_view();
        let all = pgas::allgather(v).wait();
        let other = all[1 - pgas::rank_me()];
        let inside = cd::relaxed("r", |_| {
            // Its own viewable memory stays writable: private to its owner, not shared.
            pgas::view_put(&[7.0], v)?;
            Ok(pgas::view_put(&[1.0], other))
        })?;
        pgas::barrier();
        // Outside the relaxed CD the same put is served.
        pgas::view_put(&[2.0], other + 1)?;
        pgas::barrier();
        Ok((inside, cells(v)))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    for (me, (inside, cells)) in out.results.into_iter().enumerate() {
        assert_eq!(inside, Err(ViewError::UnloggedPut { owner: 1 - me, me }));
        assert_eq!(cells[0], 7.0, "nothing of the refused put was written");
        assert_eq!(cells[1], 2.0);
    }
}
