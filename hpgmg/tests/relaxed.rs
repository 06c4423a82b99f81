//! HPGMG under relaxed Containment Domains (`hpgmg/configs/relaxed.toml`: the strict CDs per
//! solve and per V-cycle, and inside them one relaxed CD "smooth" per rank around each
//! smoother call). Fault-free, the run prints what the run without CDs prints; injected soft
//! errors in "smooth" give those lines bit for bit, each recovered by the failed rank alone
//! (the report's failure records), with no strict re-execution. Every run has a time limit:
//! a broken replay shows up as a rank waiting forever for a message.
//!
//! Smoother calls per rank in `5 1 --ranks 8 --solves 1` (levels 64^3, 32^3 and 16^3 with a
//! box on every rank, then 8^3, 4^3, 2^3 on rank 0 alone): 30 per solve on the finest level,
//! in this order of levels, 20 on the next, 12 on the one after; six solves on the finest
//! level are 0..59, 124..153 (Richardson).

mod common;

use std::time::Duration;

use common::{REF_5_8, TempFile, assert_richardson, physics, run_within};

const RELAXED: &str = include_str!("../configs/relaxed.toml");
const RELAXED_FAULTS: &str = include_str!("../configs/relaxed-faults.toml");

/// Smoother calls per rank in one `--solves 1` run (see the module doc).
const SMOOTHS_PER_RANK: u64 = 186;
/// Levels of the smoother calls of one solve on the finest level, in call order.
const FINEST_SOLVE_LEVELS: [usize; 30] = [
    4, 4, 3, 4, 4, 3, 2, 3, 4, 4, 3, 2, 1, 2, 3, 4, 4, 3, 2, 1, 0, 1, 2, 3, 4, 4, 3, 2, 1, 0,
];

const LIMIT: Duration = Duration::from_secs(60);

fn hpgmg(extra: &[&str]) -> String {
    let mut args = vec!["5", "1", "--ranks", "8", "--solves", "1"];
    args.extend_from_slice(extra);
    run_within(&args, LIMIT)
}

/// One row of the CD report's first table: (level, executions, re-executions, escalations,
/// injected).
fn row(out: &str, name: &str) -> [u64; 5] {
    let line = out
        .split("CD report")
        .nth(1)
        .unwrap_or_else(|| panic!("no CD report in\n{out}"))
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} row in\n{out}"));
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(5)
        .map(|v| v.parse().expect("a count"))
        .collect();
    [f[0], f[1], f[2], f[3], f[4]]
}

/// The relaxed table's row: (logged bytes, entries, squashed writes).
fn logged(out: &str, name: &str) -> (u64, u64, u64) {
    let table = out
        .split("relaxed CDs")
        .nth(1)
        .unwrap_or_else(|| panic!("no relaxed table in\n{out}"));
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} row in\n{table}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    let n = |i: usize| f[i].parse::<u64>().expect("a count");
    (n(2), n(3), n(7))
}

/// The report's failure records of "smooth", as (iteration, ranks), in iteration order.
fn failures(out: &str) -> Vec<(u64, Vec<usize>)> {
    let Some(line) = out
        .lines()
        .find(|l| l.starts_with("re-executed ranks per failure of smooth:"))
    else {
        return Vec::new();
    };
    let list = line.split_once(':').expect("a colon").1;
    let mut got: Vec<(u64, Vec<usize>)> = list
        .split("], ")
        .map(|rec| {
            let (id, ranks) = rec
                .trim()
                .split_once(": [")
                .expect("#iteration.attempt: [..]");
            let (iteration, attempt) = id
                .trim_start_matches('#')
                .split_once('.')
                .expect("iteration.attempt");
            assert_eq!(attempt, "1", "one re-execution per fault: {line}");
            let ranks = ranks
                .trim_end_matches(']')
                .split(", ")
                .map(|r| r.parse().expect("a rank"))
                .collect();
            (iteration.parse().expect("an iteration"), ranks)
        })
        .collect();
    got.sort();
    got
}

/// `faults` (rank, iteration) grouped as the report merges them: one record per iteration
/// naming every rank that failed in it.
fn expected_records(faults: &[(usize, u64)]) -> Vec<(u64, Vec<usize>)> {
    let mut want: Vec<(u64, Vec<usize>)> = Vec::new();
    for &(r, i) in faults {
        match want.iter_mut().find(|w| w.0 == i) {
            Some(w) => w.1.push(r),
            None => want.push((i, vec![r])),
        }
    }
    want.iter_mut().for_each(|w| w.1.sort_unstable());
    want.sort();
    want
}

