//! A huge but valid configuration is read and checked in time linear in its size: 200,000
//! exact faults in one `inject.at` array (about 10 MB) parse, pass the job's checks, and give
//! every CD execution its settings and its fault without a pass over the list.

use std::fmt::Write;
use std::time::{Duration, Instant};

use cd_runtime::injector::{Injected, decide};
use cd_runtime::{CdConfig, UNREACHED_LINES};

const FAULTS: usize = 200_000;
const RANKS: usize = 4;
/// The iteration of the first fault: past the last iteration of any run.
const FIRST: u64 = 1_000_000;

/// `FAULTS` exact faults of `[cd.step]`, one per line from line 3 on, on ranks 0 to
/// `RANKS - 1` in turn.
fn huge() -> String {
    let mut text = String::with_capacity(FAULTS * 56);
    text.push_str("[cd.step]\ninject = { at = [\n");
    for i in 0..FAULTS {
        writeln!(
            text,
            "  {{ rank = {}, iteration = {}, kind = \"soft\" }},",
            i % RANKS,
            FIRST + i as u64
        )
        .unwrap();
    }
    text.push_str("] }\n");
    text
}

#[test]
fn two_hundred_thousand_exact_faults_are_read_and_checked_in_linear_time() {
    let text = huge();
    assert!(text.len() > 10_000_000, "{} bytes", text.len());
    let start = Instant::now();
    let c = CdConfig::parse(&text, "big.toml").unwrap_or_else(|e| panic!("{e}"));
    c.check_job(RANKS).unwrap();
    let parsed = start.elapsed();
    // What a run asks at each CD execution: its settings and whether a fault fires.
    for it in 0..20_000u64 {
        let s = c.settings("step", 1);
        assert_eq!(
            decide(&s.inject, 0, it as usize % RANKS, "step", it, 0),
            None
        );
    }
    let last = FAULTS - 1;
    let s = c.settings("step", 1);
    assert_eq!(s.inject.at.as_slice().len(), FAULTS);
    assert_eq!(
        decide(&s.inject, 0, last % RANKS, "step", FIRST + last as u64, 0),
        Some(Injected::SoftError)
    );
    // And at its end: the faults it never reached, the first ones naming their lines, then
    // a count; the last fault alone unreached names the file's last line.
    let unreached = c.unreached(&[0, 1, 2]);
    let all_but_last: Vec<usize> = (0..last).collect();
    let only_last = c.unreached(&all_but_last);
    let took = start.elapsed();
    assert_eq!(unreached.len(), UNREACHED_LINES + 1);
    assert!(unreached[0].starts_with("big.toml:6: "), "{}", unreached[0]);
    assert!(
        unreached[UNREACHED_LINES].contains(&format!("{} more", FAULTS - 3 - UNREACHED_LINES)),
        "{}",
        unreached[UNREACHED_LINES]
    );
    let want = format!("big.toml:{}: ", last + 3);
    assert!(only_last[0].starts_with(&want), "{}", only_last[0]);
    eprintln!("parsed and checked in {parsed:?}; with 20,000 executions and the end: {took:?}");
    // Linear work is well under a second here in release; the bound leaves room for a debug
    // build on a busy machine, and is far below what a pass over the file per fault takes.
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn an_error_at_the_end_of_a_huge_configuration_names_its_line() {
    let mut text = huge();
    text.push_str("[cd.other]\ninject = { at = [{ rank = 9, iteration = 1, kind = \"soft\" }] }\n");
    let c = CdConfig::parse(&text, "big.toml").unwrap_or_else(|e| panic!("{e}"));
    let e = c.check_job(RANKS).unwrap_err();
    assert_eq!(e.line, Some(FAULTS + 5), "{e}");
    assert_eq!(e.key.as_deref(), Some("cd.other.inject.at.rank"), "{e}");
}
