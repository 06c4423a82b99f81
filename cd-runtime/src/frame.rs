//! One Containment Domain on this rank: its identity, its preserved entries, and the state of
//! its current execution.
//!
//! Preservation follows the CD runtime's convention: a `preserve` call in the first execution
//! saves the value; the same call in a re-execution restores it. Entries are found by name.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;

use pgas::Team;
use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::buddy::{BuddyStore, Held};
use crate::config::{CdConfig, CdSettings, Medium};
use crate::error::FaultKinds;
use crate::injector::{mix, name_hash};
use crate::relaxed::frame_state::RelaxedFrame;
use crate::xor::XorStore;

/// Whether a CD recovers with all the ranks it spans (strict) or alone, by replay (relaxed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CdKind {
    Strict,
    Relaxed,
}

/// Where one preserved entry is kept.
pub(crate) enum Store {
    /// A clone in this rank's memory.
    LocalValue(Box<dyn Any>),
    /// Bytes in this rank's memory.
    LocalBytes(Vec<u8>),
    /// `len` bytes at the buddy rank (`held`: a slot of its segment, or by rpc under `key`),
    /// and the same bytes in this rank's memory (`local`; `None` after this rank's loss, and
    /// always with `buddy_copies = 1`).
    ///
    /// The local copy is needed because the buddy copy does not survive the loss of the
    /// *buddy*: a rank's loss wipes the copies it holds for others, and the owner (which did
    /// not fail) must still restore when the CD re-executes together. A rank restores from
    /// its own copy while it has it, and from the buddy otherwise.
    Buddy {
        key: u64,
        held: Held,
        len: usize,
        local: Option<Vec<u8>>,
    },
    /// `len` bytes in this rank's memory (`local`), and this rank's share of its checksum
    /// group's parity (`parity`, `chunk` bytes) for groups of `k` (`xor.rs`); `seen`: the
    /// group's losses this rank had heard of when the entry was made or last rebuilt (later
    /// ones took the lost members' copies of it).
    Xor {
        k: usize,
        len: usize,
        chunk: usize,
        local: Option<Vec<u8>>,
        parity: Option<Vec<u8>>,
        seen: usize,
    },
    /// An xor entry preserved inside [`crate::Cd::preserve_batch`]: its bytes, encoded with
    /// the batch's other entries when the batch ends (then an `Xor` store).
    XorPending(Vec<u8>),
    /// Bytes in a slice of the rank's arena file for this CD's level (`file_medium.rs`).
    File(crate::file_medium::FileSlot),
    /// The same data as the nearest ancestor's entry of the same name.
    Reference,
    /// Recomputed by this closure.
    Regenerate(Box<dyn Fn() -> Box<dyn Any>>),
    /// Kept locally and lost with the rank's memory.
    Lost,
}

/// One preserved entry.
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) store: Store,
}

/// The part of a CD that changes while it runs.
pub(crate) struct FrameState {
    pub(crate) entries: Vec<Entry>,
    pub(crate) attempt: u32,
    pub(crate) failure: FaultKinds,
    pub(crate) reasons: Vec<String>,
    /// Children begun in this execution (their index names them, so a re-execution gives
    /// every child the same id, rng and keys as before).
    pub(crate) children: u64,
    /// Entries already restored in this re-execution (a second `preserve` of a name in one
    /// execution saves again).
    pub(crate) restored: HashSet<String>,
    pub(crate) rng: SmallRng,
}

/// A CD on this rank.
pub(crate) struct Frame {
    pub(crate) name: String,
    pub(crate) level: usize,
    pub(crate) id: u64,
    pub(crate) iteration: u64,
    pub(crate) team: Team,
    pub(crate) settings: Rc<CdSettings>,
    seed: u64,
    pub(crate) state: RefCell<FrameState>,
    /// Strict or relaxed.
    pub(crate) kind: CdKind,
    /// The log store and the other relaxed-CD state (a strict CD's store receives its
    /// relaxed children's logs).
    pub(crate) rx: RefCell<RelaxedFrame>,
    /// A second `preserve` of a name in one execution keeps the first copy (an execution of
    /// several steps, `interval.rs`) instead of saving again.
    pub(crate) keep_first: Cell<bool>,
    /// Inside [`crate::Cd::preserve_batch`]: xor entries wait for one encoding at its end.
    pub(crate) xor_batch: Cell<bool>,
    /// A checkpointed execution: the bytes each `preserve*` call preserved, by name
    /// (`checkpoint/README.md`); `None` in other executions.
    pub(crate) capture: RefCell<Option<BTreeMap<String, Vec<u8>>>>,
    /// The resumed execution (`resume.rs`): the entries not yet written into the program's
    /// values; `None` in other executions.
    pub(crate) resume: RefCell<Option<BTreeMap<String, Vec<u8>>>>,
    /// An execution of the CD a real loss rolls back to (`REAL_LOSS.md`): `Some(shared)`
    /// when its capture is kept as a generation, `shared` when a checkpoint takes it too.
    pub(crate) generation: Cell<Option<bool>>,
    /// The loop step this execution began with ([`crate::strict_steps`]).
    pub(crate) first_step: Cell<Option<u64>>,
}

