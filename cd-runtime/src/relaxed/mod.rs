//! Relaxed Containment Domains: CDs that recover alone, by replaying logged communication
//! (the protocol of docs/relaxed-cds.md; told file by file in `relaxed/README.md`).
//!
//! A relaxed CD is a child of a strict CD (its LCSA, the lowest strict ancestor) or of
//! another relaxed CD. While one runs on a rank, the rank's pgas hook logs every remote
//! operation into the CD's log store (`log_store.rs`); a failed relaxed CD restores its
//! preserved state and re-executes in replay mode (`replay.rs`, `interceptor.rs`), applying the
//! writes other ranks made into it epoch by epoch (`epochs.rs`), while every other rank keeps
//! running. Beginning and completing a relaxed CD involve no communication.

pub mod classes;
pub(crate) mod cluster;
pub mod dependencies;
pub(crate) mod durable;
pub(crate) mod entry;
pub(crate) mod epochs;
pub(crate) mod fence;
pub(crate) mod frame_state;
pub(crate) mod gather;
pub(crate) mod incoming_rpc;
pub(crate) mod interceptor;
pub(crate) mod limited;
pub(crate) mod log_store;
pub(crate) mod logging;
pub(crate) mod modes;
pub(crate) mod op_fault;
pub(crate) mod phases;
pub(crate) mod rank_state;
pub(crate) mod replay;
pub(crate) mod replica;
pub(crate) mod run;
pub(crate) mod shadow;
pub(crate) mod state;
pub(crate) mod trace;
pub(crate) mod writers;

use pgas::RpcTable;

use crate::relaxed::rank_state::RelaxedRpcs;
use crate::runtime;

pub use crate::error::ClassificationError;
pub use entry::relaxed;
pub(crate) use frame_state::{PreservedRegion, RelaxedFrame};
/// What a recovery did, for tests (feature `testing`).
#[cfg(feature = "testing")]
pub use trace::{RecoveryTrace, ReplayEvent};
#[cfg(not(feature = "testing"))]
pub(crate) use trace::{RecoveryTrace, ReplayEvent};

impl RelaxedRpcs {
    /// Registers the functions in `rpcs` (before launch, on every rank alike).
    pub(crate) fn register(rpcs: &mut RpcTable) -> RelaxedRpcs {
        RelaxedRpcs {
            gather: rpcs.register(
                "cd.relaxed.gather",
                |(target, from, to): (usize, u64, u64)| {
                    // Served from progress: this rank stays in its own CD.
                    runtime::try_with(|rt| gather::serve_gather(rt, target, from, to))
                        .unwrap_or_default()
                },
            ),
            check: rpcs.register(
                "cd.relaxed.check",
                |(asker, cd, offset, len): (usize, String, usize, usize)| {
                    runtime::try_with(|rt| classes::serve_check(rt, asker, &cd, offset, len))
                        .flatten()
                },
            ),
            arrive: rpcs.register(
                "cd.relaxed.arrive",
                |(team, seq, failed): (u64, u64, bool)| {
                    runtime::try_with(|rt| limited::arrive(rt, team, seq, failed));
                },
            ),
            fence: rpcs.register("cd.relaxed.fence", |target: usize| {
                // A rank without a CD runtime (its program ended) writes no more.
                runtime::try_with(|rt| fence::serve(rt, target)).unwrap_or(0)
            }),
            collective_result: rpcs.register(
                "cd.relaxed.collective_result",
                |(team, k): (u64, u64)| {
                    runtime::try_with(|rt| limited::serve_collective(rt, team, k)).flatten()
                },
            ),
        }
    }
}

/// Entries in the log stores of every CD this rank is in (0 after a strict CD completed
/// with nothing relaxed around it).
#[cfg(feature = "testing")]
pub fn logged_entries() -> usize {
    runtime::with(|rt| {
        rt.frames
            .borrow()
            .iter()
            .map(|f| f.rx.borrow().store.len())
            .sum()
    })
}

/// The recoveries of relaxed CDs this rank performed (most recent last; the last 64 kept).
#[cfg(feature = "testing")]
pub fn recoveries() -> Vec<RecoveryTrace> {
    runtime::with(|rt| rt.relaxed.traces.borrow().clone())
}

/// Draws random bytes for `cd::rng()`: inside a logging relaxed CD the draw is logged, and
/// in a replay it is served from the log.
pub(crate) fn rng_draw(
    rt: &crate::runtime::CdRuntime,
    dst: &mut [u8],
    draw: impl FnOnce(&mut [u8]),
) {
    if rt.relaxed.logging_depth.get() == 0 {
        draw(dst);
        return;
    }
    interceptor::rng_draw(rt, dst, draw);
}
