//! `Cd`: the handle a CD body gets, to preserve (and, in a re-execution, restore) its state,
//! to report detected errors, and to draw repeatable random numbers.

use std::any::Any;
use std::rc::Rc;
use std::time::Instant;

use bytemuck::Pod;
use pgas::GlobalPtr;
use rand::rngs::SmallRng;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::buddy::Held;
use crate::config::Medium;
use crate::error::FaultKinds;
use crate::frame::{Entry, Frame, Store, find_in_ancestors};
use crate::relaxed::PreservedRegion;
use crate::runtime::{self, CdRuntime};

/// State a CD can preserve by copy: cloneable, comparable (to preserve by reference what the
/// parent already holds) and serializable (for the buddy and file media).
pub trait Preservable: Clone + PartialEq + Serialize + DeserializeOwned + 'static {}
impl<T: Clone + PartialEq + Serialize + DeserializeOwned + 'static> Preservable for T {}

/// The CD a body runs in.
pub struct Cd {
    pub(crate) frame: Rc<Frame>,
}

/// What a `preserve` call does in this execution.
enum Step {
    /// Save the value (first execution, or a name not saved before).
    Save,
    /// Restore from entry `index`.
    Restore(usize),
    /// Nothing: this execution already preserved (or restored) the name, and keeps that copy
    /// (an execution of several steps, `interval.rs`).
    Skip,
}

impl Cd {
    /// Name of the CD.
    pub fn name(&self) -> &str {
        &self.frame.name
    }

    /// Level in the tree (the root is 0).
    pub fn level(&self) -> usize {
        self.frame.level
    }

    /// Which execution this is: 0 the first, then 1, 2, ... for re-executions.
    pub fn attempt(&self) -> u32 {
        self.frame.state.borrow().attempt
    }

    /// True when the state this execution preserves was restored: in a re-execution, and in
    /// the execution a restart resumed (`checkpoint/README.md`). A program recomputes here
    /// what it regenerates rather than preserves.
    pub fn is_reexecution(&self) -> bool {
        self.attempt() > 0 || self.frame.is_resumed()
    }

    /// True while this rank takes part in a dependency-limited re-execution (only the ranks
    /// that depend on a failed relaxed CD re-execute; `dependency_tracking`): the others keep
    /// their state, so a program's own re-execution protocol (sequence generations) must not
    /// change what they expect.
    pub fn is_limited_reexecution(&self) -> bool {
        self.attempt() > 0 && runtime::with(|rt| rt.relaxed.limited.borrow().is_some())
    }

    /// Records a detected error; the body goes on and the CD fails at completion. (In a CD
    /// spanning several ranks the body must still take part in the CD's communication, so
    /// detection does not return early.)
    pub fn fail(&self, reason: impl Into<String>) {
        self.frame.fail(FaultKinds::SOFT, reason.into());
    }

    /// The CD's random generator: the same numbers in every execution of this CD.
    pub fn with_rng<R>(&self, f: impl FnOnce(&mut SmallRng) -> R) -> R {
        f(&mut self.frame.state.borrow_mut().rng)
    }

    fn step(&self, name: &str) -> Step {
        let mut st = self.frame.state.borrow_mut();
        if self.frame.keep_first.get() && st.restored.contains(name) {
            return Step::Skip;
        }
        if st.attempt > 0 && !st.restored.contains(name) {
            if let Some(i) = st.entries.iter().position(|e| e.name == name) {
                st.restored.insert(name.to_string());
                return Step::Restore(i);
            }
        }
        Step::Save
    }

    /// Preserves `value` by copy on the CD's configured medium (or by reference, when the
    /// parent already holds an equal copy); in a re-execution, restores it.
    pub fn preserve<T: Preservable>(&self, name: &str, value: &mut T) {
        self.preserve_on(name, value, self.frame.medium())
    }

