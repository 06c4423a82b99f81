//! A program's set-up computed once per job, not again after a lost process (`REAL_LOSS.md`,
//! "The set-up"): the value is kept across the rerun of the body on every rank and at its
//! buddy, so the rerun takes it back (a replacement from the buddy's copy) instead of
//! computing it with every rank again.

use pgas::runtime_hooks::internal;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::buddy::{Bytes, buddy_map};
use crate::runtime::eprint_line;
use crate::setup_values::{self, SetupRpcs};

/// The value of the set-up step `name`: `compute()` in a job's first run of the body; after a
/// lost process was replaced (spares, `REAL_LOSS.md`), the value this rank computed then, or
/// for a replacement the value the lost rank computed, from its buddy's copy, without running
/// `compute` again. Every rank of the job calls it at the same point of its set-up, as it
/// calls a collective: `compute` may communicate, and either every rank runs it or none.
///
/// What `compute` does besides returning the value (what it writes into the program's state)
/// is the program's to redo from the value: the function is for a deterministic set-up whose
/// result is all the program keeps of it (an operator, a decomposition). Without spares it
/// only runs `compute`.
///
/// # Panics
/// Outside [`crate::launch`], or when a kept value does not decode as a `T` (two calls of one
/// name with different types).
pub fn setup_once<T, F>(name: &str, compute: F) -> T
where
    T: Serialize + DeserializeOwned,
    F: FnOnce() -> T,
{
    let (rank, rpcs, domain) =
        crate::runtime::with(|rt| (rt.rank, rt.setup_rpcs, rt.config.buddy_domain));
    if !setup_values::enabled() {
        return compute();
    }
    if let Some(lost) = pgas::runtime_hooks::recovered().map(|r| r.lost) {
        let taken = kept(name, rank, &lost, rpcs);
        if rank == 0 {
            eprint_line(&if taken.is_some() {
                format!(
                    "cd: set-up {name:?} taken back from memory on every rank, not computed again"
                )
            } else {
                format!(
                    "cd: set-up {name:?} computed again on every rank: rank(s) {lost:?} lost \
                     before every rank kept its value"
                )
            });
        }
        if let Some((bytes, from_copy)) = taken {
            let value = decode(name, &bytes);
            if from_copy {
                keep(name, rank, bytes, rpcs, domain);
            }
            return value;
        }
    }
    let value = compute();
    let bytes =
        Bytes(postcard::to_allocvec(&value).unwrap_or_else(|e| {
            panic!("cd::setup_once({name:?}): the value does not encode: {e}")
        }));
    keep(name, rank, bytes, rpcs, domain);
    value
}

/// After a recovery that replaced the ranks `lost` (collective): this rank's kept value `name`
/// when every rank can have its own (a survivor from its store; a replacement, or a rank that
/// holds none, from a rank holding its copy), and whether it came from a copy; else `None` on
/// every rank.
fn kept(name: &str, rank: usize, lost: &[usize], rpcs: SetupRpcs) -> Option<(Bytes, bool)> {
    let has_own = !lost.contains(&rank) && setup_values::own(name).is_some();
    // Every owner this rank holds a copy for: a rank that is not lost may need one too (the
    // replacement of an earlier loss whose rerun a second loss cut short, before it kept one).
    let holds: Vec<usize> = (0..pgas::rank_n())
        .filter(|&o| o != rank && setup_values::holds(o, name))
        .collect();
    let offers = internal(|| pgas::allgather((has_own, holds)).wait());
    let holder = |owner: usize| offers.iter().position(|(_, h)| h.contains(&owner));
    let from_copy = |r: usize| lost.contains(&r) || !offers[r].0;
    let everyone = (0..offers.len()).all(|r| !from_copy(r) || holder(r).is_some());
    if !everyone {
        return None;
    }
    let bytes = if from_copy(rank) {
        let from = holder(rank).expect("every rank without its own value has a holder");
        rpcs.fetch_from(from, rank, name)
            .expect("offered by the holder, so kept until this fetch")
    } else {
        setup_values::own(name).expect("offered, so kept")
    };
    // The holders serve the fetches while they wait here.
    internal(pgas::barrier);
    Some((bytes, from_copy(rank)))
}

/// Keeps `bytes` as this rank's value `name`, here and at its buddy (waiting for its reply).
fn keep(name: &str, rank: usize, bytes: Bytes, rpcs: SetupRpcs, domain: crate::BuddyDomain) {
    setup_values::keep_own(name, bytes.clone());
    let nodes: Vec<usize> = (0..pgas::rank_n()).map(pgas::node_of).collect();
    let buddy = buddy_map(&nodes, domain)[rank];
    crate::injector::kill_at("setup", rank, 0);
    if buddy != rank {
        rpcs.store_at(buddy, rank, name, bytes);
    }
}

/// The value kept as `bytes`.
fn decode<T: DeserializeOwned>(name: &str, bytes: &Bytes) -> T {
    postcard::from_bytes(&bytes.0).unwrap_or_else(|e| {
        panic!(
            "cd::setup_once({name:?}): the kept value does not decode as the type asked for \
             ({e}): one name per set-up value"
        )
    })
}