fn inject(faults: &[(usize, u64)]) -> String {
    let at: Vec<String> = faults
        .iter()
        .map(|(r, i)| format!("{{ rank = {r}, iteration = {i}, kind = \"soft\" }}"))
        .collect();
    format!("{RELAXED}inject = {{ at = [{}] }}\n", at.join(", "))
}

/// Checks a relaxed run with soft errors at `faults` against the run without CDs.
fn check_recovered(out: &str, clean: &str, faults: &[(usize, u64)], what: &str) {
    assert_richardson(out, &REF_5_8, what);
    assert_eq!(physics(out), physics(clean), "{what}");
    let n = faults.len() as u64;
    assert_eq!(
        row(out, "smooth"),
        [4, 8 * SMOOTHS_PER_RANK + n, n, 0, n],
        "{what}: each fault re-executes one smoother CD, none escalates"
    );
    assert_eq!(row(out, "level")[2], 0, "{what}: no strict re-execution");
    assert_eq!(row(out, "solve")[2], 0, "{what}: no strict re-execution");
    assert_eq!(
        failures(out),
        expected_records(faults),
        "{what}: exactly the failed rank re-executes, once per fault"
    );
}

#[test]
fn fault_free_relaxed_run_equals_the_run_without_cds() {
    let clean = hpgmg(&[]);
    let config = TempFile::new("relaxed.toml", RELAXED);
    let out = hpgmg(&["--cd-config", config.arg()]);
    assert_richardson(&out, &REF_5_8, "relaxed, fault-free");
    assert_eq!(physics(&out), physics(&clean));
    assert_eq!(row(&out, "smooth"), [4, 8 * SMOOTHS_PER_RANK, 0, 0, 0]);
    let (bytes, entries, squashed) = logged(&out, "smooth");
    assert!(
        bytes > 0 && entries > 0,
        "the ghost puts are logged:\n{out}"
    );
    assert_eq!(squashed, 0);
    assert!(failures(&out).is_empty());
}

#[test]
fn the_faults_config_recovers_each_soft_error_on_its_rank_alone() {
    let clean = hpgmg(&[]);
    let config = TempFile::new("relaxed-faults.toml", RELAXED_FAULTS);
    let out = hpgmg(&["--cd-config", config.arg()]);
    // The file's faults: finest level, 16^3 and 32^3 (every rank holds a box there).
    let faults = [(0, 20), (5, 13), (7, 58)];
    for (_, i) in faults {
        assert!(FINEST_SOLVE_LEVELS[i as usize % 30] <= 2);
    }
    check_recovered(&out, &clean, &faults, "relaxed-faults.toml");
    // The replays squash the failed ranks' own ghost puts (6 exchanges per smoother call).
    let (_, _, squashed) = logged(&out, "smooth");
    assert!(squashed >= 6 * faults.len() as u64, "{out}");
}

/// A rank loss in a finest-level smoother call, with buddy copies and the log replicated at
/// the buddy: the lost rank recovers alone, bit for bit.
#[test]
fn a_rank_loss_in_the_smoother_recovers_alone() {
    let clean = hpgmg(&[]);
    let config = TempFile::new(
        "loss.toml",
        "[cd.smooth]\nkind = \"relaxed\"\nlogging = true\nmedium = \"buddy\"\n\
         log_medium = \"buddy\"\n\
         inject = { at = [{ rank = 5, iteration = 13, kind = \"rank_loss\" }] }\n",
    );
    let out = hpgmg(&["--cd-config", config.arg()]);
    assert_richardson(&out, &REF_5_8, "rank loss");
    assert_eq!(physics(&out), physics(&clean), "rank loss");
    assert_eq!(failures(&out), [(13, vec![5])], "rank 5 alone re-executed");
    assert_eq!(row(&out, "level")[2], 0, "no strict re-execution");
}

/// A rank loss in the middle of a finest-level smoother call (right before its fourth
/// operation), the log durable at every operation: the lost rank replays from what its buddy
/// held and recovers alone, bit for bit.
#[test]
fn a_rank_loss_in_the_middle_of_the_smoother_recovers_alone() {
    let clean = hpgmg(&[]);
    let config = TempFile::new(
        "loss-mid.toml",
        "[cd.smooth]\nkind = \"relaxed\"\nlogging = true\nmedium = \"buddy\"\n\
         log_medium = \"buddy\"\nlog_durable = \"operation\"\n\
         inject = { at = [{ rank = 5, iteration = 13, kind = \"rank_loss\", at_op = 3 }] }\n",
    );
    let out = hpgmg(&["--cd-config", config.arg()]);
    assert_richardson(&out, &REF_5_8, "rank loss mid-body");
    assert_eq!(physics(&out), physics(&clean), "rank loss mid-body");
    assert_eq!(failures(&out), [(13, vec![5])], "rank 5 alone re-executed");
    assert_eq!(row(&out, "level")[2], 0, "no strict re-execution");
}

