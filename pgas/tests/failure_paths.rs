//! Failure paths under mpirun: no MPI operation writes into memory its caller gave up.
//!
//! A 3-process job without shared memory and with RMA on active messages
//! (`PGAS_MPI_PSHM=0 PGAS_MPI_RMA=am`), so that a get is an MPI request answered by the
//! target's progress. Rank 0 calls `rget_into` on rank 1 while rank 1 sleeps without polling;
//! rank 2 panics meanwhile, so rank 0's wait unwinds with the peer failure before rank 1 has
//! answered. Rank 0 catches the unwind, drops its buffer and allocates a same-size one (the
//! allocator hands back the same bytes), fills it with a marker and keeps polling while rank 1
//! wakes up and answers the get. The late answer must land in memory the conduit owns, never
//! in the caller's freed (and reused) buffer.
//!
//! Runs itself under `mpirun -n 3` (`--child`); built only with the `mpi` feature
//! (`cargo test -p pgas --features mpi --test failure_paths`): on smp a get is a copy.

use std::io::{BufRead, BufReader};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::Stdio;
use std::time::{Duration, Instant};

use pgas::{GlobalPtr, LaunchConfig, RpcTable};

/// Words of the get: 64 KiB, below glibc's mmap threshold, so a freed buffer is reused.
const WORDS: usize = 8192;
/// What rank 1's array holds (what its late answer would write).
const SERVED: u64 = 0xabab_abab_abab_abab;
/// How long rank 0 waits after the barrier before its get: rank 1 may still be polling in the
/// barrier (and would answer at once) just after rank 0 left it, but not this long after.
const SETTLE: Duration = Duration::from_millis(1000);
/// What rank 0's fresh buffer holds.
const MARKER: u64 = 0x1111_1111_1111_1111;

/// Polls for `d`, swallowing the peer-failure unwinds progress raises in a failed job.
fn poll_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        let _ = catch_unwind(pgas::progress);
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn child() {
    let cfg = LaunchConfig::new(3).segment_bytes(4 << 20);
    // Keep the deliberate panic's message (and the peers' unwinds) out of the verdict lines.
    let _ = pgas::launch(&cfg, RpcTable::new(), || {
        let me = pgas::rank_me();
        let mine: GlobalPtr<u64> = pgas::new_array(WORDS).expect("array");
        if me == 1 {
            mine.write_local_slice(&vec![SERVED; WORDS])
                .expect("own array");
        }
        let served = pgas::broadcast(mine, 1).wait();
        pgas::barrier();
        match me {
            2 => {
                std::thread::sleep(SETTLE + Duration::from_millis(300));
                panic!("rank 2 fails on purpose");
            }
            1 => {
                // Not polling: rank 0's get request waits here until after the failure.
                std::thread::sleep(SETTLE + Duration::from_millis(1500));
                poll_for(Duration::from_secs(30));
            }
            _ => {
                std::thread::sleep(SETTLE);
                let mut dst = vec![0u64; WORDS];
                let got = catch_unwind(AssertUnwindSafe(|| pgas::rget_into(served, &mut dst)));
                if got.is_ok() {
                    println!("verdict: the get completed before the failure (scenario missed)");
                    poll_for(Duration::from_secs(30));
                }
                let old = dst.as_ptr() as usize;
                drop(dst);
                let fresh = vec![MARKER; WORDS];
                let same = fresh.as_ptr() as usize == old;
                // Rank 1 answers about 1.2 s after the failure; the watchdog ends the job 5 s
                // after it.
                poll_for(Duration::from_millis(2500));
                match fresh.iter().position(|&w| w != MARKER) {
                    None => println!("verdict: intact (same address: {same})"),
                    Some(i) => println!(
                        "verdict: overwritten at word {i} with {:#x} (same address: {same})",
                        fresh[i]
                    ),
                }
                poll_for(Duration::from_secs(30));
            }
        }
    });
    // Not exiting: mpirun would end every process at once. The watchdog ends this one a few
    // seconds after the failure, when rank 0 has given its verdict.
    std::thread::sleep(Duration::from_secs(30));
    std::process::exit(1);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--child") {
        child();
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if !gasnet_bridge::conduit::require_mpirun("failure_paths") {
        return;
    }
    let mut job = gasnet_bridge::conduit::mpirun_command(3)
        .arg(std::env::current_exe().expect("own path"))
        .arg("--child")
        .env("PGAS_MPI_PSHM", "0")
        .env("PGAS_MPI_RMA", "am")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    let stdout = BufReader::new(job.stdout.take().expect("stdout"));
    let stderr = job.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let verdict = stdout
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("verdict: "));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = job.try_wait().expect("wait for mpirun") {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the failed job did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let errors = errors.join().unwrap_or_default();
    assert!(!status.success(), "a job with a failed rank exits non-zero");
    let verdict = verdict.unwrap_or_else(|| panic!("rank 0 printed no verdict:\n{errors}"));
    assert!(
        verdict.starts_with("verdict: intact"),
        "a get abandoned by an unwind wrote into memory its caller gave up: {verdict}\n{errors}"
    );
    eprintln!("failure_paths: {verdict}");
}
