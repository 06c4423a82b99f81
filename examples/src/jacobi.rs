//! The 3-D Jacobi (7-point) stencil shared by `stencil` and `cd_stencil`: the `n`^3 global grid
//! is split over a `px * py * pz` process grid ([`Grid`]); each rank iterates on its [`Block`]
//! (with one-cell halos) and, after every sweep, packs its six faces and writes them into
//! receive buffers of its neighbours, double-buffered by iteration parity so one barrier per
//! iteration suffices: with `rput_slice` into their segments, copied out with `rget_into`
//! ([`Block::new`], what `cd_stencil` runs: its CDs' hook sees and logs those transfers), or
//! with `view_put` into their viewable memory, read in place through a local view
//! ([`Block::new_in_place`], what `stencil` runs).
//!
//! Every point's update is the same floating-point expression whatever the decomposition, so
//! the result is bit-identical for any rank count. The [`Checksum`] is the sum of all interior
//! values, reduced exactly (as 2^-96 fixed-point integers, whose sum does not depend on
//! order), so it prints the same bits for 1, 2, 4 or 8 ranks; a position-sensitive fingerprint
//! of the values' bits is reduced alongside. For small grids rank 0 repeats the run serially
//! ([`serial_run`]) and both numbers must match exactly ([`Block::report`]).
//!
//! The run under Containment Domains of `cd_stencil` is here too ([`cd_launch`], and
//! [`cd_run`] for programs that run it as one part of their work, as `lulesh-bench`'s
//! escalation table does).

use std::time::Instant;

use cd_runtime as cd;
use pgas::{
    GlobalPtr, LaunchConfig, RpcTable, ViewPtr, barrier, broadcast, new_array, new_viewable,
    rank_me, rank_n, reduce_all,
};

use crate::{
    Concluded, conclude, exchange, gathered, job_config, mix64, parse_count, parse_positive, secs,
    segment_for,
};

/// Largest `--n`: keeps `n^3` values of at most 1 within the fixed-point checksum's range.
pub const MAX_N: usize = 1024;
/// Largest `--n` for which rank 0 repeats the run serially by default.
pub const SERIAL_MAX_N: usize = 96;
/// Fixed-point scale of the exact checksum: values are summed as integers of 2^-96.
const FIXED_SCALE: f64 = 79_228_162_514_264_337_593_543_950_336.0; // 2^96

/// Command-line options of the stencil programs (flattened into each program's own).
#[derive(Debug, Clone, clap::Args)]
pub struct JacobiArgs {
    /// Global grid edge (interior points per dimension).
    #[arg(long, default_value_t = 64, allow_negative_numbers = true, value_parser = parse_positive)]
    pub n: usize,
    /// Jacobi iterations.
    #[arg(long, default_value_t = 20, allow_negative_numbers = true, value_parser = parse_count)]
    pub iters: usize,
    /// Skip rank 0's serial re-run (done by default when n <= 96).
    #[arg(long)]
    pub no_serial: bool,
}

impl JacobiArgs {
    /// Whether rank 0 repeats the run serially: unless `--no-serial`, when `n` <= [`SERIAL_MAX_N`].
    pub fn serial_check(&self) -> bool {
        !self.no_serial && self.n <= SERIAL_MAX_N
    }
}

/// Checks `--n` against [`MAX_N`] (also done by [`Grid::new`]; separate so a program can report
/// this error before others).
pub fn check_edge(n: usize) -> Result<(), String> {
    if n > MAX_N {
        return Err(format!(
            "--n {n} is above the limit of {MAX_N} (the checksum's range)"
        ));
    }
    Ok(())
}

/// The six sides of a block: -x, +x, -y, +y, -z, +z.
const SIDES: usize = 6;

/// The axis (0, 1, 2) and direction (-1 or +1) of a side.
fn side(s: usize) -> (usize, isize) {
    (s / 2, if s.is_multiple_of(2) { -1 } else { 1 })
}

/// The side facing `s` from the neighbour's point of view.
fn opposite(s: usize) -> usize {
    s ^ 1
}

