//! The wire format of the conduit's messages on MPI and in the shared-memory rings: the fixed
//! header, the message kinds and flags, and the encoding of atomic operations.

use std::ffi::c_int;

use crate::atomic::AtomicOp;
use crate::message::{Args, MAX_ARGS};

use super::outgoing::{AmHead, OutBody};

/// Pre-posted receive buffers per process.
pub const SLOTS: usize = 64;
/// Size of one pre-posted buffer: header, arguments and an inline payload.
pub const EAGER: usize = 8 << 10;
/// Bytes of the fixed part of a message header (see [`Header::write`]).
pub(super) const FIXED: usize = 8;
/// Bytes of the longest message header: the fixed part, a large credit count and all five
/// words.
pub(super) const HDR: usize = FIXED + 6 * 8;
/// Largest payload carried inside the message itself; larger ones follow as a second message
/// received directly into its destination.
pub const INLINE_MAX: usize = EAGER - HDR - 8 * MAX_ARGS;
/// Requests one rank may have outstanding toward another before it waits for credits.
pub const CREDITS: u32 = 32;

pub(super) const TAG_MSG: c_int = 1;
pub(super) const TAG_PAYLOAD: c_int = 2;
pub(super) const TAG_GET: c_int = 3;

pub(super) const K_AM: u8 = 1;
pub(super) const K_PUT: u8 = 2;
pub(super) const K_GET: u8 = 3;
pub(super) const K_ATOMIC: u8 = 4;
pub(super) const K_ACK: u8 = 5;
pub(super) const K_ATOMIC_REPLY: u8 = 6;
pub(super) const K_CREDIT: u8 = 7;
/// A vector put: `a` pieces in `c` groups, `b` bytes of piece list and packed data (see
/// `crate::vector`).
pub(super) const K_PUTV: u8 = 8;
/// A vector get: `a` pieces in `c` groups, `b` bytes of piece list; the data returns on
/// `TAG_GET`.
pub(super) const K_GETV: u8 = 9;
/// A non-blocking get of `b` bytes at offset `a`: answered by [`K_GET_REPLY`] with the same
/// `id`, so many can be outstanding (a blocking get's data returns on `TAG_GET` instead).
pub(super) const K_GET_NB: u8 = 10;
/// The data of non-blocking get `id`: `b` bytes, inline or on `TAG_PAYLOAD` after it.
pub(super) const K_GET_REPLY: u8 = 11;
/// The sender switched counting of the writes into its segment on (`a` = 1) or off (`a` = 0):
/// the receiver sends its later puts to it as active messages (on) or through the window
/// again (off). Answered by [`K_COUNTING_ACK`] after the receiver flushed its window puts to
/// the sender (on only). See `rma_window.rs`, "The counting switch across processes".
pub(super) const K_COUNTING: u8 = 12;
/// The answer to a switch-on notice: every window put from this rank to its target landed.
pub(super) const K_COUNTING_ACK: u8 = 13;

/// The message spent a credit of its sender.
pub(super) const F_CREDIT: u8 = 1;
/// The payload follows as a separate message on `TAG_PAYLOAD`.
pub(super) const F_SEPARATE: u8 = 2;
/// An AM reply.
pub(super) const F_REPLY: u8 = 4;
/// A long AM whose payload the sender wrote into the target's segment through shared memory;
/// `c` and `d` carry the write's EC and IWC.
pub(super) const F_PLACED: u8 = 8;
/// A put the target does not count in its IWC (`Endpoint::put_uncounted`); its ack carries
/// no EC and IWC.
pub(super) const F_UNCOUNTED: u8 = 16;

pub(super) const B_SHORT: u8 = 0;
pub(super) const B_MEDIUM: u8 = 1;
pub(super) const B_LONG: u8 = 2;

