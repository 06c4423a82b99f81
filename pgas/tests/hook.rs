//! The interception hook: exact operation counts, (EC, IWC) logs of every write that are
//! gapless per target, epochs advanced by barriers, suppressed puts, gets and rpcs served
//! from a log.

mod common;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

// Every test here checks acks or IWCs, so its jobs count incoming writes.
use common::{allgather, held_ranks, ranks, run_counting as run};
use pgas::runtime_hooks as resilience;
use pgas::runtime_hooks::{
    AllocAction, AtomicAction, Collective, CollectiveAction, CollectiveKind, Fetch, FetchAction,
    FreeAction, GetAction, Interceptor, OpId, PutAction, ReplyAction, Rma, RpcAction, RpcCall,
    RpcReply, SyncEvent, clear_hook, set_hook,
};
use pgas::{
    AtomicDomain, Completions, DistObject, GlobalPtr, RpcTable, barrier, broadcast, broadcast_on,
    delete_, epoch, fence, new_array, rank_me, rget, rget_into, rget_irregular, rget_regular,
    rget_slice, rget_strided, rget_with, rpc, rpc_ff, rput, rput_irregular, rput_regular,
    rput_slice, rput_strided, rput_with, world,
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
            let _ = broadcast(me, 0).wait();
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
            let all = pgas::reduce_all(log, common::concat).wait();
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

// ---- every public operation, by kind, rank and bytes --------------------------------------

/// One hook call, as the recording hook below saw it.
#[derive(Debug, Clone, PartialEq)]
enum Ev {
    Put(OpId, Rma, Vec<u8>),
    PutAck(OpId, Rma),
    Get(OpId, Rma),
    GetDone(OpId, Vec<u8>),
    Rpc(OpId, RpcCall, Vec<u8>),
    RpcAck(OpId, RpcCall, Vec<u8>),
    Reply(RpcReply, Vec<u8>),
    Atomic(OpId, usize, usize, AtomicOp),
    AtomicDone(OpId, bool),
    Fetch(OpId, Fetch),
    FetchDone(OpId, Vec<u8>),
    Coll(OpId, Collective),
    CollDone(OpId, Collective, Vec<u8>),
    Alloc(usize, usize),
    Free(usize, usize),
    Sync(SyncEvent),
}

/// Records every call in order.
#[derive(Default)]
struct Tape(RefCell<Vec<Ev>>);

impl Tape {
    fn take(&self) -> Vec<Ev> {
        std::mem::take(&mut self.0.borrow_mut())
    }
    fn push(&self, e: Ev) {
        self.0.borrow_mut().push(e);
    }
}

impl Interceptor for Tape {
    fn before_put(&self, id: OpId, rma: &Rma, bytes: &[u8]) -> PutAction {
        self.push(Ev::Put(id, *rma, bytes.to_vec()));
        PutAction::Proceed
    }
    fn after_put(&self, id: OpId, rma: &Rma, _: WriteAck) {
        self.push(Ev::PutAck(id, *rma));
    }
    fn before_get(&self, id: OpId, rma: &Rma, _: &mut [u8]) -> GetAction {
        self.push(Ev::Get(id, *rma));
        GetAction::Proceed
    }
    fn after_get(&self, id: OpId, _: &Rma, data: &[u8]) {
        self.push(Ev::GetDone(id, data.to_vec()));
    }
    fn before_rpc(&self, id: OpId, call: &RpcCall, args: &[u8]) -> RpcAction {
        self.push(Ev::Rpc(id, *call, args.to_vec()));
        RpcAction::Proceed
    }
    fn after_rpc(&self, id: OpId, call: &RpcCall, _: WriteAck, reply: &[u8]) {
        self.push(Ev::RpcAck(id, *call, reply.to_vec()));
    }
    fn before_reply(&self, reply: &RpcReply, bytes: &[u8]) -> ReplyAction {
        self.push(Ev::Reply(*reply, bytes.to_vec()));
        ReplyAction::Proceed
    }
    fn before_atomic(&self, id: OpId, rank: usize, offset: usize, op: AtomicOp) -> AtomicAction {
        self.push(Ev::Atomic(id, rank, offset, op));
        AtomicAction::Proceed
    }
    fn after_atomic(&self, id: OpId, _: usize, _: usize, _: AtomicOp, r: &AtomicResult) {
        self.push(Ev::AtomicDone(id, r.ack.is_some()));
    }
    fn before_fetch(&self, id: OpId, fetch: &Fetch) -> FetchAction {
        self.push(Ev::Fetch(id, *fetch));
        FetchAction::Proceed
    }
    fn after_fetch(&self, id: OpId, _: &Fetch, bytes: &[u8]) {
        self.push(Ev::FetchDone(id, bytes.to_vec()));
    }
    fn before_collective(&self, id: OpId, c: &Collective) -> CollectiveAction {
        self.push(Ev::Coll(id, *c));
        CollectiveAction::Proceed
    }
    fn after_collective(&self, id: OpId, c: &Collective, result: &[u8]) {
        self.push(Ev::CollDone(id, *c, result.to_vec()));
    }
    fn before_alloc(&self, _: usize, _: usize) -> AllocAction {
        AllocAction::Proceed
    }
    fn after_alloc(&self, offset: usize, size: usize) {
        self.push(Ev::Alloc(offset, size));
    }
    fn before_free(&self, offset: usize, size: usize) -> FreeAction {
        self.push(Ev::Free(offset, size));
        FreeAction::Proceed
    }
    fn on_sync(&self, sync: SyncEvent, _: u64) {
        self.push(Ev::Sync(sync));
    }
}

fn rma(p: GlobalPtr<u64>, words: usize) -> Rma {
    Rma {
        rank: p.rank(),
        offset: p.offset(),
        len: words * 8,
    }
}

fn words(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

fn enc<T: serde::Serialize>(v: &T) -> Vec<u8> {
    postcard::to_allocvec(v).unwrap()
}

/// The before/after pair of one operation: same id, the after right behind.
fn pair(tape: &[Ev]) -> OpId {
    let id = |e: &Ev| match e {
        Ev::Put(i, ..)
        | Ev::PutAck(i, ..)
        | Ev::Get(i, ..)
        | Ev::GetDone(i, ..)
        | Ev::Rpc(i, ..)
        | Ev::RpcAck(i, ..)
        | Ev::Atomic(i, ..)
        | Ev::AtomicDone(i, ..)
        | Ev::Fetch(i, ..)
        | Ev::FetchDone(i, ..)
        | Ev::Coll(i, ..)
        | Ev::CollDone(i, ..) => Some(*i),
        _ => None,
    };
    let ids: Vec<OpId> = tape.iter().filter_map(id).collect();
    assert_eq!(ids.len(), 2, "{tape:?}");
    assert_eq!(ids[0], ids[1], "one id for start and completion: {tape:?}");
    ids[0]
}

/// A world collective's entry and completion: the EC steps around the hook's calls.
fn world_collective(tape: &[Ev], kind: CollectiveKind, result: Vec<u8>) {
    let (enter, exit) = if kind == CollectiveKind::Barrier {
        (SyncEvent::BarrierEnter, SyncEvent::BarrierExit)
    } else {
        (SyncEvent::Collective, SyncEvent::Collective)
    };
    let c = Collective {
        kind,
        team: world().id(),
        team_rank: rank_me(),
        team_size: pgas::rank_n(),
    };
    let id = pair(tape);
    assert_eq!(
        tape,
        [
            Ev::Sync(enter),
            Ev::Coll(id, c),
            Ev::CollDone(id, c, result),
            Ev::Sync(exit)
        ],
        "{kind:?}"
    );
}

#[test]
fn every_public_operation_shows_up_with_kind_rank_and_bytes() {
    for n in ranks() {
        let mut rpcs = RpcTable::new();
        let echo = rpcs.register("echo", |x: u64| x * 3);
        run(n, 4, rpcs, move || {
            let me = rank_me();
            let right = (me + 1) % n;
            let left = (me + n - 1) % n;
            let buf = new_array::<u64>(24).unwrap();
            let bufs = allgather(buf);
            let dist = DistObject::new(vec![me as u64, 7]);
            barrier();
            let tape = Rc::new(Tape::default());
            set_hook(tape.clone());
            let dst = bufs[right];

            // rput / rget, scalar and bulk, with and without completions.
            rput(11u64 + me as u64, dst).wait();
            let t = tape.take();
            let id = pair(&t);
            let r = rma(dst, 1);
            assert_eq!(
                t,
                [Ev::Put(id, r, words(&[11 + me as u64])), Ev::PutAck(id, r)]
            );
            let _ = rget(dst).wait();
            let t = tape.take();
            let id = pair(&t);
            assert_eq!(
                t,
                [
                    Ev::Get(id, rma(dst, 1)),
                    Ev::GetDone(id, words(&[11 + me as u64]))
                ]
            );
            rput_slice(&[1u64, 2, 3], dst + 1).wait();
            let t = tape.take();
            let id = pair(&t);
            assert_eq!(t[0], Ev::Put(id, rma(dst + 1, 3), words(&[1, 2, 3])));
            let got = rget_slice(dst + 1, 3).wait();
            assert_eq!(got, [1, 2, 3]);
            let t = tape.take();
            let id = pair(&t);
            assert_eq!(t[1], Ev::GetDone(id, words(&[1, 2, 3])));
            rput_with(&[4u64], dst + 4, Completions::new().operation_future())
                .operation
                .unwrap()
                .wait();
            assert_eq!(
                tape.take()[0],
                Ev::Put(OpId(id.0 + 1), rma(dst + 4, 1), words(&[4]))
            );
            let mut one = [0u64];
            rget_with(dst + 4, &mut one, Completions::new());
            assert_eq!(tape.take()[1], Ev::GetDone(OpId(id.0 + 2), words(&[4])));
            rget_into(dst + 4, &mut one);
            assert_eq!(tape.take().len(), 2);

            // Strided: a 2 x 3 block into rows of 4 words: three contiguous runs, each seen.
            let src = [10u64, 11, 12, 13, 14, 15];
            rput_strided(&src, [1, 2], dst + 8, [1, 4], [2, 3]).wait();
            let t = tape.take();
            let puts: Vec<(Rma, Vec<u8>)> = t
                .iter()
                .filter_map(|e| match e {
                    Ev::Put(_, r, b) => Some((*r, b.clone())),
                    _ => None,
                })
                .collect();
            assert_eq!(
                puts,
                [
                    (rma(dst + 8, 2), words(&[10, 11])),
                    (rma(dst + 12, 2), words(&[12, 13])),
                    (rma(dst + 16, 2), words(&[14, 15])),
                ]
            );
            assert_eq!(t.len(), 6, "three puts, three acks");
            let mut back = [0u64; 6];
            rget_strided(dst + 8, [1, 4], &mut back, [1, 2], [2, 3]).wait();
            assert_eq!(back, src);
            let t = tape.take();
            let gets: Vec<Vec<u8>> = t
                .iter()
                .filter_map(|e| match e {
                    Ev::GetDone(_, b) => Some(b.clone()),
                    _ => None,
                })
                .collect();
            assert_eq!(gets, [words(&[10, 11]), words(&[12, 13]), words(&[14, 15])]);

            // Irregular and regular: one message each, but every destination (put) or source
            // (get) piece is seen as its own operation, with its own bytes and ack.
            let pieces = [(dst + 18, 1), (dst + 20, 2)];
            rput_irregular(&[&[20u64, 21][..], &[22]], &pieces).wait();
            let t = tape.take();
            let Ev::Put(id, ..) = t[0] else {
                panic!("{t:?}")
            };
            let next = OpId(id.0 + 1);
            assert_eq!(
                t,
                [
                    Ev::Put(id, rma(dst + 18, 1), words(&[20])),
                    Ev::Put(next, rma(dst + 20, 2), words(&[21, 22])),
                    Ev::PutAck(id, rma(dst + 18, 1)),
                    Ev::PutAck(next, rma(dst + 20, 2)),
                ]
            );
            let mut three = [0u64; 3];
            rget_irregular(&pieces, &mut [&mut three[..]]).wait();
            assert_eq!(three, [20, 21, 22]);
            let t = tape.take();
            let Ev::Get(id, ..) = t[0] else {
                panic!("{t:?}")
            };
            let next = OpId(id.0 + 1);
            assert_eq!(
                t,
                [
                    Ev::Get(id, rma(dst + 18, 1)),
                    Ev::Get(next, rma(dst + 20, 2)),
                    Ev::GetDone(id, words(&[20])),
                    Ev::GetDone(next, words(&[21, 22])),
                ]
            );
            rput_regular(&[&[30u64][..], &[31]], &[dst + 22, dst + 23], 1).wait();
            let t = tape.take();
            let puts: Vec<Ev> = t
                .iter()
                .filter(|e| matches!(e, Ev::Put(..)))
                .cloned()
                .collect();
            assert_eq!(puts.len(), 2, "{t:?}");
            assert!(
                matches!(&puts[1], Ev::Put(_, r, b) if *r == rma(dst + 23, 1) && *b == words(&[31]))
            );
            let mut two = [0u64; 2];
            rget_regular(&[dst + 22, dst + 23], 1, &mut [&mut two[..]]).wait();
            assert_eq!(two, [30, 31]);
            let t = tape.take();
            assert_eq!(t.len(), 4, "two gets, two completions: {t:?}");
            assert_eq!(t[3], Ev::GetDone(OpId(id.0 + 5), words(&[31])));

            // rpc, rpc_ff, and the replies this rank sends for its left neighbour's calls
            // (on whichever call it was polling in).
            tape.take();
            barrier();
            assert_eq!(rpc(right, echo, 5).wait(), 15);
            rpc_ff(right, echo, 6);
            resilience::wait_for_acks();
            assert_eq!(resilience::pending_acks(), 0);
            barrier();
            let t = tape.take();
            let call = RpcCall {
                rank: right,
                name: "echo",
                fire_and_forget: false,
            };
            let ff = RpcCall {
                fire_and_forget: true,
                ..call
            };
            let mine: Vec<Ev> = t
                .iter()
                .filter(|e| matches!(e, Ev::Rpc(..) | Ev::RpcAck(..)))
                .cloned()
                .collect();
            let Ev::Rpc(id, ..) = mine[0] else {
                panic!("{mine:?}")
            };
            assert_eq!(
                mine,
                [
                    Ev::Rpc(id, call, enc(&5u64)),
                    Ev::RpcAck(id, call, enc(&15u64)),
                    Ev::Rpc(OpId(id.0 + 1), ff, enc(&6u64)),
                    Ev::RpcAck(OpId(id.0 + 1), ff, vec![]),
                ]
            );
            let replies: Vec<Ev> = t
                .iter()
                .filter(|e| matches!(e, Ev::Reply(..)))
                .cloned()
                .collect();
            let to_left = RpcReply {
                rank: left,
                name: "echo",
            };
            assert_eq!(
                replies,
                [Ev::Reply(to_left, enc(&15u64)), Ev::Reply(to_left, vec![])],
                "rank {me}"
            );

            // Atomics: one remote atomic each, writing ones with an ack.
            let ad = AtomicDomain::<u64>::new();
            let word = bufs[0] + 20;
            ad.fetch_add(word, 1).wait();
            let t = tape.take();
            let id = pair(&t);
            assert_eq!(
                t,
                [
                    Ev::Atomic(id, 0, word.offset(), AtomicOp::FetchAdd(1)),
                    Ev::AtomicDone(id, true)
                ]
            );
            ad.load(word).wait();
            assert_eq!(tape.take()[1], Ev::AtomicDone(OpId(id.0 + 1), false));
            let f = AtomicDomain::<f64>::new();
            barrier();
            tape.take();
            let fword = bufs[right].cast::<f64>() + 21;
            f.store(fword, 0.0).wait();
            f.fetch_add(fword, 1.5).wait();
            let t = tape.take();
            assert!(
                t.iter().filter(|e| matches!(e, Ev::Atomic(..))).count() >= 3,
                "store, load, compare-exchange: {t:?}"
            );

            // DistObject::fetch of the right neighbour's instance, and the answer sent left.
            tape.take();
            barrier();
            let v = dist.fetch(right).wait();
            assert_eq!(v, vec![right as u64, 7]);
            barrier();
            let t = tape.take();
            let fetch = Fetch {
                rank: right,
                object: dist.id(),
            };
            let fetches: Vec<Ev> = t
                .iter()
                .filter(|e| matches!(e, Ev::Fetch(..) | Ev::FetchDone(..) | Ev::Reply(..)))
                .cloned()
                .collect();
            if n == 1 {
                assert_eq!(
                    fetches,
                    [],
                    "fetching one's own instance is no communication"
                );
            } else {
                // The answer this rank sends left may come before or after its own fetch.
                let Some(id) = fetches.iter().find_map(|e| match e {
                    Ev::Fetch(id, _) => Some(*id),
                    _ => None,
                }) else {
                    panic!("{fetches:?}")
                };
                let answer = Ev::Reply(
                    RpcReply {
                        rank: left,
                        name: RpcReply::DIST_FETCH,
                    },
                    enc(&vec![me as u64, 7]),
                );
                assert!(fetches.contains(&Ev::Fetch(id, fetch)), "{fetches:?}");
                assert!(fetches.contains(&Ev::FetchDone(id, enc(&v))), "{fetches:?}");
                assert!(fetches.contains(&answer), "{fetches:?}");
                assert_eq!(fetches.len(), 3, "{fetches:?}");
            }

            // Collectives, each once, with its result on this rank.
            let w = world();
            let b = broadcast_on(&w, me as u64 + 100, 0).wait();
            assert_eq!(b, 100);
            world_collective(
                &tape.take(),
                CollectiveKind::Broadcast { root: 0 },
                enc(&100u64),
            );
            let r = pgas::reduce_one_on(&w, me as u64, pgas::ops::add, 0).wait();
            world_collective(&tape.take(), CollectiveKind::ReduceOne { root: 0 }, enc(&r));
            let sum = (0..n as u64).sum::<u64>();
            assert_eq!(r, (me == 0).then_some(sum));
            let all = pgas::reduce_all_on(&w, me as u64, pgas::ops::add).wait();
            assert_eq!(all, sum);
            world_collective(&tape.take(), CollectiveKind::ReduceAll, enc(&sum));
            let g = pgas::allgather_on(&w, me as u32).wait();
            world_collective(&tape.take(), CollectiveKind::Allgather, enc(&g));
            let u = pgas::reduce_all_u64_on(&w, 1 << me, |a, b| a | b);
            assert_eq!(u, (1u64 << n) - 1);
            world_collective(&tape.take(), CollectiveKind::ReduceAllU64, enc(&u));
            barrier();
            world_collective(&tape.take(), CollectiveKind::Barrier, vec![]);
            pgas::barrier_async_on(&w).wait();
            world_collective(&tape.take(), CollectiveKind::Barrier, vec![]);
            let half = w.split((me % 2) as u64, 0);
            assert_eq!(half.rank_n(), n / 2 + (n % 2) * (1 - me % 2));
            let t = tape.take();
            let seq = match &t[2] {
                Ev::CollDone(_, _, bytes) => {
                    postcard::from_bytes::<(u64, Vec<(u64, u64)>)>(bytes)
                        .unwrap()
                        .0
                }
                e => panic!("{e:?}"),
            };
            let colors: Vec<(u64, u64)> = (0..n).map(|r| ((r % 2) as u64, 0)).collect();
            world_collective(&t, CollectiveKind::Split, enc(&(seq, colors)));
            pgas::barrier_on(&half);
            let t = tape.take();
            assert!(
                matches!(&t[1], Ev::Coll(_, c) if c.kind == CollectiveKind::Barrier
                    && c.team == half.id() && c.team_size == half.rank_n()),
                "{t:?}"
            );
            fence();
            assert_eq!(tape.take(), [Ev::Sync(SyncEvent::Fence)]);

            // Allocation and free.
            let p = new_array::<u32>(5).unwrap();
            assert_eq!(tape.take(), [Ev::Alloc(p.offset(), 20)]);
            let q = pgas::new_(9u16).unwrap();
            assert_eq!(tape.take(), [Ev::Alloc(q.offset(), 2)]);
            delete_(p).unwrap();
            delete_(q).unwrap();
            assert_eq!(
                tape.take(),
                [Ev::Free(p.offset(), 20), Ev::Free(q.offset(), 2)]
            );

            clear_hook();
            barrier();
            drop(dist);
            delete_(buf).unwrap();
        });
    }
}

// ---- the resilience runtime's API ---------------------------------------------------------

#[test]
fn internal_traffic_is_not_seen_counted_or_an_epoch() {
    for n in ranks() {
        // Per rank: rpc functions run for internal traffic, and for the program's.
        let counts = || Arc::new((0..n).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
        let (internal_runs, app_runs) = (counts(), counts());
        let mut rpcs = RpcTable::new();
        let store = rpcs.register("cd.store", {
            let (i, a) = (internal_runs.clone(), app_runs.clone());
            move |x: u64| {
                let runs = if resilience::is_internal() { &i } else { &a };
                runs[rank_me()].fetch_add(1, Ordering::SeqCst);
                x
            }
        });
        let runs = internal_runs.clone();
        run(n, 4, rpcs, move || {
            let me = rank_me();
            let right = (me + 1) % n;
            let buf = new_array::<u64>(4).unwrap();
            let bufs = allgather(buf);
            let tape = Rc::new(Tape::default());
            set_hook(tape.clone());
            barrier();
            tape.take();
            let (ec, iwc) = (epoch(), resilience::incoming_writes());
            // What a CD runtime does for itself: buddy copies, agreement, log gathering.
            resilience::internal(|| {
                assert!(resilience::is_internal());
                assert_eq!(rpc(right, store, 1).wait(), 1);
                rpc_ff(right, store, 2);
                let _ = rget(bufs[right]).wait();
                assert_eq!(pgas::reduce_all_u64(1, |a, b| a + b), n as u64);
                let _ = pgas::reduce_one(1u64, pgas::ops::add, 0).wait();
                let _ = broadcast(5u64, 0).wait();
                let p = new_array::<u64>(2).unwrap();
                delete_(p).unwrap();
                fence();
                barrier();
                // The left neighbour's internal rpc_ff has run here before the next barrier.
                while runs[me].load(Ordering::SeqCst) < 2 {
                    pgas::progress();
                }
                barrier();
            });
            assert!(!resilience::is_internal());
            assert_eq!(tape.take(), [], "rank {me}: the hook saw internal traffic");
            assert_eq!(epoch(), ec, "internal synchronizations are no epochs");
            assert_eq!(
                resilience::incoming_writes(),
                iwc,
                "internal rpcs are not incoming writes"
            );
            // No rank sends the program's traffic below before every rank has checked the above
            // (an rpc arriving meanwhile would rightly be seen and counted).
            resilience::internal(barrier);
            // The program's rpc, in the same rank pair, is seen, counted and run as such.
            assert_eq!(rpc(right, store, 3).wait(), 3);
            barrier();
            assert!(
                resilience::incoming_writes() > iwc,
                "the program's rpc was counted"
            );
            let t = tape.take();
            assert!(t.iter().any(|e| matches!(e, Ev::Rpc(..))), "{t:?}");
            clear_hook();
            barrier();
            delete_(buf).unwrap();
        });
        for r in held_ranks(n) {
            assert_eq!(
                internal_runs[r].load(Ordering::SeqCst),
                2,
                "rank {r}: internal"
            );
            assert_eq!(
                app_runs[r].load(Ordering::SeqCst),
                1,
                "rank {r}: the program's"
            );
        }
    }
}

/// A resilience runtime's copy at another rank: no hook call, no IWC step at the target (an
/// `internal` put is counted there), the bytes in place; the program's put after it is the
/// target's next write.
#[test]
fn uncounted_puts_are_not_seen_or_counted() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let me = rank_me();
            let right = (me + 1) % n;
            let left = (me + n - 1) % n;
            let buf = new_array::<u64>(40_000).unwrap();
            let bufs = allgather(buf);
            let tape = Rc::new(Tape::default());
            set_hook(tape.clone());
            barrier();
            tape.take();
            let iwc = resilience::incoming_writes();
            barrier();
            tape.take();
            let small: Vec<u64> = (0..4).map(|i| 100 * me as u64 + i).collect();
            let large: Vec<u64> = (0..40_000).map(|i| 7 * me as u64 + i).collect();
            resilience::rput_uncounted(&large, bufs[right]);
            resilience::rput_uncounted(&small, bufs[right]);
            assert_eq!(tape.take(), [], "rank {me}: the hook saw an uncounted put");
            resilience::internal(barrier);
            assert_eq!(resilience::incoming_writes(), iwc, "rank {me}");
            let mut got = rget_slice(buf, 40_000).wait();
            let want_small: Vec<u64> = (0..4).map(|i| 100 * left as u64 + i).collect();
            assert_eq!(&got[..4], &want_small[..], "rank {me}");
            got.drain(..4);
            let want_large: Vec<u64> = (4..40_000).map(|i| 7 * left as u64 + i).collect();
            assert_eq!(got, want_large, "rank {me}");
            resilience::internal(barrier);
            // For comparison: a put inside `internal` is counted by the target.
            resilience::internal(|| rput(1u64, bufs[right]).wait());
            resilience::internal(barrier);
            assert_eq!(resilience::incoming_writes(), iwc + 1, "rank {me}");
            clear_hook();
            barrier();
            delete_(buf).unwrap();
        });
    }
}