    /// [`Cd::preserve`] on a chosen medium.
    pub fn preserve_on<T: Preservable>(&self, name: &str, value: &mut T, medium: Medium) {
        if let Some(bytes) = self.frame.take_resumed(name) {
            *value = self.decode_resumed(name, &bytes);
        }
        match self.step(name) {
            Step::Skip => {}
            Step::Restore(i) => runtime::with(|rt| restore_value(rt, &self.frame, i, value)),
            Step::Save => self.saving(name, |rt| {
                let start = Instant::now();
                // By reference only to a copy as durable as the one asked for: the ancestors'
                // copies compared here are local ones, which a rank loss takes, so a buddy or
                // file preservation referring to them would silently be no better than local.
                let equal_upstream = medium == Medium::Local
                    && upstream(rt, &self.frame, name, |s| match s {
                        Store::LocalValue(v) => v.downcast_ref::<T>() == Some(value),
                        _ => false,
                    });
                let size =
                    postcard::serialize_with_flavor(value, postcard::ser_flavors::Size::default())
                        .unwrap_or(0);
                self.frame.capture_with(name, || encode(value));
                let store = if equal_upstream {
                    Store::Reference
                } else {
                    match medium {
                        Medium::Local => Store::LocalValue(Box::new(value.clone())),
                        _ => save_bytes(rt, &self.frame, name, medium, encode(value)),
                    }
                };
                self.record(rt, name, store, size, medium, start);
            }),
        }
    }

