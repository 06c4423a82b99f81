//! Hosts emulated on one machine (`PGAS_MPI_HOST_SIZE=k`): the processes of `MPI_COMM_WORLD`
//! in blocks of k consecutive ranks count as one host each, in place of what MPI says shares a
//! machine. Within an emulated host the processes map each other's segments, between two
//! they communicate through MPI, as on several machines: one machine can then run the layouts
//! of a cluster (several processes per host, a spare on another host than the rank it
//! replaces) that `PGAS_MPI_PSHM=0` (one process per host) does not.

use std::ffi::c_int;
use std::sync::OnceLock;

use ::mpi::ffi;

/// Environment variable: the processes per emulated host (unset: the machine's real hosts).
pub(crate) const HOST_SIZE_ENV: &str = "PGAS_MPI_HOST_SIZE";

/// The processes per emulated host the variable sets, or why its value is refused.
fn parse(var: Option<&str>) -> Result<Option<usize>, String> {
    let Some(v) = var else {
        return Ok(None);
    };
    match v.trim().parse::<usize>() {
        Ok(k) if k > 0 => Ok(Some(k)),
        _ => Err(format!(
            "{HOST_SIZE_ENV}={v:?}: expected the number of processes per emulated host (at \
             least 1), or unset for the machine's real hosts"
        )),
    }
}

/// The emulated host of this process (its `MPI_COMM_WORLD` rank over the host size), `None`
/// without emulation, or why the variable is refused. MPI is initialized.
pub(crate) fn this_host() -> Result<Option<usize>, String> {
    static SIZE: OnceLock<Result<Option<usize>, String>> = OnceLock::new();
    let size = SIZE
        .get_or_init(|| parse(std::env::var(HOST_SIZE_ENV).ok().as_deref()))
        .clone()?;
    let Some(size) = size else {
        return Ok(None);
    };
    let mut me: c_int = 0;
    // SAFETY: MPI is initialized (callers run after `process()`); one int written.
    unsafe { ffi::MPI_Comm_rank(ffi::RSMPI_COMM_WORLD, &mut me) };
    Ok(Some(usize::try_from(me).unwrap_or(0) / size))
}

/// The machine of a host name: the name without its emulated host (the suffix `#k` that
/// `process::processor_name` adds under emulation).
pub(crate) fn machine(host: &str) -> &str {
    host.rsplit_once('#').map_or(host, |(m, _)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_sets_a_positive_size_or_is_refused() {
        assert_eq!(parse(None), Ok(None));
        assert_eq!(parse(Some("2")), Ok(Some(2)));
        assert_eq!(parse(Some(" 4 ")), Ok(Some(4)));
        for bad in ["0", "-1", "", "two"] {
            let e = parse(Some(bad)).unwrap_err();
            assert!(e.contains(HOST_SIZE_ENV), "{bad}: {e}");
        }
        assert_eq!(machine("vm#3"), "vm");
        assert_eq!(machine("vm"), "vm");
    }
}
