//! The recovery after a lost process, up to a new job communicator: revoke, shrink, agreement
//! on the dead, renumbering (`RECOVERY.md`, "Revoke, shrink, agree" and "Renumbering").

use std::ffi::c_int;

use ::mpi::ffi;
use thiserror::Error;

use crate::error::BridgeError;

use super::super::calls::check;
use super::kill_points::{KillPoint, kill_at};
use super::members::{self, rank_and_size};
use super::mpix;
use super::roles::{RenumberError, Roles, digest};

/// Why the recovery did not produce a new job communicator.
#[derive(Debug, Error)]
pub(crate) enum RecoveryError {
    /// More processes holding ranks died than spares were left.
    #[error(transparent)]
    NoSpare(#[from] RenumberError),
    /// The live processes did not all compute the same set of the dead (a fault of the MPI
    /// library's shrink: it is checked because the renumbering trusts it).
    #[error(
        "the live processes disagree on which processes died after MPIX_Comm_shrink; the job \
         cannot be renumbered safely and ends"
    )]
    Disagreement,
    /// The new job communicator does not number this process as the role table does.
    #[error(
        "the new job communicator gave job rank {rank} the number {got} of {size}: \
         MPI_Comm_split did not keep the order of its keys; the job ends"
    )]
    Numbering {
        rank: usize,
        got: usize,
        size: usize,
    },
    /// Processes kept dying during the recovery, more times than there are processes.
    #[error("processes kept dying during the recovery ({0} rounds); the job ends")]
    Unstable(usize),
    /// An MPI call of the recovery failed for another reason than a process failure.
    #[error("recovery: {0}")]
    Mpi(#[from] BridgeError),
}

/// A job communicator of the same size and numbering as before, over live processes.
#[derive(Debug)]
pub(crate) struct NewJob {
    /// The job communicator: rank r is job rank r; `None` at a spare that is still idle.
    pub(crate) job: Option<ffi::MPI_Comm>,
    /// This process's job rank in it.
    pub(crate) rank: Option<usize>,
    /// This process's job rank before the loss (`None`: it was a spare).
    pub(crate) was: Option<usize>,
    /// The job's rank count (unchanged).
    pub(crate) ranks: usize,
    /// The job ranks that were lost, each with the process number (in the communicator of every
    /// process before the loss) of the spare that took it.
    pub(crate) replaced: Vec<(usize, usize)>,
    /// Whether this process is the first of the live ones (it speaks for them).
    pub(crate) first: bool,
    /// How many recoveries this process has taken part in, this one included: the same at
    /// every live process, since every live process takes part in every recovery.
    pub(crate) epoch: u64,
}

impl NewJob {
    /// The job ranks that were lost, in increasing order.
    pub(crate) fn lost(&self) -> Vec<usize> {
        self.replaced.iter().map(|&(rank, _)| rank).collect()
    }
}

/// An error of the recovery, and whether this process is the first live one (so that one line
/// tells it, not one per process).
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) error: RecoveryError,
    pub(crate) first: bool,
}

fn failed(first: bool) -> impl FnOnce(RecoveryError) -> Failed {
    move |error| Failed { error, first }
}

/// Revokes `job` (this process's job communicator, `None` at a spare) and the communicator of
/// every process, then shrinks, agrees and renumbers (collective over every live process).
pub(crate) fn recover(job: Option<ffi::MPI_Comm>) -> Result<NewJob, Failed> {
    super::super::process::RECOVERED.store(true, std::sync::atomic::Ordering::Release);
    let (all, me, roles) = membership();
    revoke(job, all);
    let (alive, dead) = agreed_dead(all, me)?;
    renumber(alive, &dead, me, &roles)
}

/// Revokes `own` (this process's job or holders' communicator, if any) and `all`.
fn revoke(own: Option<ffi::MPI_Comm>, all: ffi::MPI_Comm) {
    // Revoking wakes every process blocked on either communicator; a second revoke by another
    // survivor is harmless, so every survivor does it. Their errors are not acted on: a
    // communicator that is already revoked is what is wanted.
    // SAFETY: both are valid communicators of this process.
    unsafe {
        if let Some(own) = own {
            mpix::MPIX_Comm_revoke(own);
        }
        mpix::MPIX_Comm_revoke(all);
    }
}

