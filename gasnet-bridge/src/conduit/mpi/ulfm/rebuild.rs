//! The conduit rebuilt over the new job communicator after a recovery (`RECOVERY.md`,
//! "Rebuilding the conduit"): a survivor's world rebuilt in place around the parts it keeps
//! (its segments stay where they are), and a replacement's world made around a segment of its
//! own, through the same collective steps, so that both meet in `JobParts::build`.

use std::ffi::c_int;
use std::rc::Rc;

use ::mpi::ffi;

use crate::config::LaunchConfig;
use crate::counters::WriteCounting;
use crate::error::BridgeError;
use crate::membarrier::Scope;
use crate::recovered::Recovered;
use crate::topology::Topology;

use super::super::calls::{allgather_text, check, uint8};
use super::super::inbox::RingLayouts;
use super::super::pending::Link;
use super::super::process;
use super::super::setup::{Watched, host_comm, pshm_wanted};
use super::super::window::{HostMapping, HostSegments, map_host};
use super::super::world::{JobParts, Kept, MpiWorld};
use super::deadline::Deadline;
use super::kill_points::{KillPoint, kill_at};
use super::mpix;
use super::recovery::{NewJob, recover};
use super::unrecovered::{
    UNCAUGHT, end_failed_rebuild, end_failed_recovery, end_recovered, go_on, say_place,
};

/// Offered in place of a write-counting mode by a process that adopts the survivors'.
const ADOPT: u64 = u64::MAX;

/// A write-counting mode as a number every process can compare.
fn counting_code(c: WriteCounting) -> u64 {
    match c {
        WriteCounting::Off => 0,
        WriteCounting::On => 1,
        WriteCounting::Switched => 2,
    }
}

fn counting_of(code: u64) -> Option<WriteCounting> {
    match code {
        0 => Some(WriteCounting::Off),
        1 => Some(WriteCounting::On),
        2 => Some(WriteCounting::Switched),
        _ => None,
    }
}

/// What one process brings to the rebuilt job.
#[derive(Debug, Clone, Copy)]
struct Offer {
    segment_len: usize,
    /// Its write-counting mode (a survivor's mappings were made with it), or [`ADOPT`].
    counting: u64,
    /// Its node: ranks of one node map each other's segments. A survivor's node in the old
    /// topology; a replacement's a number no other rank offers.
    node: u64,
}

/// The rebuilt job as every process of the new job communicator sees it.
struct Agreed {
    counting: WriteCounting,
    topology: Topology,
    watched: Watched,
}

/// Node sizes from every rank's node number: each run of equal numbers is a node, so that
/// ranks stay contiguous per node (a replacement cuts its host's range around it).
fn node_sizes(nodes: &[u64]) -> Vec<usize> {
    let mut sizes: Vec<usize> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if i > 0 && nodes[i - 1] == *n {
            *sizes.last_mut().expect("a node so far") += 1;
        } else {
            sizes.push(1);
        }
    }
    sizes
}

/// Exchanges every rank's [`Offer`] and host name over the new job communicator `comm`
/// (collective) and checks them: one segment length, one counting mode among the survivors.
fn agree(
    comm: ffi::MPI_Comm,
    rank: usize,
    ranks: usize,
    offer: Offer,
) -> Result<Agreed, BridgeError> {
    let mine = [offer.segment_len as u64, offer.counting, offer.node];
    let mut every = vec![[0u64; 3]; ranks];
    // SAFETY: 24 bytes sent and 24 per rank of `comm` (which has `ranks`: the recovery
    // checked its size) received; both buffers live across this blocking call.
    check(
        unsafe {
            ffi::MPI_Allgather(
                mine.as_ptr().cast(),
                24,
                uint8(),
                every.as_mut_ptr().cast(),
                24,
                uint8(),
                comm,
            )
        },
        "MPI_Allgather(rebuilt job)",
    )?;
    if let Some(other) = (0..ranks).find(|&r| every[r][0] != every[0][0]) {
        return Err(BridgeError::Conduit(format!(
            "rank 0 has a segment of {} bytes and rank {other} one of {} bytes: every process \
             must run with the same PGAS_SEGMENT_MB",
            every[0][0], every[other][0]
        )));
    }
    let modes: Vec<u64> = every.iter().map(|o| o[1]).filter(|&c| c != ADOPT).collect();
    let counting = match modes.first().and_then(|&c| counting_of(c)) {
        Some(c) if modes.iter().all(|&m| m == modes[0]) => c,
        _ => {
            return Err(BridgeError::Conduit(format!(
                "the survivors offer the write-counting modes {modes:?}: one mode, the one \
                 every mapping was made with, was expected"
            )));
        }
    };
    let nodes: Vec<u64> = every.iter().map(|o| o[2]).collect();
    const NAME: usize = ffi::MPI_MAX_PROCESSOR_NAME as usize;
    let names = allgather_text(
        comm,
        ranks,
        &process::processor_name(),
        NAME,
        "MPI_Allgather(host names, rebuilt job)",
    )?;
    let host_processes = names.iter().filter(|n| **n == names[rank]).count();
    Ok(Agreed {
        counting,
        topology: Topology::from_node_sizes(&node_sizes(&nodes)),
        watched: Watched {
            names,
            host_processes,
        },
    })
}

