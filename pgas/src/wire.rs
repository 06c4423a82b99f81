//! The format of pgas messages on active messages: one bridge handler for all of them, a kind
//! and a few header words in the AM arguments, and payloads larger than a medium AM split into
//! fragments and reassembled at the target (sending and receiving them is `messages.rs`).
//!
//! Argument layout of a message that fits one medium AM (almost all): `[kind, header...]`, the
//! payload whole. A larger one travels as fragments, [`FRAGMENT`] set in the kind word:
//! `[kind, message id, total length, fragment offset, header...]`. The id is per sender, so
//! `(source, id)` names a message; fragments may arrive in any order. A whole message carries
//! no fragment words, which keeps an rpc request or reply, four words, in the first cache line
//! of an smp inbox slot, which holds six.
//!
//! A message sent inside a resilience runtime's internal scope (`resilience::internal`) has
//! [`INTERNAL`] set in its kind word, and is handled at the target in that scope too: an rpc
//! function it runs communicates unseen by the target's hook, and its request is not counted
//! as an incoming write. Every other message is handled as the application's traffic, even
//! when it arrives while the target waits inside an internal scope.

use std::cell::RefCell;
use std::collections::HashMap;

use gasnet_bridge::MAX_ARGS;

use crate::error::PgasError;

/// Header words a message can carry besides the wire's own four.
pub(crate) const HEADER_WORDS: usize = MAX_ARGS - 4;

/// Flag of the kind word: the message is a resilience runtime's own traffic.
pub(crate) const INTERNAL: u64 = 1 << 63;

/// Flag of the kind word: the message is one fragment of a message larger than a medium AM,
/// and the next three words are its id, total length and this fragment's offset.
pub(crate) const FRAGMENT: u64 = 1 << 62;

/// Most bytes one pgas message may have (16384 fragments). Messages carry rpc arguments and
/// results and collective values; bulk data moves by `rput`/`rget`. The bound lets a target
/// refuse a fragment header announcing more, naming its sender, before it allocates the
/// message's buffer.
pub(crate) const MAX_MESSAGE: usize = 1 << 30;

/// The kinds of pgas messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Kind {
    RpcRequest = 1,
    RpcReply = 2,
    Collective = 3,
    DistFetch = 4,
    View = 5,
}

impl Kind {
    pub(crate) fn from_word(w: u64) -> Option<Kind> {
        Some(match w {
            1 => Kind::RpcRequest,
            2 => Kind::RpcReply,
            3 => Kind::Collective,
            4 => Kind::DistFetch,
            5 => Kind::View,
            _ => return None,
        })
    }
}

/// A message being reassembled: its bytes and how many have arrived.
type Partial = (Vec<u8>, usize);

/// Messages whose fragments have not all arrived, by (source, id).
#[derive(Default)]
pub(crate) struct Reassembly {
    partial: RefCell<HashMap<(usize, u64), Partial>>,
}

impl Reassembly {
    /// Adds the fragment `bytes` at offset `at` of message `id` of `total` bytes from `source`;
    /// returns the whole message when this was its last missing fragment.
    ///
    /// # Panics
    /// Naming `source` ([`malformed`]), before anything is allocated, if `total` exceeds
    /// [`MAX_MESSAGE`], the fragment ends beyond `total`, or an earlier fragment of the same
    /// message announced another total.
    pub(crate) fn add(
        &self,
        source: usize,
        id: u64,
        total: u64,
        at: u64,
        bytes: &[u8],
    ) -> Option<Vec<u8>> {
        let total = usize::try_from(total)
            .ok()
            .filter(|&t| t <= MAX_MESSAGE)
            .unwrap_or_else(|| {
                malformed(
                    source,
                    &format!(
                        "a fragmented message of {total} bytes, more than the {MAX_MESSAGE} \
                         one message may have"
                    ),
                )
            });
        let Some(at) = usize::try_from(at)
            .ok()
            .filter(|at| at.checked_add(bytes.len()).is_some_and(|end| end <= total))
        else {
            malformed(source, "a fragment beyond its message's length")
        };
        let mut partial = self.partial.borrow_mut();
        let entry = partial
            .entry((source, id))
            .or_insert_with(|| (vec![0; total], 0));
        if entry.0.len() != total {
            malformed(
                source,
                &format!(
                    "fragments of message {id} announce {} and {total} bytes",
                    entry.0.len()
                ),
            );
        }
        entry.0[at..at + bytes.len()].copy_from_slice(bytes);
        entry.1 += bytes.len();
        if entry.1 == total {
            partial.remove(&(source, id)).map(|(buf, _)| buf)
        } else {
            None
        }
    }
}

