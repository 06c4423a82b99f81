//! The bytes pgas keeps at the start of every segment for its runtime (finalize's counting
//! waves, the fast reduction's words) are out of the program's reach: a global pointer below
//! the first allocation, however it was made, is refused by every access, and the refusal
//! names the reserved range, which ends where the first allocation starts.
//!
//! The accesses are refused before anything is sent, so the panics are caught inside the rank
//! and no rank fails: this runs on mpi too.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::{by_rank, ranks, run};
use pgas::runtime_hooks::rput_uncounted;
use pgas::{
    AtomicDomain, Completions, GlobalPtr, PgasError, RpcTable, barrier, new_array, rank_me, rget,
    rget_into, rget_irregular, rget_regular, rget_slice, rget_strided, rget_with, rput,
    rput_irregular, rput_regular, rput_slice, rput_strided, rput_with, shared_bytes_in_use,
};

/// The message of the panic `f` ends with, or None if it returned.
fn panic_of(f: impl FnOnce()) -> Option<String> {
    let payload = catch_unwind(AssertUnwindSafe(f)).err()?;
    Some(match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast_ref::<&str>().unwrap_or(&"?").to_string(),
    })
}

/// One access of the API, named.
type Access = (&'static str, Box<dyn FnOnce()>);

/// Every access of the API, each through `p` (the atomics through `p` as an `f64` and `u64`).
fn accesses(p: GlobalPtr<u64>) -> Vec<Access> {
    let ints = AtomicDomain::<u64>::new();
    let floats = AtomicDomain::<f64>::new();
    vec![
        ("rput", Box::new(move || rput(7, p).wait())),
        (
            "rput_slice",
            Box::new(move || rput_slice(&[7, 7], p).wait()),
        ),
        (
            "rput_with",
            Box::new(move || {
                let _ = rput_with(&[7], p, Completions::new());
            }),
        ),
        (
            "rput_uncounted",
            Box::new(move || rput_uncounted(&[7u64], p)),
        ),
        (
            "rput_strided",
            Box::new(move || rput_strided(&[7u64, 7], [1], p, [1], [2]).wait()),
        ),
        (
            "rput_irregular",
            Box::new(move || rput_irregular(&[&[7u64][..]], &[(p, 1)]).wait()),
        ),
        (
            "rput_regular",
            Box::new(move || rput_regular(&[&[7u64][..]], &[p], 1).wait()),
        ),
        (
            "rget",
            Box::new(move || {
                rget(p).wait();
            }),
        ),
        (
            "rget_slice",
            Box::new(move || {
                rget_slice(p, 2).wait();
            }),
        ),
        ("rget_into", Box::new(move || rget_into(p, &mut [0u64; 2]))),
        (
            "rget_with",
            Box::new(move || {
                let _ = rget_with(p, &mut [0u64], Completions::new());
            }),
        ),
        (
            "rget_strided",
            Box::new(move || rget_strided(p, [1], &mut [0u64; 2], [1], [2]).wait()),
        ),
        (
            "rget_irregular",
            Box::new(move || rget_irregular(&[(p, 1)], &mut [&mut [0u64][..]]).wait()),
        ),
        (
            "rget_regular",
            Box::new(move || rget_regular(&[p], 1, &mut [&mut [0u64][..]]).wait()),
        ),
        (
            "atomic fetch_add",
            Box::new(move || {
                ints.fetch_add(p, 1).wait();
            }),
        ),
        (
            "atomic load",
            Box::new(move || {
                ints.load(p).wait();
            }),
        ),
        ("atomic store", Box::new(move || ints.store(p, 1).wait())),
        (
            "atomic compare_exchange",
            Box::new(move || {
                ints.compare_exchange(p, 0, 1).wait();
            }),
        ),
        (
            "atomic f64 add",
            Box::new(move || floats.add(p.cast(), 1.0).wait()),
        ),
    ]
}

/// Every way the public API makes a global pointer, each aimed at a reserved word of `rank`
/// (`first` is the rank's first allocation, where the program's memory starts).
fn reserved_pointers(rank: usize, first: GlobalPtr<u64>) -> Vec<(&'static str, GlobalPtr<u64>)> {
    let base = first.offset();
    let at_first = GlobalPtr::<u64>::from_raw(rank, base);
    let serialized = postcard::to_allocvec(&(8u64, rank as u32, 0u32)).unwrap();
    vec![
        ("from_raw at offset 0", GlobalPtr::from_raw(rank, 0)),
        ("from_raw just below", GlobalPtr::from_raw(rank, base - 8)),
        ("subtraction", at_first - 1),
        (
            "cast after byte arithmetic",
            (at_first.cast::<u8>() - 64).cast(),
        ),
        ("Zeroable::zeroed (rank 0)", bytemuck::Zeroable::zeroed()),
        (
            "bytemuck::cast of raw words",
            bytemuck::cast([16u64, u64::from(rank as u32)]),
        ),
        (
            "deserialized",
            postcard::from_bytes(&serialized).expect("a pointer's encoding"),
        ),
    ]
}

#[test]
fn the_runtimes_bytes_are_refused_through_every_pointer_and_access() {
    for n in ranks() {
        let out = run(n, 4, RpcTable::new(), move || {
            assert_eq!(shared_bytes_in_use(), 0, "nothing allocated yet");
            let first = new_array::<u64>(2).unwrap();
            let reserved = format!("bytes 0..{}", first.offset());
            let me = rank_me();
            barrier();
            // What was accepted or refused for another cause: empty when all is well.
            let mut wrong = Vec::new();
            for rank in [me, (me + 1) % n] {
                for (how, p) in reserved_pointers(rank, first) {
                    assert!(p.offset() < first.offset(), "{how}: {p:?}");
                    for (op, access) in accesses(p) {
                        match panic_of(access) {
                            Some(m) if m.contains(&reserved) => {}
                            other => {
                                wrong.push(format!("{op} via {how} to rank {rank}: {other:?}"))
                            }
                        }
                    }
                }
            }
            // Through the pointer to co-located memory, as errors.
            let own = GlobalPtr::<u64>::from_raw(me, 8);
            let locals = [
                ("local", own.local().map(drop)),
                ("local_slice_ptr", own.local_slice_ptr(2).map(drop)),
                ("read_local", own.read_local().map(drop)),
                ("write_local", own.write_local(7)),
                ("read_local_slice", own.read_local_slice(&mut [0; 2])),
                ("write_local_slice", own.write_local_slice(&[7; 2])),
            ];
            for (op, result) in locals {
                match result {
                    Err(e @ PgasError::Reserved { .. }) if e.to_string().contains(&reserved) => {}
                    other => wrong.push(format!("{op}: {other:?}")),
                }
            }
            // A range that starts below the first allocation and ends inside it.
            if panic_of(|| rput_slice(&[7u64, 7], first - 1).wait()).is_none() {
                wrong.push("rput_slice across the boundary".to_string());
            }
            // The first allocation itself is the program's.
            barrier();
            rput(5, first).wait();
            assert_eq!(rget(first).wait(), 5);
            barrier();
            wrong
        });
        for (rank, wrong) in by_rank(n, &out) {
            assert!(
                wrong.is_empty(),
                "{n} ranks, rank {rank}: {} accesses not refused as reserved:\n{}",
                wrong.len(),
                wrong.join("\n")
            );
        }
    }
}
