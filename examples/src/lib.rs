//! Shared pieces of the pgas example programs: command-line conventions, launching with a clear
//! error, exchanging values between ranks, and the deterministic generators the checks rely on;
//! and [`jacobi`], the distributed 3-D Jacobi stencil of `stencil` and `cd_stencil`.
//!
//! Each binary in `src/bin/` is a self-checking program: it computes something with the pgas
//! API, verifies the answer, prints a short summary and exits non-zero with a message if the
//! answer is wrong.
//!
//! The same binaries run on a cluster: built with the `mpi` feature and started by
//! `mpirun -n N`, each process runs one rank of an N-rank job. That is why the checks are made
//! inside the job ([`conclude`] agrees on them, so every process exits non-zero on a failure)
//! and why the summary comes from rank 0's values gathered inside the job and is printed by rank
//! 0's process alone ([`run`] and [`finish`] return it only there).

#![forbid(unsafe_code)]

use std::fmt::Display;
use std::sync::OnceLock;
use std::time::Duration;

use pgas::{
    DistObject, LaunchConfig, RankResults, RpcTable, barrier, ops, rank_n, reduce_all, reduce_one,
    when_all,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub mod jacobi;

/// Rank count used when neither `--ranks` nor `PGAS_RANKS` is given (and not under mpirun).
pub const DEFAULT_RANKS: usize = 4;

/// Bytes kept at the start of every segment by the pgas runtime, plus allocator slack, added to
/// each example's own segment needs.
pub const SEGMENT_SLACK: usize = 64 << 10;

/// Command-line options every example takes.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Number of ranks (threads); default: PGAS_RANKS, else 4. Under mpirun the rank count is
    /// the number of processes, and a different --ranks is refused.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_positive)]
    pub ranks: Option<usize>,
}

impl CommonArgs {
    /// The rank count. Under mpirun: the MPI world size (`PGAS_RANKS` is ignored and a
    /// `--ranks` that differs is an error naming both, as LULESH does: the problem size of most
    /// examples grows with the rank count, so quietly running another size would mislead).
    /// Otherwise `--ranks`, else `PGAS_RANKS`, else [`DEFAULT_RANKS`].
    pub fn ranks(&self) -> Result<usize, String> {
        pgas::job_ranks("--ranks", self.ranks, DEFAULT_RANKS).map_err(|e| e.to_string())
    }
}

/// This process's place in an mpi job, `Some((rank, world size))`, or `None` on smp (where this
/// process runs every rank). Asked once: the answer cannot change.
pub fn mpi_world() -> Result<Option<(usize, usize)>, String> {
    static WORLD: OnceLock<Result<Option<(usize, usize)>, String>> = OnceLock::new();
    WORLD
        .get_or_init(|| pgas::mpi_world().map_err(|e| e.to_string()))
        .clone()
}

/// Whether this process prints what every process knows alike (the summary, errors found
/// before the job starts): on smp the only process, under mpirun rank 0's. A broken conduit
/// selection counts as speaking, so that its error is seen.
pub fn speaks() -> bool {
    !matches!(mpi_world(), Ok(Some((rank, _))) if rank != 0)
}

/// Parses the command line as clap does, but prints usage errors and `--help` from one process
/// only under mpirun (every process exits with clap's status).
pub fn parse_args<A: clap::Parser>() -> A {
    A::try_parse().unwrap_or_else(|e| {
        if speaks() {
            // Nothing better to do if the terminal is gone.
            let _ = e.print();
        }
        std::process::exit(e.exit_code())
    })
}

/// Parses a whole number of at least 1 (a clap value parser; declare the option with
/// `allow_negative_numbers = true` so that clap hands it `-1` instead of calling `-1` an
/// unexpected argument).
pub fn parse_positive(s: &str) -> Result<usize, String> {
    match parse_count(s)? {
        0 => Err("must be a whole number of at least 1".into()),
        n => Ok(n),
    }
}

/// Parses a whole number of at least 0 (a clap value parser; see [`parse_positive`]).
pub fn parse_count(s: &str) -> Result<usize, String> {
    let t = s.trim();
    if t.starts_with('-') && t[1..].bytes().all(|b| b.is_ascii_digit()) && t.len() > 1 {
        return Err("must be a whole number of at least 1 (it is negative)".into());
    }
    match t.parse::<usize>() {
        Ok(n) => Ok(n),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err(format!(
            "{t} is above the largest count this machine can hold ({})",
            usize::MAX
        )),
        Err(e) => Err(format!("{s:?} is not a whole number ({e})")),
    }
}

/// The shape of a job of `ranks` ranks whose segments need `segment_bytes` each, by the one
/// convention of every program here ([`LaunchConfig::for_job`]: `PGAS_SEGMENT_MB`, at least
/// that size, and `PGAS_RANKS_PER_NODE`), refused if it does not fit in this machine's memory.
pub fn job_config(ranks: usize, segment_bytes: usize) -> Result<LaunchConfig, String> {
    let config = LaunchConfig::for_job(ranks, segment_bytes).map_err(|e| e.to_string())?;
    if mpi_world()?.is_none() {
        config.check_fits(false).map_err(|e| e.to_string())?;
    }
    Ok(config)
}

