//! Restriction from a fine level to the next coarser one: cell averages (8 fine cells) for
//! cell-centred data and face averages (4 fine faces) for face-centred coefficients.

use crate::comm::{Plan, Route};
use crate::level::{GridBox, Level};
use crate::transfer::{RestrictItem, Transfer};

/// What is restricted: cell-centred data or faces normal to i, j or k.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestrictionType {
    /// Cell-centred (average of 8).
    Cell,
    /// Faces normal to i (average of 4; includes the high face).
    FaceI,
    /// Faces normal to j.
    FaceJ,
    /// Faces normal to k.
    FaceK,
}

impl RestrictionType {
    fn index(self) -> usize {
        match self {
            RestrictionType::Cell => 0,
            RestrictionType::FaceI => 1,
            RestrictionType::FaceJ => 2,
            RestrictionType::FaceK => 3,
        }
    }

    /// Extent (coarse cells) of one fine box's restriction.
    fn dim(self, fine_box_dim: i32) -> [i32; 3] {
        let half = fine_box_dim / 2;
        match self {
            RestrictionType::Cell => [half; 3],
            RestrictionType::FaceI => [half + 1, half, half],
            RestrictionType::FaceJ => [half, half + 1, half],
            RestrictionType::FaceK => [half, half, half + 1],
        }
    }
}

const KINDS: [RestrictionType; 4] = [
    RestrictionType::Cell,
    RestrictionType::FaceI,
    RestrictionType::FaceJ,
    RestrictionType::FaceK,
];

/// Global id of the coarse box covering the fine box with global id `fid`, and the offset
/// (in coarse cells, box-local) where that fine box's restriction lands.
fn coarse_of(coarse: &Level, fine: &Level, fid: usize) -> (usize, [i32; 3]) {
    let n = fine.boxes_in;
    let fc = [fid as i32 % n, (fid as i32 / n) % n, fid as i32 / (n * n)];
    let cc = fc.map(|c| c * coarse.boxes_in / fine.boxes_in);
    let id = (cc[0] + cc[1] * coarse.boxes_in + cc[2] * coarse.boxes_in * coarse.boxes_in) as usize;
    let off = [0, 1, 2].map(|a| fc[a] * fine.box_dim / 2 - cc[a] * coarse.box_dim);
    (id, off)
}

/// Collective (every rank, in level order): the messages between `fine` and `coarse`.
pub fn build_transfer(fine: &Level, coarse: &Level) -> Transfer {
    let items = |len: usize, reverse: bool| -> Vec<(Route, RestrictItem)> {
        let mut list = Vec::new();
        for fid in 0..fine.rank_of_box.len() {
            let (cid, off) = coarse_of(coarse, fine, fid);
            let (f, c) = (fine.rank_of_box[fid], coarse.rank_of_box[cid]);
            if f == c {
                continue;
            }
            let (src, dst) = if reverse { (c, f) } else { (f, c) };
            list.push((
                Route { src, dst, len },
                RestrictItem {
                    fine: fid,
                    coarse: cid,
                    off,
                },
            ));
        }
        list
    };
    let restrict = KINDS.map(|k| {
        let d = k.dim(fine.box_dim);
        Plan::build(items((d[0] * d[1] * d[2]) as usize, false))
    });
    let s = (fine.box_dim / 2 + 4) as usize;
    let interp = Plan::build(items(s * s * s, true));
    Transfer { restrict, interp }
}

/// Appends the restriction of `fbx`'s vector `id_f` (k, j, i order) to `out`.
fn restrict_box(fbx: &GridBox, id_f: usize, kind: RestrictionType, out: &mut Vec<f64>) {
    let dim = kind.dim(fbx.dim);
    let (fjs, fks) = (fbx.js, fbx.ks);
    let read = &fbx.vectors[id_f];
    for k in 0..dim[2] {
        for j in 0..dim[1] {
            for i in 0..dim[0] {
                let r = fbx.idx(2 * i, 2 * j, 2 * k);
                out.push(match kind {
                    RestrictionType::Cell => {
                        (read[r]
                            + read[r + 1]
                            + read[r + fjs]
                            + read[r + 1 + fjs]
                            + read[r + fks]
                            + read[r + 1 + fks]
                            + read[r + fjs + fks]
                            + read[r + 1 + fjs + fks])
                            * 0.125
                    }
                    RestrictionType::FaceI => {
                        (read[r] + read[r + fjs] + read[r + fks] + read[r + fjs + fks]) * 0.25
                    }
                    RestrictionType::FaceJ => {
                        (read[r] + read[r + 1] + read[r + fks] + read[r + 1 + fks]) * 0.25
                    }
                    RestrictionType::FaceK => {
                        (read[r] + read[r + 1] + read[r + fjs] + read[r + 1 + fjs]) * 0.25
                    }
                });
            }
        }
    }
}