/// Logs each put's ack, keyed by the id its start had.
#[derive(Default)]
struct Acks {
    open: RefCell<HashMap<OpId, Rma>>,
    done: RefCell<Vec<(OpId, Rma, WriteAck)>>,
    ids: RefCell<Vec<OpId>>,
}

impl Interceptor for Acks {
    fn before_put(&self, id: OpId, rma: &Rma, _: &[u8]) -> PutAction {
        self.ids.borrow_mut().push(id);
        assert!(self.open.borrow_mut().insert(id, *rma).is_none());
        PutAction::Proceed
    }
    fn after_put(&self, id: OpId, rma: &Rma, ack: WriteAck) {
        let started = self.open.borrow_mut().remove(&id).expect("started");
        assert_eq!(started, *rma);
        self.done.borrow_mut().push((id, *rma, ack));
    }
    fn before_rpc(&self, id: OpId, _: &RpcCall, _: &[u8]) -> RpcAction {
        self.ids.borrow_mut().push(id);
        RpcAction::Proceed
    }
}

#[test]
fn iwc_read_ec_rewind_and_acks_paired_with_their_writes() {
    for n in ranks() {
        let mut rpcs = RpcTable::new();
        let nop = rpcs.register("nop", |()| ());
        run(n, 4, rpcs, move || {
            let me = rank_me();
            let right = (me + 1) % n;
            let buf = new_array::<u64>(4).unwrap();
            let bufs = allgather(buf);
            let hook = Rc::new(Acks::default());
            set_hook(hook.clone());
            barrier();
            // Rewind the EC to a value of this rank's own; the next barrier adds two.
            let e = epoch();
            resilience::set_epoch(1000 + 10 * me as u64);
            assert_eq!(resilience::epoch(), 1000 + 10 * me as u64);
            assert!(e < 1000);
            barrier();
            let iwc = resilience::incoming_writes();
            barrier();
            for k in 0..3 {
                rput(k, bufs[right] + k as usize).wait();
            }
            rpc_ff(right, nop, ());
            resilience::wait_for_acks();
            assert_eq!(resilience::pending_acks(), 0);
            barrier();
            // Exactly the three puts and one rpc from the left landed here since.
            assert_eq!(resilience::incoming_writes(), iwc + 4, "rank {me}");
            assert!(hook.open.borrow().is_empty(), "every write's ack arrived");
            let done = hook.done.borrow().clone();
            let ids = hook.ids.borrow().clone();
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in program order");
            let iwc_right = allgather(iwc)[right];
            for (k, (_, rma, ack)) in done.iter().enumerate() {
                assert_eq!(rma.rank, right);
                // The target's counters: its rewound epoch, +4 for two barriers (3 if it
                // has not stepped out of the second yet, 5 if it entered the next one
                // already), and the IWC this write produced.
                let ec = 1000 + 10 * right as u64 + 4;
                assert!((ec - 1..=ec + 1).contains(&ack.ec), "{ack:?} vs {ec}");
                assert_eq!(ack.iwc, iwc_right + 1 + k as u64);
            }
            clear_hook();
            barrier();
            delete_(buf).unwrap();
        });
    }
}

