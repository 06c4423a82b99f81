//! Conduits: the transports under an [`Endpoint`](crate::Endpoint).
//!
//! Every conduit provides the same operations with the same semantics (segments addressed by
//! rank and offset, AMs by handler index, puts acknowledged with the target's EC/IWC, remote
//! atomics, a split-phase barrier, explicit progress). `smp` runs ranks as threads of one
//! process; `mpi` (cargo feature `mpi`) runs one process per rank under `mpirun`.
//!
//! The endpoint reaches its conduit through the `Conduit` enum: one predictable branch per
//! operation and no virtual call, so the smp fast paths stay as they were; without the `mpi`
//! feature the enum has a single variant and the branch disappears.
//!
//! Which conduit a job uses is decided when it starts ([`selected`]): `PGAS_CONDUIT=smp` or
//! `PGAS_CONDUIT=mpi` if set, otherwise `mpi` when the process was started by an MPI launcher
//! (and the feature is built in), otherwise `smp`. The program does not change.

mod launcher;
#[cfg(feature = "mpi")]
pub mod mpi;
// The mpi conduit's same-host AM ring: shared memory, not MPI, so it builds for its unit
// tests and loom models without the feature.
#[cfg(any(feature = "mpi", test, loom))]
pub(crate) mod shm_ring;
pub mod smp;
pub(crate) mod smp_inbox;

pub use launcher::{mpirun_available, mpirun_command, mpirun_program, require_mpirun};

use std::sync::Arc;

use crate::error::{ConfigError, LaunchError};

/// The world an endpoint belongs to.
#[derive(Debug)]
pub(crate) enum Conduit {
    Smp(Arc<smp::SmpWorld>),
    #[cfg(feature = "mpi")]
    Mpi(std::rc::Rc<mpi::MpiWorld>),
}

/// The conduits a job can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConduitKind {
    /// Ranks are threads of this process.
    Smp,
    /// One process per rank, started by `mpirun` (feature `mpi`).
    Mpi,
}

impl ConduitKind {
    /// `"smp"` or `"mpi"`, as benchmarks report it.
    pub fn name(self) -> &'static str {
        match self {
            ConduitKind::Smp => "smp",
            ConduitKind::Mpi => "mpi",
        }
    }
}

/// Environment variables by which MPI launchers (Open MPI, MPICH/Hydra, PMIx, Slurm's PMI)
/// tell a process that it is one rank of a parallel job.
const LAUNCHER_VARS: [&str; 5] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMIX_RANK",
    "MPI_LOCALNRANKS",
    "PMI_RANK",
];

/// The conduit this process's jobs run on (see the module documentation for the rule).
pub fn selected() -> Result<ConduitKind, LaunchError> {
    select(|var| std::env::var(var).ok())
}

/// This process's place in an mpi job before the job starts: `Some((rank, world size))`, asked
/// of MPI itself (which this initializes), when [`selected`] is the mpi conduit; `None` on smp.
/// Programs that must check a job's shape (LULESH's cube of ranks) before launching use it.
pub fn mpi_world() -> Result<Option<(usize, usize)>, LaunchError> {
    match selected()? {
        ConduitKind::Smp => Ok(None),
        #[cfg(feature = "mpi")]
        ConduitKind::Mpi => mpi::world_shape().map(Some),
        #[cfg(not(feature = "mpi"))]
        ConduitKind::Mpi => unreachable!("`selected` refuses mpi without the feature"),
    }
}

/// [`selected`] with the environment looked up by `lookup`.
pub fn select(lookup: impl Fn(&str) -> Option<String>) -> Result<ConduitKind, LaunchError> {
    match lookup("PGAS_CONDUIT").as_deref().map(str::trim) {
        Some("smp") => Ok(ConduitKind::Smp),
        Some("mpi") if cfg!(feature = "mpi") => Ok(ConduitKind::Mpi),
        Some("mpi") => Err(ConfigError::BadEnv {
            var: "PGAS_CONDUIT",
            value: "mpi".into(),
            reason: "this program was built without the mpi conduit; rebuild it with \
                     `cargo build --release --features mpi` (gasnet-bridge's feature `mpi`)"
                .into(),
        }
        .into()),
        Some(other) => Err(ConfigError::BadEnv {
            var: "PGAS_CONDUIT",
            value: other.into(),
            reason: "expected `smp` or `mpi`".into(),
        }
        .into()),
        None if cfg!(feature = "mpi") && LAUNCHER_VARS.iter().any(|v| lookup(v).is_some()) => {
            Ok(ConduitKind::Mpi)
        }
        None => Ok(ConduitKind::Smp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn mpi_world_is_none_on_smp() {
        if select(|v| std::env::var(v).ok()).unwrap() == ConduitKind::Smp {
            assert_eq!(mpi_world().unwrap(), None);
        }
    }

    #[test]
    fn selection_rule() {
        assert_eq!(select(env(&[])).unwrap(), ConduitKind::Smp);
        assert_eq!(
            select(env(&[
                ("PGAS_CONDUIT", "smp"),
                ("OMPI_COMM_WORLD_SIZE", "2")
            ]))
            .unwrap(),
            ConduitKind::Smp
        );
        let launched = select(env(&[("OMPI_COMM_WORLD_SIZE", "2")])).unwrap();
        let forced = select(env(&[("PGAS_CONDUIT", "mpi")]));
        if cfg!(feature = "mpi") {
            assert_eq!(launched, ConduitKind::Mpi);
            assert_eq!(forced.unwrap(), ConduitKind::Mpi);
        } else {
            assert_eq!(launched, ConduitKind::Smp);
            let msg = forced.unwrap_err().to_string();
            assert!(msg.contains("--features mpi"), "{msg}");
        }
        let msg = select(env(&[("PGAS_CONDUIT", "tcp")]))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("PGAS_CONDUIT") && msg.contains("tcp"), "{msg}");
    }
}