/// Writes `data` (k, j, i order, extent `dim`) into `cbx`'s vector `id_c` at `off`.
fn write_region(cbx: &mut GridBox, id_c: usize, off: [i32; 3], dim: [i32; 3], data: &[f64]) {
    let w = dim[0] as usize;
    let mut at = 0;
    for k in 0..dim[2] {
        for j in 0..dim[1] {
            let r = cbx.idx(off[0], off[1] + j, off[2] + k);
            cbx.vectors[id_c][r..r + w].copy_from_slice(&data[at..at + w]);
            at += w;
        }
    }
}

/// `coarse[id_c] = R fine[id_f]` for every fine box.
pub fn restriction(
    coarse: &mut Level,
    id_c: usize,
    fine: &Level,
    id_f: usize,
    kind: RestrictionType,
) {
    let dim = kind.dim(fine.box_dim);
    let n = (dim[0] * dim[1] * dim[2]) as usize;
    let plan = fine
        .transfer
        .as_ref()
        .map(|t| &t.restrict[kind.index()])
        .filter(|p| !p.is_idle());
    let slot = plan.map(|p| {
        p.send(|it, buf| restrict_box(&fine.boxes[fine.local_of[it.fine]], id_f, kind, buf))
    });
    let mut buf = Vec::with_capacity(n);
    for fbx in &fine.boxes {
        let (cid, off) = coarse_of(coarse, fine, fbx.global_id);
        let cb = coarse.local_of[cid];
        if cb == usize::MAX {
            continue;
        }
        buf.clear();
        restrict_box(fbx, id_f, kind, &mut buf);
        write_region(&mut coarse.boxes[cb], id_c, off, dim, &buf);
    }
    if let (Some(p), Some(slot)) = (plan, slot) {
        p.receive(
            slot,
            |_| n,
            |it, data| {
                let cb = coarse.local_of[it.coarse];
                write_region(&mut coarse.boxes[cb], id_c, it.off, dim, data);
            },
        );
    }
}

/// Sends the coarse regions (2 ghost layers around each fine box's footprint) that fine
/// boxes on other ranks interpolate from, and returns, per fine box of this rank, the
/// region received for it (`None` when its coarse box is on this rank).
pub(crate) fn coarse_regions(fine: &Level, coarse: &Level, id_c: usize) -> Vec<Option<Vec<f64>>> {
    let mut received = vec![None; fine.boxes.len()];
    let Some(plan) = fine
        .transfer
        .as_ref()
        .map(|t| &t.interp)
        .filter(|p| !p.is_idle())
    else {
        return received;
    };
    let s = fine.box_dim / 2 + 4;
    let slot = plan.send(|it, buf| {
        let cbx = &coarse.boxes[coarse.local_of[it.coarse]];
        let v = &cbx.vectors[id_c];
        for k in 0..s {
            for j in 0..s {
                let r = cbx.idx(it.off[0] - 2, it.off[1] - 2 + j, it.off[2] - 2 + k);
                buf.extend_from_slice(&v[r..r + s as usize]);
            }
        }
    });
    let n = (s * s * s) as usize;
    plan.receive(
        slot,
        |_| n,
        |it, data| {
            received[fine.local_of[it.fine]] = Some(data.to_vec());
        },
    );
    received
}

/// Index within `coarse.boxes` of the coarse box covering fine box `fb` (if on this rank),
/// and the offset (in coarse cells, box-local) where that fine box's restriction lands.
pub(crate) fn covering_box(coarse: &Level, fine: &Level, fb: usize) -> (Option<usize>, [i32; 3]) {
    let (cid, off) = coarse_of(coarse, fine, fine.boxes[fb].global_id);
    let cb = coarse.local_of[cid];
    ((cb != usize::MAX).then_some(cb), off)
}