/// Rank losses at seeded random operations of random smoother calls and ranks, one per run,
/// the log durable at every operation: each recovers alone, bit for bit. Only calls on the
/// levels whose exchanges cross ranks have operations (about a third), so faults in the
/// others never strike: the campaign runs until six did.
#[test]
fn rank_losses_at_random_operations_of_the_smoother_recover_alone() {
    let clean = hpgmg(&[]);
    let (want, most) = (6, 40u64);
    let mut struck = 0;
    for i in 0..most {
        if struck == want {
            break;
        }
        let r = pgas::mix64(0x4096 ^ i);
        let (rank, call, op) = ((r % 8) as usize, (r >> 8) % SMOOTHS_PER_RANK, (r >> 24) % 3);
        let config = TempFile::new(
            &format!("loss-random-{i}.toml"),
            &format!(
                "[cd.smooth]\nkind = \"relaxed\"\nlogging = true\nmedium = \"buddy\"\n\
                 log_medium = \"buddy\"\nlog_durable = \"operation\"\n\
                 inject = {{ at = [{{ rank = {rank}, iteration = {call}, kind = \"rank_loss\", \
                 at_op = {op} }}] }}\n"
            ),
        );
        let what = format!("loss of rank {rank} in call {call} before operation {op}");
        let out = hpgmg(&["--cd-config", config.arg()]);
        assert_richardson(&out, &REF_5_8, &what);
        assert_eq!(physics(&out), physics(&clean), "{what}");
        assert_eq!(row(&out, "level")[2], 0, "{what}: no strict re-execution");
        let got = failures(&out);
        if !got.is_empty() {
            assert_eq!(
                got,
                [(call, vec![rank])],
                "{what}: the rank alone re-executed"
            );
            struck += 1;
        }
    }
    assert_eq!(struck, want, "only {struck} of {most} losses struck");
}

#[test]
fn soft_errors_on_every_level_and_rank_are_recovered_alone_and_bit_exact() {
    let clean = hpgmg(&[]);
    // Every level (the 8^3..2^3 levels' calls on ranks without a box replay nothing), the
    // first and last smoother call of the run, pre- and post-smooth of the finest level, two
    // ranks failing in the same call (each recovering alone), solves at h, 2h, 4h and the
    // Richardson solves.
    let faults = [
        (0, 0),
        (3, 2),
        (1, 6),
        (4, 12),
        (6, 20),
        (2, 20),
        (3, 29),
        (7, 40),
        (5, 75),
        (0, 110),
        (6, 140),
        (2, SMOOTHS_PER_RANK - 1),
    ];
    let config = TempFile::new("many.toml", &inject(&faults));
    let out = hpgmg(&["--cd-config", config.arg()]);
    check_recovered(&out, &clean, &faults, "twelve soft errors");
}

#[test]
fn relaxed_and_strict_faults_together_are_bit_exact() {
    let clean = hpgmg(&[]);
    // Strict re-executions (soft errors and rank losses, which poison the segment's arrival
    // flags) around relaxed recoveries.
    let config = TempFile::new(
        "mixed.toml",
        r#"
seed = 7
[cd.solve]
medium = "buddy"
inject = { at = [{ rank = 3, iteration = 5, kind = "rank_loss" }] }
[cd.level]
medium = "buddy"
inject = { at = [
    { rank = 0, iteration = 7, kind = "soft" },
    { rank = 6, iteration = 30, kind = "rank_loss" },
] }
[cd.smooth]
kind = "relaxed"
inject = { at = [
    { rank = 0, iteration = 20, kind = "soft" },
    { rank = 2, iteration = 21, kind = "soft" },
    { rank = 5, iteration = 13, kind = "soft" },
] }
"#,
    );
    let out = hpgmg(&["--cd-config", config.arg()]);
    assert_richardson(&out, &REF_5_8, "mixed faults");
    assert_eq!(physics(&out), physics(&clean));
    assert_eq!(
        row(&out, "solve")[2],
        8,
        "one strict re-execution of every rank"
    );
    assert_eq!(
        row(&out, "level")[2],
        16,
        "two strict re-executions of every rank"
    );
    // The re-executed solve and levels run their smoother CDs again: more executions, but
    // the injected ones (first attempts only) recover alone.
    let smooth = row(&out, "smooth");
    assert_eq!((smooth[2], smooth[3], smooth[4]), (3, 0, 3));
    assert_eq!(
        failures(&out),
        expected_records(&[(0, 20), (2, 21), (5, 13)])
    );
}

