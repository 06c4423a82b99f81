//! A distributed hash table in the style of the key-value store of the ftRMA paper: each rank
//! holds an open-addressing table (its blocks of three block-layout `DistArray`s: key words,
//! version words, values); a key hashes to a home (rank, slot) and probes linearly there.
//!
//! Insert claims a slot with `compare_exchange` on its key word (0 = empty), writes the value
//! with `rput_slice`, then publishes it by `fetch_add` on the slot's version word, and counts
//! itself on a global counter with `fetch_add`. Lookup reads key words and the value with
//! `rget`, accepting the value only if the version word is non-zero and unchanged around the
//! read. Each rank inserts its keys, then every rank looks up random keys of all ranks (and
//! some absent ones) and checks what it finds; a full table is reported as an error. Under
//! mpirun (feature `mpi`) the checks are agreed on by every process and rank 0's process prints
//! the summary.

#![forbid(unsafe_code)]

use std::time::Instant;

use clap::Parser;
use pgas::{DistArray, Layout, RpcTable, barrier, ops, rank_me, rank_n, reduce_all};
use pgas_examples::{
    CommonArgs, SplitMix, fail, mix64, parse_args, parse_positive, run, secs, segment_for,
};

/// Words of a value.
const VALUE_WORDS: usize = 4;
/// A stored value.
type Value = [u64; VALUE_WORDS];

/// Command line of `dht`.
#[derive(Debug, Parser)]
#[command(
    about = "Distributed hash table with one-sided inserts (CAS + put + publish) and lookups"
)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Keys each rank inserts.
    #[arg(long, default_value_t = 10_000, allow_negative_numbers = true, value_parser = parse_positive)]
    keys_per_rank: usize,
    /// Table slots on each rank (default: 2 x keys per rank, a load factor of 0.5).
    #[arg(long, allow_negative_numbers = true, value_parser = parse_positive)]
    slots_per_rank: Option<usize>,
    /// Lookups each rank makes (default: keys per rank); one in eight is of an absent key.
    #[arg(long, allow_negative_numbers = true, value_parser = parse_positive)]
    lookups: Option<usize>,
}

/// The table geometry, the same on every rank.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    ranks: usize,
    slots: usize,
}

impl Geometry {
    /// The key number `id` (0-based) of the whole job: distinct for distinct ids and never 0,
    /// because `mix64` is a bijection with `mix64(0) == 0`.
    fn key(id: u64) -> u64 {
        mix64(id + 1)
    }

    /// The home rank and first slot of `key`, from a hash independent of the key's own bits.
    fn home(&self, key: u64) -> (usize, usize) {
        let h = mix64(key ^ 0x5851_F42D_4C95_7F2D);
        let rank = (h % self.ranks as u64) as usize;
        let slot = ((h / self.ranks as u64) % self.slots as u64) as usize;
        (rank, slot)
    }
}

/// The value stored under `key`.
fn value_of(key: u64) -> Value {
    [key, mix64(key ^ 0xA5A5_A5A5), key.rotate_left(17), !key]
}

/// Why an index of the table is in range: `Dht::probes` gives only slots of the table.
const SLOT: &str = "a probe is a slot of the table";

/// Why an insert failed.
#[derive(Debug)]
struct Full {
    rank: usize,
}

/// The table: slot `s` of rank `r` is element `r * slots + s` of each array (block layouts,
/// so every rank holds its slots).
struct Dht {
    geometry: Geometry,
    keys: DistArray<u64>,
    versions: DistArray<u64>,
    values: DistArray<Value>,
}

impl Dht {
    /// The table's global slots of `key`, in probe order, with its home rank.
    fn probes(&self, key: u64) -> (usize, impl Iterator<Item = usize> + use<>) {
        let (rank, start) = self.geometry.home(key);
        let slots = self.geometry.slots;
        let slot = move |p| rank * slots + (start + p) % slots;
        (rank, (0..slots).map(slot))
    }

