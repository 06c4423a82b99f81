//! The schema in the repository, `cd.example.toml`, parses and names every key the parser
//! knows: a key added to the parser without its description there fails here.

use std::collections::HashSet;

use cd_runtime::{CdConfig, LogMedium};

/// The keys written in a TOML value, at any depth.
fn keys_in(value: &toml::Value, keys: &mut HashSet<String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                keys.insert(k.clone());
                keys_in(v, keys);
            }
        }
        toml::Value::Array(a) => a.iter().for_each(|v| keys_in(v, keys)),
        _ => {}
    }
}

#[test]
fn the_example_toml_parses_and_names_every_key() {
    let text = include_str!("../cd.example.toml");
    let parse = |t: &str| CdConfig::parse(t, "test.toml");
    let c = parse(text).unwrap_or_else(|e| panic!("cd.example.toml: {e}"));
    assert_eq!(c.settings("solve", 1).xor_group, Some(4));
    assert_eq!(c.settings("halo", 1).log_medium, LogMedium::Buddy);
    assert_eq!(
        c.checkpoint.as_ref().map(|(n, _)| n.as_str()),
        Some("cycle")
    );
    // Dependency tracking: set in the example's `step`, unset (learned per CD) elsewhere.
    assert_eq!(c.settings("step", 1).dependency_tracking, Some(true));
    assert_eq!(c.settings("solve", 1).dependency_tracking, None);
    let off = parse("[cd.step]\ndependency_tracking = false\n").unwrap();
    assert_eq!(off.settings("step", 1).dependency_tracking, Some(false));
    let mut written = HashSet::new();
    keys_in(&toml::from_str(text).unwrap(), &mut written);
    // The message about an unknown key lists the known ones, in each kind of table.
    for probe in [
        "zzz = 1",
        "[defaults]\nzzz = 1",
        "[defaults]\ninject = { zzz = 1 }",
        "[defaults]\ninject = { at = [{ zzz = 1 }] }",
        "[cd.x]\ncheckpoint = { zzz = 1 }",
    ] {
        let e = parse(probe).unwrap_err();
        // "unknown field `zzz`, expected one of `a`, `b`, ...": the names after the first.
        let known: Vec<&str> = e.message.split('`').skip(3).step_by(2).collect();
        assert!(known.len() > 2, "{probe}: {e}");
        for key in known {
            assert!(
                written.contains(key),
                "cd.example.toml does not name `{key}`"
            );
        }
    }
}
