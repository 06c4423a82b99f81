//! Collectives on any team, built from pgas messages: barrier, broadcast, reduce_one,
//! reduce_all (and the allgather that `split` uses).
//!
//! Each comes in two forms: the plain name over every rank (`reduce_all(value, op)`, as UPC++
//! defaults its team argument to the world), and `*_on(&team, ..)` over a team's members.
//!
//! Each team numbers its collectives; all members call them in the same order, so
//! (team id, sequence number) names one operation everywhere, and a phase names one step of
//! it (a tree's upward or downward pass, a barrier's round). Messages for an operation or a
//! step this rank has not reached yet wait in a mailbox.
//!
//! # Algorithms: trees, O(log P) rounds and messages per rank
//!
//! * **Reductions** go up a binomial tree rooted at team rank 0 (module `tree`): rank `r`
//!   combines the partials of its children `r + 1, r + 2, r + 4, ...` (below `r`'s lowest set
//!   bit, and below the team size) into its own, then sends the result to its parent, `r` with
//!   its lowest set bit cleared. A rank receives at most ⌈log2 P⌉ messages and sends one;
//!   ⌈log2 P⌉ rounds.
//! * **Broadcast** goes down the same tree, renumbered so that the root is its rank 0; a rank
//!   forwards the bytes it received, unchanged, to its children, the largest subtree first.
//! * `reduce_all` is the reduction to team rank 0 followed by a broadcast from it, and
//!   `allgather` (and `split`) the same with concatenation of lists as the operation:
//!   2⌈log2 P⌉ rounds and 2(P − 1) messages in all, where recursive doubling would take
//!   ⌈log2 P⌉ rounds but P⌈log2 P⌉ messages, more than two cores running many ranks can
//!   afford. `reduce_one` to a root other than 0 reduces to team rank 0, which forwards the
//!   result (one more message; it keeps the order below).
//! * `barrier_async` is a dissemination barrier: in round `k` rank `r` signals rank
//!   `r + 2^k` and waits for rank `r − 2^k` (mod P); ⌈log2 P⌉ rounds, one message each.
//!   The world `barrier()` is the communication core's barrier (`MPI_Ibarrier` on the mpi
//!   conduit, a central counter on smp, where ranks share memory).
//!
//! # Flat where members share memory
//!
//! The flat algorithms go through one rank: every member sends its value to team rank 0 (or
//! `reduce_one`'s root), which folds them in the tree's parenthesisation (`tree::fold`) and
//! sends the result to every member; a flat barrier is the same with empty values. Which one
//! runs is [`Algorithm`]'s choice; by default ([`Algorithm::Auto`]) reductions, allgathers
//! and barriers are flat on a team whose members share memory (every team on smp, a host's
//! processes on mpi) and trees on any other, and broadcasts are trees everywhere (the
//! `*_tree` lines of `pgas-bench` compare the two on the machine at hand). A tree's
//! reduction has 2⌈log2 P⌉ dependent hops, each of which must wake a rank and wait for a core,
//! where the flat one has two; a message in shared memory is a store, so the root's P − 1 of
//! them cost little. Across hosts a hop is a network message and the root's P − 1 are serial,
//! so the trees are the tool there as P grows; where they overtake the flat ones is for a
//! cluster to measure. All algorithms give the same bits.
//!
//! # Order and bits of a reduction
//!
//! Every combination is `op(lower-ranked partial, higher-ranked partial)` of two partials of
//! adjacent blocks of team ranks, so the result is `op` folded over the members in team-rank
//! order, only parenthesised differently; an operation that is associative but not commutative
//! (concatenation) gives exactly the left fold's result. The parenthesisation depends only on
//! the team size, never on the order in which messages arrive: a floating-point reduction's
//! bits may change with the team size (addition is not associative in floating point), but
//! never from one run to another. (On a team of P ranks the tree computes, for P = 4,
//! `(x0 + x1) + (x2 + x3)`.)
//!
//! Every collective advances the EC on entry and on completion (a barrier as `BarrierEnter`
//! and `BarrierExit`), as seed 003 asks of synchronizations, and is seen by the hook as one
//! operation with its result (see [`crate::runtime_hooks::Interceptor`]); the
//! messages it is made of are not.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::future::{Fulfiller, Future};
use crate::hook::{Collective, CollectiveAction, CollectiveKind, Interceptor, SyncEvent};
use crate::messages;
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
    pub(crate) algorithm: Cell<Algorithm>,
    /// Fast world reductions done so far (their parity picks the word to use).
    fast_reductions: Cell<u64>,
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
                // `needed == 0` (a one-member team: reduce_one, allgather, split and
                // barrier_async on it) has no mailbox entry: `remove` alone would give None and
                // park the operation as a waiter that no message would ever complete.
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
    let state = rt.state::<CollectiveState>();
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
    messages::send(
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

/// The shape of the binomial tree every collective of this module uses, over ranks `0..n`
/// rooted at 0 (a broadcast renumbers the team so that its root is 0).
pub(crate) mod tree {
    /// The rank `r` sends its partial to: `r` with its lowest set bit cleared (none for 0).
    pub(crate) fn parent(r: usize) -> Option<usize> {
        (r != 0).then(|| r & (r - 1))
    }

    /// The ranks that send their partial to `r`, in increasing order: `r + 2^k` for every
    /// `2^k` below `r`'s lowest set bit (every `2^k` for rank 0), below `n`. The child
    /// `r + 2^k` stands for ranks `r + 2^k .. r + 2^(k+1)` (capped at `n`), so folding them in
    /// this order into `r`'s own value keeps team-rank order.
    pub(crate) fn children(r: usize, n: usize) -> Vec<usize> {
        let below = if r == 0 {
            n.next_power_of_two()
        } else {
            r & r.wrapping_neg()
        };
        (0..usize::BITS)
            .map(|k| 1usize << k)
            .take_while(|&d| d < below && r + d < n)
            .map(|d| r + d)
            .collect()
    }

    /// `op` folded over `values` (one per rank, in rank order) with the parenthesisation of
    /// the tree: what the messages of [`super::reduce_all`] compute, for a rank that holds
    /// every value (the flat algorithms' root, the word path of `reduce_all_u64`). It walks
    /// the tree depth first, children in increasing order, which takes the values in rank
    /// order; no allocation. `None` for no value.
    pub(crate) fn fold<T>(
        values: impl ExactSizeIterator<Item = T>,
        op: impl Fn(T, T) -> T,
    ) -> Option<T> {
        fn subtree<T>(
            r: usize,
            n: usize,
            values: &mut impl Iterator<Item = T>,
            op: &impl Fn(T, T) -> T,
        ) -> T {
            let mut acc = values.next().expect("one value per rank");
            let below = if r == 0 {
                n.next_power_of_two()
            } else {
                r & r.wrapping_neg()
            };
            let mut d = 1;
            while d < below && r + d < n {
                acc = op(acc, subtree(r + d, n, values, op));
                d <<= 1;
            }
            acc
        }
        let n = values.len();
        let mut values = values;
        (n > 0).then(|| subtree(0, n, &mut values, &op))
    }

    /// Rounds of a dissemination barrier of `n` ranks: ⌈log2 n⌉.
    pub(crate) fn rounds(n: usize) -> u32 {
        n.next_power_of_two().trailing_zeros()
    }
}

/// Phase of a reduction's partials going up the tree to team rank 0.
const UP: u64 = 0;
/// Phase of a result going down the tree (broadcast, and the second half of `reduce_all`).
const DOWN: u64 = 1;
/// Phase of `reduce_one`'s result sent from team rank 0 to a root elsewhere.
const TO_ROOT: u64 = 2;

/// How the collectives of a rank move their messages; every algorithm combines values in the
/// same order and parenthesisation (see the module doc), so the choice changes speed only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// Reductions, allgathers and barriers flat on a team whose members share memory (the
    /// smp conduit; the processes of one host on mpi), trees on any other team; broadcasts
    /// down the tree on every team. Measured, a tree's extra rounds cost more than the root's
    /// P − 1 messages where a message is a store into shared memory and ranks outnumber
    /// cores (module doc). The default.
    #[default]
    Auto,
    /// Trees on every team: binomial reductions and broadcasts, dissemination barriers, and
    /// the message tree for `reduce_all_u64` on the world.
    Tree,
    /// Through one rank on every team: team rank 0 (or the root) receives P − 1 messages and
    /// sends P − 1.
    Flat,
}

