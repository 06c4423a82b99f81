//! Multi-rank runs on the smp conduit (`--ranks N`): for a fixed box layout the answer does
//! not depend on the rank count (reductions in global box order), bit for bit, with either
//! ghost-exchange variant; a rank count that cannot hold the layout is refused.

mod common;

use common::{REF_5_1, REF_5_8, all_norms, assert_richardson, hpgmg, run};

/// `5 1` on 8 ranks is the `5 8` layout (8 boxes of 32^3, one per rank): the reference's
/// one-rank `5 8` numbers, bit for bit, in every solve.
#[test]
fn eight_ranks_one_box_each_match_one_rank_with_eight_boxes() {
    let out = run(&["5", "1", "--ranks", "8", "--solves", "2"]);
    assert_richardson(&out, &REF_5_8, "5 1 --ranks 8");
    assert!(out.contains("8 MPI Tasks of 1 threads"), "{out}");
    assert!(out.contains("MPI=8  OMP=1"), "{out}");
    let norms = all_norms(&out);
    assert_eq!(norms.len(), 3 * 2 * 2 + 3);
    for (n, line) in norms.iter().enumerate() {
        let level = if n < 12 { n / 4 } else { n - 12 };
        assert_eq!(line, REF_5_8[level], "solve {n}");
    }
}

/// The naturally-grained variant (one rput per box-to-box region) gives the same bits.
#[test]
fn per_box_puts_match_too() {
    let out = run(&[
        "5",
        "1",
        "--ranks",
        "8",
        "--exchange",
        "box",
        "--solves",
        "1",
    ]);
    assert_richardson(&out, &REF_5_8, "5 1 --ranks 8 --exchange box");
}

/// `5 8` on 8 ranks: 64 boxes of 32^3 (128^3), the same bits as on one rank.
#[test]
#[ignore = "128^3 twice: about a minute; run with --ignored"]
fn five_eight_on_eight_ranks_matches_one_rank() {
    let one = run(&["5", "64", "--solves", "1"]);
    let eight = run(&["5", "8", "--ranks", "8", "--solves", "1"]);
    assert_eq!(common::richardson(&one), common::richardson(&eight));
}

/// `6 1` on 8 ranks is the `6 8` layout (8 boxes of 64^3, one per rank): the reference's
/// `6 8` numbers.
#[test]
#[ignore = "128^3 on 8 ranks: several seconds; run with --ignored"]
fn six_one_on_eight_ranks_matches_six_eight() {
    let out = run(&["6", "1", "--ranks", "8", "--solves", "1"]);
    assert_richardson(&out, &common::REF_6_8, "6 1 --ranks 8");
}

/// Several boxes per rank, local and remote neighbours mixed (64 boxes of 16^3 on 1, 4 and
/// 8 ranks, both exchange variants).
#[test]
fn many_boxes_per_rank_are_rank_count_independent() {
    let one = run(&["4", "64", "--solves", "1"]);
    let expected = common::richardson(&one);
    for args in [
        &["4", "16", "--ranks", "4", "--solves", "1"][..],
        &[
            "4",
            "8",
            "--ranks",
            "8",
            "--exchange",
            "box",
            "--solves",
            "1",
        ][..],
    ] {
        assert_eq!(common::richardson(&run(args)), expected, "{args:?}");
    }
}

/// `5 1` on one rank through `--ranks 1` (the serial path) keeps the reference's bits.
#[test]
fn one_rank_flag_is_the_serial_run() {
    let out = run(&["5", "1", "--ranks", "1", "--solves", "1"]);
    assert_richardson(&out, &REF_5_1, "5 1 --ranks 1");
}

/// More ranks than boxes: a clear message, a non-zero exit, no report.
#[test]
fn too_many_ranks_are_refused() {
    let out = hpgmg()
        .args(["5", "1", "--ranks", "3"])
        .output()
        .expect("run hpgmg");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("3 ranks cannot hold a layout of 1 boxes"),
        "{err}"
    );
}

/// Threads inside a rank (`--threads`, rayon over the planes of a box) give the same bits, on
/// one rank and on eight.
#[test]
fn threads_give_the_same_bits() {
    let out = run(&["5", "1", "--threads", "3", "--solves", "1"]);
    assert_richardson(&out, &REF_5_1, "5 1 --threads 3");
    assert!(out.contains("1 MPI Tasks of 3 threads"), "{out}");
    let out = run(&["5", "1", "--ranks", "8", "--threads", "2", "--solves", "1"]);
    assert_richardson(&out, &REF_5_8, "5 1 --ranks 8 --threads 2");
}