/// `Endpoint::recover` on a survivor, after it caught a peer's failure: the recovery
/// (revoke, shrink, agree, renumber), then the rebuild in place of `world`, and a new `link`
/// for the handles of the rebuilt job. A process lost during the rebuild runs the recovery
/// again (`RECOVERY.md`, "A loss during the rebuild"). Ends the process, the first live one
/// printing one line, when the job cannot go on.
pub(crate) fn rebuild_survivor(world: &mut Rc<MpiWorld>, link: &mut Rc<Link>) -> Recovered {
    let deadline = Deadline::arm();
    // The node this rank offers in every round: the one before the loss, not a round's
    // topology that only some processes may have set before the round failed.
    let old_node = world.kept.topology.node_of(world.kept.rank) as u64;
    let mut job = world.job.comm;
    loop {
        let new = match recover(Some(job)) {
            Ok(r) => r,
            Err(f) => end_failed_recovery(f),
        };
        if !go_on(true) {
            end_recovered(&new, UNCAUGHT);
        }
        let comm = new.job.expect("a survivor holds a rank");
        // 1. Every handle of the old job answers `WorldRebuilt` from now on, without touching it.
        link.invalidate_rebuilt(new.lost());
        // With the link cut, the driver holds the world's only reference.
        let Some(w) = Rc::get_mut(world) else {
            end_failed_rebuild(
                &new,
                &BridgeError::Conduit(
                    "the old world is still referenced outside the driver (a bug of the conduit)"
                        .into(),
                ),
            )
        };
        let mut made = Vec::new();
        let built = rebuild_in_place(w, comm, old_node, &mut made);
        match settle(comm, built.is_ok(), &made) {
            Settled::Built => {
                let (parts, lost) = built.expect("every process built its part");
                let old = std::mem::replace(&mut w.job, parts);
                // Its MPI objects live on a revoked communicator with a dead member (freeing
                // them is collective), and MPI may still complete its posted receives into
                // its buffers.
                std::mem::forget(old);
                *link = Link::new(world.clone());
                mpix::forget_failure();
                say_place(&new);
                deadline.disarm();
                return Recovered {
                    rank: world.rank(),
                    epoch: new.epoch,
                    lost,
                    replacement: false,
                };
            }
            Settled::AnotherLoss => {
                if let Ok((parts, _)) = built {
                    abandon(&parts);
                    std::mem::forget(parts);
                }
                job = comm;
            }
            Settled::Failed(e) => end_failed_rebuild(&new, &built.err().unwrap_or(e)),
        }
    }
}

/// How a round of the rebuild ended, the same at every process of the new job ([`settle`]).
enum Settled {
    /// Every process built its part: the rebuilt job goes on.
    Built,
    /// A process died during the round: the recovery runs again from the revoke, the
    /// replacements of this round building their worlds anew.
    AnotherLoss,
    /// No process died, but some process could not build its part (this process's error is
    /// the caller's, where it has one).
    Failed(BridgeError),
}