/// Chooses how this rank's collectives move their messages from now on (a tuning and testing
/// knob; [`Algorithm::Auto`] unless set). Every member of a team must have chosen the same
/// when it starts a collective on it: set it on every rank at the same point of the program,
/// between collectives.
pub fn set_algorithm(algorithm: Algorithm) {
    runtime::with(|rt| rt.state::<CollectiveState>().algorithm.set(algorithm));
}

/// How this rank's collectives move their messages (see [`set_algorithm`]).
pub fn algorithm() -> Algorithm {
    runtime::with(|rt| rt.state::<CollectiveState>().algorithm.get())
}

/// True when a collective starting now on `team` goes through one rank rather than a tree
/// (the same answer on every member: see [`Algorithm`] and `Team::shares_memory`).
fn flat(team: &Team) -> bool {
    match algorithm() {
        Algorithm::Auto => team.shares_memory(),
        Algorithm::Tree => false,
        Algorithm::Flat => true,
    }
}

/// Folds every member's `value` in team-rank order, as the team's collective number `seq`:
/// `Some(result)` at team rank `root`, `None` elsewhere; flat or up the tree.
fn reduce_to<T, F>(
    team: &Team,
    seq: u64,
    value: T,
    op: F,
    root: usize,
    flat: bool,
) -> Future<Option<T>>
where
    T: Serialize + DeserializeOwned + 'static,
    F: Fn(T, T) -> T + 'static,
{
    if flat {
        return gather_fold(team, seq, value, op, root);
    }
    let reduced = reduce_to_zero(team, seq, value, op);
    let me = team.rank_me();
    if root == 0 || (me != 0 && me != root) {
        return reduced;
    }
    // The tree's root is team rank 0, which forwards the result: rooting the tree elsewhere
    // would combine the ranks out of order.
    let team2 = team.clone();
    if me == 0 {
        return reduced.then(move |r| {
            let r = r.expect("team rank 0 holds the reduction");
            runtime::with(|rt| send(rt, &team2, root, seq, TO_ROOT, &encode(&r)));
            None
        });
    }
    let source = team.to_world(0);
    reduced.and_then(move |_| {
        expect_one(&team2, seq, TO_ROOT, 0).then(move |bytes| Some(decode(source, &bytes)))
    })
}

