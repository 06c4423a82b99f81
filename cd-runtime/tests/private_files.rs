//! The job's files (file medium, memory-budget spills, spilled relaxed logs) are its own: kept
//! in a fresh directory no other user can read or redirect, never written through a planted
//! symbolic link, checked when read back (a copy changed on disk escalates, naming the file,
//! instead of being restored or replayed), and removed when the job ends.
//!
//! The tests find the files a job writes through this process's open file descriptors
//! (`/proc/self/fd`): the file medium's writer keeps its arenas open. They run one at a time
//! (a lock), so that the descriptors seen are those of the running test's job.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cd_runtime as cd;
use cd_runtime::CdLaunchError;
use common::{config, run};

/// One job at a time in this test binary.
fn one_job() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A scratch directory of this test, made fresh, at mode 0700.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cd-private-it-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// The files this process has open whose path ends with `suffix`.
fn open_files(suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The one open file ending with `suffix`, once the writer thread has it open (it writes off
/// the critical path).
fn the_open_file(suffix: &str) -> PathBuf {
    let start = Instant::now();
    loop {
        let found = open_files(suffix);
        if let [one] = &found[..] {
            return one.clone();
        }
        assert!(
            found.len() < 2,
            "several files end with {suffix}: {found:?}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no open file ends with {suffix}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until `path` starts with `bytes` (written by the writer thread), then flips a bit of
/// its byte at `at`.
fn corrupt_once_written(path: &Path, bytes: &[u8], at: usize) {
    let start = Instant::now();
    while std::fs::read(path).map_or(true, |b| !b.starts_with(bytes)) {
        assert!(start.elapsed() < Duration::from_secs(20), "never written");
        std::thread::sleep(Duration::from_millis(2));
    }
    flip_bit(path, at);
}

fn flip_bit(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x10;
    // Rewritten in place (same inode: the writer keeps it open).
    use std::io::{Seek, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(std::io::SeekFrom::Start(at as u64)).unwrap();
    f.write_all(&b[at..at + 1]).unwrap();
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        out.push(e.path());
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

/// What [`file_job`] saw of a path in the job's directory: the path, its permission bits,
/// whether it is a directory.
type Seen = (PathBuf, u32, bool);

/// A job of 2 ranks with a strict CD "step" per iteration preserving `x` (by its bytes);
/// returns, per rank, the path of the directory its arena of level 1 is in (seen while the
/// job runs) and what was in the job's directory then.
fn file_job(cfg: &str) -> Result<Vec<(PathBuf, Vec<Seen>)>, CdLaunchError> {
    run(2, config(cfg), || {
        let me = pgas::rank_me();
        let mut x: Vec<f64> = (0..32).map(|i| (i + me) as f64).collect();
        for it in 0..3u64 {
            cd::strict("step", |c| {
                c.preserve_slice("x", &mut x);
                common::step(&mut x, it);
                Ok(())
            })?;
        }
        let arena = the_open_file(&format!("rank{me}/level1.bin"));
        let rank_dir = arena.parent().unwrap().to_path_buf();
        let job_dir = rank_dir.parent().unwrap();
        let modes = std::iter::once(job_dir.to_path_buf())
            .chain(walk(job_dir))
            .map(|p| {
                let meta = std::fs::symlink_metadata(&p).unwrap();
                (p, meta.mode() & 0o7777, meta.is_dir())
            })
            .collect();
        pgas::barrier();
        Ok((rank_dir, modes))
    })
    .map(|out| out.results.into_vec())
}

#[test]
fn the_default_directory_is_0700_randomly_named_its_files_0600_and_removed_at_the_end() {
    let _one = one_job();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let ranks = file_job("[cd.step]\nmedium = \"file\"\n").unwrap_or_else(|e| panic!("{e}"));
        let job_dir = ranks[0].0.parent().unwrap().to_path_buf();
        assert_eq!(
            ranks[1].0.parent(),
            Some(job_dir.as_path()),
            "one per launch"
        );
        assert_eq!(job_dir.parent(), Some(std::env::temp_dir().as_path()));
        let name = job_dir.file_name().unwrap().to_string_lossy().into_owned();
        // `cd-files-HOST-PID-` and 12 random characters: a name another user cannot
        // predict, whose process id lets a later launch remove it if this process is killed.
        let random = name
            .rsplit_once(&format!("-{}-", std::process::id()))
            .map_or("", |(_, r)| r);
        assert!(
            name.starts_with("cd-files-")
                && random.len() == 12
                && random.chars().all(|c| c.is_ascii_alphanumeric()),
            "cd-files-HOST-PID-RANDOM: {name}"
        );
        for (path, mode, is_dir) in &ranks[0].1 {
            let want = if *is_dir { 0o700 } else { 0o600 };
            assert_eq!(*mode, want, "{} is {mode:o}", path.display());
        }
        assert!(
            ranks[0]
                .1
                .iter()
                .any(|(p, ..)| p.ends_with("rank1/level1.bin")),
            "{:?}",
            ranks[0].1
        );
        assert!(
            !job_dir.exists(),
            "removed at the end: {}",
            job_dir.display()
        );
        seen.push(name);
    }
    assert_ne!(seen[0], seen[1], "each launch its own name");
}

#[test]
fn a_symlinked_or_open_file_dir_is_refused_naming_it_and_nothing_is_written() {
    let _one = one_job();
    let base = scratch("refused");
    let real = base.join("real");
    std::fs::create_dir(&real).unwrap();
    let link = base.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let open = base.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    for (dir, why) in [(&link, "symbolic link"), (&open, "writable by other users")] {
        let cfg = format!(
            "file_dir = {:?}\n[cd.step]\nmedium = \"file\"\n",
            dir.display()
        );
        let e = file_job(&cfg).expect_err("refused");
        let CdLaunchError::Config(e) = &e else {
            panic!("a configuration error, got {e:?}");
        };
        assert_eq!(e.key.as_deref(), Some("file_dir"), "{e}");
        let text = e.to_string();
        assert!(text.contains(&dir.display().to_string()), "{text}");
        assert!(text.contains(why), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");
    }
    assert!(walk(&real).is_empty(), "nothing written through the link");
    assert!(
        walk(&open).is_empty(),
        "nothing written into the open directory"
    );
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn a_planted_symlink_where_a_file_would_go_is_not_followed_and_the_files_go_at_the_end() {
    let _one = one_job();
    let dir = scratch("planted");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    // Where the job's arenas went in the configured directory: links to a file of the
    // planter's choice.
    for r in 0..2 {
        std::fs::create_dir(dir.join(format!("rank{r}"))).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(format!("rank{r}/level1.bin"))).unwrap();
    }
    let before = walk(&dir);
    let cfg = format!(
        "file_dir = {:?}\n[cd.step]\nmedium = \"file\"\n",
        dir.display()
    );
    let ranks = file_job(&cfg).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"precious",
        "not written through"
    );
    let job_dir = ranks[0].0.parent().unwrap();
    assert_eq!(job_dir.parent(), Some(dir.as_path()), "inside file_dir");
    assert_eq!(
        walk(&dir),
        before,
        "the job's own directory is gone, the rest kept"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// How a corrupted file medium copy ends the run: a strict CD "step" (under the root, which
/// cannot re-execute) preserves `x` (into a file: `cfg` says how), and a soft error is
/// injected into its second instance on rank 1 after rank 1's copy was changed on disk.
fn corrupted_copy_escalates(cfg: &str) {
    let _one = one_job();
    let executions = AtomicUsize::new(0);
    let err = run(2, config(cfg), || {
        let me = pgas::rank_me();
        let mut x: Vec<f64> = (0..32).map(|i| (i + 10 * me) as f64).collect();
        for it in 0..3u64 {
            cd::strict("step", |c| {
                c.preserve_slice("x", &mut x);
                if it == 1 {
                    executions.fetch_add(1, Ordering::SeqCst);
                    if me == 1 {
                        let arena = the_open_file("rank1/level1.bin");
                        corrupt_once_written(&arena, bytemuck::cast_slice(&x), 5);
                    }
                }
                common::step(&mut x, it);
                Ok(())
            })?;
        }
        Ok(())
    })
    .expect_err("the changed copy is not restored: the run stops");
    let CdLaunchError::Escalated { message, .. } = &err else {
        panic!("an escalation, got {err:?}");
    };
    assert!(!message.contains('\n'), "one line: {message}");
    assert!(
        message.contains("rank1/level1.bin"),
        "names the file: {message}"
    );
    assert!(message.contains("failed its checksum"), "{message}");
    assert!(message.contains("`x`"), "names the entry: {message}");
    assert_eq!(
        executions.load(Ordering::SeqCst),
        2,
        "instance 1 ran once per rank: no re-execution from the changed copy"
    );
}

#[test]
fn a_flipped_byte_in_a_file_medium_copy_escalates_naming_the_file() {
    corrupted_copy_escalates(
        "[cd.step]\nmedium = \"file\"\n\
         inject = { at = [{ rank = 1, iteration = 1, kind = \"soft\" }] }\n",
    );
}

#[test]
fn a_flipped_byte_in_a_memory_budget_spill_escalates_naming_the_file() {
    corrupted_copy_escalates(
        "memory_budget_bytes = 64\n[cd.step]\nmedium = \"local\"\n\
         inject = { at = [{ rank = 1, iteration = 1, kind = \"soft\" }] }\n",
    );
}

/// A relaxed CD "sp" inside a strict "outer" (which does not re-execute: retries = 0) spills
/// its log to files; rank 1's new spilled files are changed on disk in the instance where a
/// soft error is injected, so its recovery by replay reads them back: it refuses them and
/// escalates, and the line that ends the run names the file.
#[test]
fn a_flipped_byte_in_a_spilled_relaxed_log_escalates_naming_the_file() {
    let _one = one_job();
    let dir = scratch("log");
    let cfg = config(&format!(
        "file_dir = {:?}\n[cd.outer]\nretries = 0\n\
         [cd.sp]\ncheck_classes = false\nlog_spill_bytes = 64\n\
         inject = {{ at = [{{ rank = 1, iteration = 1, kind = \"soft\" }}] }}\n",
        dir.display()
    ));
    let corrupted: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let err = run(2, cfg, || {
        let me = pgas::rank_me();
        let buf = pgas::new_array::<u64>(64).unwrap();
        let bufs: Vec<pgas::GlobalPtr<u64>> = pgas::reduce_all(
            vec![(me, buf)],
            |mut a: Vec<(usize, pgas::GlobalPtr<u64>)>, b| {
                a.extend(b);
                a
            },
        )
        .wait()
        .into_iter()
        .fold(vec![buf; 2], |mut v, (r, p)| {
            v[r] = p;
            v
        });
        cd::strict("outer", |_| {
            // The failing instance is the last: the other rank, which does not recover, has
            // no later barrier in which to wait for rank 1.
            for round in 0..2u64 {
                let logs = || -> Vec<PathBuf> {
                    walk(&dir)
                        .into_iter()
                        .filter(|p| {
                            p.extension().is_some_and(|e| e == "log")
                                && p.parent().is_some_and(|l| l.ends_with("rank1/logs"))
                        })
                        .collect()
                };
                let before = if me == 1 { logs() } else { Vec::new() };
                cd::relaxed("sp", |c| {
                    c.preserve_global("in", buf, 16);
                    pgas::barrier();
                    for k in 0..16 {
                        pgas::rput(round * 100 + k as u64, bufs[1 - me] + k).wait();
                    }
                    pgas::barrier();
                    if me == 1 && round == 1 && c.attempt() == 0 {
                        // Spilled synchronously while the body logged its puts.
                        let new: Vec<PathBuf> =
                            logs().into_iter().filter(|p| !before.contains(p)).collect();
                        assert!(!new.is_empty(), "the body's log spilled");
                        for p in &new {
                            let len = std::fs::metadata(p).unwrap().len() as usize;
                            flip_bit(p, len / 2);
                        }
                        *corrupted.lock().unwrap() = new;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })
    })
    .expect_err("the changed log is not replayed: the run stops");
    let CdLaunchError::Escalated { message, .. } = &err else {
        panic!("an escalation, got {err:?}");
    };
    assert!(!message.contains('\n'), "one line: {message}");
    assert!(message.contains("failed its checksum"), "{message}");
    let corrupted = corrupted.into_inner().unwrap();
    assert!(
        corrupted
            .iter()
            .any(|p| message.contains(&p.display().to_string())),
        "names a changed file ({corrupted:?}): {message}"
    );
    assert!(walk(&dir).is_empty(), "the job's files are gone");
    std::fs::remove_dir_all(&dir).unwrap();
}
