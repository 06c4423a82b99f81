//! The per-rank CD runtime, the driver the policies run on: the stack of CDs this rank is
//! inside, its media (buddy, xor, file, the buffer pool), its report counters and the relaxed
//! CDs' rank state; found through a thread-local while the rank runs (`launch.rs` installs it).

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::buddy::{self, BuddyRpcs, BuddyStore, buddy_map};
use crate::buffer_pool::BufferPool;
use crate::checkpoint::state::RankCheckpoint;
use crate::config::{CdConfig, CdSettings};
use crate::error::CdError;
use crate::file_medium::FileWriter;
use crate::frame::{CdKind, Frame, Store};
use crate::generations::GenerationRpcs;
use crate::injector::{self, Injected};
use crate::relaxed::rank_state::{RankState, RelaxedRpcs};
use crate::report::Collector;
use crate::setup_values::SetupRpcs;
use crate::xor::{self, XorError, XorRpcs, XorStore};
use crate::xor_entries::XorContext;

/// One rank's CD state.
pub(crate) struct CdRuntime {
    pub(crate) config: Arc<CdConfig>,
    pub(crate) rank: usize,
    pub(crate) frames: RefCell<Vec<Rc<Frame>>>,
    pub(crate) stats: RefCell<Collector>,
    /// Preservation buffers released by completed CDs, for the next ones.
    pub(crate) pool: BufferPool,
    /// The buddy medium: this rank's copies at its buddy and what it holds for others (shared
    /// with the medium's rpc handlers, [`buddy::serve`]).
    pub(crate) buddy: Rc<BuddyStore>,
    pub(crate) rpcs: BuddyRpcs,
    iterations: RefCell<FxHashMap<String, u64>>,
    /// The merged settings of each CD name and level met so far ([`CdRuntime::settings`]).
    settings: RefCell<FxHashMap<String, FxHashMap<usize, Rc<CdSettings>>>>,
    /// The exact faults of the configuration this rank reached ([`CdConfig::exact_sites`]).
    reached: RefCell<BTreeSet<usize>>,
    /// This rank's directory in the job's private directory (spilled logs go below it).
    pub(crate) file_dir: PathBuf,
    /// Writes (and removes) the file medium's copies off the critical path.
    pub(crate) files: FileWriter,
    /// Memory losses this rank suffered (emulated).
    losses: Cell<u64>,
    /// Relaxed CDs: logging, replay, the hook.
    pub(crate) relaxed: RankState,
    /// The xor medium: this rank's checksum groups and what it heard of their losses (shared
    /// with the medium's rpc handler, [`xor::serve`]).
    pub(crate) xor: Rc<XorStore>,
    pub(crate) xor_rpcs: XorRpcs,
    /// The generations a real loss rolls back to (`REAL_LOSS.md`).
    pub(crate) gen_rpcs: GenerationRpcs,
    /// The set-up values a real loss keeps (`setup_once.rs`).
    pub(crate) setup_rpcs: SetupRpcs,
    /// This rank has switched counting its incoming writes on ([`CdRuntime::count_incoming_writes`]).
    counting: Cell<bool>,
    /// Checkpoints to disk and the resume position of a restart (`checkpoint/`).
    pub(crate) checkpoint: RankCheckpoint,
}

/// The rpc functions of the runtime's media and of relaxed CDs, registered before launch.
#[derive(Clone, Copy)]
pub(crate) struct RuntimeRpcs {
    pub(crate) buddy: BuddyRpcs,
    pub(crate) relaxed: RelaxedRpcs,
    pub(crate) xor: XorRpcs,
    pub(crate) generations: GenerationRpcs,
    pub(crate) setup: SetupRpcs,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<CdRuntime>>> = const { RefCell::new(None) };
}

/// While alive, this thread is the rank of one runtime: its CD calls and its media's rpc
/// handlers find their state ([`install`]).
pub(crate) struct Installed {
    _buddy: buddy::Serving,
    _xor: xor::Serving,
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.try_borrow_mut().map(|mut c| *c = None));
    }
}

/// Makes `rt` this thread's runtime, and its media's state the one their rpc handlers serve,
/// until the guard drops.
pub(crate) fn install(rt: Rc<CdRuntime>) -> Installed {
    let installed = Installed {
        _buddy: buddy::serve(rt.buddy.clone()),
        _xor: xor::serve(rt.xor.clone()),
    };
    CURRENT.with(|c| *c.borrow_mut() = Some(rt));
    installed
}

/// Runs `f` with this rank's CD runtime.
///
/// # Panics
/// Outside [`launch`].
pub(crate) fn with<R>(f: impl FnOnce(&CdRuntime) -> R) -> R {
    let rt = CURRENT
        .with(|c| c.borrow().clone())
        .expect("CD call outside cd_runtime::launch: this thread is not a CD-managed rank");
    f(&rt)
}

