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
    // A removed key is refused with why and what to do, at its place.
    for text in [
        "[cd.smooth]\nrestart_threads = 2\n",
        "[defaults]\nrestart_threads = 1\n",
    ] {
        at(
            &err(text),
            2,
            "restart_threads",
            "`restart_threads` was removed: a re-execution's kernels on a thread pool were \
             measured slower",
        );
        assert!(err(text).message.contains("Delete the key"), "{text}");
    }
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
    // In range, both ends (a certain failure without retries: it escalates at once).
    let c = CdConfig::parse(
        "[cd.step]\nretries = 0\ninject = { soft_error = 0.0, rank_loss = 1.0 }\n",
        "cd.toml",
    )
    .unwrap();
    assert_eq!(c.settings("step", 1).inject.rank_loss, 1.0);
}

#[test]
fn retries_are_capped_naming_the_key_and_the_limit() {
    at(
        &err("[cd.step]\nretries = 1000000\n"),
        2,
        "cd.step.retries",
        "between 0 and 1000",
    );
    at(
        &err("[level.1]\nretries = 1001\n"),
        2,
        "level.1.retries",
        "got 1001",
    );
    let c = CdConfig::parse("[defaults]\nretries = 1000\n", "cd.toml").unwrap();
    assert_eq!(
        c.settings("step", 1).retries,
        1000,
        "the limit itself is allowed"
    );
}

/// A CD that fails in every execution (an injection probability of 1) and has retries left
/// can never complete: refused, naming the probability's key and where the retries come from.
#[test]
fn a_cd_that_can_never_complete_is_refused_naming_the_keys() {
    at(
        &err("[cd.step]\nretries = 1000000\ninject = { soft_error = 1.0 }\n"),
        2,
        "cd.step.retries",
        "between 0 and 1000",
    );
    let e = err("[cd.step]\nretries = 5\ninject = { soft_error = 1.0 }\n");
    at(&e, 3, "cd.step.inject.soft_error", "never");
    assert!(e.to_string().contains("`cd.step.retries`"), "{e}");
    assert!(e.to_string().contains("retries = 5"), "{e}");
    // The retries from another table, or the default.
    let e = err("[defaults]\nretries = 3\n[cd.step]\ninject = { rank_loss = 1.0 }\n");
    at(&e, 4, "cd.step.inject.rank_loss", "`defaults.retries`");
    let e = err("[level.2]\n\ninject = { soft_error = 1.0 }\n");
    at(
        &e,
        3,
        "level.2.inject.soft_error",
        "retries = 2 (the default)",
    );
    // A name's probability with a level's retries: the CD at that level never completes.
    let e = err(
        "[defaults]\nretries = 0\n[level.1]\nretries = 1\n[cd.step]\ninject = { soft_error = 1.0 }\n",
    );
    at(&e, 6, "cd.step.inject.soft_error", "`level.1.retries`");
    assert_eq!(e.to_string().lines().count(), 1, "{e}");
    // Another table's `retries = 0` does not help: the CD keeps the default.
    let e = err("[cd.step]\ninject = { soft_error = 1.0 }\n[cd.other]\nretries = 0\n");
    at(
        &e,
        2,
        "cd.step.inject.soft_error",
        "retries = 2 (the default)",
    );
    // Without retries to spend, or below 1, it is a valid (if harsh) test.
    for ok in [
        "[cd.step]\nretries = 0\ninject = { soft_error = 1.0 }\n",
        "[defaults]\nretries = 0\n[cd.step]\ninject = { soft_error = 1.0 }\n",
        "[cd.step]\nretries = 1000\ninject = { soft_error = 0.999 }\n",
    ] {
        CdConfig::parse(ok, "cd.toml").unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
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

#[test]
fn a_bad_cluster_names_the_key() {
    at(
        &err("seed = 1\ncluster = 0\n"),
        2,
        "cluster",
        "at least 1 rank",
    );
    at(&err("cluster = -3\n"), 1, "cluster", "at least 1 rank");
    at(&err("cluster = \"rack\"\n"), 1, "cluster", "\"node\"");
    // Larger than the job: refused when the job's size is known.
    let c = CdConfig::parse("seed = 1\ncluster = 9\n", "cd.toml").unwrap();
    assert_eq!(c.cluster, cd_runtime::Cluster::Ranks(9));
    c.check_job(9).unwrap();
    at(&c.check_job(8).unwrap_err(), 2, "cluster", "at most 8");
    let c = CdConfig::parse("cluster = \"node\"\n", "cd.toml").unwrap();
    assert_eq!(c.cluster, cd_runtime::Cluster::Node);
    c.check_job(1).unwrap();
}
