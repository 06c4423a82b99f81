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

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use gasnet_bridge::for_runtimes::PeerFailure;
use std::cell::RefCell;

use gasnet_bridge::{
    AtomicOp, BridgeError, Endpoint, HandlerId, HandlerTable, LaunchConfig, WriteHandle, launch,
};

/// How long a job may take from start to its last line, kill and recovery included.
const JOB_LIMIT: Duration = Duration::from_secs(60);

/// A put of this many bytes, at this offset, travels by MPI's rendezvous protocol.
const LARGE: usize = 256 << 10;
const LARGE_AT: usize = 64;

/// Set in a rank's environment (by [`start`]) when every operation must travel over MPI.
const OVER_MPI: &str = "ULFM_SPARES_OVER_MPI";
/// Set in a rank's environment (by [`start`]) to the number of losses the body recovers from
/// (`Endpoint::recover`); unset, the body catches nothing.
const RECOVER: &str = "ULFM_SPARES_RECOVER";
/// Set in a rank's environment to a rank that kills itself once its job has ended (`launch`
/// returned and it printed its last line): a loss after the job's end, before `MPI_Finalize`.
const DIE_AFTER: &str = "ULFM_SPARES_DIE_AFTER";

/// Set in a rank's environment to a process (its number in `MPI_COMM_WORLD`, as the launcher
/// tells it) that kills itself before it calls `MPI_Init`.
const DIE_BEFORE_INIT: &str = "ULFM_SPARES_DIE_BEFORE_INIT";

/// Where each rank writes its mark into its own segment before any loss, and where the rounds
/// after each recovery put into the next rank's (one 8-byte word per epoch).
const MARK_AT: usize = 512 << 10;
const MARK_LEN: usize = 256;
const AFTER_AT: usize = MARK_AT + MARK_LEN;
/// Where each rank tells every other the process that holds it, one word per rank.
const HOSTS_AT: usize = AFTER_AT + 4096;

/// The bytes rank `r` marks its segment with.
fn mark(r: usize) -> Vec<u8> {
    (0..MARK_LEN).map(|i| (r * 31 + i * 7 + 1) as u8).collect()
}

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
    let recover_from: Option<u64> = std::env::var(RECOVER)
        .ok()
        .map(|v| v.parse().expect("losses"));
    // Every process, a spare too (it runs no body), says its pid before the job.
    let process = std::env::var("OMPI_COMM_WORLD_RANK").unwrap_or_default();
    println!("process {process} pid {}", std::process::id());
    if std::env::var(DIE_BEFORE_INIT).is_ok_and(|v| v == process) {
        // SAFETY: kill(2) of this process; nothing runs after it.
        unsafe { libc::kill(std::process::id() as i32, libc::SIGKILL) };
    }
    let die_after: Option<usize> = std::env::var(DIE_AFTER)
        .ok()
        .map(|v| v.parse().expect("a rank"));
    let result = launch(&config, table, |ep| {
        println!("rank {} pid {}", ep.rank(), std::process::id());
        let ops = Ops {
            over_mpi,
            ping,
            replies: &replies,
            kept: RefCell::new(None),
        };
        match recover_from {
            None => ops.rounds(ep, rounds),
            Some(losses) => ops.recovering(ep, rounds, losses),
        }
        ep.rank()
    });
    match result {
        Ok(r) => {
            println!("rank {} done", r[0]);
            if die_after == Some(r[0]) {
                // SAFETY: kill(2) of this process; nothing runs after it.
                unsafe { libc::kill(std::process::id() as i32, libc::SIGKILL) };
            }
        }
        Err(e) => {
            eprintln!("ulfm_spares rank: {e}");
            std::process::exit(1)
        }
    }
}

/// What a rank's rounds use.
struct Ops<'a> {
    over_mpi: bool,
    ping: HandlerId,
    replies: &'a AtomicU64,
    /// Over MPI: the handle of the latest round's non-blocking put, kept unwaited, which a
    /// recovery must leave answering `WorldRebuilt`.
    kept: RefCell<Option<WriteHandle>>,
}

