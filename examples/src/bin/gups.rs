//! GUPS: the HPCC RandomAccess benchmark on pgas.
//!
//! A table of `2^log_table` u64 words per rank is updated by XOR-ing random values from the
//! HPCC stream into random words of the whole table, either with remote atomics
//! (`--variant atomic`: one `fetch_xor` per update) or by aggregation (`--variant rpc`: updates
//! are buffered per destination rank and shipped in batches with `rpc_ff`, applied at the
//! owner). Verification follows HPCC: after the timed pass, running the same stream again must
//! bring every word back to its initial value (XOR is its own inverse). Both variants are exact,
//! so no error is tolerated (HPCC allows 1% for racy non-atomic variants). Before that second
//! pass, the XOR of the whole table is checked against the XOR of the stream, and for small
//! tables rank 0 compares the table with a serial run. Every check is made inside the job, so
//! under mpirun (feature `mpi`) every process exits non-zero if one fails, and rank 0's process
//! prints the summary.

#![forbid(unsafe_code)]

use std::cell::Cell;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use pgas::{
    AtomicDomain, GlobalPtr, RpcTable, barrier, new_, new_array, ops, progress, rank_me, rank_n,
    reduce_all,
};
use pgas_examples::{
    CommonArgs, exchange, fail, hpcc, parse_args, parse_positive, run, secs, segment_for,
};

/// Largest `--log-table` accepted: 2^30 words is 8 GiB per rank, past any sensible run here.
const MAX_LOG_TABLE: u32 = 30;
/// Largest total table (words) that rank 0 re-computes serially for the extra check.
const SERIAL_CHECK_WORDS: u64 = 1 << 20;

/// How updates reach their table word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Variant {
    /// One remote atomic `fetch_xor` per update.
    Atomic,
    /// Updates buffered per destination and shipped in batches by `rpc_ff`.
    Rpc,
}

/// Command line of `gups`.
#[derive(Debug, Parser)]
#[command(about = "HPCC RandomAccess (GUPS) with remote atomics or aggregated rpc")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Log2 of the table words per rank.
    #[arg(long, default_value_t = 16, allow_negative_numbers = true, value_parser = parse_log_table)]
    log_table: u32,
    /// Total updates (default: 4 x the whole table, as HPCC).
    #[arg(long, allow_negative_numbers = true, value_parser = parse_positive)]
    updates: Option<usize>,
    /// How updates are applied.
    #[arg(long, value_enum, default_value_t = Variant::Atomic)]
    variant: Variant,
    /// Updates per rpc batch (rpc variant).
    #[arg(long, default_value_t = 1024, allow_negative_numbers = true, value_parser = parse_positive)]
    batch: usize,
}

/// Everything a rank needs to know about the problem (the same on all ranks).
#[derive(Debug, Clone, Copy)]
struct Problem {
    log_local: u32,
    local: u64,
    total: u64,
    updates: u64,
    variant: Variant,
    batch: usize,
}

impl Problem {
    /// The rank and local word that `ran` updates: word `ran mod total` of the global table
    /// (HPCC's `ran & (TableSize-1)` when the rank count is a power of two).
    #[inline]
    fn place(&self, ran: u64) -> (usize, usize) {
        let global = ran % self.total;
        (
            (global >> self.log_local) as usize,
            (global & (self.local - 1)) as usize,
        )
    }

    /// First stream position and count of `rank`'s updates (the remainder to the first ranks).
    fn share(&self, rank: usize, ranks: usize) -> (u64, u64) {
        let (n, r) = (ranks as u64, rank as u64);
        let (each, extra) = (self.updates / n, self.updates % n);
        (r * each + r.min(extra), each + u64::from(r < extra))
    }
}

/// What each rank reports back.
#[derive(serde::Serialize, serde::Deserialize)]
struct Report {
    seconds: f64,
}

/// The shared words of one rank, exchanged at start-up.
type Shared = (GlobalPtr<u64>, GlobalPtr<u64>);

/// XORs each of `updates` into its word of this rank's table; `table` must be this rank's.
/// A local atomic per update (as the atomic variant's remote ones): the owner applies the
/// batches it receives, and XOR updates commute, so the result is exact in any order.
fn apply_local(table: GlobalPtr<u64>, updates: &[u64], p: &Problem) {
    let ad = AtomicDomain::<u64>::new();
    for &ran in updates {
        let (_, index) = p.place(ran);
        // Completes at once on this rank's own word.
        ad.xor(table + index, ran).detach();
    }
}