/// Refuses a problem whose ranks need `per_rank` bytes each (`None`: more than 64 bits) besides
/// their segments, if the job's ranks in this process (all on smp, one under mpirun) cannot
/// hold it; `what` names the options that set the size (`"--n 1024"`).
pub fn check_memory(what: &str, ranks: usize, per_rank: Option<u64>) -> Result<(), String> {
    let here = if mpi_world()?.is_some() { 1 } else { ranks };
    let needed = per_rank.and_then(|b| b.checked_mul(here as u64));
    pgas::limits::check_memory(
        &format!("{what} on {here} rank(s) of this process"),
        needed,
        "; choose a smaller problem",
    )
    .map_err(|e| e.to_string())
}

/// Prints `program: error: message` to stderr (from rank 0's process under mpirun: every
/// process meets the same error) and exits with status 1. For errors found before the job.
pub fn fail(program: &str, message: impl Display) -> ! {
    if speaks() {
        pgas::stderr_line(format_args!("{program}: error: {message}"));
    }
    std::process::exit(1)
}

/// A segment size for `bytes` of example data: the runtime's share and slack added, rounded up
/// to a multiple of 8 as the communication core requires.
pub fn segment_for(bytes: usize) -> Result<usize, String> {
    bytes
        .checked_add(SEGMENT_SLACK)
        .and_then(|b| b.checked_next_multiple_of(8))
        .ok_or_else(|| format!("a segment of {bytes} bytes is too large for this machine"))
}

/// Launches `body` on `ranks` ranks and hands its outcomes to [`conclude`] and [`finish`]:
/// exits with the launch error (which names the rank that failed) or, on every process, when a
/// rank's check failed; returns every rank's value, in rank order, in the process that ran
/// rank 0 and `None` in the others (under mpirun).
pub fn run<R, F>(
    program: &str,
    ranks: usize,
    segment_bytes: usize,
    rpcs: RpcTable,
    body: F,
) -> Option<Vec<R>>
where
    R: Serialize + DeserializeOwned + Send + 'static,
    F: Fn() -> Result<R, String> + Sync,
{
    let config = job_config(ranks, segment_bytes).unwrap_or_else(|e| fail(program, e));
    finish(program, pgas::launch(&config, rpcs, || conclude(body())))
}

/// A rank's outcome after [`conclude`]: its own error, how many ranks failed, and (on rank 0,
/// when none failed) every rank's value.
#[derive(Debug)]
pub struct Concluded<R> {
    error: Option<String>,
    failed: u64,
    ranks: usize,
    values: Option<Vec<R>>,
}

/// Ends a rank's part of a job (collective: every rank calls it last): the ranks agree on how
/// many of them failed, so that every process knows a failure found by another, and, if none
/// did, rank 0 gathers every rank's value in rank order.
pub fn conclude<R>(outcome: Result<R, String>) -> Concluded<R>
where
    R: Serialize + DeserializeOwned + 'static,
{
    let failed = reduce_all(u64::from(outcome.is_err()), ops::add).wait();
    let (error, values) = match outcome {
        Err(e) => (Some(e), None),
        Ok(_) if failed > 0 => (None, None),
        Ok(v) => {
            let concat = |mut a: Vec<R>, b: Vec<R>| {
                a.extend(b);
                a
            };
            (None, reduce_one(vec![v], concat, 0).wait())
        }
    };
    Concluded {
        error,
        failed,
        ranks: rank_n(),
        values,
    }
}

/// What the ranks of this process concluded: their errors (by rank), how many ranks failed in
/// the whole job, the job's rank count, and the values gathered on rank 0.
struct Gathered<R> {
    errors: Vec<(usize, String)>,
    failed: u64,
    ranks: usize,
    values: Option<Vec<R>>,
}

fn gather<R>(results: RankResults<Concluded<R>>) -> Gathered<R> {
    let here = results.ranks();
    let mut g = Gathered {
        errors: Vec::new(),
        failed: 0,
        ranks: 0,
        values: None,
    };
    for (rank, c) in here.zip(results) {
        if let Some(e) = c.error {
            g.errors.push((rank, e));
        }
        (g.failed, g.ranks) = (c.failed, c.ranks);
        g.values = g.values.or(c.values);
    }
    g
}

/// The values gathered by [`conclude`] out of a job's `results`: exits with the launch error
/// (printed by every process, as each may have seen a different first failure), or after
/// printing the errors of the ranks this process ran and, from rank 0's process, how many ranks
/// failed; `None` in a process that did not run rank 0.
pub fn finish<R, E: Display>(
    program: &str,
    results: Result<RankResults<Concluded<R>>, E>,
) -> Option<Vec<R>> {
    let results = results.unwrap_or_else(|e| {
        pgas::stderr_line(format_args!("{program}: error: {e}"));
        std::process::exit(1)
    });
    let Gathered {
        errors,
        failed,
        ranks,
        values,
    } = gather(results);
    for (rank, e) in errors {
        pgas::stderr_line(format_args!("{program}: rank {rank}: {e}"));
    }
    if failed > 0 {
        if speaks() {
            pgas::stderr_line(format_args!(
                "{program}: error: the check failed on {failed} of {ranks} ranks (see the ranks' \
                 messages)"
            ));
        }
        std::process::exit(1)
    }
    values
}

