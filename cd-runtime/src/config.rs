//! The TOML configuration of the CD tree: per CD name or level, the preservation medium, the
//! retries, which failures a level contains, the fault injector; globally the seed and the
//! report.
//!
//! ```toml
//! seed = 7                      # injector and cd::rng() seed
//! report = true                 # print the table at the end
//! report_file = "cd-report.json"
//! file_dir = "/scratch/me"     # the job's private directory for its files is made in here
//! buddy_segment_bytes = 16777216 # segment room per rank for copies of the buddy medium
//! memory_budget_bytes = 1073741824 # local preserved bytes per rank before the oldest spill to files
//! buddy_domain = "node"         # buddies on other nodes ("node") or just other ranks ("rank")
//! buddy_copies = 2              # buddy medium: a local copy too (2) or the buddy's alone (1)
//! node_mtbf_seconds = 2.6e6     # MTBF of one node: the report states P_cf of buddy and xor
//! recovery_seconds = 60.0       # window without redundancy after a node failure (for P_cf)
//!
//! [defaults]                    # every CD
//! retries = 2
//!
//! [level.1]                     # CDs at depth 1 (the root is level 0)
//! medium = "buddy"
//!
//! [cd.step]                     # CDs named "step" (most specific wins: cd > level > defaults)
//! contain = ["soft", "rank_loss"]
//! inject = { soft_error = 0.05, rank_loss = 0.01, at = [{ rank = 1, iteration = 3, kind = "rank_loss" }] }
//!
//! [cd.solve]                    # own copy + XOR parity over a checksum group of 4 ranks
//! medium = "xor"                # on 4 different nodes; survives one member's loss per group
//! xor_group = 4
//! restart_threads = 2           # a re-execution may run its kernels on 2 threads (Cd::restart_pool)
//!
//! [cd.cycle]                    # run with cd::strict_steps: how often it preserves
//! interval = "daly"             # "every" (default), a number of steps, or "daly"
//! mtbf_seconds = 3600.0         # mean time between the failures it contains (for "daly")
//!
//! [cd.halo]                     # relaxed CDs (RELAXED_CDS.md)
//! kind = "relaxed"              # run as relaxed (or "strict") whatever the program calls
//! logging = true                # log communication (off: every failure escalates)
//! log_spill_bytes = 1048576     # past this much log in memory, the oldest entries go to a file
//! log_medium = "buddy"          # replicate the log at the buddy rank: recover alone from a rank loss
//! check_classes = true          # check private/privatized declarations (default: debug builds)
//!
//! [cd.step]                     # a strict CD around relaxed ones (their LCSA)
//! dependency_tracking = true    # an escalation re-executes only the ranks it can have touched
//! ```
//!
//! An unknown key, a value of the wrong type or out of range, or a missing file is an error that
//! names the file, the line and the key.
//!
//! ## `retries`: at most [`MAX_RETRIES`]
//!
//! A CD re-executes at most `retries` times (default 2) before it escalates; more than
//! [`MAX_RETRIES`] (1000) is refused, naming the key: a failure that comes back that often is
//! not contained by re-executing again, and a run would spend its time repeating it without a
//! word. For the same reason a CD that fails every execution, an injection probability of 1
//! (`inject.soft_error` or `inject.rank_loss`) with `retries` above 0 where it applies, is
//! refused, naming the probability's key and where its `retries` come from; with
//! `retries = 0` it escalates at once, which is a valid test.
//!
//! ## `file_dir`: where the job's files go
//!
//! Each launch makes a fresh directory of its own, with a random name and mode 0700, inside
//! `file_dir` (made at mode 0700 if missing), or in the system's temporary directory without
//! it, and removes it at the end; the files in it are 0600 and checked by a checksum when read
//! back (`private_files.rs`, `checksum.rs`). A `file_dir` that is a symbolic link, that other
//! users may write to without the sticky bit, or that another user (not root) owns, is refused
//! (key `file_dir`): whoever controls it could read the job's files or swap them.
//!
//! ## `buddy_segment_bytes`: room for the buddy medium's copies
//!
//! With `medium = "buddy"` a rank's preserved bytes go straight into its buddy's shared
//! segment, with one rput (`buddy.rs`). [`crate::launch`] adds `buddy_segment_bytes` (default
//! 16 MiB; a whole number of bytes, rounded up to 64) to every rank's segment for them, so the
//! program's own allocations keep the room the program asked for; a rank keeps there the
//! copies of every rank whose buddy it is. A copy that finds no room goes by rpc into the
//! buddy's private memory instead (slower, correct; the report's `bytes_buddy_rpc` counts
//! them). `0` sends every buddy copy by rpc and adds nothing to the segment.
//!
//! ## `buddy_copies`: one copy or two
//!
//! `2` (the default): the buddy medium keeps every entry twice, at the buddy and in the rank's
//! own memory. A soft error restores from the local copy (a memory copy), the rank's loss from
//! the buddy's, and the buddy's loss takes nothing the rank needs (it stores the copy again at
//! the buddy before a re-execution). The preservation makes both copies on the rank's thread,
//! interleaved chunk by chunk: about 0.6 of the speed of one rput (`cd-bench`'s
//! `preserve_buddy` / `1MiB`, ~0.6x `rput_1MiB`).
//!
//! `1`: the buddy's copy alone, put straight from the program's memory into the buddy's
//! segment: a preservation is one rput (`preserve_buddy` / `1MiB_one_copy`, ~0.8-1x
//! `rput_1MiB`), and the rank keeps no preserved bytes in its memory. A soft error restores by
//! fetching the copy back from the buddy (one rpc read in the buddy's thread, checked by its
//! tag: a round trip and two copies of the bytes, instead of one memory copy). The rank's loss
//! restores from the buddy as with `2`. The buddy's loss takes the only copy: a CD that then
//! re-executes (the buddy's own failure, when they share the CD) cannot restore this rank and
//! escalates, the line that ends the run naming the buddy and this key. Use it where a buddy's
//! loss is contained further up (or not expected), and preservation speed matters.
//!
//! ## `memory_budget_bytes`: demand preservation
//!
//! The bytes of preserved state a rank keeps in its memory on the local medium (byte copies of
//! `preserve_slice` and `preserve_global`, every CD on its stack together). When a preservation passes it, the oldest copies (the outermost CDs'
//! first, in the order they were preserved) move to the file medium (`spill.rs`, written off
//! the critical path) until the rank is under the budget again, as ftRMA's demand checkpoints
//! do under memory pressure: a run keeps going instead of failing for memory. Unset: no
//! limit. The report counts the moved bytes (`bytes_spilled`).
//!
//! ## `buddy_domain`: which failure the buddy medium survives
//!
//! The level of the failure-domain hierarchy (seed 000's topology-aware placement) at which a
//! rank and its buddy are apart, for the whole job (preserved copies and log replicas alike):
//!
//! - `"node"` (the default): the buddy is on another node whenever there is another node, as
//!   the conduit's topology says (hosts under mpirun, also when they hold different numbers of
//!   ranks; `PGAS_RANKS_PER_NODE` on smp), so the copies survive the loss of a whole node. Each
//!   rank is then the buddy of exactly one rank, unless one node holds more than half of the
//!   ranks (then its ranks share the others' memory: at most `ceil(m / (n - m))` each).
//! - `"rank"`: the buddy is the next rank, on the same node or not: the copies survive the loss
//!   of one process, not of its node (a copy within a host is cheaper where a put between hosts
//!   is the cost).
//!
//! With one node both mean the next rank.
//!
//! ## `medium = "xor"` and `xor_group`: checksum groups
//!
//! Each rank keeps its own copy, and the ranks form checksum groups of `xor_group` members
//! (2 or more; required in the table that sets `medium = "xor"` or in `[defaults]`) on
//! different nodes (`buddy_domain` applies: `"rank"` groups over ranks), each holding a share
//! of the XOR parity of the group's copies: about 1/(k-1) of a buddy copy per rank. A group
//! survives the loss of one member, whose copies it rebuilds before the re-execution; two
//! losses in one group escalate. Preservation is collective over the group, so an xor CD must
//! be strict and span whole groups (a relaxed CD cannot: `kind = "relaxed"` with
//! `medium = "xor"` in one table is an error). A group larger than the job, or a topology
//! where a node holds more ranks than there are groups, is an error at launch naming
//! `xor_group`. The placement, the remainder ranks and the layout are in [`crate::xor`].
//!
//! ## `node_mtbf_seconds` and `recovery_seconds`: P_cf in the report
//!
//! With `node_mtbf_seconds` (the mean time between failures of one node) the report states,
//! for every CD on the buddy or xor medium, the probability that a node failure is not
//! survivable for its pairs or groups: a second failure of a node that shares a group with the
//! failed one within `recovery_seconds` (default 60), or a group with two members on the failed
//! node. The formula and its reading are at [`crate::xor::p_cf`].
//!
//! ## `interval` and `mtbf_seconds`: preserving every n-th step
//!
//! For a CD run with [`crate::strict_steps`] (a loop the runtime drives): `interval = "every"`
//! (the default, or `1`) preserves at every step; `interval = n` runs n steps as one execution
//! of the CD, preserving at the first, so a failure re-executes the steps since the last
//! preservation; `interval = "daly"` chooses n from Daly's formula with the preservation time
//! measured in the first step and `mtbf_seconds` (which must be set in the same table or in
//! `[defaults]`). The reading and the formula are in [`crate::interval`]. A CD entered with
//! `strict` from the program's own loop preserves at every execution whatever `interval` says,
//! unless the program reads the setting and runs n of its steps per execution itself (LULESH's
//! "step" does, with a number of cycles: `lulesh::containment::cycles_per_step`).
//!
//! ## `log_medium`: where a relaxed CD's log survives a rank loss
//!
//! A relaxed CD's log (its write, read and other entries, RELAXED_CDS.md) lives in its rank's
//! memory. `log_medium` says where a copy of it is kept, as `medium` does for preserved state
//! (hence the name, and the values, which mean what they mean for `medium`):
//!
//! - `"local"` (the default): the log is in this rank's memory only. A rank loss inside the CD
//!   takes it, so the CD cannot replay and escalates to its parent (for a strict LCSA: every
//!   rank of it re-executes; with `dependency_tracking` too, since the lost rank's notes went
//!   with its memory).
//! - `"buddy"`: when the CD's body ends (its acks in, before the end-of-body detection, which
//!   is where a rank loss is detected), the entries logged since the last replication, of this
//!   CD and of every CD around it, go to the buddy rank in one internal rpc. After a loss the
//!   rank restores its preserved state, fetches the replicas back and replays: it recovers
//!   alone while the others run on. It applies to a CD that contains rank losses (`contain`
//!   includes `"rank_loss"`, as by default).
//!
//! A CD recovering alone from a loss must also find its *preserved state* after the loss:
//! `medium = "buddy"` or `"file"`. `log_medium = "buddy"` with `medium = "local"` in the same
//! table, or with a `contain` that leaves out `"rank_loss"`, is a configuration error; when the
//! two come from different tables, a loss that took the CD's copies escalates, and the line
//! that ends the run says which key to change.
//!
//! ## `kind`: the configuration decides strict or relaxed
//!
//! Without `kind`, a CD has the kind the program enters it with: strict for `cd::strict`,
//! `cd::strict_on`, `cd::strict_local` and `#[cd::strict]`; relaxed for `cd::relaxed` and
//! `#[cd::relaxed]`. With `kind` (looked up like every key, by the CD's name and level when it
//! begins: `[cd.<name>]` over `[level.<n>]` over `[defaults]`), the configuration decides,
//! whichever of these entered it, so a program switches a CD between the two kinds from the
//! file alone:
//!
//! - `kind = "relaxed"`: a relaxed child of the current CD, spanning its ranks; the team of
//!   `strict_on` / `#[cd::strict(team = ..)]` and the `local` of `strict_local` are unused (a
//!   relaxed CD begins, completes and recovers on its own rank).
//! - `kind = "strict"`: a strict child spanning the current CD's ranks (all of them re-execute
//!   together); the body's `private` / `privatized` declarations have no effect.
//!
//! The CD is otherwise the same (name, level, preservation, injection, retries). The nesting
//! rule of the resulting kind still holds: a CD made strict inside a relaxed CD is refused (a
//! panic naming it), since its completion would delete the relaxed logs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::error::{ConfigError, FaultKinds};

