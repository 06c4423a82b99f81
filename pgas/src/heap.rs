//! The allocator of a rank's shared segment: first fit over an ordered free list, coalescing
//! neighbours on free, so `new_` / `delete_` can run for the whole life of a program.

use std::collections::{BTreeMap, HashMap};

use crate::error::PgasError;

/// Free and live blocks of one segment, by byte offset.
#[derive(Debug)]
pub struct Heap {
    rank: usize,
    free: BTreeMap<usize, usize>,
    live: HashMap<usize, usize>,
}

impl Heap {
    /// A heap managing `start .. end` of `rank`'s segment.
    pub fn new(rank: usize, start: usize, end: usize) -> Heap {
        let mut free = BTreeMap::new();
        if end > start {
            free.insert(start, end - start);
        }
        Heap {
            rank,
            free,
            live: HashMap::new(),
        }
    }

    /// Allocates `size` bytes (at least 1) aligned to `align` (a power of two); returns the offset.
    pub fn alloc(&mut self, size: usize, align: usize) -> Result<usize, PgasError> {
        debug_assert!(align.is_power_of_two());
        let size = size.max(1);
        let found = self.free.iter().find_map(|(&start, &len)| {
            let aligned = start.checked_next_multiple_of(align)?;
            let end = aligned.checked_add(size)?;
            (end <= start + len).then_some((start, len, aligned))
        });
        let Some((start, len, aligned)) = found else {
            return Err(PgasError::OutOfMemory {
                rank: self.rank,
                requested: size,
                largest_free: self.free.values().copied().max().unwrap_or(0),
            });
        };
        self.free.remove(&start);
        if aligned > start {
            self.free.insert(start, aligned - start);
        }
        let end = aligned + size;
        if end < start + len {
            self.free.insert(end, start + len - end);
        }
        self.live.insert(aligned, size);
        Ok(aligned)
    }

    /// Allocates `size` bytes (at least 1) exactly at `offset`, which must be aligned to
    /// `align` and start a free range of that size (a replayed allocation gets its logged
    /// address back).
    pub fn alloc_at(
        &mut self,
        offset: usize,
        size: usize,
        align: usize,
    ) -> Result<usize, PgasError> {
        let size = size.max(1);
        let refuse = |reason: &'static str| PgasError::ReplayAlloc {
            rank: self.rank,
            offset,
            size,
            reason,
        };
        if !offset.is_multiple_of(align) {
            return Err(refuse("not aligned for the type"));
        }
        let end = offset
            .checked_add(size)
            .ok_or(refuse("beyond the segment"))?;
        let Some((&start, &len)) = self.free.range(..=offset).next_back() else {
            return Err(refuse("not in a free block"));
        };
        if start + len <= offset {
            return Err(refuse("not in a free block"));
        }
        if end > start + len {
            return Err(refuse("the free block there is too small"));
        }
        self.free.remove(&start);
        if offset > start {
            self.free.insert(start, offset - start);
        }
        if end < start + len {
            self.free.insert(end, start + len - end);
        }
        self.live.insert(offset, size);
        Ok(offset)
    }

    /// Size of the live allocation that starts at `offset`.
    pub fn size_of(&self, offset: usize) -> Option<usize> {
        self.live.get(&offset).copied()
    }

    /// Frees the allocation that starts at `offset`; returns its size.
    pub fn free(&mut self, offset: usize) -> Result<usize, PgasError> {
        let size = self.live.remove(&offset).ok_or(PgasError::BadFree {
            what: "a pointer",
            rank: self.rank,
            offset,
        })?;
        let (mut start, mut len) = (offset, size);
        if let Some((&prev, &plen)) = self.free.range(..start).next_back() {
            if prev + plen == start {
                self.free.remove(&prev);
                start = prev;
                len += plen;
            }
        }
        if let Some(&nlen) = self.free.get(&(start + len)) {
            self.free.remove(&(start + len));
            len += nlen;
        }
        self.free.insert(start, len);
        Ok(size)
    }

    /// Bytes currently allocated.
    pub fn in_use(&self) -> usize {
        self.live.values().sum()
    }

    /// Number of free blocks (1 when nothing is allocated: coalescing works).
    #[cfg(test)]
    pub fn free_blocks(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn alloc_free_coalesce() {
        let mut h = Heap::new(0, 64, 1024);
        let a = h.alloc(10, 8).unwrap();
        let b = h.alloc(100, 64).unwrap();
        let c = h.alloc(1, 1).unwrap();
        assert_eq!(a, 64);
        assert_eq!(b % 64, 0);
        assert!(b >= a + 10 && c >= b + 100 || c < b);
        h.free(b).unwrap();
        h.free(a).unwrap();
        h.free(c).unwrap();
        assert_eq!(h.free_blocks(), 1);
        assert_eq!(h.in_use(), 0);
        assert!(matches!(
            h.free(a),
            Err(PgasError::BadFree { offset: 64, .. })
        ));
    }

    #[test]
    fn exhaustion_is_an_error_with_sizes() {
        let mut h = Heap::new(3, 0, 256);
        h.alloc(200, 8).unwrap();
        let e = h.alloc(100, 8).unwrap_err();
        assert_eq!(
            e,
            PgasError::OutOfMemory {
                rank: 3,
                requested: 100,
                largest_free: 56
            }
        );
        assert!(e.to_string().contains("rank 3"));
    }

    #[test]
    fn alloc_at_takes_exactly_a_free_range() {
        let mut h = Heap::new(0, 64, 1024);
        let a = h.alloc(100, 8).unwrap();
        h.free(a).unwrap();
        assert_eq!(h.alloc_at(a, 100, 8), Ok(a));
        assert_eq!(
            h.alloc_at(256, 8, 8),
            Ok(256),
            "from the middle of a free block"
        );
        assert_eq!(h.size_of(256), Some(8));
        let refused = |r: Result<usize, PgasError>| match r {
            Err(PgasError::ReplayAlloc { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(refused(h.alloc_at(a, 8, 8)), "not in a free block");
        assert_eq!(refused(h.alloc_at(a + 96, 8, 8)), "not in a free block");
        assert_eq!(refused(h.alloc_at(260, 8, 8)), "not aligned for the type");
        assert_eq!(
            refused(h.alloc_at(248, 16, 8)),
            "the free block there is too small"
        );
        assert_eq!(
            refused(h.alloc_at(1020, 8, 4)),
            "the free block there is too small"
        );
        h.free(256).unwrap();
        h.free(a).unwrap();
        assert_eq!(h.free_blocks(), 1);
    }

    proptest! {
        #[test]
        fn random_sequences_never_overlap(ops in proptest::collection::vec((0usize..300, 0u32..4, any::<bool>()), 1..200)) {
            let mut h = Heap::new(0, 0, 4096);
            let mut live: Vec<(usize, usize)> = Vec::new();
            for (size, align_pow, free_one) in ops {
                if free_one && !live.is_empty() {
                    let (off, _) = live.remove(size % live.len());
                    h.free(off).unwrap();
                } else if let Ok(off) = h.alloc(size, 1 << align_pow) {
                    let sz = size.max(1);
                    prop_assert_eq!(off % (1 << align_pow), 0);
                    prop_assert!(off + sz <= 4096);
                    for &(o, s) in &live {
                        prop_assert!(off + sz <= o || o + s <= off, "overlap");
                    }
                    live.push((off, sz));
                }
            }
            for (off, _) in live { h.free(off).unwrap(); }
            prop_assert_eq!(h.free_blocks(), 1);
        }
    }
}
