//! Spare processes and the recovery of a killed process over an MPI with ULFM (cargo feature
//! `ulfm`). The protocol is told in `RECOVERY.md` beside this file.

mod deadline;
mod exit_check;
mod kill_points;
pub(crate) mod lifecycle;
mod members;
pub(crate) mod mpix;
mod rebuild;
mod recovery;
mod roles;
mod spare;
mod start_again;
mod unrecovered;