impl Ops<'_> {
    /// Rounds until killed or done.
    fn rounds(&self, ep: &Endpoint, rounds: u64) {
        let (over_mpi, replies, ping) = (self.over_mpi, self.replies, self.ping);
        let (me, n) = (ep.rank(), ep.ranks());
        let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
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
                let h = ep.put_nb(next, 16, &round.to_le_bytes()).expect("put_nb");
                *self.kept.borrow_mut() = Some(h);
            }
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
    }

    /// The body that recovers from `losses` losses: its mark written, rounds until a peer's
    /// failure unwinds them, `recover`, the checks of the rebuilt job, and rounds again until
    /// the last loss. A replacement starts at the checks.
    fn recovering(&self, ep: &Endpoint, rounds: u64, losses: u64) {
        let me = ep.rank();
        let mut recovered = ep.recovered();
        if let Some(r) = &recovered {
            assert!(
                r.replacement,
                "a body starts recovered only as a replacement: {r:?}"
            );
            assert_eq!(r.rank, me);
            assert!(r.lost.contains(&me), "{r:?}");
            println!("rank {me} replacement at epoch {}", r.epoch);
            // Its segment is its own, fresh.
            let mut fresh = vec![1u8; MARK_LEN];
            ep.get(me, MARK_AT, &mut fresh).expect("get own");
            assert!(
                fresh.iter().all(|&b| b == 0),
                "a replacement's segment starts zeroed"
            );
        }
        ep.put(me, MARK_AT, &mark(me)).expect("mark");
        loop {
            if let Some(r) = &recovered {
                self.after_recovery(ep, r.epoch);
                if r.epoch >= losses {
                    return;
                }
            }
            match catch_unwind(AssertUnwindSafe(|| self.rounds(ep, rounds))) {
                Ok(()) => return,
                Err(p) if p.is::<PeerFailure>() => {
                    let r = ep.recover().expect("recover");
                    assert!(!r.replacement && r.rank == me, "{r:?}");
                    assert_eq!(ep.recovered().as_ref(), Some(&r));
                    if let Some(h) = self.kept.borrow_mut().take() {
                        old_handle_answers_rebuilt(ep, h, &r.lost);
                    }
                    recovered = Some(r);
                }
                Err(p) => resume_unwind(p),
            }
        }
    }

    /// In the job rebuilt at `epoch`: a barrier, an AM round trip, a put into the next rank's
    /// segment, and the checks: the previous rank's put and mark arrived, this rank's own mark
    /// is intact (written before the loss on a survivor).
    fn after_recovery(&self, ep: &Endpoint, epoch: u64) {
        let (me, n) = (ep.rank(), ep.ranks());
        let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
        ep.barrier().expect("barrier after the recovery");
        let before = self.replies.load(Ordering::Acquire);
        ep.am_request_short(next, self.ping, &[])
            .expect("am after the recovery");
        ep.wait_until(|| self.replies.load(Ordering::Acquire) > before);
        let at = AFTER_AT + 8 * epoch as usize;
        let word = (epoch << 32) | me as u64;
        ep.put(next, at, &word.to_le_bytes())
            .expect("put after the recovery");
        ep.barrier().expect("second barrier after the recovery");
        let mut got = [0u8; 8];
        ep.get(me, at, &mut got).expect("get own");
        assert_eq!(
            u64::from_le_bytes(got),
            (epoch << 32) | prev as u64,
            "rank {me}: the previous rank's put after the recovery"
        );
        let mut own = vec![0u8; MARK_LEN];
        ep.get(me, MARK_AT, &mut own).expect("get own mark");
        assert_eq!(
            own,
            mark(me),
            "rank {me}: its segment's contents from before the loss"
        );
        let mut theirs = vec![0u8; MARK_LEN];
        ep.get(prev, MARK_AT, &mut theirs)
            .expect("get the mark of the previous rank");
        assert_eq!(theirs, mark(prev), "rank {me}: rank {prev}'s mark");
        if !self.over_mpi {
            // Shared memory: the replacement joined its host's window, so every rank maps the
            // ranks of its host (every rank on one host), and RMA to those never travels as
            // messages.
            let host = host_of_every_rank(ep);
            let expected: Vec<usize> = (0..n).filter(|&r| host[r] == host[me]).collect();
            let mapped: Vec<usize> = (0..n).filter(|&r| ep.maps(r)).collect();
            assert_eq!(mapped, expected, "rank {me}: the ranks it maps");
            assert!(
                expected.iter().all(|&r| !ep.rma_by_messages(r)),
                "rank {me}"
            );
        }
        println!("rank {me} rebuilt at epoch {epoch}");
    }
}

/// The host of each rank's process (collective): under `PGAS_MPI_HOST_SIZE=k` its number in
/// `MPI_COMM_WORLD` over k, told by each rank into every segment; else every rank's host is 0.
fn host_of_every_rank(ep: &Endpoint) -> Vec<usize> {
    let n = ep.ranks();
    let Ok(k) = std::env::var("PGAS_MPI_HOST_SIZE") else {
        return vec![0; n];
    };
    let k: usize = k.parse().expect("PGAS_MPI_HOST_SIZE: a number");
    let process: u64 = std::env::var("OMPI_COMM_WORLD_RANK")
        .expect("the launcher's process number")
        .parse()
        .expect("a number");
    for r in 0..n {
        ep.put(r, HOSTS_AT + 8 * ep.rank(), &process.to_le_bytes())
            .expect("tell the process");
    }
    ep.barrier().expect("barrier after telling the processes");
    (0..n)
        .map(|r| {
            let mut word = [0u8; 8];
            ep.get(ep.rank(), HOSTS_AT + 8 * r, &mut word)
                .expect("read own segment");
            u64::from_le_bytes(word) as usize / k
        })
        .collect()
}