    /// Inserts (or overwrites) `key`; returns the number of slots probed.
    fn insert(&self, key: u64, value: &Value) -> Result<usize, Full> {
        let (rank, probes) = self.probes(key);
        for (probe, g) in probes.enumerate() {
            let seen = self.keys.compare_exchange(g, 0, key).expect(SLOT).wait();
            if seen == 0 || seen == key {
                // The put completes before the publication, so a reader that sees the new
                // version reads the whole value.
                self.values.put(g, *value).expect(SLOT).wait();
                self.versions.fetch_add(g, 1).expect(SLOT).wait();
                return Ok(probe + 1);
            }
        }
        Err(Full { rank })
    }

    /// The value under `key`, if present.
    fn lookup(&self, key: u64) -> Result<Option<Value>, String> {
        let (rank, probes) = self.probes(key);
        for g in probes {
            match self.keys.get(g).expect(SLOT).wait() {
                0 => return Ok(None),
                k if k != key => continue,
                _ => {}
            }
            // Claimed: wait for the publication, and retry if it changed under the read.
            let version = || self.versions.load(g).expect(SLOT).wait();
            loop {
                let before = version();
                if before == 0 {
                    pgas::progress();
                    continue;
                }
                let value = self.values.get(g).expect(SLOT).wait();
                if version() == before {
                    return Ok(Some(value));
                }
            }
        }
        Err(format!(
            "lookup of key {key:#x} probed all {} slots of rank {rank} without finding it or an \
             empty slot",
            self.geometry.slots
        ))
    }
}

/// What each rank reports back.
#[derive(serde::Serialize, serde::Deserialize)]
struct Report {
    insert_seconds: f64,
    lookup_seconds: f64,
    probes: u64,
    lookups: u64,
}

