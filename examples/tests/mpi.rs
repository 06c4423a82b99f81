//! The same example binaries under `mpirun` (the mpi conduit, one rank per process): each runs
//! on as many ranks as processes, prints its report once, from rank 0's process, and that report
//! equals the smp run's on as many ranks but for the timings (the stencils' checksums, the CD
//! counts, the verification lines); a check that fails on some ranks makes every process exit
//! non-zero; a `--ranks` that differs from the number of processes is refused; an escalation
//! into a CD with dependency lists re-executes the dependent processes when each process is a
//! node (`PGAS_MPI_PSHM=0`), and all of them when they share a host's node.
//!
//! Only with the `mpi` feature (`cargo test -p pgas-examples --features mpi --test mpi`), and
//! skipped with a message when there is no mpirun, except under `CI=true`, where that fails. `MPIRUN` overrides the launcher (default
//! `mpirun`), `MPIRUN_FLAGS` its flags (default `--allow-run-as-root --oversubscribe`, for Open
//! MPI in a root container), as in gasnet-bridge's conduit suite and lulesh's tests/mpi.rs.
#![cfg(feature = "mpi")]

mod common;

use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};

use common::{
    ESCALATING_ITERATION, ESCALATING_RANK, ESCALATION_CONFIG, dependents_in_2x2x2, escalation_line,
    stdout_of_success,
};

const HELLO: &str = env!("CARGO_BIN_EXE_hello");
const GUPS: &str = env!("CARGO_BIN_EXE_gups");
const DHT: &str = env!("CARGO_BIN_EXE_dht");
const STENCIL: &str = env!("CARGO_BIN_EXE_stencil");
const CD_STENCIL: &str = env!("CARGO_BIN_EXE_cd_stencil");

/// The process counts every example is run with.
const WORLDS: [usize; 2] = [2, 3];