/// The flat reduction: every member sends its value to `root`, which folds them in the
/// tree's parenthesisation (`tree::fold`), so the result has the bits of the tree's
/// (folded at `root` directly: the order is in the fold, not in the route).
fn gather_fold<T, F>(team: &Team, seq: u64, value: T, op: F, root: usize) -> Future<Option<T>>
where
    T: Serialize + DeserializeOwned + 'static,
    F: Fn(T, T) -> T + 'static,
{
    let n = team.rank_n();
    if team.rank_me() != root {
        runtime::with(|rt| send(rt, team, root, seq, UP, &encode(&value)));
        return Future::ready(None);
    }
    let (future, fulfiller) = Future::pending();
    let team2 = team.clone();
    runtime::with(|rt| {
        rt.state::<CollectiveState>()
            .expect((team.id(), seq, UP), n - 1, move |mut arrivals| {
                arrivals.sort_unstable_by_key(|(r, _)| *r);
                let mut others = arrivals.into_iter();
                let mut mine = Some(value);
                let values = (0..n).map(|r| {
                    if r == root {
                        return mine.take().expect("own value");
                    }
                    let (from, bytes) = others.next().expect("one value per member");
                    let source = team2.to_world(r);
                    if from != r {
                        wire::malformed(
                            source,
                            &format!(
                                "a reduction value from team rank {from} where team rank                                  {r}'s was expected"
                            ),
                        );
                    }
                    decode(source, &bytes)
                });
                fulfiller.fulfill(tree::fold(values, op));
            })
    });
    future
}

