//! The CD configuration's public behaviour: parsing, merging the tables, defaults, the errors
//! and the places they name, the checks against a job, the tables a run never used.

use std::path::PathBuf;

use cd_runtime::config::{DEFAULT_BUDDY_SEGMENT_BYTES, DEFAULT_RECOVERY_SECONDS};
use cd_runtime::{
    BuddyDomain, CdConfig, CdKindSetting, ConfigError, ExactFault, FaultKind, FaultKinds, Interval,
    LogMedium, Medium, UNREACHED_LINES,
};

fn parse(t: &str) -> Result<CdConfig, ConfigError> {
    CdConfig::parse(t, "test.toml")
}

#[test]
fn thousands_of_unreached_faults_take_a_few_lines() {
    let at: Vec<String> = (0..5000)
        .map(|i| format!("{{ rank = 0, iteration = {}, kind = \"soft\" }}", 1000 + i))
        .collect();
    let c = parse(&format!(
        "[cd.step]\ninject = {{ at = [{}] }}\n",
        at.join(", ")
    ))
    .unwrap();
    let lines = c.unreached(&[]);
    assert_eq!(lines.len(), UNREACHED_LINES + 1, "{:?}", &lines[..3]);
    assert!(lines[0].contains("iteration = 1000,"), "{}", lines[0]);
    assert_eq!(
        lines[UNREACHED_LINES],
        format!(
            "... and {} more exact faults of the configuration were never injected",
            5000 - UNREACHED_LINES
        )
    );
}

#[test]
fn layers_merge_field_by_field() {
    let c = parse(
        "seed = 9\n[defaults]\nretries = 5\n[level.1]\nmedium = \"buddy\"\n\
         [cd.step]\nretries = 1\ninject = { soft_error = 0.5, at = [{ rank = 2, iteration = 3, kind = \"rank_loss\" }] }\n",
    )
    .unwrap();
    assert_eq!(c.seed, 9);
    let s = c.settings("step", 1);
    assert_eq!((s.medium, s.retries), (Medium::Buddy, 1));
    assert_eq!(s.inject.soft_error, 0.5);
    assert_eq!(
        s.inject.at.as_slice(),
        [ExactFault {
            rank: 2,
            iteration: 3,
            kind: FaultKind::RankLoss,
            at_op: None,
        }]
    );
    let other = c.settings("other", 2);
    assert_eq!((other.medium, other.retries), (Medium::Local, 5));
    assert!(other.contain.contains(FaultKinds::RANK_LOSS));
}

#[test]
fn buddy_segment_bytes_defaults_rounds_and_names_itself() {
    assert_eq!(
        CdConfig::default().buddy_segment_bytes,
        DEFAULT_BUDDY_SEGMENT_BYTES
    );
    assert_eq!(
        parse("seed = 1\n").unwrap().buddy_segment_bytes,
        DEFAULT_BUDDY_SEGMENT_BYTES
    );
    assert_eq!(
        parse("buddy_segment_bytes = 0\n")
            .unwrap()
            .buddy_segment_bytes,
        0
    );
    assert_eq!(
        parse("buddy_segment_bytes = 100\n")
            .unwrap()
            .buddy_segment_bytes,
        128
    );
    let e = parse("seed = 1\nbuddy_segment_bytes = -5\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(2), Some("buddy_segment_bytes"))
    );
    assert!(e.to_string().contains("-5"), "{e}");
    let e = parse("[defaults]\nbuddy_segment_bytes = 5\n").unwrap_err();
    assert_eq!(
        e.key.as_deref(),
        Some("buddy_segment_bytes"),
        "top level only"
    );
}

#[test]
fn buddy_copies_is_one_or_two_and_names_itself() {
    assert_eq!(CdConfig::default().buddy_copies, 2);
    assert_eq!(parse("seed = 1\n").unwrap().buddy_copies, 2);
    assert_eq!(parse("buddy_copies = 1\n").unwrap().buddy_copies, 1);
    assert_eq!(parse("buddy_copies = 2\n").unwrap().buddy_copies, 2);
    for bad in ["0", "3", "-1"] {
        let e = parse(&format!("seed = 1\nbuddy_copies = {bad}\n")).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("buddy_copies")),
            "{bad}"
        );
        assert!(e.to_string().contains("1 (the buddy's copy alone)"), "{e}");
    }
}