/// Factors `ranks` into a process grid, as cubic as possible (least total edge), largest first.
pub fn process_grid(ranks: usize) -> [usize; 3] {
    let mut best = [ranks, 1, 1];
    for a in 1..=ranks {
        if !ranks.is_multiple_of(a) {
            continue;
        }
        for b in 1..=ranks / a {
            if !(ranks / a).is_multiple_of(b) {
                continue;
            }
            let mut dims = [a, b, ranks / a / b];
            dims.sort_unstable_by(|x, y| y.cmp(x));
            if dims.iter().sum::<usize>() < best.iter().sum::<usize>() {
                best = dims;
            }
        }
    }
    best
}

/// The global problem: an `n`^3 grid split over the [`process_grid`] of `ranks`.
#[derive(Debug, Clone, Copy)]
pub struct Grid {
    n: usize,
    ranks: usize,
    dims: [usize; 3],
}

impl Grid {
    /// The grid of edge `n` on `ranks` ranks; an error if `n` is above [`MAX_N`] or smaller
    /// than the process grid along some axis.
    pub fn new(n: usize, ranks: usize) -> Result<Grid, String> {
        check_edge(n)?;
        let dims = process_grid(ranks);
        if let Some(axis) = (0..3).find(|&a| dims[a] > n) {
            return Err(format!(
                "--n {n} is too small for the {}x{}x{} process grid of {ranks} ranks: axis {axis} \
                 needs at least {} points",
                dims[0], dims[1], dims[2], dims[axis]
            ));
        }
        let grid = Grid { n, ranks, dims };
        // Two copies of the largest block, halos included, on every rank of this process.
        let block = (0..3)
            .map(|a| n.div_ceil(dims[a]) as u64 + 2)
            .product::<u64>()
            .checked_mul(2 * 8);
        crate::check_memory(&format!("--n {n}"), ranks, block)?;
        Ok(grid)
    }

    /// The segment size each rank needs for its receive buffers: two parities of six faces,
    /// each at most (n/p + 1)^2 points.
    pub fn segment_bytes(&self) -> Result<usize, String> {
        let (n, dims) = (self.n, self.dims);
        let face_max = (0..3)
            .map(|a| {
                (0..3)
                    .filter(|&b| b != a)
                    .map(|b| n / dims[b] + 1)
                    .product::<usize>()
            })
            .max()
            .unwrap_or(0);
        segment_for(2 * SIDES * (face_max * 8 + 64))
    }

    /// The process-grid coordinates of `rank`, x fastest.
    fn coords(&self, rank: usize) -> [usize; 3] {
        let d = self.dims;
        [rank % d[0], rank / d[0] % d[1], rank / (d[0] * d[1])]
    }

    /// The rank beyond side `s` of the block at process-grid `coords`, if any.
    fn neighbour(&self, coords: [usize; 3], s: usize) -> Option<usize> {
        let dims = self.dims;
        let (axis, dir) = side(s);
        let c = coords[axis] as isize + dir;
        if c < 0 || c >= dims[axis] as isize {
            return None;
        }
        let mut nc = coords;
        nc[axis] = c as usize;
        Some(nc[0] + dims[0] * (nc[1] + dims[1] * nc[2]))
    }
}

