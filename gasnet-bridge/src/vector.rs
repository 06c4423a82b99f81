//! Vector transfers (GASNet-EX VIS style): one put or get of many pieces of one rank's
//! segment, each piece a byte range `(offset, len)`, with the bytes of all pieces back to back
//! in one local buffer.
//!
//! Between ranks that share memory each piece is copied directly; across hosts the whole list
//! travels as one request (piece list and packed bytes) that the target scatters, or gathers
//! into one reply. A vector put counts one incoming write per piece, with consecutive IWC
//! values, so that a layer that reports each piece as its own write (pgas's hook) sees the
//! same counts as if the pieces had been put one by one.

use crate::counters::{WriteAck, WriteCounters};
use crate::error::BridgeError;
use crate::segment::Segment;

/// Bytes one piece takes in a vector message: offset and length, little-endian `u64`s.
pub(crate) const PIECE_BYTES: usize = 16;

/// The IWC value that piece `i` of a vector put acknowledged by `ack` (for `pieces` pieces)
/// produced: the pieces are counted in order, the last one gets `ack.iwc`.
///
/// # Panics
/// If `i >= pieces`.
pub fn piece_iwc(ack: WriteAck, pieces: usize, i: usize) -> u64 {
    assert!(i < pieces, "piece {i} of a {pieces}-piece vector put");
    ack.iwc - (pieces - 1 - i) as u64
}

/// Total bytes of `pieces`, checking it equals `buffer` (the local side's length).
pub(crate) fn total_len(pieces: &[(usize, usize)], buffer: usize) -> Result<usize, BridgeError> {
    let total = pieces
        .iter()
        .try_fold(0usize, |acc, &(_, len)| acc.checked_add(len));
    match total {
        Some(t) if t == buffer => Ok(t),
        _ => Err(BridgeError::VectorLength {
            pieces: pieces.len(),
            total: total.unwrap_or(usize::MAX),
            buffer,
        }),
    }
}

/// Checks every piece lies in `segment`, so that a refused vector writes nothing.
pub(crate) fn check_pieces(
    segment: &Segment,
    pieces: &[(usize, usize)],
) -> Result<(), BridgeError> {
    pieces
        .iter()
        .try_for_each(|&(offset, len)| segment.check(offset, len))
}

/// Writes the pieces from `src` (packed) into `segment` and counts one write per piece.
pub(crate) fn scatter_counted(
    segment: &Segment,
    counters: &WriteCounters,
    pieces: &[(usize, usize)],
    src: &[u8],
) -> Result<WriteAck, BridgeError> {
    total_len(pieces, src.len())?;
    check_pieces(segment, pieces)?;
    if pieces.is_empty() {
        return Ok(WriteAck::default());
    }
    let mut at = 0;
    for &(offset, len) in pieces {
        segment.write(offset, &src[at..at + len])?;
        at += len;
    }
    Ok(counters.count_writes(pieces.len() as u64))
}

/// Reads the pieces of `segment` into `dst`, back to back.
pub(crate) fn gather(
    segment: &Segment,
    pieces: &[(usize, usize)],
    dst: &mut [u8],
) -> Result<(), BridgeError> {
    total_len(pieces, dst.len())?;
    check_pieces(segment, pieces)?;
    let mut at = 0;
    for &(offset, len) in pieces {
        segment.read(offset, &mut dst[at..at + len])?;
        at += len;
    }
    Ok(())
}

/// Appends the piece list to `out` in the wire encoding.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn encode_pieces(pieces: &[(usize, usize)], out: &mut Vec<u8>) {
    out.reserve(pieces.len() * PIECE_BYTES);
    for &(offset, len) in pieces {
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        out.extend_from_slice(&(len as u64).to_le_bytes());
    }
}

/// Decodes `n` pieces from the front of `bytes`; returns them and the bytes after the list,
/// or None if `bytes` is too short or a value does not fit a `usize`.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn decode_pieces(bytes: &[u8], n: usize) -> Option<(Vec<(usize, usize)>, &[u8])> {
    let list = n.checked_mul(PIECE_BYTES)?;
    if bytes.len() < list {
        return None;
    }
    let word = |at: usize| {
        usize::try_from(u64::from_le_bytes(
            bytes[at..at + 8].try_into().expect("8 bytes"),
        ))
        .ok()
    };
    let pieces = (0..n)
        .map(|i| Some((word(i * PIECE_BYTES)?, word(i * PIECE_BYTES + 8)?)))
        .collect::<Option<Vec<_>>>()?;
    Some((pieces, &bytes[list..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_then_gather_round_trips_and_counts_each_piece() {
        let seg = Segment::new(0, 64);
        let counters = WriteCounters::default();
        counters.set_ec(3);
        let pieces = [(40, 3), (0, 2), (10, 0), (20, 4)];
        let src = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        let ack = scatter_counted(&seg, &counters, &pieces, &src).unwrap();
        assert_eq!(ack, WriteAck { ec: 3, iwc: 4 });
        assert_eq!(piece_iwc(ack, 4, 0), 1);
        assert_eq!(piece_iwc(ack, 4, 3), 4);
        let mut back = [0u8; 9];
        gather(&seg, &pieces, &mut back).unwrap();
        assert_eq!(back, src);
        let mut at40 = [0u8; 3];
        seg.read(40, &mut at40).unwrap();
        assert_eq!(at40, [1, 2, 3]);
    }

    #[test]
    fn a_bad_piece_writes_nothing() {
        let seg = Segment::new(0, 16);
        let counters = WriteCounters::default();
        let err = scatter_counted(&seg, &counters, &[(0, 2), (15, 2)], &[9; 4]).unwrap_err();
        assert!(
            matches!(err, BridgeError::OutOfSegment { offset: 15, .. }),
            "{err}"
        );
        let mut first = [0u8; 2];
        seg.read(0, &mut first).unwrap();
        assert_eq!(first, [0, 0], "the valid piece was not written either");
        assert_eq!(counters.iwc(), 0);
        let err = scatter_counted(&seg, &counters, &[(0, 2)], &[9; 3]).unwrap_err();
        assert_eq!(
            err,
            BridgeError::VectorLength {
                pieces: 1,
                total: 2,
                buffer: 3
            }
        );
    }

    #[test]
    fn piece_lists_round_trip_and_short_input_is_refused() {
        let pieces = vec![(7, 1), (usize::MAX >> 1, 0), (0, 12)];
        let mut bytes = Vec::new();
        encode_pieces(&pieces, &mut bytes);
        bytes.extend_from_slice(b"tail");
        let (back, rest) = decode_pieces(&bytes, 3).unwrap();
        assert_eq!(back, pieces);
        assert_eq!(rest, b"tail");
        assert!(decode_pieces(&bytes[..47], 3).is_none());
        assert!(decode_pieces(&bytes, usize::MAX).is_none());
    }
}
