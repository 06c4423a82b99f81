//! What a key takes: the enumerations, and the validated numbers whose rule and message live in
//! their type, so a table is checked as it is read (the parser adds the key and the line).

use std::path::PathBuf;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use thiserror::Error;

use crate::checkpoint::format::{CheckpointEvery, CheckpointPolicy, RANK_PLACEHOLDER};
use crate::error::FaultKinds;

/// Where preserved state is kept (`medium`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Medium {
    /// This rank's memory (lost with the rank).
    Local,
    /// Another rank's memory, reached through pgas (survives the loss of this rank).
    Buddy,
    /// A file on this machine.
    File,
    /// This rank's memory plus an XOR parity over a checksum group of `xor_group` ranks.
    Xor,
}

/// Where a relaxed CD's log is kept (`log_medium`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogMedium {
    /// This rank's memory only (a rank loss takes it: the CD escalates).
    Local,
    /// Also replicated at the buddy rank (the rank recovers alone).
    Buddy,
}

/// When a relaxed CD's log reaches the buddy (`log_durable`, with `log_medium = "buddy"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogDurable {
    /// Before anything a logged operation did is visible to another rank.
    Operation,
    /// Only when the body ends: a loss in the middle of the body escalates.
    End,
}

/// Where a rank's buddy is, relative to it (`buddy_domain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuddyDomain {
    /// On another node whenever there is one (survives the loss of a node).
    #[default]
    Node,
    /// The next rank (survives the loss of a rank).
    Rank,
}

/// The kind a CD runs as, when the configuration overrides the program's call (`kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CdKindSetting {
    /// Recovers with every rank it spans, by agreement.
    Strict,
    /// Recovers alone, by replaying its log (docs/relaxed-cds.md).
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

impl FaultKind {
    /// The name the configuration gives it.
    pub(super) fn name(self) -> &'static str {
        match self {
            FaultKind::Soft => "soft",
            FaultKind::RankLoss => "rank_loss",
        }
    }
}

/// The failures a level contains (`contain`), from the list of their kinds.
impl From<Vec<FaultKind>> for FaultKinds {
    fn from(kinds: Vec<FaultKind>) -> FaultKinds {
        kinds.iter().fold(FaultKinds::NONE, |acc, k| match k {
            FaultKind::Soft => acc.union(FaultKinds::SOFT),
            FaultKind::RankLoss => acc.union(FaultKinds::RANK_LOSS),
        })
    }
}

/// How often a CD run with [`crate::strict_steps`] preserves (`interval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "Written")]
pub enum Interval {
    /// At every step (the default).
    #[default]
    Every,
    /// At every n-th step: one CD execution per n steps.
    Steps(u64),
    /// At every n-th step, n from Daly's formula (with `mtbf_seconds`).
    Daly,
}

/// `interval`, `cluster` or `checkpoint.every` as written: a number or a name.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Written {
    Number(i64),
    Name(String),
}

/// Reads each type from [`Written`]: a number its rule accepts, else the first [`ValueError`];
/// one of its names, else the second.
macro_rules! from_written {
    ($($ty:ty: |$n:ident| $number:expr, $($name:literal => $v:expr),+;
       $bad_n:ident, $bad_s:ident;)*) => {$(
        impl TryFrom<Written> for $ty {
            type Error = ValueError;
            fn try_from(w: Written) -> Result<$ty, ValueError> {
                match w {
                    Written::Number($n) => $number.ok_or(ValueError::$bad_n($n)),
                    $(Written::Name(s) if s == $name => Ok($v),)+
                    Written::Name(s) => Err(ValueError::$bad_s(s)),
                }
            }
        }
    )*};
}

from_written! {
    Interval: |n| u64::try_from(n).ok().filter(|&n| n >= 1)
            .map(|n| if n == 1 { Interval::Every } else { Interval::Steps(n) }),
        "every" => Interval::Every, "daly" => Interval::Daly; Steps, IntervalName;
    Cluster: |n| usize::try_from(n).ok().filter(|&k| k >= 1).map(Cluster::Ranks),
        "node" => Cluster::Node; ClusterSize, ClusterName;
    Every: |n| u64::try_from(n).ok().filter(|&n| n >= 1).map(|n| Every(Some(n))),
        "daly" => Every(None); Count, EveryName;
}