/// The recovery's steps from the shrink on, without a revoke, at a process's end
/// (`exit_check.rs`): `Ok(None)` when no process of the job is dead; otherwise the renumbering,
/// so that every live process, a spare that [`recover`]s included, takes the same collective
/// steps from the shrink on.
pub(crate) fn recover_if_lost() -> Result<Option<NewJob>, Failed> {
    let (all, me, roles) = membership();
    let (alive, dead) = agreed_dead(all, me)?;
    if dead.is_empty() {
        return Ok(None);
    }
    super::super::process::RECOVERED.store(true, std::sync::atomic::Ordering::Release);
    renumber(alive, &dead, me, &roles).map(Some)
}

/// What the live processes agreed after a loss during the start-up ([`lost_at_start`]).
#[derive(Debug)]
pub(crate) struct LostAtStart {
    /// The dead processes' numbers in `MPI_COMM_WORLD`.
    pub(crate) dead: Vec<usize>,
    /// How many processes live: the start-up runs again over them if they are enough.
    pub(crate) live: usize,
    /// Whether this process is the first of the live ones (it speaks for them).
    pub(crate) first: bool,
}

/// After a loss during the start-up, before every process knew the job ranks: revokes
/// `holders` (this process's communicator of the rank holders, `None` at a spare) and the
/// communicator of every process, and agrees on the dead (collective over every live process).
/// The communicator of the live processes replaces `all` in the membership, for the start-up
/// to run again over it or for the end of the job.
pub(crate) fn lost_at_start(holders: Option<ffi::MPI_Comm>) -> Result<LostAtStart, Failed> {
    super::super::process::RECOVERED.store(true, std::sync::atomic::Ordering::Release);
    let (all, me, _) = membership();
    revoke(holders, all);
    let (alive, dead) = agreed_dead(all, me)?;
    let first = first_live(&dead, me);
    let on_failure = |e: BridgeError| failed(first)(e.into());
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    let world = unsafe { ffi::RSMPI_COMM_WORLD };
    let dead = translate(all, &dead, world).map_err(on_failure)?;
    let (_, live) = rank_and_size(alive).map_err(on_failure)?;
    members::with(|m| m.expect("the job has its membership").all = alive);
    Ok(LostAtStart { dead, live, first })
}

/// The communicator of every process, this process's number in it and the role table.
fn membership() -> (ffi::MPI_Comm, usize, Roles) {
    members::with(|m| {
        let m = m.expect("the job has its membership");
        (m.all, m.me, m.roles.clone())
    })
}

/// Shrinks `all` into the live processes and agrees on the dead (`me` is this process's number
/// in `all`); a process dying meanwhile starts the round again (collective over every live
/// process; works on a revoked `all`).
fn agreed_dead(all: ffi::MPI_Comm, me: usize) -> Result<(ffi::MPI_Comm, Vec<usize>), Failed> {
    let (_, processes) = rank_and_size(all).map_err(|e| failed(me == 0)(e.into()))?;
    let mut round = 0;
    loop {
        round += 1;
        if round > processes {
            return Err(failed(false)(RecoveryError::Unstable(round - 1)));
        }
        let alive = shrink(all).map_err(|e| failed(false)(e.into()))?;
        let dead = dead_of(all, alive).map_err(|e| failed(false)(e.into()))?;
        let first = first_live(&dead, me);
        kill_at(KillPoint::Agree);
        match agree_on(alive, &dead) {
            Ok(true) => return Ok((alive, dead)),
            Ok(false) => return Err(failed(first)(RecoveryError::Disagreement)),
            // Another process died after the shrink: shrink the original again, which leaves
            // it out too.
            Err(rc) if mpix::is_process_failure(rc) => continue,
            Err(rc) => {
                return Err(failed(first)(
                    check(rc, "MPIX_Comm_agree")
                        .map_err(RecoveryError::from)
                        .unwrap_err(),
                ));
            }
        }
    }
}

