//! GUPS: the HPCC RandomAccess benchmark on pgas.
//!
//! A table of `2^log_table` u64 words per rank (a block-layout `DistArray`) is updated by XOR-ing random values from the
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

use std::time::Instant;

use clap::{Parser, ValueEnum};
use pgas::{
    AtomicDomain, DistArray, DistObject, GlobalPtr, Layout, RpcTable, barrier, ops, progress,
    rank_me, rank_n, reduce_all,
};
use pgas_examples::{CommonArgs, fail, hpcc, parse_args, parse_positive, run, secs, segment_for};

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
    local: u64,
    total: u64,
    updates: u64,
    variant: Variant,
    batch: usize,
}

impl Problem {
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

/// XORs each of `updates` into word `ran mod local` of the local block `block` (HPCC's
/// `ran & (TableSize-1)` within the owner's block, `local` a power of two). A local atomic
/// per update, as the atomic variant's remote ones: XOR updates commute, so the owner may apply
/// batches in any order and the result is exact.
fn apply_local(block: GlobalPtr<u64>, local: u64, updates: &[u64]) {
    let ad = AtomicDomain::<u64>::new();
    for &ran in updates {
        // Completes at once on this rank's own word.
        ad.xor(block + (ran & (local - 1)) as usize, ran).detach();
    }
}

/// Applies a batch another rank sent to this rank's block, and counts it in `received`.
#[pgas::remote]
fn apply((block, local, batch, received): (GlobalPtr<u64>, u64, Vec<u64>, DistObject<u64>)) {
    apply_local(block, local, &batch);
    received.update(|r| *r += batch.len() as u64);
}

/// One pass of this rank's share of the update stream over `table` (a block layout of `local`
/// words per rank: word `ran mod total` lives on rank `(ran mod total) / local`). The rpc
/// variant counts the updates each rank expects in `incoming` (element r on rank r) and those
/// applied in `received`.
fn update_pass(
    p: &Problem,
    table: &DistArray<u64>,
    incoming: &DistArray<u64>,
    received: &DistObject<u64>,
) {
    let (me, n) = (rank_me(), rank_n());
    let (first, count) = p.share(me, n);
    let mut ran = hpcc::starts(first as i64);
    if p.variant == Variant::Atomic {
        for _ in 0..count {
            ran = hpcc::next(ran);
            // The previous value is not needed; the operation completes at once here.
            table
                .fetch_xor((ran % p.total) as usize, ran)
                .expect("an index below the length")
                .detach();
        }
        barrier();
        return;
    }
    let block = |rank: usize| {
        table
            .ptr(rank * p.local as usize)
            .expect("every rank owns words")
    };
    let ship = |rank: usize, batch: Vec<u64>| {
        if rank == me {
            apply_local(block(me), p.local, &batch);
        } else if !batch.is_empty() {
            incoming
                .fetch_add(rank, batch.len() as u64)
                .expect("one counter per rank")
                .detach();
            pgas::rpc_ff(rank, apply, (block(rank), p.local, batch, received.clone()));
        }
    };
    let mut buffers: Vec<Vec<u64>> = (0..n).map(|_| Vec::with_capacity(p.batch)).collect();
    for i in 0..count {
        ran = hpcc::next(ran);
        let rank = ((ran % p.total) / p.local) as usize;
        buffers[rank].push(ran);
        if buffers[rank].len() == p.batch {
            ship(
                rank,
                std::mem::replace(&mut buffers[rank], Vec::with_capacity(p.batch)),
            );
        }
        // Apply incoming batches now and then, so they do not pile up in the queue.
        if i % 4096 == 0 {
            progress();
        }
    }
    for (rank, batch) in buffers.into_iter().enumerate() {
        ship(rank, batch);
    }
    // rpc_ff has no completion: make progress until every update announced here is applied.
    barrier();
    let expected = incoming.load(me).expect("one counter per rank").wait();
    while received.get() < expected {
        if progress() == 0 {
            std::thread::yield_now();
        }
    }
    // Reset both counters for the next pass once every rank is done with them.
    barrier();
    incoming.write_local(&[0]).expect("one counter per rank");
    received.update(|r| *r = 0);
    barrier();
}

/// XOR of this rank's table words.
fn xor_local(table: &DistArray<u64>) -> u64 {
    table.read_local().iter().fold(0, |a, &w| a ^ w)
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
        let alloc_err = |e: pgas::ArrayError| format!("cannot allocate the table: {e}");
        // Block layout of `local` words per rank: HPCC's table, word g on rank g / local.
        let table = DistArray::<u64>::new(total as usize, Layout::Block).map_err(alloc_err)?;
        let incoming = DistArray::<u64>::new(n, Layout::Block).map_err(alloc_err)?;
        let received = DistObject::new(0u64);
        let base = me as u64 * local;
        table
            .write_local(&(base..base + local).collect::<Vec<_>>())
            .map_err(|e| e.to_string())?;
        barrier();
        let mut errors = Vec::new();

        // The XOR of the table after the pass must be the initial XOR times the stream's XOR.
        let (first, count) = p.share(me, n);
        let mut ran = hpcc::starts(first as i64);
        let mut stream_xor = 0u64;
        for _ in 0..count {
            ran = hpcc::next(ran);
            stream_xor ^= ran;
        }
        let initial_xor = reduce_all(xor_local(&table), ops::bit_xor).wait();
        let stream_xor = reduce_all(stream_xor, ops::bit_xor).wait();

        barrier();
        let start = Instant::now();
        update_pass(&p, &table, &incoming, &received);
        let seconds = secs(start.elapsed());

        let after_xor = reduce_all(xor_local(&table), ops::bit_xor).wait();
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
            let got = table
                .get_range(0..total as usize)
                .map_err(|e| e.to_string())?
                .wait();
            if let Some(i) = (0..got.len()).find(|&i| got[i] != reference[i]) {
                errors.push(format!(
                    "word {i} (on rank {}) is {:#x} after the updates; a serial run gives {:#x}",
                    i as u64 / local,
                    got[i],
                    reference[i]
                ));
            }
        }
        // Nobody updates again until rank 0's serial comparison has read every table.
        barrier();

        // HPCC verification: the same stream again restores the initial table.
        update_pass(&p, &table, &incoming, &received);
        let wrong = table
            .read_local()
            .into_iter()
            .zip(base..)
            .filter(|(w, initial)| w != initial)
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