/// Where preserved state is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Medium {
    /// This rank's memory (lost with the rank).
    Local,
    /// Another rank's memory, reached through pgas (survives the loss of this rank).
    Buddy,
    /// A file on this machine.
    File,
    /// This rank's memory plus an XOR parity spread over a checksum group of `xor_group`
    /// ranks on different nodes (survives the loss of one member per group; `xor.rs`).
    Xor,
}

/// Where a relaxed CD's log is kept (`log_medium`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogMedium {
    /// This rank's memory only (a rank loss takes it: the CD escalates).
    Local,
    /// Also replicated at the buddy rank when the body ends (the rank recovers alone).
    Buddy,
}

/// Where a rank's buddy is, relative to it (`buddy_domain`, see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuddyDomain {
    /// On another node whenever there is one (survives the loss of a node).
    #[default]
    Node,
    /// The next rank (survives the loss of a rank).
    Rank,
}

/// The kind a CD runs as, when the configuration overrides the program's call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CdKindSetting {
    /// Recovers with every rank it spans, by agreement.
    Strict,
    /// Recovers alone, by replaying its log (RELAXED_CDS.md).
    Relaxed,
}

/// A kind of failure a level may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Failed checks, body errors, injected soft errors.
    Soft,
    /// Loss of a rank's memory.
    RankLoss,
}

/// One fault injected at an exact place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExactFault {
    /// The rank that fails.
    pub rank: usize,
    /// Which instance of the CD on that rank (0 for the first time it begins).
    pub iteration: u64,
    /// What happens.
    pub kind: FaultKind,
}

/// Injection settings of a CD.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct InjectFile {
    soft_error: Option<Spanned<f64>>,
    rank_loss: Option<Spanned<f64>>,
    at: Option<Vec<Spanned<ExactFault>>>,
    /// `at` as the settings share it, built once when the file is parsed.
    #[serde(skip)]
    exact: ExactFaults,
}

impl InjectFile {
    /// Builds [`InjectFile::exact`] from `at`.
    fn index(&mut self) {
        if let Some(at) = &self.at {
            self.exact = ExactFaults::new(at.iter().map(|f| f.get_ref().clone()).collect());
        }
    }
}

/// The exact faults of one table (`inject.at`) in the order written, indexed by rank and
/// iteration: every CD that takes its faults from the table shares them (its settings hold a
/// reference, not a copy), and finding the fault of an execution is one hash lookup, however
/// many faults the table lists.
#[derive(Debug, Clone, Default)]
pub struct ExactFaults(Arc<ExactFaultList>);

/// The faults of [`ExactFaults`] and their index.
#[derive(Debug, Default)]
struct ExactFaultList {
    faults: Vec<ExactFault>,
    /// (rank, iteration) to the first fault written for it.
    first: HashMap<(usize, u64), usize>,
}

impl ExactFaults {
    /// The faults `faults`, in this order.
    pub fn new(faults: Vec<ExactFault>) -> ExactFaults {
        let mut first = HashMap::with_capacity(faults.len());
        for (i, f) in faults.iter().enumerate() {
            first.entry((f.rank, f.iteration)).or_insert(i);
        }
        ExactFaults(Arc::new(ExactFaultList { faults, first }))
    }

    /// The first fault written for instance `iteration` on `rank`, if any.
    pub fn find(&self, rank: usize, iteration: u64) -> Option<&ExactFault> {
        self.0
            .first
            .get(&(rank, iteration))
            .map(|&i| &self.0.faults[i])
    }

    /// The faults, in the order written.
    pub fn as_slice(&self) -> &[ExactFault] {
        &self.0.faults
    }
}

impl PartialEq for ExactFaults {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl From<Vec<ExactFault>> for ExactFaults {
    fn from(faults: Vec<ExactFault>) -> Self {
        ExactFaults::new(faults)
    }
}

/// One table of settings, as written in the file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsFile {
    medium: Option<Medium>,
    retries: Option<Spanned<i64>>,
    contain: Option<Vec<FaultKind>>,
    report: Option<bool>,
    inject: Option<InjectFile>,
    kind: Option<CdKindSetting>,
    logging: Option<bool>,
    log_spill_bytes: Option<Spanned<i64>>,
    log_medium: Option<Spanned<LogMedium>>,
    check_classes: Option<bool>,
    dependency_tracking: Option<bool>,
    interval: Option<Spanned<IntervalFile>>,
    mtbf_seconds: Option<Spanned<f64>>,
    xor_group: Option<Spanned<i64>>,
    restart_threads: Option<Spanned<i64>>,
}

/// `interval` as written: a name (`"every"`, `"daly"`) or a number of steps.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
enum IntervalFile {
    Steps(i64),
    Name(String),
}

impl IntervalFile {
    /// The interval it names, or why not.
    fn resolve(&self) -> Result<Interval, String> {
        match self {
            IntervalFile::Steps(1) => Ok(Interval::Every),
            IntervalFile::Steps(n) if *n > 1 => Ok(Interval::Steps(*n as u64)),
            IntervalFile::Name(s) if s == "every" => Ok(Interval::Every),
            IntervalFile::Name(s) if s == "daly" => Ok(Interval::Daly),
            IntervalFile::Steps(n) => Err(format!("a number of steps must be 1 or more, got {n}")),
            IntervalFile::Name(s) => Err(format!(
                "must be \"every\", \"daly\" or a number of steps, got {s:?}"
            )),
        }
    }
}

/// How often a CD run with [`crate::strict_steps`] preserves (`interval`; the reading is in
/// [`crate::interval`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interval {
    /// At every step (the default): one CD execution per step.
    #[default]
    Every,
    /// At every n-th step: one CD execution per n steps.
    Steps(u64),
    /// At every n-th step, n from Daly's formula with the preservation time measured in the
    /// first step and `mtbf_seconds`.
    Daly,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    seed: Option<u64>,
    report: Option<bool>,
    report_file: Option<Spanned<String>>,
    file_dir: Option<Spanned<String>>,
    buddy_segment_bytes: Option<Spanned<i64>>,
    memory_budget_bytes: Option<Spanned<i64>>,
    buddy_domain: Option<BuddyDomain>,
    buddy_copies: Option<Spanned<i64>>,
    node_mtbf_seconds: Option<Spanned<f64>>,
    recovery_seconds: Option<Spanned<f64>>,
    defaults: Option<SettingsFile>,
    level: Option<BTreeMap<String, Spanned<SettingsFile>>>,
    cd: Option<BTreeMap<String, Spanned<SettingsFile>>>,
}

