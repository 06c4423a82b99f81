//! The remote bytes this rank read since its log last reached the buddy (`durable.rs`): a
//! put over one of them must flush first, or the get performed again after a loss would read
//! the put's bytes instead of the ones the first execution read.

use std::cell::RefCell;

/// Ranges kept before they are merged into one per rank (conservative: a merged range only
/// flushes more often, never less).
const KEPT: usize = 64;

/// Ranges read, as (rank, start, end) in that rank's segment.
#[derive(Default)]
pub(crate) struct UnflushedReads {
    ranges: RefCell<Vec<(usize, usize, usize)>>,
}

impl UnflushedReads {
    /// A get of `len` bytes at `offset` of `rank` was performed.
    pub(crate) fn note(&self, rank: usize, offset: usize, len: usize) {
        let mut ranges = self.ranges.borrow_mut();
        let end = offset.saturating_add(len);
        if let Some(last) = ranges.last_mut() {
            if last.0 == rank && offset <= last.2 && last.1 <= end {
                *last = (rank, last.1.min(offset), last.2.max(end));
                return;
            }
        }
        ranges.push((rank, offset, end));
        if ranges.len() > KEPT {
            ranges.sort_unstable();
            ranges.dedup_by(|next, kept| {
                let same = next.0 == kept.0;
                if same {
                    kept.2 = kept.2.max(next.2);
                }
                same
            });
        }
    }

    /// True if `len` bytes at `offset` of `rank` overlap a range read.
    pub(crate) fn overlaps(&self, rank: usize, offset: usize, len: usize) -> bool {
        let end = offset.saturating_add(len);
        self.ranges
            .borrow()
            .iter()
            .any(|&(r, s, e)| r == rank && offset < e && s < end)
    }

    /// The log reached the buddy: the reads so far are in it.
    pub(crate) fn clear(&self) {
        self.ranges.borrow_mut().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_overlaps_only_the_bytes_read_on_its_rank() {
        let r = UnflushedReads::default();
        r.note(1, 16, 8);
        r.note(1, 24, 8);
        r.note(2, 0, 8);
        assert!(r.overlaps(1, 20, 1));
        assert!(r.overlaps(1, 31, 4));
        assert!(!r.overlaps(1, 32, 8));
        assert!(!r.overlaps(1, 8, 8));
        assert!(!r.overlaps(0, 16, 8));
        assert!(r.overlaps(2, 7, 1));
        r.clear();
        assert!(!r.overlaps(1, 20, 1));
    }

    #[test]
    fn many_ranges_merge_per_rank_without_losing_one() {
        let r = UnflushedReads::default();
        for i in 0..200 {
            r.note(i % 3, i * 100, 8);
        }
        assert!(r.ranges.borrow().len() <= KEPT + 1);
        for i in 0..200 {
            assert!(r.overlaps(i % 3, i * 100 + 4, 1), "read {i} lost");
        }
        assert!(!r.overlaps(3, 0, 1 << 20));
    }
}
