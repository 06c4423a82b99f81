//! How a job is shaped: rank count, segment size and emulated node size, from API or environment.

use crate::counters::WriteCounting;
use crate::error::ConfigError;
use crate::limits;

/// Default size of each rank's registered segment.
pub const DEFAULT_SEGMENT_BYTES: usize = 64 << 20;

/// The shape of a job: how many ranks, how large a segment each, how many ranks per node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Number of ranks (at least 1).
    pub ranks: usize,
    /// Bytes in each rank's segment (at least 8, a multiple of 8).
    pub segment_bytes: usize,
    /// Ranks per emulated node; `None` puts every rank on node 0.
    pub ranks_per_node: Option<usize>,
    /// Whether writes are counted at their targets (the IWC); off unless a resilience
    /// runtime that reads the counters asks for it (see `counters.rs`).
    pub write_counting: WriteCounting,
}

impl LaunchConfig {
    /// A job of `ranks` ranks with the default segment size and one node.
    pub fn new(ranks: usize) -> Self {
        LaunchConfig {
            ranks,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            ranks_per_node: None,
            write_counting: WriteCounting::Off,
        }
    }

    /// Sets the segment size in bytes.
    pub fn segment_bytes(mut self, bytes: usize) -> Self {
        self.segment_bytes = bytes;
        self
    }

    /// Sets the emulated node size.
    pub fn ranks_per_node(mut self, ranks_per_node: usize) -> Self {
        self.ranks_per_node = Some(ranks_per_node);
        self
    }

    /// Sets whether the job counts incoming writes (its IWCs and the acks of its writes).
    pub fn write_counting(mut self, counting: WriteCounting) -> Self {
        self.write_counting = counting;
        self
    }

    /// Reads `PGAS_RANKS`, `PGAS_SEGMENT_MB` and `PGAS_RANKS_PER_NODE`; an unset variable
    /// keeps the default (`default_ranks`, 64 MiB, one node).
    pub fn from_env(default_ranks: usize) -> Result<Self, ConfigError> {
        Self::from_lookup(default_ranks, |var| std::env::var(var).ok())
    }

    /// Like [`LaunchConfig::from_env`], with the variables looked up by `lookup`.
    pub fn from_lookup(
        default_ranks: usize,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut config = LaunchConfig::new(default_ranks);
        if let Some(v) = lookup("PGAS_RANKS") {
            config.ranks = parse_positive("PGAS_RANKS", &v)?;
        }
        if let Some(v) = lookup("PGAS_SEGMENT_MB") {
            let mb = parse_positive("PGAS_SEGMENT_MB", &v)?;
            config.segment_bytes = mb.checked_mul(1 << 20).ok_or_else(|| ConfigError::BadEnv {
                var: "PGAS_SEGMENT_MB",
                value: v.clone(),
                reason: "too large for this machine's address space".into(),
            })?;
            limits::check_memory(
                &format!("PGAS_SEGMENT_MB={} (one rank's segment)", v.trim()),
                Some(config.segment_bytes as u64),
                "; lower PGAS_SEGMENT_MB",
            )?;
        }
        if let Some(v) = lookup("PGAS_RANKS_PER_NODE") {
            config.ranks_per_node = Some(parse_positive("PGAS_RANKS_PER_NODE", &v)?);
        }
        config.validate()?;
        Ok(config)
    }

    /// The shape of a program's job, by the one convention of every program here: `ranks`
    /// ranks (from [`crate::job_ranks`]), each with a segment of `needed` bytes (what the
    /// program computed for its problem size) unless `PGAS_SEGMENT_MB` asks for a size (at
    /// least `needed`, else [`ConfigError::SegmentTooSmall`]), and `PGAS_RANKS_PER_NODE`.
    pub fn for_job(ranks: usize, needed: usize) -> Result<Self, ConfigError> {
        Self::for_job_from_lookup(ranks, needed, |var| std::env::var(var).ok())
    }

    /// Like [`LaunchConfig::for_job`], with the variables looked up by `lookup`.
    pub fn for_job_from_lookup(
        ranks: usize,
        needed: usize,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let given_segment = lookup("PGAS_SEGMENT_MB").is_some();
        let mut config = Self::from_lookup(ranks, |var| {
            (var != "PGAS_RANKS").then(|| lookup(var)).flatten()
        })?;
        config.ranks = ranks;
        if !given_segment {
            config.segment_bytes = needed.next_multiple_of(8).max(8);
        } else if config.segment_bytes < needed {
            return Err(ConfigError::SegmentTooSmall {
                have: config.segment_bytes,
                need: needed,
            });
        }
        config.validate()?;
        Ok(config)
    }

