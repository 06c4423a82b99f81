//! Active messages: a handler index, a few `u64` arguments and an optional payload, run at the
//! target inside its `poll()`.
//!
//! Handlers live in a [`HandlerTable`](crate::HandlerTable) built before launch by the same code on every rank, so
//! index `k` names the same function everywhere; nothing on the wire is a function address.
//! Categories follow GASNet-EX: *short* (arguments only), *medium* (a payload copied to the
//! target and lent to the handler), *long* (a payload written into the target's segment before
//! the handler runs, counted there as an incoming write).
//!
//! A request handler may send at most one reply, through its [`Token`](crate::Token); a reply handler may
//! not reply. Handlers must not block: waiting inside a handler panics, because the rank that
//! runs it cannot make progress on anything else meanwhile.

use crate::counters::WriteAck;
use crate::error::BridgeError;

/// Most arguments one active message carries (GASNet-EX guarantees at least 16).
pub const MAX_ARGS: usize = 16;

/// Largest medium payload, in bytes; larger data goes by long AM or put.
pub const MAX_MEDIUM: usize = 64 << 10;

/// The index of a registered handler, valid in the table that issued it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HandlerId(pub(crate) u16);

impl HandlerId {
    /// The table index.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Checks that this id belongs to a table of `registered` handlers.
    pub(crate) fn check(self, registered: usize) -> Result<(), BridgeError> {
        if self.index() < registered {
            Ok(())
        } else {
            Err(BridgeError::UnknownHandler {
                index: self.index(),
                registered,
            })
        }
    }
}

/// The arguments of a message, stored inline so a short AM allocates nothing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Args {
    len: u8,
    words: [u64; MAX_ARGS],
}

impl Args {
    pub(crate) fn new(args: &[u64]) -> Result<Args, BridgeError> {
        if args.len() > MAX_ARGS {
            return Err(BridgeError::TooManyArgs {
                given: args.len(),
                max: MAX_ARGS,
            });
        }
        let mut words = [0; MAX_ARGS];
        words[..args.len()].copy_from_slice(args);
        Ok(Args {
            len: args.len() as u8,
            words,
        })
    }

    /// The arguments encoded as consecutive little-endian words in `bytes` (at most
    /// [`MAX_ARGS`] of them; `None` if more, or if `bytes` is not whole words).
    #[cfg(feature = "mpi")]
    #[inline]
    pub(crate) fn from_le_bytes(bytes: &[u8]) -> Option<Args> {
        if bytes.len() > 8 * MAX_ARGS || !bytes.len().is_multiple_of(8) {
            return None;
        }
        let mut words = [0u64; MAX_ARGS];
        for (w, b) in words.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        }
        Some(Args {
            len: (bytes.len() / 8) as u8,
            words,
        })
    }

    pub(crate) fn as_slice(&self) -> &[u64] {
        &self.words[..self.len as usize]
    }
}

/// What a message carries besides its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Body {
    Short,
    Medium(Vec<u8>),
    /// The payload already sits in the target's segment.
    Long {
        offset: usize,
        len: usize,
        ack: WriteAck,
    },
}

/// One message in flight.
#[derive(Debug)]
pub(crate) struct Message {
    pub(crate) source: u32,
    pub(crate) handler: u16,
    pub(crate) is_reply: bool,
    pub(crate) args: Args,
    pub(crate) body: Body,
}

impl Message {
    /// The message as its handler sees it.
    pub(crate) fn view(&self) -> MessageView<'_> {
        MessageView {
            source: self.source,
            handler: self.handler,
            is_reply: self.is_reply,
            args: self.args.as_slice(),
            payload: match &self.body {
                Body::Short => Payload::None,
                Body::Medium(bytes) => Payload::Medium(bytes),
                Body::Long { offset, len, ack } => Payload::Long {
                    offset: *offset,
                    len: *len,
                    ack: *ack,
                },
            },
        }
    }
}

/// A message as its handler sees it, borrowed from wherever the conduit keeps it (a
/// [`Message`], or a copy of an smp inbox slot), so a small message is never boxed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MessageView<'a> {
    pub(crate) source: u32,
    pub(crate) handler: u16,
    pub(crate) is_reply: bool,
    pub(crate) args: &'a [u64],
    pub(crate) payload: Payload<'a>,
}

/// The payload of the message a handler is running for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload<'a> {
    /// A short message: arguments only.
    None,
    /// A medium message's bytes.
    Medium(&'a [u8]),
    /// A long message's bytes, already in this rank's segment at `offset`; `ack` is how the
    /// write was counted here.
    Long {
        offset: usize,
        len: usize,
        ack: WriteAck,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_are_limited() {
        assert_eq!(Args::new(&[1, 2, 3]).unwrap().as_slice(), &[1, 2, 3]);
        assert_eq!(
            Args::new(&[0; MAX_ARGS]).unwrap().as_slice().len(),
            MAX_ARGS
        );
        assert_eq!(
            Args::new(&[0; MAX_ARGS + 1]).unwrap_err(),
            BridgeError::TooManyArgs {
                given: MAX_ARGS + 1,
                max: MAX_ARGS
            }
        );
    }
}