/// A handle of the job before the rebuild: nothing arrived (its link is cut), and a wait
/// answers `WorldRebuilt` naming the lost ranks, at once.
fn old_handle_answers_rebuilt(ep: &Endpoint, h: WriteHandle, lost: &[usize]) {
    if h.completed_at_once().is_some() {
        return;
    }
    assert!(
        h.arrived().is_none(),
        "an old handle sees nothing of the rebuilt job"
    );
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let waited = catch_unwind(AssertUnwindSafe(|| h.wait(ep)));
    std::panic::set_hook(hook);
    let payload = waited.expect_err("a wait on an old handle answers an error");
    let message = gasnet_bridge::for_runtimes::panic_message(&*payload);
    let expected = BridgeError::WorldRebuilt {
        lost: lost.to_vec(),
    }
    .to_string();
    assert_eq!(message, expected);
    println!("rank {} old handle: {message}", ep.rank());
}

/// A job under the ULFM launcher, its output read as it comes.
struct Job {
    child: Child,
    stdout: Receiver<String>,
    stdout_seen: Vec<String>,
    stderr: JoinHandle<String>,
}

/// How long the launcher may outlive every process of its job before the test ends it.
const LINGER_LIMIT: Duration = Duration::from_secs(10);

/// How a job's launcher ended.
enum Ended {
    /// It exited with this status.
    Status(ExitStatus),
    /// Every process of the job had ended and the launcher did not exit within
    /// [`LINGER_LIMIT`]: the test ended it, so the status is unknown and the test checks the
    /// processes' lines instead.
    Lingered,
}

impl Ended {
    /// True if the launcher exited with status 0, or lingered after the job (said on stdout).
    fn exited_0_or_lingered(&self) -> bool {
        match self {
            Ended::Status(s) => s.success(),
            Ended::Lingered => {
                println!("  (the launcher outlived the job's processes; ended, status unknown)");
                true
            }
        }
    }

    /// True if the launcher exited with a nonzero status, or lingered after the job.
    fn failed_or_lingered(&self) -> bool {
        match self {
            Ended::Status(s) => !s.success(),
            Ended::Lingered => {
                println!("  (the launcher outlived the job's processes; ended, status unknown)");
                true
            }
        }
    }
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
/// on `paths`; with `recover`, the bodies recover from that many losses.
fn start(processes: usize, spares: usize, rounds: u64, paths: Paths, recover: Option<u64>) -> Job {
    start_with(processes, spares, rounds, paths, recover, &[])
}

/// The line of Open MPI 5.0.11's launcher when it fails before starting any process (seen once
/// in a while): such a run says nothing of the conduit, so it is launched again.
const LAUNCHER_FAILED: &str = "PMIx server's listener thread failed to start";

/// [`start`] with `env` set in every process too. Waits for the first line a process prints
/// (every process prints its pid before its job); a launcher that ended without one, having
/// failed to start, is started again, at most twice.
fn start_with(
    processes: usize,
    spares: usize,
    rounds: u64,
    paths: Paths,
    recover: Option<u64>,
    env: &[(&str, &str)],
) -> Job {
    for _ in 0..2 {
        let mut job = spawn_job(processes, spares, rounds, paths, recover, env);
        if let Ok(line) = job.stdout.recv_timeout(JOB_LIMIT) {
            job.stdout_seen.push(line);
            return job;
        }
        // The launcher's standard output closed with no line: it ended.
        let _ = job.child.wait();
        let err = job.stderr.join().unwrap_or_default();
        if !err.contains(LAUNCHER_FAILED) {
            job.stderr = std::thread::spawn(move || err);
            return job;
        }
        println!("  (the launcher failed to start, {LAUNCHER_FAILED:?}: started again)");
    }
    spawn_job(processes, spares, rounds, paths, recover, env)
}

/// Starts the launcher of one run ([`start_with`]).
fn spawn_job(
    processes: usize,
    spares: usize,
    rounds: u64,
    paths: Paths,
    recover: Option<u64>,
    env: &[(&str, &str)],
) -> Job {
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
        .envs(recover.map(|k| (RECOVER, k.to_string())))
        .envs(env.iter().copied())
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

    /// The pid process `process` of `MPI_COMM_WORLD` printed before its job (a spare's too).
    fn process_pid(&mut self, process: usize, started: Instant) -> u32 {
        let find = |line: &str| match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["process", w, "pid", p] if w.parse() == Ok(process) => p.parse().ok(),
            _ => None,
        };
        if let Some(pid) = self.stdout_seen.iter().find_map(|l| find(l)) {
            return pid;
        }
        loop {
            let left = JOB_LIMIT.saturating_sub(started.elapsed());
            let Ok(line) = self.stdout.recv_timeout(left) else {
                self.end_group();
                panic!("process {process} printed no pid: {:?}", self.stdout_seen);
            };
            let pid = find(&line);
            self.stdout_seen.push(line);
            if let Some(pid) = pid {
                return pid;
            }
        }
    }

