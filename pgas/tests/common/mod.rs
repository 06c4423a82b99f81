//! Shared helpers of the pgas conformance suite: launching with a watchdog, rank counts,
//! results paired with their ranks, deterministic data and content hashes.
//!
//! # Two conduits, one suite
//!
//! Every test file here but `compile_fail.rs` (trybuild) runs on both conduits:
//!
//! * **smp**, under plain `cargo test -p pgas`: ranks are threads, each test sweeps the rank
//!   counts of [`ranks`] / [`ranks_wide`], and a launch returns every rank's result.
//! * **mpi**, under `pgas/tests/mpirun-suite.sh 2 3 4` (needs `mpirun` on `PATH`). The script
//!   runs `cargo test -p pgas --features mpi --test atomics --test basics ... --
//!   --test-threads=1 --quiet` with `CARGO_TARGET_<host triple>_RUNNER="mpirun -n N"`, so each
//!   test binary runs as N processes. The job is the MPI world, so [`ranks`] is just the world
//!   size, and a launch returns only this process's rank's result: assertions on the returned
//!   vector go through [`by_rank`], and counters in captured `Arc`s that rpc handlers bump and
//!   the test reads after the launch are kept per rank and checked for the ranks this process
//!   ran. All processes together therefore check what one smp process checks.
//!
//! Rules the mpi run relies on: every process must launch the same jobs in the same order,
//! which libtest gives with one test thread (it runs the tests sorted by name), so a test must
//! not decide *whether* to launch from anything that differs between processes; and a rank
//! that panics ends the whole MPI job, so tests that make a rank fail on purpose return early
//! there through [`skip_on_mpi`] (the conduit's own failure tests in
//! `gasnet-bridge/tests/conduit_suite.rs` cover rank failure under mpi). An assertion that
//! fails after a launch fails the test in its process only: the processes still launch the
//! same jobs afterwards, and that process's exit status makes mpirun's non-zero.
#![allow(dead_code)]

use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use gasnet_bridge::ConduitKind;
use pgas::{LaunchConfig, RankResults, RpcTable};

/// Rank counts most tests sweep on smp.
const RANKS: &[usize] = &[1, 2, 3, 4, 8];
/// Rank counts of the cheap tests on smp.
const RANKS_WIDE: &[usize] = &[1, 2, 3, 4, 8, 16];
pub const MIB: usize = 1 << 20;
/// A launch that has not returned after this long is reported as a hang instead of blocking
/// the suite forever.
const WATCHDOG: Duration = Duration::from_secs(60);

/// The conduit of this process and, on mpi, (this process's rank, world size); asked once,
/// because every launch of the process uses the same.
fn conduit() -> (ConduitKind, Option<(usize, usize)>) {
    static CONDUIT: OnceLock<(ConduitKind, Option<(usize, usize)>)> = OnceLock::new();
    *CONDUIT.get_or_init(|| {
        let kind = gasnet_bridge::conduit::selected().expect("conduit selection");
        let world = gasnet_bridge::conduit::mpi_world().expect("the MPI world's shape");
        (kind, world)
    })
}

/// True when this process's launches run on the mpi conduit.
pub fn on_mpi() -> bool {
    conduit().0 == ConduitKind::Mpi
}

/// The size of the MPI world this process belongs to, `None` on smp.
pub fn mpi_world_size() -> Option<usize> {
    conduit().1.map(|(_, size)| size)
}

/// On smp `smp_counts`; on mpi the world size, the only job shape there is.
fn counts(smp_counts: &[usize]) -> Vec<usize> {
    match mpi_world_size() {
        Some(size) => vec![size],
        None => smp_counts.to_vec(),
    }
}

/// Rank counts most tests run with: 1, 2, 3, 4 and 8 on smp, the world size on mpi.
pub fn ranks() -> Vec<usize> {
    counts(RANKS)
}

/// Rank counts of the cheap tests: [`ranks`] and 16 on smp, the world size on mpi.
pub fn ranks_wide() -> Vec<usize> {
    counts(RANKS_WIDE)
}

/// The rank counts `list` names, for tests that need particular ones (at least two ranks, or
/// a bounded cost): all of them on smp; on mpi the world size if `list` holds it, else none
/// (and a line on stderr saying the test ran no job).
pub fn ranks_in(list: &[usize]) -> Vec<usize> {
    match mpi_world_size() {
        Some(size) if list.contains(&size) => vec![size],
        Some(size) => {
            note(&format!(
                "runs with {list:?} ranks only, not {size}: no job"
            ));
            Vec::new()
        }
        None => list.to_vec(),
    }
}

/// On mpi, prints why the calling test does not run there and returns true (the test then
/// returns at once); on smp returns false. Only for tests that make a rank fail on purpose:
/// such a failure ends every process of the MPI job, and no later job could start.
pub fn skip_on_mpi(why: &str) -> bool {
    if on_mpi() {
        note(&format!("skipped on mpi: {why}"));
    }
    on_mpi()
}

