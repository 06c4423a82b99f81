//! The mpi conduit's watchdog against strangers: any local user can connect to a rank's
//! watchdog listener, and none may hold up the job or flood its stderr.
//!
//! With the `mpi` feature and `mpirun` on `PATH`, this program starts itself under
//! `mpirun -n 3` (`--child job`: rank 0 listens for ranks 1 and 2, and prints its address with
//! `PGAS_MPI_WATCHDOG_VERBOSE=1`) once per scenario, and connects to rank 0's listener:
//!
//! * `startup-drip`: while the job starts, [`DRIPPERS`] strangers each send the greeting's
//!   magic bytes and then one byte every 1.9 s, reconnecting when refused;
//! * `run-drip`: the same while the job runs;
//! * `startup-flood`: while the job starts, [`FLOOD`] connects, every other one closed at once
//!   and the rest held open;
//! * `run-flood`: the same while the job runs; rank 0's open descriptors must also stay within
//!   the cap on waiting connections: the job's descriptor limit is lowered to [`NOFILE`], which
//!   makes that cap `NOFILE / 4`.
//!
//! `PGAS_MPI_WATCHDOG_CONNECT_DELAY_MS` holds ranks 1 and 2 back for 3 s at start-up, so the
//! strangers connect before them. In every scenario the job must finish normally within
//! [`BOUND`] and rank 0 print at least one and at most [`MAX_REPORT_LINES`] refusal lines.
//!
//! Without `mpirun` the runs are skipped, except under `CI=true`, where that fails.
//! `PGAS_STRANGERS_ONLY=run-drip` (or another scenario) runs one, for debugging.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use gasnet_bridge::{HandlerTable, LaunchConfig, launch};

/// How long a scenario's job may take from `mpirun` to its end.
const BOUND: Duration = Duration::from_secs(20);
/// Refusal lines rank 0 may print in one job: one per kind of refusal and one summary per
/// 10 s, however many connections are refused.
const MAX_REPORT_LINES: usize = 8;
/// Dripping strangers at once.
const DRIPPERS: usize = 8;
/// Connects of a flood, from each of [`FLOODERS`] threads.
const FLOOD: usize = 2500;
/// Threads flooding at once.
const FLOODERS: usize = 2;
/// The job's soft limit on open descriptors; the watchdog lets a quarter of it wait.
const NOFILE: u64 = 512;
/// How long the strangers of a `run-` scenario act while the job runs.
const RUN_STRANGERS: Duration = Duration::from_secs(6);
/// How long ranks 1 and 2 wait at start-up before connecting to rank 0.
const CONNECT_DELAY_MS: &str = "3000";

/// Under mpirun: runs until the file named by `PGAS_SUITE_MARKER` exists, then checks that
/// the job still works. Rank 0 prints its pid, `running` once started, `job done` at the end.
fn job() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write one rlimit in the local `lim`.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = NOFILE.min(lim.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    let marker = std::env::var("PGAS_SUITE_MARKER").expect("PGAS_SUITE_MARKER");
    let n: usize = std::env::var("OMPI_COMM_WORLD_SIZE")
        .or_else(|_| std::env::var("PMI_SIZE"))
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let cfg = LaunchConfig::new(n).segment_bytes(64 << 10);
    launch(&cfg, HandlerTable::new(), |ep| {
        let (me, n) = (ep.rank(), ep.ranks());
        if me == 0 {
            println!("rank 0 pid {}", std::process::id());
            println!("running");
        }
        let start = Instant::now();
        loop {
            let go = u64::from(me == 0 && std::path::Path::new(&marker).exists());
            ep.barrier().unwrap();
            if me == 0 {
                ep.put(0, 0, &go.to_ne_bytes()).unwrap();
            }
            ep.barrier().unwrap();
            let mut word = [0u8; 8];
            ep.get(0, 0, &mut word).unwrap();
            if u64::from_ne_bytes(word) != 0 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "no marker");
            std::thread::sleep(Duration::from_millis(10));
        }
        ep.barrier().unwrap();
        ep.put((me + 1) % n, 8, &[1u8; 8]).unwrap();
        ep.barrier().unwrap();
        let mut word = [0u8; 8];
        ep.get(me, 8, &mut word).unwrap();
        assert_eq!(word, [1u8; 8]);
        if me == 0 {
            println!("job done");
        }
    })
    .unwrap();
}

