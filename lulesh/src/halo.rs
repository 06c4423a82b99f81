//! The geometry of the 26-neighbour halo exchanges of the reference
//! (lulesh-comm.cc), independent of how bytes travel: which neighbours take
//! part in each exchange, where each message sits in the receiver's buffer,
//! and which block entries a message carries, in the reference's order.
//!
//! Directions are `[col, row, plane]` offsets in `{-1, 0, 1}`, listed in
//! [`DIRS`] in the order the reference posts, sends and unpacks them: the six
//! faces, the twelve edges, the eight corners.

use crate::comm::Msg;
use crate::layout::{BlockLayout, CACHE_COHERENCE_PAD_REAL};

/// Fields of the widest exchange (`MAX_FIELDS_PER_MPI_COMM`: x, y, z, xd, yd, zd).
pub const MAX_FIELDS_PER_COMM: usize = 6;

/// Neighbour offsets `[col, row, plane]` in the reference's message order.
pub const DIRS: [[i32; 3]; 26] = [
    // faces: planeMin, planeMax, rowMin, rowMax, colMin, colMax
    [0, 0, -1],
    [0, 0, 1],
    [0, -1, 0],
    [0, 1, 0],
    [-1, 0, 0],
    [1, 0, 0],
    // edges: rowMin&colMin, rowMin&planeMin, colMin&planeMin,
    // rowMax&colMax, rowMax&planeMax, colMax&planeMax,
    // rowMax&colMin, rowMin&planeMax, colMin&planeMax,
    // rowMin&colMax, rowMax&planeMin, colMax&planeMin
    [-1, -1, 0],
    [0, -1, -1],
    [-1, 0, -1],
    [1, 1, 0],
    [0, 1, 1],
    [1, 0, 1],
    [-1, 1, 0],
    [0, -1, 1],
    [-1, 0, 1],
    [1, -1, 0],
    [0, 1, -1],
    [1, 0, -1],
    // corners (col, row, plane): (0,0,0), (0,0,1), (1,0,0), (1,0,1),
    // (0,1,0), (0,1,1), (1,1,0), (1,1,1)
    [-1, -1, -1],
    [-1, -1, 1],
    [1, -1, -1],
    [1, -1, 1],
    [-1, 1, -1],
    [-1, 1, 1],
    [1, 1, -1],
    [1, 1, 1],
];

/// Face, edge or corner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One nonzero offset.
    Face,
    /// Two nonzero offsets.
    Edge,
    /// Three nonzero offsets.
    Corner,
}

/// Whether direction `d` is a face, an edge or a corner.
pub fn kind(d: [i32; 3]) -> Kind {
    match d.iter().filter(|&&c| c != 0).count() {
        1 => Kind::Face,
        2 => Kind::Edge,
        _ => Kind::Corner,
    }
}

/// Index in [`DIRS`] of the opposite direction.
pub fn opposite(dir: usize) -> usize {
    let [c, r, p] = DIRS[dir];
    DIRS.iter()
        .position(|&d| d == [-c, -r, -p])
        .expect("every direction has an opposite")
}

/// True if the neighbour in direction `d` has a lower rank (its most
/// significant nonzero offset, plane before row before col, is negative).
/// The reference's `doRecv == false` skips receiving from exactly these, and
/// `doSend == false` skips sending to the others.
pub fn is_lower(d: [i32; 3]) -> bool {
    let [c, r, p] = d;
    if p != 0 {
        p < 0
    } else if r != 0 {
        r < 0
    } else {
        c < 0
    }
}

/// The `doRecv` / `doSend` / `planeOnly` arguments the reference passes to
/// `CommRecv` / `CommSend` for each exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    /// Receive also from lower-ranked neighbours.
    pub do_recv: bool,
    /// Send also to higher-ranked neighbours.
    pub do_send: bool,
    /// Faces only (no edges, no corners).
    pub plane_only: bool,
}

impl Pattern {
    /// The pattern of `msg`.
    pub fn of(msg: Msg) -> Pattern {
        match msg {
            Msg::SumBoundaryNodes => Pattern {
                do_recv: true,
                do_send: true,
                plane_only: false,
            },
            // Each shared node has one owner: the highest-ranked block holding it.
            Msg::SyncPosVel => Pattern {
                do_recv: false,
                do_send: false,
                plane_only: false,
            },
            Msg::MonoQ => Pattern {
                do_recv: true,
                do_send: true,
                plane_only: true,
            },
        }
    }

