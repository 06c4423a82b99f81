//! The checksum every stretch of bytes the job writes to a file carries (a file medium entry,
//! a spilled relaxed log): a CRC-32 of the bytes, stored as four little-endian bytes right
//! after them, and checked when they are read back, so that a copy changed on disk (a failing
//! disk, a stray write) is refused instead of restored or replayed.
//!
//! CRC-32 detects every change of up to 3 bits and every burst of up to 32 bits in a stretch,
//! and any other change but for one chance in 2^32; `crc32fast` computes it at memory speed
//! (hardware carry-less multiplication where the processor has it). It is no defence against
//! a deliberate forgery, which the job's private directory (`private_files.rs`) keeps out.

/// Bytes of the checksum after the bytes it covers.
pub(crate) const LEN: usize = 4;

/// The words of a message about bytes whose checksum does not hold (also what
/// [`crate::launch`]'s hint looks for in an escalation's reasons).
pub(crate) const FAILED: &str = "failed its checksum";

/// The checksum of `bytes`, to store right after them.
pub(crate) fn trailer(bytes: &[u8]) -> [u8; LEN] {
    crc32fast::hash(bytes).to_le_bytes()
}

/// The bytes of `stored` (bytes and their checksum, as written) if their checksum holds.
pub(crate) fn verified(stored: &[u8]) -> Option<&[u8]> {
    let split = stored.len().checked_sub(LEN)?;
    let (bytes, sum) = stored.split_at(split);
    (trailer(bytes) == sum).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_flipped_bit_or_cut_is_refused() {
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut stored = bytes.clone();
        stored.extend_from_slice(&trailer(&bytes));
        assert_eq!(verified(&stored), Some(&bytes[..]));
        for i in 0..stored.len() {
            for bit in 0..8 {
                let mut bad = stored.clone();
                bad[i] ^= 1 << bit;
                assert_eq!(verified(&bad), None, "byte {i} bit {bit}");
            }
        }
        assert_eq!(verified(&stored[..stored.len() - 1]), None);
        assert_eq!(verified(&stored[1..]), None);
        assert_eq!(verified(&[1, 2]), None, "shorter than a checksum");
        assert_eq!(verified(&trailer(&[])), Some(&[][..]), "empty bytes");
    }
}