    /// Reads standard output until `count` lines contain `needle` (failing the test after
    /// [`JOB_LIMIT`]); the pid lines seen meanwhile update `pids`.
    fn wait_lines(&mut self, needle: &str, count: usize, pids: &mut [u32], started: Instant) {
        let mut seen = self
            .stdout_seen
            .iter()
            .filter(|l| l.contains(needle))
            .count();
        while seen < count {
            let left = JOB_LIMIT.saturating_sub(started.elapsed());
            let Ok(line) = self.stdout.recv_timeout(left) else {
                self.end_group();
                let err = std::mem::replace(&mut self.stderr, std::thread::spawn(String::new))
                    .join()
                    .unwrap_or_default();
                panic!(
                    "{count} lines with {needle:?} expected: {:?}\nstderr:\n{err}",
                    self.stdout_seen
                );
            };
            let w: Vec<&str> = line.split_whitespace().collect();
            if let ["rank", r, "pid", p] = w[..] {
                pids[r.parse::<usize>().expect("rank")] = p.parse().expect("pid");
            }
            seen += usize::from(line.contains(needle));
            self.stdout_seen.push(line);
        }
    }

    /// Waits for the launcher to end (failing the test after [`JOB_LIMIT`]): how it ended,
    /// its standard output and its standard error.
    fn finish(mut self, started: Instant) -> (Ended, String, String) {
        let mut alone_since: Option<Instant> = None;
        let mut looked = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break Ended::Status(s);
            }
            if looked.elapsed() > Duration::from_secs(1) {
                looked = Instant::now();
                // Open MPI 5.0.11's launcher was seen (about one run in twenty) not to exit
                // after every process of a job that lost one had ended: then only it is left.
                let left = self.group_processes();
                if left.lines().count() == 1 {
                    let since = *alone_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > LINGER_LIMIT {
                        self.end_group();
                        break Ended::Lingered;
                    }
                } else {
                    alone_since = None;
                }
            }
            if started.elapsed() > JOB_LIMIT {
                let left = self.group_processes();
                self.end_group();
                let err = self.stderr.join().unwrap_or_default();
                let mut out = self.stdout_seen.join("\n");
                for line in self.stdout.try_iter() {
                    out.push('\n');
                    out.push_str(&line);
                }
                panic!(
                    "the job did not end within {JOB_LIMIT:?}: a hang; still running:\n\
                     {left}\nstdout:\n{out}\nstderr:\n{err}"
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
        let group = self.child.id().to_string();
        Command::new("ps")
            .args(["-e", "-o", "pgid=,pid=,stat=,etime=,wchan:20=,args="])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter(|l| l.split_whitespace().next() == Some(group.as_str()))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
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

/// Kills rank `victim` of a job of `ranks` ranks and one spare whose bodies catch nothing: the
/// spare holds its number in the new communicator, every survivor keeps its own, and the job
/// ends after the recovery with one line saying no body caught the peer failure; no error
/// reaches the program (over MPI paths: while every operation is an MPI call).
fn a_spare_takes_the_killed_rank(ranks: usize, victim: usize, paths: Paths) {
    let started = Instant::now();
    let mut job = start(ranks + 1, 1, 3000, paths, None);
    let pids = job.pids(ranks, started);
    std::thread::sleep(Duration::from_millis(300));
    kill9(pids[victim]);
    let killed = Instant::now();
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(
        status.failed_or_lingered(),
        "the job ends with an error\n{context}"
    );
    let job_lines = lines_with(&err, "did not catch the peer failure");
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

/// Kills the ranks `victims` of a job of `ranks` ranks and `spares` spares whose bodies
/// recover, one after the other (each once every rank printed that it was rebuilt after the
/// one before): every survivor recovers, each replacement starts as one, and after each
/// rebuild every rank passes a barrier, an AM round trip and puts into another's segment, with
/// the contents from before the losses intact; the job exits 0, each rank printing its line.
fn survivors_recover_and_replacements_run(
    ranks: usize,
    spares: usize,
    victims: &[usize],
    paths: Paths,
) {
    let started = Instant::now();
    let losses = victims.len() as u64;
    let mut job = start(ranks + spares, spares, 3000, paths, Some(losses));
    let mut pids = job.pids(ranks, started);
    let mut times = Vec::new();
    for (i, &victim) in victims.iter().enumerate() {
        let epoch = i + 1;
        std::thread::sleep(Duration::from_millis(300));
        kill9(pids[victim]);
        let killed = Instant::now();
        job.wait_lines(
            &format!("rebuilt at epoch {epoch}"),
            ranks,
            &mut pids,
            started,
        );
        times.push(killed.elapsed().as_secs_f64());
    }
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.exited_0_or_lingered(), "the job exits 0\n{context}");
    for (i, &victim) in victims.iter().enumerate() {
        let epoch = i + 1;
        for r in 0..ranks {
            let line = format!("rank {r} rebuilt at epoch {epoch}");
            assert_eq!(lines_with(&out, &line).len(), 1, "{line}\n{context}");
        }
        let line = format!("rank {victim} replacement at epoch {epoch}");
        assert_eq!(lines_with(&out, &line).len(), 1, "{line}\n{context}");
        let place = format!("is rank {victim} of {ranks} (was a spare)");
        assert!(!lines_with(&err, &place).is_empty(), "{place}\n{context}");
    }
    assert_eq!(
        lines_with(&out, "replacement at").len(),
        victims.len(),
        "one replacement per loss\n{context}"
    );
    each_rank_done_once(&out, ranks, &context);
    assert!(
        !err.contains("panicked") && !err.contains("gives up") && !err.contains("job ends"),
        "nothing but the recovery's lines\n{context}"
    );
    if !matches!(paths, Paths::Shm) {
        let survivors = ranks - victims.len();
        assert_eq!(
            lines_with(&out, "old handle: a completion handle of the job before").len(),
            survivors,
            "every survivor's old handle answers WorldRebuilt\n{context}"
        );
    }
    let times: Vec<String> = times.iter().map(|t| format!("{t:.2} s")).collect();
    println!(
        "  ranks {victims:?} of {ranks}+{spares} killed: every rank rebuilt {} after each kill",
        times.join(", ")
    );
}

/// One spare, two losses: the first is recovered, the second ends the job with one line
/// naming the rank and saying no spare is left, a nonzero status, no hang.
fn a_second_loss_without_a_spare_ends_with_one_line() {
    let started = Instant::now();
    let mut job = start(4, 1, 3000, Paths::Shm, Some(2));
    let mut pids = job.pids(3, started);
    std::thread::sleep(Duration::from_millis(300));
    kill9(pids[1]);
    job.wait_lines("rebuilt at epoch 1", 3, &mut pids, started);
    std::thread::sleep(Duration::from_millis(300));
    kill9(pids[2]);
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.failed_or_lingered(), "{context}");
    let lines = lines_with(&err, "no spare is left");
    assert_eq!(lines.len(), 1, "one line\n{context}");
    assert!(lines[0].contains("rank 2 lost"), "{context}");
    assert!(!err.contains("panicked"), "{context}");
}

/// Without a spare, a killed rank ends the job (its bodies would recover): one line naming
/// it, a nonzero status.
fn without_a_spare_the_job_ends_with_one_line() {
    let started = Instant::now();
    let mut job = start(4, 0, 3000, Paths::Shm, Some(1));
    let pids = job.pids(4, started);
    std::thread::sleep(Duration::from_millis(300));
    kill9(pids[1]);
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.failed_or_lingered(), "{context}");
    let lines = lines_with(&err, "no spare is left");
    assert_eq!(lines.len(), 1, "one line\n{context}");
    assert!(lines[0].contains("rank 1 lost"), "{context}");
    assert!(!err.contains("recovered: pid"), "{context}");
}

/// With spares and no loss the job ends normally: the spare is released, the status is 0.
fn an_unneeded_spare_is_released() {
    let started = Instant::now();
    let job = start(3, 1, 20, Paths::Shm, None);
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.exited_0_or_lingered(), "{context}");
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

/// A rank killed after its job ended (its body, the teardown and the spare's release done,
/// its last line printed), before the processes' `MPI_Finalize`, which would wait for it
/// forever: the others learn of it at their exit and the job ends with one line naming it, a
/// nonzero status, the answer printed in full.
fn a_rank_lost_after_the_job_ends_it_with_one_line(victim: usize) {
    let started = Instant::now();
    let die = victim.to_string();
    let job = start_with(5, 1, 20, Paths::Shm, None, &[(DIE_AFTER, &die)]);
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.failed_or_lingered(), "{context}");
    let lines = lines_with(&err, "after every rank had finished the job's body");
    assert_eq!(lines.len(), 1, "one line\n{context}");
    assert!(
        lines[0].contains(&format!("rank {victim} was lost")),
        "{context}"
    );
    each_rank_done_once(&out, 4, &context);
    no_deadline_line_or_panic(&err, &context);
}

