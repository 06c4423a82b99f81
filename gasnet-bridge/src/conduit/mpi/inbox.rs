//! A rank's inbox of shared-memory rings, each claimed by a sender on its first message, so
//! that the memory of the rings grows with the number of rings and not with the ranks of the
//! host.
//!
//! Until now every rank's window held one ring ([`RING_BYTES`], 256 KiB of data) per rank of
//! its host: `ranks on the host x 256 KiB` per rank, 32 MiB per rank and 4 GiB per host of 128
//! ranks. Now an inbox holds at most [`rings_per_inbox`] rings (`PGAS_MPI_RINGS`, default
//! [`DEFAULT_RINGS`]), and a sender takes one on its first active message to the owner. A
//! sender that finds every ring taken sends to that owner through MPI from then on, as to a
//! rank of another host: correct and slower, and typical codes talk to fewer ranks per host
//! than that (a 3-D stencil to 26 neighbours at most). A job whose hosts have no more ranks
//! than rings gives every pair a ring, as before.
//!
//! # Layout and protocol
//!
//! ```text
//! [0, PAGE)                 claim words: u64 per ring, 0 = free, s + 1 = claimed by rank s
//! [PAGE + j * RING_BYTES)   ring j (`shm_ring.rs`)
//! ```
//!
//! * A sender claims the lowest free ring with a compare-exchange (AcqRel) of its word from 0
//!   to its rank + 1, trying words in increasing order, once per owner: the outcome (a ring or
//!   MPI) is final, so each ordered pair uses one path and keeps its FIFO order.
//! * Words are never freed, and every sender tries them in increasing order, so the claimed
//!   words always form a prefix. The owner remembers how long a prefix it knows and, when
//!   polling, loads the next word (Acquire) until it finds a free one: a message costs the
//!   owner nothing more once every ring is known, and one load of a line that rarely changes
//!   until then.
//! * The claim word is published before the sender's first record (the compare-exchange
//!   happens before the push), and the ring protocol orders each record itself.
//!
//! The whole inbox is zeroed before the host's barrier at setup (`window.rs`), so every word
//! starts free and every ring empty.

use std::cell::{Cell, OnceCell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::conduit::shm_ring::{RING_BYTES, Ring};
use crate::error::ConfigError;

/// Bytes of the claim table (one page; at most this many / 8 rings).
const TABLE: usize = 4096;

/// Rings per inbox without `PGAS_MPI_RINGS`: 8 MiB of rings per rank.
pub(super) const DEFAULT_RINGS: usize = 32;

/// Rings in each inbox of a host of `node_size` ranks: `PGAS_MPI_RINGS` (1 to 512) or
/// [`DEFAULT_RINGS`], and never more than the other ranks of the host.
pub(super) fn rings_per_inbox(node_size: usize) -> Result<usize, ConfigError> {
    rings_for(node_size, std::env::var("PGAS_MPI_RINGS").ok().as_deref())
}

/// [`rings_per_inbox`] with the variable's value given.
fn rings_for(node_size: usize, var: Option<&str>) -> Result<usize, ConfigError> {
    let wanted = match var {
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=TABLE / 8).contains(&n) => n,
            _ => {
                return Err(ConfigError::BadEnv {
                    var: "PGAS_MPI_RINGS",
                    value: v.to_string(),
                    reason: format!(
                        "expected the number of shared-memory rings per rank, 1 to {}",
                        TABLE / 8
                    ),
                });
            }
        },
        None => DEFAULT_RINGS,
    };
    Ok(wanted.min(node_size.saturating_sub(1)))
}

/// Bytes of an inbox of `rings` rings (none: no inbox).
pub(super) fn inbox_bytes(rings: usize) -> usize {
    if rings == 0 {
        0
    } else {
        TABLE + rings * RING_BYTES
    }
}

/// The inboxes of a host as `map_host` laid them out (`window.rs`), which a job's
/// [`Outboxes`] and [`Inbox`] claim rings in. The world keeps them, because a job rebuilt
/// after a lost process claims them again.
#[derive(Debug, Clone)]
pub(super) struct RingLayouts {
    /// By rank: the inbox of that rank of this host, for this rank to claim a ring in.
    pub(super) outboxes: Vec<Option<InboxLayout>>,
    /// This rank's inbox.
    pub(super) inbox: Option<InboxLayout>,
    /// Every other rank of the host can have a ring in every inbox.
    pub(super) ring_per_sender: bool,
}

impl RingLayouts {
    /// No inbox at all: every message to another rank travels through MPI.
    #[cfg_attr(not(feature = "ulfm"), allow(dead_code))]
    pub(super) fn none(ranks: usize) -> RingLayouts {
        RingLayouts {
            outboxes: vec![None; ranks],
            inbox: None,
            ring_per_sender: true,
        }
    }