#[test]
fn without_logging_a_smoother_fault_escalates_to_the_level_and_stays_exact() {
    let clean = hpgmg(&[]);
    // A relaxed CD that does not log cannot replay: the failure goes to the strict CD
    // "level", which every rank re-executes; the rank that failed still takes part in the
    // rest of the level's communication first.
    let config = TempFile::new(
        "nolog.toml",
        "[cd.smooth]\nkind = \"relaxed\"\nlogging = false\n\
         inject = { at = [{ rank = 4, iteration = 20, kind = \"soft\" }] }\n",
    );
    let out = hpgmg(&["--cd-config", config.arg()]);
    assert_richardson(&out, &REF_5_8, "escalated");
    assert_eq!(physics(&out), physics(&clean));
    let smooth = row(&out, "smooth");
    assert_eq!((smooth[3], smooth[4]), (1, 1), "one escalation");
    assert_eq!(
        row(&out, "level")[2],
        8,
        "the level re-executed on every rank"
    );
}

#[test]
fn vcycles_after_the_fcycle_under_smoother_faults_are_bit_exact() {
    // `--unlimit-fmg-iterations`: four V-cycles after each F-cycle, each a strict CD "level"
    // on the finest level with its smoother CDs inside.
    let clean = hpgmg(&["--unlimit-fmg-iterations"]);
    let config = TempFile::new("vcycles.toml", RELAXED_FAULTS);
    let out = hpgmg(&["--unlimit-fmg-iterations", "--cd-config", config.arg()]);
    assert_eq!(physics(&out), physics(&clean));
    let histories = common::histories(&out);
    assert_eq!(histories.len(), 9);
    assert!(histories.iter().all(|h| h.len() == 5), "{histories:?}");
    assert_eq!(row(&out, "level")[2], 0, "no strict re-execution");
    assert_eq!(row(&out, "smooth")[2..], [3, 0, 3]);
    assert_eq!(
        failures(&out),
        expected_records(&[(0, 20), (5, 13), (7, 58)])
    );
}

#[test]
fn a_smoother_escalation_passes_the_ranks_cd_and_reexecutes_the_level() {
    let clean = hpgmg(&[]);
    // No retry left: the smoother CD escalates to "rank_level", which the program makes
    // escalate at once, so every rank re-executes the level.
    let config = TempFile::new(
        "noretry.toml",
        "[cd.smooth]\nkind = \"relaxed\"\nretries = 0\n\
         inject = { at = [{ rank = 4, iteration = 20, kind = \"soft\" }] }\n",
    );
    let out = hpgmg(&["--cd-config", config.arg()]);
    assert_richardson(&out, &REF_5_8, "escalated through rank_level");
    assert_eq!(physics(&out), physics(&clean));
    assert_eq!(row(&out, "smooth")[3..], [1, 1], "one escalation of smooth");
    assert_eq!(
        row(&out, "rank_level")[2..4],
        [0, 1],
        "rank_level escalates, no replay"
    );
    assert_eq!(
        row(&out, "level")[2],
        8,
        "the level re-executed on every rank"
    );
}

#[test]
fn a_configuration_setting_the_ranks_cd_is_refused() {
    let config = TempFile::new(
        "rank_level.toml",
        "[cd.smooth]\nkind = \"relaxed\"\n[cd.rank_level]\nretries = 2\n",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hpgmg"))
        .args(["4", "1", "--cd-config", config.arg()])
        .output()
        .expect("hpgmg runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[cd.rank_level]") && err.contains("remove the table"),
        "{err}"
    );
}

#[test]
fn under_spbc_clusters_a_smoother_fault_reexecutes_its_cluster_over_the_level() {
    let clean = hpgmg(&[]);
    // A relaxed CD in a cluster of two never recovers alone: "level" re-executes on the
    // cluster (ranks 4 and 5) alone, with no barrier around the smoother CDs.
    let config = TempFile::new(
        "cluster.toml",
        &format!(
            "cluster = 2\n{RELAXED}inject = {{ at = [{{ rank = 5, iteration = 13, kind = \
             \"soft\" }}] }}\n"
        ),
    );
    let out = hpgmg(&["--cd-config", config.arg()]);
    assert_richardson(&out, &REF_5_8, "clusters of two");
    assert_eq!(physics(&out), physics(&clean));
    assert_eq!(
        row(&out, "smooth")[..1],
        [4],
        "rank_level around the smoother"
    );
    assert_eq!(row(&out, "smooth")[3..], [1, 1], "the fault escalated");
    assert_eq!(
        row(&out, "level")[2],
        2,
        "the level re-executed on the cluster"
    );
    assert!(
        out.contains("re-executed ranks per failure of level: #") && out.contains(": [4, 5] ("),
        "{out}"
    );
}
