//! Setting a job up: ranks numbered host by host, the job's communicators, the shared memory,
//! the watchdog (the kept parts), then the job parts over the job's communicator.
//!
//! `MpiWorld::new` and `JobParts::build` are here because setting up spans every part: the
//! RMA window may hold the segments the host mapping then uses, and the job parts are built
//! from what the host mapping found.

use std::cell::{Cell, RefCell};
use std::ffi::c_int;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ::mpi::ffi;

use crate::config::LaunchConfig;
use crate::counters::{WriteCounting, effective_counting};
use crate::error::BridgeError;
use crate::membarrier::Scope;
use crate::sleep::Sleeper;
use crate::topology::Topology;

use super::calls::{allgather_text, check, uint8};
use super::counting::CountingSwitch;
use super::emulated_hosts;
use super::inbox::{Inbox, Outboxes};
use super::process::{self, JOB_ACTIVE};
use super::rma_window::{Flavor, RmaWindow};
use super::slots::Slots;
use super::state::Protocol;
use super::watchdog::{Shared, Watchdog};
use super::window::{HostSegments, map_host};
use super::wire::EAGER;
use super::world::{JobParts, Kept, MpiWorld};

/// Where the processes of `MPI_COMM_WORLD` run, and the job numbering derived from it.
struct Hosts {
    /// Host name of each world rank.
    names: Vec<String>,
    /// World ranks in job order: host by host, world order within a host.
    order: Vec<usize>,
    /// Ranks on each host, in the hosts' order of first appearance.
    sizes: Vec<usize>,
}

impl Hosts {
    /// Gathers every process's host name over `world` (collective).
    fn gather(world: ffi::MPI_Comm, wsize: usize) -> Result<Hosts, BridgeError> {
        const NAME: usize = ffi::MPI_MAX_PROCESSOR_NAME as usize;
        let names = allgather_text(
            world,
            wsize,
            &process::processor_name(),
            NAME,
            "MPI_Allgather(host names)",
        )?;
        let mut hosts: Vec<&str> = Vec::new();
        let host_of: Vec<usize> = names
            .iter()
            .map(|n| match hosts.iter().position(|h| h == n) {
                Some(i) => i,
                None => {
                    hosts.push(n);
                    hosts.len() - 1
                }
            })
            .collect();
        let mut order: Vec<usize> = (0..wsize).collect();
        order.sort_by_key(|&w| (host_of[w], w));
        let sizes = (0..hosts.len())
            .map(|h| host_of.iter().filter(|&&x| x == h).count())
            .collect();
        Ok(Hosts {
            names,
            order,
            sizes,
        })
    }

    /// The job rank of world rank `wrank`.
    fn job_rank(&self, wrank: usize) -> usize {
        self.order
            .iter()
            .position(|&w| w == wrank)
            .expect("own rank")
    }

    /// The host name of every job rank, in job order.
    fn by_job_rank(&self) -> Vec<String> {
        self.order.iter().map(|&w| self.names[w].clone()).collect()
    }
}

/// This process's rank in `comm` and the size of `comm`.
fn rank_and_size(comm: ffi::MPI_Comm) -> Result<(usize, usize), BridgeError> {
    let (mut size, mut rank): (c_int, c_int) = (0, 0);
    // SAFETY: `comm` is a valid communicator; each call writes one int.
    check(
        unsafe { ffi::MPI_Comm_size(comm, &mut size) },
        "MPI_Comm_size",
    )?;
    // SAFETY: as above.
    check(
        unsafe { ffi::MPI_Comm_rank(comm, &mut rank) },
        "MPI_Comm_rank",
    )?;
    Ok((rank as usize, size as usize))
}

/// The job communicator: `world` renumbered with `key`, errors returned (collective).
fn job_comm(world: ffi::MPI_Comm, key: usize) -> Result<ffi::MPI_Comm, BridgeError> {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    let mut comm = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: `world` is valid; `comm` is written with the new communicator.
    check(
        unsafe { ffi::MPI_Comm_split(world, 0, key as c_int, &mut comm) },
        "MPI_Comm_split",
    )?;
    // SAFETY: `comm` was just created; ERRORS_RETURN is a predefined handler.
    check(
        unsafe { ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN) },
        "MPI_Comm_set_errhandler",
    )?;
    Ok(comm)
}

/// Whether the ranks of a host map each other's segments (`PGAS_MPI_PSHM`, on unless `0`).
pub(super) fn pshm_wanted() -> bool {
    std::env::var("PGAS_MPI_PSHM").map_or(true, |v| v.trim() != "0")
}