    fn admits(&self, d: [i32; 3]) -> bool {
        !self.plane_only || kind(d) == Kind::Face
    }

    /// Whether a block receives from its neighbour in direction `d` (if it exists).
    pub fn receives_from(&self, d: [i32; 3]) -> bool {
        self.admits(d) && (self.do_recv || !is_lower(d))
    }

    /// Whether a block sends to its neighbour in direction `d` (if it exists).
    pub fn sends_to(&self, d: [i32; 3]) -> bool {
        self.admits(d) && (self.do_send || is_lower(d))
    }
}

/// True if `layout`'s block has a neighbour in direction `d`.
pub fn has_neighbour(layout: &BlockLayout, d: [i32; 3]) -> bool {
    let ok = |off: i32, min: bool, max: bool| match off {
        -1 => min,
        1 => max,
        _ => true,
    };
    ok(d[0], layout.col_min, layout.col_max)
        && ok(d[1], layout.row_min, layout.row_max)
        && ok(d[2], layout.plane_min, layout.plane_max)
}

/// Rank of the neighbour in direction `d` (which must exist).
pub fn neighbour_rank(layout: &BlockLayout, d: [i32; 3]) -> i32 {
    let tp = layout.tp;
    layout.rank + d[2] * tp * tp + d[1] * tp + d[0]
}

/// Reals in one rank's communication buffer (the reference's `comBufSize`).
pub fn buffer_len(layout: &BlockLayout) -> usize {
    DIRS.iter()
        .filter(|&&d| has_neighbour(layout, d))
        .map(|&d| match kind(d) {
            Kind::Face => layout.max_plane_size * MAX_FIELDS_PER_COMM,
            Kind::Edge => layout.max_edge_size * MAX_FIELDS_PER_COMM,
            Kind::Corner => CACHE_COHERENCE_PAD_REAL,
        })
        .sum()
}

/// Where each message of an exchange sits in a rank's buffer, by direction,
/// as `CommRecv` (receiving side, `receive == true`) or `CommSend` (sending
/// side) lay them out: faces at `pmsg * maxPlaneComm`, edges after all faces
/// at `emsg * maxEdgeComm`, corners after all edges one pad apart. `None` for
/// directions without a message.
pub fn slots(
    layout: &BlockLayout,
    pattern: Pattern,
    fields: usize,
    receive: bool,
) -> [Option<usize>; 26] {
    let max_plane_comm = fields * layout.max_plane_size;
    let max_edge_comm = fields * layout.max_edge_size;
    let (mut pmsg, mut emsg, mut cmsg) = (0, 0, 0);
    let mut out = [None; 26];
    for (slot, &d) in out.iter_mut().zip(DIRS.iter()) {
        let takes_part = if receive {
            pattern.receives_from(d)
        } else {
            pattern.sends_to(d)
        };
        if !(has_neighbour(layout, d) && takes_part) {
            continue;
        }
        let at = pmsg * max_plane_comm + emsg * max_edge_comm + cmsg * CACHE_COHERENCE_PAD_REAL;
        *slot = Some(at);
        match kind(d) {
            Kind::Face => pmsg += 1,
            Kind::Edge => emsg += 1,
            Kind::Corner => cmsg += 1,
        }
    }
    out
}

/// The block entries on the side `d` of a `dims = [dx, dy, dz]` block, in
/// the order the reference packs and unpacks them (plane outermost, column
/// innermost).
pub fn side_indices(dims: [usize; 3], d: [i32; 3]) -> impl Iterator<Item = usize> {
    let [dx, dy, dz] = dims;
    let range = |off: i32, n: usize| match off {
        -1 => 0..1,
        1 => n - 1..n,
        _ => 0..n,
    };
    let (cs, rs, ps) = (range(d[0], dx), range(d[1], dy), range(d[2], dz));
    ps.flat_map(move |p| {
        let cs = cs.clone();
        rs.clone()
            .flat_map(move |r| cs.clone().map(move |c| p * dx * dy + r * dx + c))
    })
}