#[test]
fn interval_and_mtbf_parse_merge_and_name_themselves() {
    let c = parse(
        "[defaults]\nmtbf_seconds = 3600.5\n[level.1]\ninterval = 4\n\
         [cd.a]\ninterval = \"daly\"\n[cd.b]\ninterval = \"every\"\n[cd.c]\ninterval = 1\n",
    )
    .unwrap();
    assert_eq!(c.settings("x", 1).interval, Interval::Steps(4));
    assert_eq!(c.settings("a", 1).interval, Interval::Daly);
    assert_eq!(c.settings("a", 1).mtbf_seconds, Some(3600.5));
    assert_eq!(c.settings("b", 1).interval, Interval::Every);
    assert_eq!(c.settings("c", 1).interval, Interval::Every);
    assert_eq!(c.settings("x", 2).interval, Interval::Every, "default");
    assert_eq!(CdConfig::default().settings("x", 1).mtbf_seconds, None);
    let e = parse("[cd.x]\ninterval = \"daly\"\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(2), Some("cd.x.interval")),
        "{e}"
    );
    assert!(e.to_string().contains("mtbf_seconds"), "{e}");
    parse("[cd.x]\ninterval = \"daly\"\nmtbf_seconds = 60\n").unwrap();
    for (bad, key, words) in [
        ("interval = 0", "cd.x.interval", "1 or more"),
        ("interval = \"weekly\"", "cd.x.interval", "weekly"),
        ("mtbf_seconds = -1.0", "cd.x.mtbf_seconds", "above 0"),
        ("mtbf_seconds = 0", "cd.x.mtbf_seconds", "above 0"),
    ] {
        let e = parse(&format!("[cd.x]\n{bad}\n")).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some(key)),
            "{bad}: {e}"
        );
        assert!(e.to_string().contains(words), "{bad}: {e}");
    }
}

#[test]
fn xor_group_parses_merges_and_is_checked() {
    let c = parse(
        "[defaults]\nxor_group = 4\n[level.1]\nmedium = \"xor\"\n\
         [cd.small]\nmedium = \"xor\"\nxor_group = 2\n",
    )
    .unwrap();
    let s = c.settings("x", 1);
    assert_eq!((s.medium, s.xor_group), (Medium::Xor, Some(4)));
    assert_eq!(c.settings("small", 3).xor_group, Some(2));
    assert_eq!(c.xor_group_sizes(), vec![2, 4]);
    assert_eq!(CdConfig::default().xor_group_sizes(), Vec::<usize>::new());
    c.check_job(4).unwrap();
    let e = c.check_job(3).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("xor_group"), "{e}");
    assert!(e.to_string().contains("xor_group = 4") && e.to_string().contains("3"));
    for (bad, key, line, words) in [
        ("[cd.x]\nxor_group = 1\n", "cd.x.xor_group", 2, "at least 2"),
        ("[cd.x]\nxor_group = -3\n", "cd.x.xor_group", 2, "-3"),
        (
            "[cd.x]\nretries = 1\nmedium = \"xor\"\n",
            "cd.x.medium",
            3,
            "xor_group",
        ),
        (
            "[level.2]\nmedium = \"xor\"\nxor_group = 2\nkind = \"relaxed\"\n",
            "level.2.medium",
            2,
            "relaxed",
        ),
    ] {
        let e = parse(bad).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(line), Some(key)),
            "{bad}: {e}"
        );
        assert!(e.to_string().contains(words), "{bad}: {e}");
    }
    // The group size from [defaults] serves every table.
    parse("[defaults]\nxor_group = 3\n[cd.x]\nmedium = \"xor\"\n").unwrap();
}

#[test]
fn node_mtbf_and_recovery_seconds_parse_and_name_themselves() {
    let c = CdConfig::default();
    assert_eq!(
        (c.node_mtbf_seconds, c.recovery_seconds),
        (None, DEFAULT_RECOVERY_SECONDS)
    );
    let c = parse("node_mtbf_seconds = 86400\nrecovery_seconds = 12.5\n").unwrap();
    assert_eq!(
        (c.node_mtbf_seconds, c.recovery_seconds),
        (Some(86400.0), 12.5)
    );
    for (bad, key) in [
        ("node_mtbf_seconds = 0\n", "node_mtbf_seconds"),
        ("recovery_seconds = -1.0\n", "recovery_seconds"),
    ] {
        let e = parse(&format!("seed = 1\n{bad}")).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(2), Some(key)), "{e}");
        assert!(e.to_string().contains("above 0"), "{e}");
    }
}

