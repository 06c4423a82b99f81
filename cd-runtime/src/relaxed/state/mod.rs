//! The per-rank state of the relaxed-CD mechanisms, below the runtime that holds it
//! ([`super::rank_state::RankState`]): data and the operations on it that need no runtime.
//! The mechanisms that use the runtime are the files above (`replay.rs`, `limited.rs`,
//! `fence.rs`, `incoming_rpc.rs`, `epochs.rs`).

pub(crate) mod fenced;
pub(crate) mod incoming;
pub(crate) mod limited;
pub(crate) mod replay;
pub(crate) mod rerunning;
pub(crate) mod unflushed_reads;
