//! Collectives on any team, built from pgas messages: barrier, broadcast, reduce_one,
//! reduce_all (and the allgather that `split` uses).
//!
//! Each team numbers its collectives; all members call them in the same order, so
//! (team id, sequence number) names one operation everywhere. Messages for an operation this
//! rank has not started yet wait in a mailbox. The algorithms are linear through team rank 0
//! (or the root): at the scale of ranks in one process they cost less than trees, and they
//! combine contributions in team-rank order, so a floating-point reduction gives the same bits
//! on every run.
//!
//! Every collective advances the EC on entry and on completion (a barrier as `BarrierEnter`
//! and `BarrierExit`), as seed 003 asks of synchronizations, and is seen by the hook as one
//! operation with its result (see [`crate::hook`]); the messages it is made of are not.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::future::Future;
use crate::hook::{Collective, CollectiveAction, CollectiveKind, Interceptor, SyncEvent};
use crate::runtime::{self, Runtime};
use crate::team::{Team, world};
use crate::wire::{self, Kind};

type Key = (u64, u64, u64); // team, sequence, phase
type Arrivals = Vec<(usize, Vec<u8>)>; // (team rank of the sender, payload)

struct Waiter {
    needed: usize,
    done: Box<dyn FnOnce(Arrivals)>,
}

/// Sequence numbers, mailboxes and waiting operations of one rank.
#[derive(Default)]
pub(crate) struct CollectiveState {
    seq: RefCell<HashMap<u64, u64>>,
    mailbox: RefCell<HashMap<Key, Arrivals>>,
    waiters: RefCell<HashMap<Key, Waiter>>,
}

impl CollectiveState {
    fn next_seq(&self, team: u64) -> u64 {
        let mut seq = self.seq.borrow_mut();
        let s = seq.entry(team).or_insert(0);
        *s += 1;
        *s
    }

    /// Calls `done` once `needed` messages for `key` have arrived (at once if they have).
    fn expect(&self, key: Key, needed: usize, done: impl FnOnce(Arrivals) + 'static) {
        let ready = {
            let mut mailbox = self.mailbox.borrow_mut();
            if mailbox.get(&key).map_or(0, Vec::len) >= needed {
                // Fix: `needed == 0` (a one-member team: reduce_one, allgather, split and
                // barrier_async on it) has no mailbox entry, and `remove` alone returned None,
                // parking the operation as a waiter that no message would ever complete.
                Some(mailbox.remove(&key).unwrap_or_default())
            } else {
                None
            }
        };
        match ready {
            Some(arrivals) => done(arrivals),
            None => {
                self.waiters.borrow_mut().insert(
                    key,
                    Waiter {
                        needed,
                        done: Box::new(done),
                    },
                );
            }
        }
    }
}

pub(crate) fn handle(rt: &Runtime, source: usize, header: &[u64], payload: &[u8]) {
    let [team, seq, phase, from, ..] = *header else {
        wire::malformed(source, "a collective message without its header")
    };
    let key = (team, seq, phase);
    let state = &rt.collectives;
    let complete = {
        let mut mailbox = state.mailbox.borrow_mut();
        let arrivals = mailbox.entry(key).or_default();
        arrivals.push((from as usize, payload.to_vec()));
        let needed = state.waiters.borrow().get(&key).map(|w| w.needed);
        match needed {
            Some(n) if arrivals.len() >= n => {
                let arrivals = mailbox.remove(&key).expect("present");
                let waiter = state.waiters.borrow_mut().remove(&key).expect("present");
                Some((waiter, arrivals))
            }
            _ => None,
        }
    };
    if let Some((waiter, arrivals)) = complete {
        (waiter.done)(arrivals);
    }
}

fn send(rt: &Runtime, team: &Team, to: usize, seq: u64, phase: u64, payload: &[u8]) {
    wire::send(
        rt,
        team.to_world(to),
        Kind::Collective,
        &[team.id(), seq, phase, team.rank_me() as u64],
        payload,
    );
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_allocvec(v).expect("serialize a collective value")
}

fn decode<T: DeserializeOwned>(source: usize, bytes: &[u8]) -> T {
    postcard::from_bytes(bytes).unwrap_or_else(|e| {
        wire::malformed(
            source,
            &format!("a collective value that does not decode: {e}"),
        )
    })
}