#[test]
fn buddy_domain_parses_and_names_itself() {
    assert_eq!(CdConfig::default().buddy_domain, BuddyDomain::Node);
    assert_eq!(
        parse("buddy_domain = \"rank\"\n").unwrap().buddy_domain,
        BuddyDomain::Rank
    );
    assert_eq!(
        parse("buddy_domain = \"node\"\n").unwrap().buddy_domain,
        BuddyDomain::Node
    );
    let e = parse("seed = 1\nbuddy_domain = \"rack\"\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(2), Some("buddy_domain")),
        "{e}"
    );
    assert!(e.to_string().contains("rack"), "{e}");
}

#[test]
fn unknown_key_names_file_line_and_key() {
    let e = parse("seed = 1\n[defaults]\nretris = 3\n").unwrap_err();
    assert_eq!(e.file, PathBuf::from("test.toml"));
    assert_eq!(e.line, Some(3));
    assert_eq!(e.key.as_deref(), Some("retris"));
    let msg = e.to_string();
    assert!(msg.starts_with("test.toml:3: key `retris`"), "{msg}");
}

#[test]
fn bad_values_name_their_key() {
    let e = parse("[cd.x]\nretries = -2\n").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("cd.x.retries")));
    let e = parse("[cd.x]\ninject = { soft_error = 1.5 }\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(2), Some("cd.x.inject.soft_error"))
    );
    let e = parse("[cd.x]\nmedium = \"tape\"\n").unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(e.to_string().contains("tape"), "{e}");
    let e = parse("[level.one]\nretries = 1\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("level.one"));
    let e = parse("seed = \"x\"\n").unwrap_err();
    assert_eq!(e.line, Some(1));
}