    /// The rank count of a program's job, by the one convention of every program here: under
    /// an MPI launcher (`mpi_world_size` is `Some`, see [`crate::conduit::mpi_world`]) the
    /// number of processes, `PGAS_RANKS` ignored and a `given` count that differs refused
    /// ([`ConfigError::RanksDiffer`], naming `flag`, the option it came by: `--ranks`,
    /// `RANKS`); otherwise `given`, else `PGAS_RANKS` (looked up by `lookup`), else `default`.
    pub fn resolve_ranks(
        flag: &str,
        given: Option<usize>,
        default: usize,
        mpi_world_size: Option<usize>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<usize, ConfigError> {
        match (mpi_world_size, given) {
            (Some(processes), Some(given)) if given != processes => Err(ConfigError::RanksDiffer {
                flag: flag.into(),
                given,
                processes,
            }),
            (Some(processes), _) => Ok(processes),
            (None, Some(given)) => {
                limits::check_threads(flag, given, RANKS_HINT)?;
                Ok(given)
            }
            (None, None) => match lookup("PGAS_RANKS") {
                Some(v) => {
                    let ranks = parse_positive("PGAS_RANKS", &v)?;
                    limits::check_threads("PGAS_RANKS=", ranks, RANKS_HINT)?;
                    Ok(ranks)
                }
                None => Ok(default),
            },
        }
    }

    /// Checks that the job fits this machine before anything is allocated: on smp (`ranks`
    /// threads of this process) at most [`limits::max_threads`] ranks, and every rank's
    /// segment and stack within the memory available; on mpi (one rank per process) one
    /// segment. The error names the sizes, the memory needed and available.
    pub fn check_fits(&self, one_rank_per_process: bool) -> Result<(), ConfigError> {
        let segment = crate::limits::Bytes(self.segment_bytes as u64);
        if one_rank_per_process {
            limits::check_memory(
                &format!("a segment of {segment}"),
                Some(self.segment_bytes as u64),
                "; lower PGAS_SEGMENT_MB",
            )?;
            return Ok(());
        }
        limits::check_threads("rank count", self.ranks, RANKS_HINT)?;
        limits::check_memory(
            &format!(
                "a job of {} ranks with a segment of {segment} each",
                self.ranks
            ),
            limits::smp_job_bytes(self.ranks, self.segment_bytes),
            "; lower PGAS_SEGMENT_MB or the rank count",
        )?;
        Ok(())
    }

    /// Checks every field, naming the first one out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.ranks == 0 {
            return Err(ConfigError::BadValue {
                what: "rank count",
                reason: "a job needs at least one rank".into(),
            });
        }
        if self.segment_bytes < 8 || !self.segment_bytes.is_multiple_of(8) {
            return Err(ConfigError::BadValue {
                what: "segment size",
                reason: format!(
                    "{} bytes; it must be a positive multiple of 8",
                    self.segment_bytes
                ),
            });
        }
        if self.ranks_per_node == Some(0) {
            return Err(ConfigError::BadValue {
                what: "ranks per node",
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

/// What to do about a rank count above the cap of one process.
const RANKS_HINT: &str = "; ranks of one process are its threads, run more under mpirun (one rank \
                          per process)";

fn parse_positive(var: &'static str, value: &str) -> Result<usize, ConfigError> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        Ok(_) => Err(ConfigError::BadEnv {
            var,
            value: value.into(),
            reason: "must be at least 1".into(),
        }),
        Err(e) => Err(ConfigError::BadEnv {
            var,
            value: value.into(),
            reason: format!("not a whole number ({e})"),
        }),
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
    fn rank_counts_resolve_by_one_convention() {
        let none = env(&[]);
        let eight = env(&[("PGAS_RANKS", "8")]);
        let resolve = LaunchConfig::resolve_ranks;
        assert_eq!(resolve("--ranks", None, 4, None, &none), Ok(4));
        assert_eq!(resolve("--ranks", None, 4, None, &eight), Ok(8));
        assert_eq!(resolve("--ranks", Some(2), 4, None, &eight), Ok(2));
        assert_eq!(resolve("--ranks", None, 4, Some(3), &eight), Ok(3));
        assert_eq!(resolve("--ranks", Some(3), 4, Some(3), &none), Ok(3));
        let err = resolve("--ranks", Some(8), 4, Some(2), &none).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--ranks 8 does not match the 2 MPI processes: under mpirun the rank count is the \
             number of processes (`mpirun -n 8 ...`, or leave --ranks out)"
        );
        let err = resolve("RANKS", None, 4, None, &env(&[("PGAS_RANKS", "x")])).unwrap_err();
        assert!(err.to_string().contains("PGAS_RANKS"), "{err}");
    }

    #[test]
    fn impossible_jobs_are_refused_with_the_sizes() {
        let none = env(&[]);
        let e = LaunchConfig::resolve_ranks("--ranks", Some(1 << 40), 4, None, &none)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--ranks 1099511627776 is more than"), "{e}");
        let huge = env(&[("PGAS_RANKS", "100000000")]);
        let e = LaunchConfig::resolve_ranks("--ranks", None, 4, None, &huge).unwrap_err();
        assert!(e.to_string().contains("PGAS_RANKS=100000000 is"), "{e}");
        // Under mpirun the processes decide.
        assert_eq!(
            LaunchConfig::resolve_ranks("--ranks", None, 4, Some(3), &huge),
            Ok(3)
        );
        let seg = env(&[("PGAS_SEGMENT_MB", "1000000000")]);
        let e = LaunchConfig::from_lookup(4, seg).unwrap_err().to_string();
        assert!(
            e.starts_with("PGAS_SEGMENT_MB=1000000000 (one rank's segment) needs 953.7 TiB"),
            "{e}"
        );
        let e = LaunchConfig::new(4)
            .segment_bytes(1 << 50)
            .check_fits(false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a job of 4 ranks") && e.contains("available"),
            "{e}"
        );
        assert!(LaunchConfig::new(4).check_fits(false).is_ok());
    }

    #[test]
    fn jobs_read_the_environment_one_way() {
        let c = LaunchConfig::for_job_from_lookup(3, 1001, env(&[("PGAS_RANKS", "9")])).unwrap();
        assert_eq!(
            (c.ranks, c.segment_bytes, c.ranks_per_node),
            (3, 1008, None)
        );
        let vars = [("PGAS_SEGMENT_MB", "2"), ("PGAS_RANKS_PER_NODE", "2")];
        let c = LaunchConfig::for_job_from_lookup(4, 1000, env(&vars)).unwrap();
        assert_eq!((c.segment_bytes, c.ranks_per_node), (2 << 20, Some(2)));
        let e = LaunchConfig::for_job_from_lookup(4, 3 << 20, env(&vars)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("PGAS_SEGMENT_MB gives 2097152 bytes per rank, but"),
            "{e}"
        );
    }

    #[test]
    fn defaults_without_environment() {
        let c = LaunchConfig::from_lookup(4, env(&[])).unwrap();
        assert_eq!(c, LaunchConfig::new(4));
        assert_eq!(c.segment_bytes, 64 << 20);
    }

    #[test]
    fn environment_overrides() {
        let c = LaunchConfig::from_lookup(
            4,
            env(&[
                ("PGAS_RANKS", "7"),
                ("PGAS_SEGMENT_MB", "3"),
                ("PGAS_RANKS_PER_NODE", "2"),
            ]),
        )
        .unwrap();
        assert_eq!(c.ranks, 7);
        assert_eq!(c.segment_bytes, 3 << 20);
        assert_eq!(c.ranks_per_node, Some(2));
    }

    #[test]
    fn bad_environment_names_the_variable() {
        for (var, val) in [
            ("PGAS_RANKS", "x"),
            ("PGAS_RANKS", "0"),
            ("PGAS_SEGMENT_MB", "-1"),
        ] {
            let e = LaunchConfig::from_lookup(4, env(&[(var, val)])).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(var) && msg.contains(val), "{msg}");
        }
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(LaunchConfig::new(0).validate().is_err());
        assert!(LaunchConfig::new(1).segment_bytes(12).validate().is_err());
        assert!(LaunchConfig::new(1).ranks_per_node(0).validate().is_err());
        assert!(LaunchConfig::new(1).segment_bytes(16).validate().is_ok());
    }
}
