//! The incoming rpc request whose function a recovery is running again, so that the operations
//! that function starts are refused (`incoming_rpc.rs`).

/// The incoming request whose function is being run again on this rank.
#[derive(Debug, Clone)]
pub(crate) struct Rerunning {
    /// The request's initiator.
    pub(crate) from: usize,
    /// The IWC the request was counted with.
    pub(crate) iwc: u64,
    /// The function's registered name.
    pub(crate) name: String,
}