/// Number of entries on side `d` of a `dims` block.
pub fn side_len(dims: [usize; 3], d: [i32; 3]) -> usize {
    let n = |off: i32, n: usize| if off == 0 { n } else { 1 };
    n(d[0], dims[0]) * n(d[1], dims[1]) * n(d[2], dims[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_are_distinct_and_grouped() {
        for (i, a) in DIRS.iter().enumerate() {
            assert!(DIRS[i + 1..].iter().all(|b| b != a));
            let expect = match i {
                0..6 => Kind::Face,
                6..18 => Kind::Edge,
                _ => Kind::Corner,
            };
            assert_eq!(kind(*a), expect);
            assert_eq!(opposite(opposite(i)), i);
        }
    }

    #[test]
    fn gating_matches_the_reference_tables() {
        // Receives posted without doRecv in CommRecv (the reference's listing).
        let ungated_recv: Vec<usize> = (0..26)
            .filter(|&i| Pattern::of(Msg::SyncPosVel).receives_from(DIRS[i]))
            .collect();
        assert_eq!(
            ungated_recv,
            vec![1, 3, 5, 9, 10, 11, 12, 13, 14, 19, 21, 23, 25]
        );
        // Sends made without doSend in CommSend.
        let ungated_send: Vec<usize> = (0..26)
            .filter(|&i| Pattern::of(Msg::SyncPosVel).sends_to(DIRS[i]))
            .collect();
        assert_eq!(
            ungated_send,
            vec![0, 2, 4, 6, 7, 8, 15, 16, 17, 18, 20, 22, 24]
        );
        for i in 0..26 {
            let p = Pattern::of(Msg::SyncPosVel);
            assert_eq!(p.sends_to(DIRS[i]), p.receives_from(DIRS[opposite(i)]));
        }
    }

    #[test]
    fn side_indices_follow_the_reference_loops() {
        let dims = [3, 4, 5];
        let (dx, dy, dz) = (3, 4, 5);
        let row_max: Vec<usize> = side_indices(dims, [0, 1, 0]).collect();
        let mut expect = Vec::new();
        for i in 0..dz {
            for j in 0..dx {
                expect.push(dx * (dy - 1) + i * dx * dy + j);
            }
        }
        assert_eq!(row_max, expect);
        let col_max: Vec<usize> = side_indices(dims, [1, 0, 0]).collect();
        let mut expect = Vec::new();
        for i in 0..dz {
            for j in 0..dy {
                expect.push(dx - 1 + i * dx * dy + j * dx);
            }
        }
        assert_eq!(col_max, expect);
        let edge: Vec<usize> = side_indices(dims, [1, 0, 1]).collect();
        let expect: Vec<usize> = (0..dy)
            .map(|i| dx * dy * (dz - 1) + dx - 1 + i * dx)
            .collect();
        assert_eq!(edge, expect);
        let corner: Vec<usize> = side_indices(dims, [-1, 1, 1]).collect();
        assert_eq!(corner, vec![dx * dy * (dz - 1) + dx * (dy - 1)]);
        for d in DIRS {
            assert_eq!(side_indices(dims, d).count(), side_len(dims, d));
        }
    }

    #[test]
    fn slots_fit_in_the_buffer() {
        let l = BlockLayout::decompose(27, 13, 6).unwrap(); // the centre block
        assert!(DIRS.iter().all(|&d| has_neighbour(&l, d)));
        let len = buffer_len(&l);
        for msg in [Msg::SumBoundaryNodes, Msg::SyncPosVel, Msg::MonoQ] {
            let p = Pattern::of(msg);
            let fields = if msg == Msg::SyncPosVel { 6 } else { 3 };
            let s = slots(&l, p, fields, true);
            for (i, at) in s.iter().enumerate() {
                if let Some(at) = at {
                    assert!(at + fields * side_len([7, 7, 7], DIRS[i]) <= len);
                }
            }
        }
        let s = slots(&l, Pattern::of(Msg::SumBoundaryNodes), 3, true);
        assert_eq!(s[1], Some(3 * l.max_plane_size));
        assert_eq!(s[6], Some(6 * 3 * l.max_plane_size));
        assert_eq!(
            s[18],
            Some(6 * 3 * l.max_plane_size + 12 * 3 * l.max_edge_size)
        );
        assert_eq!(neighbour_rank(&l, [1, 1, 1]), 26);
        assert_eq!(neighbour_rank(&l, [-1, 0, 0]), 12);
    }
}
