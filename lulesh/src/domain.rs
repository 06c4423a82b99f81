//! The rank-local mesh and its fields, built like the reference `Domain`
//! constructor in lulesh-init.cc (Sedov blast problem on a uniform cube).

use crate::geometry::{calc_elem_volume, gather};
use crate::layout::BlockLayout;
use crate::rng::GlibcRand;

/// Boundary-condition bits of `elem_bc`: for each of the six faces, whether
/// it is a symmetry plane, a free surface, or shared with another rank.
pub mod bc {
    /// Mask of the -xi face bits.
    pub const XI_M: i32 = 0x00007;
    /// -xi face is a symmetry plane.
    pub const XI_M_SYMM: i32 = 0x00001;
    /// -xi face is a free surface.
    pub const XI_M_FREE: i32 = 0x00002;
    /// -xi face neighbours another rank.
    pub const XI_M_COMM: i32 = 0x00004;
    /// Mask of the +xi face bits.
    pub const XI_P: i32 = 0x00038;
    /// +xi face is a symmetry plane.
    pub const XI_P_SYMM: i32 = 0x00008;
    /// +xi face is a free surface.
    pub const XI_P_FREE: i32 = 0x00010;
    /// +xi face neighbours another rank.
    pub const XI_P_COMM: i32 = 0x00020;
    /// Mask of the -eta face bits.
    pub const ETA_M: i32 = 0x001c0;
    /// -eta face is a symmetry plane.
    pub const ETA_M_SYMM: i32 = 0x00040;
    /// -eta face is a free surface.
    pub const ETA_M_FREE: i32 = 0x00080;
    /// -eta face neighbours another rank.
    pub const ETA_M_COMM: i32 = 0x00100;
    /// Mask of the +eta face bits.
    pub const ETA_P: i32 = 0x00e00;
    /// +eta face is a symmetry plane.
    pub const ETA_P_SYMM: i32 = 0x00200;
    /// +eta face is a free surface.
    pub const ETA_P_FREE: i32 = 0x00400;
    /// +eta face neighbours another rank.
    pub const ETA_P_COMM: i32 = 0x00800;
    /// Mask of the -zeta face bits.
    pub const ZETA_M: i32 = 0x07000;
    /// -zeta face is a symmetry plane.
    pub const ZETA_M_SYMM: i32 = 0x01000;
    /// -zeta face is a free surface.
    pub const ZETA_M_FREE: i32 = 0x02000;
    /// -zeta face neighbours another rank.
    pub const ZETA_M_COMM: i32 = 0x04000;
    /// Mask of the +zeta face bits.
    pub const ZETA_P: i32 = 0x38000;
    /// +zeta face is a symmetry plane.
    pub const ZETA_P_SYMM: i32 = 0x08000;
    /// +zeta face is a free surface.
    pub const ZETA_P_FREE: i32 = 0x10000;
    /// +zeta face neighbours another rank.
    pub const ZETA_P_COMM: i32 = 0x20000;
}

/// Material and numerical constants (hard-wired in the reference constructor).
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Energy tolerance.
    pub e_cut: f64,
    /// Pressure tolerance.
    pub p_cut: f64,
    /// q tolerance.
    pub q_cut: f64,
    /// Relative volume tolerance.
    pub v_cut: f64,
    /// Velocity tolerance.
    pub u_cut: f64,
    /// Hourglass control coefficient.
    pub hgcoef: f64,
    /// 4/3, used by the sound speed.
    pub ss4o3: f64,
    /// Excessive-q indicator.
    pub qstop: f64,
    /// Monotonic-q slope limit.
    pub monoq_max_slope: f64,
    /// Monotonic-q limiter multiplier.
    pub monoq_limiter_mult: f64,
    /// Linear term coefficient for q.
    pub qlc_monoq: f64,
    /// Quadratic term coefficient for q.
    pub qqc_monoq: f64,
    /// q coefficient of the Courant condition.
    pub qqc: f64,
    /// Largest relative volume the EOS accepts.
    pub eosvmax: f64,
    /// Smallest relative volume the EOS accepts.
    pub eosvmin: f64,
    /// Pressure floor.
    pub pmin: f64,
    /// Energy floor.
    pub emin: f64,
    /// Largest allowed relative volume change per step.
    pub dvovmax: f64,
    /// Reference density.
    pub refdens: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            e_cut: 1.0e-7,
            p_cut: 1.0e-7,
            q_cut: 1.0e-7,
            v_cut: 1.0e-10,
            u_cut: 1.0e-7,
            hgcoef: 3.0,
            ss4o3: 4.0 / 3.0,
            qstop: 1.0e+12,
            monoq_max_slope: 1.0,
            monoq_limiter_mult: 2.0,
            qlc_monoq: 0.5,
            qqc_monoq: 2.0 / 3.0,
            qqc: 2.0,
            eosvmax: 1.0e+9,
            eosvmin: 1.0e-9,
            pmin: 0.0,
            emin: -1.0e+15,
            dvovmax: 0.1,
            refdens: 1.0,
        }
    }
}

