//! LULESH under CDs when the run cannot go on: an escalation prints one line (no panic text,
//! no backtrace even with `RUST_BACKTRACE=1`), exits 255 and leaves no preserved files;
//! `CD_CONFIG` is read when `--cd-config` is not given; a fault on a rank the job lacks is a
//! configuration error before anything runs.

mod common;

use std::process::{Command, Output};

use common::TempFile;

fn lulesh(args: &[&str], cd_config: Option<&str>) -> (Output, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lulesh"));
    cmd.args(args)
        .env_remove("PGAS_RANKS")
        .env_remove("PGAS_SEGMENT_MB")
        .env_remove("PGAS_RANKS_PER_NODE")
        .env_remove("CD_CONFIG")
        .env("RUST_BACKTRACE", "1");
    if let Some(path) = cd_config {
        cmd.env("CD_CONFIG", path);
    }
    let out = cmd.output().expect("the binary runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, err)
}

fn quiet(stderr: &str) {
    for noise in ["panicked", "stack backtrace", "note:"] {
        assert!(!stderr.contains(noise), "{noise:?} in\n{stderr}");
    }
}

#[test]
fn an_escalation_is_one_line_and_leaves_no_files() {
    let dir = std::env::temp_dir().join(format!("lulesh-cd-files-{}", std::process::id()));
    // The root CD keeps its copies in files too: 8 ranks' worth must go with the job.
    let cfg = TempFile::new(
        "escalate.toml",
        &format!(
            "file_dir = {:?}\n[defaults]\nmedium = \"file\"\n[cd.step]\nmedium = \"local\"\n\
             inject = {{ at = [{{ rank = 5, iteration = 3, kind = \"rank_loss\" }}] }}\n",
            dir.display().to_string()
        ),
    );
    let path = cfg.0.to_str().unwrap();
    let (out, err) = lulesh(&["-s", "4", "-i", "10", "--ranks", "8", "-q"], Some(path));
    assert_eq!(out.status.code(), Some(255), "{err}");
    quiet(&err);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("CD \"step\"") && err.contains("on rank 5"),
        "{err}"
    );
    assert!(err.contains("medium = \"buddy\""), "{err}");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    std::fs::remove_dir(&dir).unwrap();
}

#[test]
fn a_fault_on_a_missing_rank_is_refused_before_the_run() {
    let cfg = TempFile::new(
        "rank100.toml",
        "[cd.step]\ninject = { at = [{ rank = 100, iteration = 3, kind = \"soft\" }] }\n",
    );
    let path = cfg.0.to_str().unwrap();
    let (out, err) = lulesh(
        &["-s", "4", "-i", "5", "--ranks", "8", "--cd-config", path],
        None,
    );
    assert_eq!(out.status.code(), Some(255), "{err}");
    quiet(&err);
    assert!(out.stdout.is_empty(), "nothing runs");
    assert!(
        err.contains(&format!("{path}:2: key `cd.step.inject.at.rank`")),
        "{err}"
    );
}
