//! The timeline of a faulty LULESH run (`PGAS_TRACE`): its spans and instants, rank by rank,
//! agree with the CD report of the same run.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use cd_runtime::Report;
use serde_json::Value;

use common::TempFile;

/// A strict step around relaxed per-rank CDs (`configs/relaxed-trace.toml`), plus a soft error
/// in the strict step (every rank re-executes) and one in a relaxed CD: soft errors and a
/// rank loss that ranks recover alone.
const FAULTS: &str = r#"
seed = 3
[cd.step]
medium = "buddy"
inject = { at = [{ rank = 6, iteration = 9, kind = "soft" }] }
[cd.rank_step]
kind = "relaxed"
logging = true
medium = "buddy"
log_medium = "buddy"
inject = { at = [
  { rank = 2, iteration = 4, kind = "soft" },
  { rank = 5, iteration = 7, kind = "rank_loss" },
  { rank = 0, iteration = 11, kind = "soft" },
] }
"#;

const RANKS: u64 = 8;

/// Runs LULESH on 8 ranks with `config` (plus `report_file`) and `PGAS_TRACE`; returns the
/// trace's events and the report.
fn run(config: &str, trace: bool) -> (Option<Vec<Value>>, Report) {
    let dir = std::env::temp_dir().join(format!("lulesh-trace-{}-{trace}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report.json");
    let trace_file = dir.join("timeline.json");
    let _ = std::fs::remove_file(&trace_file);
    let cfg = TempFile::new(
        &format!("trace-{trace}.toml"),
        &format!("report_file = {:?}\n{config}", report.to_str().unwrap()),
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lulesh"));
    cmd.args(["-s", "4", "--ranks", "8", "-i", "16", "--cd-config"])
        .arg(&cfg.0)
        .env_remove("PGAS_RANKS")
        .env_remove("PGAS_SEGMENT_MB")
        .env_remove("CD_CONFIG")
        .env_remove("PGAS_TRACE");
    if trace {
        cmd.env("PGAS_TRACE", &trace_file);
    }
    let out = cmd.output().expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Report =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).expect("the JSON report");
    let events = trace.then(|| {
        serde_json::from_str(&std::fs::read_to_string(&trace_file).expect("the trace file"))
            .expect("the trace is a JSON array")
    });
    if !trace {
        assert!(!trace_file.exists(), "no trace without PGAS_TRACE");
    }
    let _ = std::fs::remove_dir_all(&dir);
    (events, report)
}

/// The spans (`"ph": "X"`) and instants (`"i"`) of category `cat` whose `args.cd` is `cd`.
fn of<'a>(events: &'a [Value], cat: &str, cd: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["cat"] == cat && e["args"]["cd"] == cd && (e["ph"] == "X" || e["ph"] == "i"))
        .collect()
}

#[test]
fn the_timeline_of_a_faulty_run_agrees_with_its_report() {
    let (events, report) = run(FAULTS, true);
    let events = events.unwrap();
    // One named track per rank.
    for rank in 0..RANKS {
        assert!(
            events.iter().any(|e| e["name"] == "thread_name"
                && e["tid"] == rank
                && e["args"]["name"] == format!("rank {rank}")),
            "no track named rank {rank}"
        );
    }
    for cd in ["step", "rank_step"] {
        let stats = report.cd(cd).expect("the CD ran");
        let execs = of(&events, "execution", cd);
        assert_eq!(execs.len() as u64, stats.executions, "executions of {cd}");
        assert!(
            execs
                .iter()
                .all(|e| e["name"] == cd && e["dur"].as_f64().is_some())
        );
        let re = execs.iter().filter(|e| e["args"]["attempt"] != 0).count();
        assert_eq!(re as u64, stats.reexecutions, "re-executions of {cd}");
        assert_eq!(
            of(&events, "preserve", cd).len() as u64,
            stats.preservations,
            "preservations of {cd}"
        );
        assert!(stats.preservations > 0, "{cd} preserved nothing");
        assert_eq!(
            of(&events, "fault", cd).len() as u64,
            stats.injected,
            "faults of {cd}"
        );
        assert_eq!(
            of(&events, "escalation", cd).len() as u64,
            stats.escalations,
            "escalations of {cd}"
        );
        // Per rank: the ranks that re-executed for each failure, and only they, have the
        // re-execution's span.
        for f in &stats.failures {
            let mut ranks: Vec<u64> = execs
                .iter()
                .filter(|e| {
                    e["args"]["iteration"] == f.iteration && e["args"]["attempt"] == f.attempt
                })
                .map(|e| e["tid"].as_u64().unwrap())
                .collect();
            ranks.sort_unstable();
            let want: Vec<u64> = f.ranks.iter().map(|&r| r as u64).collect();
            assert_eq!(
                ranks, want,
                "ranks re-executing {cd} #{}.{}",
                f.iteration, f.attempt
            );
        }
        // Every rank's first executions.
        let mut per_rank: BTreeMap<u64, u64> = BTreeMap::new();
        for e in execs.iter().filter(|e| e["args"]["attempt"] == 0) {
            *per_rank.entry(e["tid"].as_u64().unwrap()).or_default() += 1;
        }
        assert_eq!(per_rank.len() as u64, RANKS, "{cd} on every rank");
    }
    let step = report.cd("step").unwrap();
    assert_eq!((step.injected, step.reexecutions), (1, RANKS), "{report:?}");
    let inner = report.cd("rank_step").unwrap();
    assert_eq!((inner.injected, inner.reexecutions), (3, 3), "{report:?}");
    // The relaxed CDs recovered alone: each re-execution replayed its log on its own rank,
    // after a recovery; the lost rank's memory loss is an instant on its track.
    let replays = of(&events, "replay", "rank_step");
    assert_eq!(replays.len(), 3);
    let mut replay_ranks: Vec<u64> = replays.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
    replay_ranks.sort_unstable();
    assert_eq!(replay_ranks, [0, 2, 5]);
    assert_eq!(of(&events, "recovery", "rank_step").len(), 3);
    let losses: Vec<u64> = events
        .iter()
        .filter(|e| e["cat"] == "loss")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    assert_eq!(losses, [5]);
    // The strict step agreed on every rank in every execution.
    assert_eq!(
        of(&events, "agreement", "step").len() as u64,
        step.executions
    );
}

#[test]
fn without_pgas_trace_no_timeline_is_written() {
    let (events, report) = run(FAULTS, false);
    assert!(events.is_none());
    assert_eq!(report.cd("rank_step").unwrap().injected, 3);
}

#[test]
fn a_trace_file_that_cannot_be_written_is_one_clear_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_lulesh"))
        .args(["-s", "3", "--ranks", "1"])
        .env_remove("PGAS_RANKS")
        .env_remove("CD_CONFIG")
        .env("PGAS_TRACE", "/nonexistent/dir/timeline.json")
        .args([
            "--cd-config",
            TempFile::new("plain.toml", "").0.to_str().unwrap(),
        ])
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot write the timeline to /nonexistent/dir/timeline.json")
            && err.contains("PGAS_TRACE"),
        "{err}"
    );
}