    /// Runs `f`, whose preservations on the xor medium are encoded together when it returns:
    /// one size agreement and one barrier of the checksum group for all of them, instead of
    /// two collectives per entry. Every member of the group must preserve the same entries in
    /// the same order inside the batch (as it must outside). Other media are not affected.
    ///
    /// The entries are protected (their parity exists) when `preserve_batch` returns, as each
    /// one is when its own `preserve` returns outside a batch: preserve the state a step
    /// needs in one batch at the start of the body.
    pub fn preserve_batch<R>(&self, f: impl FnOnce(&Cd) -> R) -> R {
        if self.frame.xor_batch.replace(true) {
            return f(self); // nested: the outer batch encodes
        }
        /// Ends the batch on return or unwind; encodes only on return.
        struct End<'a>(&'a Frame);
        impl Drop for End<'_> {
            fn drop(&mut self) {
                self.0.xor_batch.set(false);
            }
        }
        let end = End(&self.frame);
        let out = f(self);
        drop(end);
        runtime::with(|rt| encode_xor_batch(rt, &self.frame));
        out
    }

    /// Preserves a slice of plain-old-data by raw copy (the fast path for arrays); in a
    /// re-execution, restores it. The slice must have the same length then.
    pub fn preserve_slice<T: Pod>(&self, name: &str, data: &mut [T]) {
        self.preserve_slice_on(name, data, self.frame.medium())
    }

    /// [`Cd::preserve_slice`] on a chosen medium.
    pub fn preserve_slice_on<T: Pod>(&self, name: &str, data: &mut [T], medium: Medium) {
        if let Some(bytes) = self.frame.take_resumed(name) {
            self.copy_resumed(name, &bytes, data);
        }
        match self.step(name) {
            Step::Skip => {}
            Step::Restore(i) => self.restore_slice(name, i, data),
            Step::Save => self.saving(name, |rt| {
                let start = Instant::now();
                let bytes: &[u8] = bytemuck::cast_slice(data);
                self.frame.capture_with(name, || bytes.to_vec());
                if self.frame.generation.get().is_some() {
                    crate::injector::kill_at("preserve", rt.rank, self.frame.iteration);
                }
                // Local ancestors' copies only back a local preservation (see `preserve_on`).
                let equal_upstream = medium == Medium::Local
                    && upstream(rt, &self.frame, name, |s| match s {
                        Store::LocalBytes(b) => b.as_slice() == bytes,
                        _ => false,
                    });
                let store = if equal_upstream {
                    Store::Reference
                } else if medium == Medium::Local {
                    Store::LocalBytes(rt.pool.copy_of(bytes))
                } else if medium == Medium::Buddy {
                    // Put straight from the program's memory; a local copy only if asked.
                    let key = self.frame.key(name);
                    let mut local = (rt.config.buddy_copies > 1).then(|| rt.pool.take(bytes.len()));
                    let held = rt.rpcs.store(&rt.buddy, key, bytes, local.as_mut());
                    buddy_entry(rt, &self.frame, key, held, bytes.len(), local)
                } else {
                    save_bytes(rt, &self.frame, name, medium, rt.pool.copy_of(bytes))
                };
                self.record(rt, name, store, bytes.len(), medium, start);
            }),
        }
    }

    /// Preserves `len` elements of this rank's shared memory at `ptr` (which a rank loss
    /// wipes); in a re-execution, writes them back.
    ///
    /// The copy and the write-back are the CD runtime's own accesses: the program's hook does
    /// not see them, and a write-back into this rank's memory is a local store that the
    /// Incoming Write Counter does not count.
    ///
    /// In a relaxed CD, the regions of this rank preserved so are what its recovery restores
    /// before replaying the incoming writes (and what combining incoming writes must land in).
    pub fn preserve_global<T: Pod>(&self, name: &str, ptr: GlobalPtr<T>, len: usize) {
        if matches!(self.step_peek(name), Step::Skip) {
            return;
        }
        let own = !ptr.is_null() && ptr.rank() == pgas::rank_me();
        if own {
            let rx = self.frame.rx.borrow();
            if self.attempt() > 0 && rx.eager_restored.contains(name) {
                // Restored when the recovery began; incoming writes may have landed since.
                return;
            }
        }
        let mut data = if own {
            let mut data = vec![T::zeroed(); len];
            let iwc_before = pgas::runtime_hooks::incoming_writes();
            ptr.read_local_slice(&mut data)
                .unwrap_or_else(|e| panic!("CD {:?}: `{name}`: {e}", self.frame.name));
            // Strict CDs note their regions too: a dependency-limited re-execution restores
            // them before it applies the writes of ranks that do not re-execute.
            {
                let mut rx = self.frame.rx.borrow_mut();
                if !rx.globals.iter().any(|g| g.name == name) {
                    rx.globals.push(PreservedRegion {
                        name: name.to_string(),
                        offset: ptr.offset(),
                        len: len * std::mem::size_of::<T>(),
                        iwc_before,
                        iwc_after: pgas::runtime_hooks::incoming_writes(),
                    });
                }
            }
            data
        } else {
            pgas::runtime_hooks::internal(|| pgas::rget_slice(ptr, len).wait())
        };
        let restoring = self.restoring(name);
        self.preserve_slice(name, &mut data);
        if restoring {
            if own {
                ptr.write_local_slice(&data)
                    .unwrap_or_else(|e| panic!("CD {:?}: `{name}`: {e}", self.frame.name));
            } else {
                pgas::runtime_hooks::internal(|| pgas::rput_slice(&data, ptr).wait());
            }
        }
    }

    /// Preserves `len` elements of this rank's viewable memory at `ptr` (which a rank loss
    /// wipes, as it wipes the segment) on the CD's medium; in a re-execution, writes them back.
    ///
    /// The cells are copied with `view_get` / `view_put`, so no view of them may be open
    /// during the call. In a relaxed CD viewable memory is private to its owner: it is
    /// preserved and restored, never logged (no other rank writes it there, `view_put` refuses).
    ///
    /// # Panics
    /// For another rank's viewable memory (a CD preserves the memory a loss of this rank
    /// takes), and for a range a view holds or that is not inside the area, naming the cause.
    pub fn preserve_view<T: Pod>(&self, name: &str, ptr: pgas::ViewPtr<T>, len: usize) {
        if matches!(self.step_peek(name), Step::Skip) {
            return;
        }
        let me = pgas::rank_me();
        assert!(
            !ptr.is_null() && ptr.rank() == me,
            "CD {:?}: preserve_view(`{name}`) of rank {}'s viewable memory: a CD preserves only \
             the rank's own viewable memory (rank {me}'s); preserve those cells on their owner",
            self.frame.name,
            ptr.rank()
        );
        let mut data = vec![T::zeroed(); len];
        pgas::view_get(ptr, &mut data)
            .unwrap_or_else(|e| panic!("CD {:?}: `{name}`: {e}", self.frame.name));
        let restoring = self.restoring(name);
        self.preserve_slice(name, &mut data);
        if restoring {
            pgas::view_put(&data, ptr)
                .unwrap_or_else(|e| panic!("CD {:?}: `{name}`: {e}", self.frame.name));
        }
    }

    /// Preserves `len` elements of this rank's shared memory that other ranks write into
    /// during the CD (arrival flags, inboxes), for a dependency-limited re-execution only: it
    /// restores them before any rank re-executes, so the writes of the first execution no
    /// longer count and are made again (live, or replayed from logs). In a re-execution of the
    /// whole group nothing is restored: ranks may write into the region before this rank
    /// reaches this call, so the program's own protocol (e.g. a generation in its sequence
    /// numbers) must tell old writes from new ones there.
    pub fn preserve_incoming<T: Pod>(&self, name: &str, ptr: GlobalPtr<T>, len: usize) {
        assert!(
            !ptr.is_null() && ptr.rank() == pgas::rank_me(),
            "CD {:?}: preserve_incoming(`{name}`) takes this rank's own memory",
            self.frame.name
        );
        if self.attempt() > 0 {
            return;
        }
        self.preserve_global(name, ptr, len);
        // Others' writes in flight: meaningless to a relaunched job, which starts with none.
        self.frame.uncapture(name);
    }

    /// Writes back now every region of this rank's segment the (relaxed) CD preserved with
    /// `preserve_global`: a recovery restores before it applies incoming writes.
    pub(crate) fn restore_globals_now(&self) {
        let globals = self.frame.rx.borrow().globals.clone();
        let me = pgas::rank_me();
        let mut done = std::collections::HashSet::new();
        for PreservedRegion {
            name, offset, len, ..
        } in globals
        {
            let index = self
                .frame
                .state
                .borrow()
                .entries
                .iter()
                .position(|e| e.name == name);
            let Some(index) = index else { continue };
            let bytes = runtime::with(|rt| load_bytes(rt, &self.frame, index));
            assert_eq!(
                bytes.len(),
                len,
                "CD {:?}: `{name}` changed size",
                self.frame.name
            );
            GlobalPtr::<u8>::from_raw(me, offset)
                .write_local_slice(&bytes)
                .unwrap_or_else(|e| panic!("CD {:?}: `{name}`: {e}", self.frame.name));
            done.insert(name);
        }
        self.frame.rx.borrow_mut().eager_restored = done;
    }

    /// True when preserving `name` now writes its saved cells back: a re-execution, or a
    /// resume from a checkpoint or a recovery that holds it.
    fn restoring(&self, name: &str) -> bool {
        matches!(self.step_peek(name), Step::Restore(_))
            || self
                .frame
                .resume
                .borrow()
                .as_ref()
                .is_some_and(|r| r.contains_key(name))
    }

    fn step_peek(&self, name: &str) -> Step {
        let st = self.frame.state.borrow();
        if self.frame.keep_first.get() && st.restored.contains(name) {
            return Step::Skip;
        }
        if st.attempt > 0 && !st.restored.contains(name) {
            if let Some(i) = st.entries.iter().position(|e| e.name == name) {
                return Step::Restore(i);
            }
        }
        Step::Save
    }

    /// Preserves `value` by regeneration: nothing is copied; a re-execution recomputes it
    /// with `regenerate`.
    pub fn preserve_regenerate<T: 'static>(
        &self,
        name: &str,
        value: &mut T,
        regenerate: impl Fn() -> T + 'static,
    ) {
        match self.step(name) {
            Step::Skip => {}
            Step::Restore(i) => runtime::with(|rt| restore_value_any(rt, &self.frame, i, value)),
            Step::Save => self.saving(name, |rt| {
                let store =
                    Store::Regenerate(Box::new(move || Box::new(regenerate()) as Box<dyn Any>));
                self.record(rt, name, store, 0, Medium::Local, Instant::now());
            }),
        }
    }

    /// Preserves `value` by reference to the nearest ancestor's entry of the same name (the
    /// parent already holds it); in a re-execution, restores it from there.
    ///
    /// # Panics
    /// If no ancestor preserved `name`.
    pub fn preserve_reference<T: Preservable>(&self, name: &str, value: &mut T) {
        if let Some(bytes) = self.frame.take_resumed(name) {
            // The ancestor holds the relaunch's value, not the resumed one: a copy of its own.
            *value = self.decode_resumed(name, &bytes);
            return self.preserve_on(name, value, Medium::Local);
        }
        match self.step(name) {
            Step::Skip => {}
            Step::Restore(i) => runtime::with(|rt| restore_value(rt, &self.frame, i, value)),
            Step::Save => self.saving(name, |rt| {
                assert!(
                    upstream(rt, &self.frame, name, |_| true),
                    "CD {:?}: preserve_reference(`{name}`) but no enclosing CD preserved `{name}`",
                    self.frame.name
                );
                self.frame.capture_with(name, || encode(value));
                let size =
                    postcard::serialize_with_flavor(value, postcard::ser_flavors::Size::default())
                        .unwrap_or(0);
                self.record(
                    rt,
                    name,
                    Store::Reference,
                    size,
                    Medium::Local,
                    Instant::now(),
                );
            }),
        }
    }

    /// Preserves a slice of plain-old-data by reference to the nearest ancestor's entry of the
    /// same name (the parent just copied it and the slice has not changed since); in a
    /// re-execution, restores it from there. Unlike [`Cd::preserve_slice`] on the local medium,
    /// which finds such a reference by comparing the bytes with the ancestor's copy, nothing
    /// is read.
    ///
    /// # Panics
    /// If no ancestor preserved `name`.
    pub fn preserve_slice_reference<T: Pod>(&self, name: &str, data: &mut [T]) {
        if let Some(bytes) = self.frame.take_resumed(name) {
            // The ancestor holds the relaunch's value, not the resumed one: a copy of its own.
            self.copy_resumed(name, &bytes, data);
            return self.preserve_slice_on(name, data, Medium::Local);
        }
        match self.step(name) {
            Step::Skip => {}
            Step::Restore(i) => self.restore_slice(name, i, data),
            Step::Save => self.saving(name, |rt| {
                assert!(
                    upstream(rt, &self.frame, name, |_| true),
                    "CD {:?}: preserve_slice_reference(`{name}`) but no enclosing CD preserved \
                     `{name}`",
                    self.frame.name
                );
                self.frame
                    .capture_with(name, || bytemuck::cast_slice::<T, u8>(data).to_vec());
                let bytes = std::mem::size_of_val(data);
                self.record(
                    rt,
                    name,
                    Store::Reference,
                    bytes,
                    Medium::Local,
                    Instant::now(),
                );
            }),
        }
    }

    /// The value of entry `name` from the bytes a restart resumed.
    fn decode_resumed<T: Preservable>(&self, name: &str, bytes: &[u8]) -> T {
        postcard::from_bytes(bytes).unwrap_or_else(|e| {
            panic!(
                "CD {:?}: the checkpoint's `{name}` does not decode as this program's value \
                 ({e}): was it written by another version of the program?",
                self.frame.name
            )
        })
    }

    /// Writes the bytes a restart resumed for entry `name` into `data`.
    fn copy_resumed<T: Pod>(&self, name: &str, bytes: &[u8], data: &mut [T]) {
        let dst: &mut [u8] = bytemuck::cast_slice_mut(data);
        assert_eq!(
            bytes.len(),
            dst.len(),
            "CD {:?}: the checkpoint's `{name}` has {} bytes and is resumed into {}: was it \
             written by another version of the program?",
            self.frame.name,
            bytes.len(),
            dst.len()
        );
        dst.copy_from_slice(bytes);
    }

    /// Restores `data` from entry `index` (preserved as a slice of the same length).
    fn restore_slice<T: Pod>(&self, name: &str, index: usize, data: &mut [T]) {
        runtime::with(|rt| {
            let bytes = load_bytes(rt, &self.frame, index);
            let dst: &mut [u8] = bytemuck::cast_slice_mut(data);
            assert_eq!(
                bytes.len(),
                dst.len(),
                "CD {:?}: `{name}` was preserved with {} bytes and is restored into {}",
                self.frame.name,
                bytes.len(),
                dst.len()
            );
            dst.copy_from_slice(&bytes);
        })
    }

    /// Runs the preservation of entry `name` with this rank's runtime, as one span of the
    /// timeline.
    fn saving<R>(&self, name: &str, f: impl FnOnce(&CdRuntime) -> R) -> R {
        let _span = crate::timeline::preserve(&self.frame.name, name);
        runtime::with(f)
    }

    fn record(
        &self,
        rt: &CdRuntime,
        name: &str,
        store: Store,
        bytes: usize,
        medium: Medium,
        start: Instant,
    ) {
        {
            let mut stats = rt.stats.borrow_mut();
            let s = stats.entry(&self.frame.name, self.frame.level);
            match store {
                Store::Reference => s.bytes_by_reference += bytes as u64,
                Store::Regenerate(_) => {}
                _ => s.preserved(medium, bytes),
            }
            s.preserve_ns += start.elapsed().as_nanos() as u64;
            s.preservations += 1;
        }
        let mut st = self.frame.state.borrow_mut();
        // An entry preserved again gives its file slot back (its level can then start over).
        for e in st.entries.iter().filter(|e| e.name == name) {
            if let Store::File(slot) = &e.store {
                rt.files.release(slot);
            }
        }
        st.entries.retain(|e| e.name != name);
        let local = matches!(store, Store::LocalBytes(_));
        st.entries.push(Entry {
            name: name.to_string(),
            store,
        });
        st.restored.insert(name.to_string());
        drop(st);
        if local {
            let frames = rt.frames.borrow().clone();
            crate::spill::enforce_budget(
                rt.config.memory_budget_bytes,
                &frames,
                &rt.files,
                &rt.stats,
            );
        }
    }
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_allocvec(v).expect("preserved state serializes")
}