/// The initial value at global coordinates (each in `-1..=n`): pseudo-random in [0, 1) inside,
/// a fixed boundary outside (1 on the -x face, 0 elsewhere), so the fixed points stay in [0, 1].
fn initial(g: [i64; 3], n: usize) -> f64 {
    let n = n as i64;
    if g.iter().any(|&c| c < 0 || c >= n) {
        return if g[0] < 0 { 1.0 } else { 0.0 };
    }
    let index = (g[0] + n * (g[1] + n * g[2])) as u64;
    (mix64(index + 1) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A box of the grid with one-cell halos, x fastest.
#[derive(Clone)]
struct Field {
    /// Interior extents.
    len: [usize; 3],
    /// Global coordinates of the first interior point.
    origin: [usize; 3],
    data: Vec<f64>,
}

impl Field {
    /// The box of `len` interior points at `origin`, halos included, set to initial values.
    fn new(len: [usize; 3], origin: [usize; 3], n: usize) -> Field {
        let [sx, sy, sz] = len.map(|l| l + 2);
        let mut data = Vec::with_capacity(sx * sy * sz);
        for k in 0..sz {
            for j in 0..sy {
                for i in 0..sx {
                    let g = [i, j, k].map(|c| c as i64 - 1);
                    data.push(initial(
                        [
                            g[0] + origin[0] as i64,
                            g[1] + origin[1] as i64,
                            g[2] + origin[2] as i64,
                        ],
                        n,
                    ));
                }
            }
        }
        Field { len, origin, data }
    }

    /// Strides of the y and z axes in `data`.
    fn strides(&self) -> (usize, usize) {
        let sx = self.len[0] + 2;
        (sx, sx * (self.len[1] + 2))
    }

    /// Index of halo-inclusive coordinates.
    fn at(&self, i: usize, j: usize, k: usize) -> usize {
        let (sy, sz) = self.strides();
        i + sy * j + sz * k
    }

    /// One Jacobi sweep: the interior of `out` from `self` (halos of `out` are left alone).
    fn sweep(&self, out: &mut Field) {
        let (sy, sz) = self.strides();
        let c = &self.data;
        for k in 1..=self.len[2] {
            for j in 1..=self.len[1] {
                let row = self.at(0, j, k);
                for p in row + 1..=row + self.len[0] {
                    // The same expression, in the same order, for every point of every
                    // decomposition: this is what makes results bit-identical.
                    out.data[p] =
                        (c[p - 1] + c[p + 1] + c[p - sy] + c[p + sy] + c[p - sz] + c[p + sz]) / 6.0;
                }
            }
        }
    }

    /// Number of points on side `s`'s face.
    fn face_len(&self, s: usize) -> usize {
        let (axis, _) = side(s);
        (0..3).filter(|&a| a != axis).map(|a| self.len[a]).product()
    }

    /// Calls `f(index)` for the face of side `s`: the last interior layer if `interior`, else
    /// the halo layer beyond it; in a fixed order both neighbours agree on.
    fn for_face(&self, s: usize, interior: bool, mut f: impl FnMut(usize)) {
        let (axis, dir) = side(s);
        let layer = match (dir, interior) {
            (-1, true) => 1,
            (-1, false) => 0,
            (_, true) => self.len[axis],
            (_, false) => self.len[axis] + 1,
        };
        let others: Vec<usize> = (0..3).filter(|&a| a != axis).collect();
        for v in 1..=self.len[others[1]] {
            for u in 1..=self.len[others[0]] {
                let mut c = [0usize; 3];
                c[axis] = layer;
                c[others[0]] = u;
                c[others[1]] = v;
                f(self.at(c[0], c[1], c[2]));
            }
        }
    }

    /// Exact fixed-point sum and position-sensitive bit fingerprint of the interior.
    fn checksum(&self, n: usize) -> Checksum {
        let mut sum = 0i128;
        let mut print = 0u64;
        for k in 1..=self.len[2] {
            for j in 1..=self.len[1] {
                for i in 1..=self.len[0] {
                    let v = self.data[self.at(i, j, k)];
                    let g = [i, j, k].map(|c| c - 1);
                    let g = [
                        g[0] + self.origin[0],
                        g[1] + self.origin[1],
                        g[2] + self.origin[2],
                    ];
                    let index = (g[0] + n * (g[1] + n * g[2])) as u64;
                    // Values lie in [0, 1]: scaling by a power of two is exact and the
                    // truncation below 2^-96 is the same on every decomposition.
                    sum += (v * FIXED_SCALE) as i128;
                    print = print.wrapping_add(mix64(v.to_bits() ^ mix64(index + 1)));
                }
            }
        }
        Checksum { sum, print }
    }
}

/// The exact checksum of (part of) the grid: the fixed-point sum of the values and the
/// position-sensitive fingerprint of their bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checksum {
    /// Sum of the values as integers of 2^-96.
    pub sum: i128,
    /// Wrapping sum of a hash of each value's bits and position.
    pub print: u64,
}

impl Checksum {
    /// The checksum as a number: the exact sum, rounded once to f64.
    pub fn value(&self) -> f64 {
        self.sum as f64 / FIXED_SCALE
    }
}

/// The same Jacobi run on one array (the check of small grids).
pub fn serial_run(n: usize, iters: usize) -> Checksum {
    let mut cur = Field::new([n; 3], [0; 3], n);
    let mut next = cur.clone();
    for _ in 0..iters {
        cur.sweep(&mut next);
        std::mem::swap(&mut cur, &mut next);
    }
    cur.checksum(n)
}

/// This rank's share of a distributed run: its block of the grid (the current values and the
/// buffer the next sweep writes), its neighbours, and the receive buffers in the segments.
pub struct Block {
    n: usize,
    cur: Field,
    next: Field,
    /// The rank beyond each side, if any.
    neighbours: [Option<usize>; SIDES],
    /// The receive buffers: `[parity * SIDES + s]` receives the face coming from side `s`.
    buffers: Buffers,
    /// Scratch for the faces sent and received.
    send: Vec<f64>,
    incoming: Vec<f64>,
    halo: Vec<usize>,
}

/// Where the faces land: this rank's receive buffers and every rank's, by rank.
enum Buffers {
    /// In the segment, written by `rput_slice` and copied out by `rget_into` (the path a
    /// Containment Domain's hook sees and logs).
    Segment {
        recv: Vec<GlobalPtr<f64>>,
        everyone: Vec<Vec<GlobalPtr<f64>>>,
    },
    /// In viewable memory, written by `view_put` and read in place through a local view.
    Viewable {
        recv: Vec<ViewPtr<f64>>,
        everyone: Vec<Vec<ViewPtr<f64>>>,
    },
}

/// Allocates the `2 * SIDES` receive buffers of `field` with `alloc` and learns every rank's
/// (collective).
fn receive_buffers<P>(
    field: &Field,
    alloc: impl Fn(usize) -> Result<P, pgas::PgasError>,
) -> Result<(Vec<P>, Vec<Vec<P>>), String>
where
    P: Clone + serde::Serialize + serde::de::DeserializeOwned + 'static,
{
    let mut recv = Vec::with_capacity(2 * SIDES);
    for _parity in 0..2 {
        for s in 0..SIDES {
            recv.push(
                alloc(field.face_len(s))
                    .map_err(|e| format!("cannot allocate a receive buffer: {e}"))?,
            );
        }
    }
    let everyone = exchange(recv.clone());
    if let Some(r) = (0..rank_n()).find(|&r| everyone[r].len() != 2 * SIDES) {
        return Err(format!(
            "rank {r} published {} receive buffers",
            everyone[r].len()
        ));
    }
    Ok((recv, everyone))
}

impl Block {
    /// This rank's block of `grid`, set to the initial values, with its receive buffers
    /// allocated in the segment and every rank's buffers known (collective: every rank of the
    /// launch calls it).
    pub fn new(grid: &Grid) -> Result<Block, String> {
        Block::with_buffers(grid, false)
    }

    /// [`Block::new`] with the receive buffers in viewable memory: faces land by `view_put`
    /// and are read in place through a local view, with no copy out of the buffer.
    pub fn new_in_place(grid: &Grid) -> Result<Block, String> {
        Block::with_buffers(grid, true)
    }

    fn with_buffers(grid: &Grid, in_place: bool) -> Result<Block, String> {
        let n = grid.n;
        let coords = grid.coords(rank_me());
        let bounds = |a: usize, c: usize| (c * n / grid.dims[a], (c + 1) * n / grid.dims[a]);
        let origin = [0, 1, 2].map(|a| bounds(a, coords[a]).0);
        let len = [0, 1, 2].map(|a| bounds(a, coords[a]).1 - bounds(a, coords[a]).0);
        let neighbours = std::array::from_fn(|s| grid.neighbour(coords, s));

        let cur = Field::new(len, origin, n);
        let next = cur.clone();
        let buffers = if in_place {
            let (recv, everyone) = receive_buffers(&cur, new_viewable)?;
            Buffers::Viewable { recv, everyone }
        } else {
            let (recv, everyone) = receive_buffers(&cur, new_array)?;
            Buffers::Segment { recv, everyone }
        };
        Ok(Block {
            n,
            cur,
            next,
            neighbours,
            buffers,
            send: Vec::new(),
            incoming: Vec::new(),
            halo: Vec::new(),
        })
    }

    /// The current values, interior and halos (what a Containment Domain preserves).
    pub fn values_mut(&mut self) -> &mut [f64] {
        &mut self.cur.data
    }

    /// Iteration `iteration` (collective): one Jacobi sweep into the next buffer, the exchange
    /// of its faces into the neighbours' halos (with a barrier), then the swept values become
    /// the current ones.
    pub fn step(&mut self, iteration: usize) {
        self.sweep();
        self.exchange_halos(iteration);
        std::mem::swap(&mut self.cur, &mut self.next);
    }

    /// One Jacobi sweep of the interior, from the current values into the next buffer.
    fn sweep(&mut self) {
        self.cur.sweep(&mut self.next);
    }

    /// Sends the next buffer's faces into the neighbours' receive buffers of `iteration`'s
    /// parity, waits for all ranks (a barrier), then fills the next buffer's halos from this
    /// rank's receive buffers.
    fn exchange_halos(&mut self, iteration: usize) {
        let parity = iteration % 2;
        let next = &mut self.next;
        for s in 0..SIDES {
            let Some(to) = self.neighbours[s] else {
                continue;
            };
            self.send.clear();
            next.for_face(s, true, |p| self.send.push(next.data[p]));
            let at = parity * SIDES + opposite(s);
            match &self.buffers {
                Buffers::Segment { everyone, .. } => {
                    pgas::rput_slice(&self.send, everyone[to][at]).wait()
                }
                // Never refused: the neighbour reads this buffer only after the barrier below
                // and is done with it before the next barrier, after which the other parity's
                // buffer is written.
                Buffers::Viewable { everyone, .. } => pgas::view_put(&self.send, everyone[to][at])
                    .unwrap_or_else(|e| panic!("halo exchange: {e}")),
            }
        }
        // All faces of this iteration have landed; the other parity's buffers are the ones
        // written next, so nobody overwrites a buffer that is still being read.
        barrier();
        for s in 0..SIDES {
            if self.neighbours[s].is_none() {
                continue;
            }
            let len = next.face_len(s);
            self.halo.clear();
            next.for_face(s, false, |p| self.halo.push(p));
            let halo = &self.halo;
            let mut fill = |values: &[f64]| {
                for (&p, &v) in halo.iter().zip(values) {
                    next.data[p] = v;
                }
            };
            match &self.buffers {
                Buffers::Segment { recv, .. } => {
                    self.incoming.resize(len, 0.0);
                    pgas::rget_into(recv[parity * SIDES + s], &mut self.incoming);
                    fill(&self.incoming);
                }
                Buffers::Viewable { recv, .. } => {
                    pgas::with_local_mut(recv[parity * SIDES + s], len, |values| fill(values))
                        .unwrap_or_else(|e| panic!("halo exchange: {e}"))
                }
            }
        }
    }

    /// The checksum of the whole grid's current values (collective: reduced over all ranks).
    pub fn checksum(&self) -> Checksum {
        let Checksum { sum, print } = self.cur.checksum(self.n);
        let sum = reduce_all(sum, |a: i128, b: i128| a + b).wait();
        let print = reduce_all(print, |a: u64, b: u64| a.wrapping_add(b)).wait();
        Checksum { sum, print }
    }

    /// What this rank reports after a run of `iters` iterations that took `seconds`
    /// (collective): the reduced [`Block::checksum`], checked here, inside the job, so that a
    /// failure stops every process (under mpirun too): an error on a rank whose reduced
    /// checksum differs from rank 0's, and on rank 0 if `serial_check` and the [`serial_run`]'s
    /// differs.
    pub fn report(
        &self,
        iters: usize,
        seconds: f64,
        serial_check: bool,
    ) -> Result<RankReport, String> {
        let checksum = self.checksum();
        if broadcast(checksum, 0).wait() != checksum {
            return Err("this rank's reduced checksum differs from rank 0's".into());
        }
        let serial_checked = rank_me() == 0 && serial_check;
        if serial_checked {
            let serial = serial_run(self.n, iters);
            if serial != checksum {
                return Err(format!(
                    "the parallel run differs from the serial run: checksum {:.17e} vs {:.17e}, \
                     fingerprint {:#018x} vs {:#018x}",
                    checksum.value(),
                    serial.value(),
                    checksum.print,
                    serial.print
                ));
            }
        }
        Ok(RankReport {
            checksum,
            seconds,
            serial_checked,
        })
    }
}

/// What each rank reports back.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct RankReport {
    /// The reduced checksum (the same on every rank).
    pub checksum: Checksum,
    /// This rank's time for the iterations.
    pub seconds: f64,
    /// Whether this rank repeated the run serially and found the same checksum (rank 0, small
    /// grids).
    pub serial_checked: bool,
}

