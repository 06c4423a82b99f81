//! The smp conduit's active-message inbox: one single-producer, single-consumer *lane* per
//! (source, target) pair, each a chain of rings of 128-byte slots that hold small messages
//! inline.
//!
//! **Why lanes.** On smp an AM round trip costs what the cache lines it moves between the two
//! cores cost; the floor is one line there and back (`cacheline_roundtrip` in `bridge-bench`).
//! A multi-producer queue per target moves several lines per message (the queue's tail index
//! that the target polls and every sender updates with a read-modify-write, the message
//! copied into a block slot, the slot's state word, and blocks allocated by senders and freed
//! by the target), and the message is boxed or copied whole. A lane per pair needs none of
//! that.
//!
//! A lane has one writer, so it needs no read-modify-write: the sender writes the message into
//! the next slot and then publishes it with a release store of the slot's *stamp* (position +
//! 1); the target polls the stamp of the slot it expects next. A message of at most six
//! argument words fits in the slot's first 64-byte line together with its stamp, so a short
//! AM moves one line to the target and nothing else; pgas's rpc (seven words) uses the second
//! line too. The target never writes a slot: it returns slots by a release store of its
//! position (`head`) in a line of its own, which the sender reads only when it finds its
//! cached copy says the ring is full (once per ring's worth of messages).
//!
//! **Never full.** Handlers may send (a reply, new requests) and must not block, so a send
//! cannot wait for room: when a ring is full the sender links a new ring, twice as large up to
//! [`MAX_SLOTS`], and writes there from then on. The target drains the old ring, follows the
//! link and frees the old ring. Messages larger than a slot (many arguments, medium payloads
//! over [`INLINE_BYTES`] less the arguments) travel as a boxed [`Message`] whose pointer the
//! slot carries.
//!
//! **Order.** A lane is FIFO, so the messages from one rank to another run in the order they
//! were sent.
//!
//! **Memory.** A lane costs two padded lines until its first message; its first ring
//! ([`FIRST_SLOTS`] slots, 4 KiB) is allocated by the first send, so a job pays for the pairs
//! that talk, not for `ranks x ranks` rings.
//!
//! **Checked.** The loom model `tests/loom_lane.rs` drives this code on loom's atomics and
//! cells (`crate::sync`, under `--cfg loom`), with rings of [`FIRST_SLOTS`] = 2 growing to 4.

use std::ptr;

use crossbeam_utils::CachePadded;

use crate::counters::WriteAck;
use crate::message::{Body, Message, MessageView, Payload};
use crate::sync::{AtomicPtr, AtomicU64, Ordering, UnsafeCell};

/// Words of arguments and payload a slot holds inline.
pub(crate) const SLOT_WORDS: usize = 14;
/// Bytes of arguments and payload a slot holds inline.
pub(crate) const INLINE_BYTES: usize = SLOT_WORDS * 8;
/// Slots of a lane's first ring.
#[cfg(not(loom))]
pub const FIRST_SLOTS: usize = 32;
/// Slots of the largest ring; a lane that needs more room links further rings of this size.
#[cfg(not(loom))]
pub const MAX_SLOTS: usize = 1024;

// The loom model (`tests/loom_lane.rs`) explores every interleaving, which only rings of a few
// slots keep tractable; growing, wrapping and linking work the same at any power of two.
/// Slots of a lane's first ring.
#[cfg(loom)]
pub const FIRST_SLOTS: usize = 2;
/// Slots of the largest ring.
#[cfg(loom)]
pub const MAX_SLOTS: usize = 4;

// The `kind` field of a slot's metadata.
const SHORT: u64 = 0;
const MEDIUM: u64 = 1;
const LONG: u64 = 2;
/// `words[0]` is a `Box<Message>` turned into a raw pointer.
const BOXED: u64 = 3;

/// A message's description as the slot stores it, packed in one word: handler (16 bits),
/// argument count (8), kind (2), reply flag (1), and a medium payload's length (32).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta(u64);

