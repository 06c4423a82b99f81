//! The points where a multi-rank run exchanges halo data with its 26
//! neighbours. Each method stands for one reference call site
//! (`CommRecv`/`CommSend`/`CommSBN`/`CommSyncPosVel`/`CommMonoQ`, and the
//! MPI reductions); a single rank needs none of them, so [`SingleRank`]
//! leaves every one a no-op. A multi-rank run uses
//! [`crate::distributed::PgasComm`].

use crate::layout::BlockLayout;

/// Which exchange a receive is posted for (the reference's message tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    /// Summing node-centred values on shared faces/edges/corners (`MSG_COMM_SBN`).
    SumBoundaryNodes,
    /// Copying positions and velocities of shared nodes (`MSG_SYNC_POS_VEL`).
    SyncPosVel,
    /// Filling ghost elements with the neighbours' velocity gradients (`MSG_MONOQ`).
    MonoQ,
}

/// Halo exchange and reductions between ranks.
///
/// Field slices are the rank's whole arrays; an implementation packs the
/// block faces itself using `layout` (`size_x + 1` nodes per edge for node
/// fields, `size_x` elements for element fields).
pub trait Comm {
    /// This rank's number.
    fn rank(&self) -> i32 {
        0
    }

    /// How many ranks take part.
    fn num_ranks(&self) -> i32 {
        1
    }

    /// Posts the receives of an exchange before the data is computed
    /// (`CommRecv`), so neighbours can send as soon as they are ready.
    fn post_recv(&mut self, _layout: &BlockLayout, _msg: Msg, _num_fields: usize) {}

    /// Sends this rank's boundary node values and adds the neighbours' values
    /// into them (`CommSend(MSG_COMM_SBN)` + `CommSBN`): nodal mass at setup,
    /// forces every cycle.
    fn sum_boundary_nodes(&mut self, _layout: &BlockLayout, _fields: &mut [&mut [f64]]) {}

    /// Sends positions and velocities of boundary nodes and overwrites the
    /// shared copies with the owner's (`CommSend(MSG_SYNC_POS_VEL)` +
    /// `CommSyncPosVel`, the SEDOV_SYNC_POS_VEL_EARLY variant). Fields are
    /// x, y, z, xd, yd, zd.
    fn sync_pos_vel(&mut self, _layout: &BlockLayout, _fields: &mut [&mut [f64]; 6]) {}

    /// Sends the face layers of the velocity gradients and stores the
    /// neighbours' layers in the ghost slots past `numElem`
    /// (`CommSend(MSG_MONOQ)` + `CommMonoQ`). Fields are delv_xi, delv_eta,
    /// delv_zeta, each `layout.all_elem()` long.
    fn exchange_monoq(&mut self, _layout: &BlockLayout, _fields: &mut [&mut [f64]; 3]) {}

    /// Global minimum of a time-step candidate (`MPI_Allreduce(MPI_MIN)`).
    fn allreduce_min(&mut self, value: f64) -> f64 {
        value
    }

    /// Largest elapsed time over ranks, for the report (`MPI_Reduce(MPI_MAX)`).
    fn reduce_max(&mut self, value: f64) -> f64 {
        value
    }

    /// Waits until every rank gets here (`MPI_Barrier`, the end of initialization).
    fn barrier(&mut self) {}
}

/// The communicator of a run on one rank: every exchange is empty.
#[derive(Debug, Default, Clone, Copy)]
pub struct SingleRank;

impl Comm for SingleRank {}
