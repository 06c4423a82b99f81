//! What a process learns from the recovery of a job after a lost process
//! ([`Endpoint::recover`](crate::Endpoint::recover), [`Endpoint::recovered`](crate::Endpoint::recovered)):
//! plain data, so that the layers above can decide what to redo.

/// Where this process stands after the conduit was rebuilt over the live processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// This process's rank: a survivor's is unchanged, a replacement holds the lost rank's.
    pub rank: usize,
    /// How many rounds of recovery the job has run (1 after the first loss; a loss during a
    /// rebuild adds a round), the same at every process.
    pub epoch: u64,
    /// The ranks whose processes were lost in the latest recovery (every round of it), in
    /// increasing order: the ranks held by processes without a segment from before it.
    pub lost: Vec<usize>,
    /// Whether this process is a spare that took a lost rank (its body runs from its start).
    pub replacement: bool,
}
