//! One rank's checkpoint state: the policy of the checkpointed CD, the process's writer, the
//! checkpoint handed over and not committed yet, and the resume position a restart chose.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::Arc;

use crate::checkpoint::format::{CheckpointPolicy, JobShape};
use crate::checkpoint::schedule::Schedule;
use crate::checkpoint::writer::{CheckpointWriter, Ticket};
use crate::resume::{Resume, Resumed};

/// A checkpoint whose rank state is handed to the writer and whose manifest is not written.
pub(crate) struct Pending {
    /// Its directory.
    pub(crate) dir: PathBuf,
    /// The checkpointed CD.
    pub(crate) cd: String,
    /// The execution it resumes at.
    pub(crate) iteration: u64,
    /// The loop step that execution began with.
    pub(crate) step: u64,
    /// The CD's level.
    pub(crate) level: usize,
    /// This rank's file's write.
    pub(crate) ticket: Arc<Ticket>,
}

/// The checkpoint state of one rank (set by `launch` before the program's body).
#[derive(Default)]
pub(crate) struct RankCheckpoint {
    /// The checkpointed CD's name and policy.
    pub(crate) policy: RefCell<Option<(String, CheckpointPolicy)>>,
    /// The process's writer.
    pub(crate) writer: RefCell<Option<Arc<CheckpointWriter>>>,
    /// What a manifest records of the job.
    pub(crate) shape: RefCell<Option<JobShape>>,
    /// The rank whose directory keeps the copy of the part this rank leads.
    pub(crate) buddy: Cell<usize>,
    /// Handed over, not committed.
    pub(crate) pending: RefCell<Option<Pending>>,
    /// Rank 0: the last commit handed to the writer.
    pub(crate) committing: RefCell<Option<Arc<Ticket>>>,
    /// The position and state to resume at, until the CD's execution takes it.
    pub(crate) resume: RefCell<Option<Resume>>,
    /// The position this launch resumed at (for `restarted()`).
    pub(crate) resumed: RefCell<Option<Resumed>>,
    /// Which executions write a checkpoint.
    pub(crate) schedule: Schedule,
}

impl RankCheckpoint {
    /// The policy when `name` is the checkpointed CD.
    pub(crate) fn policy_for(&self, name: &str) -> Option<CheckpointPolicy> {
        match &*self.policy.borrow() {
            Some((cd, p)) if cd == name => Some(p.clone()),
            _ => None,
        }
    }
}