/// What the program prints, from the ranks' checked reports.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// The checksum every rank reduced.
    pub checksum: Checksum,
    /// The slowest rank's time.
    pub seconds: f64,
    /// "identical to serial run" or "serial check skipped".
    pub serial_note: &'static str,
}

/// The summary of every rank's report, in rank order (as [`crate::run`] gathers them).
pub fn summarize(reports: &[RankReport]) -> Summary {
    let first = &reports[0];
    Summary {
        checksum: first.checksum,
        seconds: reports.iter().map(|r| r.seconds).fold(0.0, f64::max),
        serial_note: if first.serial_checked {
            "identical to serial run"
        } else {
            "serial check skipped"
        },
    }
}

impl Summary {
    /// The first line of the output: `program`, the decomposition, the time and rate, the
    /// serial note.
    pub fn headline(&self, program: &str, grid: &Grid, iters: usize) -> String {
        let (n, dims, seconds) = (grid.n, grid.dims, self.seconds);
        format!(
            "{program}: {} ranks as {}x{}x{}, n={n}, {iters} iterations in {seconds:.4} s \
             ({:.1} Mpoint/s); {}",
            grid.ranks,
            dims[0],
            dims[1],
            dims[2],
            (n * n * n * iters) as f64 / seconds / 1e6,
            self.serial_note
        )
    }

