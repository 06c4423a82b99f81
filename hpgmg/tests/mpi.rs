//! The same `hpgmg` binary under `mpirun` (the mpi conduit, one rank per process):
//! `mpirun -n 8 hpgmg 5 1` (8 boxes of 32^3, one per process) prints the one-rank `5 8`
//! numbers bit for bit, once, from rank 0's process, as `--ranks 8` on smp does, also with
//! relaxed smoother CDs recovering injected soft errors; a world that cannot hold the layout
//! is refused on every process.
//!
//! Only with the `mpi` feature (`cargo test -p hpgmg --features mpi --test mpi`). `MPIRUN`
//! overrides the launcher, `MPIRUN_FLAGS` its flags (default `--allow-run-as-root
//! --oversubscribe`).
#![cfg(feature = "mpi")]

mod common;

use std::process::Output;

use common::{REF_5_8, assert_richardson, stdout_of};

/// `hpgmg args` as `n` processes under mpirun (never skipped: the feature asks for mpirun).
fn mpirun(n: usize, args: &[&str]) -> Output {
    pgas::mpirun::mpirun_command(n)
        .arg(env!("CARGO_BIN_EXE_hpgmg"))
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
fn eight_processes_match_one_rank_with_eight_boxes_and_report_once() {
    let text = stdout_of(
        mpirun(8, &["5", "1", "--solves", "1"]),
        "mpirun -n 8 hpgmg 5 1",
    );
    assert_richardson(&text, &REF_5_8, "mpirun -n 8 hpgmg 5 1");
    assert_eq!(text.matches("HPGMG-FV Benchmark").count(), 1, "{text}");
    assert!(text.contains("8 MPI Tasks of 1 threads"), "{text}");
}

#[test]
fn aggregated_and_per_box_exchanges_agree_under_mpirun() {
    let agg = stdout_of(
        mpirun(4, &["4", "16", "--solves", "1", "--exchange", "agg"]),
        "mpirun -n 4 hpgmg 4 16",
    );
    let per_box = stdout_of(
        mpirun(4, &["4", "16", "--solves", "1", "--exchange", "box"]),
        "mpirun -n 4 hpgmg 4 16 --exchange box",
    );
    let smp = common::run(&["4", "64", "--solves", "1"]);
    assert_eq!(common::richardson(&agg), common::richardson(&smp));
    assert_eq!(common::richardson(&per_box), common::richardson(&smp));
}

/// `hpgmg/configs/relaxed-faults.toml` under mpirun: the fault-free lines of the smp run,
/// each soft error recovered by its rank alone.
#[test]
fn relaxed_smoother_faults_recover_alone_under_mpirun() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/relaxed-faults.toml");
    let text = stdout_of(
        mpirun(8, &["5", "1", "--solves", "1", "--cd-config", config]),
        "mpirun -n 8 hpgmg 5 1 --cd-config relaxed-faults.toml",
    );
    let smp = common::run(&["5", "1", "--ranks", "8", "--solves", "1"]);
    assert_eq!(common::physics(&text), common::physics(&smp));
    assert!(
        text.contains(
            "re-executed ranks per failure of smooth: #13.1: [5], #20.1: [0], #58.1: [7]"
        ),
        "{text}"
    );
    assert!(
        !text.contains("failure of level"),
        "no strict re-execution:\n{text}"
    );
}

#[test]
fn a_world_that_cannot_hold_the_layout_is_refused() {
    let out = mpirun(3, &["5", "1"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("3 ranks cannot hold a layout of 1 boxes")
            .count(),
        1,
        "{err}"
    );
}