impl Frame {
    /// The root CD: level 0, all ranks, never re-executed.
    pub(crate) fn root(config: &CdConfig, rank: usize) -> Frame {
        Frame::new(
            "root",
            0,
            0,
            0,
            pgas::world(),
            Rc::new(config.settings("root", 0)),
            config.seed,
            rank,
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        name: &str,
        level: usize,
        id: u64,
        iteration: u64,
        team: Team,
        settings: Rc<CdSettings>,
        seed: u64,
        rank: usize,
    ) -> Frame {
        let seed = mix(seed ^ mix(rank as u64 ^ mix(id)));
        Frame {
            name: name.to_string(),
            level,
            id,
            iteration,
            team,
            settings,
            seed,
            state: RefCell::new(FrameState {
                entries: Vec::new(),
                attempt: 0,
                failure: FaultKinds::NONE,
                reasons: Vec::new(),
                children: 0,
                restored: HashSet::new(),
                rng: SmallRng::seed_from_u64(seed),
            }),
            kind: CdKind::Strict,
            rx: RefCell::new(RelaxedFrame::default()),
            keep_first: Cell::new(false),
            xor_batch: Cell::new(false),
            capture: RefCell::new(None),
            resume: RefCell::new(None),
            generation: Cell::new(None),
            first_step: Cell::new(None),
        }
    }

    /// The id of the next child called `name` in this execution.
    pub(crate) fn next_child_id(&self, name: &str) -> u64 {
        let mut st = self.state.borrow_mut();
        let index = st.children;
        st.children += 1;
        mix(self.id ^ mix(name_hash(name) ^ mix(index)))
    }

    /// Resets the execution state for attempt `attempt`.
    pub(crate) fn begin(&self, attempt: u32) {
        let mut st = self.state.borrow_mut();
        st.attempt = attempt;
        st.failure = FaultKinds::NONE;
        st.reasons.clear();
        st.children = 0;
        st.restored.clear();
        st.rng = SmallRng::seed_from_u64(self.seed);
    }

    /// Records a detected failure; the body goes on (see `cd::check!`).
    pub(crate) fn fail(&self, kinds: FaultKinds, reason: String) {
        let mut st = self.state.borrow_mut();
        st.failure = st.failure.union(kinds);
        st.reasons.push(reason);
    }

    /// Key of entry `name` for the buddy and file media.
    pub(crate) fn key(&self, name: &str) -> u64 {
        mix(self.id ^ name_hash(name))
    }

    /// Marks locally kept entries lost (the rank's memory is gone).
    pub(crate) fn lose_local(&self) {
        for e in &mut self.state.borrow_mut().entries {
            match &mut e.store {
                Store::LocalValue(_) | Store::LocalBytes(_) | Store::XorPending(_) => {
                    e.store = Store::Lost
                }
                Store::Buddy { local, .. } => *local = None,
                Store::Xor { local, parity, .. } => {
                    *local = None;
                    *parity = None;
                }
                _ => {}
            }
        }
    }

    /// Keeps `bytes()` as entry `name` of a checkpointed execution (nothing otherwise).
    pub(crate) fn capture_with(&self, name: &str, bytes: impl FnOnce() -> Vec<u8>) {
        if let Some(c) = self.capture.borrow_mut().as_mut() {
            c.insert(name.to_string(), bytes());
        }
    }

    /// Leaves entry `name` out of a checkpointed execution's capture.
    pub(crate) fn uncapture(&self, name: &str) {
        if let Some(c) = self.capture.borrow_mut().as_mut() {
            c.remove(name);
        }
    }

    /// The resumed bytes of entry `name`, once (`None` outside the resumed execution).
    pub(crate) fn take_resumed(&self, name: &str) -> Option<Vec<u8>> {
        self.resume.borrow_mut().as_mut()?.remove(name)
    }

    /// True in the execution a restart resumed (`resume.rs`).
    pub(crate) fn is_resumed(&self) -> bool {
        self.resume.borrow().is_some()
    }

    /// The medium for new copies.
    pub(crate) fn medium(&self) -> Medium {
        self.settings.medium
    }
}

/// True if every entry of `frame` can be restored on this rank, given its ancestors.
pub(crate) fn restorable(
    frames: &[Rc<Frame>],
    index: usize,
    buddy: &BuddyStore,
    xor: &XorStore,
) -> bool {
    let ok = |store: &Store| match store {
        // This rank's copy gone: the group rebuilds it unless another member lost it too.
        Store::Xor { k, seen, local, .. } => xor.restorable(*k, *seen, local.is_some()),
        Store::Lost => false,
        // Both copies gone: this rank's with its memory, the buddy's with the buddy's.
        Store::Buddy {
            key,
            held,
            local: None,
            ..
        } => !buddy.is_lost(*key, *held),
        _ => true,
    };
    let st = frames[index].state.borrow();
    st.entries.iter().all(|e| match &e.store {
        Store::Reference => find_in_ancestors(frames, index, &e.name, &ok),
        s => ok(s),
    })
}

/// Applies `ok` to the nearest ancestor entry called `name` (following references further up).
pub(crate) fn find_in_ancestors(
    frames: &[Rc<Frame>],
    index: usize,
    name: &str,
    ok: &dyn Fn(&Store) -> bool,
) -> bool {
    for i in (0..index).rev() {
        let st = frames[i].state.borrow();
        if let Some(e) = st.entries.iter().find(|e| e.name == name) {
            return match e.store {
                Store::Reference => find_in_ancestors(frames, i, name, ok),
                ref s => ok(s),
            };
        }
    }
    false
}
