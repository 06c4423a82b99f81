//! The named points of the start-up and of the recovery where a chosen process kills itself
//! (`PGAS_MPI_KILL_AT`), for the tests of a loss before any body ran or during a recovery: a
//! kill from outside cannot aim at the few milliseconds these steps take.

/// Environment variable: `POINT:PROCESS`, the process (its number in `MPI_COMM_WORLD`) that
/// kills itself with SIGKILL at the point POINT, one of [`KILL_POINTS`].
const KILL_AT_ENV: &str = "PGAS_MPI_KILL_AT";

/// A point where [`KILL_AT_ENV`] may kill a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KillPoint {
    /// After the split into rank holders and spares, before a holder sets up its world (and
    /// before a spare's part of the exchange of job ranks).
    Split,
    /// Before this process's part of the exchange of job ranks, a holder's world set up.
    Publish,
    /// In a recovery, after the shrink, before this process's part of the agreement on the
    /// dead: the others' agreement fails, and their round starts again.
    Agree,
    /// In a recovery, the new job communicator made, before a survivor rebuilds its world
    /// over it.
    Rebuild,
    /// In a recovery, a spare that took a lost rank, before it builds its world over the new
    /// job communicator.
    Replace,
    /// In a survivor's rebuild, after the rebuilt job's first collectives (the lost ranks, the
    /// host, the agreement on segment length and topology), before its kept parts change.
    RebuildLate,
}

/// The names of the points, in the order of [`KillPoint`]'s variants.
const KILL_POINTS: [(&str, KillPoint); 6] = [
    ("split", KillPoint::Split),
    ("publish", KillPoint::Publish),
    ("agree", KillPoint::Agree),
    ("rebuild", KillPoint::Rebuild),
    ("replace", KillPoint::Replace),
    ("rebuild_late", KillPoint::RebuildLate),
];

/// The point and process [`KILL_AT_ENV`] names, read once (`None`: unset). A value not of
/// the form panics with what it should be: a test that names no point must not pass unkilled.
fn named() -> Option<(KillPoint, usize)> {
    static AT: std::sync::OnceLock<Option<(KillPoint, usize)>> = std::sync::OnceLock::new();
    *AT.get_or_init(|| {
        let v = std::env::var(KILL_AT_ENV).ok()?;
        let parsed = v.split_once(':').and_then(|(point, process)| {
            let (_, point) = KILL_POINTS.iter().find(|(name, _)| *name == point)?;
            Some((*point, process.parse().ok()?))
        });
        let names: Vec<&str> = KILL_POINTS.iter().map(|(name, _)| *name).collect();
        Some(parsed.unwrap_or_else(|| {
            panic!("{KILL_AT_ENV}={v:?}: expected POINT:PROCESS, POINT one of {names:?}")
        }))
    })
}

/// Kills this process with SIGKILL when [`KILL_AT_ENV`] names `point` and its number in
/// `MPI_COMM_WORLD` (not in the live processes a start-up that runs again counts: the process
/// named is the one that dies, once); returns otherwise.
pub(crate) fn kill_at(point: KillPoint) {
    let Some((at, process)) = named() else {
        return;
    };
    let mut me: std::ffi::c_int = -1;
    // SAFETY: MPI is initialized (the start-up and recoveries run after `process()`); one int
    // written.
    unsafe { ::mpi::ffi::MPI_Comm_rank(::mpi::ffi::RSMPI_COMM_WORLD, &mut me) };
    if at == point && usize::try_from(me) == Ok(process) {
        // SAFETY: kill(2) of this process with SIGKILL: nothing runs after it.
        unsafe { libc::kill(std::process::id() as libc::pid_t, libc::SIGKILL) };
    }
}
