//! When a rank counts its incoming writes (`WriteCounting::Switched`, what `cd::launch` asks
//! for): never in a job of strict CDs alone; from its first relaxed CD, or its first
//! dependency-tracking strict CD, on. A rank loss whose recovery would have to rebuild a put
//! that landed before the switch (so carries no IWC) escalates, and the enclosing CD's
//! re-execution gives the fault-free answer; once counting is on, the same loss recovers
//! alone.

mod common;

use cd_runtime as cd;
use common::{Ring, config, run, step};
use pgas::runtime_hooks::{self as resilience, internal};
use pgas::{GlobalPtr, barrier, rank_me, rput, world};

/// Strict CDs exchanging around a ring count nothing; a relaxed CD switches the rank on for
/// the rest of the job, and the puts into it are counted from then on.
#[test]
fn strict_cds_never_count_and_a_relaxed_cd_switches_on() {
    let out = run(4, config("seed = 1\n"), || {
        let ring = Ring::new(8);
        let mut x: Vec<f64> = (0..8).map(|i| (i + rank_me()) as f64).collect();
        for it in 0..3 {
            cd::strict("step", |c| {
                c.preserve("x", &mut x);
                step(&mut x, it);
                ring.exchange(&world(), &mut x);
                Ok(())
            })?;
        }
        let strict_only = (
            resilience::counts_incoming_writes(),
            resilience::incoming_writes(),
        );
        cd::strict("outer", |_| {
            cd::relaxed("r", |_| Ok(()))?;
            Ok(())
        })?;
        let on = resilience::counts_incoming_writes();
        let before = resilience::incoming_writes();
        internal(barrier);
        cd::strict("step", |c| {
            c.preserve("x", &mut x);
            ring.exchange(&world(), &mut x);
            Ok(())
        })?;
        Ok((strict_only, on, resilience::incoming_writes() - before))
    })
    .unwrap();
    for (rank, (strict_only, on, counted)) in out.results.iter().enumerate() {
        assert_eq!(*strict_only, (false, 0), "rank {rank} after strict CDs");
        assert!(*on, "rank {rank} after its relaxed CD");
        assert!(
            *counted > 0,
            "rank {rank}: the ring's puts into it are counted"
        );
    }
}

/// A strict CD with `dependency_tracking` switches counting on as it begins.
#[test]
fn a_dependency_tracking_cd_switches_on() {
    let out = run(
        2,
        config("[cd.tracked]\ndependency_tracking = true\n"),
        || {
            let before = resilience::counts_incoming_writes();
            let inside = cd::strict("tracked", |_| Ok(resilience::counts_incoming_writes()))?;
            Ok((before, inside))
        },
    )
    .unwrap();
    assert!(
        out.results.iter().all(|&r| r == (false, true)),
        "{:?}",
        out.results
    );
}

const X: u64 = 0x5a5a;

/// Rank 0's relaxed CD puts X into rank 1 before rank 1 begins its own relaxed CD (the
/// internal barrier orders them, unseen by the hook); rank 1 reads it and loses its memory in
/// that CD. In the first step rank 1 switched counting on only at its CD's begin, so the put
/// landed uncounted: the rebuild refuses, "cell" escalates, "step" re-executes both ranks.
/// In a later step counting is on, and the same loss recovers alone. The answers equal a
/// fault-free run's either way.
#[test]
fn a_loss_needing_an_uncounted_put_escalates_and_later_ones_recover_alone() {
    let program = |cfg| {
        run(2, cfg, || {
            let me = rank_me();
            let flag = pgas::new_::<u64>(0).unwrap();
            let flags: Vec<GlobalPtr<u64>> = internal(|| pgas::allgather(flag).wait());
            let mut seen = Vec::new();
            for it in 0..4u64 {
                let got = cd::strict("step", |c| {
                    c.preserve_global("flag", flag, 1);
                    // No put lands before every rank preserved (or restored) its flag.
                    barrier();
                    if me == 1 {
                        internal(barrier);
                    }
                    let got = cd::relaxed("cell", |_| {
                        if me == 0 {
                            rput(X + it, flags[1]).wait();
                            internal(barrier);
                            Ok(0)
                        } else {
                            Ok(flag.read_local().unwrap())
                        }
                    });
                    // An escalated "cell" returns its error after the step's communication.
                    barrier();
                    got
                })?;
                seen.push(got);
            }
            Ok(seen)
        })
    };
    let base = "[cd.step]\nmedium = \"buddy\"\n[cd.cell]\nmedium = \"buddy\"\n\
                log_medium = \"buddy\"\ncheck_classes = false\nretries = 1\n";
    let clean = program(config(base)).unwrap();
    assert_eq!(clean.results[1], (0..4).map(|i| X + i).collect::<Vec<_>>());
    for (iteration, alone) in [(0, false), (2, true)] {
        let faulty = program(config(&format!(
            "{base}inject = {{ at = [{{ rank = 1, iteration = {iteration}, kind = \"rank_loss\" }}] }}\n"
        )))
        .unwrap_or_else(|e| panic!("loss in cell #{iteration}: {e}"));
        assert_eq!(faulty.results, clean.results, "loss in cell #{iteration}");
        let cell = faulty.report.cd("cell").unwrap();
        let step = faulty.report.cd("step").unwrap();
        if alone {
            assert_eq!(
                (cell.reexecutions, cell.escalations, step.reexecutions),
                (1, 0, 0),
                "loss in cell #{iteration} recovers alone: {cell:?}"
            );
        } else {
            assert_eq!(cell.escalations, 1, "loss in cell #{iteration}: {cell:?}");
            assert!(step.reexecutions >= 1, "step re-executes: {step:?}");
        }
    }
}
