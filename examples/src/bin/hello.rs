//! Hello world on pgas: every rank greets, writes its greeting into its right neighbour's
//! segment with `rput_slice`, reads it back with `rget_slice`, makes an rpc round trip to the
//! neighbour, and joins a reduction and a broadcast; every result is checked.
//!
//! Every rank prints its greeting; the summary line comes once, from rank 0's process under
//! mpirun (`mpirun -n 4 target/release/hello` with the `mpi` feature).

#![forbid(unsafe_code)]

use std::time::Instant;

use clap::Parser;
use pgas::{GlobalPtr, RpcTable, barrier, broadcast, new_array, ops, rank_me, rank_n, reduce_all};
use pgas_examples::{CommonArgs, exchange, fail, parse_args, run, segment_for};

/// Bytes of the greeting buffer each rank exposes in its segment.
const GREETING_BYTES: usize = 64;

/// Command line of `hello`.
#[derive(Debug, Parser)]
#[command(about = "Every rank says hello through puts, gets, an rpc and a reduction")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Rounds of the rpc round trip (the problem size of this example).
    #[arg(
        long,
        default_value_t = 1,
        allow_negative_numbers = true,
        value_parser = pgas_examples::parse_positive
    )]
    rounds: usize,
}

/// The greeting of `rank`, padded with zeros to the buffer size.
fn greeting(rank: usize, ranks: usize) -> [u8; GREETING_BYTES] {
    let text = format!("hello from rank {rank} of {ranks}");
    let mut buf = [0u8; GREETING_BYTES];
    let n = text.len().min(GREETING_BYTES);
    buf[..n].copy_from_slice(&text.as_bytes()[..n]);
    buf
}

/// The text of a zero-padded greeting buffer.
fn text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The rpc of the round trips: the reply names the rank it ran on, so the caller can check the
/// rpc went where it asked.
#[pgas::remote]
fn echo(from: u64, token: u64) -> (u64, u64, u64) {
    (rank_me() as u64, from, token.wrapping_mul(3))
}

fn main() {
    const NAME: &str = "hello";
    let args: Args = parse_args();
    let ranks = args.common.ranks().unwrap_or_else(|e| fail(NAME, e));
    let rounds = args.rounds;

    let start = Instant::now();
    let segment = segment_for(GREETING_BYTES).unwrap_or_else(|e| fail(NAME, e));
    let Some(sums) = run(NAME, ranks, segment, RpcTable::new(), || {
        let (me, n) = (rank_me(), rank_n());
        println!("hello from rank {me} of {n}");
        let mut errors = Vec::new();

        let mine: GlobalPtr<u8> = new_array(GREETING_BYTES)
            .map_err(|e| format!("cannot allocate the greeting buffer: {e}"))?;
        let buffers = exchange(mine);
        let right = (me + 1) % n;
        let left = (me + n - 1) % n;

        // Ring: my greeting lands in my right neighbour's buffer; the barrier orders every put
        // before any rank reads its own buffer.
        let hello = greeting(me, n);
        pgas::rput_slice(&hello, buffers[right]).wait();
        barrier();
        let got = pgas::rget_slice(mine, GREETING_BYTES).wait();
        if got[..] != greeting(left, n)[..] {
            errors.push(format!(
                "my buffer holds {:?}, expected the greeting of rank {left}",
                text(&got)
            ));
        }
        let back = pgas::rget_slice(buffers[right], GREETING_BYTES).wait();
        if back[..] != hello[..] {
            errors.push(format!(
                "rank {right}'s buffer holds {:?}, expected my greeting back",
                text(&back)
            ));
        }

        for round in 0..rounds as u64 {
            let token = (me as u64) << 32 | round;
            let (ran_on, from, reply) = pgas::rpc(right, echo, (me as u64, token)).wait();
            if (ran_on, from, reply) != (right as u64, me as u64, token.wrapping_mul(3)) {
                errors.push(format!(
                    "rpc round {round} to rank {right} answered ({ran_on}, {from}, {reply}), \
                     expected ({right}, {me}, {})",
                    token.wrapping_mul(3)
                ));
            }
        }

        let sum = reduce_all(me as u64, ops::add).wait();
        let expected = (n as u64) * (n as u64 - 1) / 2;
        if sum != expected {
            errors.push(format!(
                "reduce_all of ranks gave {sum}, expected {expected}"
            ));
        }
        let magic = broadcast(0x5eed_u64 + n as u64, 0).wait();
        if magic != 0x5eed + n as u64 {
            errors.push(format!("broadcast from rank 0 gave {magic:#x}"));
        }
        barrier();
        if errors.is_empty() {
            Ok(sum)
        } else {
            Err(errors.join("; "))
        }
    }) else {
        return;
    };
    println!(
        "hello: {ranks} ranks OK: ring put/get, {rounds} rpc round trip(s) per rank, \
         reduce_all of ranks = {}, broadcast; {:.3} ms",
        sums[0],
        start.elapsed().as_secs_f64() * 1e3
    );
}
