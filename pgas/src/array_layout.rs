//! How a distributed array's global indices map onto the members of its team: [`Layout`]
//! (block or cyclic), the indices a member owns ([`LocalIndices`]), and the split of a global
//! index range into one contiguous run of local elements per owner ([`Piece`]).
//!
//! Pure index arithmetic, no runtime: `dist_array.rs` moves the data.

use std::ops::Range;

/// How the elements of a [`DistArray`](crate::dist_array::DistArray) are spread over its
/// team's `P` members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Contiguous blocks in team-rank order, as even as possible: with `len = q·P + r`, the
    /// first `r` members hold `q + 1` elements and the others `q`.
    Block,
    /// Round robin: element `i` lives on team rank `i mod P`, at local index `i / P`.
    Cyclic,
}

/// The global indices one member owns, in increasing order (which is also their local order):
/// `start, start + step, ...`, `len` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalIndices {
    start: usize,
    step: usize,
    len: usize,
}

impl LocalIndices {
    /// How many indices.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the member owns no element (an array shorter than its team).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The global index of local element `k` (`k < len()`).
    pub fn global(&self, k: usize) -> usize {
        self.start + k * self.step
    }

    /// Whether global index `i` is one of these.
    pub fn contains(&self, i: usize) -> bool {
        i >= self.start
            && (i - self.start).is_multiple_of(self.step)
            && (i - self.start) / self.step < self.len
    }

    /// The global indices, in local order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + use<> {
        let (start, step) = (self.start, self.step);
        (0..self.len).map(move |k| start + k * step)
    }
}

/// One owner's part of a global index range: `count` consecutive local elements from
/// `local_start` on team rank `rank`, which are the range's elements `first, first + stride,
/// ...` (positions counted from the range's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// The owner's team rank.
    pub rank: usize,
    /// The first local index on the owner.
    pub local_start: usize,
    /// How many elements.
    pub count: usize,
    /// Position of the first element within the range.
    pub first: usize,
    /// Distance between consecutive elements of the piece within the range (1 for a block).
    pub stride: usize,
}

impl Layout {
    /// Elements held by team rank `rank` of `ranks` in an array of `len`.
    pub fn local_len(self, rank: usize, len: usize, ranks: usize) -> usize {
        len / ranks + usize::from(rank < len % ranks)
    }

    /// The global indices team rank `rank` of `ranks` owns in an array of `len`.
    pub fn local_indices(self, rank: usize, len: usize, ranks: usize) -> LocalIndices {
        let count = self.local_len(rank, len, ranks);
        match self {
            Layout::Block => LocalIndices {
                start: rank * (len / ranks) + rank.min(len % ranks),
                step: 1,
                len: count,
            },
            Layout::Cyclic => LocalIndices {
                start: rank,
                step: ranks,
                len: count,
            },
        }
    }

    /// The owner (team rank) and local index of global index `i < len`.
    #[inline]
    pub fn place(self, i: usize, len: usize, ranks: usize) -> (usize, usize) {
        debug_assert!(i < len, "place of index {i} in an array of {len}");
        match self {
            Layout::Block => {
                let (q, r) = (len / ranks, len % ranks);
                // The first r members hold q + 1 elements each, the rest q (q > 0 when an
                // index lies past the long blocks, since i < len = q·P + r).
                let long = r * (q + 1);
                if i < long {
                    (i / (q + 1), i % (q + 1))
                } else {
                    (r + (i - long) / q, (i - long) % q)
                }
            }
            Layout::Cyclic => (i % ranks, i / ranks),
        }
    }