/// Folds every member's `value` up the binomial tree in team-rank order, as the team's
/// collective number `seq`: `Some(result)` at team rank 0, `None` elsewhere.
fn reduce_to_zero<T, F>(team: &Team, seq: u64, value: T, op: F) -> Future<Option<T>>
where
    T: Serialize + DeserializeOwned + 'static,
    F: Fn(T, T) -> T + 'static,
{
    let me = team.rank_me();
    let children = tree::children(me, team.rank_n());
    // The partial of this rank's subtree goes to the parent; only rank 0 keeps it.
    let finish = move |team: &Team, acc: T| match tree::parent(me) {
        Some(parent) => {
            runtime::with(|rt| send(rt, team, parent, seq, UP, &encode(&acc)));
            None
        }
        None => Some(acc),
    };
    if children.is_empty() {
        return Future::ready(finish(team, value));
    }
    let (future, fulfiller) = Future::pending();
    let team2 = team.clone();
    runtime::with(|rt| {
        rt.state::<CollectiveState>().expect(
            (team.id(), seq, UP),
            children.len(),
            move |mut arrivals| {
                arrivals.sort_unstable_by_key(|(r, _)| *r);
                let mut acc = value;
                for (&child, (from, bytes)) in children.iter().zip(arrivals) {
                    let source = team2.to_world(child);
                    if from != child {
                        wire::malformed(
                            source,
                            &format!(
                                "a reduction partial from team rank {from} where team rank \
                                 {child}'s was expected"
                            ),
                        );
                    }
                    acc = op(acc, decode(source, &bytes));
                }
                fulfiller.fulfill(finish(&team2, acc));
            },
        )
    });
    future
}

/// Sends `bytes` on to this rank's children in the broadcast tree of `root` (largest subtree
/// first: it has the most rounds still to go).
fn forward(rt: &Runtime, team: &Team, seq: u64, root: usize, bytes: &[u8]) {
    let n = team.rank_n();
    let relative = (team.rank_me() + n - root) % n;
    for child in tree::children(relative, n).into_iter().rev() {
        send(rt, team, (child + root) % n, seq, DOWN, bytes);
    }
}

/// The bytes of one message of step `phase` of collective `seq`, from team rank `from`.
fn expect_one(team: &Team, seq: u64, phase: u64, from: usize) -> Future<Vec<u8>> {
    let (future, fulfiller) = Future::pending();
    let source = team.to_world(from);
    runtime::with(|rt| {
        rt.state::<CollectiveState>()
            .expect((team.id(), seq, phase), 1, move |mut arrivals| {
                let (sender, bytes) = arrivals.pop().expect("one message");
                if sender != from {
                    wire::malformed(
                        source,
                        &format!(
                            "collective step {phase} from team rank {sender} where team rank \
                             {from}'s was expected"
                        ),
                    );
                }
                fulfiller.fulfill(bytes);
            })
    });
    future
}