/// The host's shared-memory communicator, and the job rank of each of its processes.
pub(super) fn host_comm(
    comm: ffi::MPI_Comm,
    rank: usize,
) -> Result<(ffi::MPI_Comm, Vec<usize>), BridgeError> {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    let mut node_comm = unsafe { ffi::RSMPI_COMM_NULL };
    match emulated_hosts::this_host().map_err(BridgeError::Conduit)? {
        // SAFETY: `comm` is valid; `node_comm` is written with the new communicator.
        Some(host) => check(
            unsafe { ffi::MPI_Comm_split(comm, host as c_int, rank as c_int, &mut node_comm) },
            "MPI_Comm_split(emulated host)",
        )?,
        // SAFETY: as above.
        None => check(
            unsafe {
                ffi::MPI_Comm_split_type(
                    comm,
                    ffi::RSMPI_COMM_TYPE_SHARED,
                    rank as c_int,
                    ffi::RSMPI_INFO_NULL,
                    &mut node_comm,
                )
            },
            "MPI_Comm_split_type",
        )?,
    }
    let (_, node_size) = rank_and_size(node_comm)?;
    let mine = rank as u64;
    let mut node_ranks = vec![0u64; node_size];
    // SAFETY: one u64 sent and one u64 per process of `node_comm` received; both buffers
    // live across this blocking call.
    check(
        unsafe {
            ffi::MPI_Allgather(
                (&mine as *const u64).cast(),
                8,
                uint8(),
                node_ranks.as_mut_ptr().cast(),
                8,
                uint8(),
                node_comm,
            )
        },
        "MPI_Allgather(node ranks)",
    )?;
    Ok((
        node_comm,
        node_ranks.into_iter().map(|r| r as usize).collect(),
    ))
}

/// The write-counting mode of the job (collective): [`WriteCounting::Switched`] only if every
/// process could register for the switch's barrier over `scope`, else [`WriteCounting::On`]
/// everywhere (a process that cannot make writers fence must see every write counted).
fn agree_counting(
    comm: ffi::MPI_Comm,
    wanted: WriteCounting,
    scope: Scope,
) -> Result<WriteCounting, BridgeError> {
    if wanted != WriteCounting::Switched {
        return Ok(wanted);
    }
    let refuses = u64::from(effective_counting(wanted, scope) != WriteCounting::Switched);
    let mut any = 0u64;
    // SAFETY: one u64 in and out, both live across this blocking collective.
    check(
        unsafe {
            ffi::MPI_Allreduce(
                (&raw const refuses).cast(),
                (&raw mut any).cast(),
                1,
                ffi::RSMPI_UINT64_T,
                ffi::RSMPI_MAX,
                comm,
            )
        },
        "MPI_Allreduce(write counting)",
    )?;
    Ok(if any == 0 {
        WriteCounting::Switched
    } else {
        WriteCounting::On
    })
}

impl MpiWorld {
    /// Sets up a job over every process of `members` (collective): `MPI_COMM_WORLD`, or its
    /// processes that hold ranks when some are spares. MPI is initialized.
    pub(super) fn new(
        config: &LaunchConfig,
        members: ffi::MPI_Comm,
    ) -> Result<Rc<MpiWorld>, BridgeError> {
        let world = members;
        let (wrank, ranks) = rank_and_size(world)?;
        // Ranks are numbered host by host, so each host is a contiguous range of ranks.
        let hosts = Hosts::gather(world, ranks)?;
        let comm = job_comm(world, hosts.job_rank(wrank))?;
        let (rank, _) = rank_and_size(comm)?;
        let (node_comm, node_ranks) = host_comm(comm, rank)?;
        let segment_len = config.segment_bytes;
        let pshm = pshm_wanted();
        // Whether this process maps any segment but its own, and reaches some rank through MPI.
        let alone = !pshm || node_ranks.len() == 1;
        let needs = ranks > node_ranks.len() || (!pshm && ranks > 1);
        // Processes of this host write into each other's segments and count there; without
        // shared memory every write into a segment is applied by its own rank's thread.
        let counting_scope = if alone { Scope::Thread } else { Scope::Host };
        let write_counting = agree_counting(comm, config.write_counting, counting_scope)?;
        let flavor = RmaWindow::agree(comm, ranks, needs, alone, write_counting)?;
        let (mut rma, own_segment) = match flavor {
            Some(Flavor::Allocate) => {
                let (w, base) = RmaWindow::allocate(comm, ranks, segment_len)?;
                (Some(w), Some(base))
            }
            _ => (None, None),
        };
        let mut host = map_host(
            node_comm,
            &node_ranks,
            rank,
            ranks,
            segment_len,
            pshm,
            write_counting,
            own_segment,
        )?;
        if flavor == Some(Flavor::Create) {
            let own = host.mapped[rank].as_ref().expect("own segment is mapped");
            rma = Some(RmaWindow::create(
                comm,
                ranks,
                own.segment.base(),
                segment_len,
            )?);
        }

        let rings = host.take_rings();

        let kept = Kept {
            rank,
            ranks,
            // Without shared memory the ranks of a host reach each other as across hosts,
            // so each is a node of its own: the topology (pgas's local_team, is_local) must
            // name only ranks whose segments this process has mapped.
            topology: if pshm {
                Topology::from_node_sizes(&hosts.sizes)
            } else {
                Topology::new(ranks, 1)
            },
            segment_len,
            host: HostSegments::new(rank, node_comm, node_ranks.clone(), host),
            rings,
        };
        let watched = Watched {
            names: hosts.by_job_rank(),
            host_processes: node_ranks.len(),
        };
        let job = JobParts::build(comm, &kept, &watched, rma, counting_scope)?;
        Ok(Rc::new(MpiWorld::from_parts(kept, job)))
    }
}

