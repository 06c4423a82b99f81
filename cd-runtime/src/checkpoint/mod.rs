//! Checkpoints of a strict CD to disk and the restart of a relaunched job from them
//! (`README.md` beside this file).

pub(crate) mod commit;
pub mod format;
pub(crate) mod load;
pub(crate) mod restart;
pub mod schedule;
pub(crate) mod state;
pub(crate) mod transfer;
pub(crate) mod writer;
