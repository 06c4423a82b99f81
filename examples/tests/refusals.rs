//! Every mistake a user can make gets one clear line: bad environment, bad command line, sizes
//! this machine cannot hold. Each case checks the exit status, that stderr names the problem,
//! and that it holds no panic text and no backtrace even with `RUST_BACKTRACE=1`. (The hang
//! report is tested in gasnet-bridge's tests/hang_report.rs.)

mod common;

use common::run;

const GUPS: &str = env!("CARGO_BIN_EXE_gups");
const DHT: &str = env!("CARGO_BIN_EXE_dht");
const STENCIL: &str = env!("CARGO_BIN_EXE_stencil");
const CD_STENCIL: &str = env!("CARGO_BIN_EXE_cd_stencil");
const HELLO: &str = env!("CARGO_BIN_EXE_hello");

/// Runs `bin` with `RUST_BACKTRACE=1` and `env`, expects exit status `status`, a stderr that
/// contains every one of `names` and no panic or backtrace; returns stderr.
fn refused(bin: &str, args: &[&str], env: &[(&str, &str)], status: i32, names: &[&str]) {
    let mut env = env.to_vec();
    env.push(("RUST_BACKTRACE", "1"));
    let out = run(bin, args, &env);
    let err = String::from_utf8_lossy(&out.stderr);
    let what = format!("{bin} {args:?} {env:?}");
    assert_eq!(out.status.code(), Some(status), "{what}: {err}");
    for bad in [
        "panicked",
        "backtrace",
        "RUST_BACKTRACE",
        "memory allocation of",
    ] {
        assert!(!err.contains(bad), "{what}: {bad:?} in {err}");
    }
    for name in names {
        assert!(err.contains(name), "{what}: {name:?} not in {err}");
    }
}

#[test]
fn the_environment_is_read_one_way_and_checked() {
    let huge = [("PGAS_RANKS", "100000")];
    for bin in [HELLO, STENCIL, CD_STENCIL] {
        refused(bin, &[], &huge, 1, &["PGAS_RANKS=100000", "at most"]);
    }
    let huge_segment = [("PGAS_SEGMENT_MB", "100000000")];
    for bin in [HELLO, STENCIL, CD_STENCIL, GUPS] {
        refused(
            bin,
            &[],
            &huge_segment,
            1,
            &["PGAS_SEGMENT_MB=100000000", "available"],
        );
    }
    // stencil and cd_stencil honour PGAS_SEGMENT_MB and PGAS_RANKS_PER_NODE like LULESH.
    let zero_node = [("PGAS_RANKS_PER_NODE", "0")];
    for bin in [STENCIL, CD_STENCIL] {
        refused(bin, &[], &zero_node, 1, &["PGAS_RANKS_PER_NODE"]);
        let small = [("PGAS_SEGMENT_MB", "1")];
        refused(
            bin,
            &["--n", "1024", "--ranks", "1"],
            &small,
            1,
            &["PGAS_SEGMENT_MB gives"],
        );
    }
    refused(
        HELLO,
        &[],
        &[("PGAS_HANG_REPORT", "soon")],
        1,
        &["PGAS_HANG_REPORT"],
    );
}

#[test]
fn bad_command_lines_name_the_option() {
    refused(
        STENCIL,
        &["--ranks", "-1"],
        &[],
        2,
        &["'--ranks", "at least 1"],
    );
    refused(
        GUPS,
        &["--log-table", "-3"],
        &[],
        2,
        &["'--log-table", "negative"],
    );
    refused(
        DHT,
        &["--keys-per-rank", "-5"],
        &[],
        2,
        &["'--keys-per-rank", "at least 1"],
    );
    refused(
        HELLO,
        &["--ranks", "100000"],
        &[],
        1,
        &["--ranks 100000", "at most"],
    );
}

#[test]
fn sizes_that_cannot_fit_are_refused_with_the_memory() {
    let fits = ["needs", "of memory, but only", "is available"];
    refused(
        GUPS,
        &["--log-table", "30", "--ranks", "128"],
        &[],
        1,
        &fits,
    );
    refused(DHT, &["--keys-per-rank", "100000000000"], &[], 1, &fits);
    refused(
        GUPS,
        &["--variant", "rpc", "--batch", "100000000000"],
        &[],
        1,
        &["--batch 100000000000"],
    );
}