/// The fixed part of every message on `TAG_MSG`; `a..d` mean what the kind says.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub(super) kind: u8,
    pub(super) nargs: u8,
    pub(super) flags: u8,
    pub(super) body: u8,
    pub(super) handler: u16,
    /// Credits the sender returns to the receiver.
    pub(super) credits: u32,
    pub(super) id: u64,
    pub(super) a: u64,
    pub(super) b: u64,
    pub(super) c: u64,
    pub(super) d: u64,
}

impl Header {
    #[cfg(test)]
    fn encode(&self, args: &[u64], inline: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode_into(&mut v, args, inline);
        v
    }

    /// The header of a user AM: its handler, reply flag, body kind and payload length.
    pub(super) fn am(head: AmHead<'_>, body: &OutBody<'_>) -> Header {
        let (body, len) = match body {
            OutBody::Short => (B_SHORT, 0),
            OutBody::Medium(p) => (B_MEDIUM, p.len()),
            OutBody::Long { payload, .. } => (B_LONG, payload.len()),
        };
        Header {
            kind: K_AM,
            flags: if head.is_reply { F_REPLY } else { 0 },
            handler: head.handler,
            body,
            b: len as u64,
            ..Header::default()
        }
    }

    /// The optional words this header carries, in wire order (`credits` only when it does
    /// not fit the fixed part's byte), and the mask that names them.
    #[inline]
    fn present(&self) -> (u8, [u64; 6]) {
        let words = [
            u64::from(self.credits),
            self.id,
            self.a,
            self.b,
            self.c,
            self.d,
        ];
        let mut mask = u8::from(self.credits > u32::from(u8::MAX));
        for (i, w) in words.iter().enumerate().skip(1) {
            mask |= u8::from(*w != 0) << i;
        }
        (mask, words)
    }

    /// Bytes of the message with `nargs` arguments and `inline` payload bytes.
    #[inline]
    pub(super) fn encoded_len(&self, nargs: usize, inline: usize) -> usize {
        FIXED + 8 * self.present().0.count_ones() as usize + 8 * nargs + inline
    }

    /// Replaces `v`'s contents with the message's bytes, reusing its allocation.
    #[inline]
    pub(super) fn encode_into(&self, v: &mut Vec<u8>, args: &[u64], inline: &[u8]) {
        v.clear();
        v.resize(self.encoded_len(args.len(), inline.len()), 0);
        self.write(v, args, inline);
    }

    /// The fixed 8 bytes of the header, for `nargs` arguments and the words in `mask`.
    #[inline]
    fn fixed(&self, mask: u8, nargs: usize) -> [u8; FIXED] {
        let small = if mask & 1 == 0 { self.credits as u8 } else { 0 };
        let [lo, hi] = self.handler.to_le_bytes();
        [
            self.kind,
            nargs as u8,
            self.flags,
            self.body,
            lo,
            hi,
            mask,
            small,
        ]
    }

    /// Writes the message into `out`, which is exactly [`Header::encoded_len`] bytes long.
    ///
    /// ```text
    /// [kind, nargs, flags, body, handler (2, LE), mask, credits]   the fixed 8 bytes
    /// [word; one per bit of mask]   8 bytes each, LE: credits (bit 0: when over 255, and
    ///                               then the fixed byte is 0), id, a, b, c, d (bits 1-5,
    ///                               each present only when not 0)
    /// [arg; nargs]                  8 bytes each, LE
    /// [inline payload]
    /// ```
    ///
    /// So a short AM without arguments is 8 bytes, an acknowledgement 32 at most: MPI moves a
    /// message of 8 bytes faster than a longer one (Open MPI on one host, in one of this VM's
    /// two states: 8-byte round trip 700 ns, 16 to 128 bytes 820-860 ns).
    pub(super) fn write(&self, out: &mut [u8], args: &[u64], inline: &[u8]) {
        let (mask, words) = self.present();
        out[..FIXED].copy_from_slice(&self.fixed(mask, args.len()));
        let (mut at, mut rest) = (FIXED, mask);
        while rest != 0 {
            let w = words[rest.trailing_zeros() as usize];
            out[at..at + 8].copy_from_slice(&w.to_le_bytes());
            at += 8;
            rest &= rest - 1;
        }
        for w in args {
            out[at..at + 8].copy_from_slice(&w.to_le_bytes());
            at += 8;
        }
        out[at..].copy_from_slice(inline);
    }

