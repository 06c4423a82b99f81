//! The named points of the start-up where a chosen process kills itself
//! (`PGAS_MPI_KILL_AT_START`), for the tests of a loss before any body ran: a kill from outside
//! cannot aim at the few milliseconds the start-up's collectives take.

/// Environment variable: `POINT:PROCESS`, the process (its number in `MPI_COMM_WORLD`) that
/// kills itself with SIGKILL at the start-up's point POINT, one of [`START_POINTS`].
const KILL_AT_START_ENV: &str = "PGAS_MPI_KILL_AT_START";

/// A point of the start-up where [`KILL_AT_START_ENV`] may kill a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StartPoint {
    /// After the split into rank holders and spares, before a holder sets up its world (and
    /// before a spare's part of the exchange of job ranks).
    Split,
    /// Before this process's part of the exchange of job ranks, a holder's world set up.
    Publish,
}

/// The names of the points, in the order of [`StartPoint`]'s variants.
const START_POINTS: [(&str, StartPoint); 2] = [
    ("split", StartPoint::Split),
    ("publish", StartPoint::Publish),
];

/// The point and process [`KILL_AT_START_ENV`] names, read once (`None`: unset). A value not of
/// the form panics with what it should be: a test that names no point must not pass unkilled.
fn named() -> Option<(StartPoint, usize)> {
    static AT: std::sync::OnceLock<Option<(StartPoint, usize)>> = std::sync::OnceLock::new();
    *AT.get_or_init(|| {
        let v = std::env::var(KILL_AT_START_ENV).ok()?;
        let parsed = v.split_once(':').and_then(|(point, process)| {
            let (_, point) = START_POINTS.iter().find(|(name, _)| *name == point)?;
            Some((*point, process.parse().ok()?))
        });
        let names: Vec<&str> = START_POINTS.iter().map(|(name, _)| *name).collect();
        Some(parsed.unwrap_or_else(|| {
            panic!("{KILL_AT_START_ENV}={v:?}: expected POINT:PROCESS, POINT one of {names:?}")
        }))
    })
}

/// Kills this process with SIGKILL when [`KILL_AT_START_ENV`] names `point` and its number in
/// `MPI_COMM_WORLD` (not in the live processes a start-up that runs again counts: the process
/// named is the one that dies, once); returns otherwise.
pub(crate) fn kill_at(point: StartPoint) {
    let Some((at, process)) = named() else {
        return;
    };
    let mut me: std::ffi::c_int = -1;
    // SAFETY: MPI is initialized (the start-up runs after `process()`); one int written.
    unsafe { ::mpi::ffi::MPI_Comm_rank(::mpi::ffi::RSMPI_COMM_WORLD, &mut me) };
    if at == point && usize::try_from(me) == Ok(process) {
        // SAFETY: kill(2) of this process with SIGKILL: nothing runs after it.
        unsafe { libc::kill(std::process::id() as libc::pid_t, libc::SIGKILL) };
    }
}