/// What the watchdog tree of a job is started from.
pub(super) struct Watched {
    /// The host name of every job rank, in job order.
    pub(super) names: Vec<String>,
    /// The processes of this host, which share its cores.
    pub(super) host_processes: usize,
}

impl JobParts {
    /// The parts of a job over `comm` (collective), beside the `kept` ones: the watchdog tree
    /// over the processes `watched` names, with a fresh failure state, the window `rma` (made
    /// over the kept segments), rings claimed in the kept inboxes, the counting switch over
    /// `counting_scope`, the posted receives and a fresh protocol state. Ends with a barrier,
    /// after which every rank may send to every other.
    ///
    /// This is the step a rebuild repeats over a new communicator, with the kept parts of the
    /// old world (`../README.md`, "Rebuilding a world").
    pub(super) fn build(
        comm: ffi::MPI_Comm,
        kept: &Kept,
        watched: &Watched,
        rma: Option<RmaWindow>,
        counting_scope: Scope,
    ) -> Result<JobParts, BridgeError> {
        let (rank, ranks) = (kept.rank, kept.ranks);
        let rings = kept.rings.clone();
        // The processes of this host share its cores: with more of them than cores, a wait
        // spins 20 rounds, not 2000 (a spinning process holds the core the one it waits for
        // needs). Counted against the host's processors, not this process's affinity, which
        // the launcher may have narrowed to one core.
        let shared = Arc::new(Shared::with_sleeper(Sleeper::with_spin(
            Sleeper::spin_rounds_for_host(watched.host_processes),
        )));
        shared.sleeper.register_current();
        let dog = Watchdog::start(comm, rank, &watched.names, shared.clone())?;
        let posted = Slots::post(comm).and_then(|slots| {
            // SAFETY: `comm` is the job communicator, valid until teardown.
            check(unsafe { ffi::MPI_Barrier(comm) }, "MPI_Barrier").map(|()| slots)
        });
        let slots = match posted {
            Ok(slots) => slots,
            Err(e) => {
                // A failed set-up must not leave the tree's thread watching a job that is gone
                // (it would end the process when a neighbour's link closes).
                dog.abandon();
                return Err(e);
            }
        };
        JOB_ACTIVE.store(true, Ordering::Release);
        // Senders of this host that found every ring of an inbox taken use MPI too.
        let mpi_peers =
            !rings.ring_per_sender || (0..ranks).any(|r| r != rank && rings.outboxes[r].is_none());
        // Until a target switches counting on, the window carries the puts to every rank this
        // process does not map.
        let window_puts = kept
            .host
            .unmapped()
            .map(|unmapped| Cell::new(rma.is_some() && unmapped))
            .collect();
        Ok(JobParts {
            comm,
            shared,
            watchdog: RefCell::new(Some(dog)),
            rma,
            outboxes: Outboxes::new(rank, rings.outboxes),
            inbox: rings.inbox.map(Inbox::new),
            mpi_peers,
            counting: CountingSwitch::new(counting_scope, window_puts),
            st: RefCell::new(Protocol::new(slots, ranks)),
            direct: RefCell::new(vec![0u8; EAGER].into_boxed_slice()),
            ended: Cell::new(false),
        })
    }
}