    /// Whether the target answers this message with a [`K_ACK`]: it writes into the
    /// target's segment (a put, a vector put, a long AM whose payload was not placed).
    #[inline]
    pub(super) fn is_acked_write(&self) -> bool {
        match self.kind {
            K_PUT | K_PUTV => true,
            K_AM => self.body == B_LONG && self.flags & F_PLACED == 0,
            _ => false,
        }
    }

    /// Whether `bytes` hold a user AM whose body came with it (short, or medium inline): one
    /// whose handler can run on these bytes alone.
    #[inline]
    pub(super) fn is_inline_am(bytes: &[u8]) -> bool {
        bytes.len() >= FIXED
            && bytes[0] == K_AM
            && (bytes[3] == B_SHORT || (bytes[3] == B_MEDIUM && bytes[2] & F_SEPARATE == 0))
    }

    /// Splits a received message into header, arguments and inline payload.
    pub(super) fn decode(bytes: &[u8]) -> Option<(Header, Args, &[u8])> {
        let fixed: &[u8; FIXED] = bytes.get(..FIXED)?.try_into().ok()?;
        let [kind, nargs, flags, body, lo, hi, mask, small] = *fixed;
        let nargs = nargs as usize;
        if nargs > MAX_ARGS || mask >> 6 != 0 {
            return None;
        }
        let words_end = FIXED + 8 * mask.count_ones() as usize;
        let args_end = words_end + 8 * nargs;
        if bytes.len() < args_end {
            return None;
        }
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let mut fields = [u64::from(small), 0, 0, 0, 0, 0];
        let (mut at, mut rest) = (FIXED, mask);
        while rest != 0 {
            fields[rest.trailing_zeros() as usize] = word(at);
            at += 8;
            rest &= rest - 1;
        }
        let h = Header {
            kind,
            nargs: nargs as u8,
            flags,
            body,
            handler: u16::from_le_bytes([lo, hi]),
            credits: u32::try_from(fields[0]).ok()?,
            id: fields[1],
            a: fields[2],
            b: fields[3],
            c: fields[4],
            d: fields[5],
        };
        let args = Args::from_le_bytes(&bytes[words_end..args_end])?;
        Some((h, args, &bytes[args_end..]))
    }
}

pub(super) fn encode_op(op: AtomicOp) -> (u64, u64, u64) {
    match op {
        AtomicOp::Load => (0, 0, 0),
        AtomicOp::Store(v) => (1, v, 0),
        AtomicOp::Swap(v) => (2, v, 0),
        AtomicOp::FetchAdd(v) => (3, v, 0),
        AtomicOp::FetchSub(v) => (4, v, 0),
        AtomicOp::CompareExchange { current, new } => (5, current, new),
        AtomicOp::Min(v) => (6, v, 0),
        AtomicOp::Max(v) => (7, v, 0),
        AtomicOp::MinI64(v) => (8, v as u64, 0),
        AtomicOp::MaxI64(v) => (9, v as u64, 0),
        AtomicOp::And(v) => (10, v, 0),
        AtomicOp::Or(v) => (11, v, 0),
        AtomicOp::Xor(v) => (12, v, 0),
    }
}

