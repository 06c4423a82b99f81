//! A rank's process killed with SIGKILL from outside the job, under an MPI with ULFM (feature
//! `ulfm`; the launcher from `. .ci/ulfm-env`, `PGAS_ULFM_MPIRUN`). The test starts itself
//! under `mpirun --with-ft ulfm -n N+S` with `--rank`, reads the pid every rank prints, kills
//! one, and checks what the survivors and the spare print: the agreed lost rank, the new
//! numbering (each survivor keeps its rank, the spare holds the lost one, an allreduce over
//! the new communicator checked it), and one line for the job. Without a spare the job ends
//! with one line naming the rank. With every operation over MPI (no shared memory; RMA as
//! messages, or through the window), a survivor that computes through the kill meets the
//! revoked communicator in an MPI call, and no error reaches the program as a panic. Every run
//! is bounded: a hang fails the test.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gasnet_bridge::{AtomicOp, HandlerTable, LaunchConfig, launch};

/// How long a job may take from start to its last line, kill and recovery included.
const JOB_LIMIT: Duration = Duration::from_secs(60);

/// A put of this many bytes, at this offset, travels by MPI's rendezvous protocol.
const LARGE: usize = 256 << 10;
const LARGE_AT: usize = 64;

/// Set in a rank's environment (by [`start`]) when every operation must travel over MPI.
const OVER_MPI: &str = "ULFM_SPARES_OVER_MPI";

/// The rank's body: print the pid, then rounds until killed or done. Each round puts to the
/// next rank and joins a barrier; over MPI it also first gets from the previous rank and puts
/// a large block to the next, and after the put adds to a word of the next one and sends it an
/// AM whose reply it waits for, so that a peer's death meets each kind of operation. Every result is `expect`ed: an error reaching the program would
/// print as this rank's panic.
fn rank_main(rounds: u64) {
    let over_mpi = std::env::var_os(OVER_MPI).is_some();
    let config = LaunchConfig::from_env(4).expect("config");
    let replies = Arc::new(AtomicU64::new(0));
    let mut table = HandlerTable::new();
    let r = replies.clone();
    let pong = table.register("pong", move |_| {
        r.fetch_add(1, Ordering::AcqRel);
    });
    let ping = table.register("ping", move |tok| {
        tok.reply_short(pong, &[]).expect("reply");
    });
    let result = launch(&config, table, |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
        println!("rank {me} pid {}", std::process::id());
        for round in 1..=rounds {
            if over_mpi {
                let mut got = [0u8; 8];
                ep.get(prev, 0, &mut got).expect("get");
                // Past MPI's eager size: the bytes leave only when the target takes them, so a
                // put to a rank that computes, then dies, waits on the caller's memory until
                // MPI or the revoke ends it.
                ep.put(next, LARGE_AT, &vec![round as u8; LARGE])
                    .expect("large put");
            }
            ep.put(next, 0, &round.to_le_bytes()).expect("put");
            if over_mpi {
                ep.atomic(next, 8, AtomicOp::FetchAdd(1)).expect("atomic");
                let before = replies.load(Ordering::Acquire);
                ep.am_request_short(next, ping, &[]).expect("am");
                ep.wait_until(|| replies.load(Ordering::Acquire) > before);
            }
            ep.barrier().expect("barrier");
            // Over MPI the last rank computes (sleeps) through the kill while the others
            // notice it in their waits and revoke the job's communicator: its next operation
            // then fails in MPI at once, an error that must not reach the program.
            let computing = over_mpi && me == n - 1;
            std::thread::sleep(Duration::from_millis(if computing { 2000 } else { 10 }));
        }
        me
    });
    match result {
        Ok(r) => println!("rank {} done", r[0]),
        Err(e) => {
            eprintln!("ulfm_spares rank: {e}");
            std::process::exit(1)
        }
    }
}

/// A job under the ULFM launcher, its output read as it comes.
struct Job {
    child: Child,
    stdout: Receiver<String>,
    stdout_seen: Vec<String>,
    stderr: JoinHandle<String>,
}

/// Which paths the ranks' operations take.
#[derive(Clone, Copy)]
enum Paths {
    /// The defaults: one host, so shared memory and the rings.
    Shm,
    /// No shared memory, RMA as messages: every operation is an MPI call.
    Messages,
    /// No shared memory, RMA through the MPI window, AMs as messages.
    Window,
}