/// Gathers every member's value at team rank 0, in team order, and gives the list to all;
/// also returns the operation's sequence number (for ids derived from it).
pub(crate) fn allgather_seq<T>(team: &Team, value: T) -> Future<(u64, Vec<T>)>
where
    T: Serialize + DeserializeOwned + 'static,
{
    runtime::with(|rt| {
        let seq = rt.collectives.next_seq(team.id());
        let n = team.rank_n();
        let mine = encode(&value);
        let (future, fulfiller) = Future::pending();
        let key = |phase| (team.id(), seq, phase);
        if team.rank_me() == 0 {
            let team2 = team.clone();
            rt.collectives.expect(key(0), n - 1, move |mut arrivals| {
                arrivals.push((0, mine));
                arrivals.sort_by_key(|(r, _)| *r);
                let all: Vec<Vec<u8>> = arrivals.into_iter().map(|(_, b)| b).collect();
                let bytes = encode(&all);
                runtime::with(|rt| {
                    for to in 1..n {
                        send(rt, &team2, to, seq, 1, &bytes);
                    }
                });
                let values = all.iter().map(|b| decode(team2.to_world(0), b)).collect();
                fulfiller.fulfill((seq, values));
            });
        } else {
            send(rt, team, 0, seq, 0, &mine);
            let root = team.to_world(0);
            rt.collectives.expect(key(1), 1, move |arrivals| {
                let all: Vec<Vec<u8>> = decode(root, &arrivals[0].1);
                fulfiller.fulfill((seq, all.iter().map(|b| decode(root, b)).collect()));
            });
        }
        future
    })
}

/// Runs collective `kind` on `team` as the hook and the epochs see it: an EC step on entry
/// (`syncs.0`), the hook's `before_collective` (which may serve the result from a log: then
/// `op` does not run, so no message leaves and no sequence number is used), `op`, the hook's
/// `after_collective` with the encoded result, an EC step at completion (`syncs.1`). In an
/// internal scope there are neither steps nor hook calls.
fn collective<T>(
    team: &Team,
    kind: CollectiveKind,
    syncs: (SyncEvent, SyncEvent),
    op: impl FnOnce() -> Future<T>,
) -> Future<T>
where
    T: Serialize + DeserializeOwned + 'static,
{
    let (app, hook) = runtime::with(|rt| {
        let app = !rt.is_internal();
        let hook = rt.hook_op();
        if app {
            rt.step(hook.as_ref().map(|(h, _)| h), syncs.0);
        }
        (app, hook)
    });
    let exit = move |hook: Option<&Rc<dyn Interceptor>>| {
        if app {
            runtime::with(|rt| rt.step(hook, syncs.1));
        }
    };
    let Some((hook, id)) = hook else {
        return op().then(move |v| {
            exit(None);
            v
        });
    };
    let c = Collective {
        kind,
        team: team.id(),
        team_rank: team.rank_me(),
        team_size: team.rank_n(),
    };
    if let CollectiveAction::Served(bytes) = hook.before_collective(id, &c) {
        let v = postcard::from_bytes(&bytes).unwrap_or_else(|e| {
            panic!("the hook served collective {kind:?} with bytes that do not decode: {e}")
        });
        exit(Some(&hook));
        return Future::ready(v);
    }
    op().then(move |v| {
        hook.after_collective(id, &c, &encode(&v));
        exit(Some(&hook));
        v
    })
}

const COLLECTIVE: (SyncEvent, SyncEvent) = (SyncEvent::Collective, SyncEvent::Collective);
const BARRIER: (SyncEvent, SyncEvent) = (SyncEvent::BarrierEnter, SyncEvent::BarrierExit);

/// Every member's `value`, in team-rank order, given to all members (MPI `Allgather`).
pub fn allgather<T>(team: &Team, value: T) -> Future<Vec<T>>
where
    T: Serialize + DeserializeOwned + 'static,
{
    collective(team, CollectiveKind::Allgather, COLLECTIVE, || {
        allgather_seq(team, value).then(|(_, values)| values)
    })
}

/// `Team::split`'s exchange: the sequence number and every member's `(color, key)`.
pub(crate) fn split_exchange(team: &Team, color: u64, key: u64) -> (u64, Vec<(u64, u64)>) {
    collective(team, CollectiveKind::Split, COLLECTIVE, || {
        allgather_seq(team, (color, key))
    })
    .wait()
}

/// Completes when every member of `team` has entered it; does not block (UPC++
/// `barrier_async`).
pub fn barrier_async(team: &Team) -> Future<()> {
    collective(team, CollectiveKind::Barrier, BARRIER, || {
        allgather_seq(team, ()).then(|_| ())
    })
}

/// Blocks until every member of `team` has entered it.
pub fn barrier_on(team: &Team) {
    if team.id() == world().id() {
        return barrier();
    }
    barrier_async(team).wait()
}