    /// The layouts after the processes of the ranks `lost` died: no ring toward them (a
    /// replacement's inbox is added by the caller when it joins this host), and this rank's
    /// inbox emptied, claims
    /// and records, so that the rebuilt job's senders claim its rings again.
    ///
    /// # Safety
    /// No view of this rank's rings is used any more (the old job's `Outboxes` and `Inbox`
    /// are leaked), and no live process writes into this inbox until a barrier of the new
    /// job that every process of the host passes after this call (`JobParts::build`'s).
    #[cfg_attr(not(feature = "ulfm"), allow(dead_code))]
    pub(super) unsafe fn after_loss(&self, lost: &[usize]) -> RingLayouts {
        if let Some(inbox) = &self.inbox {
            // SAFETY: the inbox's bytes lie in this rank's piece of the kept window (`new`'s
            // contract), mapped for the process's life; the caller guarantees no access
            // races with the fill, which is `shared_copy`'s like every access to window memory.
            unsafe { crate::shared_copy::fill(inbox.base, 0, inbox_bytes(inbox.rings)) };
        }
        let mut outboxes = self.outboxes.clone();
        for &r in lost {
            if let Some(o) = outboxes.get_mut(r) {
                *o = None;
            }
        }
        RingLayouts {
            outboxes,
            inbox: self.inbox,
            ring_per_sender: self.ring_per_sender,
        }
    }
}

/// Where an inbox lies in its owner's piece of the host's shared memory.
#[derive(Debug, Clone, Copy)]
pub(super) struct InboxLayout {
    base: *mut u8,
    rings: usize,
}

impl InboxLayout {
    /// The inbox of `rings` rings at `base`.
    ///
    /// # Safety
    /// `base` is page-aligned and points to [`inbox_bytes`]`(rings)` bytes of a host's piece
    /// that were zeroed before any rank used them and stay mapped while any view of them is
    /// used; they are accessed only through `InboxLayout` (claim words, atomically) and the
    /// `Ring` views it hands out.
    pub(super) unsafe fn new(base: *mut u8, rings: usize) -> InboxLayout {
        debug_assert!((base as usize).is_multiple_of(64));
        InboxLayout { base, rings }
    }

    fn claim_word(&self, j: usize) -> &AtomicU64 {
        assert!(j < self.rings);
        // SAFETY: word `j < rings <= TABLE / 8` of the claim table, 8-aligned inside the
        // inbox (see `new`), only ever accessed atomically.
        unsafe { &*self.base.add(8 * j).cast::<AtomicU64>() }
    }

    /// A view of ring `j`.
    ///
    /// # Safety
    /// The caller is ring `j`'s one producer (it claimed the ring) or its one consumer (the
    /// inbox's owner), and makes one view per role.
    unsafe fn ring(&self, j: usize) -> Ring {
        assert!(j < self.rings);
        // SAFETY: ring `j` lies inside the inbox after the claim table, 64-aligned, zeroed
        // and mapped as `new` requires; the caller holds the role it asks for.
        unsafe { Ring::new(self.base.add(TABLE + j * RING_BYTES)) }
    }
}

/// The sender's side: for each owner of the host, the ring it claimed there, or MPI.
pub(super) struct Outboxes {
    me: usize,
    /// By job rank: the inbox of a rank of this host.
    layouts: Box<[Option<InboxLayout>]>,
    /// By job rank: `Some(ring)` once claimed, `None` once every ring was taken (MPI); unset
    /// before the first message.
    claimed: Box<[OnceCell<Option<Ring>>]>,
}

impl Outboxes {
    /// Outboxes of rank `me` toward the inboxes `layouts` (by job rank).
    pub(super) fn new(me: usize, layouts: Vec<Option<InboxLayout>>) -> Outboxes {
        let claimed = layouts.iter().map(|_| OnceCell::new()).collect();
        Outboxes {
            me,
            layouts: layouts.into_boxed_slice(),
            claimed,
        }
    }

    /// The ring this rank fills in `target`'s inbox, claimed on the first call; `None` if
    /// `target` has no inbox here or every ring was taken (then messages go through MPI).
    #[inline]
    pub(super) fn ring(&self, target: usize) -> Option<&Ring> {
        let layout = (*self.layouts.get(target)?)?;
        self.claimed[target]
            .get_or_init(|| {
                let mine = self.me as u64 + 1;
                (0..layout.rings)
                    .find(|&j| {
                        layout
                            .claim_word(j)
                            .compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire)
                            .is_ok()
                    })
                    // SAFETY: the compare-exchange made this rank ring `j`'s one producer,
                    // and the OnceCell makes this its one view.
                    .map(|j| unsafe { layout.ring(j) })
            })
            .as_ref()
    }
}

/// The owner's side: the rings of its inbox that senders claimed, with each one's sender.
pub(super) struct Inbox {
    layout: InboxLayout,
    /// The claimed prefix known so far.
    known: Cell<usize>,
    rings: RefCell<Vec<(usize, Ring)>>,
}

impl Inbox {
    /// The owner's view of its inbox.
    pub(super) fn new(layout: InboxLayout) -> Inbox {
        Inbox {
            layout,
            known: Cell::new(0),
            rings: RefCell::new(Vec::new()),
        }
    }