/// The SPBC clusters of relaxed CDs (`cluster`): writes between two ranks of one cluster are
/// not logged, and a failure re-executes the failed rank's whole cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "Written")]
pub enum Cluster {
    /// No clusters: every access between two ranks is logged.
    #[default]
    None,
    /// The ranks of one node (`pgas::node_of`).
    Node,
    /// Blocks of this many consecutive ranks (the last block may be short).
    Ranks(usize),
}

impl Cluster {
    /// The cluster of `rank`, numbered by its first rank's block or its node.
    pub fn of(self, rank: usize) -> usize {
        match self {
            Cluster::None => rank,
            Cluster::Node => pgas::node_of(rank),
            Cluster::Ranks(k) => rank / k,
        }
    }

    /// True if clusters are set.
    pub fn is_on(self) -> bool {
        self != Cluster::None
    }
}

/// `checkpoint.every`: a number of executions (at least 1; `None`) or `"daly"`.
#[derive(Deserialize)]
#[serde(try_from = "Written")]
pub(super) struct Every(Option<u64>);

/// `checkpoint = { dir, every, keep, mtbf_seconds, node_local }` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointTable {
    dir: Option<PathBuf>,
    every: Option<Every>,
    keep: Option<Count>,
    mtbf_seconds: Option<Seconds>,
    node_local: Option<bool>,
}

/// The `checkpoint` key, its keys checked together as it is read.
impl<'de> Deserialize<'de> for CheckpointPolicy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CheckpointPolicy, D::Error> {
        let (c, d) = (
            CheckpointTable::deserialize(d)?,
            CheckpointPolicy::default(),
        );
        let every = match (c.every, c.mtbf_seconds) {
            (None, None) => d.every,
            (Some(Every(Some(n))), None) => CheckpointEvery::Executions(n),
            (Some(Every(None)), Some(m)) => CheckpointEvery::Daly { mtbf_seconds: m.0 },
            (Some(Every(None)), None) => Err(D::Error::custom(ValueError::DalyWithoutMtbf))?,
            (_, Some(_)) => Err(D::Error::custom(ValueError::MtbfWithoutDaly))?,
        };
        let dir = c.dir.unwrap_or(d.dir);
        let per_rank = dir.to_str().is_some_and(|s| s.contains(RANK_PLACEHOLDER));
        let node_local = match c.node_local {
            Some(false) if per_rank => Err(D::Error::custom(ValueError::RankDirShared))?,
            n => n.unwrap_or(per_rank),
        };
        let keep = c.keep.map_or(d.keep, |n| n.0);
        Ok(CheckpointPolicy {
            dir,
            every,
            keep,
            node_local,
        })
    }
}

/// Largest `retries` accepted: re-executing a failure that came back that often only repeats it.
pub const MAX_RETRIES: i64 = 1000;

/// Largest `buddy_segment_bytes` accepted (1 TiB): added to a segment size, it cannot overflow.
const MAX_BUDDY_SEGMENT_BYTES: i64 = 1 << 40;