impl Meta {
    fn new(handler: u16, nargs: usize, kind: u64, is_reply: bool, len: usize) -> Meta {
        debug_assert!(nargs <= u8::MAX as usize && len <= u32::MAX as usize);
        Meta(
            handler as u64
                | (nargs as u64) << 16
                | kind << 24
                | (is_reply as u64) << 26
                | (len as u64) << 32,
        )
    }
    fn handler(self) -> u16 {
        self.0 as u16
    }
    fn nargs(self) -> usize {
        (self.0 >> 16) as u8 as usize
    }
    fn kind(self) -> u64 {
        (self.0 >> 24) & 3
    }
    fn is_reply(self) -> bool {
        self.0 >> 26 & 1 == 1
    }
    fn len(self) -> usize {
        (self.0 >> 32) as usize
    }
    /// The words of `words` this message uses (all that the target copies out of the slot).
    fn words_used(self) -> usize {
        match self.kind() {
            SHORT => self.nargs(),
            MEDIUM => (self.nargs() * 8 + self.len()).div_ceil(8),
            LONG => self.nargs() + 4,
            _ => 1,
        }
    }
}

/// What a message carries besides its arguments, as the sender hands it over.
#[derive(Debug, Clone, Copy)]
pub enum Outgoing<'a> {
    Short,
    Medium(&'a [u8]),
    /// The payload already sits in the target's segment.
    Long {
        offset: usize,
        len: usize,
        ack: WriteAck,
    },
}

/// The contents of a slot: its metadata and inline words.
#[derive(Clone, Copy)]
#[repr(C)]
struct SlotData {
    meta: u64,
    words: [u64; SLOT_WORDS],
}

/// One message's place in a ring: 128 bytes, its stamp and metadata and the first six words
/// in the first cache line.
#[repr(C, align(128))]
struct Slot {
    /// Position + 1 of the message the slot holds; anything else means "not yet written".
    stamp: AtomicU64,
    data: UnsafeCell<SlotData>,
}

/// A ring of slots, and the link to the ring the sender moved on to when this one was full.
struct Ring {
    slots: Box<[Slot]>,
    /// The target's position in this ring: slots of positions below it may be reused.
    head: CachePadded<AtomicU64>,
    /// The next ring, set once by the sender after its last write into this one.
    next: AtomicPtr<Ring>,
}

impl Ring {
    /// A ring of `slots` slots (a power of two), all unwritten, on the heap.
    fn boxed(slots: usize) -> *mut Ring {
        debug_assert!(slots.is_power_of_two());
        let slots = (0..slots)
            .map(|_| Slot {
                stamp: AtomicU64::new(0),
                data: UnsafeCell::new(SlotData {
                    meta: 0,
                    words: [0; SLOT_WORDS],
                }),
            })
            .collect();
        Box::into_raw(Box::new(Ring {
            slots,
            head: CachePadded::new(AtomicU64::new(0)),
            next: AtomicPtr::new(ptr::null_mut()),
        }))
    }

    fn slot(&self, position: u64) -> &Slot {
        &self.slots[position as usize & (self.slots.len() - 1)]
    }
}

/// The sender's end of a lane. Atomics only so that the struct is `Sync`: one thread uses it
/// at a time (see [`Lane::push`]), with relaxed accesses, which cost plain loads and stores.
#[derive(Default)]
struct SendEnd {
    ring: AtomicPtr<Ring>,
    /// Position of the next message in `ring`.
    tail: AtomicU64,
    /// The last `head` of `ring` read; the ring has at least `len - (tail - head)` free slots.
    head: AtomicU64,
}

/// The target's end of a lane (one thread at a time, see [`Lane::pop`]).
#[derive(Default)]
struct ReceiveEnd {
    ring: AtomicPtr<Ring>,
    /// Position of the next message in `ring`.
    position: AtomicU64,
}

/// Messages from one rank to one rank, in order.
#[derive(Default)]
pub struct Lane {
    send: CachePadded<SendEnd>,
    receive: CachePadded<ReceiveEnd>,
    /// The lane's first ring, published by the first send (null until then).
    first: AtomicPtr<Ring>,
}

// SAFETY: the slots' `UnsafeCell`s are written only by the lane's one sender, in a slot the
// target has returned (its position is below the ring's `head`, read with acquire), and read
// only by the lane's one target after an acquire load of the stamp the sender released after
// writing; `push` and `pop` are `unsafe` with the one-thread-per-end contract that makes this
// so. Rings are freed only by the target, after the sender has moved on for good.
unsafe impl Sync for Lane {}
// SAFETY: the raw ring pointers are owned by the lane (freed by the target or by `Drop`).
unsafe impl Send for Lane {}

/// A message taken out of a lane: copied out of its slot, or the boxed message a slot pointed
/// to. It owns what it holds, so the slot is returned before the handler runs.
// The loom model sees this type (`crate::for_loom`) but only through `args`.
#[cfg_attr(loom, allow(private_interfaces))]
pub enum Incoming {
    Inline {
        meta: Meta,
        words: [u64; SLOT_WORDS],
    },
    Boxed(Box<Message>),
}

