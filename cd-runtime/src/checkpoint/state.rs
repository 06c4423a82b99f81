//! One rank's checkpoint state: the policy of the checkpointed CD, the process's writer, the
//! checkpoint handed over and not committed yet, and the resume position a restart chose.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::Arc;

use pgas::{Future, Promise, RpcFn};

use crate::buddy::Bytes;

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
    /// Node-local directories: the part's copy goes to the buddy over the network.
    pub(crate) remote: bool,
    /// The copy sent to the buddy (`transfer.rs`), until its ack is recorded.
    pub(crate) sent: RefCell<Option<Future<Result<(), String>>>>,
    /// The buddy's ack: the copy is durable, or why not.
    pub(crate) acked: RefCell<Option<Result<(), String>>>,
}

/// A copy this rank received for another rank's part and its writer is writing, with the
/// rpc's reply waiting for it (`transfer.rs`).
pub(crate) struct Receiving {
    /// The copy's write.
    pub(crate) ticket: Arc<Ticket>,
    /// The reply: the copy is durable, or why not.
    pub(crate) reply: Promise<Result<(), String>>,
}

/// The rpc functions of the network buddy copy (`transfer.rs`).
#[derive(Clone, Copy)]
pub(crate) struct CheckpointRpcs {
    /// Sends a part's bytes to its buddy; replies once the copy is durable.
    pub(crate) copy: RpcFn<(String, usize, Bytes), Result<(), String>>,
    /// Fetches a part's copy from its buddy (restart).
    pub(crate) fetch: RpcFn<(String, usize), Result<Bytes, String>>,
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
    /// The rpc functions of the network buddy copy.
    pub(crate) rpcs: Cell<Option<CheckpointRpcs>>,
    /// Copies received for other ranks' parts and being written (node-local directories).
    pub(crate) receiving: RefCell<Vec<Receiving>>,
    /// This process's directory of the checkpoints a restart chooses from (its buddy copies
    /// are fetched from it).
    pub(crate) restart_root: RefCell<Option<PathBuf>>,
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