fn main() {
    const NAME: &str = "dht";
    let args: Args = parse_args();
    let ranks = args.common.ranks().unwrap_or_else(|e| fail(NAME, e));
    let keys_per_rank = args.keys_per_rank;
    let slots = args
        .slots_per_rank
        .unwrap_or_else(|| keys_per_rank.saturating_mul(2));
    let lookups = args.lookups.unwrap_or(keys_per_rank);
    let geometry = Geometry { ranks, slots };
    let total_keys = (ranks as u64)
        .checked_mul(keys_per_rank as u64)
        .unwrap_or_else(|| fail(NAME, "the total key count overflows 64 bits"));
    let table_bytes = (slots as u64).checked_mul((2 + VALUE_WORDS) as u64 * 8);
    pgas_examples::check_memory(
        &format!(
            "a table of {slots} slots per rank (--keys-per-rank {keys_per_rank}, --slots-per-rank)"
        ),
        ranks,
        table_bytes,
    )
    .unwrap_or_else(|e| fail(NAME, e));
    let segment = slots
        .checked_mul((2 + VALUE_WORDS) * 8)
        .ok_or_else(|| format!("{slots} slots per rank do not fit in a segment"))
        .and_then(segment_for)
        .unwrap_or_else(|e| fail(NAME, e));

    let Some(reports) = run(NAME, ranks, segment, RpcTable::new(), || {
        let (me, n) = (rank_me(), rank_n());
        let alloc_err = |e| format!("cannot allocate the table: {e}");
        let array = |len| DistArray::new(len, Layout::Block).map_err(alloc_err);
        let dht = Dht {
            geometry,
            keys: array(slots * n)?,
            versions: array(slots * n)?,
            values: DistArray::new(slots * n, Layout::Block).map_err(alloc_err)?,
        };
        // The global insert counter, on rank 0.
        let counter = array(1)?;
        let mut errors = Vec::new();

        barrier();
        let start = Instant::now();
        let mut probes = 0u64;
        let mut inserted = 0u64;
        for i in 0..keys_per_rank {
            let key = Geometry::key((me * keys_per_rank + i) as u64);
            match dht.insert(key, &value_of(key)) {
                Ok(p) => {
                    probes += p as u64;
                    inserted += 1;
                    counter.fetch_add(0, 1).expect("element 0").detach();
                }
                Err(Full { rank }) => {
                    errors.push(format!(
                        "table full: rank {rank}'s table has no free slot among its {slots} for \
                         key {key:#x}; this rank inserted {inserted} of its {keys_per_rank} keys \
                         (load factor {:.2}: raise --slots-per-rank)",
                        total_keys as f64 / (slots as f64 * n as f64)
                    ));
                    break;
                }
            }
        }
        barrier();
        let insert_seconds = secs(start.elapsed());

        // Stop every rank if any table filled up: the lookups would fail for a known reason.
        let failed = reduce_all(u64::from(!errors.is_empty()), ops::add).wait();
        if failed > 0 {
            return if errors.is_empty() {
                Ok(Report {
                    insert_seconds,
                    lookup_seconds: 0.0,
                    probes,
                    lookups: 0,
                })
            } else {
                Err(errors.join("; "))
            };
        }

        let count = counter.load(0).expect("element 0").wait();
        if count != total_keys {
            errors.push(format!(
                "the insert counter reads {count}, expected {total_keys}"
            ));
        }
        let keys_here = dht.keys.read_local();
        let versions_here = dht.versions.read_local();
        let used = keys_here.iter().filter(|&&k| k != 0).count() as u64;
        if let Some(s) = (0..slots).find(|&s| (keys_here[s] != 0) != (versions_here[s] != 0)) {
            errors.push(format!(
                "slot {s}: key word {:#x} but version {} (claimed and published must agree)",
                keys_here[s], versions_here[s]
            ));
        }
        let used = reduce_all(used, ops::add).wait();
        if used != total_keys {
            errors.push(format!(
                "{used} slots are occupied in all, expected {total_keys}"
            ));
        }

        let mut rng = SplitMix::new(0xD47 + me as u64);
        let start = Instant::now();
        for l in 0..lookups {
            let absent = l % 8 == 7;
            let id = if absent {
                total_keys + rng.below(total_keys)
            } else {
                rng.below(total_keys)
            };
            let key = Geometry::key(id);
            match dht.lookup(key) {
                Ok(Some(v)) if !absent && v == value_of(key) => {}
                Ok(None) if absent => {}
                Ok(found) => {
                    errors.push(format!(
                        "lookup of key {key:#x} (number {id}, {}) found {found:?}",
                        if absent { "never inserted" } else { "inserted" }
                    ));
                    break;
                }
                Err(e) => {
                    errors.push(e);
                    break;
                }
            }
        }
        let lookup_seconds = secs(start.elapsed());
        barrier();
        if errors.is_empty() {
            Ok(Report {
                insert_seconds,
                lookup_seconds,
                probes,
                lookups: lookups as u64,
            })
        } else {
            Err(errors.join("; "))
        }
    }) else {
        return;
    };
    let insert_seconds = reports.iter().map(|r| r.insert_seconds).fold(0.0, f64::max);
    let lookup_seconds = reports.iter().map(|r| r.lookup_seconds).fold(0.0, f64::max);
    let probes: u64 = reports.iter().map(|r| r.probes).sum();
    let total_lookups: u64 = reports.iter().map(|r| r.lookups).sum();
    println!(
        "dht: {ranks} ranks, {total_keys} keys in {} slots (load {:.2}), {:.2} probes/insert; \
         inserts {:.3} M/s, {total_lookups} lookups {:.3} M/s; counter and all lookups checked",
        slots * ranks,
        total_keys as f64 / (slots * ranks) as f64,
        probes as f64 / total_keys as f64,
        total_keys as f64 / insert_seconds / 1e6,
        total_lookups as f64 / lookup_seconds / 1e6,
    );
}