/// One line on stderr naming the running test, printed by the first process only. Written to
/// the stream itself: libtest captures `eprintln!` of passing tests, and the line is for them;
/// on a line of its own, since libtest's progress output does not end its lines at once.
fn note(what: &str) {
    if conduit().1.is_none_or(|(rank, _)| rank == 0) {
        let thread = std::thread::current();
        let line = format!("\n{}: {what}\n", thread.name().unwrap_or("?"));
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
}

/// The results of a launch of `n` ranks paired with their ranks: every rank on smp, this
/// process's rank on mpi. Checks that they are those the conduit says this process ran.
pub fn by_rank<R>(n: usize, out: &RankResults<R>) -> impl Iterator<Item = (usize, &R)> {
    let ranks = gasnet_bridge::returned_ranks(n).expect("a job ran");
    assert_eq!(out.job_ranks(), n, "a job of {n} ranks");
    assert_eq!(
        out.ranks(),
        ranks,
        "the results of the ranks this process ran"
    );
    out.with_ranks()
}

/// The ranks whose results the last launch of `n` ranks returned to this process.
pub fn held_ranks(n: usize) -> std::ops::Range<usize> {
    gasnet_bridge::returned_ranks(n).expect("a job ran")
}

pub fn config(n: usize, segment_mib: usize) -> LaunchConfig {
    LaunchConfig::new(n).segment_bytes(segment_mib * MIB)
}

/// `pgas::launch` on another thread, failing the test if it hangs.
pub fn try_launch<R, F>(
    config: LaunchConfig,
    rpcs: RpcTable,
    body: F,
) -> Result<pgas::RankResults<R>, pgas::LaunchError>
where
    R: Send + 'static,
    F: Fn() -> R + Sync + Send + 'static,
{
    if let Some(size) = mpi_world_size() {
        // The world size would win silently, and the test's expectations be for `ranks`.
        assert_eq!(
            config.ranks, size,
            "a job on mpi has the world's size: take rank counts from ranks() or ranks_in()"
        );
    }
    let (tx, rx) = mpsc::channel();
    let what = format!("{config:?}");
    std::thread::spawn(move || {
        let _ = tx.send(pgas::launch(&config, rpcs, body));
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) if on_mpi() => {
            // The hung job still holds MPI: the next test's launch would run beside it, which
            // MPI_THREAD_SERIALIZED forbids. End the process; the others then fail too.
            let line = format!("launch {what} did not finish within {WATCHDOG:?}: hang\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            std::process::exit(101)
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("launch {what} did not finish within {WATCHDOG:?}: hang")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("launch {what} panicked"),
    }
}

/// Launches `n` ranks with `segment_mib` MiB segments; panics with the launch error.
pub fn run<R, F>(n: usize, segment_mib: usize, rpcs: RpcTable, body: F) -> RankResults<R>
where
    R: Send + 'static,
    F: Fn() -> R + Sync + Send + 'static,
{
    try_launch(config(n, segment_mib), rpcs, body)
        .unwrap_or_else(|e| panic!("launch of {n} ranks failed: {e}"))
}

/// [`run`] in a job that counts incoming writes (what a resilience runtime asks for), for the
/// tests of the hook's acks and the IWC; other tests run the default, which does not count.
pub fn run_counting<R, F>(n: usize, segment_mib: usize, rpcs: RpcTable, body: F) -> RankResults<R>
where
    R: Send + 'static,
    F: Fn() -> R + Sync + Send + 'static,
{
    let job = config(n, segment_mib).write_counting(gasnet_bridge::WriteCounting::On);
    try_launch(job, rpcs, body).unwrap_or_else(|e| panic!("launch of {n} ranks failed: {e}"))
}

/// SplitMix64 finalizer: a good, cheap, deterministic hash of a word.
pub fn mix(x: u64) -> u64 {
    pgas::mix64(x.wrapping_add(0x9E37_79B9_7F4A_7C15))
}

/// `len` deterministic pseudo-random bytes named by `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut i = 0u64;
    while out.len() < len {
        out.extend_from_slice(&mix(seed.wrapping_mul(0x1000_0000_01B3) ^ i).to_le_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// FNV-1a of bytes (a content hash for comparing large buffers in messages).
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Concatenation, a reduction operator that is not commutative (shows the order).
pub fn concat<T>(mut a: Vec<T>, b: Vec<T>) -> Vec<T> {
    a.extend(b);
    a
}

/// Every rank's value, in rank order, on every rank (an allgather from `reduce_all`).
pub fn allgather<T>(v: T) -> Vec<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + 'static,
{
    pgas::reduce_all(vec![v], concat).wait()
}

/// Inside a job: for every world rank, the node the conduit must put it on. On smp that is
/// the launch's grouping, `ranks_per_node` consecutive ranks to a node (all on one without
/// it); on mpi
/// `ranks_per_node` is ignored and a node is a host, so it is the host each rank's process
/// runs on, gathered from the ranks themselves (a collective: every rank calls it), except
/// with `PGAS_MPI_PSHM=0`, where the processes of a host share no memory and every rank is a
/// node of its own, and with `PGAS_MPI_HOST_SIZE=k`, where each block of k processes (by
/// their number in `MPI_COMM_WORLD`, as the launcher tells it) is a host.
pub fn expected_nodes(ranks_per_node: Option<usize>) -> Vec<String> {
    if on_mpi() {
        let pshm = std::env::var("PGAS_MPI_PSHM").map_or(true, |v| v.trim() != "0");
        let mut host = host_name();
        if let Ok(k) = std::env::var("PGAS_MPI_HOST_SIZE") {
            let k: usize = k.trim().parse().expect("PGAS_MPI_HOST_SIZE: a number");
            let process: usize = std::env::var("OMPI_COMM_WORLD_RANK")
                .expect("OMPI_COMM_WORLD_RANK from the launcher")
                .parse()
                .expect("a process number");
            host = format!("{host}#{}", process / k);
        }
        let me = pgas::rank_me();
        allgather(if pshm {
            host
        } else {
            format!("{host}, rank {me}")
        })
    } else {
        (0..pgas::rank_n())
            .map(|w| format!("node {}", w / ranks_per_node.unwrap_or(usize::MAX)))
            .collect()
    }
}

/// This machine's host name (what `MPI_Get_processor_name` reports on Linux).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .or_else(|_| std::env::var("HOSTNAME"))
        .expect("the host name, from /proc/sys/kernel/hostname or $HOSTNAME")
}