/// The lock every test holds while it runs jobs, or `None` (test skipped, with a line on
/// stderr) without mpirun; under `CI=true` a missing mpirun fails the test instead
/// ([`pgas::mpirun::require_mpirun`]). One job at a time: parallel tests would put several
/// oversubscribed jobs on this machine's cores.
fn mpi_or_skip(test: &str) -> Option<MutexGuard<'static, ()>> {
    static HAVE: OnceLock<bool> = OnceLock::new();
    static ONE_JOB: Mutex<()> = Mutex::new(());
    if !*HAVE.get_or_init(pgas::mpirun::mpirun_available) {
        // Says it is skipped, or panics under CI=true.
        pgas::mpirun::require_mpirun(test);
        return None;
    }
    // A failed test poisons the lock; the others can still run.
    Some(ONE_JOB.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The command `bin args` as `n` processes under mpirun, with the environment that would
/// choose the smp conduit or a rank count removed.
fn mpirun_command(n: usize, bin: &str, args: &[&str]) -> Command {
    let mut c = pgas::mpirun::mpirun_command(n);
    c.arg(bin)
        .args(args)
        .env_remove("PGAS_RANKS")
        .env_remove("PGAS_SEGMENT_MB")
        .env_remove("PGAS_CONDUIT")
        .env_remove("CD_CONFIG");
    c
}

/// Runs `command` (an mpirun command): its output.
fn output_of(mut command: Command) -> Output {
    command.output().unwrap_or_else(|e| {
        let launcher = pgas::mpirun::mpirun_program();
        panic!("cannot start {launcher}: {e}")
    })
}

/// `bin args` as `n` processes under mpirun ([`mpirun_command`]).
fn mpirun(n: usize, bin: &str, args: &[&str]) -> Output {
    output_of(mpirun_command(n, bin, args))
}

/// `bin --ranks n args` on the smp conduit.
fn smp(n: usize, bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .arg("--ranks")
        .arg(n.to_string())
        .args(args)
        .env("PGAS_CONDUIT", "smp")
        .env_remove("PGAS_SEGMENT_MB")
        .env_remove("CD_CONFIG")
        .output()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    stdout_of_success(&format!("{bin} --ranks {n} {args:?}"), out)
}

/// `bin args` under `mpirun -n n`, which must succeed; its stdout.
fn mpi_ok(n: usize, bin: &str, args: &[&str]) -> String {
    stdout_of_success(
        &format!("mpirun -n {n} {bin} {args:?}"),
        mpirun(n, bin, args),
    )
}

/// `line` with its timings (a number before a unit of time or rate) replaced by `#`, so that
/// reports of different runs compare equal when everything but the speed is.
fn untimed(line: &str) -> String {
    const UNITS: [&str; 5] = ["s", "ms", "GUP/s", "M/s", "Mpoint/s"];
    let words: Vec<&str> = line.split(' ').collect();
    let timed = |i: usize| {
        words.get(i + 1).is_some_and(|next| {
            UNITS.contains(&next.trim_end_matches([',', ';', ':', ')']))
                && words[i].trim_start_matches('(').parse::<f64>().is_ok()
        })
    };
    (0..words.len())
        .map(|i| if timed(i) { "#" } else { words[i] })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The start of the CD report table's row for the stencil's CD.
const CD_ROW: &str = "iteration ";

/// The line of `out` that starts with `prefix`, untimed (and for [`CD_ROW`] without the
/// table's two last columns, milliseconds); the report must hold exactly one.
fn the_line(out: &str, prefix: &str) -> String {
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with(prefix)).collect();
    assert_eq!(lines.len(), 1, "one {prefix:?} line expected in:\n{out}");
    if prefix == CD_ROW {
        let columns: Vec<&str> = lines[0].split_whitespace().collect();
        return columns[..columns.len().saturating_sub(2)].join(" ");
    }
    untimed(lines[0])
}

/// Runs `bin args` on every world size, under mpirun and on smp, and checks that the lines
/// starting with each of `prefixes` appear once under mpirun and equal the smp run's.
fn same_report(bin: &str, args: &[&str], prefixes: &[&str]) {
    for n in WORLDS {
        let mpi = mpi_ok(n, bin, args);
        let smp = smp(n, bin, args);
        for prefix in prefixes {
            assert_eq!(
                the_line(&mpi, prefix),
                the_line(&smp, prefix),
                "{n} processes against {n} threads\nmpi:\n{mpi}\nsmp:\n{smp}"
            );
        }
    }
}

#[test]
fn timings_are_masked_and_nothing_else() {
    assert_eq!(
        untimed("x: 2 ranks, n=18, 7 iterations in 0.0001 s (365.0 Mpoint/s); ok"),
        "x: 2 ranks, n=18, 7 iterations in # s # Mpoint/s); ok"
    );
    assert_eq!(
        untimed("checksum 2.43865776406772147e3 fingerprint 0x3f"),
        "checksum 2.43865776406772147e3 fingerprint 0x3f"
    );
    assert_eq!(
        untimed("inserts 3.7 M/s, 6000 lookups 1.4 M/s; load 0.50"),
        "inserts # M/s, 6000 lookups # M/s; load 0.50"
    );
}

#[test]
fn hello_greets_from_every_process_and_reports_once() {
    let Some(_job) = mpi_or_skip("hello") else {
        return;
    };
    same_report(HELLO, &["--rounds", "3"], &["hello: "]);
    let out = mpi_ok(3, HELLO, &[]);
    for rank in 0..3 {
        let greeting = format!("hello from rank {rank} of 3\n");
        assert_eq!(out.matches(&greeting).count(), 1, "{out}");
    }
}

#[test]
fn gups_verifies_both_variants() {
    let Some(_job) = mpi_or_skip("gups") else {
        return;
    };
    same_report(
        GUPS,
        &["--log-table", "10", "--variant", "atomic"],
        &["gups: "],
    );
    same_report(
        GUPS,
        &["--log-table", "10", "--variant", "rpc", "--batch", "37"],
        &["gups: "],
    );
}

#[test]
fn dht_counts_match_smp() {
    let Some(_job) = mpi_or_skip("dht") else {
        return;
    };
    same_report(
        DHT,
        &["--keys-per-rank", "1500", "--lookups", "3000"],
        &["dht: "],
    );
}

#[test]
fn stencil_checksum_matches_smp() {
    let Some(_job) = mpi_or_skip("stencil") else {
        return;
    };
    same_report(
        STENCIL,
        &["--n", "18", "--iters", "7"],
        &["stencil: ", "checksum "],
    );
}

/// A configuration with soft errors and rank losses in the buddy medium, on 3 ranks.
const FAULTS: &str = "seed = 5\n\
    [cd.iteration]\n\
    medium = \"buddy\"\n\
    retries = 4\n\
    inject = { soft_error = 0.02, rank_loss = 0.02, at = [\n\
      { rank = 1, iteration = 2, kind = \"rank_loss\" },\n\
      { rank = 2, iteration = 5, kind = \"soft\" },\n\
      { rank = 0, iteration = 9, kind = \"rank_loss\" } ] }\n";

#[test]
fn cd_stencil_checksum_and_cd_report_match_smp_with_and_without_faults() {
    let Some(_job) = mpi_or_skip("cd_stencil") else {
        return;
    };
    let lines = [
        "cd_stencil: ",
        "cd: ",
        "checksum ",
        "CD report",
        "iteration ",
    ];
    let args = ["--n", "18", "--iters", "12"];
    same_report(CD_STENCIL, &args, &lines);

    let path = std::env::temp_dir().join(format!("examples-mpi-{}-cd.toml", std::process::id()));
    std::fs::write(&path, FAULTS).expect("write the configuration");
    let path = path.to_string_lossy().into_owned();
    let mut faulty = args.to_vec();
    faulty.extend(["--cd-config", &path]);
    let clean = mpi_ok(3, CD_STENCIL, &args);
    let with_faults = mpi_ok(3, CD_STENCIL, &faulty);
    let smp_with_faults = smp(3, CD_STENCIL, &faulty);
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        the_line(&with_faults, "checksum "),
        the_line(&clean, "checksum "),
        "\nfaulty:\n{with_faults}\nclean:\n{clean}"
    );
    assert!(
        !with_faults.contains("cd: 0 faults"),
        "faults were injected: {with_faults}"
    );
    for prefix in lines {
        assert_eq!(
            the_line(&with_faults, prefix),
            the_line(&smp_with_faults, prefix),
            "\nmpi:\n{with_faults}\nsmp:\n{smp_with_faults}"
        );
    }
}