/// The idle spare killed while the job runs: the job goes on to its end (every rank's last
/// line, status 0) and one line says the spare died unneeded; no hang in `MPI_Finalize`.
fn the_idle_spare_killed_the_job_goes_on() {
    let started = Instant::now();
    let mut job = start(5, 1, 300, Paths::Shm, None);
    job.pids(4, started);
    let spare = job.process_pid(4, started);
    std::thread::sleep(Duration::from_millis(300));
    kill9(spare);
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.exited_0_or_lingered(), "{context}");
    each_rank_done_once(&out, 4, &context);
    assert_eq!(
        lines_with(&err, "an idle spare process died").len(),
        1,
        "one line\n{context}"
    );
    no_deadline_line_or_panic(&err, &context);
}

/// The idle spare killed, then a rank: nothing is left to replace it, and the job ends with
/// the one line naming the rank and saying no spare is left.
fn the_idle_spare_killed_then_a_rank_ends_with_the_no_spare_line() {
    let started = Instant::now();
    let mut job = start(5, 1, 3000, Paths::Shm, Some(1));
    let pids = job.pids(4, started);
    let spare = job.process_pid(4, started);
    std::thread::sleep(Duration::from_millis(300));
    kill9(spare);
    std::thread::sleep(Duration::from_millis(300));
    kill9(pids[1]);
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.failed_or_lingered(), "{context}");
    let lines = lines_with(&err, "no spare is left");
    assert_eq!(lines.len(), 1, "one line\n{context}");
    assert!(lines[0].contains("rank 1 lost"), "{context}");
    assert!(!err.contains("panicked"), "{context}");
}

