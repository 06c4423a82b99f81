//! Communication between ranks over `pgas`: message plans for ghost-zone exchanges and
//! inter-level transfers, and the rank-count-independent reductions.
//!
//! A [`Plan`] is built identically on every rank from the global box layout: a list of
//! items (box-to-box transfers) in a fixed global order, grouped into messages either one per
//! item (the naturally-grained puts of the UPC++ port of HPGMG) or one per peer rank
//! (aggregated). Every rank owns, per plan, an inbox in its shared segment holding each
//! incoming message at a fixed offset, in one of several slots (the plan's execution count
//! modulo the slot count). A sender packs a message and `rput`s it into the receiver's inbox
//! and signals its arrival ([`Arrival`]); the receiver waits for it, then unpacks in the
//! plan's order.
//!
//! Two slots per message are enough: a rank sends execution n+2 of a plan only after it has
//! received what its peers sent in execution n+1, which they sent after consuming
//! execution n (ghost exchanges are symmetric; inter-level transfers of one plan are
//! separated by the opposite transfer or by a collective). Under relaxed CDs a plan has
//! [`FLAG_SLOTS`] slots, so that within one smoother CD every slot is written once (see
//! [`Arrival::Flags`]).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use std::sync::atomic::{Ordering, fence};

use pgas::{Completions, GlobalPtr, Promise, Signal, allgather, new_array};

use crate::kernels::NUM_SMOOTHS;

/// How ghost zones travel between ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExchangeMode {
    /// One rput per box-to-box region (naturally grained).
    PerBox,
    /// One rput per neighbour rank, all its regions packed together.
    #[default]
    Aggregated,
}

impl std::str::FromStr for ExchangeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "box" | "per-box" | "put" => Ok(ExchangeMode::PerBox),
            "agg" | "aggregated" | "rank" => Ok(ExchangeMode::Aggregated),
            _ => Err(format!("unknown exchange mode `{s}` (box or agg)")),
        }
    }
}

/// How a receiver learns that a message has landed in its inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arrival {
    /// A remote-completion rpc counts the arrival at the receiver (two slots per message).
    #[default]
    Rpc,
    /// After the message the sender puts the plan's execution number into a flag of the
    /// receiver's segment, one flag per message and slot; the receiver polls it. Used under
    /// relaxed CDs: a relaxed recovery replays an incoming rpc by running its function again,
    /// and the arrival rpc counts into rank state no CD restores (it would count twice); with
    /// [`FLAG_SLOTS`] slots every inbox slot and flag is written once per smoother CD, so the
    /// replayed puts leave each slot and flag as the first execution read them.
    Flags,
}

/// Slots per message under [`Arrival::Flags`]: one per exchange of a smoother call (a red
/// and a black sweep per smooth), the executions of the ghost plan inside one smoother CD.
pub const FLAG_SLOTS: usize = 2 * NUM_SMOOTHS;

impl Arrival {
    /// Inbox slots per message.
    pub fn slots(self) -> usize {
        match self {
            Arrival::Rpc => 2,
            Arrival::Flags => FLAG_SLOTS,
        }
    }
}

thread_local! {
    static COUNTS: RefCell<HashMap<u32, usize>> = RefCell::new(HashMap::new());
    static NEXT_PLAN: Cell<u32> = const { Cell::new(0) };
    static MODE: Cell<ExchangeMode> = const { Cell::new(ExchangeMode::Aggregated) };
    static ARRIVAL: Cell<Arrival> = const { Cell::new(Arrival::Rpc) };
}

/// The arrival rpc: one more message for `key` (plan id * 2 + slot) is in this rank's inbox.
#[pgas::remote]
fn arrived(key: u32) {
    COUNTS.with(|c| *c.borrow_mut().entry(key).or_insert(0) += 1);
}

/// Prepares this rank (inside `pgas::launch`) to build plans.
pub fn start_rank(mode: ExchangeMode, arrival: Arrival) {
    COUNTS.with(|c| c.borrow_mut().clear());
    NEXT_PLAN.with(|n| n.set(0));
    MODE.with(|m| m.set(mode));
    ARRIVAL.with(|a| a.set(arrival));
}

