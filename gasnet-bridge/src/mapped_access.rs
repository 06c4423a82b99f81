//! Loads and stores into the segments this process maps (every rank's on smp, the ranks of
//! its host on mpi), checked, without a message and without counting a write: the co-located
//! accesses of a PGAS runtime (UPC++'s `local()`), and its own bookkeeping in its segment.
//!
//! Each access checks that the process maps the rank, that the bytes lie in the segment and,
//! for a typed access, that the address is aligned for the type; the copy itself goes through
//! `shared_copy`, the one way every conduit touches shared memory, so an access racing a
//! remote write to the same bytes reads or leaves a torn value but is never undefined
//! behaviour.

use bytemuck::Pod;

use crate::endpoint::Endpoint;
use crate::error::BridgeError;
use crate::shared_copy;

impl Endpoint {
    /// Reads a value of `rank`'s segment at `offset`, which this process maps.
    #[inline]
    pub fn load_mapped<T: Pod>(&self, rank: usize, offset: usize) -> Result<T, BridgeError> {
        let p = self.mapped_range(rank, offset, size_of::<T>(), align_of::<T>())?;
        // SAFETY: `mapped_range` checked that the value's bytes lie in a segment this process
        // maps, which stays mapped while the endpoint lives.
        Ok(unsafe { shared_copy::load(p.cast::<T>()) })
    }

    /// Writes `value` into `rank`'s segment at `offset`, which this process maps.
    #[inline]
    pub fn store_mapped<T: Pod>(
        &self,
        rank: usize,
        offset: usize,
        value: T,
    ) -> Result<(), BridgeError> {
        let p = self.mapped_range(rank, offset, size_of::<T>(), align_of::<T>())?;
        // SAFETY: as in `load_mapped`.
        unsafe { shared_copy::store(p.cast::<T>(), value) };
        Ok(())
    }

    /// Copies `dst.len()` bytes of `rank`'s segment from `offset` into `dst`.
    #[inline]
    pub fn read_mapped(
        &self,
        rank: usize,
        offset: usize,
        dst: &mut [u8],
    ) -> Result<(), BridgeError> {
        let p = self.mapped_range(rank, offset, dst.len(), 1)?;
        // SAFETY: as in `load_mapped`, for `dst.len()` bytes.
        unsafe { shared_copy::copy_out(p, dst) };
        Ok(())
    }

    /// Copies `src` into `rank`'s segment at `offset`.
    #[inline]
    pub fn write_mapped(&self, rank: usize, offset: usize, src: &[u8]) -> Result<(), BridgeError> {
        let p = self.mapped_range(rank, offset, src.len(), 1)?;
        // SAFETY: as in `load_mapped`, for `src.len()` bytes.
        unsafe { shared_copy::copy_in(p, src) };
        Ok(())
    }

    /// Sets `len` bytes of `rank`'s segment from `offset` to `byte`.
    pub fn fill_mapped(
        &self,
        rank: usize,
        offset: usize,
        len: usize,
        byte: u8,
    ) -> Result<(), BridgeError> {
        let p = self.mapped_range(rank, offset, len, 1)?;
        // SAFETY: as in `load_mapped`, for `len` bytes.
        unsafe { shared_copy::fill(p, byte, len) };
        Ok(())
    }

    /// The address of `len` bytes at `offset` of `rank`'s segment, aligned to `align`, after
    /// checking that this process maps that segment and the bytes lie inside it.
    #[inline]
    fn mapped_range(
        &self,
        rank: usize,
        offset: usize,
        len: usize,
        align: usize,
    ) -> Result<*mut u8, BridgeError> {
        let base = self.segment_base(rank)?;
        let segment_len = self.segment_len();
        if offset.checked_add(len).is_none_or(|end| end > segment_len) {
            return Err(BridgeError::OutOfSegment {
                rank,
                offset,
                len,
                segment_len,
            });
        }
        // Address arithmetic only: the checks above keep it inside the segment.
        let p = base.wrapping_add(offset);
        if !(p as usize).is_multiple_of(align) {
            return Err(BridgeError::Misaligned {
                rank,
                offset,
                align,
            });
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use crate::{BridgeError, HandlerTable, LaunchConfig, launch};

    #[test]
    fn mapped_accesses_are_checked_and_see_each_other() {
        let job = LaunchConfig::new(2).segment_bytes(1 << 12);
        launch(&job, HandlerTable::new(), |ep| {
            let other = 1 - ep.rank();
            if ep.rank() == 0 {
                ep.store_mapped::<u64>(other, 8, 0x0102_0304_0506_0708)
                    .unwrap();
                ep.write_mapped(other, 100, b"abc").unwrap();
                ep.fill_mapped(other, 200, 4, 7).unwrap();
            }
            ep.barrier().unwrap();
            if ep.rank() == 1 {
                assert_eq!(ep.load_mapped::<u64>(1, 8).unwrap(), 0x0102_0304_0506_0708);
                let mut bytes = [0u8; 3];
                ep.read_mapped(1, 100, &mut bytes).unwrap();
                assert_eq!(&bytes, b"abc");
                let mut filled = [0u8; 5];
                ep.read_mapped(1, 200, &mut filled).unwrap();
                assert_eq!(filled, [7, 7, 7, 7, 0]);
            }
            let len = ep.segment_len();
            assert!(matches!(
                ep.load_mapped::<u64>(other, len - 4),
                Err(BridgeError::OutOfSegment { .. })
            ));
            assert!(matches!(
                ep.fill_mapped(other, usize::MAX, 2, 0),
                Err(BridgeError::OutOfSegment { .. })
            ));
            assert!(matches!(
                ep.store_mapped::<u64>(other, 4, 1),
                Err(BridgeError::Misaligned { align: 8, .. })
            ));
            assert!(matches!(
                ep.write_mapped(2, 0, b"x"),
                Err(BridgeError::NoSuchRank { .. })
            ));
        })
        .unwrap();
    }
}