/// Where a key of the configuration was written: file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    /// Shared by every place in one file.
    file: Arc<Path>,
    line: usize,
}

/// An exact fault as written, for the checks against the job.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FaultSite {
    place: Place,
    /// The table it is in (`cd.step`, `level.1`, `defaults`), shared by its faults.
    table: Arc<str>,
    rank: usize,
    iteration: u64,
    kind: FaultKind,
}

/// The injector of one CD: probabilities per execution and exact faults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Injection {
    /// Probability that an execution fails its check.
    pub soft_error: f64,
    /// Probability that an execution loses the rank's memory.
    pub rank_loss: f64,
    /// Faults at exact (rank, iteration) places.
    pub at: ExactFaults,
}

/// The settings that apply to one CD, after merging defaults, its level and its name.
#[derive(Debug, Clone, PartialEq)]
pub struct CdSettings {
    /// Where `preserve` keeps copies by default.
    pub medium: Medium,
    /// Re-executions after the first execution before escalating.
    pub retries: u32,
    /// Failures this CD contains (others escalate at once).
    pub contain: FaultKinds,
    /// Whether this CD appears in the report.
    pub report: bool,
    /// Its fault injector.
    pub inject: Injection,
    /// `kind = "strict" | "relaxed"`: run the CD as this kind whatever the program calls
    /// (`None`: as called).
    pub kind: Option<CdKindSetting>,
    /// A relaxed CD logs its communication (without logs it cannot recover alone and
    /// escalates every failure).
    pub logging: bool,
    /// Past this many bytes of log in memory, the oldest entries go to a file.
    pub log_spill_bytes: Option<u64>,
    /// Where a relaxed CD's log survives a rank loss: `Buddy` replicates it at the buddy rank
    /// when the body ends, so the rank can recover alone (see the module doc).
    pub log_medium: LogMedium,
    /// Check the access classes of relaxed CDs (an internal rpc per remote access).
    pub check_classes: bool,
    /// For a strict CD around relaxed ones: keep node-level read and write lists, so that an
    /// escalation from a relaxed child re-executes only the ranks it can have touched
    /// (`relaxed/dependencies.rs`); off, it re-executes every rank of the CD.
    pub dependency_tracking: bool,
    /// How often the CD preserves when run with [`crate::strict_steps`].
    pub interval: Interval,
    /// The mean time between failures this CD contains, in seconds (for `interval = "daly"`).
    pub mtbf_seconds: Option<f64>,
    /// Members of a checksum group of the xor medium (`xor_group`; at least 2).
    pub xor_group: Option<usize>,
    /// Threads a re-execution may spread its work over (`restart_threads`; 1: serial
    /// restart). See [`crate::Cd::restart_pool`].
    pub restart_threads: usize,
}

impl Default for CdSettings {
    fn default() -> Self {
        CdSettings {
            medium: Medium::Local,
            retries: 2,
            contain: FaultKinds::SOFT.union(FaultKinds::RANK_LOSS),
            report: true,
            inject: Injection::default(),
            kind: None,
            logging: true,
            log_spill_bytes: None,
            log_medium: LogMedium::Local,
            check_classes: cfg!(debug_assertions),
            dependency_tracking: false,
            interval: Interval::Every,
            mtbf_seconds: None,
            xor_group: None,
            restart_threads: 1,
        }
    }
}

/// Default of [`CdConfig::buddy_segment_bytes`]: 16 MiB.
pub const DEFAULT_BUDDY_SEGMENT_BYTES: usize = 16 << 20;

/// Default of [`CdConfig::recovery_seconds`]: a minute to detect a node's loss, restart its
/// ranks and rebuild their copies.
pub const DEFAULT_RECOVERY_SECONDS: f64 = 60.0;

/// Largest `buddy_segment_bytes` accepted (1 TiB), so that adding it to a segment size cannot
/// overflow.
const MAX_BUDDY_SEGMENT_BYTES: i64 = 1 << 40;

/// Largest `retries` accepted: a CD that fails a thousand times in a row has a failure that
/// comes back, which more re-executions only repeat (each one as long as the CD), silently.
pub const MAX_RETRIES: i64 = 1000;

/// The whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct CdConfig {
    /// Seed of the injector and of `cd::rng()`.
    pub seed: u64,
    /// Print the report table at the end.
    pub report: bool,
    /// Write the report as JSON here.
    pub report_file: Option<PathBuf>,
    /// The directory in which each launch makes its own private directory for its files (file
    /// medium, spilled logs, memory-budget spills); `None`: the system's temporary directory.
    pub file_dir: Option<PathBuf>,
    /// Bytes [`crate::launch`] adds to each rank's segment for the copies of the buddy medium
    /// it keeps for other ranks (a multiple of 64; 0: every buddy copy goes by rpc).
    pub buddy_segment_bytes: usize,
    /// Bytes of preserved state a rank may keep in its memory on the local medium; past it the
    /// oldest copies move to the file medium (demand preservation, `spill.rs`). `None`: no limit.
    pub memory_budget_bytes: Option<usize>,
    /// Where a rank's buddy is: on another node, or the next rank.
    pub buddy_domain: BuddyDomain,
    /// Copies the buddy medium keeps of an entry: 2 (at the buddy and locally; the default) or
    /// 1 (at the buddy alone: faster, but the buddy's loss takes it; module doc).
    pub buddy_copies: usize,
    /// Mean time between failures of one node, in seconds: with it the report states the
    /// probability of a catastrophic failure (P_cf) of the buddy and xor media
    /// ([`crate::xor::p_cf`]).
    pub node_mtbf_seconds: Option<f64>,
    /// Seconds a group stays without redundancy after a node failure (until its lost member's
    /// copies are rebuilt), for P_cf; default [`DEFAULT_RECOVERY_SECONDS`].
    pub recovery_seconds: f64,
    defaults: SettingsFile,
    levels: BTreeMap<usize, SettingsFile>,
    names: BTreeMap<String, SettingsFile>,
    /// Where tables and keys were written (`cd.<name>`, `level.<n>`, `file_dir`,
    /// `report_file`), for messages.
    places: BTreeMap<String, Place>,
    faults: Vec<FaultSite>,
    /// The indices in `faults` of the faults at each (rank, iteration).
    sites_at: HashMap<(usize, u64), Vec<usize>>,
    /// The file read (`None` for the default configuration and inline text).
    source: Option<PathBuf>,
}

impl Default for CdConfig {
    fn default() -> Self {
        CdConfig {
            seed: 0,
            report: false,
            report_file: None,
            file_dir: None,
            buddy_segment_bytes: DEFAULT_BUDDY_SEGMENT_BYTES,
            memory_budget_bytes: None,
            buddy_domain: BuddyDomain::Node,
            buddy_copies: 2,
            node_mtbf_seconds: None,
            recovery_seconds: DEFAULT_RECOVERY_SECONDS,
            defaults: SettingsFile::default(),
            levels: BTreeMap::new(),
            names: BTreeMap::new(),
            places: BTreeMap::new(),
            faults: Vec::new(),
            sites_at: HashMap::new(),
            source: None,
        }
    }
}

/// The line numbers of a text's byte offsets: its newlines are found once, so placing each of
/// many keys is a binary search instead of a count from the start of the text.
struct Lines {
    newlines: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Lines {
        Lines {
            newlines: text.match_indices('\n').map(|(i, _)| i).collect(),
        }
    }

    /// The 1-based line on which `span` starts.
    fn of(&self, span: Range<usize>) -> usize {
        self.newlines.partition_point(|&n| n < span.start) + 1
    }
}