/// Records allocations, or replays logged addresses; defers frees when asked.
#[derive(Default)]
struct Allocs {
    replay: RefCell<Vec<usize>>,
    seen: RefCell<Vec<(usize, usize)>>,
    defer: Cell<bool>,
}

impl Interceptor for Allocs {
    fn before_alloc(&self, _: usize, _: usize) -> AllocAction {
        match self.replay.borrow_mut().pop() {
            Some(at) => AllocAction::At(at),
            None => AllocAction::Proceed,
        }
    }
    fn after_alloc(&self, offset: usize, size: usize) {
        self.seen.borrow_mut().push((offset, size));
    }
    fn before_free(&self, _: usize, _: usize) -> FreeAction {
        if self.defer.get() {
            FreeAction::Defer
        } else {
            FreeAction::Proceed
        }
    }
}

#[test]
fn allocations_replay_logged_addresses_and_refuse_invalid_ones() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), || {
            let hook = Rc::new(Allocs::default());
            set_hook(hook.clone());
            let a = new_array::<u64>(4).unwrap();
            assert_eq!(*hook.seen.borrow(), [(a.offset(), 32)]);
            delete_(a).unwrap();
            // Replay: the allocator's own choice would be `a` again; the log says elsewhere.
            let logged = a.offset() + 256;
            hook.replay.borrow_mut().push(logged);
            let b = new_array::<u64>(4).unwrap();
            assert_eq!(b.offset(), logged, "the logged address came back");
            assert_eq!(b.rank(), rank_me());
            assert_eq!(rget_slice(b, 4).wait(), [0; 4], "zeroed like any new_array");
            // The same address again (in use), a misaligned one, one past the segment: refused.
            for (at, why) in [
                (logged, "not in a free block"),
                (logged + 4, "not aligned"),
                (usize::MAX - 7, "beyond the segment"),
            ] {
                hook.replay.borrow_mut().push(at);
                let e = pgas::new_(1u64).unwrap_err();
                assert!(
                    matches!(e, pgas::PgasError::ReplayAlloc { offset, .. } if offset == at),
                    "{e:?}"
                );
                let msg = e.to_string();
                assert!(msg.contains("refused") && msg.contains(why), "{msg}");
            }
            delete_(b).unwrap();
            clear_hook();
        });
    }
}

