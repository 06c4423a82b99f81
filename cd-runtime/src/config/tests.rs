//! The configuration's tests that reach inside it (which exact faults an execution reaches,
//! the rule that picks a program's file) and the test of the schema example; its public
//! behaviour is tested in `cd-runtime/tests/config_parse.rs`.

use std::path::Path;

use super::*;

fn parse(t: &str) -> Result<CdConfig, ConfigError> {
    CdConfig::parse(t, "test.toml")
}

#[test]
fn unreached_exact_faults_name_their_line() {
    let c = parse(
        "[defaults]\ninject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }] }\n\
         [cd.step]\ninject = { at = [\n  { rank = 1, iteration = 2, kind = \"soft\" },\n  \
         { rank = 1, iteration = 99, kind = \"rank_loss\" },\n] }\n",
    )
    .unwrap();
    // `step` takes its faults from [cd.step]; other CDs from [defaults].
    assert_eq!(c.exact_sites("step", 1, 1, 2), vec![1]);
    assert!(c.exact_sites("step", 1, 0, 1).is_empty());
    assert_eq!(c.exact_sites("other", 1, 0, 1), vec![0]);
    assert!(c.exact_sites("step", 1, 1, 3).is_empty());
    let lines = c.unreached(&[0, 1]);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        lines[0],
        "test.toml:6: [cd.step] inject.at { rank = 1, iteration = 99, kind = \"rank_loss\" } \
         was never injected: rank 1 never began instance 99 (counted from 0) of a CD that \
         takes its faults from [cd.step]; check the rank and the iteration"
    );
    assert_eq!(c.unreached(&[0, 1, 2]), Vec::<String>::new());
}

#[test]
fn the_command_line_wins_over_cd_config() {
    let tmp = std::env::temp_dir().join(format!("cd-config-rule-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let (a, b) = (tmp.join("a.toml"), tmp.join("b.toml"));
    std::fs::write(&a, "seed = 1\n").unwrap();
    std::fs::write(&b, "seed = 2\n").unwrap();
    let seed = |cli: Option<&Path>, env: Option<&Path>| {
        CdConfig::for_program_with(cli, env.map(|p| p.as_os_str().to_owned()))
            .unwrap()
            .map(|c| c.seed)
    };
    assert_eq!(seed(Some(&a), Some(&b)), Some(1));
    assert_eq!(seed(None, Some(&b)), Some(2));
    assert_eq!(seed(None, None), None);
    assert_eq!(seed(None, Some(Path::new(""))), None, "empty: unset");
    let e = CdConfig::for_program_with(None, Some(tmp.join("nope.toml").into())).unwrap_err();
    assert!(e.to_string().contains("named by CD_CONFIG"), "{e}");
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// The keys written in a TOML value, at any depth.
fn keys_in(value: &toml::Value, keys: &mut std::collections::HashSet<String>) {
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

/// The schema in the repository parses, and names every key the parser knows (as its message
/// about an unknown key lists them, in each kind of table): a key added to the parser without
/// its description in `cd.example.toml` fails here.
#[test]
fn the_example_toml_parses_and_names_every_key() {
    let text = include_str!("../../cd.example.toml");
    let c = parse(text).unwrap_or_else(|e| panic!("cd.example.toml: {e}"));
    assert_eq!(c.settings("solve", 1).xor_group, Some(4));
    assert_eq!(c.settings("halo", 1).log_medium, LogMedium::Buddy);
    // Dependency tracking: set in the example's `step`, unset (learned per CD) elsewhere.
    assert_eq!(c.settings("step", 1).dependency_tracking, Some(true));
    assert_eq!(c.settings("solve", 1).dependency_tracking, None);
    assert_eq!(
        parse("[cd.step]\ndependency_tracking = false\n")
            .unwrap()
            .settings("step", 1)
            .dependency_tracking,
        Some(false)
    );
    let mut written = std::collections::HashSet::new();
    keys_in(&toml::from_str(text).unwrap(), &mut written);
    for probe in [
        "zzz = 1",
        "[defaults]\nzzz = 1",
        "[defaults]\ninject = { zzz = 1 }",
        "[defaults]\ninject = { at = [{ zzz = 1 }] }",
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
