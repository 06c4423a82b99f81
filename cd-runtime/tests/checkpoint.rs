//! Checkpoints to disk and restarts across launches (`checkpoint/README.md`): a job that ended
//! after some steps is launched again with a restart and ends with the numbers of the
//! uninterrupted job; damaged checkpoints are refused, with a fallback to the previous one.

mod common;

use std::path::{Path, PathBuf};

use cd_runtime as cd;
use cd_runtime::{CdConfig, CdLaunchError, CheckpointEvery, RestartFrom};
use common::{Ring, config, run, step};

const N: usize = 16;
const RANKS: usize = 4;

/// A fresh directory for one test's checkpoints (in the target directory, not the system's
/// temporary one).
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ckpt-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn cfg(dir: &Path, every: u64, restart: Option<RestartFrom>) -> CdConfig {
    let mut c = config(&format!(
        "[cd.step]\ncheckpoint = {{ dir = {:?}, every = {every}, keep = 2 }}\n",
        dir.display().to_string()
    ));
    c.program = "test-program n=16".into();
    c.restart = restart;
    c
}

/// A rank's values and the step its loop resumed at.
type RankOut = (Vec<f64>, Option<u64>);

/// `strict_steps` over `0..total` (a job cut short is one with a smaller `total`: it ended
/// there), returning every rank's values and the step the loop resumed at.
fn strict_steps_job(c: CdConfig, total: u64) -> Result<Vec<RankOut>, CdLaunchError> {
    run(RANKS, c, || {
        let ring = Ring::new(N);
        let mut x: Vec<f64> = (0..N).map(|i| (i * 3 + pgas::rank_me()) as f64).collect();
        let mut t = 0.5f64;
        let resumed = cd::restarted().map(|r| r.step);
        cd::strict_steps("step", 0..total, |c, s| {
            c.preserve_slice("x", &mut x);
            c.preserve("t", &mut t);
            step(&mut x, s);
            t += x[0];
            ring.exchange(&pgas::world(), &mut x);
            Ok(())
        })?;
        x.push(t);
        Ok((x, resumed))
    })
    .map(|o| o.results.into_vec())
}

fn values(r: &[RankOut]) -> Vec<Vec<u64>> {
    r.iter()
        .map(|(x, _)| x.iter().map(|v| v.to_bits()).collect())
        .collect()
}