/// Sends the greeting's magic bytes, then one byte every 1.9 s, reconnecting when refused,
/// until `stop`; counts its connections in `connects`.
fn drip(addr: SocketAddr, stop: &AtomicBool, connects: &AtomicUsize) {
    while !stop.load(Ordering::Acquire) {
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        connects.fetch_add(1, Ordering::AcqRel);
        let mut alive = s.write_all(b"PGASWD01").is_ok();
        while alive {
            let next = Instant::now() + Duration::from_millis(1900);
            while Instant::now() < next {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            alive = s.write_all(b"x").is_ok();
        }
    }
}

/// Makes [`FLOOD`] connections (every other one closed at once, the rest held) or stops
/// early at `stop`; counts them in `connects`, and holds the open ones until `stop`.
fn flood(addr: SocketAddr, stop: &AtomicBool, connects: &AtomicUsize) {
    let mut held = Vec::new();
    for i in 0..FLOOD {
        if stop.load(Ordering::Acquire) {
            break;
        }
        if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            connects.fetch_add(1, Ordering::AcqRel);
            if i % 2 == 1 {
                held.push(s);
            }
        }
    }
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Rank 0's open file descriptors.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Forwards `stream`'s lines to a channel; the thread returns them all at the end.
fn lines_of(
    stream: impl std::io::Read + Send + 'static,
) -> (Receiver<String>, std::thread::JoinHandle<String>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    (rx, t)
}

/// The next line from `rx` for which `f` gives a value, within [`BOUND`] of `start`.
fn wait_for<T>(
    rx: &Receiver<String>,
    start: Instant,
    what: &str,
    f: impl Fn(&str) -> Option<T>,
) -> T {
    loop {
        let left = (start + BOUND).saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("the job did not get to {what} within {BOUND:?} ({e})"));
        if let Some(v) = f(&line) {
            return v;
        }
    }
}

/// A running `mpirun`, ended (SIGTERM, which it passes on to the ranks, then SIGKILL) if it
/// still runs when dropped, on a failure too.
struct Job(Child);

