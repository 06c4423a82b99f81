//! Which conduit a job runs on: the kinds, and the rule that picks one at start-up.

use crate::error::{ConfigError, LaunchError};

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
        ConduitKind::Mpi => crate::conduit::mpi::world_shape().map(Some),
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