/// Time-step control state.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeState {
    /// Current simulation time.
    pub time: f64,
    /// Current time increment.
    pub deltatime: f64,
    /// Lower bound of the ratio that lets the step grow.
    pub deltatimemultlb: f64,
    /// Upper bound of the step growth per cycle.
    pub deltatimemultub: f64,
    /// End time of the simulation.
    pub stoptime: f64,
    /// Courant constraint of the last cycle.
    pub dtcourant: f64,
    /// Volume-change constraint of the last cycle.
    pub dthydro: f64,
    /// Largest allowed time increment.
    pub dtmax: f64,
    /// Fixed time increment; negative means use the Courant condition.
    pub dtfixed: f64,
    /// Cycles completed.
    pub cycle: i32,
}

/// Material regions: each element belongs to exactly one; regions differ
/// only in how often the EOS is evaluated (load imbalance), not in physics.
#[derive(Debug, Clone, PartialEq)]
pub struct Regions {
    /// Region number (1-based) of each element.
    pub reg_num_list: Vec<i32>,
    /// Element indices of each region, ascending.
    pub reg_elem_list: Vec<Vec<u32>>,
    /// Extra-cost multiplier (`-c`).
    pub cost: i32,
}

impl Regions {
    /// Number of regions.
    pub fn num_reg(&self) -> usize {
        self.reg_elem_list.len()
    }

    /// How many times region `r`'s EOS is evaluated per cycle
    /// (the reference's `rep` in `ApplyMaterialPropertiesForElems`).
    pub fn repetitions(&self, r: usize) -> i32 {
        let num_reg = self.num_reg() as i32;
        let r = r as i32;
        if r < num_reg / 2 {
            1
        } else if r < num_reg - (num_reg + 15) / 20 {
            1 + self.cost
        } else {
            10 * (1 + self.cost)
        }
    }

    /// Builds the region sets like `CreateRegionIndexSets`, with the C
    /// library's `rand()` seeded by the rank.
    pub fn new(num_elem: usize, nr: usize, balance: i32, cost: i32, rank: i32) -> Self {
        let mut reg_num_list = vec![0i32; num_elem];
        if nr == 1 {
            reg_num_list.fill(1);
        } else {
            let mut rng = GlibcRand::new(rank as u32);
            let mut cost_denominator: i32 = 0;
            let mut reg_bin_end = vec![0i32; nr];
            for (i, end) in reg_bin_end.iter_mut().enumerate() {
                // The reference adds a double to an int: the sum is truncated.
                cost_denominator =
                    (cost_denominator as f64 + ((i + 1) as f64).powf(balance as f64)) as i32;
                *end = cost_denominator;
            }
            let pick = |rng: &mut GlibcRand| {
                let region_var = rng.next_rand() % cost_denominator;
                let mut i = 0;
                while region_var >= reg_bin_end[i] {
                    i += 1;
                }
                ((i as i32 + rank) % nr as i32) + 1
            };
            let mut next_index = 0usize;
            let mut last_reg = -1;
            while next_index < num_elem {
                let mut region_num = pick(&mut rng);
                while region_num == last_reg {
                    region_num = pick(&mut rng);
                }
                let bin_size = rng.next_rand() % 1000;
                let elements = if bin_size < 773 {
                    rng.next_rand() % 15 + 1
                } else if bin_size < 937 {
                    rng.next_rand() % 16 + 16
                } else if bin_size < 970 {
                    rng.next_rand() % 32 + 32
                } else if bin_size < 974 {
                    rng.next_rand() % 64 + 64
                } else if bin_size < 978 {
                    rng.next_rand() % 128 + 128
                } else if bin_size < 981 {
                    rng.next_rand() % 256 + 256
                } else {
                    rng.next_rand() % 1537 + 512
                };
                let runto = (elements as usize + next_index).min(num_elem);
                reg_num_list[next_index..runto].fill(region_num);
                next_index = next_index.max(runto);
                last_reg = region_num;
            }
        }
        let mut reg_elem_list = vec![Vec::new(); nr];
        for (i, &r) in reg_num_list.iter().enumerate() {
            reg_elem_list[(r - 1) as usize].push(i as u32);
        }
        Regions {
            reg_num_list,
            reg_elem_list,
            cost,
        }
    }
}

