//! Who is in the job at start: the communicator of every process (`all`), the spares split off
//! from the ranks, and the role table every process keeps (`RECOVERY.md`, "Processes and
//! roles"). Kept per thread: only the thread that runs the rank calls MPI.

use std::cell::RefCell;
use std::ffi::c_int;
use std::mem::ManuallyDrop;

use ::mpi::ffi;

use crate::error::BridgeError;

use super::super::calls::{check, mpi_len};
use super::super::spares;
use super::kill_points::{KillPoint, kill_at};
use super::mpix;
use super::roles::Roles;

/// This process's place among every process of the job.
#[derive(Debug)]
pub(crate) struct Membership {
    /// Every live process, ranks and spares, errors returned.
    pub(crate) all: ffi::MPI_Comm,
    /// This process's number in `all`.
    pub(crate) me: usize,
    /// The same at every live process.
    pub(crate) roles: Roles,
    /// The recoveries this process took part in (the same at every live process).
    pub(crate) epoch: u64,
    /// Whether this process made the start-up's agreement ([`agree_start`]).
    agreed_start: bool,
    /// The job's rank count: the processes of `all` beyond it are spares at start.
    pub(crate) ranks: usize,
}

thread_local! {
    // Never dropped: the check at the process's exit (`exit_check.rs`) reads it after the
    // exiting thread's destructors ran, and a value with a destructor would be gone by then.
    static MEMBERSHIP: RefCell<ManuallyDrop<Option<Membership>>> =
        const { RefCell::new(ManuallyDrop::new(None)) };
}

/// Runs `f` on this thread's membership; `None` before [`split`] and [`publish`] made it.
pub(crate) fn with<T>(f: impl FnOnce(Option<&mut Membership>) -> T) -> T {
    MEMBERSHIP.with(|m| f(m.borrow_mut().as_mut()))
}

/// What [`split`] made of this process.
pub(crate) enum Place {
    /// It holds a rank: the job's world is built over this communicator of the rank holders.
    Rank(ffi::MPI_Comm),
    /// It is a spare: it waits (`spare.rs`).
    Spare,
}

/// `MPI_COMM_WORLD` duplicated with errors returned: the communicator of every process.
fn all_processes() -> Result<ffi::MPI_Comm, BridgeError> {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    let mut all = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: MPI is initialized (the caller's `process()`); `all` is written.
    check(
        unsafe { ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut all) },
        "MPI_Comm_dup(MPI_COMM_WORLD)",
    )?;
    // SAFETY: `all` was just created; ERRORS_RETURN is predefined.
    check(
        unsafe { ffi::MPI_Comm_set_errhandler(all, ffi::RSMPI_ERRORS_RETURN) },
        "MPI_Comm_set_errhandler(all)",
    )?;
    Ok(all)
}

/// This process's number in `comm` and the size of `comm`.
pub(crate) fn rank_and_size(comm: ffi::MPI_Comm) -> Result<(usize, usize), BridgeError> {
    let (mut rank, mut size): (c_int, c_int) = (0, 0);
    // SAFETY: `comm` is a valid communicator; each call writes one int.
    check(
        unsafe { ffi::MPI_Comm_rank(comm, &mut rank) },
        "MPI_Comm_rank",
    )?;
    // SAFETY: as above.
    check(
        unsafe { ffi::MPI_Comm_size(comm, &mut size) },
        "MPI_Comm_size",
    )?;
    Ok((rank as usize, size as usize))
}

