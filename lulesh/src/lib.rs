//! LULESH 2.0 (Livermore Unstructured Lagrangian Explicit Shock
//! Hydrodynamics) ported from the LLNL reference: a Sedov blast on a
//! hexahedral mesh, bit-for-bit equal to the reference in serial mode.
//!
//! [`domain::Domain`] holds one rank's block; [`lagrange::Simulation`]
//! advances it; [`comm::Comm`] marks where a multi-rank run exchanges halos.
//! [`distributed::run`] runs a cube of ranks over the `pgas` library, with
//! the reference's 26-neighbour exchanges done by one-sided puts
//! ([`halo`] holds their geometry); one rank stays the serial code path.
//! [`containment::run`] runs either under Containment Domains (`--cd-config`):
//! each time step a strict CD that survives soft errors and lost ranks.

pub mod comm;
pub mod containment;
pub mod corner_sum;
pub mod distributed;
pub mod domain;
pub mod eos;
pub mod error;
pub mod force;
pub mod geometry;
pub mod halo;
pub mod hourglass;
pub mod kinematics;
pub mod lagrange;
pub mod layout;
pub mod libm;
pub mod nodal;
pub mod options;
pub mod par;
pub mod qcalc;
pub mod rng;
pub mod timestep;
pub mod verify;
pub mod workspace;

pub use error::LuleshError;
pub use lagrange::Simulation;
pub use options::{Command, Options};
pub use verify::FinalReport;
