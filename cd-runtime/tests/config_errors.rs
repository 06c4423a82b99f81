//! Configuration errors name the file, the line and the key.

use std::path::PathBuf;

use cd_runtime::{CdConfig, ConfigError, Medium};

fn err(text: &str) -> ConfigError {
    CdConfig::parse(text, "cd.toml").expect_err("an error")
}

/// Asserts the error is at `line` about `key`, and its message says all three and `says`.
fn at(e: &ConfigError, line: usize, key: &str, says: &str) {
    assert_eq!(e.file, PathBuf::from("cd.toml"), "{e}");
    assert_eq!(e.line, Some(line), "{e}");
    assert_eq!(e.key.as_deref(), Some(key), "{e}");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("cd.toml:{line}: key `{key}`")),
        "{msg}"
    );
    assert!(msg.contains(says), "{says:?} not in {msg}");
}

#[test]
fn unknown_keys() {
    at(&err("seed = 1\nsede = 2\n"), 2, "sede", "unknown field");
    at(
        &err("[defaults]\nretries = 1\nmedum = \"buddy\"\n"),
        3,
        "medum",
        "unknown field",
    );
    at(
        &err("[cd.step]\n\ninject = { soft_eror = 0.1 }\n"),
        3,
        "soft_eror",
        "unknown field",
    );
    at(
        &err(
            "[cd.step]\ninject = { at = [{ rank = 1, iteration = 2, kind = \"soft\", when = 3 }] }\n",
        ),
        2,
        "when",
        "unknown field",
    );
    at(
        &err("[levels.1]\nretries = 1\n"),
        1,
        "levels",
        "unknown field",
    );
}

#[test]
fn bad_values() {
    let e = err("[cd.step]\nmedium = \"tape\"\n");
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.to_string().contains("tape"), "{e}");
    at(
        &err("[level.2]\n# comment\nretries = -1\n"),
        3,
        "level.2.retries",
        "between 0 and",
    );
    at(
        &err("[defaults]\nretries = 2000000\n"),
        2,
        "defaults.retries",
        "between 0 and",
    );
    let e = err("[cd.step]\nretries = \"two\"\n");
    assert_eq!(e.line, Some(2), "{e}");
    let e = err("[cd.step]\ninject = { at = [{ rank = 0, iteration = 0, kind = \"meteor\" }] }\n");
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.to_string().contains("meteor"), "{e}");
    let e = err("[cd.step]\ncontain = [\"cosmic\"]\n");
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.to_string().contains("cosmic"), "{e}");
    at(
        &err("[level.top]\nretries = 1\n"),
        1,
        "level.top",
        "whole number",
    );
    let e = err("seed = -3\n");
    assert_eq!(e.line, Some(1), "{e}");
    at(
        &err("[cd.smooth]\nrestart_threads = 0\n"),
        2,
        "cd.smooth.restart_threads",
        "between 1 (a serial restart) and",
    );
    at(
        &err("[defaults]\nrestart_threads = 1000000\n"),
        2,
        "defaults.restart_threads",
        "the threads this machine runs",
    );
}

#[test]
fn probabilities_out_of_range() {
    at(
        &err("[cd.step]\ninject = { soft_error = 1.5 }\n"),
        2,
        "cd.step.inject.soft_error",
        "between 0 and 1",
    );
    at(
        &err("[defaults]\n\n\ninject = { rank_loss = -0.1 }\n"),
        4,
        "defaults.inject.rank_loss",
        "-0.1",
    );
    at(
        &err("[level.1.inject]\nsoft_error = 0.5\nrank_loss = 7\n"),
        3,
        "level.1.inject.rank_loss",
        "got 7",
    );
    // In range, both ends.
    let c = CdConfig::parse(
        "[cd.step]\ninject = { soft_error = 0.0, rank_loss = 1.0 }\n",
        "cd.toml",
    )
    .unwrap();
    assert_eq!(c.settings("step", 1).inject.rank_loss, 1.0);
}

#[test]
fn files_missing_and_present() {
    let dir = std::env::temp_dir().join(format!("cd-config-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("nope.toml");
    let e = CdConfig::from_file(&missing).unwrap_err();
    assert_eq!(e.file, missing);
    assert_eq!(e.line, None);
    assert!(e.to_string().contains(&*missing.to_string_lossy()), "{e}");
    assert!(e.to_string().contains("cannot read"), "{e}");

    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "seed = 3\n\n[cd.step]\nmedium = \"buddy\"\nretries = 1\nretires = 2\n",
    )
    .unwrap();
    let e = CdConfig::from_file(&bad).unwrap_err();
    assert_eq!(
        (e.file.clone(), e.line, e.key.as_deref()),
        (bad.clone(), Some(6), Some("retires"))
    );
    assert!(
        e.to_string()
            .starts_with(&format!("{}:6: key `retires`", bad.display())),
        "{e}"
    );

    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "seed = 3\n[level.1]\nmedium = \"file\"\n[cd.step]\nretries = 0\n",
    )
    .unwrap();
    let c = CdConfig::from_file(&good).unwrap();
    assert_eq!(c.seed, 3);
    let s = c.settings("step", 1);
    assert_eq!((s.medium, s.retries), (Medium::File, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn inline_tables_name_the_string() {
    let e = CdConfig::default()
        .with_cd("step", "retries = -5")
        .unwrap_err();
    assert_eq!(e.file, PathBuf::from("<string>"));
    assert_eq!(e.key.as_deref(), Some("cd.step.retries"));
}