    /// The checksum line: the value with `{:.17e}` and the fingerprint.
    pub fn checksum_line(&self) -> String {
        format!(
            "checksum {:.17e} fingerprint {:#018x}",
            self.checksum.value(),
            self.checksum.print
        )
    }
}

/// The strict CD of one iteration of the CD stencil ([`cd_launch`]), spanning all ranks.
pub const ITERATION_CD: &str = "iteration";
/// The per-rank CD inside [`ITERATION_CD`], present when the configuration makes it relaxed
/// ([`relaxed_rank_cd`]).
pub const RANK_CD: &str = "rank_step";

/// Whether `config` says `kind = "relaxed"` for [`RANK_CD`] (level 2): then each iteration's
/// body runs in one relaxed CD per rank inside [`ITERATION_CD`], else there is no inner CD.
pub fn relaxed_rank_cd(config: &cd::CdConfig) -> bool {
    config.settings(RANK_CD, 2).kind == Some(cd::CdKindSetting::Relaxed)
}

/// The stencil under Containment Domains (`cd_stencil`'s run): on the job `job`, `iters`
/// iterations of `grid`, each a strict CD [`ITERATION_CD`] that preserves the rank's block and,
/// if [`relaxed_rank_cd`], runs the iteration in a relaxed CD [`RANK_CD`] per rank (entered
/// with `cd::relaxed`, so this does not depend on `kind` turning a `cd::strict` call into a
/// relaxed CD), which preserves the block by reference to the iteration's copy. Every rank
/// ends with [`conclude`] of its [`Block::report`] (`serial_check` as there); the outcome holds
/// them and the CD report.
pub fn cd_launch(
    job: &LaunchConfig,
    config: cd::CdConfig,
    grid: &Grid,
    iters: usize,
    serial_check: bool,
) -> Result<cd::CdOutcome<Concluded<RankReport>>, cd::CdLaunchError> {
    let relaxed = relaxed_rank_cd(&config);
    cd::launch(job, config, RpcTable::new(), || {
        let mut block = Block::new(grid).unwrap_or_else(|e| panic!("rank {}: {e}", rank_me()));
        barrier();
        let start = Instant::now();
        // A restart resumes at the iteration its checkpoint was taken before.
        let first = cd::restarted().map_or(0, |r| r.iteration as usize);
        for t in first..iters {
            cd::strict(ITERATION_CD, |c| {
                // First execution: saves the block; a re-execution: restores it. After a
                // completed execution the current values are in the other buffer, but both
                // have the same shape and the restored values are the iteration's input
                // either way.
                c.preserve_slice("grid", block.values_mut());
                if !relaxed {
                    block.step(t);
                    return Ok(());
                }
                cd::relaxed(RANK_CD, |r| {
                    // Equal to "iteration"'s copy: preserved by reference, not copied again.
                    r.preserve_slice("grid", block.values_mut());
                    block.step(t);
                    Ok(())
                })
            })?;
        }
        let seconds = secs(start.elapsed());
        Ok(conclude(block.report(iters, seconds, serial_check)))
    })
}

