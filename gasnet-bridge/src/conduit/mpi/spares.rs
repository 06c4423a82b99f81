//! How many of the job's processes are spares (`PGAS_SPARES`): processes that hold no rank and
//! wait to replace one that dies (`ulfm/RECOVERY.md`). Only a build with the `ulfm` feature
//! has them; the count the program sees is the processes minus the spares.

use thiserror::Error;

use crate::spares_wanted::SPARES_ENV;

/// Why the spare count cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum SparesError {
    /// The variable is not a whole number.
    #[error("{SPARES_ENV}={0:?}: expected the number of spare processes (0 or more)")]
    NotANumber(String),
    /// Spares need an MPI that survives a lost process.
    #[error(
        "{SPARES_ENV}={0} needs the `ulfm` cargo feature and an MPI with ULFM (Open MPI 5, \
         `. .ci/ulfm-env`, then build with `--features ulfm` and run under \
         `mpirun --with-ft ulfm`); unset it to run every process as a rank"
    )]
    NeedsUlfm(usize),
    /// At least one process must hold a rank.
    #[error(
        "{SPARES_ENV}={spares} leaves no rank among {processes} processes: start \
         `mpirun -n N+{spares}` for a job of N ranks"
    )]
    TooMany { spares: usize, processes: usize },
}

/// The spare count `value` of the variable asks for, for a job of `processes` processes.
pub(crate) fn parse(value: Option<&str>, processes: usize) -> Result<usize, SparesError> {
    let spares = match value.map(str::trim) {
        None | Some("") => return Ok(0),
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| SparesError::NotANumber(v.to_string()))?,
    };
    if spares > 0 && !cfg!(feature = "ulfm") {
        return Err(SparesError::NeedsUlfm(spares));
    }
    if spares >= processes {
        return Err(SparesError::TooMany { spares, processes });
    }
    Ok(spares)
}

/// The spare count of this process's job of `processes` processes, from the environment.
pub(crate) fn from_env(processes: usize) -> Result<usize, SparesError> {
    parse(crate::spares_wanted::raw().as_deref(), processes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_or_empty_is_none() {
        assert_eq!(parse(None, 4), Ok(0));
        assert_eq!(parse(Some(" "), 4), Ok(0));
        assert_eq!(parse(Some("0"), 1), Ok(0));
    }

    #[test]
    fn a_count_needs_the_feature_and_a_rank_left() {
        if cfg!(feature = "ulfm") {
            assert_eq!(parse(Some(" 2 "), 5), Ok(2));
            assert_eq!(
                parse(Some("4"), 4),
                Err(SparesError::TooMany {
                    spares: 4,
                    processes: 4
                })
            );
        } else {
            let e = parse(Some("1"), 5).unwrap_err();
            assert_eq!(e, SparesError::NeedsUlfm(1));
            assert!(e.to_string().contains("--features ulfm"), "{e}");
        }
        assert_eq!(
            parse(Some("two"), 5),
            Err(SparesError::NotANumber("two".into()))
        );
    }
}