/// Ranks of the job this code runs in (1 outside `pgas::launch`).
pub fn world_ranks() -> usize {
    if pgas::in_launch() { pgas::rank_n() } else { 1 }
}

fn wait_arrivals(key: u32, need: usize) {
    loop {
        let done = COUNTS.with(|c| {
            let mut c = c.borrow_mut();
            let n = c.entry(key).or_insert(0);
            if *n >= need {
                *n -= need;
                true
            } else {
                false
            }
        });
        if done {
            return;
        }
        if pgas::progress() == 0 {
            std::thread::yield_now();
        }
    }
}

/// Waits, making progress, until `flag` (this rank's own) holds exactly `seq`. No later
/// number can be there (a sender is at most one execution ahead, and that one goes to
/// another slot), and an exact match ignores what is not this execution's arrival: the
/// numbers of an execution a strict CD abandoned, and the poison of an emulated memory loss
/// (`0xDB..`, larger than any sequence number).
///
/// The wait steps the EC after the flag held (`pgas::wait_until`): a relaxed CD replaying
/// this rank applies the writes that landed after it in a later epoch than the message.
fn wait_flag(flag: GlobalPtr<u64>, seq: u64) {
    pgas::wait_until(flag, |v| v == seq).expect("this rank's own flags");
    // The message was complete at this rank before its flag was set.
    fence(Ordering::Acquire);
}

/// One message of a plan: a peer, a range of the plan's items, where it lands.
#[derive(Debug, Clone)]
struct Msg {
    peer: usize,
    items: std::ops::Range<usize>,
    /// Offset in the receiver's inbox (per slot).
    offset: usize,
    len: usize,
    /// The receiver's inbox (for sends).
    remote: GlobalPtr<f64>,
    /// Reals per slot in the receiver's inbox.
    stride: usize,
    /// [`Arrival::Flags`]: this message's flag in slot 0 of the receiver's flags (slot s at
    /// `+ s * flag_stride`); null otherwise.
    flag: GlobalPtr<u64>,
    /// Flags per slot at the receiver (its incoming messages).
    flag_stride: usize,
}

/// A transfer item of the global list: who sends, who receives, how many reals.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// Sending rank.
    pub src: usize,
    /// Receiving rank.
    pub dst: usize,
    /// Reals carried.
    pub len: usize,
}

/// The messages of one transfer pattern on this rank; `T` describes one item.
#[derive(Debug, Clone)]
pub struct Plan<T> {
    id: u32,
    /// The items this rank sends, in message order.
    send_items: Vec<T>,
    /// The items this rank receives, in message order.
    recv_items: Vec<T>,
    sends: Vec<Msg>,
    recvs: Vec<Msg>,
    inbox: GlobalPtr<f64>,
    /// Reals per slot in this rank's inbox.
    inbox_len: usize,
    /// Inbox slots per message.
    slots: usize,
    arrival: Arrival,
    /// This rank's arrival flags under [`Arrival::Flags`] (null otherwise) and their number.
    flags: GlobalPtr<u64>,
    flags_len: usize,
    /// Executions so far (the slot and the flags' sequence number derive from it).
    execs: Cell<u64>,
    scratch: RefCell<Vec<f64>>,
}

impl<T: Clone> Plan<T> {
    /// An empty plan (one rank).
    pub fn empty() -> Plan<T> {
        Plan {
            id: u32::MAX,
            send_items: Vec::new(),
            recv_items: Vec::new(),
            sends: Vec::new(),
            recvs: Vec::new(),
            inbox: GlobalPtr::null(),
            inbox_len: 0,
            slots: 2,
            arrival: Arrival::Rpc,
            flags: GlobalPtr::null(),
            flags_len: 0,
            execs: Cell::new(0),
            scratch: RefCell::new(Vec::new()),
        }
    }

    /// Executions of this plan so far on this rank (a relaxed CD preserves it, so that its
    /// re-execution uses the same slots and sequence numbers as the first execution).
    pub fn executions(&self) -> u64 {
        self.execs.get()
    }