/// True if the nearest ancestor entry called `name` satisfies `ok`.
fn upstream(rt: &CdRuntime, frame: &Frame, name: &str, ok: impl Fn(&Store) -> bool) -> bool {
    let frames = rt.frames.borrow();
    let Some(index) = frames.iter().position(|f| std::ptr::eq(&**f, frame)) else {
        return false;
    };
    find_in_ancestors(&frames, index, name, &ok)
}

fn save_bytes(rt: &CdRuntime, frame: &Frame, name: &str, medium: Medium, bytes: Vec<u8>) -> Store {
    let key = frame.key(name);
    match medium {
        Medium::Buddy => {
            let held = rt.rpcs.store(&rt.buddy, key, &bytes, None);
            let len = bytes.len();
            let local = if rt.config.buddy_copies > 1 {
                Some(bytes)
            } else {
                rt.pool.give_back(bytes);
                None
            };
            buddy_entry(rt, frame, key, held, len, local)
        }
        Medium::File => {
            // Written by the rank's file writer while the body runs (file_medium.rs).
            let what = format!("CD {:?}: entry `{name}`", frame.name);
            Store::File(rt.files.write(frame.level, bytes, what))
        }
        Medium::Xor if frame.xor_batch.get() => Store::XorPending(bytes),
        Medium::Xor => {
            let (store, parity) = crate::xor_entries::preserve(&rt.xor_context(), frame, bytes);
            rt.stats
                .borrow_mut()
                .entry(&frame.name, frame.level)
                .bytes_parity += parity as u64;
            store
        }
        Medium::Local => Store::LocalBytes(bytes),
    }
}