/// Blocks until every rank has entered it (the world barrier of the communication core).
pub fn barrier() {
    runtime::with(|rt| {
        // Fix: inside an rpc the core's barrier failed with "barrier_notify called again
        // before barrier_wait completed" (the rank was already in a barrier), which hid the
        // cause; name it instead.
        assert!(
            !rt.in_handler.get(),
            "rank {}: barrier() inside an rpc function, a blocking call inside an \
             active-message handler, would deadlock; use barrier_async or do it after the rpc",
            rt.rank_me()
        );
    });
    // Without a hook: the EC steps and the core's barrier, nothing else.
    let fast = runtime::with(|rt| {
        if rt.hooked() {
            return false;
        }
        rt.sync(SyncEvent::BarrierEnter);
        rt.ep().barrier().expect("world barrier");
        rt.sync(SyncEvent::BarrierExit);
        true
    });
    if fast {
        return;
    }
    collective(&world(), CollectiveKind::Barrier, BARRIER, || {
        runtime::with(|rt| rt.ep().barrier().expect("world barrier"));
        Future::ready(())
    })
    .wait()
}

/// Gives `value` from team rank `root` to every member (other members' `value` is ignored).
///
/// # Panics
/// If `root` is not a team rank.
pub fn broadcast<T>(team: &Team, value: T, root: usize) -> Future<T>
where
    T: Serialize + DeserializeOwned + 'static,
{
    team.to_world(root);
    collective(team, CollectiveKind::Broadcast { root }, COLLECTIVE, || {
        let seq = runtime::with(|rt| rt.collectives.next_seq(team.id()));
        broadcast_seq(team, root, Some(value), seq)
    })
}

/// Broadcast as the team's collective number `seq` (no EC steps, no hook).
fn broadcast_seq<T>(team: &Team, root: usize, value: Option<T>, seq: u64) -> Future<T>
where
    T: Serialize + DeserializeOwned + 'static,
{
    let root_world = team.to_world(root);
    runtime::with(|rt| {
        if team.rank_me() == root {
            let value = value.expect("the root of a broadcast supplies the value");
            let bytes = encode(&value);
            for to in (0..team.rank_n()).filter(|&r| r != root) {
                send(rt, team, to, seq, 0, &bytes);
            }
            return Future::ready(value);
        }
        let (future, fulfiller) = Future::pending();
        rt.collectives
            .expect((team.id(), seq, 0), 1, move |arrivals| {
                fulfiller.fulfill(decode(root_world, &arrivals[0].1));
            });
        future
    })
}

/// Folds every member's `value` with `op` in team-rank order; the result is `Some` at `root`,
/// `None` elsewhere.
pub fn reduce_one<T, F>(team: &Team, value: T, op: F, root: usize) -> Future<Option<T>>
where
    T: Serialize + DeserializeOwned + 'static,
    F: Fn(T, T) -> T + 'static,
{
    team.to_world(root);
    collective(team, CollectiveKind::ReduceOne { root }, COLLECTIVE, || {
        reduce_one_messages(team, value, op, root)
    })
}

/// `reduce_one` as messages (no EC steps, no hook).
fn reduce_one_messages<T, F>(team: &Team, value: T, op: F, root: usize) -> Future<Option<T>>
where
    T: Serialize + DeserializeOwned + 'static,
    F: Fn(T, T) -> T + 'static,
{
    runtime::with(|rt| {
        let seq = rt.collectives.next_seq(team.id());
        if team.rank_me() != root {
            send(rt, team, root, seq, 0, &encode(&value));
            return Future::ready(None);
        }
        let (future, fulfiller) = Future::pending();
        let team2 = team.clone();
        let mut mine = Some(value);
        rt.collectives.expect(
            (team.id(), seq, 0),
            team.rank_n() - 1,
            move |mut arrivals| {
                arrivals.sort_by_key(|(r, _)| *r);
                let mut others = arrivals.into_iter();
                let mut acc: Option<T> = None;
                for r in 0..team2.rank_n() {
                    let v = if r == root {
                        mine.take().expect("own value")
                    } else {
                        let (_, bytes) = others.next().expect("one value per member");
                        decode(team2.to_world(r), &bytes)
                    };
                    acc = Some(match acc.take() {
                        None => v,
                        Some(a) => op(a, v),
                    });
                }
                fulfiller.fulfill(acc);
            },
        );
        future
    })
}

