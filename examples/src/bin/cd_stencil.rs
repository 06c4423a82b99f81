//! The 3-D Jacobi stencil of `stencil` under Containment Domains: every iteration is a strict
//! CD spanning all ranks that preserves the rank's grid block; with `--cd-config FILE.toml`
//! the cd-runtime's injector adds soft errors and rank losses, the failing iteration is
//! restored and re-executed by all ranks, and the checksum is the same as without faults.
//!
//! The grid and the numerics are `stencil`'s (copied: the examples share no stencil module),
//! so the checksum also equals `stencil`'s for the same `--n` and `--iters`.
//!
//! What a CD preserves: the block (interior and halos, by `preserve_slice`). The receive
//! buffers in the segment need no preservation: every execution of an iteration, first or
//! repeated, has all neighbours write the faces it reads before the barrier it reads after,
//! so a segment wiped by a rank loss is rewritten before it is read. (A rank loss happens at
//! the end of an execution, and the neighbours write the next faces only after the CD's
//! agreement, which the lost rank joins after its loss.)
//!
//! Prints the checksum with `{:.17e}`, then the CD report table.

use std::path::PathBuf;
use std::time::Instant;

use cd_runtime as cd;
use clap::Parser;
use pgas::{
    GlobalPtr, LaunchConfig, RpcTable, barrier, new_array, rank_me, rank_n, reduce_all, world,
};
use pgas_examples::{CommonArgs, exchange, fail, mix64, parse_positive, secs, segment_for};

/// Largest `--n`: keeps `n^3` values of at most 1 within the fixed-point checksum's range.
const MAX_N: usize = 1024;
/// Largest `--n` for which rank 0 repeats the run serially by default.
const SERIAL_MAX_N: usize = 96;
/// Fixed-point scale of the exact checksum: values are summed as integers of 2^-96.
const FIXED_SCALE: f64 = 79_228_162_514_264_337_593_543_950_336.0; // 2^96

