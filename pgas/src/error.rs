//! Errors of the pgas layer, each naming its cause.

use gasnet_bridge::BridgeError;
use thiserror::Error;

/// Why a pgas operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PgasError {
    /// The shared segment has no free block large enough.
    #[error(
        "shared segment of rank {rank} exhausted: {requested} bytes requested, largest free block \
         is {largest_free} bytes (raise PGAS_SEGMENT_MB or free memory with delete_)"
    )]
    OutOfMemory {
        rank: usize,
        requested: usize,
        largest_free: usize,
    },
    /// `delete_` of a pointer that is not the start of a live allocation of this rank.
    #[error(
        "delete_ of {what}: rank {rank}, offset {offset} is not a live allocation (double free or foreign pointer)"
    )]
    BadFree {
        what: &'static str,
        rank: usize,
        offset: usize,
    },
    /// An allocation the hook placed at a given offset (a replayed allocation's logged
    /// address) that is not a free range of the requested size and alignment.
    #[error(
        "allocation of {size} bytes at rank {rank}, offset {offset} refused: {reason} (a \
         replayed allocation must get a free block back: the replay differs from the log, or \
         the block was not released before the replay)"
    )]
    ReplayAlloc {
        rank: usize,
        offset: usize,
        size: usize,
        reason: &'static str,
    },
    /// A null global pointer was used for an access.
    #[error("{op} through a null global pointer")]
    Null { op: &'static str },
    /// An access to the bytes every segment keeps for the pgas runtime, below the first
    /// allocation.
    #[error(
        "offset {offset} of rank {rank}'s segment lies in bytes 0..{reserved}, which pgas keeps \
         for its runtime in every segment: access only memory from new_ or new_array"
    )]
    Reserved {
        rank: usize,
        offset: usize,
        reserved: usize,
    },
    /// `local()` of memory this rank cannot address directly.
    #[error("global pointer to rank {rank} is not local to rank {me} (different node)")]
    NotLocal { rank: usize, me: usize },
    /// The communication core refused the access.
    #[error(transparent)]
    Bridge(#[from] BridgeError),
    /// Bytes from another rank could not be decoded.
    #[error("malformed {what} from rank {source_rank}: {reason}")]
    Malformed {
        what: &'static str,
        source_rank: usize,
        reason: String,
    },
    /// A message (an rpc's arguments or result, a collective's value) larger than pgas sends.
    #[error(
        "a pgas message of {len} bytes to rank {target} exceeds the {max} bytes one message may \
         have (an rpc's arguments or result, a collective's value): move bulk data with \
         rput/rget"
    )]
    MessageTooLarge {
        target: usize,
        len: usize,
        max: usize,
    },
    /// A new viewable block in bytes the allocating rank holds a view of (a view that reaches
    /// past its allocation, or a block freed inside the view of it).
    #[error(
        "new_viewable on rank {rank}: the free bytes {offset}..{} lie under the rank's open view \
         of bytes {view_start}..{view_end}; allocate outside the view's closure, or view only \
         allocated memory",
        offset + len
    )]
    UnderView {
        rank: usize,
        offset: usize,
        len: usize,
        view_start: usize,
        view_end: usize,
    },
    /// A team argument is out of range.
    #[error("{0}")]
    Team(String),
    /// `wait_until` on a word of another rank: a flag is waited on where it lives.
    #[error(
        "wait_until on rank {rank}'s memory from rank {me}: a rank waits only on a flag in its \
         own segment (others set it by put or atomic); to watch another rank's word, poll it \
         with AtomicDomain::load_sync"
    )]
    WaitNotOwn { rank: usize, me: usize },
    /// `put_signal` whose data and flag live on different ranks.
    #[error(
        "put_signal with data on rank {data_rank} and its flag on rank {flag_rank}: the flag \
         must be on the rank the data goes to, so that it is set only after the data landed \
         there"
    )]
    SignalRanks { data_rank: usize, flag_rank: usize },
    /// `DistLock::acquire` by the rank that already holds the lock (it would wait for itself).
    #[error(
        "rank {rank} acquires the lock at rank {home}, offset {offset} that it already holds: \
         release it first (the lock is not reentrant)"
    )]
    LockHeldByCaller {
        rank: usize,
        home: usize,
        offset: usize,
    },
    /// `DistLock::release` by a rank that does not hold the lock.
    #[error(
        "rank {rank} releases the lock at rank {home}, offset {offset}, which {holder}: \
         release only a lock this rank acquired"
    )]
    LockNotHeld {
        rank: usize,
        home: usize,
        offset: usize,
        /// Who holds it, in words ("is free", "rank 3 holds").
        holder: String,
    },
}