/// A CD whose every execution fails (an injection probability of 1) with retries to spend:
/// it never completes, and its retries repeat the failure without a word. Checked for a CD
/// of each name table (or none) at each level table (or none): the tables that set
/// neither an injection probability nor `retries` change nothing, so only the others are
/// combined. The key of the probability, its place and the message, if some CD is such.
fn hopeless(
    defaults: &SettingsFile,
    levels: &BTreeMap<usize, SettingsFile>,
    names: &BTreeMap<String, SettingsFile>,
) -> Option<(String, Range<usize>, String)> {
    let matters = |s: &SettingsFile| {
        s.retries.is_some()
            || s.inject
                .as_ref()
                .is_some_and(|i| i.soft_error.is_some() || i.rank_loss.is_some())
    };
    let levels: Vec<(String, &SettingsFile)> = std::iter::once(None)
        .chain(levels.iter().filter(|(_, s)| matters(s)).map(Some))
        .map(|l| {
            l.map_or((String::new(), defaults), |(k, s)| {
                (format!("level.{k}."), s)
            })
        })
        .collect();
    let names = std::iter::once(None).chain(names.iter().filter(|(_, s)| matters(s)).map(Some));
    for name in names {
        for (level_at, level) in &levels {
            // Most specific first: the name's table, the level's, the defaults.
            let mut layers: Vec<(String, &SettingsFile)> = Vec::with_capacity(3);
            if let Some((k, s)) = name {
                layers.push((format!("cd.{k}."), s));
            }
            if !level_at.is_empty() {
                layers.push((level_at.clone(), level));
            }
            layers.push(("defaults.".into(), defaults));
            let retries = layers
                .iter()
                .find_map(|(at, s)| s.retries.as_ref().map(|r| (*r.get_ref(), at.clone())));
            let spent = retries
                .as_ref()
                .map_or(CdSettings::default().retries as i64, |r| r.0);
            if spent == 0 {
                continue;
            }
            for (key, pick) in [
                (
                    "soft_error",
                    (|i: &InjectFile| i.soft_error.clone()) as fn(&InjectFile) -> _,
                ),
                ("rank_loss", |i: &InjectFile| i.rank_loss.clone()),
            ] {
                let p = layers
                    .iter()
                    .find_map(|(at, s)| s.inject.as_ref().and_then(pick).map(|p| (p, at)));
                let Some((p, at)) = p.filter(|(p, _)| *p.get_ref() >= 1.0) else {
                    continue;
                };
                let from = match &retries {
                    Some((_, r_at)) => format!("`{r_at}retries`"),
                    None => "the default".into(),
                };
                let what = if key == "soft_error" {
                    "fail its check"
                } else {
                    "lose its rank's memory"
                };
                return Some((
                    format!("{at}inject.{key}"),
                    p.span(),
                    format!(
                        "{key} = {} makes every execution of the CD {what}, so it can never \
                         complete, and retries = {spent} ({from}) would only repeat the \
                         failure: set {key} below 1, or retries = 0 there to see the \
                         escalation at once",
                        p.get_ref()
                    ),
                ));
            }
        }
    }
    None
}

/// The indices of `faults` by (rank, iteration).
fn sites_at(faults: &[FaultSite]) -> HashMap<(usize, u64), Vec<usize>> {
    let mut at: HashMap<(usize, u64), Vec<usize>> = HashMap::with_capacity(faults.len());
    for (i, f) in faults.iter().enumerate() {
        at.entry((f.rank, f.iteration)).or_default().push(i);
    }
    at
}

/// The key whose value starts at `at` (`rank` in `{ rank = -1 }`): the name before the `=`
/// that precedes the value, if the text there is `key =`.
fn key_before(text: &str, at: usize) -> Option<String> {
    let before = text.get(..at)?.trim_end();
    let before = before.strip_suffix('=')?.trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |i| i + 1);
    let key = before[start..].trim_matches('"');
    (!key.is_empty()).then(|| key.to_string())
}

/// The key a toml error message names, if any (e.g. "unknown field `retris`").
fn key_in(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}

/// Lines [`CdConfig::unreached`] spends on faults one by one before it counts the rest.
pub const UNREACHED_LINES: usize = 10;