/// Dependency tracking under mpirun, with the shipped `configs/cd_stencil_escalation.toml`:
/// on 8 processes (a 2x2x2 process grid) rank 6's relaxed CD escalates once to "iteration",
/// which keeps dependency lists. With `PGAS_MPI_PSHM=0` every process is a node of its own, and
/// exactly rank 6 and the ranks that put faces into it re-execute ([`dependents_in_2x2x2`]),
/// on nodes numbered as the ranks; with shared memory this host is one node holding all 8,
/// which all re-execute. The checksum is the fault-free run's both times.
#[test]
fn an_escalation_reexecutes_the_dependent_processes_when_each_is_a_node() {
    let Some(_job) = mpi_or_skip("cd_stencil dependency tracking") else {
        return;
    };
    let args = ["--n", "16", "--iters", "6"];
    let clean = mpi_ok(8, CD_STENCIL, &args);
    let mut escalating = args.to_vec();
    escalating.extend(["--cd-config", ESCALATION_CONFIG]);
    let everyone: Vec<usize> = (0..8).collect();
    for (pshm, expected) in [
        (false, dependents_in_2x2x2(ESCALATING_RANK)),
        (true, everyone),
    ] {
        let mut command = mpirun_command(8, CD_STENCIL, &escalating);
        if pshm {
            command.env_remove("PGAS_MPI_PSHM");
        } else {
            command.env("PGAS_MPI_PSHM", "0");
        }
        let env = if pshm { "" } else { "PGAS_MPI_PSHM=0 " };
        let what = format!("{env}mpirun -n 8 cd_stencil {escalating:?}");
        let out = stdout_of_success(&what, output_of(command));
        assert_eq!(
            the_line(&out, "checksum "),
            the_line(&clean, "checksum "),
            "{what}:\n{out}\nclean:\n{clean}"
        );
        assert_eq!(
            the_line(&out, "re-executed ranks per failure of iteration: "),
            escalation_line(&expected),
            "{what}:\n{out}"
        );
        assert_eq!(
            the_line(&out, "cd: "),
            format!(
                "cd: 0 faults injected, {} re-executions, 0 escalations",
                expected.len()
            ),
            "{what}:\n{out}"
        );
        assert!(
            out.contains("relaxed cd: 1 faults injected, 0 re-executions, 1 escalations"),
            "{what}:\n{out}"
        );
        // One node holding every rank: the report says why the whole group re-executed.
        let everyone_depends = format!(
            "whole-group re-executions of iteration: #{ESCALATING_ITERATION}: every rank \
             depends on the failed ones"
        );
        assert_eq!(
            out.lines().any(|l| l == everyone_depends),
            pshm,
            "{what}:\n{out}"
        );
    }
}