/// Broadcast as the team's collective number `seq` (no EC steps, no hook): the root gives
/// `value`; flat, it sends it to every member, else down the binomial tree, where every
/// member forwards the bytes it receives.
fn broadcast_seq<T>(team: &Team, root: usize, value: Option<T>, seq: u64, flat: bool) -> Future<T>
where
    T: Serialize + DeserializeOwned + 'static,
{
    let n = team.rank_n();
    let me = team.rank_me();
    if me == root {
        let value = value.expect("the root of a broadcast supplies the value");
        if n > 1 {
            let bytes = encode(&value);
            runtime::with(|rt| {
                if flat {
                    for to in (0..n).filter(|&r| r != root) {
                        send(rt, team, to, seq, DOWN, &bytes);
                    }
                } else {
                    forward(rt, team, seq, root, &bytes);
                }
            });
        }
        return Future::ready(value);
    }
    let parent = if flat {
        root
    } else {
        let relative = (me + n - root) % n;
        (tree::parent(relative).expect("not the root") + root) % n
    };
    let team2 = team.clone();
    let source = team.to_world(parent);
    expect_one(team, seq, DOWN, parent).then(move |bytes| {
        if !flat {
            runtime::with(|rt| forward(rt, &team2, seq, root, &bytes));
        }
        decode(source, &bytes)
    })
}

/// `reduce_all` as messages (no EC steps, no hook): a reduction to team rank 0, then a
/// broadcast from it.
fn reduce_all_messages<T, F>(team: &Team, value: T, op: F) -> Future<T>
where
    T: Serialize + DeserializeOwned + 'static,
    F: Fn(T, T) -> T + 'static,
{
    // The one sequence number (and the transport) is taken now, before any continuation
    // runs: a member that started another collective before waiting must number both as the
    // others do.
    let seq = runtime::with(|rt| rt.state::<CollectiveState>().next_seq(team.id()));
    let flat = flat(team);
    let team2 = team.clone();
    reduce_to(team, seq, value, op, 0, flat)
        .and_then(move |r| broadcast_seq(&team2, 0, r, seq, flat))
}

/// Every member's value in team-rank order, given to all (the reduction of one-element lists
/// by concatenation, then a broadcast); also returns the operation's sequence number
/// (for ids derived from it).
pub(crate) fn allgather_seq<T>(team: &Team, value: T) -> Future<(u64, Vec<T>)>
where
    T: Serialize + DeserializeOwned + 'static,
{
    let seq = runtime::with(|rt| rt.state::<CollectiveState>().next_seq(team.id()));
    let flat = flat(team);
    let team2 = team.clone();
    reduce_to(team, seq, vec![value], concat, 0, flat)
        .and_then(move |r| broadcast_seq(&team2, 0, r, seq, flat))
        .then(move |all| (seq, all))
}

fn concat<T>(mut a: Vec<T>, b: Vec<T>) -> Vec<T> {
    a.extend(b);
    a
}