    /// Puts back a count from [`Plan::executions`].
    pub fn set_executions(&self, n: u64) {
        self.execs.set(n);
    }

    /// This rank's arrival flags under [`Arrival::Flags`] (a dependency-limited re-execution
    /// must find them as they were at its begin), and their number.
    pub fn flags(&self) -> Option<(GlobalPtr<u64>, usize)> {
        (!self.flags.is_null()).then_some((self.flags, self.flags_len))
    }

    /// True when this rank neither sends nor receives.
    pub fn is_idle(&self) -> bool {
        self.sends.is_empty() && self.recvs.is_empty()
    }

    /// Collective over the world (every rank builds the same plans in the same order):
    /// builds the plan from the global list of remote items (`src != dst`), in order.
    pub fn build(items: Vec<(Route, T)>) -> Plan<T> {
        if world_ranks() == 1 {
            return Plan::empty();
        }
        let me = pgas::rank_me();
        let n = pgas::rank_n();
        let id = NEXT_PLAN.with(|p| {
            let id = p.get();
            p.set(id + 1);
            id
        });
        let mode = MODE.with(|m| m.get());
        let arrival = ARRIVAL.with(|a| a.get());
        let slots = arrival.slots();
        // Group items into messages: per item, or per (src, dst) pair in first-item order.
        let mut groups: Vec<(Route, Vec<usize>)> = Vec::new();
        match mode {
            ExchangeMode::PerBox => {
                for (i, (r, _)) in items.iter().enumerate() {
                    groups.push((*r, vec![i]));
                }
            }
            ExchangeMode::Aggregated => {
                let mut at: HashMap<(usize, usize), usize> = HashMap::new();
                for (i, (r, _)) in items.iter().enumerate() {
                    let g = *at.entry((r.src, r.dst)).or_insert_with(|| {
                        groups.push((
                            Route {
                                src: r.src,
                                dst: r.dst,
                                len: 0,
                            },
                            Vec::new(),
                        ));
                        groups.len() - 1
                    });
                    groups[g].0.len += r.len;
                    groups[g].1.push(i);
                }
            }
        }
        // Inbox offsets and flag indices: per receiver, messages in group order.
        let mut fill = vec![0usize; n];
        let mut incoming = vec![0usize; n];
        let mut offsets = Vec::with_capacity(groups.len());
        for (r, _) in &groups {
            offsets.push((fill[r.dst], incoming[r.dst]));
            fill[r.dst] += r.len;
            incoming[r.dst] += 1;
        }
        let inbox_len = fill[me];
        fn too_small<P>(e: pgas::PgasError) -> P {
            panic!("hpgmg: shared segment too small for the exchange buffers: {e}")
        }
        let inbox = new_array::<f64>((slots * inbox_len).max(1)).unwrap_or_else(too_small);
        let flags_len = (slots * incoming[me]).max(1);
        let flags = if arrival == Arrival::Flags {
            let len = flags_len;
            let f = new_array::<u64>(len).unwrap_or_else(too_small);
            // The segment may hold an earlier allocation's bytes; a flag starts below every
            // sequence number.
            f.write_local_slice(&vec![0; len])
                .expect("this rank's own flags are local");
            f
        } else {
            GlobalPtr::null()
        };
        let bases = allgather((inbox.offset() as u64, flags.offset() as u64)).wait();
        let mut plan = Plan {
            id,
            send_items: Vec::new(),
            recv_items: Vec::new(),
            sends: Vec::new(),
            recvs: Vec::new(),
            inbox,
            inbox_len,
            slots,
            arrival,
            flags,
            flags_len,
            execs: Cell::new(0),
            scratch: RefCell::new(Vec::new()),
        };
        for ((r, members), (offset, index)) in groups.into_iter().zip(offsets) {
            if r.src == me {
                let start = plan.send_items.len();
                plan.send_items
                    .extend(members.iter().map(|&i| items[i].1.clone()));
                plan.sends.push(Msg {
                    peer: r.dst,
                    items: start..plan.send_items.len(),
                    offset,
                    len: r.len,
                    remote: GlobalPtr::from_raw(r.dst, bases[r.dst].0 as usize),
                    stride: fill[r.dst],
                    flag: if arrival == Arrival::Flags {
                        GlobalPtr::from_raw(r.dst, bases[r.dst].1 as usize) + index
                    } else {
                        GlobalPtr::null()
                    },
                    flag_stride: incoming[r.dst],
                });
            }
            if r.dst == me {
                let start = plan.recv_items.len();
                plan.recv_items
                    .extend(members.iter().map(|&i| items[i].1.clone()));
                plan.recvs.push(Msg {
                    peer: r.src,
                    items: start..plan.recv_items.len(),
                    offset,
                    len: r.len,
                    remote: GlobalPtr::null(),
                    stride: inbox_len,
                    flag: if arrival == Arrival::Flags {
                        flags + index
                    } else {
                        GlobalPtr::null()
                    },
                    flag_stride: incoming[me],
                });
            }
        }
        plan
    }