    /// Learns the rings claimed since the last call (loads of the next claim word until a
    /// free one, nothing once all are known).
    #[inline]
    fn discover(&self) {
        let mut known = self.known.get();
        while known < self.layout.rings {
            let who = self.layout.claim_word(known).load(Ordering::Acquire);
            if who == 0 {
                break;
            }
            // SAFETY: the owner is ring `known`'s one consumer, and this is its one view (the
            // prefix only grows, so each word is read here once as claimed).
            let ring = unsafe { self.layout.ring(known) };
            self.rings.borrow_mut().push((who as usize - 1, ring));
            known += 1;
        }
        self.known.set(known);
    }

    /// Takes every record off the claimed rings, oldest first per ring, passing each to
    /// `take` with its sender; returns how many there were.
    #[inline]
    pub(super) fn drain(&self, mut take: impl FnMut(usize, &[u8])) -> usize {
        self.discover();
        let mut n = 0;
        for (source, ring) in self.rings.borrow().iter() {
            if !ring.is_empty() {
                n += ring.drain(|bytes| take(*source, bytes));
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{Layout, alloc_zeroed, dealloc};

    /// A zeroed, page-aligned inbox of `rings` rings on the heap.
    struct HeapInbox {
        ptr: *mut u8,
        layout: Layout,
        rings: usize,
    }
    // SAFETY: the claim words are atomics and each ring has one producer and one consumer.
    unsafe impl Send for HeapInbox {}
    unsafe impl Sync for HeapInbox {}
    impl HeapInbox {
        fn new(rings: usize) -> HeapInbox {
            let layout = Layout::from_size_align(inbox_bytes(rings), 4096).unwrap();
            // SAFETY: a non-zero size and valid alignment.
            let ptr = unsafe { alloc_zeroed(layout) };
            assert!(!ptr.is_null());
            HeapInbox { ptr, layout, rings }
        }
        fn layout(&self) -> InboxLayout {
            // SAFETY: zeroed, page-aligned, `inbox_bytes(rings)` long, alive for the test.
            unsafe { InboxLayout::new(self.ptr, self.rings) }
        }
    }
    impl Drop for HeapInbox {
        fn drop(&mut self) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.ptr, self.layout) }
        }
    }

    /// Rank 0 owns an inbox of 2 rings; ranks 1, 2 and 3 send to it at once from threads.
    /// Exactly two of them get a ring, the third is told to use MPI, every record arrives
    /// once with its sender, and each sender's records arrive in order.
    #[test]
    fn senders_race_for_fewer_rings_and_the_losers_are_told() {
        const PER: u64 = 5_000;
        let inbox = HeapInbox::new(2);
        let owner = Inbox::new(inbox.layout());
        let got: Vec<Option<bool>> = std::thread::scope(|s| {
            let senders: Vec<_> = (1..=3usize)
                .map(|me| {
                    let inbox = &inbox;
                    s.spawn(move || {
                        let mut layouts = vec![None; 4];
                        layouts[0] = Some(inbox.layout());
                        let out = Outboxes::new(me, layouts);
                        assert!(out.ring(1).is_none(), "no inbox at rank 1 here");
                        let Some(ring) = out.ring(0) else {
                            return Some(false);
                        };
                        for seq in 0..PER {
                            let word = (me as u64) << 32 | seq;
                            while !ring.try_push(8, |d| d.copy_from_slice(&word.to_ne_bytes())) {
                                std::hint::spin_loop();
                            }
                        }
                        // The same ring every time.
                        assert!(std::ptr::eq(ring, out.ring(0).unwrap()));
                        Some(true)
                    })
                })
                .collect();
            let mut next = [0u64; 4];
            let mut received = 0u64;
            while received < 2 * PER {
                owner.drain(|source, bytes| {
                    let word = u64::from_ne_bytes(bytes.try_into().unwrap());
                    assert_eq!(
                        (word >> 32) as usize,
                        source,
                        "the claim word names the sender"
                    );
                    assert_eq!(word & 0xFFFF_FFFF, next[source], "in order from {source}");
                    next[source] += 1;
                    received += 1;
                });
            }
            senders.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners = got.iter().filter(|g| **g == Some(true)).count();
        assert_eq!(winners, 2, "two rings, two senders on them: {got:?}");
        assert_eq!(owner.rings.borrow().len(), 2);
    }

    #[test]
    fn rings_never_exceed_the_other_ranks_of_the_host() {
        assert_eq!(rings_for(1, None).unwrap(), 0);
        assert_eq!(rings_for(4, None).unwrap(), 3);
        assert_eq!(rings_for(128, None).unwrap(), DEFAULT_RINGS);
        assert_eq!(rings_for(128, Some(" 4 ")).unwrap(), 4);
        assert_eq!(rings_for(3, Some("512")).unwrap(), 2);
        for bad in ["0", "513", "many", ""] {
            let e = rings_for(8, Some(bad)).unwrap_err().to_string();
            assert!(
                e.contains("PGAS_MPI_RINGS") && e.contains("1 to 512"),
                "{e}"
            );
        }
        assert_eq!(inbox_bytes(0), 0);
        assert_eq!(inbox_bytes(2), TABLE + 2 * RING_BYTES);
    }
}