#[test]
fn deferred_frees_take_effect_when_performed() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), || {
            let hook = Rc::new(Allocs::default());
            set_hook(hook.clone());
            let base = pgas::shared_bytes_in_use();
            let p = new_array::<u64>(8).unwrap();
            hook.defer.set(true);
            delete_(p).unwrap();
            assert_eq!(pgas::shared_bytes_in_use(), base + 64, "still allocated");
            assert_eq!(resilience::deferred_frees(), [p.offset()]);
            assert!(matches!(delete_(p), Err(pgas::PgasError::BadFree { .. })));
            // A new allocation does not get the deferred block.
            let q = pgas::new_(3u64).unwrap();
            assert!(q.offset() >= p.offset() + 64 || q.offset() + 8 <= p.offset());
            resilience::free_deferred(p.offset()).unwrap();
            assert_eq!(pgas::shared_bytes_in_use(), base + 8);
            assert_eq!(resilience::deferred_frees(), []);
            assert!(resilience::free_deferred(p.offset()).is_err());
            hook.defer.set(false);
            delete_(q).unwrap();
            assert_eq!(pgas::shared_bytes_in_use(), base);
            clear_hook();
        });
    }
}

/// Serves every collective, fetch and atomic from a log.
struct Served;

impl Interceptor for Served {
    fn before_collective(&self, _: OpId, c: &Collective) -> CollectiveAction {
        CollectiveAction::Served(match c.kind {
            CollectiveKind::Barrier => vec![],
            CollectiveKind::ReduceOne { .. } => enc(&Some(41u64)),
            _ => enc(&42u64),
        })
    }
    fn before_fetch(&self, _: OpId, _: &Fetch) -> FetchAction {
        FetchAction::Served(enc(&9u32))
    }
}

