//! The opt-in hang report (`PGAS_HANG_REPORT=SECONDS`): a rank that waits that long without
//! progress prints what it waits for, and which ranks have not arrived, once, and keeps
//! waiting. The environment is read once per process, so the job runs in a child process (this
//! test binary again, with `HANG_REPORT_CHILD` set).

use std::process::Command;
use std::time::Duration;

use gasnet_bridge::{HandlerTable, LaunchConfig, launch};

#[test]
fn a_late_rank_is_named_once_and_the_job_completes() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_job", "--nocapture", "--test-threads", "1"])
        .env("HANG_REPORT_CHILD", "1")
        .env("PGAS_HANG_REPORT", "0.3")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
    // Rank 0 (and 2) wait in the barrier for rank 1, which sleeps: each reports it once.
    let reports: Vec<&str> = err.lines().filter(|l| l.contains("hang report")).collect();
    assert_eq!(reports.len(), 2, "{err}");
    for r in &reports {
        assert!(r.contains("for a barrier #1; ranks not arrived: 1 "), "{r}");
        assert!(r.contains("still waiting"), "{r}");
    }
}

#[test]
fn child_job() {
    if std::env::var_os("HANG_REPORT_CHILD").is_none() {
        return;
    }
    let config = LaunchConfig::new(3).segment_bytes(64);
    launch(&config, HandlerTable::new(), |ep| {
        if ep.rank() == 1 {
            std::thread::sleep(Duration::from_millis(1500));
        }
        ep.barrier().unwrap();
    })
    .unwrap();
}