/// One rank's block of the mesh with all node- and element-centred fields.
#[derive(Debug, Clone)]
pub struct Domain {
    /// Where this block sits among the ranks.
    pub layout: BlockLayout,
    /// Physical constants.
    pub params: Params,
    /// Time-step state.
    pub ts: TimeState,

    /// Node x coordinates.
    pub x: Vec<f64>,
    /// Node y coordinates.
    pub y: Vec<f64>,
    /// Node z coordinates.
    pub z: Vec<f64>,
    /// Node x velocities.
    pub xd: Vec<f64>,
    /// Node y velocities.
    pub yd: Vec<f64>,
    /// Node z velocities.
    pub zd: Vec<f64>,
    /// Node x accelerations.
    pub xdd: Vec<f64>,
    /// Node y accelerations.
    pub ydd: Vec<f64>,
    /// Node z accelerations.
    pub zdd: Vec<f64>,
    /// Node x forces.
    pub fx: Vec<f64>,
    /// Node y forces.
    pub fy: Vec<f64>,
    /// Node z forces.
    pub fz: Vec<f64>,
    /// Node masses.
    pub nodal_mass: Vec<f64>,

    /// Nodes on the x = 0 symmetry plane (empty unless this block touches it).
    pub symm_x: Vec<u32>,
    /// Nodes on the y = 0 symmetry plane.
    pub symm_y: Vec<u32>,
    /// Nodes on the z = 0 symmetry plane.
    pub symm_z: Vec<u32>,

    /// The eight nodes of each element.
    pub nodelist: Vec<[u32; 8]>,
    /// Element across the -xi face (itself on a boundary, a ghost slot if shared).
    pub lxim: Vec<u32>,
    /// Element across the +xi face.
    pub lxip: Vec<u32>,
    /// Element across the -eta face.
    pub letam: Vec<u32>,
    /// Element across the +eta face.
    pub letap: Vec<u32>,
    /// Element across the -zeta face.
    pub lzetam: Vec<u32>,
    /// Element across the +zeta face.
    pub lzetap: Vec<u32>,
    /// Face boundary-condition bits of each element (see [`bc`]).
    pub elem_bc: Vec<i32>,

    /// Specific internal energy.
    pub e: Vec<f64>,
    /// Pressure.
    pub p: Vec<f64>,
    /// Artificial viscosity.
    pub q: Vec<f64>,
    /// Linear term of q.
    pub ql: Vec<f64>,
    /// Quadratic term of q.
    pub qq: Vec<f64>,
    /// Relative volume.
    pub v: Vec<f64>,
    /// Reference volume.
    pub volo: Vec<f64>,
    /// New relative volume of the current step.
    pub vnew: Vec<f64>,
    /// `vnew - v`.
    pub delv: Vec<f64>,
    /// Volume derivative over volume.
    pub vdov: Vec<f64>,
    /// Characteristic length.
    pub arealg: Vec<f64>,
    /// Sound speed.
    pub ss: Vec<f64>,
    /// Element mass.
    pub elem_mass: Vec<f64>,