#[test]
fn relaxed_keys_parse_and_name_themselves_in_errors() {
    let c = parse(
        "[level.2]\nkind = \"relaxed\"\nlog_spill_bytes = 4096\n\
         [cd.halo]\nlogging = false\ncheck_classes = true\n",
    )
    .unwrap();
    let s = c.settings("halo", 2);
    assert_eq!(s.kind, Some(CdKindSetting::Relaxed));
    assert_eq!(s.log_spill_bytes, Some(4096));
    assert!(!s.logging && s.check_classes);
    assert_eq!(c.settings("x", 1).kind, None);
    assert!(c.settings("x", 1).logging);
    let e = parse("[cd.x]\nlog_spill_bytes = -1\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(2), Some("cd.x.log_spill_bytes"))
    );
    let e = parse("[cd.x]\nkind = \"lax\"\n").unwrap_err();
    assert_eq!(e.line, Some(2));
    assert!(e.to_string().contains("lax"), "{e}");
    let e = parse("[cd.x]\nlogging = 3\n").unwrap_err();
    assert_eq!(e.line, Some(2));
    let e = parse("[cd.x]\ncheck_class = true\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("check_class"));
}

#[test]
fn log_medium_parses_merges_and_refuses_contradictions() {
    let c = parse(
        "[defaults]\nmedium = \"buddy\"\n[level.2]\nlog_medium = \"buddy\"\n\
         [cd.halo]\nlog_medium = \"local\"\n",
    )
    .unwrap();
    assert_eq!(c.settings("x", 2).log_medium, LogMedium::Buddy);
    assert_eq!(c.settings("halo", 2).log_medium, LogMedium::Local);
    assert_eq!(c.settings("x", 1).log_medium, LogMedium::Local, "default");
    // Only local and buddy: a file medium for logs would be spilling, which is local.
    let e = parse("[cd.x]\nlog_medium = \"file\"\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(2), Some("cd.x.log_medium")),
        "{e}"
    );
    assert!(e.to_string().contains("file"), "{e}");
    // Recovering alone from a loss needs the preserved state to survive it.
    let e = parse("[cd.x]\nmedium = \"local\"\nlog_medium = \"buddy\"\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(3), Some("cd.x.log_medium")),
        "{e}"
    );
    assert!(e.to_string().contains("medium = \"buddy\""), "{e}");
    let e = parse("[level.1]\ncontain = [\"soft\"]\nlog_medium = \"buddy\"\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("level.1.log_medium"), "{e}");
    assert!(e.to_string().contains("rank_loss"), "{e}");
    // Misspelt, the key is named and the known keys listed.
    let e = parse("[cd.x]\nlog_medum = \"buddy\"\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("log_medum"), "{e}");
    assert!(e.to_string().contains("log_medium"), "{e}");
}

#[test]
fn a_bad_value_is_named_by_its_key_not_the_value() {
    let e = parse("[cd.x]\ninject = { at = [{ rank = -1, iteration = 0, kind = \"soft\" }] }\n")
        .unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(2), Some("cd.x.inject.at.rank"))
    );
    let msg = e.to_string();
    assert!(
        msg.contains("key `cd.x.inject.at.rank`") && !msg.contains("key `-1`"),
        "{msg}"
    );
    let e = parse("[cd.x]\nmedium = \"tape\"\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("cd.x.medium"), "{e}");
    let e = parse("seed = \"x\"\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("seed"), "{e}");
    // An unknown key is still named by the message.
    let e = parse("[cd.x]\ninject = { at = [{ rnak = 1 }] }\n").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("rnak"), "{e}");
}

#[test]
fn a_fault_on_a_rank_the_job_lacks_is_refused_at_start() {
    let c = parse(
        "[cd.step]\ninject = { at = [\n  { rank = 1, iteration = 0, kind = \"soft\" },\n  \
         { rank = 100, iteration = 2, kind = \"rank_loss\" } ] }\n",
    )
    .unwrap();
    c.check_job(101).unwrap();
    let e = c.check_job(8).unwrap_err();
    assert_eq!(e.file, PathBuf::from("test.toml"));
    assert_eq!(e.line, Some(4));
    assert_eq!(e.key.as_deref(), Some("cd.step.inject.at.rank"));
    assert!(
        e.to_string().contains("rank 100") && e.to_string().contains("8 rank"),
        "{e}"
    );
    // Set in code, the same.
    let c = CdConfig::default()
        .with_cd(
            "s",
            "inject = { at = [{ rank = 2, iteration = 0, kind = \"soft\" }] }",
        )
        .unwrap();
    assert!(c.check_job(2).is_err() && c.check_job(3).is_ok());
}

#[test]
fn an_unusable_file_dir_or_report_file_is_a_config_error() {
    let tmp = std::env::temp_dir().join(format!("cd-config-check-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let file = tmp.join("plain");
    std::fs::write(&file, "x").unwrap();
    let c = parse(&format!(
        "seed = 1\nfile_dir = {:?}\n",
        file.display().to_string()
    ))
    .unwrap();
    let e = c.check_job(2).unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("file_dir")));
    assert!(e.to_string().contains("not a directory"), "{e}");
    let c = parse(&format!(
        "file_dir = {:?}\n",
        file.join("sub").display().to_string()
    ))
    .unwrap();
    assert_eq!(c.check_job(2).unwrap_err().key.as_deref(), Some("file_dir"));
    let c = parse(&format!("report_file = {:?}\n", tmp.display().to_string())).unwrap();
    let e = c.check_job(2).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("report_file"), "{e}");
    let c = parse(&format!(
        "report_file = {:?}\n",
        tmp.join("no/such/dir.json").display().to_string()
    ))
    .unwrap();
    assert_eq!(
        c.check_job(2).unwrap_err().key.as_deref(),
        Some("report_file")
    );
    // Usable: checked without leaving anything behind.
    let dir = tmp.join("files");
    let report = tmp.join("r.json");
    let c = parse(&format!(
        "file_dir = {:?}\nreport_file = {:?}\n",
        dir.display().to_string(),
        report.display().to_string()
    ))
    .unwrap();
    c.check_job(2).unwrap();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    assert!(!report.exists());
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn tables_the_run_never_used_are_reported() {
    let c = parse("[cd.step]\nretries = 1\n[cd.stpe]\nretries = 1\n[level.1]\nretries = 1\n[level.3]\nretries = 1\n").unwrap();
    let unused = c.unused([("step", 1)]);
    assert_eq!(unused.len(), 2, "{unused:?}");
    assert!(
        unused[0].starts_with("test.toml:3: [cd.stpe]"),
        "{unused:?}"
    );
    assert!(unused[0].contains("CDs it entered: step"), "{unused:?}");
    assert!(
        unused[1].starts_with("test.toml:7: [level.3]"),
        "{unused:?}"
    );
}

#[test]
fn missing_file_names_it() {
    let e = CdConfig::from_file("/nonexistent/cd.toml").unwrap_err();
    assert_eq!(e.file, PathBuf::from("/nonexistent/cd.toml"));
    assert!(e.to_string().contains("/nonexistent/cd.toml"));
}