impl std::fmt::Debug for Incoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Incoming::Inline { meta, .. } => write!(f, "Inline({meta:?})"),
            Incoming::Boxed(m) => write!(f, "Boxed({m:?})"),
        }
    }
}

impl Incoming {
    /// The message's arguments, for the loom model (`tests/loom_lane.rs`), which checks them
    /// and cannot see the crate's `MessageView`.
    #[cfg(loom)]
    pub fn args(&self) -> &[u64] {
        self.view(0).args
    }

    /// The message as a handler sees it, from `source`.
    pub(crate) fn view(&self, source: usize) -> MessageView<'_> {
        match self {
            Incoming::Boxed(message) => message.view(),
            Incoming::Inline { meta, words } => {
                let nargs = meta.nargs();
                let payload = match meta.kind() {
                    MEDIUM => {
                        let bytes: &[u8] = bytemuck::cast_slice(&words[..]);
                        Payload::Medium(&bytes[nargs * 8..nargs * 8 + meta.len()])
                    }
                    LONG => Payload::Long {
                        offset: words[nargs] as usize,
                        len: words[nargs + 1] as usize,
                        ack: WriteAck {
                            ec: words[nargs + 2],
                            iwc: words[nargs + 3],
                        },
                    },
                    _ => Payload::None,
                };
                MessageView {
                    source: source as u32,
                    handler: meta.handler(),
                    is_reply: meta.is_reply(),
                    args: &words[..nargs],
                    payload,
                }
            }
        }
    }
}

impl Lane {
    /// Appends a message (at most [`crate::MAX_ARGS`] arguments) from `source`.
    ///
    /// # Safety
    /// At most one thread at a time calls `push` on a lane (its source rank's endpoint, which
    /// is unique and `!Sync`).
    pub unsafe fn push(
        &self,
        source: usize,
        handler: u16,
        is_reply: bool,
        args: &[u64],
        body: Outgoing<'_>,
    ) {
        let nargs = args.len();
        let mut data = SlotData {
            meta: 0,
            words: [0; SLOT_WORDS],
        };
        // The words to write; the rest of the slot keeps whatever it held (never read).
        let used;
        match body {
            Outgoing::Short if nargs <= SLOT_WORDS => {
                data.meta = Meta::new(handler, nargs, SHORT, is_reply, 0).0;
                data.words[..nargs].copy_from_slice(args);
                used = nargs;
            }
            Outgoing::Medium(bytes) if nargs * 8 + bytes.len() <= INLINE_BYTES => {
                data.meta = Meta::new(handler, nargs, MEDIUM, is_reply, bytes.len()).0;
                data.words[..nargs].copy_from_slice(args);
                let inline: &mut [u8] = bytemuck::cast_slice_mut(&mut data.words[..]);
                inline[nargs * 8..nargs * 8 + bytes.len()].copy_from_slice(bytes);
                used = (nargs * 8 + bytes.len()).div_ceil(8);
            }
            Outgoing::Long { offset, len, ack } if nargs + 4 <= SLOT_WORDS => {
                data.meta = Meta::new(handler, nargs, LONG, is_reply, 0).0;
                data.words[..nargs].copy_from_slice(args);
                data.words[nargs..nargs + 4].copy_from_slice(&[
                    offset as u64,
                    len as u64,
                    ack.ec,
                    ack.iwc,
                ]);
                used = nargs + 4;
            }
            _ => {
                let message = Message {
                    source: source as u32,
                    handler,
                    is_reply,
                    args: crate::message::Args::new(args)
                        .expect("the endpoint checked the argument count"),
                    body: match body {
                        Outgoing::Short => Body::Short,
                        Outgoing::Medium(bytes) => Body::Medium(bytes.to_vec()),
                        Outgoing::Long { offset, len, ack } => Body::Long { offset, len, ack },
                    },
                };
                data.meta = Meta::new(handler, 0, BOXED, is_reply, 0).0;
                data.words[0] = Box::into_raw(Box::new(message)) as u64;
                used = 1;
            }
        }
        // SAFETY: the caller guarantees this thread is the lane's only sender.
        let slot = unsafe { self.claim() };
        // SAFETY: `claim` returned a slot the target has given back (or never had) and will
        // not read before the stamp below; only this thread writes it meanwhile. Only the
        // words the message uses are written, so a short message touches one cache line.
        slot.data.with_mut(|to| unsafe {
            ptr::addr_of_mut!((*to).meta).write(data.meta);
            let words = ptr::addr_of_mut!((*to).words) as *mut u64;
            ptr::copy_nonoverlapping(data.words.as_ptr(), words, used);
        });
        let tail = self.send.tail.load(Ordering::Relaxed);
        // Release: the target that acquires this stamp sees the slot's contents.
        slot.stamp.store(tail + 1, Ordering::Release);
        self.send.tail.store(tail + 1, Ordering::Relaxed);
    }