/// Ends a round of the rebuild over the new job communicator `comm` with one agreement,
/// this process offering whether it built its part (`ok`). A process whose part failed first
/// revokes `comm` and the round's other communicators (`made`), so that no process waits for
/// it in a collective; ULFM's agreement then gives every live process the same outcome, also
/// when a process died during the round (collective over `comm`).
fn settle(comm: ffi::MPI_Comm, ok: bool, made: &[ffi::MPI_Comm]) -> Settled {
    if !ok {
        for &c in std::iter::once(&comm).chain(made) {
            // SAFETY: a communicator of this round, valid at this process. A second revoke
            // by another process is harmless; its error is not acted on.
            unsafe { mpix::MPIX_Comm_revoke(c) };
        }
    }
    let mut flag = c_int::from(ok);
    // SAFETY: `comm` is valid (a revoked communicator can agree); `flag` is one int, read and
    // written.
    let rc = unsafe { mpix::MPIX_Comm_agree(comm, &mut flag) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return if mpix::is_process_failure(rc) {
            Settled::AnotherLoss
        } else {
            Settled::Failed(check(rc, "MPIX_Comm_agree(rebuilt job)").unwrap_err())
        };
    }
    if flag == 1 {
        Settled::Built
    } else {
        Settled::Failed(BridgeError::Conduit(
            "another process could not rebuild its part of the job".into(),
        ))
    }
}

/// Leaves job parts that a failed round built or that a rebuild replaces: no MPI call for
/// them any more, their watchdog stopped without a word to its neighbours. The caller leaks
/// them (freeing their MPI objects is collective, and a member may be dead).
pub(super) fn abandon(job: &JobParts) {
    job.ended.set(true);
    if let Some(dog) = job.watchdog.borrow_mut().take() {
        dog.abandon();
    }
    job.shared.disarm();
}

/// The job ranks held by processes that have no segment from before: every process of the
/// new job communicator `comm` (`ranks` of them) says whether it is such a *fresh* process (a
/// spare that took a rank, in this round or in a round that failed), so that every process
/// rebuilds for the same lost ranks (collective over `comm`).
fn fresh_ranks(comm: ffi::MPI_Comm, ranks: usize, fresh: bool) -> Result<Vec<usize>, BridgeError> {
    let mine = u8::from(fresh);
    let mut every = vec![0u8; ranks];
    // SAFETY: one byte sent and one per rank of `comm` (which has `ranks`: the recovery
    // checked its size) received; both buffers live across this blocking call.
    check(
        unsafe {
            ffi::MPI_Allgather(
                (&raw const mine).cast(),
                1,
                uint8(),
                every.as_mut_ptr().cast(),
                1,
                uint8(),
                comm,
            )
        },
        "MPI_Allgather(fresh ranks)",
    )?;
    Ok((0..ranks).filter(|&r| every[r] != 0).collect())
}

/// Steps 2 to 5 of the rebuild on a survivor (`RECOVERY.md`, "The rebuild, in order"), over
/// the new job communicator `comm`: the kept parts fixed in place, and the new job parts and
/// the lost ranks returned (installed once every process built its own). Communicators the
/// round makes go into `made`.
fn rebuild_in_place(
    w: &mut MpiWorld,
    comm: ffi::MPI_Comm,
    old_node: u64,
    made: &mut Vec<ffi::MPI_Comm>,
) -> Result<(JobParts, Vec<usize>), BridgeError> {
    kill_at(KillPoint::Rebuild);
    // 2. The old job ends: no MPI call for it any more, its watchdog tree left without a BYE.
    abandon(&w.job);
    let lost = fresh_ranks(comm, w.kept.ranks, false)?;
    let host = Host::of(comm, w.kept.rank, &lost)?;
    made.push(host.comm);
    let node = host.node(Some(old_node))?;
    let counting = w.write_counting();
    let agreed = agree(
        comm,
        w.kept.rank,
        w.kept.ranks,
        Offer {
            segment_len: w.kept.segment_len,
            counting: counting_code(counting),
            node,
        },
    )?;
    kill_at(KillPoint::RebuildLate);
    w.kept.topology = agreed.topology;
    let mut scope = w.job.counting.scope();
    // 3. The kept parts: no mapping of a dead rank (nor of a replacement of a failed round).
    w.kept.host.after_loss(&lost);
    // 4. The rings: this rank's inbox emptied for new claims, none toward the dead.
    // SAFETY: every live process of the host is inside this round of the rebuild (each
    // unwound out of its operations before it entered the shrink, which completed, and a
    // round that failed ended with an agreement of every live process before this one
    // began), so nobody writes into this inbox until `JobParts::build`'s barrier below; the
    // old job's ring views, and a failed round's, are leaked and never used again.
    w.kept.rings = unsafe { w.kept.rings.after_loss(&lost) };
    if host.joined {
        // A replacement joined this host: its piece mapped here, this process's by it
        // (`RECOVERY.md`, "What each part becomes").
        let (inboxes, ring_per_sender) =
            w.kept
                .host
                .join(host.comm, &host.ranks, &lost, w.kept.segment_len, counting)?;
        for (rank, inbox) in inboxes {
            w.kept.rings.outboxes[rank] = Some(inbox);
        }
        w.kept.rings.ring_per_sender = ring_per_sender;
        if host.ranks.len() > 1 {
            scope = Scope::Host;
        }
    } else {
        made.pop();
        host.free()?;
    }
    // 5. New job parts over the new communicator: no RMA window (RMA to unmapped ranks as
    // active messages), the counting switch over the same scope as before (the host's when
    // this process now maps another's segment).
    let job = JobParts::build(comm, &w.kept, &agreed.watched, None, scope)?;
    Ok((job, lost))
}

