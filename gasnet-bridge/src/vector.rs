//! Vector transfers (GASNet-EX VIS style): one put or get of many pieces of one rank's
//! segment, each piece a byte range `(offset, len)`, with the bytes of all pieces back to back
//! in one local buffer.
//!
//! Between ranks that share memory each piece is copied directly; across hosts the whole list
//! travels as one request (piece list and packed bytes) that the target scatters, or gathers
//! into one reply. On the wire, pieces of one length at a constant step are one group. A vector put counts one incoming write per piece, with consecutive IWC
//! values, so that a layer that reports each piece as its own write (pgas's hook) sees the
//! same counts as if the pieces had been put one by one.
//!
//! One transfer moves at most a segment's size in bytes, in at most [`max_pieces`] pieces, on
//! every conduit: a target across hosts then bounds what it allocates for a request by what
//! its header announces, before the bytes arrive, and refuses a header that announces more.

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

/// Most pieces one vector transfer may have between segments of `segment_len` bytes. A target
/// on another host decodes the piece list into `(offset, len)` pairs before it touches its
/// segment: with this bound that list is never larger than the segment itself, whatever a
/// garbled header claims.
pub fn max_pieces(segment_len: usize) -> usize {
    segment_len / size_of::<(usize, usize)>()
}

/// Total bytes of `pieces`, checking it equals `buffer` (the local side's length) and that the
/// transfer is within one transfer's limits: at most [`max_pieces`] pieces and `segment_len`
/// bytes (more bytes than a segment holds means pieces that overlap; such a transfer can be
/// split), so that a target across hosts can bound what it allocates for one.
pub(crate) fn total_len(
    pieces: &[(usize, usize)],
    buffer: usize,
    segment_len: usize,
) -> Result<usize, BridgeError> {
    let total = pieces
        .iter()
        .try_fold(0usize, |acc, &(_, len)| acc.checked_add(len));
    match total {
        Some(t) if t == buffer => {
            if pieces.len() > max_pieces(segment_len) || t > segment_len {
                return Err(BridgeError::VectorTooLarge {
                    pieces: pieces.len(),
                    total: t,
                    max_pieces: max_pieces(segment_len),
                    segment_len,
                });
            }
            Ok(t)
        }
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
    total_len(pieces, src.len(), segment.len())?;
    check_pieces(segment, pieces)?;
    if pieces.is_empty() {
        return Ok(WriteAck::default());
    }
    let ec = counting.epoch_now(counters);
    let mut at = 0;
    for &(offset, len) in pieces {
        segment.write(offset, &src[at..at + len])?;
        at += len;
    }
    Ok(counting.count_since(counters, pieces.len() as u64, ec))
}

/// Reads the pieces of `segment` into `dst`, back to back.
pub(crate) fn gather(
    segment: &Segment,
    pieces: &[(usize, usize)],
    dst: &mut [u8],
) -> Result<(), BridgeError> {
    total_len(pieces, dst.len(), segment.len())?;
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

/// Why a received piece list is refused: its bytes do not follow the protocol (the sender is
/// another program, or the message was garbled).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadPieceList {
    /// The header announces more groups than pieces (a group holds at least one).
    #[error("{groups} groups of pieces announced for {pieces} pieces")]
    Groups { groups: usize, pieces: usize },
    /// The header announces more groups than the list's bytes hold.
    #[error("{groups} groups of pieces announced in a list of {bytes} bytes")]
    Short { groups: usize, bytes: usize },
    /// The groups hold a different number of pieces than the header announced.
    #[error("the groups do not hold the {pieces} pieces announced")]
    Count { pieces: usize },
    /// An offset or length that does not fit this machine's `usize`.
    #[error("a piece offset or length of {value} does not fit an address")]
    Width { value: u64 },
    /// More pieces than one transfer may have ([`max_pieces`]).
    #[error("{pieces} pieces announced, more than the {max} one vector transfer may have")]
    Pieces { pieces: usize, max: usize },
    /// Pieces describing more bytes than one transfer may move (the segment size).
    #[error("the pieces describe more than the {max} bytes one vector transfer may move")]
    Bytes { max: usize },
}

/// Most bytes a vector request may have (piece list, then for a put the packed data) with a
/// header announcing `pieces` pieces in `groups` groups, for a target segment of `segment_len`
/// bytes: checked before a buffer for the request is allocated.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn max_request_bytes(
    pieces: usize,
    groups: usize,
    put: bool,
    segment_len: usize,
) -> Result<usize, BadPieceList> {
    let max = max_pieces(segment_len);
    if pieces > max {
        return Err(BadPieceList::Pieces { pieces, max });
    }
    if groups > pieces {
        return Err(BadPieceList::Groups { groups, pieces });
    }
    // Both fit: `groups <= pieces <= segment_len / 16`.
    Ok(groups * GROUP_BYTES + if put { segment_len } else { 0 })
}