/// Why [`rerun_rpc`](crate::runtime_hooks::rerun_rpc) could not produce the function's result.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RerunError {
    /// No function of this rank's table has that name.
    #[error("no rpc function named {name:?} is registered on this rank")]
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// The argument bytes do not decode as the function's arguments.
    #[error("the arguments of rpc {name:?} do not decode: {reason}")]
    Arguments {
        /// The function's name.
        name: String,
        /// The decoder's complaint.
        reason: String,
    },
    /// The function (registered with `register_future`) returned a future that was not ready
    /// when it returned. It has run; its result is not waited for (see
    /// [`rerun_rpc`](crate::runtime_hooks::rerun_rpc)).
    #[error(
        "rpc {name:?} returned a future that was not ready: its result depends on progress \
         (other ranks, or this rank's later code) that a re-run cannot wait for"
    )]
    NotReady {
        /// The function's name.
        name: String,
    },
}

/// Why a [`DistArray`](crate::dist_array::DistArray) operation was refused (before anything
/// was sent).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ArrayError {
    /// An element index at or past the array's length.
    #[error(
        "index {index} is out of range for a distributed array of length {len} (valid indices \
         are 0..{len})"
    )]
    IndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// The array's length.
        len: usize,
    },
    /// An index range that is reversed or ends past the array.
    #[error(
        "range {start}..{end} is out of bounds for a distributed array of length {len} (a range \
         must satisfy start <= end <= {len})"
    )]
    RangeOutOfBounds {
        /// The range's first index.
        start: usize,
        /// The range's end (exclusive).
        end: usize,
        /// The array's length.
        len: usize,
    },
    /// A local write whose source length is not the number of elements this rank owns.
    #[error(
        "write_local of {given} elements to rank {rank}'s part of a distributed array, which \
         holds {owned} (local_range().len()): pass exactly that many"
    )]
    LocalLength {
        /// This rank (in the world).
        rank: usize,
        /// Elements given.
        given: usize,
        /// Elements this rank owns.
        owned: usize,
    },
    /// A member could not allocate its part of the array in its shared segment.
    #[error(
        "rank {rank} could not allocate its {bytes} bytes of a distributed array in its shared \
         segment (raise PGAS_SEGMENT_MB / LaunchConfig::segment_bytes, or free memory)"
    )]
    OutOfMemory {
        /// The member (world rank) that failed.
        rank: usize,
        /// The bytes it asked for.
        bytes: usize,
    },
    /// A member could not allocate its part of a [`ViewArray`](crate::ViewArray) in its
    /// viewable memory.
    #[error(
        "rank {rank} could not allocate its {bytes} bytes of a distributed array in its viewable \
         memory, which is as large as its segment (raise PGAS_SEGMENT_MB / \
         LaunchConfig::segment_bytes, or free viewable memory)"
    )]
    OutOfViewable {
        /// The member (world rank) that failed.
        rank: usize,
        /// The bytes it asked for.
        bytes: usize,
    },
    /// An access to a [`ViewArray`](crate::ViewArray)'s elements refused by the view
    /// handshake (an owner's open view of them), or a view of its block refused.
    #[error(transparent)]
    View(#[from] ViewError),
    /// A reduction of a [`ViewArray`](crate::ViewArray) that a member could not fold: it holds
    /// a view of its own block open (the reduction is collective, so every member reports it).
    #[error(
        "rank {rank} reduced a distributed array while it held an exclusive view of its own \
         block, so it could not read it: reduce after the view's closure returns"
    )]
    ReducedInView {
        /// The member (world rank) whose block was under its view.
        rank: usize,
    },
}