impl Drop for Job {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(3) {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs one scenario (see the module's documentation).
fn scenario(name: &str) {
    let at_startup = name.starts_with("startup");
    let flooding = name.ends_with("flood");
    let marker = std::env::temp_dir().join(format!("pgas-strangers-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let start = Instant::now();
    let mut cmd = gasnet_bridge::conduit::mpirun_command(3);
    cmd.arg(std::env::current_exe().expect("own path"))
        .args(["--child", "job"])
        .env("PGAS_MPI_WATCHDOG_VERBOSE", "1")
        .env("PGAS_SUITE_MARKER", &marker)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if at_startup {
        cmd.env("PGAS_MPI_WATCHDOG_CONNECT_DELAY_MS", CONNECT_DELAY_MS);
    }
    let mut job = Job(cmd.spawn().expect("start mpirun"));
    let (out_rx, out_thread) = lines_of(job.0.stdout.take().unwrap());
    let (err_rx, err_thread) = lines_of(job.0.stderr.take().unwrap());
    let addr: SocketAddr = wait_for(&err_rx, start, "rank 0's watchdog address", |l| {
        l.split("watchdog listening on ")
            .nth(1)
            .map(|a| a.trim().parse().expect("an address"))
    });
    let stop = Arc::new(AtomicBool::new(false));
    let connects = Arc::new(AtomicUsize::new(0));
    let strangers = |stop: &Arc<AtomicBool>| -> Vec<std::thread::JoinHandle<()>> {
        let count = if flooding { FLOODERS } else { DRIPPERS };
        (0..count)
            .map(|_| {
                let (stop, connects) = (stop.clone(), connects.clone());
                std::thread::spawn(move || {
                    if flooding {
                        flood(addr, &stop, &connects);
                    } else {
                        drip(addr, &stop, &connects);
                    }
                })
            })
            .collect()
    };
    let mut threads = Vec::new();
    if at_startup {
        threads = strangers(&stop);
    }
    let pid: u32 = wait_for(&out_rx, start, "rank 0's pid", |l| {
        l.strip_prefix("rank 0 pid ")
            .map(|p| p.parse().expect("a pid"))
    });
    wait_for(&out_rx, start, "running", |l| {
        (l == "running").then_some(())
    });
    let mut fds = (open_fds(pid), 0);
    if !at_startup {
        threads = strangers(&stop);
        let until = Instant::now() + RUN_STRANGERS;
        while Instant::now() < until {
            fds.1 = fds.1.max(open_fds(pid));
            std::thread::sleep(Duration::from_millis(10));
        }
    } else {
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    std::fs::write(&marker, b"go").unwrap();
    let status = loop {
        if let Some(s) = job.0.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > BOUND {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(job);
    let took = start.elapsed();
    let _ = std::fs::remove_file(&marker);
    let stdout = out_thread.join().unwrap();
    let stderr = err_thread.join().unwrap();
    let connects = connects.load(Ordering::Acquire);
    let Some(status) = status else {
        panic!(
            "{name}: the job did not finish within {BOUND:?} ({connects} stranger \
             connections):\n{stdout}\n{stderr}"
        );
    };
    assert!(
        status.success() && stdout.contains("job done"),
        "{name}: the job must finish normally:\n{stdout}\n{stderr}"
    );
    if flooding && !at_startup {
        // The cap, and a few descriptors MPI may open meanwhile.
        let most = fds.0 + NOFILE as usize / 4 + 16;
        assert!(
            fds.1 <= most,
            "{name}: rank 0 had up to {} descriptors open while {} connections were held \
             (before: {}, allowed: {most}): waiting connections are not capped",
            fds.1,
            connects / 2,
            fds.0
        );
        eprintln!(
            "  rank 0's open descriptors: {} before, at most {}",
            fds.0, fds.1
        );
    }
    let reports = stderr
        .lines()
        .filter(|l| l.contains("watchdog refused"))
        .count();
    let shown: String = stderr.lines().take(20).collect::<Vec<_>>().join("\n");
    assert!(
        (1..=MAX_REPORT_LINES).contains(&reports),
        "{name}: {reports} refusal lines for {connects} stranger connections (want 1 to \
         {MAX_REPORT_LINES}); the first lines:\n{shown}"
    );
    eprintln!(
        "  ok {name}: {connects} stranger connections, the job finished in {took:.1?}, \
         {reports} refusal lines:"
    );
    for l in stderr.lines().filter(|l| l.contains("watchdog refused")) {
        eprintln!("    {l}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        match args.get(i + 1).map(String::as_str) {
            Some("job") => job(),
            other => panic!("unknown child mode {other:?}"),
        }
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return; // `cargo test -- --list`: nothing to list for this harness
    }
    // Skips without mpirun, except under CI=true, where that is a failure.
    if !gasnet_bridge::conduit::require_mpirun("watchdog_strangers") {
        return;
    }
    let only = std::env::var("PGAS_STRANGERS_ONLY").ok();
    for name in ["startup-drip", "run-drip", "startup-flood", "run-flood"] {
        if only.as_deref().is_none_or(|o| o == name) {
            eprintln!("watchdog_strangers: {name}");
            scenario(name);
        }
    }
}
