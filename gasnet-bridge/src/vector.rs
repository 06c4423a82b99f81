//! Vector transfers (GASNet-EX VIS style): one put or get of many pieces of one rank's
//! segment, each piece a byte range `(offset, len)`, with the bytes of all pieces back to back
//! in one local buffer.
//!
//! Between ranks that share memory each piece is copied directly; across hosts the whole list
//! travels as one request (piece list and packed bytes) that the target scatters, or gathers
//! into one reply. On the wire, pieces of one length at a constant step are one group. A vector put counts one incoming write per piece, with consecutive IWC
//! values, so that a layer that reports each piece as its own write (pgas's hook) sees the
//! same counts as if the pieces had been put one by one.

use crate::counters::{WriteAck, WriteCounters, WriteCounting};
use crate::error::BridgeError;
use crate::segment::Segment;

/// The IWC value that piece `i` of a vector put acknowledged by `ack` (for `pieces` pieces)
/// produced: the pieces are counted in order, the last one gets `ack.iwc`; 0 for every piece
/// of an uncounted write ([`WriteAck::UNCOUNTED`]).
///
/// # Panics
/// If `i >= pieces`.
pub fn piece_iwc(ack: WriteAck, pieces: usize, i: usize) -> u64 {
    assert!(i < pieces, "piece {i} of a {pieces}-piece vector put");
    if ack == WriteAck::UNCOUNTED {
        return 0;
    }
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

/// Writes the pieces from `src` (packed) into `segment` and counts one write per piece (if
/// the job counts writes, `counting`).
pub(crate) fn scatter_counted(
    segment: &Segment,
    counting: WriteCounting,
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
    Ok(counting.count_n(counters, pieces.len() as u64))
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

/// A list of pieces, `(offset, len)` each.
pub(crate) type Pieces = Vec<(usize, usize)>;

/// Bytes one group of pieces takes in a vector message: first offset, length, step between
/// offsets (two's complement) and count, little-endian `u64`s.
pub(crate) const GROUP_BYTES: usize = 32;

/// Appends the piece list to `out` in the wire encoding and returns the number of groups: runs
/// of pieces of one length whose offsets advance by one step are sent as one group, so that a
/// strided block costs one group per row, not one entry per piece.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn encode_pieces(pieces: &[(usize, usize)], out: &mut Vec<u8>) -> usize {
    let mut groups = 0;
    let mut i = 0;
    while i < pieces.len() {
        let (offset, len) = pieces[i];
        let mut step = 0u64;
        let mut count = 1;
        if let Some(&(next, next_len)) = pieces.get(i + 1) {
            if next_len == len {
                step = (next as u64).wrapping_sub(offset as u64);
                count = 2;
                while let Some(&(o, l)) = pieces.get(i + count) {
                    let prev = pieces[i + count - 1].0 as u64;
                    if l != len || (o as u64).wrapping_sub(prev) != step {
                        break;
                    }
                    count += 1;
                }
            }
        }
        for w in [offset as u64, len as u64, step, count as u64] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        groups += 1;
        i += count;
    }
    groups
}

/// Decodes `groups` groups holding `pieces` pieces in all from the front of `bytes`; returns
/// the pieces and the bytes after the list, or None if the list is malformed (too short, a
/// different piece count, a value that does not fit a `usize`).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn decode_pieces(bytes: &[u8], groups: usize, pieces: usize) -> Option<(Pieces, &[u8])> {
    let list = groups.checked_mul(GROUP_BYTES)?;
    if bytes.len() < list || groups > pieces {
        return None;
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    // The header's piece count bounds what a (malformed) group may make the loop allocate.
    let mut out = Vec::with_capacity(pieces.min(1 << 16));
    for g in 0..groups {
        let at = g * GROUP_BYTES;
        let (first, len, step, count) = (word(at), word(at + 8), word(at + 16), word(at + 24));
        if count == 0 || count > (pieces - out.len()) as u64 {
            return None;
        }
        let len = usize::try_from(len).ok()?;
        for k in 0..count {
            let offset = first.wrapping_add(step.wrapping_mul(k));
            out.push((usize::try_from(offset).ok()?, len));
        }
    }
    (out.len() == pieces).then_some((out, &bytes[list..]))
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
        let ack = scatter_counted(&seg, WriteCounting::On, &counters, &pieces, &src).unwrap();
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
        let err = scatter_counted(
            &seg,
            WriteCounting::On,
            &counters,
            &[(0, 2), (15, 2)],
            &[9; 4],
        )
        .unwrap_err();
        assert!(
            matches!(err, BridgeError::OutOfSegment { offset: 15, .. }),
            "{err}"
        );
        let mut first = [0u8; 2];
        seg.read(0, &mut first).unwrap();
        assert_eq!(first, [0, 0], "the valid piece was not written either");
        assert_eq!(counters.iwc(), 0);
        let err =
            scatter_counted(&seg, WriteCounting::On, &counters, &[(0, 2)], &[9; 3]).unwrap_err();
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
    fn piece_lists_round_trip_and_malformed_ones_are_refused() {
        // Two strided rows (one going backwards), then irregular pieces.
        let mut pieces: Vec<(usize, usize)> = (0..5).map(|k| (100 + 16 * k, 8)).collect();
        pieces.extend((0..4).map(|k| (900 - 24 * k, 8)));
        pieces.extend([(7, 1), (usize::MAX >> 1, 0), (0, 12), (3, 12)]);
        let mut bytes = Vec::new();
        let groups = encode_pieces(&pieces, &mut bytes);
        assert_eq!(
            groups, 5,
            "a group per row, then (7,1), (MAX,0), and the pair of 12s"
        );
        assert_eq!(bytes.len(), groups * GROUP_BYTES);
        bytes.extend_from_slice(b"tail");
        let n = pieces.len();
        let (back, rest) = decode_pieces(&bytes, groups, n).unwrap();
        assert_eq!(back, pieces);
        assert_eq!(rest, b"tail");
        assert!(decode_pieces(&bytes[..GROUP_BYTES * groups - 1], groups, n).is_none());
        assert!(
            decode_pieces(&bytes, groups, n - 1).is_none(),
            "more pieces than announced"
        );
        assert!(
            decode_pieces(&bytes, groups, n + 1).is_none(),
            "fewer pieces than announced"
        );
        assert!(decode_pieces(&bytes, usize::MAX, n).is_none());
        let mut empty = Vec::new();
        assert_eq!(encode_pieces(&[], &mut empty), 0);
        assert_eq!(decode_pieces(&empty, 0, 0).unwrap().0, vec![]);
    }
}