/// Checks a message of `len` bytes to `target` is within [`MAX_MESSAGE`].
pub(crate) fn fits(target: usize, len: usize) -> Result<(), PgasError> {
    if len > MAX_MESSAGE {
        return Err(PgasError::MessageTooLarge {
            target,
            len,
            max: MAX_MESSAGE,
        });
    }
    Ok(())
}

/// Decodes the reply of rpc `name` from `rank`.
///
/// # Panics
/// Naming both, if the bytes do not decode as an `R`.
pub(crate) fn decode_reply<R: serde::de::DeserializeOwned>(
    rank: usize,
    name: &str,
    bytes: &[u8],
) -> R {
    postcard::from_bytes(bytes)
        .unwrap_or_else(|e| panic!("malformed reply of rpc {name:?} from rank {rank}: {e}"))
}

/// Ends the rank with an error naming the sender: bytes that do not follow the protocol are
/// never interpreted.
pub(crate) fn malformed(source: usize, what: &str) -> ! {
    panic!("malformed pgas message from rank {source}: {what}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{AssertUnwindSafe, catch_unwind};

    /// The message of the panic `f` ends with (a reassembly it borrows stays usable: its
    /// `RefCell` borrow ends on unwind).
    fn panic_of<R>(f: impl FnOnce() -> R) -> String {
        let payload = catch_unwind(AssertUnwindSafe(f))
            .err()
            .expect("the call was refused");
        match payload.downcast::<String>() {
            Ok(s) => *s,
            Err(p) => p.downcast_ref::<&str>().unwrap_or(&"?").to_string(),
        }
    }

    #[test]
    fn fragments_in_any_order_make_the_message() {
        let r = Reassembly::default();
        assert_eq!(r.add(2, 5, 10, 6, &[6, 7, 8, 9]), None);
        assert_eq!(
            r.add(1, 5, 3, 0, &[1, 1, 1]),
            Some(vec![1, 1, 1]),
            "another sender"
        );
        assert_eq!(
            r.add(2, 5, 10, 0, &[0, 1, 2, 3, 4, 5]),
            Some((0..10).collect())
        );
        assert!(r.partial.borrow().is_empty());
    }

    /// A fragment header from a garbled sender is refused, naming it, before the buffer its
    /// total announces is allocated (`vec![0; 1 << 40]` would reserve a TiB).
    #[test]
    fn a_garbled_fragment_is_refused_naming_its_sender() {
        let r = Reassembly::default();
        let huge = panic_of(|| r.add(3, 1, 1 << 40, 0, &[0; 16]));
        assert_eq!(
            huge,
            format!(
                "malformed pgas message from rank 3: a fragmented message of {} bytes, more \
                 than the {MAX_MESSAGE} one message may have",
                1u64 << 40
            )
        );
        let past = panic_of(|| r.add(3, 1, 64, u64::MAX, &[0; 16]));
        assert_eq!(
            past,
            "malformed pgas message from rank 3: a fragment beyond its message's length"
        );
        let r = Reassembly::default();
        assert_eq!(r.add(4, 8, 32, 0, &[1; 16]), None);
        let other = panic_of(|| r.add(4, 8, 1 << 20, 16, &[2; 16]));
        assert_eq!(
            other,
            "malformed pgas message from rank 4: fragments of message 8 announce 32 and \
             1048576 bytes"
        );
    }

    #[test]
    fn a_message_beyond_the_limit_is_refused_at_its_sender() {
        assert_eq!(fits(1, MAX_MESSAGE), Ok(()));
        let e = fits(1, MAX_MESSAGE + 1).unwrap_err();
        assert!(
            e.to_string().contains("rank 1") && e.to_string().contains("rput"),
            "{e}"
        );
    }
}