thread_local! {
    /// This rank's problem, for the rpc that applies incoming batches (set before any is sent).
    static PROBLEM: Cell<Option<Problem>> = const { Cell::new(None) };
    /// Updates applied at this rank by incoming batches: the rpc runs on the rank's thread and
    /// counts there, the waiting loop of the same rank reads it.
    static RECEIVED: Cell<u64> = const { Cell::new(0) };
}

/// Applies a batch of updates that another rank sent to this rank's `table`.
#[pgas::remote]
fn apply((table, batch): (GlobalPtr<u64>, Vec<u64>)) {
    let p = PROBLEM
        .with(Cell::get)
        .expect("the problem is set before any batch is sent");
    apply_local(table, &batch, &p);
    RECEIVED.with(|r| r.set(r.get() + batch.len() as u64));
}

/// One pass of this rank's share of the update stream.
fn update_pass(p: &Problem, shared: &[Shared]) {
    let (me, n) = (rank_me(), rank_n());
    let (first, count) = p.share(me, n);
    let mut ran = hpcc::starts(first as i64);
    match p.variant {
        Variant::Atomic => {
            let ad = AtomicDomain::<u64>::new();
            for _ in 0..count {
                ran = hpcc::next(ran);
                let (rank, index) = p.place(ran);
                // The previous value is not needed; the operation completes at once here.
                ad.fetch_xor(shared[rank].0 + index, ran).detach();
            }
            barrier();
        }
        Variant::Rpc => {
            let mut buffers: Vec<Vec<u64>> = (0..n).map(|_| Vec::with_capacity(p.batch)).collect();
            let mut sent = vec![0u64; n];
            for i in 0..count {
                ran = hpcc::next(ran);
                let (rank, _) = p.place(ran);
                buffers[rank].push(ran);
                if buffers[rank].len() == p.batch {
                    if rank == me {
                        // Own updates are batched too: the table is looked up once per batch.
                        apply_local(shared[me].0, &buffers[me], p);
                        buffers[me].clear();
                    } else {
                        let batch =
                            std::mem::replace(&mut buffers[rank], Vec::with_capacity(p.batch));
                        sent[rank] += batch.len() as u64;
                        pgas::rpc_ff(rank, apply, (shared[rank].0, batch));
                    }
                }
                // Apply incoming batches now and then, so they do not pile up in the queue.
                if i % 4096 == 0 {
                    progress();
                }
            }
            for (rank, batch) in buffers.into_iter().enumerate() {
                if rank == me {
                    apply_local(shared[me].0, &batch, p);
                } else if !batch.is_empty() {
                    sent[rank] += batch.len() as u64;
                    pgas::rpc_ff(rank, apply, (shared[rank].0, batch));
                }
            }
            // rpc_ff has no completion: tell each destination how many updates to expect,
            // then make progress until that many have been applied here.
            let ad = AtomicDomain::<u64>::new();
            for (rank, &s) in sent.iter().enumerate() {
                if s > 0 {
                    ad.fetch_add(shared[rank].1, s).detach();
                }
            }
            barrier();
            let expected = ad.load(shared[me].1).wait();
            while RECEIVED.with(Cell::get) < expected {
                if progress() == 0 {
                    std::thread::yield_now();
                }
            }
            // Reset both counters for the next pass once every rank is done with them.
            barrier();
            ad.store(shared[me].1, 0).wait();
            RECEIVED.with(|r| r.set(0));
            barrier();
        }
    }
}

/// XOR of this rank's table words.
fn xor_local(table: GlobalPtr<u64>, local: usize) -> u64 {
    pgas::rget_slice(table, local)
        .wait()
        .iter()
        .fold(0, |a, &w| a ^ w)
}

/// Parses `--log-table` (a clap value parser naming the limit).
fn parse_log_table(s: &str) -> Result<u32, String> {
    let v = pgas_examples::parse_count(s)?;
    // Above the limit is refused in `main`, with the limit.
    u32::try_from(v).map_err(|_| format!("must be at most {MAX_LOG_TABLE}"))
}