/// [`finish`] for a program that runs a job as one part of its work (a benchmark): the values
/// gathered by [`conclude`] (`None` in a process that did not run rank 0), or, if some rank's
/// check failed, an error naming how many and the messages of the ranks this process ran;
/// nothing printed, no exit.
pub fn gathered<R>(results: RankResults<Concluded<R>>) -> Result<Option<Vec<R>>, String> {
    let g = gather(results);
    if g.failed > 0 {
        let messages: Vec<String> = g
            .errors
            .iter()
            .map(|(rank, e)| format!("rank {rank}: {e}"))
            .collect();
        return Err(format!(
            "the check failed on {} of {} ranks ({})",
            g.failed,
            g.ranks,
            messages.join("; ")
        ));
    }
    Ok(g.values)
}

/// Gives every rank's `value` to every rank, in rank order (collective).
///
/// Built on a [`DistObject`]: each rank fetches every other rank's instance, then a barrier
/// keeps the instances alive until every fetch has been answered.
pub fn exchange<T>(value: T) -> Vec<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + 'static,
{
    let object = DistObject::new(value);
    let all = when_all((0..rank_n()).map(|r| object.fetch(r)).collect()).wait();
    barrier();
    all
}

/// The SplitMix64 finalizer (pgas's), used to make keys, values and positions that look
/// random but are the same on every run.
pub use pgas::mix64;

/// A small, fast, seedable generator (SplitMix64) for the examples' random choices.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }

    /// A value in `0..n` (`n` > 0; the slight modulo bias does not matter here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The HPCC RandomAccess update stream: a linear feedback shift register over GF(2) whose
/// position `n` can be reached in O(log n) steps, so each rank can start at its share.
pub mod hpcc {
    /// The primitive polynomial of the stream.
    pub const POLY: u64 = 0x7;
    /// The period of the stream.
    pub const PERIOD: i64 = 1_317_624_576_693_539_401;

    /// The value after `ran` in the stream.
    #[inline]
    pub fn next(ran: u64) -> u64 {
        (ran << 1) ^ if (ran as i64) < 0 { POLY } else { 0 }
    }

    /// The value at position `n` of the stream that starts at 1 (HPCC_starts).
    pub fn starts(n: i64) -> u64 {
        let mut n = n;
        while n < 0 {
            n += PERIOD;
        }
        while n > PERIOD {
            n -= PERIOD;
        }
        if n == 0 {
            return 1;
        }
        // m2[i] is x^(2i) mod POLY: squaring by table lookup.
        let mut m2 = [0u64; 64];
        let mut temp = 1u64;
        for m in &mut m2 {
            *m = temp;
            temp = next(next(temp));
        }
        let mut i = 62i32;
        while i >= 0 && (n >> i) & 1 == 0 {
            i -= 1;
        }
        let mut ran = 2u64;
        while i > 0 {
            let mut sq = 0u64;
            for (j, m) in m2.iter().enumerate() {
                if (ran >> j) & 1 == 1 {
                    sq ^= m;
                }
            }
            ran = sq;
            i -= 1;
            if (n >> i) & 1 == 1 {
                ran = next(ran);
            }
        }
        ran
    }
}

/// Seconds of `d` as a float, for rates.
pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpcc_starts_jumps_along_the_stream() {
        let mut ran = 1u64;
        for n in 0..2000i64 {
            assert_eq!(hpcc::starts(n), ran, "position {n}");
            ran = hpcc::next(ran);
        }
        assert_eq!(hpcc::starts(hpcc::PERIOD), hpcc::starts(0));
        assert_eq!(hpcc::starts(-1), hpcc::starts(hpcc::PERIOD - 1));
    }

    #[test]
    fn mix64_is_zero_only_at_zero_on_small_inputs() {
        assert_eq!(mix64(0), 0);
        let mut seen = std::collections::HashSet::new();
        for x in 1..10_000u64 {
            let k = mix64(x);
            assert_ne!(k, 0);
            assert!(seen.insert(k));
        }
    }

    #[test]
    fn positive_numbers_parse() {
        assert_eq!(parse_positive(" 7 "), Ok(7));
        assert!(parse_positive("-1").unwrap_err().contains("negative"));
        assert!(
            parse_positive("99999999999999999999999")
                .unwrap_err()
                .contains("largest")
        );
        assert!(parse_positive("0").unwrap_err().contains("at least 1"));
        assert_eq!(parse_count("0"), Ok(0));
        assert!(
            parse_positive("x")
                .unwrap_err()
                .contains("not a whole number")
        );
    }

    #[test]
    fn segment_sizes_are_multiples_of_eight() {
        assert_eq!(segment_for(1).unwrap() % 8, 0);
        assert!(segment_for(usize::MAX).is_err());
    }
}