/// Decodes `groups` groups holding `pieces` pieces in all from the front of `bytes`, for a
/// target segment of `segment_len` bytes; returns the pieces and the bytes after the list.
/// Refused before anything is allocated for it: a list that is too short, holds a different
/// piece count, has a value that does not fit a `usize`, or describes more pieces or bytes than
/// one transfer may move ([`total_len`]).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn decode_pieces(
    bytes: &[u8],
    groups: usize,
    pieces: usize,
    segment_len: usize,
) -> Result<(Pieces, &[u8]), BadPieceList> {
    max_request_bytes(pieces, groups, false, segment_len)?;
    let list = groups * GROUP_BYTES;
    if bytes.len() < list {
        return Err(BadPieceList::Short {
            groups,
            bytes: bytes.len(),
        });
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let width = |value: u64| usize::try_from(value).map_err(|_| BadPieceList::Width { value });
    let mut out = Vec::with_capacity(pieces.min(1 << 16));
    let mut total = 0usize;
    for g in 0..groups {
        let at = g * GROUP_BYTES;
        let (first, len, step, count) = (word(at), word(at + 8), word(at + 16), word(at + 24));
        if count == 0 || count > (pieces - out.len()) as u64 {
            return Err(BadPieceList::Count { pieces });
        }
        let len = width(len)?;
        // `count <= pieces`, which fits a usize; the group's bytes are added before its
        // pieces are pushed, so a list describing more than a segment stops here.
        total = (count as usize)
            .checked_mul(len)
            .and_then(|bytes| total.checked_add(bytes))
            .filter(|&t| t <= segment_len)
            .ok_or(BadPieceList::Bytes { max: segment_len })?;
        for k in 0..count {
            let offset = first.wrapping_add(step.wrapping_mul(k));
            out.push((width(offset)?, len));
        }
    }
    if out.len() != pieces {
        return Err(BadPieceList::Count { pieces });
    }
    Ok((out, &bytes[list..]))
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
        let seg = Segment::new(0, 64);
        let counters = WriteCounters::default();
        let err = scatter_counted(
            &seg,
            WriteCounting::On,
            &counters,
            &[(0, 2), (63, 2)],
            &[9; 4],
        )
        .unwrap_err();
        assert!(
            matches!(err, BridgeError::OutOfSegment { offset: 63, .. }),
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
        let seg = 1 << 20;
        let (back, rest) = decode_pieces(&bytes, groups, n, seg).unwrap();
        assert_eq!(back, pieces);
        assert_eq!(rest, b"tail");
        assert!(decode_pieces(&bytes[..GROUP_BYTES * groups - 1], groups, n, seg).is_err());
        assert_eq!(
            decode_pieces(&bytes, groups, n - 1, seg).unwrap_err(),
            BadPieceList::Count { pieces: n - 1 },
            "more pieces than announced"
        );
        assert_eq!(
            decode_pieces(&bytes, groups, n + 1, seg).unwrap_err(),
            BadPieceList::Count { pieces: n + 1 },
            "fewer pieces than announced"
        );
        assert!(decode_pieces(&bytes, usize::MAX, n, seg).is_err());
        let mut empty = Vec::new();
        assert_eq!(encode_pieces(&[], &mut empty), 0);
        assert_eq!(decode_pieces(&empty, 0, 0, seg).unwrap().0, vec![]);
    }

    /// One group `(first, len, step, count)` in the wire encoding.
    fn group(first: u64, len: u64, step: u64, count: u64) -> Vec<u8> {
        [first, len, step, count]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect()
    }

    /// A header and list from a garbled sender are refused before the target allocates for
    /// them: a piece count beyond what a segment's list may hold (the loop would push 2^40
    /// pairs, 16 TiB), pieces describing more bytes than the segment (a get's reply buffer).
    #[test]
    fn a_garbled_piece_list_is_refused_before_anything_is_allocated() {
        let seg = 1 << 20;
        let max = max_pieces(seg);
        assert_eq!(max, seg / 16);
        let huge = 1u64 << 40;
        assert_eq!(
            decode_pieces(&group(0, 0, 0, huge), 1, huge as usize, seg).unwrap_err(),
            BadPieceList::Pieces {
                pieces: huge as usize,
                max
            }
        );
        // The most pieces a list may describe decode (one group, a byte each).
        let (all, _) = decode_pieces(&group(0, 1, 1, max as u64), 1, max, seg).unwrap();
        assert_eq!((all.len(), all[max - 1]), (max, (max - 1, 1)));
        // Two pieces of a whole segment each: twice what a transfer may move.
        assert_eq!(
            decode_pieces(&group(0, seg as u64, 0, 2), 1, 2, seg).unwrap_err(),
            BadPieceList::Bytes { max: seg }
        );
        assert_eq!(
            decode_pieces(&group(0, u64::MAX >> 1, 0, 4), 1, 4, seg).unwrap_err(),
            BadPieceList::Bytes { max: seg },
            "a length whose product overflows"
        );
        // A request's buffer: the list and, for a put, at most a segment of data.
        assert_eq!(
            max_request_bytes(10, 3, true, seg),
            Ok(3 * GROUP_BYTES + seg)
        );
        assert_eq!(max_request_bytes(10, 3, false, seg), Ok(3 * GROUP_BYTES));
        assert_eq!(
            max_request_bytes(usize::MAX, 1, true, seg),
            Err(BadPieceList::Pieces {
                pieces: usize::MAX,
                max
            })
        );
        assert_eq!(
            max_request_bytes(2, 3, false, seg),
            Err(BadPieceList::Groups {
                groups: 3,
                pieces: 2
            })
        );
    }

    /// The sender refuses what a target would refuse: more pieces than a list may hold, or
    /// overlapping pieces moving more bytes than the segment holds.
    #[test]
    fn a_transfer_beyond_one_segment_is_refused_at_the_origin() {
        let seg = Segment::new(0, 64);
        let counters = WriteCounters::default();
        let on = WriteCounting::On;
        let twice = [(0, 64), (0, 64)];
        let err = scatter_counted(&seg, on, &counters, &twice, &[1; 128]).unwrap_err();
        assert_eq!(
            err,
            BridgeError::VectorTooLarge {
                pieces: 2,
                total: 128,
                max_pieces: 4,
                segment_len: 64
            }
        );
        let empties = [(0, 0); 5];
        let err = gather(&seg, &empties, &mut []).unwrap_err();
        assert!(
            matches!(err, BridgeError::VectorTooLarge { pieces: 5, .. }),
            "{err}"
        );
        assert_eq!(counters.iwc(), 0, "nothing was written");
        assert!(
            gather(&seg, &[(0, 64)], &mut [0; 64]).is_ok(),
            "a whole segment"
        );
    }
}