    /// Sends this rank's messages: `pack(item, buf)` appends an item's reals.
    /// Returns the slot to pass to [`Plan::receive`].
    pub fn send(&self, mut pack: impl FnMut(&T, &mut Vec<f64>)) -> Slot {
        let execs = self.execs.get() + 1;
        self.execs.set(execs);
        let slot = Slot {
            index: ((execs - 1) % self.slots as u64) as usize,
            seq: execs,
        };
        if self.sends.is_empty() {
            return slot;
        }
        let mut buf = self.scratch.borrow_mut();
        for m in &self.sends {
            buf.clear();
            for item in &self.send_items[m.items.clone()] {
                pack(item, &mut buf);
            }
            debug_assert_eq!(buf.len(), m.len, "message to rank {}", m.peer);
            let dst = m.remote + (m.offset + slot.index * m.stride);
            match self.arrival {
                Arrival::Rpc => {
                    let key = self.id * 2 + slot.index as u32;
                    let sent = Promise::new();
                    let cx = Completions::new()
                        .source_promise(&sent)
                        .remote_rpc(arrived, key);
                    let _ = pgas::rput_with(&buf, dst, cx);
                    sent.finalize().wait();
                }
                Arrival::Flags => {
                    // A synchronization of the program: the EC steps before the message
                    // leaves, and the flag is set once its bytes landed.
                    let flag = m.flag + slot.index * m.flag_stride;
                    pgas::put_signal(&buf, dst, flag, Signal::Set(slot.seq))
                        .expect("a message and its flag are on the receiver");
                }
            }
        }
        slot
    }

    /// Waits for this rank's messages of the execution that `slot` names and unpacks them:
    /// `unpack(item, data)` gets each item's reals.
    pub fn receive(
        &self,
        slot: Slot,
        item_len: impl Fn(&T) -> usize,
        mut unpack: impl FnMut(&T, &[f64]),
    ) {
        if self.recvs.is_empty() {
            return;
        }
        match self.arrival {
            Arrival::Rpc => wait_arrivals(self.id * 2 + slot.index as u32, self.recvs.len()),
            Arrival::Flags => {
                for m in &self.recvs {
                    wait_flag(m.flag + slot.index * m.flag_stride, slot.seq);
                }
            }
        }
        let mut buf = self.scratch.borrow_mut();
        buf.resize(self.inbox_len, 0.0);
        (self.inbox + slot.index * self.inbox_len)
            .read_local_slice(&mut buf[..self.inbox_len])
            .expect("this rank's own inbox is local");
        for m in &self.recvs {
            let mut at = m.offset;
            for item in &self.recv_items[m.items.clone()] {
                let n = item_len(item);
                unpack(item, &buf[at..at + n]);
                at += n;
            }
            debug_assert_eq!(at, m.offset + m.len);
        }
    }
}

/// Where one execution of a plan lands: the inbox slot, and the sequence number its flags
/// carry under [`Arrival::Flags`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    index: usize,
    seq: u64,
}