/// Declares the validated numbers: each a newtype read from the raw value `n` when its rule
/// accepts it, else refused by the [`ValueError`] variant of the same name.
macro_rules! validated {
    ($($(#[$doc:meta])* $name:ident($inner:ty) from $raw:ty = |$n:ident| $ok:expr,
       $msg:literal;)*) => {
        /// Why a value is refused: the message says what the key takes.
        #[derive(Debug, Clone, PartialEq, Error)]
        pub(super) enum ValueError {
            $(#[error($msg)] $name($raw),)*
            #[error("a number of steps must be 1 or more, got {0}")]
            Steps(i64),
            #[error("must be \"every\", \"daly\" or a number of steps, got {0:?}")]
            IntervalName(String),
            #[error("must be a number of executions or \"daly\", got {0:?}")]
            EveryName(String),
            #[error("a cluster needs at least 1 rank (\"node\" or a number of consecutive \
                     ranks), got {0}")]
            ClusterSize(i64),
            #[error("must be \"node\" or a number of consecutive ranks, got {0:?}")]
            ClusterName(String),
            #[error("every = \"daly\" needs the mean time between the failures that end the job: \
                     add mtbf_seconds = M to the checkpoint key")]
            DalyWithoutMtbf,
            #[error("mtbf_seconds only serves every = \"daly\": remove it, or set every = \
                     \"daly\"")]
            MtbfWithoutDaly,
            #[error("a dir with {{rank}} gives each process its own directory: node_local = false \
                     contradicts it; remove one of the two")]
            RankDirShared,
        }

        $($(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub(super) struct $name(pub(super) $inner);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let $n = <$raw>::deserialize(d)?;
                $ok.map($name).ok_or_else(|| D::Error::custom(ValueError::$name($n)))
            }
        }

        impl From<$name> for $inner {
            fn from(v: $name) -> $inner {
                v.0
            }
        }

        impl From<$name> for Option<$inner> {
            fn from(v: $name) -> Option<$inner> {
                Some(v.0)
            }
        })*
    };
}

validated! {
    /// Re-executions before a CD escalates (`retries`): 0 to [`MAX_RETRIES`].
    Retries(u32) from i64 = |n| u32::try_from(n).ok().filter(|_| n <= MAX_RETRIES),
        "must be between 0 and {MAX_RETRIES} (re-executions before the CD escalates; a failure \
         that comes back that often is not contained by more), got {0}";
    /// A number of bytes, 0 or more (`log_spill_bytes`).
    Bytes(u64) from i64 = |n| u64::try_from(n).ok(),
        "must be a number of bytes (0 or more), got {0}";
    /// Segment room for buddy copies (`buddy_segment_bytes`): up to 1 TiB, rounded up to 64.
    SegmentBytes(usize) from i64 = |n| usize::try_from(n).ok()
            .filter(|_| n <= MAX_BUDDY_SEGMENT_BYTES).map(|b| b.next_multiple_of(64)),
        "must be a number of bytes between 0 and {MAX_BUDDY_SEGMENT_BYTES}, got {0}";
    /// A memory budget (`memory_budget_bytes`): a positive number of bytes.
    BudgetBytes(usize) from i64 = |n| usize::try_from(n).ok().filter(|&b| b > 0),
        "must be a positive number of bytes (the preserved state a rank keeps in memory before \
         the oldest copies move to files), got {0}";
    /// Copies the buddy medium keeps (`buddy_copies`): 1 or 2.
    BuddyCopies(usize) from i64 = |n| usize::try_from(n).ok().filter(|c| matches!(c, 1 | 2)),
        "must be 1 (the buddy's copy alone) or 2 (a local copy too), got {0}";
    /// Members of a checksum group (`xor_group`): 2 or more.
    GroupSize(usize) from i64 = |n| usize::try_from(n).ok().filter(|&k| k >= 2),
        "a checksum group needs at least 2 members (the parity of one member is a copy of it), \
         got {0}";
    /// How many, at least 1 (`checkpoint.every`, `checkpoint.keep`).
    Count(usize) from i64 = |n| usize::try_from(n).ok().filter(|&n| n >= 1),
        "must be at least 1, got {0}";
    /// A probability (`inject.soft_error` and the other injection rates): 0 to 1.
    Probability(f64) from f64 = |p| (0.0..=1.0).contains(&p).then_some(p),
        "a probability must be between 0 and 1, got {0}";
    /// A duration in seconds (`mtbf_seconds`, `node_mtbf_seconds`, `recovery_seconds`).
    Seconds(f64) from f64 = |s| (s.is_finite() && s > 0.0).then_some(s),
        "must be a number of seconds above 0, got {0}";
}