/// Runs `f` with this rank's CD runtime, if this thread still has one.
///
/// For the relaxed rpc functions: a rank serves rpcs after its body has returned (pgas
/// finalize), and a request sent by another rank's last CDs can arrive then; [`with`] would
/// panic ("CD call outside cd_runtime::launch") and fail a job that succeeded.
pub(crate) fn try_with<R>(f: impl FnOnce(&CdRuntime) -> R) -> Option<R> {
    let rt = CURRENT.with(|c| c.borrow().clone())?;
    Some(f(&rt))
}

/// This rank's CD runtime.
///
/// # Panics
/// Outside [`launch`].
pub(crate) fn handle() -> Rc<CdRuntime> {
    CURRENT
        .with(|c| c.borrow().clone())
        .expect("CD call outside cd_runtime::launch: this thread is not a CD-managed rank")
}

/// Name of the innermost CD, for messages (`<none>` outside a CD job).
pub(crate) fn current_name() -> String {
    CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .and_then(|rt| rt.frames.borrow().last().map(|f| f.name.clone()))
            .unwrap_or_else(|| "<none>".into())
    })
}

impl CdError {
    /// A detected error of the current CD with `reason`, for a body to return.
    ///
    /// Here rather than in `error.rs`: the current CD's name is the runtime's to know.
    pub fn detected(reason: impl Into<String>) -> CdError {
        CdError::Detected {
            cd: current_name(),
            reason: reason.into(),
        }
    }
}

/// A pgas error inside a CD body (`?` on an rput, an allocation, a local slice) is a detected
/// error of the current CD: it restores and re-executes, and escalates with the pgas error's
/// message if the error persists.
impl From<pgas::PgasError> for CdError {
    fn from(e: pgas::PgasError) -> CdError {
        CdError::detected(e.to_string())
    }
}

/// A refused view inside a CD body (`?` on `with_local_mut`, `view_put`, `view_get`) is a
/// detected error of the current CD, as a pgas error is.
impl From<pgas::ViewError> for CdError {
    fn from(e: pgas::ViewError) -> CdError {
        CdError::detected(e.to_string())
    }
}

impl CdRuntime {
    /// Rank `rank`'s runtime at launch, with the root CD on its stack: collective (the xor
    /// medium's groups are teams; every rank forms the same groups, or finds the same reason
    /// why not). `nodes[r]` is the node of rank `r`; the rank's files go below `file_dir`.
    pub(crate) fn new(
        config: Arc<CdConfig>,
        rank: usize,
        nodes: &[usize],
        file_dir: PathBuf,
        rpcs: RuntimeRpcs,
    ) -> Result<CdRuntime, XorError> {
        let xor = XorStore::new(&config.xor_group_sizes(), nodes, config.buddy_domain)?;
        let buddy_rank = buddy_map(nodes, config.buddy_domain)[rank];
        Ok(CdRuntime {
            rank,
            frames: RefCell::new(vec![Rc::new(Frame::root(&config, rank))]),
            stats: RefCell::new(Collector::default()),
            pool: BufferPool::default(),
            buddy: Rc::new(BuddyStore::new(
                config.buddy_segment_bytes,
                rank,
                buddy_rank,
            )),
            rpcs: rpcs.buddy,
            iterations: RefCell::default(),
            settings: RefCell::default(),
            reached: RefCell::new(BTreeSet::new()),
            files: FileWriter::new(file_dir.clone()),
            file_dir,
            losses: Cell::new(0),
            relaxed: RankState::new(rpcs.relaxed),
            xor: Rc::new(xor),
            xor_rpcs: rpcs.xor,
            gen_rpcs: rpcs.generations,
            setup_rpcs: rpcs.setup,
            counting: Cell::new(false),
            checkpoint: RankCheckpoint::default(),
            config,
        })
    }

    /// The exact faults of the configuration this rank reached, in order.
    pub(crate) fn reached(&self) -> Vec<usize> {
        self.reached.borrow().iter().copied().collect()
    }

    /// Counts one emulated loss of this rank's memory.
    pub(crate) fn count_loss(&self) {
        self.losses.set(self.losses.get() + 1);
    }