/// The new numbering after the agreed loss of `dead` (numbers in the communicator of every
/// process, of which `alive` holds the rest, `me` among them), the new communicators made and
/// kept in the membership (collective over `alive`).
fn renumber(
    alive: ffi::MPI_Comm,
    dead: &[usize],
    me: usize,
    roles: &Roles,
) -> Result<NewJob, Failed> {
    let first = first_live(dead, me);
    let renumbered = roles.renumber(dead).map_err(|e| failed(first)(e.into()))?;
    let new = &renumbered.roles;
    let key = new.all_key(me).expect("a live process has a role");
    let new_all = split(alive, Some(0), key).map_err(|e| failed(first)(e.into()))?;
    let rank = new.rank_of(me);
    let new_job =
        split(alive, rank.map(|_| 0), rank.unwrap_or(0)).map_err(|e| failed(first)(e.into()))?;
    if let (Some(job), Some(r)) = (new_job, rank) {
        let (got, size) = rank_and_size(job).map_err(|e| failed(first)(e.into()))?;
        if (got, size) != (r, new.holders.len()) {
            return Err(failed(first)(RecoveryError::Numbering {
                rank: r,
                got,
                size,
            }));
        }
    }
    let epoch = members::with(|m| {
        let m = m.expect("the job has its membership");
        m.all = new_all.expect("every live process is in it");
        m.me = key;
        m.roles = new.compacted();
        m.epoch += 1;
        m.epoch
    });
    Ok(NewJob {
        job: new_job,
        rank,
        was: roles.rank_of(me),
        ranks: new.holders.len(),
        replaced: renumbered.replaced,
        first,
        epoch,
    })
}

/// Whether `me` is the lowest live process (the dead are `dead`).
fn first_live(dead: &[usize], me: usize) -> bool {
    (0..me).all(|p| dead.contains(&p))
}

/// The live processes of `comm` (collective over them; works on a revoked communicator).
fn shrink(comm: ffi::MPI_Comm) -> Result<ffi::MPI_Comm, BridgeError> {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    let mut alive = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: `comm` is valid; `alive` is written with the new communicator.
    check(
        unsafe { mpix::MPIX_Comm_shrink(comm, &mut alive) },
        "MPIX_Comm_shrink",
    )?;
    // SAFETY: `alive` was just created; ERRORS_RETURN is predefined.
    check(
        unsafe { ffi::MPI_Comm_set_errhandler(alive, ffi::RSMPI_ERRORS_RETURN) },
        "MPI_Comm_set_errhandler(shrunk)",
    )?;
    Ok(alive)
}

/// The numbers in `to` of the processes numbered `numbers` in `from`.
fn translate(
    from: ffi::MPI_Comm,
    numbers: &[usize],
    to: ffi::MPI_Comm,
) -> Result<Vec<usize>, BridgeError> {
    // SAFETY: reading link-time constants of rsmpi's C shim.
    let (mut g_from, mut g_to) = unsafe { (ffi::RSMPI_GROUP_NULL, ffi::RSMPI_GROUP_NULL) };
    // SAFETY: both communicators are valid (a revoked one has its group); each call writes one
    // group handle.
    check(
        unsafe { ffi::MPI_Comm_group(from, &mut g_from) },
        "MPI_Comm_group",
    )?;
    // SAFETY: as above.
    check(
        unsafe { ffi::MPI_Comm_group(to, &mut g_to) },
        "MPI_Comm_group",
    )?;
    let within: Vec<c_int> = numbers.iter().map(|&n| n as c_int).collect();
    let mut out = vec![0 as c_int; numbers.len()];
    // SAFETY: `within` and `out` hold `numbers.len()` ints each; both groups are valid.
    check(
        unsafe {
            ffi::MPI_Group_translate_ranks(
                g_from,
                within.len() as c_int,
                within.as_ptr(),
                g_to,
                out.as_mut_ptr(),
            )
        },
        "MPI_Group_translate_ranks",
    )?;
    for g in [&mut g_from, &mut g_to] {
        // SAFETY: each group was made above and is freed once.
        check(unsafe { ffi::MPI_Group_free(g) }, "MPI_Group_free")?;
    }
    Ok(out.into_iter().map(|p| p as usize).collect())
}