#[test]
fn collectives_served_from_a_log_take_no_part_but_step_the_epoch() {
    for n in ranks() {
        run(n, 4, RpcTable::new(), move || {
            let d = DistObject::new(rank_me() as u32);
            barrier();
            let w = world();
            let first = pgas::reduce_all_u64_on(&w, 1, |a, b| a + b);
            set_hook(Rc::new(Served));
            let e = epoch();
            assert_eq!(broadcast_on(&w, 0u64, 0).wait(), 42);
            assert_eq!(pgas::reduce_all_on(&w, 0u64, pgas::ops::add).wait(), 42);
            assert_eq!(pgas::reduce_all_u64_on(&w, 0, |a, b| a + b), 42);
            assert_eq!(
                pgas::reduce_one_on(&w, 0u64, pgas::ops::add, 0).wait(),
                Some(41)
            );
            barrier();
            if n > 1 {
                assert_eq!(d.fetch((rank_me() + 1) % n).wait(), 9);
            }
            assert_eq!(epoch(), e + 10, "two steps per collective, served or not");
            clear_hook();
            // Nothing was sent and no sequence number or reduction word was used: the next
            // real collectives still match up.
            assert_eq!(pgas::reduce_all_u64_on(&w, 1, |a, b| a + b), first);
            assert_eq!(pgas::reduce_all_on(&w, 1u64, pgas::ops::add).wait(), first);
            assert_eq!(broadcast_on(&w, rank_me(), 0).wait(), 0);
            barrier();
        });
    }
}