    /// Velocity gradient along xi; `all_elem` long (ghosts for neighbours' values).
    pub delv_xi: Vec<f64>,
    /// Velocity gradient along eta.
    pub delv_eta: Vec<f64>,
    /// Velocity gradient along zeta.
    pub delv_zeta: Vec<f64>,
    /// Position gradient along xi.
    pub delx_xi: Vec<f64>,
    /// Position gradient along eta.
    pub delx_eta: Vec<f64>,
    /// Position gradient along zeta.
    pub delx_zeta: Vec<f64>,

    /// Material regions.
    pub regions: Regions,

    /// Start of each node's run in `node_elem_corner_list` (`num_node + 1` long).
    pub node_elem_start: Vec<u32>,
    /// For each node, the element corners (`8 * elem + corner`) that touch it,
    /// in ascending element order: the gather order of the threaded mode.
    pub node_elem_corner_list: Vec<u32>,
}

impl Domain {
    /// Builds and initialises the block described by `layout` with
    /// `nr` regions, like the reference constructor.
    pub fn new(layout: BlockLayout, nr: usize, balance: i32, cost: i32) -> Self {
        let nx = layout.size_x;
        let edge_elems = nx;
        let edge_nodes = edge_elems + 1;
        let num_elem = edge_elems * edge_elems * edge_elems;
        let num_node = edge_nodes * edge_nodes * edge_nodes;
        let all_elem = layout.all_elem();
        let regions = Regions::new(num_elem, nr, balance, cost, layout.rank);

        let zeros_n = vec![0.0; num_node];
        let zeros_e = vec![0.0; num_elem];
        let mut d = Domain {
            params: Params::default(),
            ts: TimeState {
                time: 0.0,
                deltatime: 0.0,
                deltatimemultlb: 1.1,
                deltatimemultub: 1.2,
                stoptime: 1.0e-2,
                dtcourant: 1.0e+20,
                dthydro: 1.0e+20,
                dtmax: 1.0e-2,
                dtfixed: -1.0e-6,
                cycle: 0,
            },
            x: zeros_n.clone(),
            y: zeros_n.clone(),
            z: zeros_n.clone(),
            xd: zeros_n.clone(),
            yd: zeros_n.clone(),
            zd: zeros_n.clone(),
            xdd: zeros_n.clone(),
            ydd: zeros_n.clone(),
            zdd: zeros_n.clone(),
            fx: zeros_n.clone(),
            fy: zeros_n.clone(),
            fz: zeros_n.clone(),
            nodal_mass: zeros_n,
            symm_x: Vec::new(),
            symm_y: Vec::new(),
            symm_z: Vec::new(),
            nodelist: vec![[0; 8]; num_elem],
            lxim: vec![0; num_elem],
            lxip: vec![0; num_elem],
            letam: vec![0; num_elem],
            letap: vec![0; num_elem],
            lzetam: vec![0; num_elem],
            lzetap: vec![0; num_elem],
            elem_bc: vec![0; num_elem],
            e: zeros_e.clone(),
            p: zeros_e.clone(),
            q: zeros_e.clone(),
            ql: zeros_e.clone(),
            qq: zeros_e.clone(),
            v: vec![1.0; num_elem],
            volo: zeros_e.clone(),
            vnew: zeros_e.clone(),
            delv: zeros_e.clone(),
            vdov: zeros_e.clone(),
            arealg: zeros_e.clone(),
            ss: zeros_e.clone(),
            elem_mass: zeros_e.clone(),
            delv_xi: vec![0.0; all_elem],
            delv_eta: vec![0.0; all_elem],
            delv_zeta: vec![0.0; all_elem],
            delx_xi: zeros_e.clone(),
            delx_eta: zeros_e.clone(),
            delx_zeta: zeros_e,
            regions,
            node_elem_start: Vec::new(),
            node_elem_corner_list: Vec::new(),
            layout,
        };
        d.build_mesh(edge_nodes, edge_elems);
        d.setup_node_elem_corners();
        d.setup_symmetry_planes(edge_nodes);
        d.setup_element_connectivities(edge_elems);
        d.setup_boundary_conditions(edge_elems);

        for i in 0..num_elem {
            let nodes = d.nodelist[i];
            let xl = gather(&nodes, &d.x);
            let yl = gather(&nodes, &d.y);
            let zl = gather(&nodes, &d.z);
            let volume = calc_elem_volume(&xl, &yl, &zl);
            d.volo[i] = volume;
            d.elem_mass[i] = volume;
            for &n in &nodes {
                d.nodal_mass[n as usize] += volume / 8.0;
            }
        }

        // An energy of 3.948746e+7 is right for 45 zones along a side; scale it.
        let ebase = 3.948746e+7;
        let scale = (nx as i32 * d.layout.tp) as f64 / 45.0;
        let einit = ebase * scale * scale * scale;
        if d.layout.row_loc + d.layout.col_loc + d.layout.plane_loc == 0 {
            // The blast starts in the corner element of the rank at the origin.
            d.e[0] = einit;
        }
        d.ts.deltatime = (0.5 * crate::libm::cbrt(d.volo[0])) / (2.0 * einit).sqrt();
        d
    }