    /// The slot for the sender's next message: in the current ring if it has room, else in a
    /// new ring linked after it (the first send allocates the lane's first ring).
    ///
    /// # Safety
    /// As [`Lane::push`]: the calling thread is the lane's only sender.
    unsafe fn claim(&self) -> &Slot {
        let mut ring = self.send.ring.load(Ordering::Relaxed);
        if ring.is_null() {
            ring = Ring::boxed(FIRST_SLOTS);
            self.send.ring.store(ring, Ordering::Relaxed);
            // Release: the target that finds the ring here sees it initialized.
            self.first.store(ring, Ordering::Release);
        }
        // SAFETY: the sender's ring is never freed while the sender may still write into it:
        // the target frees a ring only after it has found its `next` link set, which the
        // sender does only when it leaves the ring for good.
        let mut r = unsafe { &*ring };
        let tail = self.send.tail.load(Ordering::Relaxed);
        let len = r.slots.len() as u64;
        if tail - self.send.head.load(Ordering::Relaxed) >= len {
            // Acquire: the target's reads of the slots it returned happened before we reuse them.
            let head = r.head.load(Ordering::Acquire);
            self.send.head.store(head, Ordering::Relaxed);
            if tail - head >= len {
                let grown = Ring::boxed((len as usize * 2).min(MAX_SLOTS));
                // Release: the target that follows the link sees the new ring initialized and
                // every message written into the old one (all before this store).
                r.next.store(grown, Ordering::Release);
                self.send.ring.store(grown, Ordering::Relaxed);
                self.send.tail.store(0, Ordering::Relaxed);
                self.send.head.store(0, Ordering::Relaxed);
                // SAFETY: just allocated; freed only by the target after it drains it and
                // finds its own `next` link set.
                r = unsafe { &*grown };
                return r.slot(0);
            }
        }
        r.slot(tail)
    }

    /// Takes the next message, if one has arrived.
    ///
    /// # Safety
    /// At most one thread at a time calls `pop` or [`Lane::is_empty`] on a lane (its target
    /// rank's endpoint).
    pub unsafe fn pop(&self) -> Option<Incoming> {
        let mut ring = self.receive.ring.load(Ordering::Relaxed);
        if ring.is_null() {
            // Acquire: pairs with the release that published the first ring.
            ring = self.first.load(Ordering::Acquire);
            if ring.is_null() {
                return None;
            }
            self.receive.ring.store(ring, Ordering::Relaxed);
        }
        loop {
            // SAFETY: only this (the target's) thread frees rings, and not this one yet.
            let r = unsafe { &*ring };
            let position = self.receive.position.load(Ordering::Relaxed);
            let slot = r.slot(position);
            // Acquire: pairs with the sender's release of the stamp.
            if slot.stamp.load(Ordering::Acquire) != position + 1 {
                // Acquire: the link is stored after the sender's last write into this ring.
                let next = r.next.load(Ordering::Acquire);
                if next.is_null() || slot.stamp.load(Ordering::Acquire) == position + 1 {
                    if next.is_null() {
                        return None;
                    }
                    // The message was published before the link: take it below.
                } else {
                    // Drained, and the sender has moved on for good: free the ring.
                    self.receive.ring.store(next, Ordering::Relaxed);
                    self.receive.position.store(0, Ordering::Relaxed);
                    // SAFETY: allocated by `Ring::boxed`; the sender will not touch it again
                    // (it linked `next`) and this thread holds no reference into it.
                    drop(unsafe { Box::from_raw(ring) });
                    ring = next;
                    continue;
                }
            }
            // SAFETY: the stamp (acquired) says the sender has written this slot and will not
            // write it again before `head` passes it; only the words the metadata names are
            // read.
            let incoming = slot.data.with(|from| unsafe {
                let meta = Meta(ptr::addr_of!((*from).meta).read());
                if meta.kind() == BOXED {
                    let boxed = ptr::addr_of!((*from).words[0]).read() as *mut Message;
                    // The pointer came from `Box::into_raw` in `push` and is taken once.
                    Incoming::Boxed(Box::from_raw(boxed))
                } else {
                    let mut words = [0u64; SLOT_WORDS];
                    let used = meta.words_used().min(SLOT_WORDS);
                    ptr::copy_nonoverlapping(
                        ptr::addr_of!((*from).words) as *const u64,
                        words.as_mut_ptr(),
                        used,
                    );
                    Incoming::Inline { meta, words }
                }
            });
            self.receive.position.store(position + 1, Ordering::Relaxed);
            // Release: our reads of the slot happen before the sender reuses it.
            r.head.store(position + 1, Ordering::Release);
            return Some(incoming);
        }
    }

