//! The leapfrog time step and the run loop (`LagrangeLeapFrog`,
//! `LagrangeElements` and the loop of the reference `main`).

use std::time::Instant;

use crate::comm::{Comm, SingleRank};
use crate::domain::Domain;
use crate::eos::{apply_material_properties_for_elems, update_volumes_for_elems};
use crate::error::LuleshError;
use crate::kinematics::calc_lagrange_elements;
use crate::layout::BlockLayout;
use crate::nodal::lagrange_nodal;
use crate::options::Options;
use crate::par::Exec;
use crate::qcalc::calc_q_for_elems;
use crate::timestep::{calc_time_constraints_for_elems, time_increment};
use crate::workspace::Workspace;

/// A domain together with everything needed to advance it.
pub struct Simulation {
    /// The rank's mesh and fields.
    pub domain: Domain,
    /// Reused scratch buffers.
    pub workspace: Workspace,
    /// Serial or threaded execution.
    pub exec: Exec,
    /// Halo exchange with other ranks.
    pub comm: Box<dyn Comm>,
}

impl Simulation {
    /// Sets up a run described by `opts` on the rank and communicator given.
    pub fn new(opts: &Options, comm: Box<dyn Comm>) -> Result<Self, LuleshError> {
        let mut comm = comm;
        let layout = BlockLayout::decompose(comm.num_ranks(), comm.rank(), opts.nx as usize)?;
        let mut domain = Domain::new(layout, opts.num_reg as usize, opts.balance, opts.cost);
        {
            let Domain {
                layout, nodal_mass, ..
            } = &mut domain;
            comm.post_recv(layout, crate::comm::Msg::SumBoundaryNodes, 1);
            comm.sum_boundary_nodes(layout, &mut [&mut nodal_mass[..]]);
            // End of initialization: no rank may send forces into a buffer
            // a neighbour is still reading nodal masses from.
            comm.barrier();
        }
        let exec = Exec::with_threads(opts.threads)?;
        let workspace = Workspace::new(&domain, exec.is_parallel());
        Ok(Simulation {
            domain,
            workspace,
            exec,
            comm,
        })
    }

    /// A single-rank run of `opts`.
    pub fn single_rank(opts: &Options) -> Result<Self, LuleshError> {
        Self::new(opts, Box::new(SingleRank))
    }

    /// Whether the run should go on (before end time and below `max_cycles`).
    pub fn running(&self, max_cycles: i32) -> bool {
        self.domain.ts.time < self.domain.ts.stoptime && self.domain.ts.cycle < max_cycles
    }

    /// One full cycle: choose the time step, then advance nodes and elements.
    pub fn step(&mut self) -> Result<(), LuleshError> {
        time_increment(&mut self.domain, self.comm.as_mut());
        self.lagrange_leap_frog()
    }

    /// Advances nodes, then elements, then computes the next step's
    /// constraints (`LagrangeLeapFrog`).
    fn lagrange_leap_frog(&mut self) -> Result<(), LuleshError> {
        let dom = &mut self.domain;
        let ws = &mut self.workspace;
        let exec = &self.exec;
        let comm = self.comm.as_mut();
        lagrange_nodal(dom, ws, exec, comm)?;

        // LagrangeElements
        calc_lagrange_elements(dom, exec)?;
        calc_q_for_elems(dom, ws, exec, comm)?;
        apply_material_properties_for_elems(dom, ws, exec)?;
        update_volumes_for_elems(dom);

        calc_time_constraints_for_elems(dom);
        Ok(())
    }

    /// Runs until the end time or `max_cycles`, calling `progress` after each
    /// cycle; returns the elapsed wall time in seconds (maximum over ranks).
    pub fn run(
        &mut self,
        max_cycles: i32,
        progress: impl FnMut(&Domain),
    ) -> Result<f64, LuleshError> {
        self.run_with(max_cycles, Simulation::step, progress)
    }

    /// [`Simulation::run`] with each cycle done by `step` (e.g. a cycle
    /// inside a Containment Domain, see [`crate::containment`]).
    pub fn run_with<E>(
        &mut self,
        max_cycles: i32,
        mut step: impl FnMut(&mut Simulation) -> Result<(), E>,
        mut progress: impl FnMut(&Domain),
    ) -> Result<f64, E> {
        let start = Instant::now();
        while self.running(max_cycles) {
            step(self)?;
            progress(&self.domain);
        }
        let elapsed = start.elapsed().as_secs_f64();
        Ok(self.comm.reduce_max(elapsed))
    }
}
