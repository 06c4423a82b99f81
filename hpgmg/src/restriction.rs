//! Restriction from a fine level to the next coarser one: cell averages (8 fine cells) for
//! cell-centred data and face averages (4 fine faces) for face-centred coefficients.

use crate::level::Level;

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

/// Index within `coarse.boxes` of the coarse box covering fine box `fb`, and the offset (in
/// coarse cells, box-local) where that fine box's restriction lands.
pub(crate) fn covering_box(coarse: &Level, fine: &Level, fb: usize) -> (usize, [i32; 3]) {
    let flow = fine.boxes[fb].low;
    let cc = flow.map(|l| (l / fine.box_dim) * coarse.boxes_in / fine.boxes_in);
    let id = (cc[0] + cc[1] * coarse.boxes_in + cc[2] * coarse.boxes_in * coarse.boxes_in) as usize;
    let cb = coarse
        .boxes
        .iter()
        .position(|b| b.global_id == id)
        .expect("coarse box on this rank");
    let clow = coarse.boxes[cb].low;
    (
        cb,
        [
            flow[0] / 2 - clow[0],
            flow[1] / 2 - clow[1],
            flow[2] / 2 - clow[2],
        ],
    )
}

/// `coarse[id_c] = R fine[id_f]` for every fine box, in fine-box order.
pub fn restriction(
    coarse: &mut Level,
    id_c: usize,
    fine: &Level,
    id_f: usize,
    kind: RestrictionType,
) {
    let half = fine.box_dim / 2;
    let dim = match kind {
        RestrictionType::Cell => [half; 3],
        RestrictionType::FaceI => [half + 1, half, half],
        RestrictionType::FaceJ => [half, half + 1, half],
        RestrictionType::FaceK => [half, half, half + 1],
    };
    for fb in 0..fine.boxes.len() {
        let (cb, off) = covering_box(coarse, fine, fb);
        let fbx = &fine.boxes[fb];
        let (fjs, fks) = (fbx.js, fbx.ks);
        let read = &fbx.vectors[id_f];
        let cbx = &mut coarse.boxes[cb];
        let mut write = cbx.take(id_c);
        for k in 0..dim[2] {
            for j in 0..dim[1] {
                for i in 0..dim[0] {
                    let r = fbx.idx(2 * i, 2 * j, 2 * k);
                    let w = cbx.idx(off[0] + i, off[1] + j, off[2] + k);
                    write[w] = match kind {
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
                    };
                }
            }
        }
        cbx.put(id_c, write);
    }
}