/// Notes the replies this rank sends, and the request being served when each put started.
#[derive(Default)]
struct Serving {
    replies: Cell<u64>,
    puts: RefCell<Vec<Option<resilience::ServedRequest>>>,
    acks: RefCell<Vec<WriteAck>>,
}

impl Interceptor for Serving {
    fn before_put(&self, _: OpId, _: &Rma, _: &[u8]) -> PutAction {
        self.puts.borrow_mut().push(resilience::serving_request());
        PutAction::Proceed
    }
    fn after_rpc(&self, _: OpId, _: &RpcCall, ack: WriteAck, _: &[u8]) {
        self.acks.borrow_mut().push(ack);
    }
    fn before_reply(&self, _: &RpcReply, _: &[u8]) -> ReplyAction {
        self.replies.set(self.replies.get() + 1);
        ReplyAction::Proceed
    }
}

/// A put started inside an rpc function names the request it serves (the IWC its sender
/// logs); `rerun_rpc` runs the function again from its argument bytes and returns its result
/// without counting an incoming write, sending a reply or naming a request, and refuses a
/// future that is not ready, an unknown name and arguments that do not decode.
#[test]
fn rerun_rpc_runs_a_function_again_uncounted_and_unreplied() {
    use resilience::RerunError;
    type Add = (GlobalPtr<u64>, GlobalPtr<u64>, u64);
    for n in ranks().into_iter().filter(|&n| n >= 2) {
        let mut t = RpcTable::new();
        // Adds into the target's word and copies the sum to the sender's `copy`.
        let add = t.register("rerun.add", |(word, copy, v): Add| {
            let x = word.read_local().unwrap() + v;
            word.write_local(x).unwrap();
            rput(x, copy).detach();
            x
        });
        t.register_future("rerun.ready", |v: u64| pgas::Future::ready(v + 1));
        // Its promise is dropped unfinished: the future never becomes ready.
        t.register_future("rerun.pending", |_: u64| {
            pgas::Promise::<u64>::new().get_future()
        });
        run(n, 4, t, move || {
            let me = rank_me();
            let word = new_array::<u64>(2).unwrap();
            let words = allgather(word);
            // Installed before the barrier: rank 0's rpc may reach rank 1 while it still
            // waits there (seen under `mpirun -n 4` on 2 cores).
            let hook = Rc::new(Serving::default());
            set_hook(hook.clone());
            barrier();
            let args = (words[1], words[0] + 1, 5u64);
            if me == 0 {
                assert_eq!(rpc(1, add, args).wait(), 5);
            }
            barrier();
            let first = hook.acks.borrow().first().map(|a| (a.ec, a.iwc));
            let ack = pgas::broadcast(first, 0).wait();
            if me == 1 {
                let (ec, iwc) = ack.expect("rank 0 logged the request's ack");
                let puts = hook.puts.borrow().clone();
                let served = resilience::ServedRequest { source: 0, ec, iwc };
                assert_eq!(puts, [Some(served)], "the put names its request");
                let iwc = resilience::incoming_writes();
                assert!(iwc >= served.iwc);
                let bytes = postcard::to_allocvec(&args).unwrap();
                let got = resilience::rerun_rpc("rerun.add", &bytes).unwrap();
                assert_eq!(postcard::from_bytes::<u64>(&got).unwrap(), 10);
                assert_eq!(word.read_local().unwrap(), 10, "the function ran again");
                assert_eq!(resilience::incoming_writes(), iwc, "not counted");
                assert_eq!(hook.replies.get(), 1, "no reply for the re-run");
                assert_eq!(hook.puts.borrow()[1], None, "a re-run serves no request");
                let one = postcard::to_allocvec(&1u64).unwrap();
                let two = resilience::rerun_rpc("rerun.ready", &one).unwrap();
                assert_eq!(postcard::from_bytes::<u64>(&two).unwrap(), 2);
                assert!(matches!(
                    resilience::rerun_rpc("rerun.pending", &one),
                    Err(RerunError::NotReady { .. })
                ));
                assert!(matches!(
                    resilience::rerun_rpc("rerun.none", &one),
                    Err(RerunError::Unknown { .. })
                ));
                assert!(matches!(
                    resilience::rerun_rpc("rerun.add", &[]),
                    Err(RerunError::Arguments { .. })
                ));
            }
            barrier();
            clear_hook();
            if me == 0 {
                // The re-run's copy landed too.
                while (word + 1).read_local().unwrap() != 10 {
                    pgas::progress();
                }
            }
            barrier();
        });
    }
}
