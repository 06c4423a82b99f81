//! Completion handles that outlive their job, under mpirun without shared memory (so that
//! puts, gets and atomics are MPI operations), with RMA on active messages and through the
//! window: a handle kept in a thread-local past the end of its job answers from what the job
//! left, or fails with `BridgeError::JobEnded`, and never makes MPI calls on a torn-down
//! world.
//!
//! * A job that ends normally completed every operation (the end is quiescent), so its
//!   handles answer: the put's ack, the get's bytes, the atomic's result.
//! * A job that fails (rank 2 panics) while rank 0 waits for a put to rank 1, which does not
//!   poll: the handle's `test` afterwards panics with `JobEnded`; an access region holding
//!   such a put is dropped by the unwind without waiting for it.
//!
//! Runs itself under `mpirun -n 3` (`--child MODE`); built only with the `mpi` feature
//! (`cargo test -p gasnet-bridge --features mpi --test ended_job`).

use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::Stdio;
use std::time::{Duration, Instant};

use gasnet_bridge::{AtomicHandle, OwnedGetHandle};
use gasnet_bridge::{AtomicOp, HandlerTable, LaunchConfig, WriteHandle, launch};

/// What rank 0 keeps past the end of its job.
#[derive(Default)]
struct Kept {
    put: Option<WriteHandle>,
    get: Option<OwnedGetHandle>,
    atomic: Option<AtomicHandle>,
}

thread_local! {
    static KEPT: RefCell<Kept> = RefCell::default();
}

/// How long rank 0 waits after the barrier before its put: rank 1 may still be polling in the
/// barrier (and would answer) just after rank 0 left it, but not this long after.
const SETTLE: Duration = Duration::from_millis(1000);

fn config() -> LaunchConfig {
    LaunchConfig::new(3).segment_bytes(1 << 20)
}

/// A job that ends normally; then rank 0 asks its kept handles.
fn ended_normally() {
    let rank = launch(&config(), HandlerTable::new(), |ep| {
        if ep.rank() == 0 {
            ep.put(1, 64, &7u64.to_le_bytes()).unwrap();
            let put = ep.put_nb(1, 0, &42u64.to_le_bytes()).unwrap();
            let get = ep.get_nb_owned(1, 64, 8).unwrap();
            let atomic = ep.atomic_nb(1, 128, AtomicOp::FetchAdd(5)).unwrap();
            KEPT.with_borrow_mut(|k| {
                *k = Kept {
                    put: Some(put),
                    get: Some(get),
                    atomic: Some(atomic),
                }
            });
        }
        ep.barrier().unwrap();
        ep.rank()
    })
    .expect("the job ends normally")[0];
    if rank != 0 {
        return;
    }
    let mut kept = KEPT.take();
    let put = catch_unwind(AssertUnwindSafe(|| kept.put.as_ref().unwrap().test()));
    let got = catch_unwind(AssertUnwindSafe(|| {
        kept.get.as_mut().unwrap().take_arrived()
    }));
    let atomic = catch_unwind(AssertUnwindSafe(|| kept.atomic.as_ref().unwrap().arrived()));
    let verdict = match (put, got, atomic) {
        (Ok(Some(_)), Ok(Some(bytes)), Ok(Some(a))) if bytes == 7u64.to_le_bytes() => {
            format!("answered (atomic previous value {})", a.previous)
        }
        (put, got, atomic) => format!(
            "wrong: put {:?}, get {:?}, atomic {:?}",
            put.map(|p| p.is_some()),
            got.map(|g| g.map(|b| b.len())),
            atomic.map(|a| a.is_some())
        ),
    };
    drop(kept);
    println!("verdict: {verdict}");
}

