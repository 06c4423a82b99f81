//! The README's headline claim, checked on the binary it names: `lulesh -s 30` (the main job,
//! `cargo run --release -p lulesh -- -s 30`) prints the serial reference's numbers bit for bit
//! (the lines below, from the reference's own output: 932 cycles, the full-precision origin
//! energy and sum of energies, the symmetry test on plane 0).
//!
//! `-s 30` takes seconds optimised and far too long in a debug build, so the test runs only in
//! the release profile: `cargo test --release -p lulesh --test release` (as `.ci/run` does);
//! `cargo test -p lulesh` lists it as ignored rather than passing it.

mod common;

use std::process::Command;

use common::assert_has_lines;

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "needs the release binary: cargo test --release -p lulesh --test release"
)]
fn s30_prints_the_serial_reference_bit_for_bit() {
    // Reached in a debug build only with --ignored: refuse rather than take minutes.
    if cfg!(debug_assertions) {
        panic!("-s 30 must run the release binary: cargo test --release -p lulesh --test release");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_lulesh"))
        .args(["-s", "30"])
        .env_remove("PGAS_RANKS")
        .env_remove("PGAS_SEGMENT_MB")
        .env_remove("PGAS_CONDUIT")
        .output()
        .expect("the lulesh binary runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}\n{text}");
    assert_has_lines(
        &text,
        &[
            "Running problem size 30^3 per domain until completion\n",
            "Num processors: 1\n",
            "Run completed:\n",
            "   Problem size        =  30\n",
            "   MPI tasks           =  1\n",
            "   Iteration count     =  932\n",
            "   Final Origin Energy =  2.025075e+05\n",
            "   Testing Plane 0 of Energy Array on rank 0:\n",
            "        MaxAbsDiff   = 7.639755e-11\n",
            "        TotalAbsDiff = 8.590535e-10\n",
            "        MaxRelDiff   = 1.482369e-12\n",
            "   Origin Energy (full)  = 2.02507478507199383e+05\n",
            "   Sum of Energy (full)  = 6.46286984918591008e+06\n",
        ],
    );
    assert_eq!(text.matches("Run completed:").count(), 1, "{text}");
}