/// This process's host in the rebuilt job: its processes' communicator and job ranks, and
/// whether a replacement joined it (then the host's pieces are exchanged again, so that the
/// replacement maps its host's segments and they map its own).
struct Host {
    comm: ffi::MPI_Comm,
    ranks: Vec<usize>,
    joined: bool,
}

impl Host {
    /// The host of job rank `rank` over the new job communicator `comm` (collective), the
    /// ranks `lost` taken by replacements. Without shared memory no window is made again.
    fn of(comm: ffi::MPI_Comm, rank: usize, lost: &[usize]) -> Result<Host, BridgeError> {
        let (host, ranks) = host_comm(comm, rank)?;
        // The same at every process of the host: `ranks` came from one allgather over it.
        let joined = pshm_wanted() && ranks.iter().any(|r| lost.contains(r));
        Ok(Host {
            comm: host,
            ranks,
            joined,
        })
    }

    /// The node this process offers for the rebuilt topology: a survivor its node before
    /// (`old`); a replacement that joined a host with survivors the least of theirs, so that
    /// it is in their node; otherwise a number no other rank offers (collective over the host
    /// when a replacement joined it).
    fn node(&self, old: Option<u64>) -> Result<u64, BridgeError> {
        let mine = old.unwrap_or(u64::MAX);
        if !self.joined {
            return Ok(mine);
        }
        let mut least = 0u64;
        // SAFETY: one u64 in and out, both live across this blocking collective over the
        // host's communicator, which every process of the host enters (`joined` is the same
        // at all of them).
        check(
            unsafe {
                ffi::MPI_Allreduce(
                    (&raw const mine).cast(),
                    (&raw mut least).cast(),
                    1,
                    ffi::RSMPI_UINT64_T,
                    ffi::RSMPI_MIN,
                    self.comm,
                )
            },
            "MPI_Allreduce(host node)",
        )?;
        Ok(old.unwrap_or(least))
    }

    /// The host's new window (collective over it): every process's piece, every segment
    /// zeroed and mapped by every process of the host.
    fn map(
        &self,
        rank: usize,
        ranks: usize,
        segment_len: usize,
        counting: WriteCounting,
    ) -> Result<HostMapping, BridgeError> {
        map_host(
            self.comm,
            &self.ranks,
            rank,
            ranks,
            segment_len,
            true,
            counting,
            None,
        )
    }

    /// Frees the host's communicator when no window is made over it.
    fn free(mut self) -> Result<(), BridgeError> {
        // SAFETY: `comm` was made by `of` and is used by nothing else.
        check(
            unsafe { ffi::MPI_Comm_free(&mut self.comm) },
            "MPI_Comm_free(host, rebuilt job)",
        )
    }
}

/// A spare that took a lost rank in the recovery `new`: its world over the new job
/// communicator, with a segment of its own (zeroed), built with the survivors' rebuild. A
/// process lost meanwhile runs the recovery again, this one keeping its rank and building
/// its world anew. Ends the process when the job cannot go on, as the survivors do.
pub(crate) fn replacement(
    config: &LaunchConfig,
    mut new: NewJob,
    deadline: Deadline,
) -> (Rc<MpiWorld>, Recovered) {
    loop {
        let comm = new.job.expect("a replacement holds a rank");
        let mut made = Vec::new();
        let built = build_replacement(config, &new, &mut made);
        match settle(comm, built.is_ok(), &made) {
            Settled::Built => {
                let (world, lost) = built.expect("every process built its part");
                mpix::forget_failure();
                say_place(&new);
                deadline.disarm();
                let recovered = Recovered {
                    rank: world.rank(),
                    epoch: new.epoch,
                    lost,
                    replacement: true,
                };
                return (Rc::new(world), recovered);
            }
            Settled::AnotherLoss => {
                if let Ok((world, _)) = built {
                    abandon(&world.job);
                    std::mem::forget(world);
                }
                new = match recover(Some(comm)) {
                    Ok(r) => r,
                    Err(f) => end_failed_recovery(f),
                };
                if !go_on(true) {
                    end_recovered(&new, UNCAUGHT);
                }
            }
            Settled::Failed(e) => end_failed_rebuild(&new, &built.err().unwrap_or(e)),
        }
    }
}