    /// Number of elements owned by this rank.
    pub fn num_elem(&self) -> usize {
        self.nodelist.len()
    }

    /// Number of nodes of this rank's block.
    pub fn num_node(&self) -> usize {
        self.x.len()
    }

    fn build_mesh(&mut self, edge_nodes: usize, edge_elems: usize) {
        let l = &self.layout;
        let nx = edge_elems as i32;
        let mesh_edge_elems = (l.tp * nx) as f64;
        let coord = |loc: i32, k: usize| 1.125 * ((loc * nx + k as i32) as f64) / mesh_edge_elems;
        let mut nidx = 0;
        for plane in 0..edge_nodes {
            let tz = coord(l.plane_loc, plane);
            for row in 0..edge_nodes {
                let ty = coord(l.row_loc, row);
                for col in 0..edge_nodes {
                    self.x[nidx] = coord(l.col_loc, col);
                    self.y[nidx] = ty;
                    self.z[nidx] = tz;
                    nidx += 1;
                }
            }
        }

        let en = edge_nodes as u32;
        let mut zidx = 0;
        let mut nidx = 0u32;
        for _plane in 0..edge_elems {
            for _row in 0..edge_elems {
                for _col in 0..edge_elems {
                    self.nodelist[zidx] = [
                        nidx,
                        nidx + 1,
                        nidx + en + 1,
                        nidx + en,
                        nidx + en * en,
                        nidx + en * en + 1,
                        nidx + en * en + en + 1,
                        nidx + en * en + en,
                    ];
                    zidx += 1;
                    nidx += 1;
                }
                nidx += 1;
            }
            nidx += en;
        }
    }

    /// Node-to-element-corner index (`SetupThreadSupportStructures`), built
    /// for every run so the thread count can be chosen later.
    fn setup_node_elem_corners(&mut self) {
        let num_node = self.num_node();
        let mut count = vec![0u32; num_node];
        for nodes in &self.nodelist {
            for &n in nodes {
                count[n as usize] += 1;
            }
        }
        let mut start = vec![0u32; num_node + 1];
        for i in 1..=num_node {
            start[i] = start[i - 1] + count[i - 1];
        }
        let mut list = vec![0u32; start[num_node] as usize];
        count.fill(0);
        for (i, nodes) in self.nodelist.iter().enumerate() {
            for (j, &n) in nodes.iter().enumerate() {
                let m = n as usize;
                list[(start[m] + count[m]) as usize] = (i * 8 + j) as u32;
                count[m] += 1;
            }
        }
        self.node_elem_start = start;
        self.node_elem_corner_list = list;
    }

    fn setup_symmetry_planes(&mut self, edge_nodes: usize) {
        let l = &self.layout;
        let plane_nodes = edge_nodes * edge_nodes;
        let (want_z, want_y, want_x) = (l.plane_loc == 0, l.row_loc == 0, l.col_loc == 0);
        for i in 0..edge_nodes {
            let plane_inc = i * edge_nodes * edge_nodes;
            let row_inc = i * edge_nodes;
            for j in 0..edge_nodes {
                if want_z {
                    self.symm_z.push((row_inc + j) as u32);
                }
                if want_y {
                    self.symm_y.push((plane_inc + j) as u32);
                }
                if want_x {
                    self.symm_x.push((plane_inc + j * edge_nodes) as u32);
                }
            }
        }
        debug_assert!(self.symm_x.is_empty() || self.symm_x.len() == plane_nodes);
    }

