//! How a job that cannot go on ends: an escalation past the root is one
//! [`CdLaunchError::Escalated`] line (CD, rank, cause, what to change), files the file medium
//! preserved are removed, a genuine panic in the program stays a panic.

mod common;

use cd_runtime as cd;
use cd_runtime::CdLaunchError;
use common::{config, run};

fn body(x: &mut Vec<f64>) -> Result<(), cd::CdError> {
    cd::strict("outer", |o| {
        o.preserve("x0", x);
        for t in 0..4 {
            cd::strict("step", |c| {
                c.preserve("x", x);
                common::step(x, t);
                Ok(())
            })?;
        }
        Ok(())
    })
}

#[test]
fn an_escalation_is_one_line_naming_cd_rank_cause_and_fix() {
    let cfg = config(
        "[cd.step]\ninject = { at = [{ rank = 2, iteration = 1, kind = \"rank_loss\" }] }\n\
         [cd.outer]\ncontain = [\"soft\"]\n",
    );
    let err = run(4, cfg, || {
        let mut x = vec![1.0; 8];
        body(&mut x)?;
        Ok(x[0])
    })
    .unwrap_err();
    let CdLaunchError::Escalated { message, .. } = &err else {
        panic!("expected an escalation, got {err:?}");
    };
    assert_eq!(err.exit_code(), 3);
    assert!(!message.contains('\n'), "one line: {message}");
    assert!(!message.contains("panicked"), "{message}");
    // "outer" does not contain rank losses: it escalates, naming the rank that failed in "step".
    assert!(
        message.starts_with("CD \"outer\" (level 1) escalated rank loss"),
        "{message}"
    );
    assert!(message.contains("; on rank 2: CD \"step\""), "{message}");
    assert!(!message.contains("on rank 0"), "{message}");
    assert!(message.contains("escalated past the root CD"), "{message}");
    assert!(
        message.contains("medium = \"buddy\" (or \"file\") in [cd.outer] (test.toml:3)"),
        "{message}"
    );
}

#[test]
fn retries_exhausted_says_to_raise_them() {
    let cfg = config("[cd.step]\nretries = 1\n");
    let err = run(2, cfg, || {
        let mut x = vec![1.0; 8];
        cd::strict("step", |c| {
            c.preserve("x", &mut x);
            // Wrong in every execution.
            Err::<(), _>(cd::CdError::detected("the check failed"))
        })?;
        Ok(())
    })
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, CdLaunchError::Escalated { .. }), "{err:?}");
    assert!(msg.contains("1 retries exhausted"), "{msg}");
    assert!(
        msg.contains("on rank 0: CD \"step\" detected an error: the check failed"),
        "{msg}"
    );
    assert!(msg.contains("raise `retries` in [cd.step]"), "{msg}");
}