/// Command line of `cd_stencil`.
#[derive(Debug, Parser)]
#[command(about = "3-D 7-point Jacobi with a strict Containment Domain per iteration")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Global grid edge (interior points per dimension).
    #[arg(long, default_value_t = 64, value_parser = parse_positive)]
    n: usize,
    /// Jacobi iterations.
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Skip rank 0's serial re-run (done by default when n <= 96).
    #[arg(long)]
    no_serial: bool,
    /// CD configuration (TOML, see cd_runtime::config); default: CDs on, no faults injected.
    #[arg(long, value_name = "FILE.toml")]
    cd_config: Option<PathBuf>,
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
fn process_grid(ranks: usize) -> [usize; 3] {
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

/// A block of the grid with one-cell halos, x fastest.
#[derive(Clone)]
struct Block {
    /// Interior extents.
    len: [usize; 3],
    /// Global coordinates of the first interior point.
    origin: [usize; 3],
    data: Vec<f64>,
}

impl Block {
    /// The block of `len` interior points at `origin`, halos included, set to initial values.
    fn new(len: [usize; 3], origin: [usize; 3], n: usize) -> Block {
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
        Block { len, origin, data }
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
    fn sweep(&self, out: &mut Block) {
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
    fn checksum(&self, n: usize) -> (i128, u64) {
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
        (sum, print)
    }
}

/// The same Jacobi run on one array (the check of small grids).
fn serial(n: usize, iters: usize) -> (i128, u64) {
    let mut cur = Block::new([n; 3], [0; 3], n);
    let mut next = cur.clone();
    for _ in 0..iters {
        cur.sweep(&mut next);
        std::mem::swap(&mut cur, &mut next);
    }
    cur.checksum(n)
}

/// The checksum as a number: the exact sum, rounded once to f64.
fn checksum_value(sum: i128) -> f64 {
    sum as f64 / FIXED_SCALE
}

/// What each rank reports back.
struct Report {
    sum: i128,
    print: u64,
    seconds: f64,
    serial: Option<(i128, u64)>,
}

fn main() {
    const NAME: &str = "cd_stencil";
    let args = Args::parse();
    let ranks = args.common.ranks().unwrap_or_else(|e| fail(NAME, e));
    let (n, iters) = (args.n, args.iters);
    if n > MAX_N {
        fail(
            NAME,
            format!("--n {n} is above the limit of {MAX_N} (the checksum's range)"),
        );
    }
    let config = match &args.cd_config {
        Some(path) => cd::CdConfig::from_file(path).unwrap_or_else(|e| fail(NAME, e)),
        None => cd::CdConfig::default(),
    };
    let dims = process_grid(ranks);
    if let Some(axis) = (0..3).find(|&a| dims[a] > n) {
        fail(
            NAME,
            format!(
                "--n {n} is too small for the {}x{}x{} process grid of {ranks} ranks: axis {axis} \
                 needs at least {} points",
                dims[0], dims[1], dims[2], dims[axis]
            ),
        );
    }
    let serial_check = !args.no_serial && n <= SERIAL_MAX_N;
    // Receive buffers: two parities of six faces, each at most (n/p + 1)^2 points.
    let face_max = (0..3)
        .map(|a| {
            (0..3)
                .filter(|&b| b != a)
                .map(|b| n / dims[b] + 1)
                .product::<usize>()
        })
        .max()
        .unwrap_or(0);
    let segment = segment_for(2 * SIDES * (face_max * 8 + 64)).unwrap_or_else(|e| fail(NAME, e));
    let job = LaunchConfig::new(ranks).segment_bytes(segment);

    let outcome = cd::launch(&job, config, RpcTable::new(), || {
        let me = rank_me();
        let coords = [
            me % dims[0],
            me / dims[0] % dims[1],
            me / (dims[0] * dims[1]),
        ];
        let bounds = |a: usize, c: usize| (c * n / dims[a], (c + 1) * n / dims[a]);
        let origin = [0, 1, 2].map(|a| bounds(a, coords[a]).0);
        let len = [0, 1, 2].map(|a| bounds(a, coords[a]).1 - bounds(a, coords[a]).0);
        let neighbour = |s: usize| -> Option<usize> {
            let (axis, dir) = side(s);
            let c = coords[axis] as isize + dir;
            if c < 0 || c >= dims[axis] as isize {
                return None;
            }
            let mut nc = coords;
            nc[axis] = c as usize;
            Some(nc[0] + dims[0] * (nc[1] + dims[1] * nc[2]))
        };

        let mut cur = Block::new(len, origin, n);
        let mut next = cur.clone();
        // recv[parity * SIDES + s] receives the face coming from side s of this block.
        let mut recv: Vec<GlobalPtr<f64>> = Vec::with_capacity(2 * SIDES);
        for _parity in 0..2 {
            for s in 0..SIDES {
                recv.push(new_array(cur.face_len(s)).unwrap_or_else(|e| {
                    panic!("rank {me}: cannot allocate a receive buffer: {e}")
                }));
            }
        }
        let everyone = exchange(recv.clone());
        if let Some(r) = (0..rank_n()).find(|&r| everyone[r].len() != 2 * SIDES) {
            panic!("rank {r} published {} receive buffers", everyone[r].len());
        }

        let mut send = Vec::new();
        let mut incoming = Vec::new();
        barrier();
        let start = Instant::now();
        for t in 0..iters {
            cd::strict("iteration", |c| {
                // First execution: saves the block; a re-execution: restores it. After a
                // completed execution `cur` is the other buffer, but both have the same shape
                // and the restored values are the iteration's input either way.
                c.preserve_slice("grid", &mut cur.data);
                cur.sweep(&mut next);
                let parity = t % 2;
                for s in 0..SIDES {
                    let Some(to) = neighbour(s) else { continue };
                    send.clear();
                    next.for_face(s, true, |p| send.push(next.data[p]));
                    pgas::rput_slice(&send, everyone[to][parity * SIDES + opposite(s)]).wait();
                }
                // All faces of this execution have landed.
                barrier();
                for s in 0..SIDES {
                    if neighbour(s).is_none() {
                        continue;
                    }
                    incoming.resize(next.face_len(s), 0.0);
                    pgas::rget_into(recv[parity * SIDES + s], &mut incoming);
                    let mut values = incoming.iter();
                    let mut halo = Vec::with_capacity(incoming.len());
                    next.for_face(s, false, |p| halo.push(p));
                    for p in halo {
                        next.data[p] = *values.next().expect("face sizes agree");
                    }
                }
                std::mem::swap(&mut cur, &mut next);
                Ok(())
            })?;
        }
        let seconds = secs(start.elapsed());

        let (sum, print) = cur.checksum(n);
        let sum = reduce_all(&world(), sum, |a: i128, b: i128| a + b).wait();
        let print = reduce_all(&world(), print, |a: u64, b: u64| a.wrapping_add(b)).wait();
        let serial = (me == 0 && serial_check).then(|| serial(n, iters));
        Ok(Report {
            sum,
            print,
            seconds,
            serial,
        })
    })
    .unwrap_or_else(|e| fail(NAME, e));

    let reports = &outcome.results;
    let first = &reports[0];
    if let Some(r) = reports
        .iter()
        .position(|r| (r.sum, r.print) != (first.sum, first.print))
    {
        fail(
            NAME,
            format!("rank {r}'s reduced checksum differs from rank 0's"),
        );
    }
    let checksum = checksum_value(first.sum);
    let seconds = reports.iter().map(|r| r.seconds).fold(0.0, f64::max);
    let serial_note = match first.serial {
        Some((sum, print)) if (sum, print) == (first.sum, first.print) => "identical to serial run",
        Some((sum, print)) => fail(
            NAME,
            format!(
                "the parallel run differs from the serial run: checksum {checksum:.17e} vs \
                 {:.17e}, fingerprint {:#018x} vs {print:#018x}",
                checksum_value(sum),
                first.print
            ),
        ),
        None => "serial check skipped",
    };
    let stats = outcome.report.cd("iteration").cloned().unwrap_or_default();
    println!(
        "cd_stencil: {ranks} ranks as {}x{}x{}, n={n}, {iters} iterations in {seconds:.4} s \
         ({:.1} Mpoint/s); {serial_note}",
        dims[0],
        dims[1],
        dims[2],
        (n * n * n * iters) as f64 / seconds / 1e6
    );
    println!(
        "cd: {} faults injected, {} re-executions, {} escalations",
        stats.injected, stats.reexecutions, stats.escalations
    );
    println!("checksum {checksum:.17e} fingerprint {:#018x}", first.print);
    print!("{}", outcome.report.table());
}