/// A replacement's world over the new job communicator of `new`, and the lost ranks;
/// communicators the round makes go into `made`.
fn build_replacement(
    config: &LaunchConfig,
    new: &NewJob,
    made: &mut Vec<ffi::MPI_Comm>,
) -> Result<(MpiWorld, Vec<usize>), BridgeError> {
    kill_at(KillPoint::Replace);
    let comm = new.job.expect("a replacement holds a rank");
    let rank = new.rank.expect("a replacement holds a rank");
    let ranks = new.ranks;
    let segment_len = config.segment_bytes;
    let lost = fresh_ranks(comm, ranks, true)?;
    let host = Host::of(comm, rank, &lost)?;
    made.push(host.comm);
    let node = match host.node(None)? {
        // Alone on its host, or without shared memory: a node of its own.
        u64::MAX => u64::MAX - rank as u64,
        node => node,
    };
    let agreed = agree(
        comm,
        rank,
        ranks,
        Offer {
            segment_len,
            counting: ADOPT,
            node,
        },
    )?;
    let (host, rings, scope) = if host.joined {
        // With shared memory it maps its host's pieces, and they its own (`rebuild_in_place`).
        let mut mapping = host.map(rank, ranks, segment_len, agreed.counting)?;
        let rings = mapping.take_rings();
        let scope = if host.ranks.len() > 1 {
            Scope::Host
        } else {
            Scope::Thread
        };
        let segments = HostSegments::new(rank, host.comm, host.ranks, mapping);
        (segments, rings, scope)
    } else {
        made.pop();
        host.free()?;
        // Without shared memory its segment is its own, in a window of this process alone.
        let alone = self_comm()?;
        let mapping = map_host(
            alone,
            &[rank],
            rank,
            ranks,
            segment_len,
            false,
            agreed.counting,
            None,
        )?;
        let segments = HostSegments::new(rank, alone, vec![rank], mapping);
        (segments, RingLayouts::none(ranks), Scope::Thread)
    };
    let kept = Kept {
        rank,
        ranks,
        topology: agreed.topology,
        segment_len,
        host,
        rings,
    };
    let job = JobParts::build(comm, &kept, &agreed.watched, None, scope)?;
    Ok((MpiWorld::from_parts(kept, job), lost))
}

/// A communicator of this process alone (a duplicate of `MPI_COMM_SELF`, which teardown may
/// free), errors returned.
fn self_comm() -> Result<ffi::MPI_Comm, BridgeError> {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    let mut comm = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: MPI is initialized; `comm` is written with the new communicator.
    check(
        unsafe { ffi::MPI_Comm_dup(ffi::RSMPI_COMM_SELF, &mut comm) },
        "MPI_Comm_dup(MPI_COMM_SELF)",
    )?;
    // SAFETY: `comm` was just created; ERRORS_RETURN is predefined.
    check(
        unsafe { ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN) },
        "MPI_Comm_set_errhandler(self)",
    )?;
    Ok(comm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_cuts_its_hosts_range() {
        assert_eq!(node_sizes(&[0, 0, u64::MAX - 2, 0]), vec![2, 1, 1]);
        assert_eq!(node_sizes(&[u64::MAX, 0, 0, 0]), vec![1, 3]);
        assert_eq!(node_sizes(&[0, 1, 2, 3]), vec![1, 1, 1, 1]);
    }

    #[test]
    fn counting_modes_round_trip() {
        for c in [
            WriteCounting::Off,
            WriteCounting::On,
            WriteCounting::Switched,
        ] {
            assert_eq!(counting_of(counting_code(c)), Some(c));
        }
        assert_eq!(counting_of(ADOPT), None);
    }
}
