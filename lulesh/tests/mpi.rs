//! The same `lulesh` binary under `mpirun` (the mpi conduit, one rank per
//! process): `mpirun -n 8 lulesh -s 5` and `-s 10` are bit-exact with the
//! 8-rank MPI reference, print the report once, from rank 0's process, and
//! the same report as `--ranks 8` on smp; a world
//! size that is not a cube is refused on every process with the reference's
//! message and status.
//!
//! Only with the `mpi` feature (`cargo test -p lulesh --features mpi --test
//! mpi`). `MPIRUN` overrides the launcher (default `mpirun`), `MPIRUN_FLAGS`
//! its flags (default `--allow-run-as-root --oversubscribe`, for Open MPI in
//! a root container), as in gasnet-bridge's conduit suite.
#![cfg(feature = "mpi")]

mod common;

use std::process::Output;

use common::{EIGHT_RANK_FAULTS, TempFile, assert_has_lines};

/// `lulesh args` as `n` processes under mpirun. Never skipped: without mpirun every test
/// fails (with or without `CI=true`), since the feature `mpi` asks for it.
fn mpirun(n: usize, args: &[&str]) -> Output {
    pgas::mpirun::mpirun_command(n)
        .arg(env!("CARGO_BIN_EXE_lulesh"))
        .args(args)
        .env_remove("PGAS_RANKS")
        .env_remove("PGAS_SEGMENT_MB")
        .env_remove("PGAS_CONDUIT")
        .output()
        .unwrap_or_else(|e| {
            let launcher = pgas::mpirun::mpirun_program();
            panic!("cannot start {launcher} (MPIRUN; Open MPI installed?): {e}")
        })
}

#[test]
fn eight_processes_s5_match_the_mpi_reference_and_report_once() {
    let out = mpirun(8, &["-s", "5"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}\n{text}");
    assert_has_lines(
        &text,
        &[
            "Num processors: 8\n",
            "Total number of elements: 1000 \n",
            "   MPI tasks           =  8\n",
            "   Iteration count     =  231\n",
            "   Origin Energy (full)  = 2.72053116847034435e+04\n",
        ],
    );
    assert_eq!(text.matches("Run completed:").count(), 1, "{text}");
    assert_eq!(text.matches("Running problem size").count(), 1, "{text}");
}

/// The report's lines up to the timings (which differ from run to run).
fn physics(report: &str) -> &str {
    let end = report
        .find("\nElapsed time")
        .unwrap_or_else(|| panic!("no timing section in\n{report}"));
    &report[..end]
}

/// The README's claim for `mpirun -n 8 lulesh`: the same verification report, bit for bit, as
/// `lulesh --ranks 8` on one machine, here at `-s 10` (global 20^3), where the 8-rank MPI
/// reference gives every number.
#[test]
fn eight_processes_s10_match_the_mpi_reference_and_the_smp_run() {
    let out = mpirun(8, &["-s", "10"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}\n{text}");
    assert_has_lines(
        &text,
        &[
            "Num processors: 8\n",
            "   Problem size        =  10\n",
            "   MPI tasks           =  8\n",
            "   Iteration count     =  575\n",
            "        MaxAbsDiff   = 2.910383e-11\n",
            "        TotalAbsDiff = 1.520561e-10\n",
            "        MaxRelDiff   = 5.655594e-15\n",
            "   Origin Energy (full)  = 9.66885598157783534e+04\n",
        ],
    );
    let smp = std::process::Command::new(env!("CARGO_BIN_EXE_lulesh"))
        .args(["-s", "10", "--ranks", "8"])
        .env("PGAS_CONDUIT", "smp")
        .env_remove("PGAS_RANKS")
        .env_remove("PGAS_SEGMENT_MB")
        .output()
        .expect("the lulesh binary runs");
    let smp_text = String::from_utf8_lossy(&smp.stdout);
    assert!(smp.status.success(), "{smp:?}\n{smp_text}");
    assert_eq!(physics(&text), physics(&smp_text));
}

#[test]
fn a_world_size_that_is_not_a_cube_is_refused() {
    let out = mpirun(2, &["-s", "3"]);
    assert_eq!(out.status.code(), Some(255), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let message = "Num processors must be a cube of an integer (1, 8, 27, ...), got 2";
    assert_eq!(err.matches(message).count(), 1, "{err}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn ranks_that_differ_from_the_world_size_are_refused() {
    let out = mpirun(2, &["-s", "3", "--ranks", "8"]);
    assert_eq!(out.status.code(), Some(255), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--ranks 8 does not match the 2 MPI processes"),
        "{err}"
    );
}

#[test]
fn eight_processes_under_cds_are_bit_exact_and_report_once() {
    // Soft errors and rank losses, one rank per process (tests/cd.rs runs them on smp).
    let file = TempFile::new("mpi-cd.toml", EIGHT_RANK_FAULTS);
    let out = mpirun(8, &["-s", "5", "--cd-config", file.0.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}\n{text}");
    assert_has_lines(
        &text,
        &[
            "   MPI tasks           =  8\n",
            "   Iteration count     =  231\n",
            "   Origin Energy (full)  = 2.72053116847034435e+04\n",
            "CD report (8 ranks, counts summed over ranks)\n",
        ],
    );
    assert_eq!(text.matches("Run completed:").count(), 1, "{text}");
    assert_eq!(text.matches("CD report").count(), 1, "{text}");
}