/// Folds every member's `value` with `op` in team-rank order and gives the result to all.
pub fn reduce_all<T, F>(team: &Team, value: T, op: F) -> Future<T>
where
    T: Serialize + DeserializeOwned + 'static,
    F: Fn(T, T) -> T + 'static,
{
    collective(team, CollectiveKind::ReduceAll, COLLECTIVE, || {
        let team2 = team.clone();
        let reduced = reduce_one_messages(team, value, op, 0);
        // Fix: the broadcast's sequence number is taken now, not when the reduction
        // completes. Team rank 0 used to take it in the continuation, after any collective
        // the program started in the meantime, while the other members took it at once; with
        // another collective started before waiting, the two operations' messages were
        // crossed (a value of one type decoded as another).
        let seq = runtime::with(|rt| rt.collectives.next_seq(team.id()));
        reduced.and_then(move |r| broadcast_seq(&team2, 0, r, seq))
    })
}

/// Folds one `u64` per member with `op` in team-rank order and gives the result to all,
/// without the messages of [`reduce_all`] on the world team: each rank writes its value in its
/// own segment, one barrier of the communication core, then each rank reads every value.
/// (Other teams take the message path.) This is what a strict CD's agreement uses.
///
/// The hook sees it as one collective ([`CollectiveKind::ReduceAllU64`]) with its result, not
/// the reads of the other ranks' words it is built from (as the messages of the other
/// collectives); served from a log, the rank writes, waits for and reads nothing.
pub fn reduce_all_u64(team: &Team, value: u64, op: impl Fn(u64, u64) -> u64 + 'static) -> u64 {
    if team.id() != world().id() {
        return reduce_all(team, value, op).wait();
    }
    if !runtime::with(|rt| rt.hooked()) {
        runtime::with(|rt| rt.sync(SyncEvent::Collective));
        let result = fast_reduce_u64(value, op);
        runtime::with(|rt| rt.sync(SyncEvent::Collective));
        return result;
    }
    collective(team, CollectiveKind::ReduceAllU64, COLLECTIVE, || {
        Future::ready(fast_reduce_u64(value, op))
    })
    .wait()
}

/// The world reduction of [`reduce_all_u64`] through the runtime's reserved words.
///
/// Each rank alternates between two words: a rank writes word `k % 2` in reduction `k` only
/// after barrier `k - 1`, which every rank enters only after reading reduction `k - 2`'s
/// words, so no value is overwritten before it is read. The write is a local store, not a
/// put, so it counts as no incoming write.
fn fast_reduce_u64(value: u64, op: impl Fn(u64, u64) -> u64) -> u64 {
    runtime::with(|rt| {
        let ep = rt.ep();
        let k = rt.fast_reductions.get();
        rt.fast_reductions.set(k + 1);
        let at = crate::runtime::FAST_REDUCE_AT + (k % 2) as usize * 8;
        let base = ep.segment_base(ep.rank()).expect("own segment");
        // SAFETY: `at .. at + 8` lies in the runtime's reserved bytes of this rank's own
        // segment (8-byte aligned); other ranks read it only after the barrier below.
        unsafe { gasnet_bridge::shared_copy::store(base.add(at).cast::<u64>(), value) };
        ep.barrier().expect("world barrier");
        let mut acc: Option<u64> = None;
        let mut word = [0u8; 8];
        for r in 0..ep.ranks() {
            ep.get(r, at, &mut word).expect("reduction word");
            let v = u64::from_ne_bytes(word);
            acc = Some(acc.map_or(v, |a| op(a, v)));
        }
        acc.expect("at least one rank")
    })
}

/// Built-in reduction operations, usable as the `op` of `reduce_one` / `reduce_all`.
pub mod ops {
    /// Sum.
    pub fn add<T: std::ops::Add<Output = T>>(a: T, b: T) -> T {
        a + b
    }
    /// Product.
    pub fn mul<T: std::ops::Mul<Output = T>>(a: T, b: T) -> T {
        a * b
    }
    /// Minimum (for floats, the smaller of the two; NaN propagates from `b`).
    pub fn min<T: PartialOrd>(a: T, b: T) -> T {
        if b < a { b } else { a }
    }
    /// Maximum.
    pub fn max<T: PartialOrd>(a: T, b: T) -> T {
        if b > a { b } else { a }
    }
    /// Bitwise and.
    pub fn bit_and<T: std::ops::BitAnd<Output = T>>(a: T, b: T) -> T {
        a & b
    }
    /// Bitwise or.
    pub fn bit_or<T: std::ops::BitOr<Output = T>>(a: T, b: T) -> T {
        a | b
    }
    /// Bitwise xor.
    pub fn bit_xor<T: std::ops::BitXor<Output = T>>(a: T, b: T) -> T {
        a ^ b
    }
}
