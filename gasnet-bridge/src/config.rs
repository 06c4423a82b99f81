//! How a job is shaped: rank count, segment size and emulated node size, from API or environment.

use crate::error::ConfigError;

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
}

impl LaunchConfig {
    /// A job of `ranks` ranks with the default segment size and one node.
    pub fn new(ranks: usize) -> Self {
        LaunchConfig {
            ranks,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            ranks_per_node: None,
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
        }
        if let Some(v) = lookup("PGAS_RANKS_PER_NODE") {
            config.ranks_per_node = Some(parse_positive("PGAS_RANKS_PER_NODE", &v)?);
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
            (None, Some(given)) => Ok(given),
            (None, None) => match lookup("PGAS_RANKS") {
                Some(v) => parse_positive("PGAS_RANKS", &v),
                None => Ok(default),
            },
        }
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