impl Paths {
    /// The environment that selects them.
    fn env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Paths::Shm => &[],
            Paths::Messages => &[
                (OVER_MPI, "1"),
                ("PGAS_MPI_PSHM", "0"),
                ("PGAS_MPI_RMA", "am"),
            ],
            Paths::Window => &[
                (OVER_MPI, "1"),
                ("PGAS_MPI_PSHM", "0"),
                ("PGAS_MPI_RMA", "window"),
            ],
        }
    }
}

/// Starts `processes` processes, `spares` of them spares, for `rounds` rounds, the operations
/// on `paths`.
fn start(processes: usize, spares: usize, rounds: u64, paths: Paths) -> Job {
    let launcher = std::env::var("PGAS_ULFM_MPIRUN")
        .expect("PGAS_ULFM_MPIRUN is unset: source .ci/ulfm-env before running this test");
    let mut words = launcher.split_whitespace();
    let mut c = Command::new(words.next().expect("a launcher"));
    c.args(words)
        .arg("-n")
        .arg(processes.to_string())
        .arg(std::env::current_exe().expect("own path"))
        .arg("--rank")
        .arg(rounds.to_string())
        .env("PGAS_SPARES", spares.to_string())
        .env("PGAS_MPI_RECOVERY_VERBOSE", "1")
        .env("RUST_BACKTRACE", "0")
        .envs(paths.env().iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a hung job can be ended whole.
        .process_group(0);
    let mut child = c.spawn().expect("start the ULFM mpirun");
    let (tx, stdout) = channel();
    let out = child.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let err = child.stderr.take().expect("piped");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    Job {
        child,
        stdout,
        stdout_seen: Vec::new(),
        stderr,
    }
}

impl Job {
    /// The pid each of the `ranks` ranks printed.
    fn pids(&mut self, ranks: usize, started: Instant) -> Vec<u32> {
        let mut pids = vec![None; ranks];
        while pids.iter().any(Option::is_none) {
            let left = JOB_LIMIT.saturating_sub(started.elapsed());
            let Ok(line) = self.stdout.recv_timeout(left) else {
                self.end_group();
                panic!("not every rank printed its pid: {:?}", self.stdout_seen);
            };
            let w: Vec<&str> = line.split_whitespace().collect();
            if let ["rank", r, "pid", p] = w[..] {
                pids[r.parse::<usize>().expect("rank")] = Some(p.parse().expect("pid"));
            }
            self.stdout_seen.push(line);
        }
        pids.into_iter().map(Option::unwrap).collect()
    }

    /// Waits for the launcher to end (failing the test after [`JOB_LIMIT`]): its status, its
    /// standard output and its standard error.
    fn finish(mut self, started: Instant) -> (ExitStatus, String, String) {
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            if started.elapsed() > JOB_LIMIT {
                let left = self.group_processes();
                self.end_group();
                let err = self.stderr.join().unwrap_or_default();
                panic!(
                    "the job did not end within {JOB_LIMIT:?}: a hang; still running:\n\
                     {left}\nstderr:\n{err}"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut out = self.stdout_seen.join("\n");
        for line in self.stdout.try_iter() {
            out.push('\n');
            out.push_str(&line);
        }
        (status, out, self.stderr.join().unwrap_or_default())
    }

    /// The processes of the launcher's group, as `ps` shows them (to tell which one hung).
    fn group_processes(&self) -> String {
        Command::new("ps")
            .args(["-o", "pid,stat,etime,wchan:20,args", "-g"])
            .arg(self.child.id().to_string())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|e| format!("(ps failed: {e})"))
    }

    fn end_group(&mut self) {
        // SAFETY: kill(2) on the process group this test created for the launcher.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

fn kill9(pid: u32) {
    // SAFETY: kill(2) with a pid a rank of this test's job printed.
    let rc = unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill -9 {pid}");
}

/// Lines of `text` that contain `needle`.
fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

/// Kills rank `victim` of a job of `ranks` ranks and one spare: the spare holds its number in
/// the new communicator, every survivor keeps its own, and one line tells the job; no error
/// reaches the program (over MPI paths: while every operation is an MPI call).
fn a_spare_takes_the_killed_rank(ranks: usize, victim: usize, paths: Paths) {
    let started = Instant::now();
    let mut job = start(ranks + 1, 1, 3000, paths);
    let pids = job.pids(ranks, started);
    std::thread::sleep(Duration::from_millis(300));
    kill9(pids[victim]);
    let killed = Instant::now();
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(!status.success(), "the job ends with an error\n{context}");
    let job_lines = lines_with(&err, "recovery of the conduit state is not implemented");
    assert_eq!(job_lines.len(), 1, "one line for the job\n{context}");
    assert!(
        job_lines[0].contains(&format!(
            "rank {victim} was lost and spare process {ranks} took its number in a new job \
             communicator of {ranks} ranks"
        )),
        "{context}"
    );
    for r in (0..ranks).filter(|&r| r != victim) {
        let place = format!(
            "recovered: pid {} is rank {r} of {ranks} (was rank {r})",
            pids[r]
        );
        assert_eq!(lines_with(&err, &place).len(), 1, "{place}\n{context}");
    }
    let spare = lines_with(&err, &format!("is rank {victim} of {ranks} (was a spare)"));
    assert_eq!(spare.len(), 1, "the spare holds rank {victim}\n{context}");
    assert!(
        !err.contains("panicked") && !err.contains("gives up"),
        "nothing but the recovery's lines\n{context}"
    );
    println!(
        "  rank {victim} of {ranks}+1 killed: recovered and ended {:.2} s after the kill",
        killed.elapsed().as_secs_f64()
    );
}

/// Without a spare, a killed rank ends the job: one line naming it, a nonzero status.
fn without_a_spare_the_job_ends_with_one_line() {
    let started = Instant::now();
    let mut job = start(4, 0, 3000, Paths::Shm);
    let pids = job.pids(4, started);
    std::thread::sleep(Duration::from_millis(300));
    kill9(pids[1]);
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(!status.success(), "{context}");
    let lines = lines_with(&err, "no spare is left");
    assert_eq!(lines.len(), 1, "one line\n{context}");
    assert!(lines[0].contains("rank 1 lost"), "{context}");
    assert!(!err.contains("recovered: pid"), "{context}");
}

/// With spares and no loss the job ends normally: the spare is released, the status is 0.
fn an_unneeded_spare_is_released() {
    let started = Instant::now();
    let job = start(3, 1, 20, Paths::Shm);
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.success(), "{context}");
    for r in 0..2 {
        assert_eq!(
            lines_with(&out, &format!("rank {r} done")).len(),
            1,
            "{context}"
        );
    }
    assert_eq!(
        lines_with(&out, "done").len(),
        2,
        "the spare runs no rank\n{context}"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--rank") {
        rank_main(args[i + 1].parse().expect("rounds"));
        return;
    }
    let tests: [(&str, fn()); 8] = [
        (
            "an_unneeded_spare_is_released",
            an_unneeded_spare_is_released,
        ),
        ("a_spare_takes_killed_rank_2_of_4", || {
            a_spare_takes_the_killed_rank(4, 2, Paths::Shm)
        }),
        ("a_spare_takes_killed_rank_0_of_4", || {
            a_spare_takes_the_killed_rank(4, 0, Paths::Shm)
        }),
        ("a_spare_takes_killed_rank_5_of_8", || {
            a_spare_takes_the_killed_rank(8, 5, Paths::Shm)
        }),
        ("over_mpi_a_killed_peer_reaches_no_program", || {
            a_spare_takes_the_killed_rank(4, 1, Paths::Messages)
        }),
        // The last rank is killed while it computes: the rank before it waits in a large
        // put to it, on its own memory, which only the revoke or MPI's failure notice ends.
        ("over_mpi_a_send_waiting_on_the_killed_rank_ends", || {
            a_spare_takes_the_killed_rank(4, 3, Paths::Messages)
        }),
        ("over_the_window_a_killed_peer_reaches_no_program", || {
            a_spare_takes_the_killed_rank(4, 1, Paths::Window)
        }),
        (
            "without_a_spare_the_job_ends_with_one_line",
            without_a_spare_the_job_ends_with_one_line,
        ),
    ];
    let filter = args.iter().skip(1).find(|a| !a.starts_with('-'));
    let mut failed = Vec::new();
    // With 8+1 processes, Open MPI 5.0.11's launcher itself was seen not to exit after every
    // job process had printed its lines and ended (nothing of the job left running): a launcher
    // hang this test cannot tell from ours. It runs where asked (a soak), not in CI, until
    // that is understood (ROADMAP, real process loss).
    let soak = std::env::var_os("PGAS_ULFM_SOAK").is_some_and(|v| v == "1");
    for (name, test) in tests {
        if filter.is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        if name == "a_spare_takes_killed_rank_5_of_8" && !soak {
            println!("test {name} ... not run: PGAS_ULFM_SOAK=1 runs it");
            continue;
        }
        println!("test {name} ...");
        if std::panic::catch_unwind(test).is_err() {
            failed.push(name);
        }
    }
    if !failed.is_empty() {
        eprintln!("ulfm_spares: failed: {failed:?}");
        std::process::exit(1);
    }
    println!("ulfm_spares: all passed");
}
