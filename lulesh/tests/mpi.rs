//! The same `lulesh` binary under `mpirun` (the mpi conduit, one rank per
//! process): `mpirun -n 8 lulesh -s 5` is bit-exact with the 8-rank MPI
//! reference and prints the report once, from rank 0's process; a world
//! size that is not a cube is refused on every process with the reference's
//! message and status.
//!
//! Only with the `mpi` feature (`cargo test -p lulesh --features mpi --test
//! mpi`). `MPIRUN` overrides the launcher (default `mpirun`), `MPIRUN_FLAGS`
//! its flags (default `--allow-run-as-root --oversubscribe`, for Open MPI in
//! a root container), as in gasnet-bridge's conduit suite.
#![cfg(feature = "mpi")]

use std::process::Output;

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
    for line in [
        "Num processors: 8\n",
        "Total number of elements: 1000 \n",
        "   MPI tasks           =  8\n",
        "   Iteration count     =  231\n",
        "   Origin Energy (full)  = 2.72053116847034435e+04\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert_eq!(text.matches("Run completed:").count(), 1, "{text}");
    assert_eq!(text.matches("Running problem size").count(), 1, "{text}");
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

/// Soft errors and rank losses under Containment Domains, one rank per
/// process (tests/cd.rs runs the same faults on smp).
const EIGHT_RANK_FAULTS: &str = r#"
seed = 5
[cd.step]
medium = "buddy"
inject = { at = [
    { rank = 2, iteration = 0, kind = "soft" },
    { rank = 1, iteration = 17, kind = "soft" },
    { rank = 3, iteration = 40, kind = "rank_loss" },
    { rank = 0, iteration = 100, kind = "rank_loss" },
    { rank = 6, iteration = 230, kind = "soft" },
] }
"#;

#[test]
fn eight_processes_under_cds_are_bit_exact_and_report_once() {
    let path = std::env::temp_dir().join(format!("lulesh-mpi-{}-cd.toml", std::process::id()));
    std::fs::write(&path, EIGHT_RANK_FAULTS).expect("write the configuration");
    let out = mpirun(8, &["-s", "5", "--cd-config", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}\n{text}");
    for line in [
        "   MPI tasks           =  8\n",
        "   Iteration count     =  231\n",
        "   Origin Energy (full)  = 2.72053116847034435e+04\n",
        "CD report (8 ranks, counts summed over ranks)\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert_eq!(text.matches("Run completed:").count(), 1, "{text}");
    assert_eq!(text.matches("CD report").count(), 1, "{text}");
}