    /// What the xor medium's entries work with on this rank.
    pub(crate) fn xor_context(&self) -> XorContext<'_> {
        XorContext {
            xor: &self.xor,
            pool: &self.pool,
            config: &self.config,
            rank: self.rank,
        }
    }

    /// The innermost CD.
    pub(crate) fn top(&self) -> Rc<Frame> {
        self.frames
            .borrow()
            .last()
            .cloned()
            .expect("the root CD is always on the stack")
    }

    /// Makes sure the writes into this rank are counted from now on: the first relaxed CD
    /// (or dependency-tracking strict CD) on the rank switches counting on, for the rest of
    /// the job (`WriteCounting::Switched`, which [`launch`] asks for; a job of strict CDs
    /// alone never pays for counting). Call before reading the IWC a CD starts from.
    ///
    /// Writes that landed before carry no IWC (their acks are `UNCOUNTED`): no replay window
    /// starts before this, and a loss recovery that would rebuild such a write from a
    /// neighbour's log refuses and escalates (`replay::rebuild_before_begin`).
    ///
    /// **Reading chosen:** counting stays on once on. Switching it off when the LCSA
    /// completes would leave uncounted the puts that neighbours, already in the next
    /// instance, make before this rank begins it, which a loss recovery rebuilds.
    pub(crate) fn count_incoming_writes(&self) {
        if !self.counting.get() {
            pgas::runtime_hooks::count_incoming_writes();
            self.counting.set(true);
        }
    }

    /// The innermost strict CD (the LCSA of the relaxed CDs running inside it; the root at
    /// the latest).
    pub(crate) fn lcsa(&self) -> Rc<Frame> {
        self.frames
            .borrow()
            .iter()
            .rev()
            .find(|f| f.kind == CdKind::Strict)
            .cloned()
            .expect("the root CD is strict")
    }

    /// Drops `frame`'s entries and frees what they hold elsewhere (buddy copies, files).
    pub(crate) fn release_entries(&self, frame: &Frame) {
        let entries = std::mem::take(&mut frame.state.borrow_mut().entries);
        if entries.iter().any(|e| matches!(e.store, Store::File(_))) {
            // A CD completes with its copies on disk (file_medium.rs).
            self.files.wait();
        }
        for e in entries {
            match e.store {
                Store::Buddy {
                    key, held, local, ..
                } => {
                    self.rpcs.release(&self.buddy, key, held);
                    if let Some(buf) = local {
                        self.pool.give_back(buf);
                    }
                }
                Store::File(slot) => self.files.release(&slot),
                Store::LocalBytes(buf) | Store::XorPending(buf) => self.pool.give_back(buf),
                Store::Xor { local, parity, .. } => {
                    for buf in [local, parity].into_iter().flatten() {
                        self.pool.give_back(buf);
                    }
                }
                _ => {}
            }
        }
    }

    /// The fault (if any) for this execution of `frame`, after noting that the execution was
    /// reached (for the end-of-run report of exact faults that never fired).
    pub(crate) fn fault_for(&self, frame: &Frame, name: &str, attempt: u32) -> Option<Injected> {
        self.note_reached(frame, name, attempt);
        injector::decide(
            &frame.settings.inject,
            self.config.seed,
            self.rank,
            name,
            frame.iteration,
            attempt,
        )
    }

    /// Records which exact faults of the configuration the execution `attempt` of `frame` reached
    /// (on its first attempt, when exact faults fire), for the end-of-run report of those never
    /// reached ([`crate::CdConfig::unreached`]).
    fn note_reached(&self, frame: &Frame, name: &str, attempt: u32) {
        if attempt == 0 {
            let sites = self
                .config
                .exact_sites(name, frame.level, self.rank, frame.iteration);
            if !sites.is_empty() {
                self.reached.borrow_mut().extend(sites);
            }
        }
    }

    /// Makes `next` the instance number of the next CD called `name` on this rank (a resumed
    /// run continues the interrupted run's numbering).
    pub(crate) fn set_next_iteration(&self, name: &str, next: u64) {
        self.iterations.borrow_mut().insert(name.to_string(), next);
    }

    /// The settings of the CD called `name` at `level`: merged from the configuration's tables
    /// once per name and level, then shared by every instance (a CD's begin stays cheap).
    pub(crate) fn settings(&self, name: &str, level: usize) -> Rc<CdSettings> {
        let mut cache = self.settings.borrow_mut();
        // Looked up by `&str` first: no allocation once the name is known.
        if let Some(s) = cache.get(name).and_then(|levels| levels.get(&level)) {
            return s.clone();
        }
        let s = Rc::new(self.config.settings(name, level));
        cache
            .entry(name.to_string())
            .or_default()
            .insert(level, s.clone());
        s
    }

    /// The instance number of the next CD called `name` on this rank.
    pub(crate) fn next_iteration(&self, name: &str) -> u64 {
        let mut it = self.iterations.borrow_mut();
        // Looked up by `&str` first: no allocation once the name is known.
        if let Some(n) = it.get_mut(name) {
            *n += 1;
            return *n - 1;
        }
        it.insert(name.to_string(), 1);
        0
    }
}

/// Writes one whole line to stderr with one `write_all`, so lines of different ranks (or
/// processes) do not interleave.
pub(crate) fn eprint_line(line: &str) {
    use std::io::Write;
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