/// A process killed during the conduit's start-up (`PGAS_MPI_KILL_AT=point:process`),
/// before any body ran: the live processes agree on it and the start-up runs again over them,
/// the spare holding a rank if the dead one held one; one line says so, every rank runs its
/// body to its end, status 0, no deadline line.
fn a_process_lost_at_start_the_start_up_runs_again(point: &str, process: usize) {
    let started = Instant::now();
    let at = format!("{point}:{process}");
    let job = start_with(4, 1, 20, Paths::Shm, Some(1), &[("PGAS_MPI_KILL_AT", &at)]);
    let (status, out, err) = job.finish(started);
    let context = format!("{at}\nstdout:\n{out}\nstderr:\n{err}");
    assert!(status.exited_0_or_lingered(), "{context}");
    let lines = lines_with(&err, "died during the conduit's start-up");
    assert_eq!(lines.len(), 1, "one line\n{context}");
    assert!(
        lines[0].contains(&format!("process [{process}] of MPI_COMM_WORLD"))
            && lines[0].contains("the start-up runs again over the 3 live processes, 0 of them"),
        "{context}"
    );
    each_rank_done_once(&out, 3, &context);
    no_deadline_line_or_panic(&err, &context);
}

/// Without a spare, a process killed during the start-up ends the job: one line naming it and
/// saying no spare is left, a nonzero status, no body ran.
fn without_a_spare_a_process_lost_at_start_ends_the_job_with_one_line() {
    let started = Instant::now();
    let job = start_with(
        3,
        0,
        20,
        Paths::Shm,
        Some(1),
        &[("PGAS_MPI_KILL_AT", "split:1")],
    );
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.failed_or_lingered(), "{context}");
    let lines = lines_with(&err, "died during the conduit's start-up");
    assert_eq!(lines.len(), 1, "one line\n{context}");
    assert!(
        lines[0].contains("process [1] of MPI_COMM_WORLD") && lines[0].contains("no spare is left"),
        "{context}"
    );
    assert!(
        lines_with(&out, "rank").is_empty(),
        "no body ran\n{context}"
    );
    no_deadline_line_or_panic(&err, &context);
}

/// A process killed before it calls `MPI_Init`: the others wait in theirs for it, which no
/// failure notice ends (MPI is not initialized), until the deadline of `PGAS_MPI_INIT_TIMEOUT`
/// ends each with one line; the job ends, nonzero, with no body run and no other line.
fn a_process_lost_before_mpi_init_ends_the_job_at_the_init_deadline() {
    let started = Instant::now();
    let job = start_with(
        3,
        1,
        20,
        Paths::Shm,
        Some(1),
        &[(DIE_BEFORE_INIT, "1"), ("PGAS_MPI_INIT_TIMEOUT", "2")],
    );
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.failed_or_lingered(), "{context}");
    let lines = lines_with(&err, "MPI_Init did not return within 2 s");
    assert!(
        (1..=2).contains(&lines.len()),
        "one line per live process\n{context}"
    );
    assert_eq!(
        err.lines().filter(|l| !l.trim().is_empty()).count(),
        lines.len(),
        "no other line\n{context}"
    );
    assert!(
        lines_with(&out, "rank").is_empty(),
        "no body ran\n{context}"
    );
}

/// A job of 4 ranks and 2 spares (processes 4 and 5) whose bodies recover once, process
/// `process` set to kill itself at the recovery's `point` (`PGAS_MPI_KILL_AT`), and rank 2
/// killed from outside once every rank runs: the job and the ranks' pids.
fn rank_2_killed_and_process_at(point: &str, process: usize, started: Instant) -> (Job, Vec<u32>) {
    rank_2_killed_and_process_at_with(2, point, process, started)
}