#[test]
fn a_check_failing_on_some_ranks_fails_every_process() {
    let Some(_job) = mpi_or_skip("failing check") else {
        return;
    };
    // Some table fills up (which one depends on the race between the inserting ranks); each
    // process then reports its own exit status through the shell, which itself exits 0 so that
    // mpirun lets every process finish.
    let out = mpirun(
        3,
        "sh",
        &[
            "-c",
            "\"$0\" \"$@\"; echo \"exit status $?\"",
            DHT,
            "--keys-per-rank",
            "200",
            "--slots-per-rank",
            "190",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stdout.matches("exit status 1\n").count(),
        3,
        "every process must fail:\n{stdout}\n{stderr}"
    );
    assert!(stderr.contains("table full"), "{stderr}");
    assert_eq!(
        stderr.matches("dht: error: the check failed on ").count(),
        1,
        "{stderr}"
    );
    assert!(
        !stdout.contains("dht: "),
        "no report after a failed check:\n{stdout}"
    );
}

#[test]
fn ranks_that_differ_from_the_process_count_are_refused_once() {
    let Some(_job) = mpi_or_skip("--ranks") else {
        return;
    };
    for bin in [HELLO, GUPS, DHT, STENCIL, CD_STENCIL] {
        let out = mpirun(2, bin, &["--ranks", "3"]);
        assert!(!out.status.success(), "{bin}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let message = "--ranks 3 does not match the 2 MPI processes";
        assert_eq!(err.matches(message).count(), 1, "{bin}: {err}");
        assert!(out.stdout.is_empty(), "{bin}: {out:?}");
    }
    // The same number is accepted.
    let out = mpi_ok(2, HELLO, &["--ranks", "2"]);
    assert_eq!(out.matches("hello: 2 ranks OK").count(), 1, "{out}");
}

#[test]
fn an_escalation_prints_one_line_from_one_process_and_fails_every_one() {
    let Some(_job) = mpi_or_skip("cd_stencil escalation") else {
        return;
    };
    // A rank loss in a CD that keeps its copies in the ranks' own memory (the default medium,
    // local) cannot be contained: it escalates past the root and ends the run, on every
    // process. `--quiet` keeps mpirun's own notes (which process failed first) off stderr.
    let path =
        std::env::temp_dir().join(format!("examples-mpi-{}-escalate.toml", std::process::id()));
    std::fs::write(
        &path,
        "[cd.iteration]\ninject = { at = [{ rank = 1, iteration = 2, kind = \"rank_loss\" }] }\n",
    )
    .expect("write the configuration");
    let cfg = path.to_string_lossy().into_owned();
    let run = |n: usize, through_shell: bool| {
        let mut c = pgas::mpirun::mpirun_command(n);
        c.arg("--quiet");
        if through_shell {
            c.args(["sh", "-c", "\"$0\" \"$@\"; echo \"exit status $?\""]);
        }
        c.args([CD_STENCIL, "--n", "16", "--iters", "5", "--cd-config", &cfg])
            .env("RUST_BACKTRACE", "1")
            .env_remove("PGAS_RANKS")
            .env_remove("PGAS_SEGMENT_MB")
            .env_remove("PGAS_CONDUIT")
            .env_remove("CD_CONFIG")
            .output()
            .expect("start mpirun")
    };
    for n in WORLDS {
        // As a user runs it: the job fails, with one line on stderr.
        let out = run(n, false);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{out:?}");
        assert!(out.stdout.is_empty(), "no answer: {out:?}");
        assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
        assert!(
            stderr.starts_with("cd_stencil: error: CD \"iteration\""),
            "{stderr}"
        );
        assert!(
            stderr.contains("on rank 1: injected loss of rank 1"),
            "{stderr}"
        );
        assert!(stderr.contains("medium = \"buddy\""), "{stderr}");
        // No process exits 0, and only one prints: the others say nothing (no conduit line
        // about a failed rank, no panic text, no backtrace). A process leaves a failed job
        // without MPI_Finalize, which mpirun takes for an abnormal end: it may kill the other
        // processes' shells before they report, so not every process has a status line (and
        // one that mpirun's SIGTERM ended exits with 1, quietly).
        let out = run(n, true);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let statuses: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("exit status "))
            .collect();
        assert!(
            statuses.contains(&"3") && statuses.iter().all(|s| *s == "3" || *s == "1"),
            "every process fails, the first with status 3:\n{stdout}\n{stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
        for noise in ["panicked", "backtrace", "gasnet-bridge", "failed:"] {
            assert!(!stderr.contains(noise), "{noise:?} in\n{stderr}");
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// A rank stopped with SIGSTOP leaves the others waiting in a barrier: with
/// `PGAS_HANG_REPORT=1` each of them says so once, in one whole line, and the job finishes
/// normally once the rank is continued.
#[test]
fn a_stopped_rank_gets_a_hang_report_from_the_others() {
    let Some(_job) = mpi_or_skip("a_stopped_rank_gets_a_hang_report_from_the_others") else {
        return;
    };
    let stderr_path = std::env::temp_dir().join(format!("hang-report-{}.txt", std::process::id()));
    let stderr_file = std::fs::File::create(&stderr_path).unwrap();
    let mut job = pgas::mpirun::mpirun_command(3)
        .arg("--quiet")
        .arg(STENCIL)
        .args(["--n", "48", "--iters", "100000"])
        .env("PGAS_HANG_REPORT", "1")
        .env_remove("PGAS_RANKS")
        .env_remove("PGAS_CONDUIT")
        .stdout(std::process::Stdio::null())
        .stderr(stderr_file)
        .spawn()
        .expect("start mpirun");
    // The rank processes are mpirun's children.
    let launcher = job.id().to_string();
    let stencils = || -> Vec<u32> {
        let out = Command::new("pgrep")
            .args(["-P", &launcher])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut pids = stencils();
    while pids.len() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        pids = stencils();
    }
    assert_eq!(pids.len(), 3, "three rank processes: {pids:?}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let stopped = *pids.iter().max().unwrap();
    let signal = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &stopped.to_string()])
            .status()
            .unwrap();
        assert!(ok.success(), "kill {sig} {stopped}");
    };
    signal("-STOP");
    let reports = |text: &str| text.lines().filter(|l| l.contains("hang report")).count();
    let mut text = String::new();
    while reports(&text) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
        text = std::fs::read_to_string(&stderr_path).unwrap();
    }
    signal("-CONT");
    // The rest of the run is not needed: end it, ranks first (they would outlive mpirun).
    for pid in &pids {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    let _ = job.kill();
    let _ = job.wait();
    let _ = std::fs::remove_file(&stderr_path);
    assert!(reports(&text) >= 2, "the two waiting ranks report:\n{text}");
    for line in text.lines().filter(|l| l.contains("hang report")) {
        assert!(
            line.starts_with("pgas: hang report: rank ")
                && line.ends_with("(PGAS_HANG_REPORT; still waiting)")
                && line.matches("hang report").count() == 1,
            "one whole line per report: {line:?}"
        );
    }
}

/// The launcher's SIGTERM (what mpirun sends every process when one fails) ends each process
/// through the mpi conduit's watchdog, by `_exit`, which runs no destructor: each process
/// still removes its own private directory of CD files before it exits, so the job's
/// `file_dir` is left empty.
#[test]
fn the_files_go_when_the_launcher_terminates_the_processes() {
    let Some(_job) = mpi_or_skip("the_files_go_when_the_launcher_terminates_the_processes") else {
        return;
    };
    let n = 3;
    let dir = std::env::temp_dir().join(format!("examples-mpi-{}-term", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let cfg = dir.with_extension("toml");
    std::fs::write(
        &cfg,
        format!(
            "file_dir = {:?}\n[cd.iteration]\nmedium = \"file\"\n",
            dir.display().to_string()
        ),
    )
    .unwrap();
    let cfg_arg = cfg.display().to_string();
    let mut job = pgas::mpirun::mpirun_command(n)
        .arg("--quiet")
        .args([CD_STENCIL, "--n", "16", "--iters", "100000000"])
        .args(["--cd-config", &cfg_arg])
        .env_remove("PGAS_RANKS")
        .env_remove("PGAS_CONDUIT")
        .env_remove("CD_CONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start mpirun");
    // Each process's own directory, once its arena is written (the job runs its CDs).
    let job_dirs = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                std::fs::read_dir(p)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|rank| rank.path().join("level1.bin").exists())
            })
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while job_dirs().len() < n && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let running = job_dirs();
    // The rank processes are mpirun's children.
    let launcher = job.id().to_string();
    let pids: Vec<String> = String::from_utf8_lossy(
        &Command::new("pgrep")
            .args(["-P", &launcher])
            .output()
            .unwrap()
            .stdout,
    )
    .lines()
    .map(|l| l.trim().to_string())
    .collect();
    let signal = |sig: &str| {
        for pid in &pids {
            let _ = Command::new("kill").args([sig, pid]).status();
        }
    };
    if running.len() < n || pids.len() != n {
        signal("-KILL");
        let _ = job.kill();
        let _ = job.wait();
        panic!("{n} running processes with their files: {running:?}, pids {pids:?}");
    }
    signal("-TERM");
    let status = loop {
        if let Some(s) = job.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline + std::time::Duration::from_secs(30) {
            signal("-KILL");
            let _ = job.kill();
            panic!("the job did not end after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    let _ = std::io::Read::read_to_string(&mut job.stderr.take().unwrap(), &mut stderr);
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&cfg);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("terminated by SIGTERM"),
        "the watchdog ended the processes: {stderr}"
    );
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `heat` with its shipped faults under `mpirun -n 4` prints the smp run's checksum and CD
/// lines, and the fault-free checksum.
#[test]
fn heat_with_faults_matches_smp_and_the_fault_free_run() {
    let Some(_job) = mpi_or_skip("heat") else {
        return;
    };
    const HEAT: &str = env!("CARGO_BIN_EXE_heat");
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/heat.toml");
    let faulty = ["--cd-config", config];
    let mpi = mpi_ok(4, HEAT, &faulty);
    let on_smp = smp(4, HEAT, &faulty);
    let clean = mpi_ok(4, HEAT, &[]);
    for prefix in ["cd step: ", "cd halo: ", "checksum "] {
        assert_eq!(
            the_line(&mpi, prefix),
            the_line(&on_smp, prefix),
            "{mpi}\n{on_smp}"
        );
    }
    assert_eq!(the_line(&mpi, "checksum "), the_line(&clean, "checksum "));
    assert!(
        the_line(&mpi, "cd halo: ").starts_with("cd halo: 2 faults"),
        "{mpi}"
    );
}