/// Encodes the xor entries `frame` preserved inside a batch, all in one round of the group.
fn encode_xor_batch(rt: &CdRuntime, frame: &Frame) {
    let (indices, batch): (Vec<usize>, Vec<Vec<u8>>) = {
        let mut st = frame.state.borrow_mut();
        st.entries
            .iter_mut()
            .enumerate()
            .filter_map(|(i, e)| match &mut e.store {
                Store::XorPending(bytes) => Some((i, std::mem::take(bytes))),
                _ => None,
            })
            .unzip()
    };
    if batch.is_empty() {
        return;
    }
    let stores = crate::xor_entries::preserve_many(&rt.xor_context(), frame, batch);
    let mut parity_bytes = 0;
    let mut st = frame.state.borrow_mut();
    for (i, (store, parity)) in indices.into_iter().zip(stores) {
        st.entries[i].store = store;
        parity_bytes += parity as u64;
    }
    drop(st);
    rt.stats
        .borrow_mut()
        .entry(&frame.name, frame.level)
        .bytes_parity += parity_bytes;
}

/// The buddy medium's entry of `len` bytes held at the buddy as `held`, with `local` its local
/// copy (`None` with `buddy_copies = 1`: restored by fetching it back from the buddy).
fn buddy_entry(
    rt: &CdRuntime,
    frame: &Frame,
    key: u64,
    held: Held,
    len: usize,
    local: Option<Vec<u8>>,
) -> Store {
    if held == Held::Rpc {
        rt.stats
            .borrow_mut()
            .entry(&frame.name, frame.level)
            .bytes_buddy_rpc += len as u64;
    }
    Store::Buddy {
        key,
        held,
        len,
        local,
    }
}