/// [`rank_2_killed_and_process_at`] with `spares` spares (processes 4 and up).
fn rank_2_killed_and_process_at_with(
    spares: usize,
    point: &str,
    process: usize,
    started: Instant,
) -> (Job, Vec<u32>) {
    let at = format!("{point}:{process}");
    let mut job = start_with(
        4 + spares,
        spares,
        3000,
        Paths::Shm,
        Some(1),
        &[("PGAS_MPI_KILL_AT", &at)],
    );
    let pids = job.pids(4, started);
    std::thread::sleep(Duration::from_millis(300));
    kill9(pids[2]);
    (job, pids)
}

/// Waits for the job of [`rank_2_killed_and_process_at`] to end after one recovery whose
/// replacements took the ranks `replaced`, at recovery epoch `epoch` (one per round of
/// agreement on the dead), and checks it: every rank rebuilt once, each of `replaced`
/// started as a replacement once, every rank done, exit status 0, no line of an ending.
fn recovered_once(
    mut job: Job,
    mut pids: Vec<u32>,
    started: Instant,
    epoch: u64,
    replaced: &[usize],
) {
    job.wait_lines(&format!("rebuilt at epoch {epoch}"), 4, &mut pids, started);
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.exited_0_or_lingered(), "the job exits 0\n{context}");
    for r in 0..4 {
        let line = format!("rank {r} rebuilt at epoch {epoch}");
        assert_eq!(lines_with(&out, &line).len(), 1, "{line}\n{context}");
    }
    for r in replaced {
        let line = format!("rank {r} replacement at epoch {epoch}");
        assert_eq!(lines_with(&out, &line).len(), 1, "{line}\n{context}");
    }
    assert_eq!(
        lines_with(&out, "replacement at").len(),
        replaced.len(),
        "{context}"
    );
    each_rank_done_once(&out, 4, &context);
    assert!(
        !err.contains("panicked") && !err.contains("gives up") && !err.contains("job ends"),
        "nothing but the recovery's lines\n{context}"
    );
}

/// Rank 2 killed from outside, and process 1 (rank 1) killing itself in the recovery's
/// agreement on the dead (`PGAS_MPI_KILL_AT=agree:1`): the others' agreement fails, their
/// round starts again from the shrink and agrees on both, and the two spares take ranks 1 and
/// 2; every rank is rebuilt once and the job exits 0.
fn a_second_loss_in_the_agreement_is_recovered_in_the_same_recovery() {
    let started = Instant::now();
    let (job, pids) = rank_2_killed_and_process_at("agree", 1, started);
    recovered_once(job, pids, started, 1, &[1, 2]);
}

/// Rank 2 killed from outside, and process 1 (rank 1) killing itself once the new job
/// communicator exists, before it rebuilds its world (`PGAS_MPI_KILL_AT=rebuild:1`): the
/// others' rebuild fails, the round's agreement tells every live process so, the recovery runs
/// again, and the second spare takes rank 1 while the first, which took rank 2, builds its
/// world anew; every rank is rebuilt once, at epoch 2, and the job exits 0.
fn a_loss_during_the_rebuild_is_recovered_by_a_second_round() {
    let started = Instant::now();
    let (job, pids) = rank_2_killed_and_process_at("rebuild", 1, started);
    recovered_once(job, pids, started, 2, &[1, 2]);
}

/// The same with process 1 dying later in its rebuild, after the rebuilt job's first
/// collectives completed at every process (`PGAS_MPI_KILL_AT=rebuild_late:1`): the others are
/// further on when they meet the loss, and the round's agreement still sends every process
/// back to the recovery.
fn a_loss_late_in_the_rebuild_is_recovered_by_a_second_round() {
    let started = Instant::now();
    let (job, pids) = rank_2_killed_and_process_at("rebuild_late", 1, started);
    recovered_once(job, pids, started, 2, &[1, 2]);
}

/// As [`a_loss_during_the_rebuild_is_recovered_by_a_second_round`] with one spare: the
/// second round has none left for rank 1, and the job ends with one line saying so, a nonzero
/// status, no hang.
fn a_loss_during_the_rebuild_with_no_spare_left_ends_with_one_line() {
    let started = Instant::now();
    let (job, _) = rank_2_killed_and_process_at_with(1, "rebuild", 1, started);
    let (status, out, err) = job.finish(started);
    let context = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(status.failed_or_lingered(), "{context}");
    let lines = lines_with(&err, "no spare is left");
    assert_eq!(lines.len(), 1, "one line\n{context}");
    assert!(lines[0].contains("rank 1 lost"), "{context}");
    assert!(!err.contains("panicked"), "{context}");
}

