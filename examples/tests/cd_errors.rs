//! `cd_stencil` when things go wrong: an escalation that ends the run, a configuration that
//! cannot be used or names what the run never uses, the file medium's files. Each prints one
//! clear line (no panic text, no backtrace even with `RUST_BACKTRACE=1`) and exits non-zero
//! when the run cannot give its answer.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

const CD_STENCIL: &str = env!("CARGO_BIN_EXE_cd_stencil");
const ARGS: [&str; 6] = ["--ranks", "8", "--n", "16", "--iters", "5"];

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("cd-errors-{}-{name}", std::process::id()))
}

fn toml(name: &str, text: &str) -> PathBuf {
    let path = temp(&format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs cd_stencil with `config` (by `--cd-config`, or by `CD_CONFIG` if `env`) and
/// `RUST_BACKTRACE=1`; returns the output and its stderr.
fn stencil(config: &Path, env: bool) -> (Output, String) {
    let path = config.to_str().unwrap();
    let mut args = ARGS.to_vec();
    let mut vars = vec![("RUST_BACKTRACE", "1")];
    if env {
        vars.push(("CD_CONFIG", path));
    } else {
        args.extend(["--cd-config", path]);
    }
    let out = common::run(CD_STENCIL, &args, &vars);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, err)
}

/// No panic message and no backtrace in `stderr`.
fn quiet(stderr: &str) {
    for noise in ["panicked", "stack backtrace", "RUST_BACKTRACE", "note:"] {
        assert!(!stderr.contains(noise), "{noise:?} in\n{stderr}");
    }
}

#[test]
fn an_escalation_prints_one_line_and_exits_3() {
    let cfg = toml(
        "escalate",
        "[cd.iteration]\ninject = { at = [{ rank = 3, iteration = 2, kind = \"rank_loss\" }] }\n",
    );
    let (out, err) = stencil(&cfg, false);
    assert_eq!(out.status.code(), Some(3), "{err}");
    quiet(&err);
    assert_eq!(err.lines().count(), 1, "one line:\n{err}");
    assert!(
        err.starts_with("cd_stencil: error: CD \"iteration\""),
        "{err}"
    );
    assert!(err.contains("on rank 3: injected loss of rank 3"), "{err}");
    assert!(err.contains("medium = \"buddy\""), "{err}");
    assert!(out.stdout.is_empty(), "no answer");
    std::fs::remove_file(cfg).unwrap();
}

#[test]
fn files_of_the_file_medium_are_removed_when_the_run_escalates() {
    let dir = temp("files");
    let cfg = toml(
        "files",
        &format!(
            "file_dir = {:?}\n[cd.iteration]\nmedium = \"file\"\ncontain = [\"soft\"]\n\
             inject = {{ at = [{{ rank = 5, iteration = 3, kind = \"rank_loss\" }}] }}\n",
            dir.display().to_string()
        ),
    );
    let (out, err) = stencil(&cfg, false);
    assert_eq!(out.status.code(), Some(3), "{err}");
    quiet(&err);
    assert!(
        err.contains("add \"rank_loss\" to `contain` in [cd.iteration]"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    std::fs::remove_dir(&dir).unwrap();
    std::fs::remove_file(cfg).unwrap();
}

#[test]
fn a_configuration_error_names_the_key_and_exits_non_zero() {
    // A fault on a rank the job does not have: refused before the job starts.
    let cfg = toml(
        "rank100",
        "[cd.iteration]\ninject = { at = [{ rank = 100, iteration = 2, kind = \"soft\" }] }\n",
    );
    let (out, err) = stencil(&cfg, true); // by CD_CONFIG
    assert_eq!(out.status.code(), Some(2), "{err}");
    quiet(&err);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("key `cd.iteration.inject.at.rank`"), "{err}");
    assert!(
        err.contains("rank 100") && err.contains("8 rank(s)"),
        "{err}"
    );
    std::fs::remove_file(cfg).unwrap();

    // A bad value is named by its key.
    let cfg = toml(
        "negative",
        "[cd.iteration]\ninject = { at = [{ rank = -1, iteration = 2, kind = \"soft\" }] }\n",
    );
    let (out, err) = stencil(&cfg, false);
    assert!(!out.status.success());
    quiet(&err);
    assert!(
        err.contains(":2: key `cd.iteration.inject.at.rank`"),
        "{err}"
    );
    std::fs::remove_file(cfg).unwrap();

    // A file_dir that is a regular file.
    let file = temp("plain-file");
    std::fs::write(&file, "x").unwrap();
    let cfg = toml(
        "filedir",
        &format!("file_dir = {:?}\n", file.display().to_string()),
    );
    let (out, err) = stencil(&cfg, false);
    assert_eq!(out.status.code(), Some(2), "{err}");
    quiet(&err);
    assert!(
        err.contains("key `file_dir`") && err.contains("not a directory"),
        "{err}"
    );
    std::fs::remove_file(cfg).unwrap();

    // A report_file that cannot be written.
    let cfg = toml(
        "report",
        &format!(
            "report_file = {:?}\n",
            file.join("r.json").display().to_string()
        ),
    );
    let (out, err) = stencil(&cfg, false);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("key `report_file`"), "{err}");
    std::fs::remove_file(cfg).unwrap();
    std::fs::remove_file(file).unwrap();
}

#[test]
fn a_table_the_run_never_uses_is_reported() {
    let cfg = toml("unused", "seed = 1\n[cd.itreation]\nretries = 4\n");
    let (out, err) = stencil(&cfg, false);
    assert!(out.status.success(), "{err}");
    quiet(&err);
    assert!(
        err.contains(":2: [cd.itreation] names a CD this run never entered")
            && err.contains("CDs it entered: iteration"),
        "{err}"
    );
    std::fs::remove_file(cfg).unwrap();
}
