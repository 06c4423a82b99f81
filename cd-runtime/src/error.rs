//! Failures a Containment Domain detects, contains or escalates, and configuration errors.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The kinds of failure, as a bit set so ranks can agree on all of them in one reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FaultKinds(pub u32);

impl FaultKinds {
    /// No failure.
    pub const NONE: FaultKinds = FaultKinds(0);
    /// A soft error: a failed check, an error returned by the body, an injected soft error.
    pub const SOFT: FaultKinds = FaultKinds(1);
    /// A rank lost its memory (segment and locally preserved state).
    pub const RANK_LOSS: FaultKinds = FaultKinds(2);
    /// Some rank cannot restore this CD's preserved state (it was lost with the rank).
    pub const UNRESTORABLE: FaultKinds = FaultKinds(4);

    /// True when no failure is recorded.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when every kind in `other` is in `self`.
    pub fn contains(self, other: FaultKinds) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets together.
    pub fn union(self, other: FaultKinds) -> FaultKinds {
        FaultKinds(self.0 | other.0)
    }
}

impl std::fmt::Display for FaultKinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = [
            (Self::SOFT, "soft error"),
            (Self::RANK_LOSS, "rank loss"),
            (Self::UNRESTORABLE, "preserved state lost"),
        ]
        .iter()
        .filter(|(k, _)| self.contains(*k))
        .map(|(_, n)| *n)
        .collect();
        if names.is_empty() {
            f.write_str("no failure")
        } else {
            f.write_str(&names.join(" + "))
        }
    }
}

/// Why a CD body did not produce its result.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CdError {
    /// The body found an error (a failed check or an error it returned).
    #[error("CD {cd:?} detected an error: {reason}")]
    Detected {
        /// Name of the CD.
        cd: String,
        /// What was wrong.
        reason: String,
    },
    /// A CD could not contain a failure and passed it to its parent.
    #[error("CD {cd:?} (level {level}) escalated {kinds} after {attempts} execution(s): {reason}")]
    Escalated {
        /// Name of the CD that gave up.
        cd: String,
        /// Its level in the tree (the root is 0).
        level: usize,
        /// What went wrong, agreed among the ranks the CD spans.
        kinds: FaultKinds,
        /// How many times it ran.
        attempts: u32,
        /// Why it could not contain the failure.
        reason: String,
    },
    /// A relaxed CD could not recover by replay (an incoming write missing from the logs, an
    /// uncovered combining write, a squashed write that differs from its log entry...).
    #[error(
        "relaxed CD {cd:?} on rank {rank} cannot recover by replay (execution {attempts}): {reason}"
    )]
    Replay {
        /// Name of the relaxed CD.
        cd: String,
        /// The recovering rank.
        rank: usize,
        /// How many times it ran.
        attempts: u32,
        /// The cause.
        reason: String,
    },
    /// A region declared private or privatized was accessed by another CD of the group.
    #[error(transparent)]
    Classification(Box<ClassificationError>),
}

/// A remote access, by another CD of the relaxed group while the group runs, into a region
/// declared private or privatized.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "classification error: CD {cd:?} on rank {rank} accessed {len} bytes at offset {offset} of \
     rank {owner}, inside region `{region}` that CD {owner_cd:?} on rank {owner} declared \
     {class}"
)]
pub struct ClassificationError {
    /// The accessing CD.
    pub cd: String,
    /// Its rank.
    pub rank: usize,
    /// The declaring CD.
    pub owner_cd: String,
    /// Its rank (the region's owner).
    pub owner: usize,
    /// The region's name.
    pub region: String,
    /// `private` or `privatized`.
    pub class: String,
    /// The access: byte offset and length at the owner.
    pub offset: usize,
    /// See `offset`.
    pub len: usize,
}

/// A configuration that cannot be used, naming the file, line and key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default(), key.as_ref().map(|k| format!(": key `{k}`")).unwrap_or_default())]
pub struct ConfigError {
    /// The configuration file (or `<string>` for inline text).
    pub file: PathBuf,
    /// 1-based line of the offending text, when known.
    pub line: Option<usize>,
    /// The key at fault, when known.
    pub key: Option<String>,
    /// What is wrong and what is expected.
    pub message: String,
}

/// Why a CD-managed job did not complete.
///
/// Every variant displays as one line meant for the user; [`CdLaunchError::exit_code`] gives
/// a program its exit status.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CdLaunchError {
    /// The configuration could not be read or cannot be used for this job.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A failure escalated past the root CD (or the root CD detected one): the run stopped
    /// rather than give a wrong answer. `message` names the CD, the rank, the cause and what
    /// to change in the configuration.
    #[error("{message}")]
    Escalated {
        /// The rank whose error reached the top first.
        rank: usize,
        /// The whole line.
        message: String,
    },
    /// The job completed but the report could not be written where the configuration asked.
    #[error("cannot write the CD report to {}: {reason} (key `report_file`)", path.display())]
    Report {
        /// The `report_file` of the configuration.
        path: PathBuf,
        /// What the system said.
        reason: String,
    },
    /// The timeline (`PGAS_TRACE` or the key `trace_file`) could not be written.
    #[error(
        "cannot write the timeline to {}: {reason}; name a file in a writable directory in \
         PGAS_TRACE (or the CD configuration's trace_file), or unset it",
        path.display()
    )]
    Trace {
        /// The file (under mpirun, this process's, with its rank inserted).
        path: PathBuf,
        /// What the system said.
        reason: String,
    },
    /// The job's private directory for its files (file medium, spilled logs) could not be
    /// made: `file_dir`, or the system's temporary directory without it, is unusable.
    #[error(
        "cannot make the job's private directory for its files: {reason}; set file_dir in \
         the CD configuration to a directory you own"
    )]
    Files {
        /// Which directory and why (one line).
        reason: String,
    },
    /// A restart (`--restart`, `CD_RESTART`) cannot resume this job: the checkpoint is
    /// another job's, or the one named is not whole. `message` names the file and the reason.
    #[error("{message}")]
    Restart {
        /// The whole line.
        message: String,
    },
    /// A rank failed otherwise (a panic, a lost process) or the job could not start.
    #[error(transparent)]
    Job(#[from] gasnet_bridge::LaunchError),
}

impl CdLaunchError {
    /// The exit status a program ends with for this error: 2 for a configuration error (or
    /// an unusable directory for its files, or a refused restart), 3 for an escalation past the root, 4 for a report
    /// or a timeline that cannot be written, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            CdLaunchError::Config(_)
            | CdLaunchError::Files { .. }
            | CdLaunchError::Restart { .. } => 2,
            CdLaunchError::Escalated { .. } => 3,
            CdLaunchError::Report { .. } | CdLaunchError::Trace { .. } => 4,
            CdLaunchError::Job(_) => 1,
        }
    }
}
