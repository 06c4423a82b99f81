//! Multi-rank runs over pgas: bit-for-bit agreement with the 8-rank MPI
//! reference (2x2x2 blocks, boundary sums in the MPI order), the one-rank
//! path unchanged, and rank counts that are not cubes refused.

use std::process::Command;

use lulesh::verify::fmt_e;
use lulesh::{FinalReport, LuleshError, Options, Simulation, distributed};

fn run_ranks(ranks: usize, nx: i32, its: i32) -> FinalReport {
    let opts = Options {
        nx,
        its,
        ..Options::default()
    };
    distributed::run(&opts, ranks, |_| {})
        .expect("multi-rank run")
        .expect("rank 0 runs in this process")
}

fn lulesh(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lulesh"));
    cmd.args(args).env_remove("PGAS_RANKS");
    cmd.env_remove("PGAS_SEGMENT_MB");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the binary runs")
}

#[test]
fn eight_ranks_s5_matches_mpi_reference_bit_for_bit() {
    let r = run_ranks(8, 5, 9_999_999);
    assert_eq!(r.num_ranks, 8);
    assert_eq!(r.cycles, 231);
    assert_eq!(fmt_e(r.origin_energy, 17), "2.72053116847034435e+04");
}

#[test]
fn eight_ranks_s10_matches_mpi_reference_bit_for_bit() {
    let r = run_ranks(8, 10, 9_999_999);
    assert_eq!(r.cycles, 575);
    assert_eq!(fmt_e(r.origin_energy, 17), "9.66885598157783534e+04");
    let text = r.render();
    for line in [
        "   MPI tasks           =  8\n",
        "   Iteration count     =  575\n",
        "   Final Origin Energy =  9.668856e+04\n",
        "        MaxAbsDiff   = 2.910383e-11\n",
        "        TotalAbsDiff = 1.520561e-10\n",
        "        MaxRelDiff   = 5.655594e-15\n",
        "   Origin Energy (full)  = 9.66885598157783534e+04\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn twenty_seven_ranks_agree_with_the_serial_run_of_the_same_mesh() {
    // The centre block has all 26 neighbours. No MPI reference numbers here:
    // the same global mesh on one rank must agree to rounding.
    let multi = run_ranks(27, 4, 60);
    let opts = Options {
        nx: 12,
        its: 60,
        ..Options::default()
    };
    let mut sim = Simulation::single_rank(&opts).unwrap();
    sim.run(opts.its, |_| {}).unwrap();
    let serial = sim.domain.e[0];
    assert_eq!(multi.cycles, 60);
    let rel = ((multi.origin_energy - serial) / serial).abs();
    assert!(
        rel < 1e-12,
        "27 ranks: e(0) = {:e}, serial {:e}",
        multi.origin_energy,
        serial
    );
}

#[test]
fn binary_runs_eight_ranks_and_reports_once_from_rank_0() {
    let out = lulesh(&["-s", "5", "--ranks", "8"], &[]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Num processors: 8\n"), "{text}");
    assert!(text.contains("Total number of elements: 1000 \n"), "{text}");
    assert_eq!(text.matches("Run completed:").count(), 1, "{text}");
    assert!(text.contains("   MPI tasks           =  8\n"), "{text}");
    assert!(text.contains("   Iteration count     =  231\n"), "{text}");
    assert!(
        text.contains("   Origin Energy (full)  = 2.72053116847034435e+04\n"),
        "{text}"
    );
}

#[test]
fn pgas_ranks_sets_the_default_rank_count() {
    let out = lulesh(&["-s", "3", "-i", "5"], &[("PGAS_RANKS", "8")]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("   MPI tasks           =  8\n"), "{text}");
    assert!(text.contains("   Iteration count     =  5\n"), "{text}");
}

#[test]
fn one_rank_keeps_the_serial_answer() {
    let out = lulesh(&["-s", "10", "--ranks", "1"], &[]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "Num processors: 1\n",
        "   MPI tasks           =  1\n",
        "   Iteration count     =  231\n",
        "   Origin Energy (full)  = 2.72053116847034689e+04\n",
        "   Sum of Energy (full)  = 2.41746210522627283e+05\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn rank_counts_that_are_not_cubes_are_refused() {
    for n in ["2", "7", "9", "26"] {
        let out = lulesh(&["-s", "3", "--ranks", n], &[]);
        assert_eq!(out.status.code(), Some(255), "--ranks {n}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "Num processors must be a cube of an integer (1, 8, 27, ...), got {n}"
            )),
            "--ranks {n}: {err}"
        );
        assert!(out.stdout.is_empty(), "--ranks {n}");
    }
    let opts = Options {
        nx: 3,
        ..Options::default()
    };
    assert_eq!(
        distributed::run(&opts, 2, |_| {}).unwrap_err(),
        LuleshError::NotACube(2)
    );
}

#[test]
fn a_segment_too_small_for_the_problem_is_a_clear_error() {
    let out = lulesh(&["-s", "40", "--ranks", "8"], &[("PGAS_SEGMENT_MB", "1")]);
    assert_eq!(out.status.code(), Some(255));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PGAS_SEGMENT_MB gives 1048576 bytes"), "{err}");
    assert!(out.stdout.is_empty());
}