/// The bytes of entry `index` of `frame` (following a reference up the tree).
fn load_bytes(rt: &CdRuntime, frame: &Frame, index: usize) -> Vec<u8> {
    let (name, store_bytes) = {
        let st = frame.state.borrow();
        let e = &st.entries[index];
        let got = match &e.store {
            Store::LocalBytes(b) => Some(b.clone()),
            Store::Buddy { local: Some(b), .. } => Some(b.clone()),
            Store::Buddy {
                key,
                held,
                len,
                local: None,
            } => Some(rt.rpcs.fetch(&rt.buddy, *key, *held, *len).unwrap_or_else(|| {
                if rt.config.buddy_copies > 1 {
                    panic!(
                        "CD {:?}: buddy rank {} no longer holds `{}`, and this rank lost its \
                         own copy: a second rank loss during the recovery from the first",
                        frame.name, rt.buddy.buddy_rank(), e.name
                    )
                } else {
                    panic!(
                        "CD {:?}: buddy rank {} no longer holds `{}`, the only copy with \
                         buddy_copies = 1 (it lost its memory): set buddy_copies = 2 to keep \
                         a local copy too",
                        frame.name, rt.buddy.buddy_rank(), e.name
                    )
                }
            })),
            Store::Xor { local: Some(b), .. } | Store::XorPending(b) => Some(b.clone()),
            // Rebuilt before the re-execution unless another member of the group lost it too
            // (then the CD escalated instead of re-executing).
            Store::Xor { local: None, .. } => panic!(
                "CD {:?}: `{}` was lost with this rank's memory and its xor checksum group \
                 could not rebuild it: {}",
                frame.name,
                e.name,
                crate::xor_entries::loss_reason(&rt.xor_context(), frame)
                    .unwrap_or_else(|| "the group did not rebuild it".into())
            ),
            Store::File(slot) => Some(rt.files.read(slot).unwrap_or_else(|err| {
                panic!(
                    "CD {:?}: cannot restore `{}` from {}: {err}",
                    frame.name,
                    e.name,
                    slot.path.display()
                )
            })),
            Store::Reference => None,
            Store::Lost => panic!(
                "CD {:?}: `{}` was lost with this rank's memory",
                frame.name, e.name
            ),
            Store::LocalValue(_) | Store::Regenerate(_) => {
                panic!(
                    "CD {:?}: `{}` was not preserved as bytes",
                    frame.name, e.name
                )
            }
        };
        (e.name.clone(), got)
    };
    if let Some(b) = store_bytes {
        // Fetched from the buddy after this rank's loss: keep a local copy again, or the
        // entry would not survive a later loss of the buddy (with two copies; with one, the
        // buddy's stays the only one).
        if let Store::Buddy { local, .. } = &mut frame.state.borrow_mut().entries[index].store {
            if local.is_none() && rt.config.buddy_copies > 1 {
                *local = Some(b.clone());
            }
        }
        return b;
    }
    let (frame_index, entry_index) = ancestor_entry(rt, frame, &name);
    let ancestor = rt.frames.borrow()[frame_index].clone();
    load_bytes(rt, &ancestor, entry_index)
}