pub(super) fn decode_op(code: u64, x: u64, y: u64) -> Option<AtomicOp> {
    Some(match code {
        0 => AtomicOp::Load,
        1 => AtomicOp::Store(x),
        2 => AtomicOp::Swap(x),
        3 => AtomicOp::FetchAdd(x),
        4 => AtomicOp::FetchSub(x),
        5 => AtomicOp::CompareExchange { current: x, new: y },
        6 => AtomicOp::Min(x),
        7 => AtomicOp::Max(x),
        8 => AtomicOp::MinI64(x as i64),
        9 => AtomicOp::MaxI64(x as i64),
        10 => AtomicOp::And(x),
        11 => AtomicOp::Or(x),
        12 => AtomicOp::Xor(x),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn header_round_trips() {
        let h = Header {
            kind: K_AM,
            nargs: 3,
            flags: F_CREDIT | F_REPLY,
            body: B_MEDIUM,
            handler: 513,
            credits: 7,
            id: u64::MAX,
            a: 1,
            b: 2,
            c: 3,
            d: 4,
        };
        let bytes = h.encode(&[10, 20, 30], b"xyz");
        assert_eq!(bytes.len(), FIXED + 5 * 8 + 24 + 3);
        let (back, args, inline) = Header::decode(&bytes).unwrap();
        assert_eq!(back, h);
        assert_eq!(args.as_slice(), &[10, 20, 30]);
        assert_eq!(inline, b"xyz");
        for cut in 0..FIXED + 5 * 8 + 24 {
            assert!(Header::decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[1] = MAX_ARGS as u8 + 1;
        assert!(Header::decode(&bad).is_none());
        let mut bad = bytes.clone();
        bad[6] |= 1 << 6;
        assert!(Header::decode(&bad).is_none(), "an unknown word");
        assert_eq!(INLINE_MAX + HDR + 8 * MAX_ARGS, EAGER);
    }

    /// Words that are zero are left out, a credit count over 255 takes a word, and every
    /// combination decodes to the header it came from.
    #[test]
    pub(super) fn headers_carry_only_their_words() {
        let short = Header {
            kind: K_AM,
            handler: 9,
            credits: 1,
            ..Header::default()
        };
        let bytes = short.encode(&[], &[]);
        assert_eq!(
            bytes.len(),
            FIXED,
            "a short AM without arguments is 8 bytes"
        );
        assert_eq!(Header::decode(&bytes).unwrap().0, short);
        for bits in 0u32..64 {
            let pick = |i: u32, v: u64| if bits & (1 << i) != 0 { v } else { 0 };
            let h = Header {
                kind: K_ACK,
                nargs: 1,
                credits: if bits & 1 != 0 { 70_000 } else { 255 },
                id: pick(1, 11),
                a: pick(2, 1 << 40),
                b: pick(3, 13),
                c: pick(4, 14),
                d: pick(5, u64::MAX),
                ..Header::default()
            };
            let bytes = h.encode(&[5], b"p");
            assert_eq!(bytes.len(), h.encoded_len(1, 1));
            assert_eq!(bytes.len(), FIXED + 8 * bits.count_ones() as usize + 8 + 1);
            let (back, args, inline) = Header::decode(&bytes).unwrap();
            assert_eq!((back, args.as_slice(), inline), (h, &[5u64][..], &b"p"[..]));
        }
    }

    #[test]
    pub(super) fn atomic_ops_round_trip() {
        let ops = [
            AtomicOp::Load,
            AtomicOp::Store(1),
            AtomicOp::Swap(2),
            AtomicOp::FetchAdd(3),
            AtomicOp::FetchSub(4),
            AtomicOp::CompareExchange { current: 5, new: 6 },
            AtomicOp::Min(7),
            AtomicOp::Max(8),
            AtomicOp::MinI64(-9),
            AtomicOp::MaxI64(-10),
            AtomicOp::And(11),
            AtomicOp::Or(12),
            AtomicOp::Xor(13),
        ];
        for op in ops {
            let (c, x, y) = encode_op(op);
            assert_eq!(decode_op(c, x, y), Some(op));
        }
        assert_eq!(decode_op(13, 0, 0), None);
    }
}