fn main() {
    const NAME: &str = "gups";
    let args: Args = parse_args();
    let ranks = args.common.ranks().unwrap_or_else(|e| fail(NAME, e));
    if args.log_table > MAX_LOG_TABLE {
        fail(
            NAME,
            format!(
                "--log-table {} is above the limit of {MAX_LOG_TABLE}",
                args.log_table
            ),
        );
    }
    let local = 1u64 << args.log_table;
    let total = local
        .checked_mul(ranks as u64)
        .unwrap_or_else(|| fail(NAME, "the table is too large for 64-bit indices"));
    let updates = match args.updates {
        Some(u) => u as u64,
        None => total
            .checked_mul(4)
            .unwrap_or_else(|| fail(NAME, "4 x the table size overflows; pass --updates")),
    };
    let p = Problem {
        log_local: args.log_table,
        local,
        total,
        updates,
        variant: args.variant,
        batch: args.batch,
    };
    // Per rank: the table, and (rpc variant) a batch buffer for every rank.
    let buffers = match p.variant {
        Variant::Rpc => (p.batch as u64).checked_mul(ranks as u64 * 8),
        _ => Some(0),
    };
    pgas_examples::check_memory(
        &match p.variant {
            Variant::Rpc => format!("--log-table {} --batch {}", args.log_table, args.batch),
            _ => format!("--log-table {}", args.log_table),
        },
        ranks,
        buffers.and_then(|b| b.checked_add(local * 8)),
    )
    .unwrap_or_else(|e| fail(NAME, e));
    let segment = usize::try_from(local * 8)
        .map_err(|_| "the table does not fit in this machine's address space".to_string())
        .and_then(segment_for)
        .unwrap_or_else(|e| fail(NAME, e));

    let Some(reports) = run(NAME, ranks, segment, RpcTable::new(), || {
        let (me, n) = (rank_me(), rank_n());
        PROBLEM.with(|c| c.set(Some(p)));
        RECEIVED.with(|r| r.set(0));
        let alloc_err = |e: pgas::PgasError| format!("cannot allocate the table: {e}");
        let table: GlobalPtr<u64> = new_array(local as usize).map_err(alloc_err)?;
        let incoming: GlobalPtr<u64> = new_(0).map_err(alloc_err)?;
        let base = me as u64 * local;
        for i in 0..local {
            (table + i as usize)
                .write_local(base + i)
                .map_err(|e| e.to_string())?;
        }
        let shared: Vec<Shared> = exchange((table, incoming));
        let mut errors = Vec::new();

        // The XOR of the table after the pass must be the initial XOR times the stream's XOR.
        let (first, count) = p.share(me, n);
        let mut ran = hpcc::starts(first as i64);
        let mut stream_xor = 0u64;
        for _ in 0..count {
            ran = hpcc::next(ran);
            stream_xor ^= ran;
        }
        let initial_xor = reduce_all(xor_local(table, local as usize), ops::bit_xor).wait();
        let stream_xor = reduce_all(stream_xor, ops::bit_xor).wait();

        barrier();
        let start = Instant::now();
        update_pass(&p, &shared);
        let seconds = secs(start.elapsed());

        let after_xor = reduce_all(xor_local(table, local as usize), ops::bit_xor).wait();
        if after_xor != initial_xor ^ stream_xor {
            errors.push(format!(
                "XOR of the table after the updates is {after_xor:#018x}, expected {:#018x} \
                 (updates lost or applied twice)",
                initial_xor ^ stream_xor
            ));
        }
        if me == 0 && total <= SERIAL_CHECK_WORDS {
            let mut reference: Vec<u64> = (0..total).collect();
            let mut ran = hpcc::starts(0);
            for _ in 0..updates {
                ran = hpcc::next(ran);
                reference[(ran % total) as usize] ^= ran;
            }
            for (rank, &(t, _)) in shared.iter().enumerate() {
                let got = pgas::rget_slice(t, local as usize).wait();
                let want = &reference[rank * local as usize..(rank + 1) * local as usize];
                if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
                    errors.push(format!(
                        "rank {rank}'s word {i} is {:#x} after the updates; a serial run gives {:#x}",
                        got[i], want[i]
                    ));
                }
            }
        }
        // Nobody updates again until rank 0's serial comparison has read every table.
        barrier();

        // HPCC verification: the same stream again restores the initial table.
        update_pass(&p, &shared);
        let wrong = (0..local)
            .filter(|&i| (table + i as usize).read_local().ok() != Some(base + i))
            .count() as u64;
        let wrong = reduce_all(wrong, ops::add).wait();
        if wrong > 0 {
            errors.push(format!(
                "{wrong} of {total} table words are not back to their initial value after \
                 re-running the updates (0 allowed)"
            ));
        }
        if errors.is_empty() {
            Ok(Report { seconds })
        } else {
            Err(errors.join("; "))
        }
    }) else {
        return;
    };
    let seconds = reports.iter().map(|r| r.seconds).fold(0.0, f64::max);
    let gups = updates as f64 / seconds / 1e9;
    println!(
        "gups: {ranks} ranks, variant {:?}{}, table 2^{} words/rank ({} words), {updates} updates \
         in {seconds:.4} s: {gups:.6} GUP/s; verification: 0 errors",
        args.variant,
        if args.variant == Variant::Rpc {
            format!(" (batch {})", args.batch)
        } else {
            String::new()
        },
        args.log_table,
        total,
    );
}