    /// True if no message is waiting (a message being published may be missed; the waker's
    /// protocol in `sleep` covers that).
    ///
    /// # Safety
    /// As [`Lane::pop`]: called only by the lane's target thread.
    pub unsafe fn is_empty(&self) -> bool {
        let mut ring = self.receive.ring.load(Ordering::Relaxed);
        if ring.is_null() {
            ring = self.first.load(Ordering::Acquire);
            if ring.is_null() {
                return true;
            }
        }
        // SAFETY: only the target (this thread) frees rings.
        let r = unsafe { &*ring };
        let position = self.receive.position.load(Ordering::Relaxed);
        r.slot(position).stamp.load(Ordering::Acquire) != position + 1
            && r.next.load(Ordering::Acquire).is_null()
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // Messages never handled (a failed job) are dropped, boxed ones freed, and so are the
        // rings. `&mut self`: no sender or target is left.
        // SAFETY: exclusive access makes this thread the only target.
        while unsafe { self.pop() }.is_some() {}
        let ring = self.receive.ring.load(Ordering::Relaxed);
        if !ring.is_null() {
            // SAFETY: after `pop` returned `None` the target's ring is the last of the chain
            // (its `next` is null), allocated by `Ring::boxed` and not yet freed.
            drop(unsafe { Box::from_raw(ring) });
        }
    }
}

/// One target's lanes, by source rank.
pub(crate) struct Inbox {
    lanes: Box<[Lane]>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Inbox({} lanes)", self.lanes.len())
    }
}

impl Inbox {
    /// The inbox of one rank of a job of `ranks` ranks (no ring allocated yet).
    pub(crate) fn new(ranks: usize) -> Inbox {
        Inbox {
            lanes: (0..ranks).map(|_| Lane::default()).collect(),
        }
    }

    /// The lane from `source`.
    #[inline]
    pub(crate) fn lane(&self, source: usize) -> &Lane {
        &self.lanes[source]
    }

    /// Number of lanes (the job's rank count).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.lanes.len()
    }

    /// True if no lane holds a message.
    ///
    /// # Safety
    /// Called only by the inbox's target thread (see [`Lane::pop`]).
    pub(crate) unsafe fn is_empty(&self) -> bool {
        // SAFETY: forwarded contract.
        self.lanes.iter().all(|l| unsafe { l.is_empty() })
    }
}