impl CdConfig {
    /// Reads the configuration from `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<CdConfig, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_path_buf(),
            line: None,
            key: None,
            message: format!("cannot read the CD configuration: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// Reads the file named by `CD_CONFIG`, or the default configuration if it is unset.
    pub fn from_env() -> Result<CdConfig, ConfigError> {
        Ok(Self::for_program(None)?.unwrap_or_default())
    }

    /// The configuration of a program, by the rule every binary follows: the file given on
    /// the command line (`cli`, e.g. `--cd-config`) wins, else the file named by the
    /// environment variable `CD_CONFIG` (unset or empty: none), else `None` (the program's
    /// default: CDs with default settings, or no CDs at all).
    pub fn for_program(cli: Option<&Path>) -> Result<Option<CdConfig>, ConfigError> {
        Self::for_program_with(cli, std::env::var_os("CD_CONFIG"))
    }

    /// [`CdConfig::for_program`] with `CD_CONFIG`'s value given.
    fn for_program_with(
        cli: Option<&Path>,
        env: Option<std::ffi::OsString>,
    ) -> Result<Option<CdConfig>, ConfigError> {
        let (path, from) = match (cli, env) {
            (Some(p), _) => (p.to_path_buf(), "--cd-config"),
            (None, Some(p)) if !p.is_empty() => (PathBuf::from(p), "CD_CONFIG"),
            _ => return Ok(None),
        };
        Self::from_file(&path).map(Some).map_err(|mut e| {
            if e.line.is_none() && e.key.is_none() {
                e.message = format!("{} (named by {from})", e.message);
            }
            e
        })
    }

    /// Parses configuration text; `file` names it in errors.
    pub fn parse(text: &str, file: impl AsRef<Path>) -> Result<CdConfig, ConfigError> {
        let file = file.as_ref().to_path_buf();
        let lines = Lines::new(text);
        let err = |span: Option<Range<usize>>, key: Option<String>, message: String| ConfigError {
            file: file.clone(),
            line: span.map(|s| lines.of(s)),
            key,
            message,
        };
        let raw: ConfigFile = toml::from_str(text).map_err(|e| {
            // A bad value is named by the key it is given to (`rank` for `rank = -1`), not by
            // the value the message quotes; an unknown key by the message.
            let key = e
                .span()
                .and_then(|s| key_before(text, s.start))
                .or_else(|| key_in(e.message()));
            err(e.span(), key, e.message().trim().to_string())
        })?;
        let shared_file: Arc<Path> = file.as_path().into();
        let place = |span: Range<usize>| Place {
            file: shared_file.clone(),
            line: lines.of(span),
        };
        let mut places = BTreeMap::new();
        let mut faults = Vec::new();
        let mut sites = |s: &mut SettingsFile, table: &str| {
            let table: Arc<str> = table.into();
            if let Some(inject) = &mut s.inject {
                inject.index();
            }
            for f in s.inject.iter().flat_map(|i| i.at.iter().flatten()) {
                faults.push(FaultSite {
                    place: place(f.span()),
                    table: table.clone(),
                    rank: f.get_ref().rank,
                    iteration: f.get_ref().iteration,
                    kind: f.get_ref().kind,
                });
            }
        };
        let defaults_mtbf = raw
            .defaults
            .as_ref()
            .is_some_and(|d| d.mtbf_seconds.is_some());
        let defaults_xor_group = raw.defaults.as_ref().is_some_and(|d| d.xor_group.is_some());
        let check = |s: &SettingsFile,
                     at: &str,
                     table: Option<Range<usize>>|
         -> Result<(), ConfigError> {
            if let Some(m) = &s.mtbf_seconds {
                if !(m.get_ref().is_finite() && *m.get_ref() > 0.0) {
                    return Err(err(
                        Some(m.span()),
                        Some(format!("{at}mtbf_seconds")),
                        format!("must be a number of seconds above 0, got {}", m.get_ref()),
                    ));
                }
            }
            if let Some(i) = &s.interval {
                let interval = i
                    .get_ref()
                    .resolve()
                    .map_err(|why| err(Some(i.span()), Some(format!("{at}interval")), why))?;
                if interval == Interval::Daly && s.mtbf_seconds.is_none() && !defaults_mtbf {
                    return Err(err(
                        Some(i.span()),
                        Some(format!("{at}interval")),
                        "interval = \"daly\" needs the mean time between failures: set \
                         mtbf_seconds in the same table or in [defaults]"
                            .into(),
                    ));
                }
            }
            if let Some(k) = &s.xor_group {
                if *k.get_ref() < 2 {
                    return Err(err(
                        Some(k.span()),
                        Some(format!("{at}xor_group")),
                        format!(
                            "a checksum group needs at least 2 members (the parity of one \
                             member is a copy of it), got {}",
                            k.get_ref()
                        ),
                    ));
                }
            }
            if let Some(t) = &s.restart_threads {
                let max = gasnet_bridge::limits::max_threads();
                if *t.get_ref() < 1 || *t.get_ref() as u64 > max as u64 {
                    return Err(err(
                        Some(t.span()),
                        Some(format!("{at}restart_threads")),
                        format!(
                            "restart_threads must be between 1 (a serial restart) and {max} \
                             (the threads this machine runs), got {}",
                            t.get_ref()
                        ),
                    ));
                }
            }
            if s.medium == Some(Medium::Xor) && s.xor_group.is_none() && !defaults_xor_group {
                return Err(err(
                    table.clone(),
                    Some(format!("{at}medium")),
                    "medium = \"xor\" needs the size of its checksum groups: set xor_group \
                     (2 or more) in the same table or in [defaults]"
                        .into(),
                ));
            }
            if s.medium == Some(Medium::Xor) && s.kind == Some(CdKindSetting::Relaxed) {
                return Err(err(
                    table.clone(),
                    Some(format!("{at}medium")),
                    "medium = \"xor\" preserves and rebuilds together with the checksum \
                     group, which a relaxed CD (kind = \"relaxed\", recovering alone) cannot: \
                     use medium = \"buddy\" there"
                        .into(),
                ));
            }
            if let Some(r) = &s.retries {
                if !(0..=MAX_RETRIES).contains(r.get_ref()) {
                    return Err(err(
                        Some(r.span()),
                        Some(format!("{at}retries")),
                        format!(
                            "must be between 0 and {MAX_RETRIES} (re-executions before the CD \
                             escalates; a failure that comes back that often is not \
                             contained by more), got {}",
                            r.get_ref()
                        ),
                    ));
                }
            }
            if let Some(b) = &s.log_spill_bytes {
                if *b.get_ref() < 0 {
                    return Err(err(
                        Some(b.span()),
                        Some(format!("{at}log_spill_bytes")),
                        format!("must be a number of bytes (0 or more), got {}", b.get_ref()),
                    ));
                }
            }
            if let Some(m) = &s.log_medium {
                if *m.get_ref() == LogMedium::Buddy {
                    let why = if s.medium == Some(Medium::Local) {
                        Some(
                            "log_medium = \"buddy\" lets the CD recover alone from a rank loss, \
                             but medium = \"local\" (in the same table) keeps its preserved \
                             state in the memory the loss takes: set medium = \"buddy\" (or \
                             \"file\")",
                        )
                    } else if s
                        .contain
                        .as_ref()
                        .is_some_and(|c| !c.contains(&FaultKind::RankLoss))
                    {
                        Some(
                            "log_medium = \"buddy\" replicates the log for rank losses, but \
                             `contain` (in the same table) leaves out \"rank_loss\": add it, or \
                             drop log_medium",
                        )
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        return Err(err(
                            Some(m.span()),
                            Some(format!("{at}log_medium")),
                            why.to_string(),
                        ));
                    }
                }
            }
            if let Some(inj) = &s.inject {
                for (name, p) in [
                    ("soft_error", &inj.soft_error),
                    ("rank_loss", &inj.rank_loss),
                ] {
                    if let Some(p) = p {
                        if !(0.0..=1.0).contains(p.get_ref()) {
                            return Err(err(
                                Some(p.span()),
                                Some(format!("{at}inject.{name}")),
                                format!(
                                    "a probability must be between 0 and 1, got {}",
                                    p.get_ref()
                                ),
                            ));
                        }
                    }
                }
            }
            Ok(())
        };
        let buddy_segment_bytes = match &raw.buddy_segment_bytes {
            None => DEFAULT_BUDDY_SEGMENT_BYTES,
            Some(b) if (0..=MAX_BUDDY_SEGMENT_BYTES).contains(b.get_ref()) => {
                (*b.get_ref() as usize).next_multiple_of(64)
            }
            Some(b) => {
                return Err(err(
                    Some(b.span()),
                    Some("buddy_segment_bytes".into()),
                    format!(
                        "must be a number of bytes between 0 and {MAX_BUDDY_SEGMENT_BYTES}, got {}",
                        b.get_ref()
                    ),
                ));
            }
        };
        let memory_budget_bytes = match &raw.memory_budget_bytes {
            None => None,
            Some(b) if *b.get_ref() > 0 => Some(*b.get_ref() as usize),
            Some(b) => {
                return Err(err(
                    Some(b.span()),
                    Some("memory_budget_bytes".into()),
                    format!(
                        "must be a positive number of bytes (the preserved state a rank keeps in \
                         memory before the oldest copies move to files), got {}",
                        b.get_ref()
                    ),
                ));
            }
        };
        let buddy_copies = match &raw.buddy_copies {
            None => 2,
            Some(c) if matches!(c.get_ref(), 1 | 2) => *c.get_ref() as usize,
            Some(c) => {
                return Err(err(
                    Some(c.span()),
                    Some("buddy_copies".into()),
                    format!(
                        "must be 1 (the buddy's copy alone) or 2 (a local copy too), got {}",
                        c.get_ref()
                    ),
                ));
            }
        };
        let seconds = |v: &Option<Spanned<f64>>, key: &str| -> Result<Option<f64>, ConfigError> {
            match v {
                Some(x) if !(x.get_ref().is_finite() && *x.get_ref() > 0.0) => Err(err(
                    Some(x.span()),
                    Some(key.to_string()),
                    format!("must be a number of seconds above 0, got {}", x.get_ref()),
                )),
                Some(x) => Ok(Some(*x.get_ref())),
                None => Ok(None),
            }
        };
        let node_mtbf_seconds = seconds(&raw.node_mtbf_seconds, "node_mtbf_seconds")?;
        let recovery_seconds =
            seconds(&raw.recovery_seconds, "recovery_seconds")?.unwrap_or(DEFAULT_RECOVERY_SECONDS);
        let mut defaults = raw.defaults.unwrap_or_default();
        check(&defaults, "defaults.", None)?;
        sites(&mut defaults, "defaults");
        let mut levels = BTreeMap::new();
        for (k, v) in raw.level.unwrap_or_default() {
            let level: usize = k.parse().map_err(|_| {
                err(
                    Some(v.span()),
                    Some(format!("level.{k}")),
                    "a level must be a whole number (the root is level 0)".into(),
                )
            })?;
            places.insert(format!("level.{level}"), place(v.span()));
            let span = v.span();
            let mut v = v.into_inner();
            check(&v, &format!("level.{k}."), Some(span))?;
            sites(&mut v, &format!("level.{level}"));
            levels.insert(level, v);
        }
        let mut names = BTreeMap::new();
        for (k, v) in raw.cd.unwrap_or_default() {
            places.insert(format!("cd.{k}"), place(v.span()));
            let span = v.span();
            let mut v = v.into_inner();
            check(&v, &format!("cd.{k}."), Some(span))?;
            sites(&mut v, &format!("cd.{k}"));
            names.insert(k, v);
        }
        if let Some((key, span, message)) = hopeless(&defaults, &levels, &names) {
            return Err(err(Some(span), Some(key), message));
        }
        for (key, v) in [
            ("file_dir", &raw.file_dir),
            ("report_file", &raw.report_file),
        ] {
            if let Some(v) = v {
                places.insert(key.to_string(), place(v.span()));
            }
        }
        Ok(CdConfig {
            seed: raw.seed.unwrap_or(0),
            report: raw.report.unwrap_or(false),
            report_file: raw.report_file.map(|v| PathBuf::from(v.into_inner())),
            file_dir: raw.file_dir.map(|v| PathBuf::from(v.into_inner())),
            buddy_segment_bytes,
            memory_budget_bytes,
            buddy_domain: raw.buddy_domain.unwrap_or_default(),
            buddy_copies,
            node_mtbf_seconds,
            recovery_seconds,
            defaults,
            levels,
            names,
            places,
            sites_at: sites_at(&faults),
            faults,
            source: (file != Path::new("<string>")).then_some(file),
        })
    }

    /// The settings of the CD called `name` at `level`: its name's table over its level's
    /// over the defaults, field by field.
    pub fn settings(&self, name: &str, level: usize) -> CdSettings {
        let mut s = CdSettings::default();
        let layers = [
            Some(&self.defaults),
            self.levels.get(&level),
            self.names.get(name),
        ];
        for layer in layers.into_iter().flatten() {
            if let Some(m) = layer.medium {
                s.medium = m;
            }
            if let Some(r) = &layer.retries {
                s.retries = *r.get_ref() as u32;
            }
            if let Some(c) = &layer.contain {
                s.contain = c.iter().fold(FaultKinds::NONE, |acc, k| {
                    acc.union(match k {
                        FaultKind::Soft => FaultKinds::SOFT,
                        FaultKind::RankLoss => FaultKinds::RANK_LOSS,
                    })
                });
            }
            if let Some(r) = layer.report {
                s.report = r;
            }
            if let Some(k) = layer.kind {
                s.kind = Some(k);
            }
            if let Some(l) = layer.logging {
                s.logging = l;
            }
            if let Some(b) = &layer.log_spill_bytes {
                s.log_spill_bytes = Some(*b.get_ref() as u64);
            }
            if let Some(m) = &layer.log_medium {
                s.log_medium = *m.get_ref();
            }
            if let Some(c) = layer.check_classes {
                s.check_classes = c;
            }
            if let Some(d) = layer.dependency_tracking {
                s.dependency_tracking = d;
            }
            if let Some(i) = &layer.interval {
                // Checked when parsed.
                s.interval = i.get_ref().resolve().unwrap_or_default();
            }
            if let Some(m) = &layer.mtbf_seconds {
                s.mtbf_seconds = Some(*m.get_ref());
            }
            if let Some(k) = &layer.xor_group {
                // Checked when parsed: 2 or more.
                s.xor_group = Some(*k.get_ref() as usize);
            }
            if let Some(t) = &layer.restart_threads {
                // Checked when parsed: 1 or more.
                s.restart_threads = *t.get_ref() as usize;
            }
            if let Some(inj) = &layer.inject {
                if let Some(p) = &inj.soft_error {
                    s.inject.soft_error = *p.get_ref();
                }
                if let Some(p) = &inj.rank_loss {
                    s.inject.rank_loss = *p.get_ref();
                }
                if inj.at.is_some() {
                    s.inject.at = inj.exact.clone();
                }
            }
        }
        s
    }

    /// The file this configuration was read from, if any.
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// Where to change the settings of the CD `name`: `[cd.<name>]` of the file (with its
    /// line when the table exists), for messages.
    pub fn table_of(&self, name: &str) -> String {
        let key = format!("cd.{name}");
        match (self.places.get(&key), &self.source) {
            (Some(p), _) if *p.file != *Path::new("<string>") => {
                format!("[{key}] ({}:{})", p.file.display(), p.line)
            }
            (_, Some(f)) => format!("[{key}] of {}", f.display()),
            _ => format!("[{key}] of the CD configuration (--cd-config or CD_CONFIG)"),
        }
    }

    fn config_error(&self, key: &str, message: String) -> ConfigError {
        let place = self.places.get(key);
        ConfigError {
            file: place
                .map(|p| p.file.to_path_buf())
                .or_else(|| self.source.clone())
                .unwrap_or_else(|| PathBuf::from("<config>")),
            line: place.map(|p| p.line),
            key: Some(key.to_string()),
            message,
        }
    }

    /// Checks what can be checked against a job of `ranks` ranks before it starts: exact
    /// faults name existing ranks, `file_dir` is a directory this process can write in (it is
    /// created if missing) that no other user can redirect (not a symbolic link, not writable
    /// by others without the sticky bit, not another user's), `report_file` can be written.
    pub fn check_job(&self, ranks: usize) -> Result<(), ConfigError> {
        if let Some(k) = self.xor_group_sizes().into_iter().find(|&k| k > ranks) {
            return Err(self.config_error(
                "xor_group",
                format!(
                    "xor_group = {k} needs {k} ranks for one checksum group, but the job has \
                     {ranks}: set xor_group to at most {ranks}"
                ),
            ));
        }
        if let Some(f) = self.faults.iter().find(|f| f.rank >= ranks) {
            return Err(ConfigError {
                file: f.place.file.to_path_buf(),
                line: Some(f.place.line),
                key: Some(format!("{}.inject.at.rank", f.table)),
                message: format!(
                    "a fault on rank {}, but the job has {ranks} rank(s) (0 to {}): it would \
                     never happen; name a rank of the job",
                    f.rank,
                    ranks.saturating_sub(1)
                ),
            });
        }
        if let Some(dir) = &self.file_dir {
            // The job's own directory, made and removed again: the proof it can be made there.
            crate::private_files::PrivateDir::create(Some(dir))
                .map_err(|e| self.config_error("file_dir", e.to_string()))?;
        }
        if let Some(path) = &self.report_file {
            let bad = |m: String| self.config_error("report_file", m);
            if path.is_dir() {
                return Err(bad(format!(
                    "{} is a directory; name a file for the JSON report",
                    path.display()
                )));
            }
            let existed = path.exists();
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .map_err(|e| bad(format!("cannot write {}: {e}", path.display())))?;
            if !existed {
                let _ = std::fs::remove_file(path);
            }
        }
        Ok(())
    }

    /// True when some CD may keep preserved state in files: a table sets `medium = "file"`, or
    /// a memory budget moves copies to files.
    pub(crate) fn keeps_files(&self) -> bool {
        self.memory_budget_bytes.is_some()
            || std::iter::once(&self.defaults)
                .chain(self.levels.values())
                .chain(self.names.values())
                .any(|s| s.medium == Some(Medium::File))
    }

    /// The checksum group sizes (`xor_group`) written anywhere in the configuration, in
    /// increasing order: [`crate::launch`] forms the groups of each size at start-up (a
    /// collective over every rank, so not when a CD first asks).
    pub fn xor_group_sizes(&self) -> Vec<usize> {
        let mut sizes: Vec<usize> = std::iter::once(&self.defaults)
            .chain(self.levels.values())
            .chain(self.names.values())
            .filter_map(|s| s.xor_group.as_ref().map(|k| *k.get_ref() as usize))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// What the configuration names but the run described by `report` never used: tables of
    /// CD names no CD had, levels no CD ran at. One line each, naming the file and line.
    pub fn unused(&self, report: &crate::report::Report) -> Vec<String> {
        let mut ran: Vec<&str> = report.cds.iter().map(|c| c.name.as_str()).collect();
        ran.sort_unstable();
        ran.dedup();
        let ran = if ran.is_empty() {
            "none".to_string()
        } else {
            ran.join(", ")
        };
        let at = |key: &str| {
            self.places
                .get(key)
                .map(|p| format!("{}:{}: ", p.file.display(), p.line))
                .unwrap_or_default()
        };
        let mut out = Vec::new();
        for name in self.names.keys() {
            if name != "root" && report.cd(name).is_none() {
                out.push(format!(
                    "{}[cd.{name}] names a CD this run never entered, so its settings were \
                     unused (CDs it entered: {ran}); check the name",
                    at(&format!("cd.{name}"))
                ));
            }
        }
        let deepest = report.cds.iter().map(|c| c.level).max().unwrap_or(0);
        for &level in self.levels.keys() {
            if level > 0 && !report.cds.iter().any(|c| c.level == level) {
                out.push(format!(
                    "{}[level.{level}] names a level no CD of this run reached (the deepest was \
                     {deepest}), so its settings were unused",
                    at(&format!("level.{level}"))
                ));
            }
        }
        out
    }

    /// The exact faults (indices for [`CdConfig::unreached`]) that an execution of instance
    /// `iteration` of the CD `name` at `level` on `rank` reaches: those at that rank and
    /// iteration in the most specific table that sets `inject.at` for the CD (the one the CD
    /// uses). Allocates nothing unless some exact fault names this rank and iteration.
    pub(crate) fn exact_sites(
        &self,
        name: &str,
        level: usize,
        rank: usize,
        iteration: u64,
    ) -> Vec<usize> {
        let Some(candidates) = self.sites_at.get(&(rank, iteration)) else {
            return Vec::new();
        };
        let sets_at = |l: Option<&SettingsFile>| {
            l.is_some_and(|l| l.inject.as_ref().is_some_and(|i| i.at.is_some()))
        };
        let table = if sets_at(self.names.get(name)) {
            format!("cd.{name}")
        } else if sets_at(self.levels.get(&level)) {
            format!("level.{level}")
        } else if sets_at(Some(&self.defaults)) {
            "defaults".to_string()
        } else {
            return Vec::new();
        };
        candidates
            .iter()
            .copied()
            .filter(|&i| *self.faults[i].table == *table)
            .collect()
    }

    /// The exact faults (`inject = { at = [...] }`) the run never reached, given those it
    /// reached ([`CdConfig::exact_sites`] of every execution, on every rank): one line each,
    /// naming the file and line and the fault, for the first [`UNREACHED_LINES`], then one
    /// line with the count of the others (a generated list may hold many thousands). A fault
    /// is reached when its rank begins that instance of a CD whose settings take their `at`
    /// from the fault's table.
    pub fn unreached(&self, reached: &[usize]) -> Vec<String> {
        let reached: HashSet<usize> = reached.iter().copied().collect();
        let missed = self
            .faults
            .iter()
            .enumerate()
            .filter(|(i, _)| !reached.contains(i))
            .count();
        let mut lines: Vec<String> = self
            .faults
            .iter()
            .enumerate()
            .filter(|(i, _)| !reached.contains(i))
            .take(UNREACHED_LINES)
            .map(|(_, f)| {
                let kind = match f.kind {
                    FaultKind::Soft => "soft",
                    FaultKind::RankLoss => "rank_loss",
                };
                format!(
                    "{}:{}: [{}] inject.at {{ rank = {}, iteration = {}, kind = \"{kind}\" }} \
                     was never injected: rank {} never began instance {} (counted from 0) of a \
                     CD that takes its faults from [{}]; check the rank and the iteration",
                    f.place.file.display(),
                    f.place.line,
                    f.table,
                    f.rank,
                    f.iteration,
                    f.rank,
                    f.iteration,
                    f.table
                )
            })
            .collect();
        if missed > UNREACHED_LINES {
            lines.push(format!(
                "... and {} more exact faults of the configuration were never injected",
                missed - UNREACHED_LINES
            ));
        }
        lines
    }

    /// Sets the settings table of CDs named `name` from TOML text (for programs and tests
    /// that configure in code); errors name `<string>`.
    pub fn with_cd(mut self, name: &str, table: &str) -> Result<CdConfig, ConfigError> {
        let parsed = CdConfig::parse(&format!("[cd.{name}]\n{table}"), "<string>")?;
        self.names.extend(parsed.names);
        self.places.extend(parsed.places);
        let table = format!("cd.{name}");
        self.faults.retain(|f| *f.table != *table);
        self.faults.extend(parsed.faults);
        self.sites_at = sites_at(&self.faults);
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<CdConfig, ConfigError> {
        CdConfig::parse(t, "test.toml")
    }

    #[test]
    fn unreached_exact_faults_name_their_line() {
        let c = parse(
            "[defaults]\ninject = { at = [{ rank = 0, iteration = 1, kind = \"soft\" }] }\n\
             [cd.step]\ninject = { at = [\n  { rank = 1, iteration = 2, kind = \"soft\" },\n  \
             { rank = 1, iteration = 99, kind = \"rank_loss\" },\n] }\n",
        )
        .unwrap();
        // `step` takes its faults from [cd.step]; other CDs from [defaults].
        assert_eq!(c.exact_sites("step", 1, 1, 2), vec![1]);
        assert!(c.exact_sites("step", 1, 0, 1).is_empty());
        assert_eq!(c.exact_sites("other", 1, 0, 1), vec![0]);
        assert!(c.exact_sites("step", 1, 1, 3).is_empty());
        let lines = c.unreached(&[0, 1]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(
            lines[0],
            "test.toml:6: [cd.step] inject.at { rank = 1, iteration = 99, kind = \"rank_loss\" } \
             was never injected: rank 1 never began instance 99 (counted from 0) of a CD that \
             takes its faults from [cd.step]; check the rank and the iteration"
        );
        assert_eq!(c.unreached(&[0, 1, 2]), Vec::<String>::new());
    }

    #[test]
    fn thousands_of_unreached_faults_take_a_few_lines() {
        let at: Vec<String> = (0..5000)
            .map(|i| format!("{{ rank = 0, iteration = {}, kind = \"soft\" }}", 1000 + i))
            .collect();
        let c = parse(&format!(
            "[cd.step]\ninject = {{ at = [{}] }}\n",
            at.join(", ")
        ))
        .unwrap();
        let lines = c.unreached(&[]);
        assert_eq!(lines.len(), UNREACHED_LINES + 1, "{:?}", &lines[..3]);
        assert!(lines[0].contains("iteration = 1000,"), "{}", lines[0]);
        assert_eq!(
            lines[UNREACHED_LINES],
            format!(
                "... and {} more exact faults of the configuration were never injected",
                5000 - UNREACHED_LINES
            )
        );
    }

    #[test]
    fn layers_merge_field_by_field() {
        let c = parse(
            "seed = 9\n[defaults]\nretries = 5\n[level.1]\nmedium = \"buddy\"\n\
             [cd.step]\nretries = 1\ninject = { soft_error = 0.5, at = [{ rank = 2, iteration = 3, kind = \"rank_loss\" }] }\n",
        )
        .unwrap();
        assert_eq!(c.seed, 9);
        let s = c.settings("step", 1);
        assert_eq!((s.medium, s.retries), (Medium::Buddy, 1));
        assert_eq!(s.inject.soft_error, 0.5);
        assert_eq!(
            s.inject.at.as_slice(),
            [ExactFault {
                rank: 2,
                iteration: 3,
                kind: FaultKind::RankLoss
            }]
        );
        let other = c.settings("other", 2);
        assert_eq!((other.medium, other.retries), (Medium::Local, 5));
        assert!(other.contain.contains(FaultKinds::RANK_LOSS));
    }

    #[test]
    fn buddy_segment_bytes_defaults_rounds_and_names_itself() {
        assert_eq!(
            CdConfig::default().buddy_segment_bytes,
            DEFAULT_BUDDY_SEGMENT_BYTES
        );
        assert_eq!(
            parse("seed = 1\n").unwrap().buddy_segment_bytes,
            DEFAULT_BUDDY_SEGMENT_BYTES
        );
        assert_eq!(
            parse("buddy_segment_bytes = 0\n")
                .unwrap()
                .buddy_segment_bytes,
            0
        );
        assert_eq!(
            parse("buddy_segment_bytes = 100\n")
                .unwrap()
                .buddy_segment_bytes,
            128
        );
        let e = parse("seed = 1\nbuddy_segment_bytes = -5\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("buddy_segment_bytes"))
        );
        assert!(e.to_string().contains("-5"), "{e}");
        let e = parse("[defaults]\nbuddy_segment_bytes = 5\n").unwrap_err();
        assert_eq!(
            e.key.as_deref(),
            Some("buddy_segment_bytes"),
            "top level only"
        );
    }

    #[test]
    fn buddy_copies_is_one_or_two_and_names_itself() {
        assert_eq!(CdConfig::default().buddy_copies, 2);
        assert_eq!(parse("seed = 1\n").unwrap().buddy_copies, 2);
        assert_eq!(parse("buddy_copies = 1\n").unwrap().buddy_copies, 1);
        assert_eq!(parse("buddy_copies = 2\n").unwrap().buddy_copies, 2);
        for bad in ["0", "3", "-1"] {
            let e = parse(&format!("seed = 1\nbuddy_copies = {bad}\n")).unwrap_err();
            assert_eq!(
                (e.line, e.key.as_deref()),
                (Some(2), Some("buddy_copies")),
                "{bad}"
            );
            assert!(e.to_string().contains("1 (the buddy's copy alone)"), "{e}");
        }
    }

    #[test]
    fn interval_and_mtbf_parse_merge_and_name_themselves() {
        let c = parse(
            "[defaults]\nmtbf_seconds = 3600.5\n[level.1]\ninterval = 4\n\
             [cd.a]\ninterval = \"daly\"\n[cd.b]\ninterval = \"every\"\n[cd.c]\ninterval = 1\n",
        )
        .unwrap();
        assert_eq!(c.settings("x", 1).interval, Interval::Steps(4));
        assert_eq!(c.settings("a", 1).interval, Interval::Daly);
        assert_eq!(c.settings("a", 1).mtbf_seconds, Some(3600.5));
        assert_eq!(c.settings("b", 1).interval, Interval::Every);
        assert_eq!(c.settings("c", 1).interval, Interval::Every);
        assert_eq!(c.settings("x", 2).interval, Interval::Every, "default");
        assert_eq!(CdConfig::default().settings("x", 1).mtbf_seconds, None);
        let e = parse("[cd.x]\ninterval = \"daly\"\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("cd.x.interval")),
            "{e}"
        );
        assert!(e.to_string().contains("mtbf_seconds"), "{e}");
        parse("[cd.x]\ninterval = \"daly\"\nmtbf_seconds = 60\n").unwrap();
        for (bad, key, words) in [
            ("interval = 0", "cd.x.interval", "1 or more"),
            ("interval = \"weekly\"", "cd.x.interval", "weekly"),
            ("mtbf_seconds = -1.0", "cd.x.mtbf_seconds", "above 0"),
            ("mtbf_seconds = 0", "cd.x.mtbf_seconds", "above 0"),
        ] {
            let e = parse(&format!("[cd.x]\n{bad}\n")).unwrap_err();
            assert_eq!(
                (e.line, e.key.as_deref()),
                (Some(2), Some(key)),
                "{bad}: {e}"
            );
            assert!(e.to_string().contains(words), "{bad}: {e}");
        }
    }

    #[test]
    fn xor_group_parses_merges_and_is_checked() {
        let c = parse(
            "[defaults]\nxor_group = 4\n[level.1]\nmedium = \"xor\"\n\
             [cd.small]\nmedium = \"xor\"\nxor_group = 2\n",
        )
        .unwrap();
        let s = c.settings("x", 1);
        assert_eq!((s.medium, s.xor_group), (Medium::Xor, Some(4)));
        assert_eq!(c.settings("small", 3).xor_group, Some(2));
        assert_eq!(c.xor_group_sizes(), vec![2, 4]);
        assert_eq!(CdConfig::default().xor_group_sizes(), Vec::<usize>::new());
        c.check_job(4).unwrap();
        let e = c.check_job(3).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("xor_group"), "{e}");
        assert!(e.to_string().contains("xor_group = 4") && e.to_string().contains("3"));
        for (bad, key, line, words) in [
            ("[cd.x]\nxor_group = 1\n", "cd.x.xor_group", 2, "at least 2"),
            ("[cd.x]\nxor_group = -3\n", "cd.x.xor_group", 2, "-3"),
            (
                "[cd.x]\nretries = 1\nmedium = \"xor\"\n",
                "cd.x.medium",
                1,
                "xor_group",
            ),
            (
                "[level.2]\nmedium = \"xor\"\nxor_group = 2\nkind = \"relaxed\"\n",
                "level.2.medium",
                1,
                "relaxed",
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(
                (e.line, e.key.as_deref()),
                (Some(line), Some(key)),
                "{bad}: {e}"
            );
            assert!(e.to_string().contains(words), "{bad}: {e}");
        }
        // The group size from [defaults] serves every table.
        parse("[defaults]\nxor_group = 3\n[cd.x]\nmedium = \"xor\"\n").unwrap();
    }

    #[test]
    fn node_mtbf_and_recovery_seconds_parse_and_name_themselves() {
        let c = CdConfig::default();
        assert_eq!(
            (c.node_mtbf_seconds, c.recovery_seconds),
            (None, DEFAULT_RECOVERY_SECONDS)
        );
        let c = parse("node_mtbf_seconds = 86400\nrecovery_seconds = 12.5\n").unwrap();
        assert_eq!(
            (c.node_mtbf_seconds, c.recovery_seconds),
            (Some(86400.0), 12.5)
        );
        for (bad, key) in [
            ("node_mtbf_seconds = 0\n", "node_mtbf_seconds"),
            ("recovery_seconds = -1.0\n", "recovery_seconds"),
        ] {
            let e = parse(&format!("seed = 1\n{bad}")).unwrap_err();
            assert_eq!((e.line, e.key.as_deref()), (Some(2), Some(key)), "{e}");
            assert!(e.to_string().contains("above 0"), "{e}");
        }
    }

    #[test]
    fn buddy_domain_parses_and_names_itself() {
        assert_eq!(CdConfig::default().buddy_domain, BuddyDomain::Node);
        assert_eq!(
            parse("buddy_domain = \"rank\"\n").unwrap().buddy_domain,
            BuddyDomain::Rank
        );
        assert_eq!(
            parse("buddy_domain = \"node\"\n").unwrap().buddy_domain,
            BuddyDomain::Node
        );
        let e = parse("seed = 1\nbuddy_domain = \"rack\"\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("buddy_domain")),
            "{e}"
        );
        assert!(e.to_string().contains("rack"), "{e}");
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e = parse("seed = 1\n[defaults]\nretris = 3\n").unwrap_err();
        assert_eq!(e.file, PathBuf::from("test.toml"));
        assert_eq!(e.line, Some(3));
        assert_eq!(e.key.as_deref(), Some("retris"));
        let msg = e.to_string();
        assert!(msg.starts_with("test.toml:3: key `retris`"), "{msg}");
    }

    #[test]
    fn bad_values_name_their_key() {
        let e = parse("[cd.x]\nretries = -2\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("cd.x.retries")));
        let e = parse("[cd.x]\ninject = { soft_error = 1.5 }\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("cd.x.inject.soft_error"))
        );
        let e = parse("[cd.x]\nmedium = \"tape\"\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.to_string().contains("tape"), "{e}");
        let e = parse("[level.one]\nretries = 1\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("level.one"));
        let e = parse("seed = \"x\"\n").unwrap_err();
        assert_eq!(e.line, Some(1));
    }

    #[test]
    fn relaxed_keys_parse_and_name_themselves_in_errors() {
        let c = parse(
            "[level.2]\nkind = \"relaxed\"\nlog_spill_bytes = 4096\n\
             [cd.halo]\nlogging = false\ncheck_classes = true\n",
        )
        .unwrap();
        let s = c.settings("halo", 2);
        assert_eq!(s.kind, Some(CdKindSetting::Relaxed));
        assert_eq!(s.log_spill_bytes, Some(4096));
        assert!(!s.logging && s.check_classes);
        assert_eq!(c.settings("x", 1).kind, None);
        assert!(c.settings("x", 1).logging);
        let e = parse("[cd.x]\nlog_spill_bytes = -1\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("cd.x.log_spill_bytes"))
        );
        let e = parse("[cd.x]\nkind = \"lax\"\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.to_string().contains("lax"), "{e}");
        let e = parse("[cd.x]\nlogging = 3\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        let e = parse("[cd.x]\ncheck_class = true\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("check_class"));
    }

    #[test]
    fn log_medium_parses_merges_and_refuses_contradictions() {
        let c = parse(
            "[defaults]\nmedium = \"buddy\"\n[level.2]\nlog_medium = \"buddy\"\n\
             [cd.halo]\nlog_medium = \"local\"\n",
        )
        .unwrap();
        assert_eq!(c.settings("x", 2).log_medium, LogMedium::Buddy);
        assert_eq!(c.settings("halo", 2).log_medium, LogMedium::Local);
        assert_eq!(c.settings("x", 1).log_medium, LogMedium::Local, "default");
        // Only local and buddy: a file medium for logs would be spilling, which is local.
        let e = parse("[cd.x]\nlog_medium = \"file\"\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("log_medium")),
            "{e}"
        );
        assert!(e.to_string().contains("file"), "{e}");
        // Recovering alone from a loss needs the preserved state to survive it.
        let e = parse("[cd.x]\nmedium = \"local\"\nlog_medium = \"buddy\"\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("cd.x.log_medium")),
            "{e}"
        );
        assert!(e.to_string().contains("medium = \"buddy\""), "{e}");
        let e = parse("[level.1]\ncontain = [\"soft\"]\nlog_medium = \"buddy\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("level.1.log_medium"), "{e}");
        assert!(e.to_string().contains("rank_loss"), "{e}");
        // Misspelt, the key is named and the known keys listed.
        let e = parse("[cd.x]\nlog_medum = \"buddy\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("log_medum"), "{e}");
        assert!(e.to_string().contains("log_medium"), "{e}");
    }

    #[test]
    fn a_bad_value_is_named_by_its_key_not_the_value() {
        let e =
            parse("[cd.x]\ninject = { at = [{ rank = -1, iteration = 0, kind = \"soft\" }] }\n")
                .unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("rank")));
        let msg = e.to_string();
        assert!(
            msg.contains("key `rank`") && !msg.contains("key `-1`"),
            "{msg}"
        );
        let e = parse("[cd.x]\nmedium = \"tape\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("medium"), "{e}");
        let e = parse("seed = \"x\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("seed"), "{e}");
        // An unknown key is still named by the message.
        let e = parse("[cd.x]\ninject = { at = [{ rnak = 1 }] }\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("rnak"), "{e}");
    }

    #[test]
    fn a_fault_on_a_rank_the_job_lacks_is_refused_at_start() {
        let c = parse(
            "[cd.step]\ninject = { at = [\n  { rank = 1, iteration = 0, kind = \"soft\" },\n  \
             { rank = 100, iteration = 2, kind = \"rank_loss\" } ] }\n",
        )
        .unwrap();
        c.check_job(101).unwrap();
        let e = c.check_job(8).unwrap_err();
        assert_eq!(e.file, PathBuf::from("test.toml"));
        assert_eq!(e.line, Some(4));
        assert_eq!(e.key.as_deref(), Some("cd.step.inject.at.rank"));
        assert!(
            e.to_string().contains("rank 100") && e.to_string().contains("8 rank"),
            "{e}"
        );
        // Set in code, the same.
        let c = CdConfig::default()
            .with_cd(
                "s",
                "inject = { at = [{ rank = 2, iteration = 0, kind = \"soft\" }] }",
            )
            .unwrap();
        assert!(c.check_job(2).is_err() && c.check_job(3).is_ok());
    }

    #[test]
    fn an_unusable_file_dir_or_report_file_is_a_config_error() {
        let tmp = std::env::temp_dir().join(format!("cd-config-check-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let file = tmp.join("plain");
        std::fs::write(&file, "x").unwrap();
        let c = parse(&format!(
            "seed = 1\nfile_dir = {:?}\n",
            file.display().to_string()
        ))
        .unwrap();
        let e = c.check_job(2).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("file_dir")));
        assert!(e.to_string().contains("not a directory"), "{e}");
        let c = parse(&format!(
            "file_dir = {:?}\n",
            file.join("sub").display().to_string()
        ))
        .unwrap();
        assert_eq!(c.check_job(2).unwrap_err().key.as_deref(), Some("file_dir"));
        let c = parse(&format!("report_file = {:?}\n", tmp.display().to_string())).unwrap();
        let e = c.check_job(2).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("report_file"), "{e}");
        let c = parse(&format!(
            "report_file = {:?}\n",
            tmp.join("no/such/dir.json").display().to_string()
        ))
        .unwrap();
        assert_eq!(
            c.check_job(2).unwrap_err().key.as_deref(),
            Some("report_file")
        );
        // Usable: checked without leaving anything behind.
        let dir = tmp.join("files");
        let report = tmp.join("r.json");
        let c = parse(&format!(
            "file_dir = {:?}\nreport_file = {:?}\n",
            dir.display().to_string(),
            report.display().to_string()
        ))
        .unwrap();
        c.check_job(2).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        assert!(!report.exists());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn tables_the_run_never_used_are_reported() {
        let c = parse("[cd.step]\nretries = 1\n[cd.stpe]\nretries = 1\n[level.1]\nretries = 1\n[level.3]\nretries = 1\n").unwrap();
        let report = crate::report::Report {
            ranks: 2,
            cds: vec![crate::report::CdStats {
                name: "step".into(),
                level: 1,
                ..Default::default()
            }],
        };
        let unused = c.unused(&report);
        assert_eq!(unused.len(), 2, "{unused:?}");
        assert!(
            unused[0].starts_with("test.toml:3: [cd.stpe]"),
            "{unused:?}"
        );
        assert!(unused[0].contains("CDs it entered: step"), "{unused:?}");
        assert!(
            unused[1].starts_with("test.toml:7: [level.3]"),
            "{unused:?}"
        );
    }

    #[test]
    fn the_command_line_wins_over_cd_config() {
        let tmp = std::env::temp_dir().join(format!("cd-config-rule-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let (a, b) = (tmp.join("a.toml"), tmp.join("b.toml"));
        std::fs::write(&a, "seed = 1\n").unwrap();
        std::fs::write(&b, "seed = 2\n").unwrap();
        let seed = |cli: Option<&Path>, env: Option<&Path>| {
            CdConfig::for_program_with(cli, env.map(|p| p.as_os_str().to_owned()))
                .unwrap()
                .map(|c| c.seed)
        };
        assert_eq!(seed(Some(&a), Some(&b)), Some(1));
        assert_eq!(seed(None, Some(&b)), Some(2));
        assert_eq!(seed(None, None), None);
        assert_eq!(seed(None, Some(Path::new(""))), None, "empty: unset");
        let e = CdConfig::for_program_with(None, Some(tmp.join("nope.toml").into())).unwrap_err();
        assert!(e.to_string().contains("named by CD_CONFIG"), "{e}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn missing_file_names_it() {
        let e = CdConfig::from_file("/nonexistent/cd.toml").unwrap_err();
        assert_eq!(e.file, PathBuf::from("/nonexistent/cd.toml"));
        assert!(e.to_string().contains("/nonexistent/cd.toml"));
    }
}
