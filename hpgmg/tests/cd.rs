//! HPGMG under Containment Domains (`--cd-config`): a strict CD per solve and per level of its
//! F-cycle. Injected soft errors and rank losses give the fault-free norms, error and order
//! bit for bit (and the same v-cycle and bottom-solver counts); a bad configuration is
//! refused clearly.

mod common;

use common::{REF_5_8, TempFile, assert_richardson, hpgmg, physics, run};

const FAULTS: &str = r#"
seed = 7
[cd.solve]
medium = "buddy"
inject = { at = [
    { rank = 1, iteration = 2, kind = "soft" },
    { rank = 3, iteration = 5, kind = "rank_loss" },
] }
[cd.level]
medium = "buddy"
inject = { at = [
    { rank = 0, iteration = 7, kind = "soft" },
    { rank = 6, iteration = 30, kind = "rank_loss" },
] }
"#;

#[test]
fn eight_ranks_with_soft_errors_and_rank_losses_are_bit_exact() {
    let faults = TempFile::new("faults.toml", FAULTS);
    let clean = run(&["5", "1", "--ranks", "8", "--solves", "1"]);
    let out = run(&[
        "5",
        "1",
        "--ranks",
        "8",
        "--solves",
        "1",
        "--cd-config",
        faults.arg(),
    ]);
    assert_richardson(&out, &REF_5_8, "with faults");
    assert_eq!(physics(&out), physics(&clean));
    let row = |name: &str| -> Vec<String> {
        let line = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row in\n{out}"));
        line.split_whitespace().map(String::from).collect()
    };
    // cd, level, execs, reexecs, escal, injected, ...
    let solve = row("solve ");
    assert_eq!((solve[1].as_str(), solve[3].as_str()), ("1", "16"));
    assert_eq!((solve[4].as_str(), solve[5].as_str()), ("0", "2"));
    let level = row("level ");
    assert_eq!((level[1].as_str(), level[3].as_str()), ("2", "16"));
    assert_eq!((level[4].as_str(), level[5].as_str()), ("0", "2"));
}

#[test]
fn one_rank_with_soft_errors_is_bit_exact() {
    let faults = TempFile::new(
        "soft.toml",
        "seed = 3\n[cd.solve]\ninject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }] }\n\
         [cd.level]\ninject = { soft_error = 0.2 }\n",
    );
    let clean = run(&["4", "1", "--solves", "1"]);
    let out = run(&["4", "1", "--solves", "1", "--cd-config", faults.arg()]);
    assert_eq!(physics(&out), physics(&clean));
    assert!(out.contains("CD report"), "{out}");
}

#[test]
fn a_bad_configuration_is_refused_with_the_key() {
    let bad = TempFile::new("bad.toml", "[cd.solve]\nretriez = 1\n");
    let out = hpgmg()
        .args(["4", "1", "--cd-config", bad.arg()])
        .output()
        .expect("run hpgmg");
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--cd-config") && err.contains("retriez"),
        "{err}"
    );
}