    fn setup_element_connectivities(&mut self, edge_elems: usize) {
        let n = self.num_elem();
        self.lxim[0] = 0;
        for i in 1..n {
            self.lxim[i] = (i - 1) as u32;
            self.lxip[i - 1] = i as u32;
        }
        self.lxip[n - 1] = (n - 1) as u32;

        for i in 0..edge_elems {
            self.letam[i] = i as u32;
            self.letap[n - edge_elems + i] = (n - edge_elems + i) as u32;
        }
        for i in edge_elems..n {
            self.letam[i] = (i - edge_elems) as u32;
            self.letap[i - edge_elems] = i as u32;
        }

        let plane = edge_elems * edge_elems;
        for i in 0..plane {
            self.lzetam[i] = i as u32;
            self.lzetap[n - plane + i] = (n - plane + i) as u32;
        }
        for i in plane..n {
            self.lzetam[i] = (i - plane) as u32;
            self.lzetap[i - plane] = i as u32;
        }
    }

    fn setup_boundary_conditions(&mut self, edge_elems: usize) {
        use bc::*;
        let l = self.layout.clone();
        let n = self.num_elem();
        self.elem_bc.fill(0);

        // Offsets of the ghost-element layers that hold neighbours' gradients.
        let mut ghost_idx = [usize::MAX; 6];
        let mut pidx = n;
        let faces = [
            (l.plane_min, l.size_x * l.size_y),
            (l.plane_max, l.size_x * l.size_y),
            (l.row_min, l.size_x * l.size_z),
            (l.row_max, l.size_x * l.size_z),
            (l.col_min, l.size_y * l.size_z),
            (l.col_max, l.size_y * l.size_z),
        ];
        for (g, &(present, size)) in ghost_idx.iter_mut().zip(faces.iter()) {
            if present {
                *g = pidx;
                pidx += size;
            }
        }

        let ee = edge_elems;
        for i in 0..ee {
            let plane_inc = i * ee * ee;
            let row_inc = i * ee;
            for j in 0..ee {
                let ghost = |g: usize| (g + row_inc + j) as u32;
                let zm = row_inc + j;
                if l.plane_loc == 0 {
                    self.elem_bc[zm] |= ZETA_M_SYMM;
                } else {
                    self.elem_bc[zm] |= ZETA_M_COMM;
                    self.lzetam[zm] = ghost(ghost_idx[0]);
                }
                let zp = row_inc + j + n - ee * ee;
                if l.plane_loc == l.tp - 1 {
                    self.elem_bc[zp] |= ZETA_P_FREE;
                } else {
                    self.elem_bc[zp] |= ZETA_P_COMM;
                    self.lzetap[zp] = ghost(ghost_idx[1]);
                }
                let em = plane_inc + j;
                if l.row_loc == 0 {
                    self.elem_bc[em] |= ETA_M_SYMM;
                } else {
                    self.elem_bc[em] |= ETA_M_COMM;
                    self.letam[em] = ghost(ghost_idx[2]);
                }
                let ep = plane_inc + j + ee * ee - ee;
                if l.row_loc == l.tp - 1 {
                    self.elem_bc[ep] |= ETA_P_FREE;
                } else {
                    self.elem_bc[ep] |= ETA_P_COMM;
                    self.letap[ep] = ghost(ghost_idx[3]);
                }
                let xm = plane_inc + j * ee;
                if l.col_loc == 0 {
                    self.elem_bc[xm] |= XI_M_SYMM;
                } else {
                    self.elem_bc[xm] |= XI_M_COMM;
                    self.lxim[xm] = ghost(ghost_idx[4]);
                }
                let xp = plane_inc + j * ee + ee - 1;
                if l.col_loc == l.tp - 1 {
                    self.elem_bc[xp] |= XI_P_FREE;
                } else {
                    self.elem_bc[xp] |= XI_P_COMM;
                    self.lxip[xp] = ghost(ghost_idx[5]);
                }
            }
        }
    }
}