/// Rank 2 killed from outside, and the spare that takes it (process 4) killing itself before it
/// builds its world (`PGAS_MPI_KILL_AT=replace:4`): the survivors' rebuild fails, the recovery
/// runs again and the other spare takes rank 2; the job exits 0.
fn the_spare_lost_while_it_takes_a_rank_the_next_spare_takes_it() {
    let started = Instant::now();
    let (job, pids) = rank_2_killed_and_process_at("replace", 4, started);
    recovered_once(job, pids, started, 2, &[2]);
}

/// Every one of `ranks` ranks printed its last line once.
fn each_rank_done_once(out: &str, ranks: usize, context: &str) {
    for r in 0..ranks {
        let line = format!("rank {r} done");
        assert_eq!(lines_with(out, &line).len(), 1, "{line}\n{context}");
    }
}

/// No process hit a deadline of the conduit, and none panicked.
fn no_deadline_line_or_panic(err: &str, context: &str) {
    assert!(
        !err.contains("did not finish within") && !err.contains("panicked"),
        "{context}"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--rank") {
        rank_main(args[i + 1].parse().expect("rounds"));
        return;
    }
    let tests: [(&str, fn()); 28] = [
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
        ("recover_killed_rank_2_of_4", || {
            survivors_recover_and_replacements_run(4, 1, &[2], Paths::Shm)
        }),
        ("recover_killed_rank_0_of_4", || {
            survivors_recover_and_replacements_run(4, 1, &[0], Paths::Shm)
        }),
        ("recover_over_mpi_killed_rank_1_of_4", || {
            survivors_recover_and_replacements_run(4, 1, &[1], Paths::Messages)
        }),
        // The old job had an RMA window; the rebuilt one carries RMA as messages.
        ("recover_over_the_window_killed_rank_2_of_4", || {
            survivors_recover_and_replacements_run(4, 1, &[2], Paths::Window)
        }),
        ("recover_two_losses_one_after_the_other", || {
            survivors_recover_and_replacements_run(4, 2, &[1, 3], Paths::Shm)
        }),
        (
            "recover_a_second_loss_without_a_spare_ends_with_one_line",
            a_second_loss_without_a_spare_ends_with_one_line,
        ),
        (
            "a_rank_lost_after_the_job_ends_it_with_one_line_rank_2",
            || a_rank_lost_after_the_job_ends_it_with_one_line(2),
        ),
        (
            "a_rank_lost_after_the_job_ends_it_with_one_line_rank_0",
            || a_rank_lost_after_the_job_ends_it_with_one_line(0),
        ),
        // A holder before its world's set-up: the others' set-up fails over the holders.
        (
            "a_holder_lost_before_the_set_up_the_start_up_runs_again",
            || a_process_lost_at_start_the_start_up_runs_again("split", 1),
        ),
        // A holder in the last collective of the start-up, every world set up.
        (
            "a_holder_lost_in_the_exchange_of_ranks_the_start_up_runs_again",
            || a_process_lost_at_start_the_start_up_runs_again("publish", 0),
        ),
        // The spare before its part of the exchange.
        ("the_spare_lost_at_start_the_start_up_runs_again", || {
            a_process_lost_at_start_the_start_up_runs_again("split", 3)
        }),
        (
            "without_a_spare_a_process_lost_at_start_ends_the_job_with_one_line",
            without_a_spare_a_process_lost_at_start_ends_the_job_with_one_line,
        ),
        (
            "a_second_loss_in_the_agreement_is_recovered_in_the_same_recovery",
            a_second_loss_in_the_agreement_is_recovered_in_the_same_recovery,
        ),
        (
            "a_loss_during_the_rebuild_is_recovered_by_a_second_round",
            a_loss_during_the_rebuild_is_recovered_by_a_second_round,
        ),
        (
            "a_loss_late_in_the_rebuild_is_recovered_by_a_second_round",
            a_loss_late_in_the_rebuild_is_recovered_by_a_second_round,
        ),
        (
            "a_loss_during_the_rebuild_with_no_spare_left_ends_with_one_line",
            a_loss_during_the_rebuild_with_no_spare_left_ends_with_one_line,
        ),
        (
            "the_spare_lost_while_it_takes_a_rank_the_next_spare_takes_it",
            the_spare_lost_while_it_takes_a_rank_the_next_spare_takes_it,
        ),
        (
            "a_process_lost_before_mpi_init_ends_the_job_at_the_init_deadline",
            a_process_lost_before_mpi_init_ends_the_job_at_the_init_deadline,
        ),
        (
            "the_idle_spare_killed_the_job_goes_on",
            the_idle_spare_killed_the_job_goes_on,
        ),
        (
            "the_idle_spare_killed_then_a_rank_ends_with_the_no_spare_line",
            the_idle_spare_killed_then_a_rank_ends_with_the_no_spare_line,
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
