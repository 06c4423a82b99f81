//! Errors of the communication core; every variant names the cause and what to do.

use thiserror::Error;

/// An operation the bridge refused, with the rank, offset and length it was given.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BridgeError {
    /// The target rank does not exist in this job.
    #[error("rank {rank} does not exist: the job has {ranks} ranks (0..{ranks})")]
    NoSuchRank { rank: usize, ranks: usize },

    /// The byte range falls (partly) outside the target rank's segment.
    #[error(
        "access outside the segment of rank {rank}: offset {offset} + length {len} exceeds \
         the segment size {segment_len} bytes (raise PGAS_SEGMENT_MB if the program needs more)"
    )]
    OutOfSegment {
        rank: usize,
        offset: usize,
        len: usize,
        segment_len: usize,
    },

    /// A remote atomic addressed a word that is not naturally aligned.
    #[error("atomic on rank {rank} at offset {offset} is not {align}-byte aligned")]
    Misaligned {
        rank: usize,
        offset: usize,
        align: usize,
    },

    /// The handler index is not in this job's handler table.
    #[error("active-message handler {index} is not registered (the table has {registered})")]
    UnknownHandler { index: usize, registered: usize },

    /// More arguments than an active message carries.
    #[error("active message with {given} arguments: at most {max} are allowed")]
    TooManyArgs { given: usize, max: usize },

    /// A medium payload larger than the conduit's limit.
    #[error(
        "medium active-message payload of {len} bytes exceeds the limit of {max} bytes; use a long AM"
    )]
    PayloadTooLarge { len: usize, max: usize },

    /// A reply was attempted where none is allowed.
    #[error("{0}")]
    ReplyNotAllowed(&'static str),

    /// A split-phase barrier call out of order.
    #[error("{0}")]
    BarrierOrder(&'static str),

    /// The rank's segment is not mapped into this process (mpi conduit: another host, or
    /// shared memory disabled); reach it with put/get instead.
    #[error(
        "the segment of rank {rank} is not addressable from rank {me}: it lives in another \
         process that does not share memory with this one; use put/get"
    )]
    NotAddressable { rank: usize, me: usize },

    /// The transport under the conduit reported an error.
    #[error("conduit error: {0}")]
    Conduit(String),

    /// A completion handle was asked about its operation after its job had ended, and the
    /// answer needs the job's communication, which is gone.
    #[error(
        "a completion handle was used after its job ended (returned or failed) while its \
         operation was still unanswered; nothing can answer it now (wait on handles before \
         the job's body returns)"
    )]
    JobEnded,

    /// A completion handle of a job whose conduit was rebuilt after a lost process was asked
    /// about its operation: the old job's communication is gone, so nothing can answer it.
    #[error(
        "a completion handle of the job before the conduit was rebuilt (rank{} {} lost) was \
         used while its operation was unanswered; nothing can answer it now: redo the \
         operation in the rebuilt job",
        if lost.len() == 1 { "" } else { "s" },
        lost.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
    )]
    WorldRebuilt { lost: Vec<usize> },

    /// [`Endpoint::recover`](crate::Endpoint::recover) called where it cannot run.
    #[error("Endpoint::recover refused: {0}")]
    RecoverRefused(&'static str),

    /// A vector put or get whose pieces do not add up to its local buffer.
    #[error(
        "vector transfer of {pieces} pieces totalling {total} bytes with a local buffer of \
         {buffer} bytes: the two sizes must be equal"
    )]
    VectorLength {
        pieces: usize,
        total: usize,
        buffer: usize,
    },

    /// A vector put or get larger than one transfer may be (see
    /// `vector::max_pieces`).
    #[error(
        "vector transfer of {pieces} pieces totalling {total} bytes exceeds what one transfer \
         may move: at most {max_pieces} pieces and {segment_len} bytes (the segment size); \
         split it into several transfers"
    )]
    VectorTooLarge {
        pieces: usize,
        total: usize,
        max_pieces: usize,
        segment_len: usize,
    },
}

/// A configuration value that cannot be used, naming where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// An environment variable holds something that is not a valid value.
    #[error("environment variable {var}={value:?} is invalid: {reason}")]
    BadEnv {
        var: &'static str,
        value: String,
        reason: String,
    },
    /// A value given through the API is out of range.
    #[error("invalid {what}: {reason}")]
    BadValue { what: &'static str, reason: String },
    /// A program was given a rank count (by its option `flag`) that differs from the number
    /// of processes an MPI launcher started, which is the rank count there.
    #[error(
        "{flag} {given} does not match the {processes} MPI processes: under mpirun the rank \
         count is the number of processes (`mpirun -n {given} ...`, or leave {flag} out)"
    )]
    RanksDiffer {
        flag: String,
        given: usize,
        processes: usize,
    },
    /// `PGAS_SEGMENT_MB` asks for less segment than the program's problem size needs.
    #[error(
        "PGAS_SEGMENT_MB gives {have} bytes per rank, but this problem size needs {need} bytes \
         of shared segment per rank (unset PGAS_SEGMENT_MB to size it automatically)"
    )]
    SegmentTooSmall {
        /// Segment bytes configured.
        have: usize,
        /// Segment bytes needed.
        need: usize,
    },
    /// The job does not fit this machine (memory, or ranks per core).
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitError),
}

/// Why a launched job did not return every rank's result.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LaunchError {
    /// The configuration could not be used; no rank was started.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A rank panicked; the other ranks were woken and unwound.
    #[error("rank {rank} panicked: {message}")]
    RankPanicked { rank: usize, message: String },
    /// A rank's process ended without leaving the job (killed, or crashed; mpi conduit): it
    /// did not panic. `message` says so, naming the rank.
    #[error("{message}")]
    RankLost { rank: usize, message: String },
    /// The operating system refused to start a rank's thread.
    #[error("could not start the thread of rank {rank}: {reason}")]
    Spawn { rank: usize, reason: String },
    /// The conduit could not start or end the job (MPI initialization, setup, teardown).
    #[error("conduit error: {0}")]
    Conduit(String),
    /// The processes of the job run different programs (mpi conduit: a runtime above found
    /// that they register different functions); no rank ran the program's body. `message`
    /// names the ranks and what differs.
    #[error("{message}")]
    DifferentPrograms { message: String },
}
