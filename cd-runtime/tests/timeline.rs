//! The timeline through the configuration key `trace_file`: an escalation from an inner CD and
//! the outer CD's re-execution are spans on the failing ranks' tracks, as the report counts
//! them; an unwritable file is refused before the job starts.

mod common;

use cd_runtime as cd;
use cd_runtime::CdLaunchError;
use serde_json::Value;

use common::{config, run};

/// Each rank: an outer CD preserving a value, around an inner CD that cannot re-execute
/// (`retries = 0`): rank 1's soft error in the inner CD escalates, and the outer CD re-executes
/// on every rank.
fn nested() -> Result<u64, cd::CdError> {
    let mut total = 0u64;
    for _ in 0..3 {
        cd::strict("outer", |c| {
            let mut x = total;
            c.preserve("x", &mut x);
            cd::strict("inner", |_| Ok(()))?;
            total = x + 1;
            Ok(())
        })?;
    }
    Ok(total)
}

#[test]
fn an_escalation_and_the_re_execution_it_causes_are_on_the_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let text = format!(
        "trace_file = {:?}\n[cd.inner]\nretries = 0\n\
         inject = {{ at = [{{ rank = 1, iteration = 1, kind = \"soft\" }}] }}\n",
        path.to_str().unwrap()
    );
    let out = run(3, config(&text), nested).expect("the outer CD contains the failure");
    assert!(out.results.iter().all(|&v| v == 3));
    let events: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let count = |cat: &str, cd: &str, rank: Option<u64>| {
        events
            .iter()
            .filter(|e| e["cat"] == cat && e["args"]["cd"] == cd)
            .filter(|e| rank.is_none_or(|r| e["tid"] == r))
            .count() as u64
    };
    for name in ["outer", "inner"] {
        let s = out.report.cd(name).unwrap();
        assert_eq!(count("execution", name, None), s.executions, "{name}");
        assert_eq!(count("escalation", name, None), s.escalations, "{name}");
        assert_eq!(count("fault", name, None), s.injected, "{name}");
        assert_eq!(count("preserve", name, None), s.preservations, "{name}");
    }
    let inner = out.report.cd("inner").unwrap();
    assert_eq!((inner.injected, inner.escalations), (1, 3));
    // Every rank escalated once, re-executed the outer CD once and preserved in each of the
    // outer CD's first executions (the re-execution restores).
    for rank in 0..3 {
        assert_eq!(count("escalation", "inner", Some(rank)), 1);
        let re = events
            .iter()
            .filter(|e| e["cat"] == "execution" && e["tid"] == rank && e["args"]["attempt"] == 1)
            .count();
        assert_eq!(re, 1, "rank {rank}");
        assert_eq!(count("preserve", "outer", Some(rank)), 3);
        assert_eq!(count("agreement", "outer", Some(rank)), 4);
    }
    assert_eq!(count("fault", "inner", Some(1)), 1);
}

#[test]
fn an_unwritable_trace_file_is_refused_before_the_job() {
    let text = "trace_file = \"/nonexistent/dir/t.json\"\n";
    let Err(e) = run(2, config(text), || -> Result<(), cd::CdError> {
        panic!("the job must not start")
    }) else {
        panic!("an unwritable trace file is an error")
    };
    assert!(matches!(e, CdLaunchError::Trace { .. }), "{e:?}");
    let line = e.to_string();
    assert!(
        line.contains("/nonexistent/dir/t.json") && line.contains("trace_file"),
        "{line}"
    );
    assert_eq!(e.exit_code(), 4);
}