/// Why a [`DistObject`](crate::dist_object::DistObject) access was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DistObjectError {
    /// A read or update of an instance while this rank is inside an `update` of it (or an
    /// update while it is being read): the closure's access would alias the other.
    #[error(
        "dist_object {id} on rank {rank} is accessed while this rank is inside an update of it \
         (or updated while being read): use the value the enclosing closure holds, or access \
         the object after that closure returns"
    )]
    Updating {
        /// The object's id.
        id: u64,
        /// This rank.
        rank: usize,
    },
}

/// Why a local view, or an access to viewable memory, was refused. Offsets and lengths are in
/// bytes of the owner's viewable area.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ViewError {
    /// A put or get into a range that its owner holds a view of: the owner's slice is
    /// exclusive while its closure runs, so the access would race it.
    #[error(
        "rank {accessor}'s {op} of {len} bytes at offset {offset} of rank {owner}'s viewable \
         memory was refused: rank {owner} holds a local view of bytes {view_start}..{view_end}; \
         access it after the view's closure returns (order the two, e.g. with a barrier)"
    )]
    Viewed {
        /// The rank whose put or get was refused.
        accessor: usize,
        /// `"put"`, `"get"` or `"atomic"`.
        op: &'static str,
        /// The rank whose memory it is, which holds the view.
        owner: usize,
        offset: usize,
        len: usize,
        view_start: usize,
        view_end: usize,
    },
    /// A view whose range overlaps a view this rank holds open already (nested views must be
    /// of disjoint ranges: two slices of the same bytes would alias).
    #[error(
        "rank {owner} cannot open a view of bytes {offset}..{} of its viewable memory: it holds \
         a view of bytes {view_start}..{view_end} already; nested views must not overlap (use \
         the outer view's slice)",
        offset + len
    )]
    Overlapping {
        owner: usize,
        offset: usize,
        len: usize,
        view_start: usize,
        view_end: usize,
    },
    /// A view of another rank's memory: a view is of the caller's own memory only.
    #[error(
        "rank {me} asked for a local view of rank {owner}'s memory: a view is of the caller's \
         own viewable memory (copy another rank's with view_get)"
    )]
    NotMine { owner: usize, me: usize },
    /// A `view_put` into another rank's viewable memory while a resilience layer logs this
    /// rank's writes (inside a relaxed CD): viewable memory is not logged, so a replay of the
    /// CD would not know of the write.
    #[error(
        "rank {me}'s view_put into rank {owner}'s viewable memory was refused inside a relaxed          CD: viewable memory is private to its owner there (preserved, not logged), so a          replay would not know of the write; rput into rank {owner}'s segment, or view_put          outside the relaxed CD"
    )]
    UnloggedPut { owner: usize, me: usize },
    /// A range that does not lie inside the owner's viewable area.
    #[error(
        "bytes {offset}..{} of rank {rank}'s viewable memory are outside its area of {area} \
         bytes (a pointer past its allocation, or a length too long)",
        offset.saturating_add(*len)
    )]
    OutOfBounds {
        rank: usize,
        offset: usize,
        len: usize,
        area: usize,
    },
    /// A pointer not aligned for its element type (made by `cast` or by arithmetic), or an
    /// element type aligned to more than viewable memory serves (16 bytes).
    #[error(
        "offset {offset} of rank {rank}'s viewable memory is not aligned to {align} bytes, as \
         the element type needs"
    )]
    Misaligned {
        rank: usize,
        offset: usize,
        align: usize,
    },
    /// An access through the null view pointer.
    #[error("{op} through a null view pointer")]
    Null { op: &'static str },
    /// A rank that is not in the job.
    #[error("{op} to rank {rank}: the job has {ranks} ranks")]
    NoSuchRank {
        op: &'static str,
        rank: usize,
        ranks: usize,
    },
    /// More nested views than a rank may hold open at once.
    #[error(
        "rank {owner} holds {max} local views open already, the most a rank may: close one \
         (return from its closure) before opening another"
    )]
    TooManyViews { owner: usize, max: usize },
}
