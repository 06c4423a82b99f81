//! The interception hook: exact operation counts, (EC, IWC) logs of every write that are
//! gapless per target, epochs advanced by barriers, suppressed puts, gets and rpcs served
//! from a log.

mod common;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{allgather, held_ranks, ranks, run};
use pgas::hook::{
    AtomicAction, GetAction, OpId, PutAction, Rma, RpcAction, RpcCall, SyncEvent,
};
use pgas::{
    AtomicDomain, Interceptor, RpcTable, barrier, broadcast, clear_hook, delete_, epoch, fence,
    new_array, rank_me, rget, rget_slice, rpc, rpc_ff, rput, rput_slice, set_hook, world,
};

use gasnet_bridge::{AtomicOp, AtomicResult, WriteAck};

/// Counts everything and logs (target, EC, IWC) of every counted write.
#[derive(Default)]
struct Recorder {
    puts: Cell<u64>,
    puts_done: Cell<u64>,
    gets: Cell<u64>,
    rpcs: Cell<u64>,
    rpc_acks: Cell<u64>,
    atomics: Cell<u64>,
    syncs: RefCell<Vec<(SyncEvent, u64)>>,
    /// (target, EC, IWC, kind: 0 put, 1 rpc, 2 atomic)
    writes: RefCell<Vec<(u64, u64, u64, u8)>>,
}

impl Interceptor for Recorder {
    fn before_put(&self, _: OpId, _: &Rma, _: &[u8]) -> PutAction {
        self.puts.set(self.puts.get() + 1);
        PutAction::Proceed
    }
    fn after_put(&self, _: OpId, rma: &Rma, ack: WriteAck) {
        self.puts_done.set(self.puts_done.get() + 1);
        self.writes
            .borrow_mut()
            .push((rma.rank as u64, ack.ec, ack.iwc, 0));
    }
    fn before_get(&self, _: OpId, _: &Rma, _: &mut [u8]) -> GetAction {
        self.gets.set(self.gets.get() + 1);
        GetAction::Proceed
    }
    fn before_rpc(&self, _: OpId, _: &RpcCall, _: &[u8]) -> RpcAction {
        self.rpcs.set(self.rpcs.get() + 1);
        RpcAction::Proceed
    }
    fn after_rpc(&self, _: OpId, call: &RpcCall, ack: WriteAck, _: &[u8]) {
        self.rpc_acks.set(self.rpc_acks.get() + 1);
        self.writes
            .borrow_mut()
            .push((call.rank as u64, ack.ec, ack.iwc, 1));
    }
    fn before_atomic(&self, _: OpId, _: usize, _: usize, _: AtomicOp) -> AtomicAction {
        self.atomics.set(self.atomics.get() + 1);
        AtomicAction::Proceed
    }
    fn after_atomic(&self, _: OpId, rank: usize, _: usize, _: AtomicOp, r: &AtomicResult) {
        if let Some(ack) = r.ack {
            self.writes
                .borrow_mut()
                .push((rank as u64, ack.ec, ack.iwc, 2));
        }
    }
    fn on_sync(&self, sync: SyncEvent, ec: u64) {
        self.syncs.borrow_mut().push((sync, ec));
    }
}

