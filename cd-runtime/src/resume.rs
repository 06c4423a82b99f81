//! A position to resume a strict CD at, with the state that goes with it: the one mechanism a
//! relaunch from a checkpoint uses (`checkpoint/`), and that a rank replacing a killed one
//! inside the job can use with another source (see `checkpoint/README.md`).
//!
//! The execution of the CD whose iteration is [`Resumed::iteration`] *resumes*: each
//! `preserve*` call first writes the resumed bytes of its name into the program's value, then
//! preserves it as usual (`cd.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where the resumed state comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeSource {
    /// A checkpoint on disk: its directory.
    Checkpoint(PathBuf),
    /// Memory, after a lost process was replaced inside the job (`REAL_LOSS.md`): the
    /// survivors' own generations and the replacements' copies at their buddies. The ranks
    /// lost.
    Memory(Vec<usize>),
}

/// Where a program resumes, as [`restarted`](crate::restarted) tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// The strict CD that resumes.
    pub cd: String,
    /// Its level in the tree.
    pub level: usize,
    /// The execution of the CD that resumes (its `iteration`): the first `iteration`
    /// executions completed before the state was saved.
    pub iteration: u64,
    /// The loop step the resumed execution began with ([`crate::strict_steps`]'s step; for a
    /// program's own loop, equal to `iteration`).
    pub step: u64,
    /// Where the state comes from.
    pub source: ResumeSource,
}

/// A resume position and its state on this rank.
#[derive(Debug, Clone)]
pub(crate) struct Resume {
    /// The position.
    pub(crate) at: Resumed,
    /// The preserved entries of this rank, by name: raw bytes for a slice, the serialized
    /// value (postcard) for a value.
    pub(crate) entries: BTreeMap<String, Vec<u8>>,
}

/// The preserved entries of one rank, as a checkpoint file holds them: `postcard` of the list
/// of (name, bytes) in name order.
#[cfg(test)]
pub(crate) fn encode_entries(entries: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    postcard::to_allocvec(entries).expect("a map of byte strings serializes")
}

/// One piece of [`write_entries`]'s encoding: a length (an unsigned LEB128 varint, held here)
/// or a name's or value's bytes (borrowed from the entries).
pub(crate) enum Piece<'a> {
    /// A varint's bytes and how many of them it uses.
    Length([u8; 10], u8),
    /// Bytes of the entries.
    Bytes(&'a [u8]),
}

impl Piece<'_> {
    /// The piece's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Piece::Length(buf, n) => &buf[..usize::from(*n)],
            Piece::Bytes(b) => b,
        }
    }
}

/// The pieces of [`encode_entries`]' bytes, in order, the entries' bytes borrowed, not copied:
/// postcard writes a map as its length, then each key and value as its length and its bytes
/// (a byte vector as a sequence of `u8`s, one byte each), every length as an unsigned LEB128
/// varint. (Serializing through postcard instead goes byte by byte through the serializer and
/// copies the whole state once more.)
pub(crate) fn entry_pieces(entries: &BTreeMap<String, Vec<u8>>) -> Vec<Piece<'_>> {
    let length = |mut n: usize| {
        let mut buf = [0u8; 10];
        let mut i = 0;
        loop {
            let low = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                buf[i] = low;
                i += 1;
                break;
            }
            buf[i] = low | 0x80;
            i += 1;
        }
        Piece::Length(buf, i as u8)
    };
    let mut pieces = Vec::with_capacity(1 + 4 * entries.len());
    pieces.push(length(entries.len()));
    for (name, bytes) in entries {
        pieces.push(length(name.len()));
        pieces.push(Piece::Bytes(name.as_bytes()));
        pieces.push(length(bytes.len()));
        pieces.push(Piece::Bytes(bytes));
    }
    pieces
}

/// The bytes of [`encode_entries`], piece by piece ([`entry_pieces`]) to `out`.
pub(crate) fn write_entries(
    entries: &BTreeMap<String, Vec<u8>>,
    mut out: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    entry_pieces(entries)
        .iter()
        .try_for_each(|p| out(p.bytes()))
}

/// The entries [`write_entries`] wrote, or why the bytes are not such a list: the same
/// format read piece by piece, each value copied out in one piece (postcard's own reader goes
/// byte by byte through the deserializer).
pub(crate) fn decode_entries(bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let bad = |why: &str| format!("not a list of preserved entries ({why})");
    let mut rest = bytes;
    let varint = |rest: &mut &[u8]| -> Result<usize, String> {
        let mut n: u64 = 0;
        for i in 0..10 {
            let (&b, tail) = rest.split_first().ok_or_else(|| bad("cut short"))?;
            *rest = tail;
            n |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return usize::try_from(n).map_err(|_| bad("a length out of range"));
            }
        }
        Err(bad("a length of more than ten bytes"))
    };
    let take = |rest: &mut &[u8], n: usize| -> Result<Vec<u8>, String> {
        if rest.len() < n {
            return Err(bad("cut short"));
        }
        let (piece, tail) = rest.split_at(n);
        *rest = tail;
        Ok(piece.to_vec())
    };
    let count = varint(&mut rest)?;
    let mut out = BTreeMap::new();
    for _ in 0..count {
        let n = varint(&mut rest)?;
        let name = String::from_utf8(take(&mut rest, n)?).map_err(|_| bad("a name not UTF-8"))?;
        let n = varint(&mut rest)?;
        let value = take(&mut rest, n)?;
        out.insert(name, value);
    }
    if !rest.is_empty() {
        return Err(bad("bytes after the last entry"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_garbage_is_refused() {
        let mut m = BTreeMap::new();
        m.insert("x".to_string(), vec![1u8, 2, 3]);
        m.insert("time".to_string(), postcard::to_allocvec(&2.5f64).unwrap());
        let bytes = encode_entries(&m);
        assert_eq!(decode_entries(&bytes).unwrap(), m);
        assert!(decode_entries(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn written_piece_by_piece_the_entries_are_postcards_bytes() {
        for sizes in [
            vec![],
            vec![0],
            vec![1, 127, 128, 300],
            vec![16_384, 3_000_000],
        ] {
            let m: BTreeMap<String, Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| ("e".repeat(i * 70 + 1), (0..n).map(|b| b as u8).collect()))
                .collect();
            let mut pieces = Vec::new();
            write_entries(&m, |p| {
                pieces.extend_from_slice(p);
                Ok(())
            })
            .unwrap();
            assert_eq!(pieces, encode_entries(&m), "sizes {sizes:?}");
            assert_eq!(decode_entries(&pieces).unwrap(), m, "sizes {sizes:?}");
            let from_postcard: BTreeMap<String, Vec<u8>> = postcard::from_bytes(&pieces).unwrap();
            assert_eq!(from_postcard, m);
            if !pieces.is_empty() {
                assert!(decode_entries(&pieces[..pieces.len() - 1]).is_err());
                let mut longer = pieces.clone();
                longer.push(0);
                assert!(decode_entries(&longer).is_err());
            }
        }
    }
}