/// The processes of `all` (by number there) that are not in `alive`.
fn dead_of(all: ffi::MPI_Comm, alive: ffi::MPI_Comm) -> Result<Vec<usize>, BridgeError> {
    // SAFETY: reading link-time constants of rsmpi's C shim.
    let (mut g_all, mut g_alive, mut g_dead) = unsafe {
        (
            ffi::RSMPI_GROUP_NULL,
            ffi::RSMPI_GROUP_NULL,
            ffi::RSMPI_GROUP_NULL,
        )
    };
    // SAFETY: both communicators are valid; each call writes one group handle.
    check(
        unsafe { ffi::MPI_Comm_group(all, &mut g_all) },
        "MPI_Comm_group",
    )?;
    // SAFETY: as above.
    check(
        unsafe { ffi::MPI_Comm_group(alive, &mut g_alive) },
        "MPI_Comm_group",
    )?;
    // SAFETY: both groups were just made; `g_dead` is written.
    check(
        unsafe { ffi::MPI_Group_difference(g_all, g_alive, &mut g_dead) },
        "MPI_Group_difference",
    )?;
    let mut n: c_int = 0;
    // SAFETY: `g_dead` is valid; one int written.
    check(
        unsafe { ffi::MPI_Group_size(g_dead, &mut n) },
        "MPI_Group_size",
    )?;
    let within: Vec<c_int> = (0..n).collect();
    let mut numbers = vec![0 as c_int; n as usize];
    // SAFETY: `within` and `numbers` hold `n` ints each; both groups are valid.
    check(
        unsafe {
            ffi::MPI_Group_translate_ranks(g_dead, n, within.as_ptr(), g_all, numbers.as_mut_ptr())
        },
        "MPI_Group_translate_ranks",
    )?;
    for g in [&mut g_all, &mut g_alive, &mut g_dead] {
        // SAFETY: each group was made above and is freed once.
        check(unsafe { ffi::MPI_Group_free(g) }, "MPI_Group_free")?;
    }
    Ok(numbers.into_iter().map(|p| p as usize).collect())
}

/// Whether every member of `alive` computed the dead set `dead`, by three agreements: on its
/// digest, on the digest's complement (their ANDs equal both at every member only if all
/// offered the same), and on the verdict, so that all decide alike. `Err` is the return code
/// of a failed agreement.
fn agree_on(alive: ffi::MPI_Comm, dead: &[usize]) -> Result<bool, c_int> {
    const MASK: c_int = 0x3fff_ffff;
    let h = digest(dead) as c_int;
    let offers = [h, !h & MASK];
    let mut same = true;
    for offer in offers {
        let mut flag = offer;
        // SAFETY: `alive` is valid; `flag` is one int, read and written.
        let rc = unsafe { mpix::MPIX_Comm_agree(alive, &mut flag) };
        if rc != ffi::MPI_SUCCESS as c_int {
            return Err(rc);
        }
        same &= flag == offer;
    }
    let mut verdict = c_int::from(same);
    // SAFETY: as above.
    let rc = unsafe { mpix::MPIX_Comm_agree(alive, &mut verdict) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return Err(rc);
    }
    Ok(verdict == 1)
}

/// `MPI_Comm_split(comm, color, key)`, `None` as color for `MPI_UNDEFINED` (then no
/// communicator comes back).
fn split(
    comm: ffi::MPI_Comm,
    color: Option<c_int>,
    key: usize,
) -> Result<Option<ffi::MPI_Comm>, BridgeError> {
    // SAFETY: reading link-time constants of rsmpi's C shim.
    let (mut out, undefined) = unsafe { (ffi::RSMPI_COMM_NULL, ffi::RSMPI_UNDEFINED) };
    // SAFETY: `comm` is valid; `out` is written.
    check(
        unsafe { ffi::MPI_Comm_split(comm, color.unwrap_or(undefined), key as c_int, &mut out) },
        "MPI_Comm_split(renumbered)",
    )?;
    if color.is_none() {
        return Ok(None);
    }
    // SAFETY: `out` was just created; ERRORS_RETURN is predefined.
    check(
        unsafe { ffi::MPI_Comm_set_errhandler(out, ffi::RSMPI_ERRORS_RETURN) },
        "MPI_Comm_set_errhandler(renumbered)",
    )?;
    Ok(Some(out))
}