/// A dissemination barrier on `team` as its collective number `seq`, from round `round` on:
/// signal team rank `me + 2^round`, wait for `me - 2^round` (mod P), next round.
fn dissemination(team: Team, seq: u64, round: u32, done: Fulfiller<()>) {
    let (me, n) = (team.rank_me(), team.rank_n());
    if round >= tree::rounds(n) {
        return done.fulfill(());
    }
    let d = 1usize << round;
    runtime::with(|rt| send(rt, &team, (me + d) % n, seq, round.into(), &[]));
    let from = (me + n - d) % n;
    let source = team.to_world(from);
    runtime::with(|rt| {
        rt.state::<CollectiveState>()
            .expect((team.id(), seq, round.into()), 1, move |arrivals| {
                if arrivals[0].0 != from {
                    wire::malformed(
                        source,
                        &format!(
                            "barrier round {round} from team rank {} where team rank {from}'s \
                             was expected",
                            arrivals[0].0
                        ),
                    );
                }
                dissemination(team, seq, round + 1, done)
            })
    });
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

/// Every rank's `value`, in rank order, given to all ranks (MPI `Allgather` on the world team).
pub fn allgather<T>(value: T) -> Future<Vec<T>>
where
    T: Serialize + DeserializeOwned + 'static,
{
    allgather_on(&world(), value)
}

/// Every member's `value`, in team-rank order, given to all members (MPI `Allgather`).
pub fn allgather_on<T>(team: &Team, value: T) -> Future<Vec<T>>
where
    T: Serialize + DeserializeOwned + 'static,
{
    collective(team, CollectiveKind::Allgather, COLLECTIVE, || {
        allgather_seq(team, value).then(|(_, values)| values)
    })
}

/// A team split is a collective over the team: its members exchange their `(color, key)`.
impl Team {
    /// Splits the team (collective over it): ranks with equal `color` form a new team,
    /// ordered by `key`, then by their rank in this team.
    pub fn split(&self, color: u64, key: u64) -> Team {
        let (seq, all) = collective(self, CollectiveKind::Split, COLLECTIVE, || {
            allgather_seq(self, (color, key))
        })
        .wait();
        self.split_by(seq, color, &all)
    }
}

/// Completes when every rank has entered it; does not block (UPC++ `barrier_async`).
pub fn barrier_async() -> Future<()> {
    barrier_async_on(&world())
}

/// Completes when every member of `team` has entered it; does not block (UPC++
/// `barrier_async` on a team).
pub fn barrier_async_on(team: &Team) -> Future<()> {
    let team2 = team.clone();
    collective(team, CollectiveKind::Barrier, BARRIER, || {
        let seq = runtime::with(|rt| rt.state::<CollectiveState>().next_seq(team.id()));
        if flat(team) {
            return reduce_to(team, seq, (), |(), ()| (), 0, true)
                .and_then(move |r| broadcast_seq(&team2, 0, r, seq, true));
        }
        let (future, fulfiller) = Future::pending();
        dissemination(team.clone(), seq, 0, fulfiller);
        future
    })
}

/// Blocks until every member of `team` has entered it.
pub fn barrier_on(team: &Team) {
    if team.id() == world().id() {
        return barrier();
    }
    barrier_async_on(team).wait()
}

/// Blocks until every rank has entered it (the world barrier of the communication core).
pub fn barrier() {
    runtime::with(|rt| {
        // Named here: inside an rpc the core's barrier would fail with "barrier_notify called
        // again before barrier_wait completed" (the rank is already in a barrier), which hides
        // the cause.
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

/// Gives `value` from rank `root` to every rank (other ranks' `value` is ignored).
///
/// # Panics
/// If `root` is not a rank of the job.
pub fn broadcast<T>(value: T, root: usize) -> Future<T>
where
    T: Serialize + DeserializeOwned + 'static,
{
    broadcast_on(&world(), value, root)
}

/// Gives `value` from team rank `root` to every member (other members' `value` is ignored).
///
/// # Panics
/// If `root` is not a team rank.
pub fn broadcast_on<T>(team: &Team, value: T, root: usize) -> Future<T>
where
    T: Serialize + DeserializeOwned + 'static,
{
    team.to_world(root);
    collective(team, CollectiveKind::Broadcast { root }, COLLECTIVE, || {
        let seq = runtime::with(|rt| rt.state::<CollectiveState>().next_seq(team.id()));
        let value = (team.rank_me() == root).then_some(value);
        // A tree even where the members share memory: it costs about what the flat one does
        // there (its root sends ⌈log2 P⌉ messages, and no step waits for all
        // members), unlike the reductions (module doc).
        broadcast_seq(team, root, value, seq, algorithm() == Algorithm::Flat)
    })
}

/// Folds every rank's `value` with `op` in rank order; the result is `Some` at rank `root`,
/// `None` elsewhere.
pub fn reduce_one<T, F>(value: T, op: F, root: usize) -> Future<Option<T>>
where
    T: Serialize + DeserializeOwned + 'static,
    F: Fn(T, T) -> T + 'static,
{
    reduce_one_on(&world(), value, op, root)
}

/// Folds every member's `value` with `op` in team-rank order; the result is `Some` at `root`,
/// `None` elsewhere.
pub fn reduce_one_on<T, F>(team: &Team, value: T, op: F, root: usize) -> Future<Option<T>>
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
    let seq = runtime::with(|rt| rt.state::<CollectiveState>().next_seq(team.id()));
    reduce_to(team, seq, value, op, root, flat(team))
}

/// Folds every rank's `value` with `op` in rank order and gives the result to all.
pub fn reduce_all<T, F>(value: T, op: F) -> Future<T>
where
    T: Serialize + DeserializeOwned + 'static,
    F: Fn(T, T) -> T + 'static,
{
    reduce_all_on(&world(), value, op)
}

/// Folds every member's `value` with `op` in team-rank order and gives the result to all.
pub fn reduce_all_on<T, F>(team: &Team, value: T, op: F) -> Future<T>
where
    T: Serialize + DeserializeOwned + 'static,
    F: Fn(T, T) -> T + 'static,
{
    collective(team, CollectiveKind::ReduceAll, COLLECTIVE, || {
        reduce_all_messages(team, value, op)
    })
}

/// [`reduce_all_u64_on`] over every rank.
pub fn reduce_all_u64(value: u64, op: impl Fn(u64, u64) -> u64 + 'static) -> u64 {
    reduce_all_u64_on(&world(), value, op)
}

/// Folds one `u64` per member with `op` in team-rank order and gives the result to all: what
/// a strict CD's agreement uses, so it is on the hot path of every strict CD's completion.
///
/// On the world team, where every rank can address every segment directly (smp; mpi with
/// all processes on one host), each rank writes its value in its own segment, one barrier of
/// the communication core, then each rank loads every value and folds them in the tree's
/// parenthesisation (the bits of [`reduce_all`]): P loads of shared memory after the core's
/// barrier cost less than any message algorithm (`reduce_all_u64_tree` against
/// `reduce_all_u64_auto` in `pgas-bench`). Where some segment is
/// remote (several hosts, or `PGAS_MPI_PSHM=0`) those loads would be P blocking round trips
/// per rank, so it takes the message tree of [`reduce_all`] instead: O(log P) rounds (and
/// under [`Algorithm::Tree`] always), which is also faster than P gets across processes.
/// Addressability is the same on every rank (a host's
/// processes share memory with each other and with no one else), so all ranks take the same
/// path. Other teams take [`reduce_all`].
///
/// The hook sees it as one collective ([`CollectiveKind::ReduceAllU64`]) with its result, not
/// the barrier, loads or messages it is built from (as the messages of the other
/// collectives); served from a log, the rank writes, sends, waits for and reads nothing.
pub fn reduce_all_u64_on(team: &Team, value: u64, op: impl Fn(u64, u64) -> u64 + 'static) -> u64 {
    if team.id() != world().id() {
        return reduce_all_on(team, value, op).wait();
    }
    let words = algorithm() != Algorithm::Tree && team.shares_memory();
    let run = move || {
        if words {
            Future::ready(fast_reduce_u64(value, op))
        } else {
            reduce_all_messages(&world(), value, op)
        }
    };
    if !runtime::with(|rt| rt.hooked()) {
        runtime::with(|rt| rt.sync(SyncEvent::Collective));
        let result = run().wait();
        runtime::with(|rt| rt.sync(SyncEvent::Collective));
        return result;
    }
    collective(team, CollectiveKind::ReduceAllU64, COLLECTIVE, run).wait()
}

/// The world reduction of [`reduce_all_u64`] through the runtime's reserved words, folded in
/// the tree's parenthesisation so that it gives the bits [`reduce_all`] gives.
///
/// Each rank alternates between two words: a rank writes word `k % 2` in reduction `k` only
/// after barrier `k - 1`, which every rank enters only after reading reduction `k - 2`'s
/// words, so no value is overwritten before it is read. The write is a local store, not a
/// put, so it counts as no incoming write.
fn fast_reduce_u64(value: u64, op: impl Fn(u64, u64) -> u64) -> u64 {
    runtime::with(|rt| {
        let ep = rt.ep();
        let state = rt.state::<CollectiveState>();
        let k = state.fast_reductions.get();
        state.fast_reductions.set(k + 1);
        let at = crate::runtime::FAST_REDUCE_AT + (k % 2) as usize * 8;
        // `at .. at + 8` lies in the runtime's reserved bytes of this rank's own segment;
        // other ranks read it only after the barrier below.
        ep.store_mapped(ep.rank(), at, value)
            .expect("the reserved bytes of the own segment");
        ep.barrier().expect("world barrier");
        let words = (0..ep.ranks()).map(|r| {
            let mut word = [0u8; 8];
            ep.get(r, at, &mut word).expect("reduction word");
            u64::from_ne_bytes(word)
        });
        tree::fold(words, op).expect("at least one rank")
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

#[cfg(test)]
mod tests {
    use super::tree;

    /// The tree's combinations for `n` ranks as a string: `(a b)` is `op(a, b)`.
    fn shape(r: usize, n: usize) -> String {
        tree::children(r, n)
            .into_iter()
            .fold(r.to_string(), |acc, c| format!("({acc} {})", shape(c, n)))
    }

    #[test]
    fn reduction_tree_folds_in_rank_order() {
        assert_eq!(shape(0, 1), "0");
        assert_eq!(shape(0, 4), "((0 1) (2 3))");
        assert_eq!(shape(0, 5), "(((0 1) (2 3)) 4)");
        assert_eq!(shape(0, 6), "(((0 1) (2 3)) (4 5))");
        for n in 1..=200 {
            // Every rank but 0 has one parent, which lists it as a child: each value is
            // combined exactly once.
            let mut seen = vec![0; n];
            for r in 0..n {
                for c in tree::children(r, n) {
                    assert_eq!(tree::parent(c), Some(r), "n = {n}");
                    seen[c] += 1;
                }
            }
            assert_eq!(tree::parent(0), None);
            assert!(seen[1..].iter().all(|&k| k == 1), "n = {n}: {seen:?}");
            // Dropping the parentheses leaves the ranks in order.
            let flat: Vec<usize> = shape(0, n)
                .replace(['(', ')'], "")
                .split(' ')
                .map(|t| t.parse().unwrap())
                .collect();
            assert_eq!(flat, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    /// The fold of the tree, rank by rank through its children (what the messages compute).
    fn by_messages(r: usize, n: usize, op: &impl Fn(u64, u64) -> u64) -> u64 {
        tree::children(r, n)
            .into_iter()
            .fold(1000 + r as u64, |acc, c| op(acc, by_messages(c, n, op)))
    }

    #[test]
    fn word_fold_has_the_trees_parenthesisation() {
        // Neither associative nor commutative: any other parenthesisation or order differs.
        let op = |a: u64, b: u64| a.wrapping_mul(31).wrapping_add(b) ^ (b >> 3);
        for n in 1..=300 {
            let words = tree::fold((0..n).map(|r| 1000 + r as u64), op).unwrap();
            assert_eq!(words, by_messages(0, n, &op), "n = {n}");
        }
        let left = (1..5u64).fold(1000, |a, r| op(a, 1000 + r));
        assert_ne!(tree::fold((0..5).map(|r| 1000 + r as u64), op), Some(left));
        assert_eq!(tree::fold(Vec::<u64>::new().into_iter(), op), None);
    }

    #[test]
    fn tree_depth_and_fan_in_are_logarithmic() {
        for n in 1..=1000usize {
            let log = tree::rounds(n) as usize;
            assert!(1usize << log >= n);
            assert!(log == 0 || 1usize << (log - 1) < n);
            for r in 0..n {
                assert!(tree::children(r, n).len() <= log, "n = {n}, rank {r}");
                let mut depth = 0;
                let mut at = r;
                while let Some(p) = tree::parent(at) {
                    at = p;
                    depth += 1;
                }
                assert!(depth <= log, "n = {n}, rank {r}: depth {depth}");
            }
        }
    }
}