    /// The pieces of `range` (within `0..len`), one per owner holding part of it, in
    /// increasing team rank.
    pub fn pieces(self, range: Range<usize>, len: usize, ranks: usize) -> Vec<Piece> {
        debug_assert!(range.start <= range.end && range.end <= len);
        if range.is_empty() {
            return Vec::new();
        }
        match self {
            Layout::Block => {
                let mut out = Vec::new();
                let mut i = range.start;
                while i < range.end {
                    let (rank, local) = self.place(i, len, ranks);
                    let count = (self.local_len(rank, len, ranks) - local).min(range.end - i);
                    out.push(Piece {
                        rank,
                        local_start: local,
                        count,
                        first: i - range.start,
                        stride: 1,
                    });
                    i += count;
                }
                out
            }
            Layout::Cyclic => (0..ranks)
                .filter_map(|rank| {
                    // The first index of the range on this rank.
                    let g = range.start + (rank + ranks - range.start % ranks) % ranks;
                    (g < range.end).then(|| Piece {
                        rank,
                        local_start: g / ranks,
                        count: (range.end - 1 - g) / ranks + 1,
                        first: g - range.start,
                        stride: ranks,
                    })
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Layout, Piece};

    /// Every index of every (len, ranks) up to a size is placed on exactly one owner, at the
    /// local index its owner's `local_indices` lists it at.
    #[test]
    fn place_and_local_indices_agree() {
        for layout in [Layout::Block, Layout::Cyclic] {
            for ranks in 1..=9 {
                for len in 0..=40 {
                    let owned: Vec<_> = (0..ranks)
                        .map(|r| layout.local_indices(r, len, ranks))
                        .collect();
                    assert_eq!(owned.iter().map(|o| o.len()).sum::<usize>(), len);
                    for i in 0..len {
                        let (r, k) = layout.place(i, len, ranks);
                        assert_eq!(owned[r].global(k), i, "{layout:?} len {len} ranks {ranks}");
                        assert!(owned[r].contains(i));
                        assert_eq!(
                            (0..ranks).filter(|&o| owned[o].contains(i)).count(),
                            1,
                            "index {i} has one owner"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn block_sizes_differ_by_at_most_one() {
        let sizes: Vec<_> = (0..4).map(|r| Layout::Block.local_len(r, 10, 4)).collect();
        assert_eq!(sizes, [3, 3, 2, 2]);
        assert_eq!(Layout::Block.place(6, 10, 4), (2, 0));
        assert_eq!(Layout::Block.place(9, 10, 4), (3, 1));
        // Fewer elements than ranks: the last ranks own nothing.
        let sizes: Vec<_> = (0..4).map(|r| Layout::Block.local_len(r, 2, 4)).collect();
        assert_eq!(sizes, [1, 1, 0, 0]);
    }

    /// The pieces of every range cover it exactly once, each element on its owner.
    #[test]
    fn pieces_cover_the_range_once() {
        for layout in [Layout::Block, Layout::Cyclic] {
            for ranks in 1..=6 {
                for len in 0..=25 {
                    for start in 0..=len {
                        for end in start..=len {
                            let mut seen = vec![0; end - start];
                            let pieces = layout.pieces(start..end, len, ranks);
                            for p in &pieces {
                                assert!(p.count > 0);
                                for k in 0..p.count {
                                    let pos = p.first + k * p.stride;
                                    seen[pos] += 1;
                                    let place = layout.place(start + pos, len, ranks);
                                    assert_eq!(place, (p.rank, p.local_start + k));
                                }
                            }
                            assert!(seen.iter().all(|&s| s == 1), "{layout:?} {start}..{end}");
                            let owners: Vec<_> = pieces.iter().map(|p| p.rank).collect();
                            assert!(
                                owners.windows(2).all(|w| w[0] < w[1]),
                                "one piece per owner"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn cyclic_pieces_are_strided() {
        assert_eq!(
            Layout::Cyclic.pieces(3..9, 10, 4),
            vec![
                Piece {
                    rank: 0,
                    local_start: 1,
                    count: 2,
                    first: 1,
                    stride: 4
                },
                Piece {
                    rank: 1,
                    local_start: 1,
                    count: 1,
                    first: 2,
                    stride: 4
                },
                Piece {
                    rank: 2,
                    local_start: 1,
                    count: 1,
                    first: 3,
                    stride: 4
                },
                Piece {
                    rank: 3,
                    local_start: 0,
                    count: 2,
                    first: 0,
                    stride: 4
                },
            ]
        );
    }
}