/// [`cd_launch`] for a program that runs the CD stencil as one part of its work (the
/// escalation table of `lulesh-bench`): an `n`^3 grid on `ranks` ranks for `iters` iterations
/// under `config`, checked as `cd_stencil` checks it (every rank's reduced checksum equals rank
/// 0's, and with `serial_check` the serial run's). Returns the checksum and the CD report in
/// the process that ran rank 0 (`None` in the others, under mpirun), or any error (the
/// problem's, the job's, a failed check) as text; prints only what the CD runtime prints.
pub fn cd_run(
    n: usize,
    iters: usize,
    ranks: usize,
    serial_check: bool,
    config: cd::CdConfig,
) -> Result<Option<(Checksum, cd::Report)>, String> {
    let grid = Grid::new(n, ranks)?;
    let job = job_config(ranks, grid.segment_bytes()?)?;
    let outcome = cd_launch(&job, config, &grid, iters, serial_check).map_err(|e| e.to_string())?;
    let reports = gathered(outcome.results)?;
    Ok(reports.map(|r| (summarize(&r).checksum, outcome.report)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_grids_are_as_cubic_as_possible() {
        assert_eq!(process_grid(1), [1, 1, 1]);
        assert_eq!(process_grid(4), [2, 2, 1]);
        assert_eq!(process_grid(6), [3, 2, 1]);
        assert_eq!(process_grid(8), [2, 2, 2]);
        assert_eq!(process_grid(7), [7, 1, 1]);
    }

    #[test]
    fn grids_refuse_bad_edges() {
        assert!(
            Grid::new(MAX_N + 1, 1)
                .unwrap_err()
                .contains("above the limit")
        );
        assert!(Grid::new(1, 8).unwrap_err().contains("too small"));
        assert!(Grid::new(8, 8).is_ok());
    }

    #[test]
    fn serial_runs_stay_in_range_and_are_repeatable() {
        let a = serial_run(6, 3);
        assert_eq!(a, serial_run(6, 3));
        assert!(a.value() > 0.0 && a.value() <= 216.0);
        assert_ne!(a, serial_run(6, 4));
    }
}