#[test]
fn files_of_the_file_medium_are_removed_when_the_run_escalates() {
    let dir = std::env::temp_dir().join(format!("cd-exit-files-{}", std::process::id()));
    let cfg = config(&format!(
        "file_dir = {:?}\n[defaults]\nmedium = \"file\"\n\
         [cd.outer]\ncontain = [\"soft\"]\n[cd.step]\nmedium = \"local\"\n\
         inject = {{ at = [{{ rank = 1, iteration = 2, kind = \"rank_loss\" }}] }}\n",
        dir.display().to_string()
    ));
    let err = run(4, cfg, || {
        let mut big = vec![2.0; 64];
        // Preserved by the root (file medium), never completed: the run escalates.
        cd::current().preserve("big", &mut big);
        let mut x = vec![1.0; 8];
        body(&mut x)?;
        Ok(())
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("add \"rank_loss\" to `contain` in [cd.outer]"),
        "{err}"
    );
    let left: Vec<_> = walk(&dir);
    assert!(left.is_empty(), "left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn a_genuine_panic_stays_a_panic() {
    let err = run(2, config(""), || -> Result<(), cd::CdError> {
        if pgas::rank_me() == 1 {
            panic!("a bug in the program");
        }
        pgas::barrier();
        Ok(())
    })
    .unwrap_err();
    assert!(
        matches!(&err, CdLaunchError::Job(gasnet_bridge::LaunchError::RankPanicked { rank: 1, message }) if message == "a bug in the program"),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), 1);
}

#[test]
fn exact_faults_the_run_never_reached_are_reported_at_the_end() {
    // "step" runs 4 times per rank (instances 0 to 3): its fault at iteration 9 is never
    // reached, nor the one in [defaults], which neither CD uses ([cd.step] and [cd.outer] set
    // their own `at`). Each is one warning line naming the file, the line and the fault.
    let cfg = config(
        "[defaults]\ninject = { at = [{ rank = 0, iteration = 0, kind = \"soft\" }] }\n\
         [cd.step]\ninject = { at = [{ rank = 1, iteration = 2, kind = \"soft\" }, \
         { rank = 1, iteration = 9, kind = \"rank_loss\" }] }\n\
         [cd.outer]\ninject = { at = [] }\n",
    );
    let out = run(2, cfg, || {
        let mut x = vec![1.0; 8];
        body(&mut x)?;
        Ok(x[0])
    })
    .expect("the reached soft error is contained");
    assert_eq!(out.report.cd("step").unwrap().injected, 1);
    assert_eq!(out.unused.len(), 2, "{:?}", out.unused);
    assert_eq!(
        out.unused[0],
        "test.toml:2: [defaults] inject.at { rank = 0, iteration = 0, kind = \"soft\" } was \
         never injected: rank 0 never began instance 0 (counted from 0) of a CD that takes its \
         faults from [defaults]; check the rank and the iteration"
    );
    assert!(
        out.unused[1].starts_with(
            "test.toml:4: [cd.step] inject.at { rank = 1, iteration = 9, kind = \"rank_loss\" } \
             was never injected: rank 1 never began instance 9"
        ),
        "{:?}",
        out.unused
    );
}

/// A relaxed CD directly under the root (which cannot re-execute), with a rank loss at the
/// end of its instance 1 on rank 1: each rank puts its value into its right neighbour's
/// inbox, and the CD preserves the rank's own values. `Ok`: the run's values.
fn relaxed_under_root(cfg: cd::CdConfig) -> Result<Vec<Vec<u64>>, CdLaunchError> {
    run(4, cfg, || {
        let (me, n) = (pgas::rank_me(), pgas::rank_n());
        let v = pgas::new_array::<f64>(2).unwrap();
        v.write_local_slice(&[me as f64, 0.0]).unwrap();
        let all = pgas::allgather(v).wait();
        for t in 0..3u64 {
            cd::relaxed("cell", |c| {
                c.preserve_global("v", v, 2);
                pgas::barrier();
                let mut x = [0.0; 2];
                v.read_local_slice(&mut x).unwrap();
                pgas::rput(x[0], all[(me + 1) % n] + 1).wait();
                pgas::barrier();
                v.read_local_slice(&mut x).unwrap();
                v.write_local_slice(&[(x[0] * 3.0 + x[1] + t as f64) % common::M, 0.0])
                    .unwrap();
                Ok(())
            })?;
            // Nothing lands in a rank's segment while another rank recovers.
            pgas::barrier();
        }
        let mut x = [0.0; 2];
        v.read_local_slice(&mut x).unwrap();
        Ok(x.iter().map(|x| x.to_bits()).collect())
    })
    .map(|o| o.results.into_vec())
}

const LOSS: &str = "inject = { at = [{ rank = 1, iteration = 1, kind = \"rank_loss\" }] }\n";

#[test]
fn a_relaxed_loss_with_a_local_log_names_log_medium() {
    let clean = relaxed_under_root(config("[cd.cell]\ncheck_classes = false\n")).unwrap();
    // Log and preserved copies replicated at the buddy: rank 1 recovers alone.
    let cfg = config(&format!(
        "[cd.cell]\ncheck_classes = false\nmedium = \"buddy\"\nlog_medium = \"buddy\"\n{LOSS}"
    ));
    assert_eq!(relaxed_under_root(cfg).unwrap(), clean);
    // The log local (the default): the loss escalates past the root, and the line says why
    // and what to set.
    let cfg = config(&format!(
        "[cd.cell]\ncheck_classes = false\nmedium = \"buddy\"\n{LOSS}"
    ));
    let err = relaxed_under_root(cfg).unwrap_err().to_string();
    assert!(
        err.contains(
            "cannot recover alone from the loss of its rank's memory: its log was kept in \
             that memory only (log_medium = \"local\")"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "set log_medium = \"buddy\" (with medium = \"buddy\" or \"file\") in [cd.cell]"
        ),
        "{err}"
    );
    // The log at the buddy but the preserved state local (from another table): the loss took
    // the state, and the line says to move the copies.
    let cfg = config(&format!(
        "[defaults]\nmedium = \"local\"\n[cd.cell]\ncheck_classes = false\n\
         log_medium = \"buddy\"\n{LOSS}"
    ));
    let err = relaxed_under_root(cfg).unwrap_err().to_string();
    assert!(err.contains("the loss took its preserved state"), "{err}");
    assert!(
        err.contains("medium = \"buddy\" (or \"file\") in [cd.cell]"),
        "{err}"
    );
}