/// Splits the processes into rank holders and spares (collective over every process): the
/// last `PGAS_SPARES` processes of `MPI_COMM_WORLD` are spares. A process that has a membership
/// already (a start-up that lost a process and runs again, `start_again.rs`; or a later job of
/// the process) splits the live processes of that membership: the first of them hold the
/// job's ranks, the rest are spares.
pub(crate) fn split() -> Result<Place, BridgeError> {
    let again = with(|m| m.map(|m| (m.all, m.ranks)));
    let (all, ranks) = match again {
        Some((all, ranks)) => (all, ranks),
        None => {
            let all = all_processes()?;
            let (_, size) = rank_and_size(all)?;
            let spares = spares::from_env(size).map_err(|e| BridgeError::Conduit(e.to_string()))?;
            (all, size - spares)
        }
    };
    let (me, _) = rank_and_size(all)?;
    let spare = me >= ranks;
    // Kept before the first collective over `all`: a loss during the start-up revokes it
    // (`start_again.rs`).
    MEMBERSHIP.with(|m| {
        **m.borrow_mut() = Some(Membership {
            all,
            me,
            roles: Roles {
                holders: Vec::new(),
                spares: Vec::new(),
            },
            epoch: 0,
            agreed_start: false,
            ranks,
        })
    });
    // SAFETY: reading link-time constants of rsmpi's C shim.
    let (mut holders, undefined) = unsafe { (ffi::RSMPI_COMM_NULL, ffi::RSMPI_UNDEFINED) };
    // SAFETY: `all` is valid; `holders` is written (MPI_COMM_NULL at a spare).
    check(
        unsafe {
            ffi::MPI_Comm_split(
                all,
                if spare { undefined } else { 0 },
                me as c_int,
                &mut holders,
            )
        },
        "MPI_Comm_split(rank holders)",
    )?;
    kill_at(KillPoint::Split);
    if spare {
        // The spare's side of the exchange the rank holders make once their world is set up.
        publish(None)?;
        return Ok(Place::Spare);
    }
    // SAFETY: `holders` was just created; ERRORS_RETURN is predefined.
    check(
        unsafe { ffi::MPI_Comm_set_errhandler(holders, ffi::RSMPI_ERRORS_RETURN) },
        "MPI_Comm_set_errhandler(rank holders)",
    )?;
    Ok(Place::Rank(holders))
}

/// Tells every process which job rank this one holds (`None`: a spare) and builds the role
/// table from the answers (collective over every process; after [`split`]).
pub(crate) fn publish(rank: Option<usize>) -> Result<(), BridgeError> {
    let all = with(|m| m.map(|m| m.all)).expect("split made the membership");
    let (_, size) = rank_and_size(all)?;
    kill_at(KillPoint::Publish);
    let mine: i64 = rank.map_or(-1, |r| r as i64);
    let mut every = vec![0i64; size];
    // SAFETY: one i64 sent and one per process of `all` received; both buffers live across
    // this blocking call.
    let exchanged = check(
        unsafe {
            ffi::MPI_Allgather(
                (&raw const mine).cast(),
                mpi_len(8)?,
                ffi::RSMPI_UINT8_T,
                every.as_mut_ptr().cast(),
                mpi_len(8)?,
                ffi::RSMPI_UINT8_T,
                all,
            )
        },
        "MPI_Allgather(job ranks)",
    );
    agree_start(exchanged.is_ok())?;
    exchanged?;
    let rank_of: Vec<Option<usize>> = every.iter().map(|&r| usize::try_from(r).ok()).collect();
    with(|m| m.expect("split made the membership").roles = Roles::from_ranks(&rank_of));
    Ok(())
}

/// The start-up's last step, once per process (collective over every process; later calls
/// return at once): a fault-tolerant agreement over `all` that every process's start-up
/// succeeded (`mine`). The allgather of job ranks can succeed at some processes and fail at
/// others; the agreement is uniform, so either every live process starts the job or every one
/// ends its start-up, and none meets a loss in its body that the others met at start-up.
pub(crate) fn agree_start(mine: bool) -> Result<(), BridgeError> {
    let Some(all) = with(|m| {
        m.filter(|m| !m.agreed_start).map(|m| {
            m.agreed_start = true;
            m.all
        })
    }) else {
        return Ok(());
    };
    let mut flag = c_int::from(mine);
    // SAFETY: `all` is valid (it may be revoked: agree works on a revoked communicator); one
    // int read and written.
    check(
        unsafe { mpix::MPIX_Comm_agree(all, &mut flag) },
        "MPIX_Comm_agree(start-up)",
    )?;
    if flag == 0 {
        return Err(BridgeError::Conduit(
            "the start-up failed at another process (MPIX_Comm_agree(start-up))".into(),
        ));
    }
    Ok(())
}