// Std threads at full size; under loom the models in tests/loom_*.rs take their place.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn short(lane: &Lane, args: &[u64]) {
        // SAFETY: one sender thread per lane in every test.
        unsafe { lane.push(3, 7, false, args, Outgoing::Short) }
    }

    fn take(lane: &Lane) -> Option<Incoming> {
        // SAFETY: one target thread per lane in every test.
        unsafe { lane.pop() }
    }

    #[test]
    fn a_slot_is_two_lines_and_six_words_share_the_stamps_line() {
        assert_eq!(std::mem::size_of::<Slot>(), 128);
        assert_eq!(std::mem::offset_of!(Slot, data) + 8 + 6 * 8, 64);
    }

    #[test]
    fn every_body_at_the_inline_edge_and_past_it_comes_back_whole() {
        let lane = Lane::default();
        let args: Vec<u64> = (1..=16).collect();
        let ack = WriteAck { ec: 5, iwc: 9 };
        let fits = vec![0xabu8; INLINE_BYTES - 3 * 8];
        let spills = vec![0xcdu8; INLINE_BYTES - 3 * 8 + 1];
        let cases: Vec<(usize, Outgoing<'_>)> = vec![
            (0, Outgoing::Short),
            (SLOT_WORDS, Outgoing::Short),
            (SLOT_WORDS + 2, Outgoing::Short),
            (3, Outgoing::Medium(&fits)),
            (3, Outgoing::Medium(&spills)),
            (0, Outgoing::Medium(&[])),
            (
                SLOT_WORDS - 4,
                Outgoing::Long {
                    offset: 64,
                    len: 8,
                    ack,
                },
            ),
            (
                SLOT_WORDS - 3,
                Outgoing::Long {
                    offset: 64,
                    len: 8,
                    ack,
                },
            ),
        ];
        for (i, (nargs, body)) in cases.iter().enumerate() {
            // SAFETY: this thread is the only sender and target.
            unsafe { lane.push(3, i as u16, i % 2 == 1, &args[..*nargs], *body) };
        }
        for (i, (nargs, body)) in cases.iter().enumerate() {
            let m = take(&lane).expect("sent");
            let v = m.view(3);
            assert_eq!((v.source, v.handler, v.is_reply), (3, i as u16, i % 2 == 1));
            assert_eq!(v.args, &args[..*nargs], "case {i}");
            let want = match body {
                Outgoing::Short => Payload::None,
                Outgoing::Medium(b) => Payload::Medium(b),
                Outgoing::Long { offset, len, ack } => Payload::Long {
                    offset: *offset,
                    len: *len,
                    ack: *ack,
                },
            };
            assert_eq!(v.payload, want, "case {i}");
            let boxed = matches!(m, Incoming::Boxed(_));
            assert_eq!(boxed, [2, 4, 7].contains(&i), "case {i} inline or boxed");
        }
        assert!(take(&lane).is_none());
    }

    #[test]
    fn a_full_ring_links_a_larger_one_and_order_holds() {
        let lane = Lane::default();
        let n = (FIRST_SLOTS + 2 * FIRST_SLOTS + 5) as u64;
        for i in 0..n {
            short(&lane, &[i]);
        }
        // SAFETY: this thread is the lane's target.
        assert!(!unsafe { lane.is_empty() });
        for i in 0..n {
            assert_eq!(take(&lane).unwrap().view(3).args, &[i]);
        }
        assert!(take(&lane).is_none());
        // SAFETY: as above.
        assert!(unsafe { lane.is_empty() });
    }

    #[test]
    fn unhandled_messages_are_freed_with_the_lane() {
        // Boxed messages own a payload; a leak would show under Miri / sanitizers, and the
        // drop must not double-free what `pop` already took.
        let lane = Lane::default();
        let big = vec![1u8; 4096];
        for _ in 0..3 * FIRST_SLOTS {
            // SAFETY: one sender.
            unsafe { lane.push(0, 1, false, &[1], Outgoing::Medium(&big)) };
        }
        assert!(take(&lane).is_some());
        drop(lane);
    }

    #[test]
    fn one_sender_one_target_in_order_across_many_rings() {
        // The two ends on two threads, the sender bursting far past a ring so rings are
        // linked and freed while the target drains; every message in order, intact.
        let lane = Arc::new(Lane::default());
        let n: u64 = if cfg!(miri) { 2_000 } else { 400_000 };
        let sender = {
            let lane = lane.clone();
            std::thread::spawn(move || {
                let payload: Vec<u8> = (0..40).collect();
                for i in 0..n {
                    let body = match i % 3 {
                        0 => Outgoing::Short,
                        1 => Outgoing::Medium(&payload[..(i % 41) as usize]),
                        _ => Outgoing::Medium(&[7u8; 200]),
                    };
                    // SAFETY: this thread is the lane's only sender.
                    unsafe { lane.push(1, 0, false, &[i, !i], body) };
                    if i % 5_000 == 0 {
                        std::thread::yield_now();
                    }
                }
            })
        };
        let mut next = 0;
        while next < n {
            let Some(m) = take(&lane) else {
                std::hint::spin_loop();
                continue;
            };
            let v = m.view(1);
            assert_eq!(v.args, &[next, !next]);
            match (next % 3, v.payload) {
                (0, Payload::None) => {}
                (1, Payload::Medium(b)) => assert_eq!(b.len() as u64, next % 41),
                (2, Payload::Medium(b)) => assert_eq!(b, &[7u8; 200][..]),
                (_, p) => panic!("message {next}: payload {p:?}"),
            }
            next += 1;
        }
        sender.join().unwrap();
        assert!(take(&lane).is_none());
    }
}