/// (frame index, entry index) of the nearest ancestor entry called `name`.
fn ancestor_entry(rt: &CdRuntime, frame: &Frame, name: &str) -> (usize, usize) {
    let frames = rt.frames.borrow();
    let index = frames
        .iter()
        .position(|f| std::ptr::eq(&**f, frame))
        .expect("a running CD is on the stack");
    for i in (0..index).rev() {
        if let Some(e) = frames[i]
            .state
            .borrow()
            .entries
            .iter()
            .position(|e| e.name == name)
        {
            return (i, e);
        }
    }
    panic!(
        "CD {:?}: `{name}` is preserved by reference but no enclosing CD holds it",
        frame.name
    )
}

fn restore_value<T: Preservable>(rt: &CdRuntime, frame: &Frame, index: usize, value: &mut T) {
    let from_bytes = {
        let st = frame.state.borrow();
        match &st.entries[index].store {
            Store::LocalValue(v) => {
                value.clone_from(v.downcast_ref::<T>().unwrap_or_else(|| {
                    panic!(
                        "CD {:?}: `{}` is restored into another type",
                        frame.name, st.entries[index].name
                    )
                }));
                false
            }
            Store::Regenerate(f) => {
                *value = *f().downcast::<T>().unwrap_or_else(|_| {
                    panic!(
                        "CD {:?}: `{}` regenerates another type",
                        frame.name, st.entries[index].name
                    )
                });
                false
            }
            Store::Reference => {
                let name = st.entries[index].name.clone();
                drop(st);
                let (fi, ei) = ancestor_entry(rt, frame, &name);
                let ancestor = rt.frames.borrow()[fi].clone();
                return restore_value(rt, &ancestor, ei, value);
            }
            _ => true,
        }
    };
    if from_bytes {
        let bytes = load_bytes(rt, frame, index);
        *value = postcard::from_bytes(&bytes)
            .unwrap_or_else(|e| panic!("CD {:?}: preserved bytes do not decode: {e}", frame.name));
    }
}

fn restore_value_any<T: 'static>(rt: &CdRuntime, frame: &Frame, index: usize, value: &mut T) {
    let _ = rt;
    let st = frame.state.borrow();
    match &st.entries[index].store {
        Store::Regenerate(f) => {
            *value = *f().downcast::<T>().unwrap_or_else(|_| {
                panic!(
                    "CD {:?}: `{}` regenerates another type",
                    frame.name, st.entries[index].name
                )
            });
        }
        _ => panic!(
            "CD {:?}: `{}` was not preserved by regeneration",
            frame.name, st.entries[index].name
        ),
    }
}
