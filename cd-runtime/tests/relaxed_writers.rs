//! Whom a relaxed recovery asks for its incoming writes: the ranks marked as writers into the
//! failed rank (`relaxed/writers.rs`), and every other member of the LCSA's team only when the
//! marked writers leave a gap in the IWC sequence.
//!
//! Also under mpirun (`cd-runtime/tests/mpirun-relaxed.sh`), each process checking its ranks.

mod common;

use cd_runtime as cd;
use common::{config, job};
use pgas::runtime_hooks::internal;
use pgas::{GlobalPtr, barrier, rank_me, rput};

fn gather_ptrs<T: 'static>(p: GlobalPtr<T>) -> Vec<GlobalPtr<T>> {
    internal(|| pgas::allgather(p).wait())
}

fn soft_error_on(rank: usize) -> cd::CdConfig {
    config(&format!(
        "[cd.c]\ncheck_classes = false\ninject = {{ at = [{{ rank = {rank}, iteration = 0, kind = \"soft\" }}] }}\n"
    ))
}

/// Waits, making progress, until `slot` of this rank holds `value`.
fn await_value(slot: GlobalPtr<u64>, value: u64) {
    while slot.read_local().unwrap() != value {
        pgas::progress();
    }
}

/// Six ranks; rank 3 receives writes from ranks 1 and 5 only, the others write elsewhere.
/// Rank 3 fails: its recovery asks exactly ranks 1 and 5 and replays both writes.
#[test]
fn a_recovery_asks_only_the_ranks_that_wrote_into_it() {
    const N: usize = 6;
    // Writer -> target of its one put.
    const TARGET: [usize; N] = [2, 3, 4, 0, 1, 3];
    let out = cd::launch(&job(N), soft_error_on(3), pgas::RpcTable::new(), || {
        let me = rank_me();
        let buf = pgas::new_array::<u64>(N).unwrap();
        let bufs = gather_ptrs(buf);
        internal(barrier);
        cd::relaxed("c", |c| {
            if !c.is_reexecution() {
                // Scaffolding, unseen by the hook: every rank has begun before any write.
                internal(barrier);
            }
            rput(100 + me as u64, bufs[TARGET[me]] + me).wait();
            for (w, &t) in TARGET.iter().enumerate() {
                if t == me {
                    await_value(buf + w, 100 + w as u64);
                }
            }
            Ok(())
        })?;
        let mine: Vec<u64> = (0..N).map(|i| (buf + i).read_local().unwrap()).collect();
        let traces = cd::relaxed::recoveries();
        barrier();
        Ok((mine, traces))
    })
    .unwrap();
    // Under mpirun each process checks the ranks it ran; the report is the job's everywhere.
    if let Some((mine, traces)) = out.results.get(3) {
        assert_eq!(mine[1], 101);
        assert_eq!(mine[5], 105);
        assert_eq!(traces.len(), 1, "rank 3 recovered once");
        assert_eq!(
            traces[0].asked,
            [1, 5],
            "only the writers into rank 3 were asked"
        );
        let incoming: Vec<(u64, usize)> = traces[0]
            .events
            .iter()
            .filter_map(|e| match e {
                cd::relaxed::ReplayEvent::Incoming { from, iwc, .. } => Some((*iwc, *from)),
                _ => None,
            })
            .collect();
        assert!(incoming.is_sorted(), "replayed in IWC order: {incoming:?}");
        let mut from: Vec<usize> = incoming.iter().map(|&(_, f)| f).collect();
        from.sort();
        assert_eq!(from, [1, 5], "both writes replayed once");
    }
    for (r, (_, traces)) in out.results.with_ranks().filter(|&(r, _)| r != 3) {
        assert!(traces.is_empty(), "rank {r} never re-executed");
    }
    let s = out.report.cd("c").unwrap();
    assert_eq!(s.failures.len(), 1);
    assert_eq!(s.failures[0].ranks, [3], "rank 3 alone re-executed");
}

thread_local! {
    /// Rank 2 ran the forwarding rpc (ranks are threads on smp).
    static FORWARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A write made inside an rpc handler leaves no mark (a handler may not wait for the mark's
/// put): rank 1's recovery finds a gap after asking its marked writer (rank 3), asks ranks 0
/// and 2 too, and replays all the writes.
#[test]
fn a_write_the_marks_miss_is_found_by_asking_every_member() {
    let mut rpcs = pgas::RpcTable::new();
    let forward = rpcs.register("forward", |(at, value): (GlobalPtr<u64>, u64)| {
        // Restricted context: start the put, do not wait (it completes by progress).
        drop(rput(value, at));
        FORWARDED.with(|f| f.set(true));
    });
    let out = cd::launch(&job(4), soft_error_on(1), rpcs, move || {
        let me = rank_me();
        let buf = pgas::new_array::<u64>(2).unwrap();
        let bufs = gather_ptrs(buf);
        internal(barrier);
        cd::relaxed("c", |c| {
            if !c.is_reexecution() {
                internal(barrier);
            }
            match me {
                // Rank 2 writes 7 into rank 1 from inside the handler of rank 0's rpc.
                0 => pgas::rpc(2, forward, (bufs[1], 7u64)).wait(),
                // Serves the rpc inside its CD, so that the put is in this CD's log.
                2 => {
                    while !FORWARDED.with(|f| f.get()) {
                        pgas::progress();
                    }
                }
                3 => rput(9u64, bufs[1] + 1).wait(),
                1 => {
                    await_value(buf, 7);
                    await_value(buf + 1, 9);
                }
                _ => {}
            }
            Ok(())
        })?;
        barrier();
        let mine = [buf.read_local().unwrap(), (buf + 1).read_local().unwrap()];
        let traces = cd::relaxed::recoveries();
        barrier();
        Ok((mine, traces))
    })
    .unwrap();
    if let Some((mine, traces)) = out.results.get(1) {
        assert_eq!(*mine, [7, 9]);
        assert_eq!(traces.len(), 1);
        assert_eq!(
            traces[0].asked,
            [3, 0, 2],
            "the marked writer first, then every other member"
        );
    }
    let s = out.report.cd("c").unwrap();
    assert_eq!(s.failures[0].ranks, [1], "rank 1 alone re-executed");
}