#[test]
fn a_job_cut_short_resumes_from_its_last_checkpoint_bit_for_bit() {
    let dir = scratch("resume");
    let whole = strict_steps_job(cfg(&dir, 1, None), 12).unwrap();
    assert!(whole.iter().all(|(_, r)| r.is_none()));
    // Ended after 8 steps: the checkpoints up to execution 7 are committed (the last at the
    // end of the job), keep = 2.
    let _ = strict_steps_job(cfg(&dir, 1, None), 8).unwrap();
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "keep = 2: {names:?}");
    let again = strict_steps_job(cfg(&dir, 1, Some(RestartFrom::Auto)), 12).unwrap();
    assert!(again.iter().all(|(_, r)| r.is_some()), "resumed");
    assert_eq!(values(&again), values(&whole), "bit for bit");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_checkpoint_handed_over_is_committed_and_counted() {
    let dir = scratch("counted");
    let out = run(RANKS, cfg(&dir, 2, None), || {
        let mut x: Vec<f64> = (0..N).map(|i| i as f64).collect();
        cd::strict_steps("step", 0..10, |c, s| {
            c.preserve_slice("x", &mut x);
            step(&mut x, s);
            Ok(())
        })
    })
    .unwrap();
    let s = out.report.cd("step").unwrap();
    // Executions 2, 4, 6 and 8 (the last at the end of the job), each committed once every
    // rank's part was written, however late.
    assert_eq!(s.checkpoints, 4);
    let manifest = std::fs::read_to_string(dir.join("step-0000000008/manifest.toml")).unwrap();
    let part: u64 = manifest
        .lines()
        .find_map(|l| l.strip_prefix("file_len = "))
        .unwrap()
        .parse()
        .unwrap();
    // One part of the process's four ranks and its copy per checkpoint.
    assert_eq!(s.bytes_checkpointed, 4 * 2 * part);
    assert!(s.checkpoint_write_ns > 0);
    assert!(
        out.report
            .table()
            .contains("checkpoints of step: 4 committed")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_program_loop_resumes_where_restarted_says() {
    let dir = scratch("own-loop");
    let job = |c: CdConfig, stop: usize| {
        run(RANKS, c, move || {
            let mut x: Vec<f64> = (0..N).map(|i| (i + 7 * pgas::rank_me()) as f64).collect();
            let start = cd::restarted().map_or(0, |r| r.iteration as usize);
            for s in start..10usize.min(stop) {
                cd::strict("step", |c| {
                    assert_eq!(c.is_reexecution(), s == start && start > 0);
                    c.preserve_slice("x", &mut x);
                    step(&mut x, s as u64);
                    Ok(())
                })?;
            }
            Ok(x.iter().map(|v| v.to_bits()).collect::<Vec<u64>>())
        })
        .unwrap()
        .results
    };
    let whole = job(cfg(&dir, 3, None), usize::MAX);
    let _ = job(cfg(&dir, 3, None), 8);
    assert_eq!(
        job(cfg(&dir, 3, Some(RestartFrom::Auto)), usize::MAX),
        whole
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Flips one byte of `path`.
fn flip(path: &Path) {
    let mut b = std::fs::read(path).unwrap();
    b[3] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

#[test]
fn damaged_checkpoints_fall_back_and_another_job_is_refused() {
    let dir = scratch("damaged");
    let whole = strict_steps_job(cfg(&dir, 2, None), 10).unwrap();
    let cut = || strict_steps_job(cfg(&dir, 2, None), 7).unwrap();
    let restart = || strict_steps_job(cfg(&dir, 2, Some(RestartFrom::Auto)), 10);
    let newest = dir.join("step-0000000006");
    let older = dir.join("step-0000000004");
    // The four ranks share a process: one part, rank0/state.bin, its copy in rank 0's buddy's
    // directory (rank 1's), and no file in the other ranks' directories.
    cut();
    assert!(newest.join("rank1/copy-of-rank0.bin").is_file());
    assert!(!newest.join("rank2").exists() && !newest.join("rank1/state.bin").exists());
    // One byte of the part (in rank 0's state): the copy serves that rank.
    flip(&newest.join("rank0/state.bin"));
    assert_eq!(values(&restart().unwrap()), values(&whole));
    // The part's whole directory: the copy in the buddy's directory serves every rank.
    cut();
    std::fs::remove_dir_all(newest.join("rank0")).unwrap();
    assert_eq!(values(&restart().unwrap()), values(&whole));
    // The copy's directory: the part serves.
    cut();
    std::fs::remove_dir_all(newest.join("rank1")).unwrap();
    assert_eq!(values(&restart().unwrap()), values(&whole));
    // A truncated file and its copy damaged too: the previous checkpoint serves.
    cut();
    let f = newest.join("rank0/state.bin");
    let b = std::fs::read(&f).unwrap();
    std::fs::write(&f, &b[..b.len() / 2]).unwrap();
    for e in std::fs::read_dir(&newest).unwrap() {
        let p = e.unwrap().path().join("copy-of-rank0.bin");
        if p.exists() {
            flip(&p);
        }
    }
    let r = restart().unwrap();
    assert_eq!(values(&r), values(&whole));
    assert_eq!(r[0].1, Some(4), "from the previous checkpoint");
    // The newest manifest deleted: the previous checkpoint serves.
    cut();
    std::fs::remove_file(newest.join("manifest.toml")).unwrap();
    let r = restart().unwrap();
    assert_eq!((values(&r), r[0].1), (values(&whole), Some(4)));
    // Another rank count: refused, one line naming the manifest.
    cut();
    let e = run(2, cfg(&dir, 2, Some(RestartFrom::Auto)), || Ok(())).unwrap_err();
    assert!(matches!(e, CdLaunchError::Restart { .. }), "{e}");
    let line = e.to_string();
    assert!(
        line.contains("manifest.toml") && line.contains("rank count (4, this job: 2)"),
        "{line}"
    );
    assert!(!line.contains('\n'));
    // Another program: refused.
    let mut c = cfg(&dir, 2, Some(RestartFrom::Auto));
    c.program = "test-program n=17".into();
    let e = run(RANKS, c, || Ok(())).unwrap_err();
    assert!(e.to_string().contains("n=17"), "{e}");
    // The configuration checkpoints another CD: refused up front, one line naming both.
    let mut c = config(&format!(
        "[cd.cycle]\ncheckpoint = {{ dir = {:?}, every = 2 }}\n",
        dir.display().to_string()
    ));
    c.program = "test-program n=16".into();
    c.restart = Some(RestartFrom::Auto);
    let e = run(RANKS, c, || -> Result<(), cd::CdError> {
        unreachable!("refused before the body")
    })
    .unwrap_err();
    let line = e.to_string();
    assert!(
        line.contains("another checkpointed CD (step, this job: cycle)") && !line.contains('\n'),
        "{line}"
    );
    // Both whole ones gone: the run starts from the beginning.
    std::fs::remove_file(newest.join("manifest.toml")).unwrap();
    std::fs::remove_file(older.join("manifest.toml")).unwrap();
    let r = restart().unwrap();
    assert_eq!((values(&r), r[0].1), (values(&whole), None));
    assert!(!older.exists(), "the abandoned ones are removed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_key_is_refused_outside_a_cd_table_and_files_are_private() {
    use std::os::unix::fs::MetadataExt;
    let e = CdConfig::parse("[defaults]\ncheckpoint = { every = 2 }\n", "x.toml").unwrap_err();
    assert!(e.to_string().contains("defaults.checkpoint"), "{e}");
    let e = CdConfig::parse("[cd.a]\ncheckpoint = { every = 0 }\n", "x.toml").unwrap_err();
    assert!(e.to_string().contains("cd.a.checkpoint.every"), "{e}");
    let e = CdConfig::parse(
        "[cd.a]\ncheckpoint = {}\n[cd.b]\ncheckpoint = {}\n",
        "x.toml",
    )
    .unwrap_err();
    assert!(e.to_string().contains("one CD per job"), "{e}");
    let c = CdConfig::parse("[cd.a]\ncheckpoint = {}\n", "x.toml").unwrap();
    let (name, p) = c.checkpoint.unwrap();
    assert_eq!(
        (name.as_str(), p.every, p.keep),
        ("a", CheckpointEvery::Executions(1), 2)
    );
    assert_eq!(p.dir, Path::new(cd::checkpoint::format::DEFAULT_DIR));
    let dir = scratch("private");
    strict_steps_job(cfg(&dir, 1, None), 3).unwrap();
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    let f = dir.join("step-0000000002/rank0/state.bin");
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o777, 0o600);
    let m = dir.join("step-0000000002/manifest.toml");
    assert_eq!(std::fs::metadata(&m).unwrap().mode() & 0o777, 0o600);
    let _ = std::fs::remove_dir_all(&dir);
}

fn daly_cfg(dir: &Path, mtbf: &str, restart: Option<RestartFrom>) -> CdConfig {
    let mut c = config(&format!(
        "[cd.step]\ncheckpoint = {{ dir = {:?}, every = \"daly\", mtbf_seconds = {mtbf} }}\n",
        dir.display().to_string()
    ));
    c.program = "test-program n=16".into();
    c.restart = restart;
    c
}

/// `every = "daly"`: the interval follows what the run measured, through the same formula the
/// unit tests of `checkpoint/schedule.rs` feed injected times to. With an MTBF far below any
/// write time, Daly's interval is the MTBF itself, shorter than an execution: every execution
/// after the first commit is checkpointed. With an MTBF of decades, the interval is longer than
/// the run: only execution 1 (taken before anything is measured). Both resume bit for bit.
#[test]
fn daly_checkpoints_follow_the_measured_write_time_and_resume_bit_for_bit() {
    let dir = scratch("daly");
    let whole = strict_steps_job(cfg(&dir, 1, None), 12).unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    // Steps that sleep, long enough for the first checkpoint's write to end inside the run,
    // so that it is committed at a completion, where the next interval is chosen.
    let slow_job = |c: CdConfig| {
        run(RANKS, c, || {
            let mut x: Vec<f64> = (0..N).map(|i| i as f64).collect();
            cd::strict_steps("step", 0..20, |c, s| {
                c.preserve_slice("x", &mut x);
                step(&mut x, s);
                std::thread::sleep(std::time::Duration::from_millis(15));
                Ok(())
            })
        })
        .unwrap()
        .report
    };
    let report = slow_job(daly_cfg(&dir, "1e-9", None));
    let s = report.cd("step").unwrap();
    assert_eq!(s.checkpoint_every, Some(1), "{}", report.table());
    // Execution 1, then the next execution after each commit (a commit waits for the write).
    assert!(s.checkpoints >= 2, "{}", report.table());
    assert!(
        report
            .table()
            .contains("every 1 executions (Daly's interval")
    );

    let _ = std::fs::remove_dir_all(&dir);
    let report = slow_job(daly_cfg(&dir, "1e9", None));
    let s = report.cd("step").unwrap();
    assert_eq!(s.checkpoints, 1, "{}", report.table());
    assert!(s.checkpoint_every.unwrap() > 20, "{}", report.table());

    // Cut short after 8 steps and resumed from a Daly checkpoint: the uninterrupted numbers.
    let _ = std::fs::remove_dir_all(&dir);
    strict_steps_job(daly_cfg(&dir, "1e-9", None), 8).unwrap();
    let again = strict_steps_job(daly_cfg(&dir, "1e-9", Some(RestartFrom::Auto)), 12).unwrap();
    assert!(again.iter().all(|(_, r)| r.is_some()), "resumed");
    assert_eq!(values(&again), values(&whole), "bit for bit");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn daly_needs_its_mtbf_and_the_mtbf_needs_daly() {
    let e = CdConfig::parse("[cd.a]\ncheckpoint = { every = \"daly\" }\n", "x.toml").unwrap_err();
    assert!(e.to_string().contains("add mtbf_seconds"), "{e}");
    let e = CdConfig::parse(
        "[cd.a]\ncheckpoint = { every = 3, mtbf_seconds = 60 }\n",
        "x.toml",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("only serves every = \"daly\""),
        "{e}"
    );
    let e = CdConfig::parse("[cd.a]\ncheckpoint = { every = \"weekly\" }\n", "x.toml").unwrap_err();
    assert!(e.to_string().contains("cd.a.checkpoint.every"), "{e}");
    let e = CdConfig::parse(
        "[cd.a]\ncheckpoint = { every = \"daly\", mtbf_seconds = 0 }\n",
        "x.toml",
    )
    .unwrap_err();
    assert!(e.to_string().contains("above 0"), "{e}");
    let c = CdConfig::parse(
        "[cd.a]\ncheckpoint = { every = \"daly\", mtbf_seconds = 3600 }\n",
        "x.toml",
    )
    .unwrap();
    assert_eq!(
        c.checkpoint.unwrap().1.every,
        CheckpointEvery::Daly {
            mtbf_seconds: 3600.0
        }
    );
}

fn node_local_cfg(dir: &Path, restart: Option<RestartFrom>) -> CdConfig {
    let mut c = config(&format!(
        "[cd.step]\ncheckpoint = {{ dir = {:?}, every = 2, keep = 2, node_local = true }}\n",
        dir.display().to_string()
    ));
    c.program = "test-program n=16".into();
    c.restart = restart;
    c
}

/// `node_local = true` on smp (one process: its ranks share the directory, the copy still
/// travels by rpc to the buddy rank, which writes it): a job cut short resumes bit for bit,
/// also when the part's own file is gone and the copy is fetched from the buddy by rpc.
#[test]
fn node_local_copies_travel_by_rpc_and_a_lost_part_is_fetched_from_the_buddy() {
    let dir = scratch("node-local");
    let whole = strict_steps_job(cfg(&dir, 2, None), 12).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    strict_steps_job(node_local_cfg(&dir, None), 8).unwrap();
    // The last checkpoint: execution 6 (8 steps, every 2; execution 8 never began).
    let last = dir.join("step-0000000006");
    let m: cd::Manifest =
        toml::from_str(&std::fs::read_to_string(last.join("manifest.toml")).unwrap()).unwrap();
    let buddy = m.rank[0].buddy;
    assert_ne!(buddy, 0);
    let copy = last.join(format!("rank{buddy}/copy-of-rank0.bin"));
    let own = last.join("rank0/state.bin");
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&own).unwrap());
    std::fs::remove_file(&own).unwrap();
    let again = strict_steps_job(node_local_cfg(&dir, Some(RestartFrom::Auto)), 12).unwrap();
    assert!(
        again.iter().all(|(_, r)| *r == Some(6)),
        "resumed at step 6"
    );
    assert_eq!(values(&again), values(&whole), "bit for bit");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_per_rank_dir_is_node_local() {
    let c = CdConfig::parse("[cd.a]\ncheckpoint = { dir = \"ck-{rank}\" }\n", "x.toml").unwrap();
    let p = c.checkpoint.unwrap().1;
    assert!(p.node_local);
    assert_eq!(p.dir_of(3), Path::new("ck-3"));
    let c = CdConfig::parse("[cd.a]\ncheckpoint = { dir = \"ck\" }\n", "x.toml").unwrap();
    assert!(!c.checkpoint.unwrap().1.node_local);
    let e = CdConfig::parse(
        "[cd.a]\ncheckpoint = { dir = \"ck-{rank}\", node_local = false }\n",
        "x.toml",
    )
    .unwrap_err();
    assert!(e.to_string().contains("contradicts"), "{e}");
}