#[test]
fn counts_logs_and_epochs() {
    const PUTS: u64 = 5;
    for n in ranks() {
        // Calls that ran, per target rank (on mpi a process sees only its own rank's).
        let ran: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
        let mut rpcs = RpcTable::new();
        let bump = rpcs.register("bump", {
            let ran = ran.clone();
            move |x: u64| {
                ran[rank_me()].fetch_add(1, Ordering::SeqCst);
                x + 1
            }
        });
        run(n, 4, rpcs, move || {
            let me = rank_me();
            // Allocate before hooking (new_array writes locally, uncounted).
            let buf = new_array::<u64>(n * PUTS as usize + 1).unwrap();
            let bufs = allgather(buf);
            let rec = Rc::new(Recorder::default());
            set_hook(rec.clone());
            barrier();
            let e0 = epoch();
            barrier();
            assert_eq!(epoch(), e0 + 2, "a barrier is two synchronizations");
            {
                let s = rec.syncs.borrow();
                assert_eq!(s[s.len() - 2], (SyncEvent::BarrierEnter, e0 + 1));
                assert_eq!(s[s.len() - 1], (SyncEvent::BarrierExit, e0 + 2));
            }
            fence();
            assert_eq!(epoch(), e0 + 3);
            assert_eq!(rec.syncs.borrow().last(), Some(&(SyncEvent::Fence, e0 + 3)));
            let phase_ec = e0 + 3;

            // Every rank writes PUTS words to every rank, reads them, calls rpcs and atomics.
            for &b in &bufs {
                for k in 0..PUTS {
                    rput(me as u64 * 100 + k, b + me * PUTS as usize + k as usize).wait();
                }
            }
            rput_slice(&[1u64, 2], bufs[(me + 1) % n] + n * PUTS as usize - 1).wait();
            let _ = rget(bufs[(me + 1) % n]).wait();
            let _ = rget_slice(bufs[me], 3).wait();
            for t in 0..n {
                assert_eq!(rpc(t, bump, 1).wait(), 2);
                rpc_ff(t, bump, 0);
            }
            let ad = AtomicDomain::<u64>::new();
            let word = bufs[0] + n * PUTS as usize; // the last word of rank 0's buffer
            barrier(); // the rput_slice above touched it; atomics start after
            ad.fetch_add(word, 1).wait();
            ad.load(word).wait(); // writes nothing
            ad.compare_exchange(word, u64::MAX, 0).wait(); // fails: writes nothing
            let _ = broadcast(&world(), me, 0).wait();
            barrier();
            // Wait for the rpc_ff acknowledgements (they carry the targets' counters).
            while rec.rpc_acks.get() < 2 * n as u64 {
                pgas::progress();
            }

            let nn = n as u64;
            assert_eq!(rec.puts.get(), nn * PUTS + 1);
            assert_eq!(rec.puts_done.get(), nn * PUTS + 1);
            assert_eq!(rec.gets.get(), 2);
            assert_eq!(rec.rpcs.get(), 2 * nn);
            assert_eq!(rec.rpc_acks.get(), 2 * nn);
            assert_eq!(rec.atomics.get(), 3);
            // barriers: 3 after the fence (2 events each); broadcast: entry and completion.
            let after_fence: Vec<SyncEvent> = rec
                .syncs
                .borrow()
                .iter()
                .filter(|(_, ec)| *ec > phase_ec)
                .map(|(s, _)| *s)
                .collect();
            use SyncEvent::*;
            assert_eq!(
                after_fence,
                [
                    BarrierEnter,
                    BarrierExit,
                    Collective,
                    Collective,
                    BarrierEnter,
                    BarrierExit
                ]
            );
            assert_eq!(epoch(), phase_ec + 6);

            // Every write into a rank was logged by its initiator: all ranks' logs together
            // hold, per target, IWC values 1..=count with no gap and no repeat.
            let log = rec.writes.borrow().clone();
            clear_hook();
            for &(_, ec, _, kind) in &log {
                if kind == 0 {
                    // Puts land between my fence and the next barrier's entry. The fence is
                    // local, so a target may not have left the previous barrier yet (two
                    // behind) or may already have entered the next one (one ahead).
                    assert!(
                        ec + 2 >= phase_ec && ec <= phase_ec + 1,
                        "put ec {ec} vs {phase_ec}"
                    );
                } else {
                    // rpc_ffs run at the target whenever it polls, up to the last barrier.
                    assert!(
                        ec + 2 >= phase_ec && ec <= phase_ec + 6,
                        "ec {ec} vs {phase_ec}"
                    );
                }
            }
            let all = pgas::reduce_all(&world(), log, common::concat).wait();
            for t in 0..n as u64 {
                let mut iwcs: Vec<u64> = all.iter().filter(|w| w.0 == t).map(|w| w.2).collect();
                iwcs.sort_unstable();
                let expect_count = nn * PUTS + 1 + 2 * nn + if t == 0 { nn } else { 0 };
                assert_eq!(
                    iwcs,
                    (1..=expect_count).collect::<Vec<_>>(),
                    "IWC log of rank {t}"
                );
            }
            barrier();
            delete_(buf).unwrap();
        });
        // Every rank called every rank twice: 2 n calls ran on each, 2 n^2 in all.
        for r in held_ranks(n) {
            assert_eq!(
                ran[r].load(Ordering::SeqCst),
                2 * n as u64,
                "rank {r} of {n}"
            );
        }
    }
}

