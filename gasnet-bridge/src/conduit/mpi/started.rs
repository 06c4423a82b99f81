//! What an operation that may complete later gives back from the conduit: its result at once,
//! or the number its completion will answer. Handles are made above, by the driver, so the
//! conduit's files know nothing of them.

/// An operation's result if it completed when it was started, else its operation number.
#[derive(Debug)]
pub(crate) enum Started<T> {
    /// Completed before the call returned (mapped memory, a message to this rank).
    Done(T),
    /// Completed later, by an acknowledgement, a reply or a flush of operation `id`.
    Pending(u64),
}
