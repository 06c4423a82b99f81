//! The smp conduit: ranks are threads of one process and every segment is plain shared memory.
//!
//! Puts, gets and atomics are performed by the initiating thread directly on the target's
//! segment (as GASNet's PSHM support does), so they are complete when the call returns.
//! Active messages go through one single-producer lane per (source, target) pair
//! (`smp_inbox`) and run when the target polls. `world.rs` holds what the ranks share,
//! `driver.rs` one rank's operations on it.

mod driver;
mod world;

pub(crate) use driver::SmpDriver;
pub(crate) use world::SmpWorld;