/// A job in which rank 2 fails while rank 0's put to rank 1 is unanswered; then rank 0 tests
/// the put's handle.
fn failed() {
    let r = launch(&config(), HandlerTable::new(), |ep| {
        ep.barrier().unwrap();
        match ep.rank() {
            0 => {
                std::thread::sleep(SETTLE);
                let put = ep.put_nb(1, 0, &42u64.to_le_bytes()).unwrap();
                KEPT.with_borrow_mut(|k| k.put = Some(put));
                ep.wait_until(|| false);
            }
            1 => std::thread::sleep(Duration::from_secs(30)),
            _ => {
                std::thread::sleep(SETTLE + Duration::from_millis(300));
                panic!("rank 2 fails on purpose");
            }
        }
    });
    if gasnet_bridge::returned_ranks(3).is_some_and(|r| r.start == 0) {
        assert!(r.is_err(), "the job failed");
        let put = KEPT
            .with_borrow_mut(|k| k.put.take())
            .expect("rank 0 kept its put");
        let tested = catch_unwind(AssertUnwindSafe(|| put.test()));
        let verdict = match tested {
            Err(payload) => {
                let message = gasnet_bridge::for_runtimes::panic_message(&*payload);
                if message.contains("after its job ended") {
                    "refused".to_string()
                } else {
                    format!("wrong panic: {message}")
                }
            }
            Ok(ack) => format!("wrong: answered {:?}", ack.is_some()),
        };
        // The handle's drop must not call MPI either.
        drop(put);
        println!("verdict: {verdict}");
    }
    // Not exiting: mpirun would end every process at once; the watchdog ends this one.
    std::thread::sleep(Duration::from_secs(30));
}

/// A job in which rank 2 fails while rank 0 holds an access region with a put to rank 1 (which
/// does not poll) unanswered: rank 0 unwinds through the region's drop, which must not wait
/// for the ack (a second panic there would abort the process) and returns the failure.
fn region() {
    let r = launch(&config(), HandlerTable::new(), |ep| {
        ep.barrier().unwrap();
        match ep.rank() {
            0 => {
                std::thread::sleep(SETTLE);
                let mut region = ep.access_region();
                region.put(1, 0, &[7u8; 4096]).unwrap();
                ep.wait_until(|| false);
                drop(region);
            }
            1 => std::thread::sleep(Duration::from_secs(30)),
            _ => {
                std::thread::sleep(SETTLE + Duration::from_millis(300));
                panic!("rank 2 fails on purpose");
            }
        }
    });
    if gasnet_bridge::returned_ranks(3).is_some_and(|r| r.start == 0) {
        match r {
            Err(e) => println!("verdict: unwound ({e})"),
            Ok(_) => println!("verdict: wrong: the job did not fail"),
        }
    }
    std::thread::sleep(Duration::from_secs(30));
}

/// Runs `mpirun -n 3 ... --child mode` with `env` and returns rank 0's verdict.
fn run(mode: &str, env: &[(&str, &str)]) -> String {
    let mut c = gasnet_bridge::conduit::mpirun_command(3);
    c.arg(std::env::current_exe().expect("own path"))
        .args(["--child", mode])
        .env("PGAS_MPI_PSHM", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut job = c.spawn().expect("start mpirun");
    let stdout = BufReader::new(job.stdout.take().expect("stdout"));
    let stderr = job.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let verdict = stdout
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("verdict: ").map(str::to_string));
    let start = Instant::now();
    while job.try_wait().expect("wait for mpirun").is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{mode}: the job did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let errors = errors.join().unwrap_or_default();
    verdict.unwrap_or_else(|| panic!("{mode} {env:?}: rank 0 printed no verdict:\n{errors}"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        match args.get(i + 1).map(String::as_str) {
            Some("ended") => ended_normally(),
            Some("failed") => failed(),
            Some("region") => region(),
            other => panic!("unknown child mode {other:?}"),
        }
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if !gasnet_bridge::conduit::require_mpirun("ended_job") {
        return;
    }
    for rma in ["am", "window"] {
        let verdict = run("ended", &[("PGAS_MPI_RMA", rma)]);
        assert!(
            verdict.starts_with("answered"),
            "PGAS_MPI_RMA={rma}: handles kept past a normal end: {verdict}"
        );
        eprintln!("ended_job: PGAS_MPI_RMA={rma}, normal end: {verdict}");
    }
    let verdict = run("failed", &[("PGAS_MPI_RMA", "am")]);
    assert_eq!(verdict, "refused", "a handle kept past a failed job");
    eprintln!("ended_job: failed job: the kept handle's test was refused");
    let verdict = run("region", &[("PGAS_MPI_RMA", "am")]);
    assert!(
        verdict.starts_with("unwound"),
        "an access region dropped by a peer's failure: {verdict}"
    );
    eprintln!("ended_job: failed job: an access region's drop let the rank unwind");
}
