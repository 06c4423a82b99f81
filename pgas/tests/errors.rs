//! Errors end the job with the failing rank and the cause named: null and out-of-segment
//! accesses, ranks that do not exist, misaligned atomics, blocking inside an rpc.
//!
//! Not on mpi: every test here makes a rank fail, which ends every process of an MPI job
//! (see `common`); the conduit suite checks that a failing rank is named there.

mod common;

use common::{MIB, config, try_launch};
use pgas::{
    AtomicDomain, Completions, GlobalPtr, LaunchError, Promise, RpcTable, barrier, new_array,
    rank_me, rank_n, rget, rget_slice, rpc, rput, rput_slice, rput_with,
};

/// Runs `fault` on the last rank after a barrier while the others wait in a second barrier,
/// and returns the launch error.
fn fails(n: usize, rpcs: RpcTable, fault: fn()) -> LaunchError {
    let r = try_launch(config(n, 4), rpcs, move || {
        barrier();
        if rank_me() == rank_n() - 1 {
            fault();
        }
        barrier();
    });
    match r {
        Ok(_) => panic!("the job succeeded"),
        Err(e) => e,
    }
}

fn assert_names(e: &LaunchError, rank: usize, cause: &str) {
    match e {
        LaunchError::RankPanicked { rank: r, message } => {
            assert_eq!(*r, rank, "{e}");
            assert!(message.contains(cause), "expected {cause:?} in: {message}");
        }
        other => panic!("expected RankPanicked, got {other:?}"),
    }
    assert!(e.to_string().contains(&format!("rank {rank}")), "{e}");
}

#[test]
fn null_and_out_of_segment_accesses_name_rank_and_cause() {
    if common::skip_on_mpi("each case makes a rank panic") {
        return;
    }
    for &n in &[1usize, 2, 4] {
        let e = fails(n, RpcTable::new(), || rput(1u64, GlobalPtr::null()).wait());
        assert_names(&e, n - 1, "rput through a null global pointer");
        let e = fails(n, RpcTable::new(), || {
            let _ = rget(GlobalPtr::<u32>::null()).wait();
        });
        assert_names(&e, n - 1, "rget through a null global pointer");

        let e = fails(n, RpcTable::new(), || {
            rput(7u64, GlobalPtr::from_raw(0, 4 * MIB - 4)).wait()
        });
        assert_names(&e, n - 1, "outside the segment of rank 0");
        let e = fails(n, RpcTable::new(), || {
            let p = new_array::<u8>(1024).unwrap();
            let _ = rget_slice(p, 8 * MIB).wait();
        });
        assert_names(&e, n - 1, "exceeds the segment size");
        let e = fails(n, RpcTable::new(), || {
            rput_slice(&[0u8; 16], GlobalPtr::from_raw(rank_n() + 2, MIB)).wait()
        });
        assert_names(&e, n - 1, "does not exist");
        let e = fails(n, RpcTable::new(), || {
            let ad = AtomicDomain::<u64>::new();
            let words = new_array::<u64>(2).unwrap();
            ad.fetch_add((words.cast::<u8>() + 4).cast(), 1).wait();
        });
        assert_names(&e, n - 1, "aligned");
        // A transfer may not count on a promise whose future is ready (UPC++'s rule); the
        // check survives the promise being borrowed rather than counted on the fast path.
        let e = fails(n, RpcTable::new(), || {
            let p = Promise::new();
            p.finalize().wait();
            let dst = new_array::<u64>(1).unwrap();
            let _ = rput_with(&[1u64], dst, Completions::new().operation_promise(&p));
        });
        assert_names(&e, n - 1, "counted on a promise that is already fulfilled");
    }
}

#[test]
fn rpc_errors_name_rank_and_cause() {
    if common::skip_on_mpi("each case makes a rank panic") {
        return;
    }
    for &n in &[1usize, 3] {
        let mut rpcs = RpcTable::new();
        let nothing = rpcs.register("nothing", |()| ());
        let e = {
            let r = try_launch(config(n, 4), rpcs, move || {
                if rank_me() == 0 {
                    rpc(rank_n() + 1, nothing, ()).wait();
                }
                barrier();
            });
            r.unwrap_err()
        };
        assert_names(&e, 0, &format!("the job has {n} ranks"));

        // Blocking inside an rpc (here: a barrier) is refused at the target.
        let mut rpcs = RpcTable::new();
        let blocks = rpcs.register("blocks", |()| barrier());
        let r = try_launch(config(n, 4), rpcs, move || {
            if rank_me() == 0 {
                rpc(n - 1, blocks, ()).wait();
            }
            barrier();
        });
        assert_names(&r.unwrap_err(), n - 1, "inside an active-message handler");
    }
}