/// Suppresses puts to one target; serves gets and rpcs from a log.
struct Replayer {
    suppress_to: usize,
    log: HashMap<(usize, usize, usize), Vec<u8>>,
    suppressed: Cell<u64>,
    served: Cell<u64>,
}

impl Interceptor for Replayer {
    fn before_put(&self, _: OpId, rma: &Rma, _: &[u8]) -> PutAction {
        if rma.rank == self.suppress_to {
            self.suppressed.set(self.suppressed.get() + 1);
            PutAction::Suppress
        } else {
            PutAction::Proceed
        }
    }
    fn after_put(&self, _: OpId, rma: &Rma, _: WriteAck) {
        assert_ne!(rma.rank, self.suppress_to, "a suppressed put completed");
    }
    fn before_get(&self, _: OpId, rma: &Rma, dst: &mut [u8]) -> GetAction {
        match self.log.get(&(rma.rank, rma.offset, rma.len)) {
            Some(bytes) => {
                dst.copy_from_slice(bytes);
                self.served.set(self.served.get() + 1);
                GetAction::Served
            }
            None => GetAction::Proceed,
        }
    }
    fn before_rpc(&self, _: OpId, call: &RpcCall, _: &[u8]) -> RpcAction {
        if call.name == "logged" {
            RpcAction::Served(postcard::to_allocvec(&777u64).unwrap())
        } else {
            RpcAction::Proceed
        }
    }
}

#[test]
fn suppressed_puts_and_gets_and_rpcs_served_from_a_log() {
    for n in ranks() {
        let ran = Arc::new(AtomicU64::new(0));
        let mut rpcs = RpcTable::new();
        let logged = rpcs.register("logged", {
            let ran = ran.clone();
            move |x: u64| {
                ran.fetch_add(1, Ordering::SeqCst);
                x
            }
        });
        run(n, 4, rpcs, move || {
            let me = rank_me();
            let buf = new_array::<u64>(4).unwrap();
            rput_slice(&[10 + me as u64, 20, 30, 40], buf).wait();
            let bufs = allgather(buf);
            barrier();
            let right = (me + 1) % n;
            let logged_word = 0xFEED_0000 + me as u64;
            let hook = Rc::new(Replayer {
                suppress_to: right,
                log: HashMap::from([(
                    (bufs[right].rank(), (bufs[right] + 2).offset(), 8),
                    logged_word.to_ne_bytes().to_vec(),
                )]),
                suppressed: Cell::new(0),
                served: Cell::new(0),
            });
            set_hook(hook.clone());
            // Suppressed: nothing reaches the right neighbour.
            rput(999u64, bufs[right]).wait();
            rput_slice(&[1u64, 2, 3], bufs[right] + 1).wait();
            // Served from the log: the real word (30) is not what the get returns.
            assert_eq!(rget(bufs[right] + 2).wait(), logged_word);
            // Not in the log: read from memory.
            assert_eq!(rget(bufs[right] + 3).wait(), 40);
            // An rpc answered from the log never runs.
            assert_eq!(rpc(right, logged, 5).wait(), 777);
            rpc_ff(right, logged, 5);
            assert_eq!(hook.suppressed.get(), 2);
            assert_eq!(hook.served.get(), 1);
            clear_hook();
            barrier();
            // Target data unchanged by the suppressed puts.
            assert_eq!(
                rget_slice(buf, 4).wait(),
                vec![10 + me as u64, 20, 30, 40],
                "rank {me}"
            );
            // Without the hook the get reads memory.
            assert_eq!(rget(bufs[right] + 2).wait(), 30);
            barrier();
            delete_(buf).unwrap();
        });
        assert_eq!(ran.load(Ordering::SeqCst), 0, "served rpcs never ran");
    }
}
