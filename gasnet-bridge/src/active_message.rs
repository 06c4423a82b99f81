//! Active messages: a handler index, a few `u64` arguments and an optional payload, run at the
//! target inside its `poll()`.
//!
//! Handlers live in a [`HandlerTable`] built before launch by the same code on every rank, so
//! index `k` names the same function everywhere; nothing on the wire is a function address.
//! Categories follow GASNet-EX: *short* (arguments only), *medium* (a payload copied to the
//! target and lent to the handler), *long* (a payload written into the target's segment before
//! the handler runs, counted there as an incoming write).
//!
//! A request handler may send at most one reply, through its [`Token`]; a reply handler may
//! not reply. Handlers must not block: waiting inside a handler panics, because the rank that
//! runs it cannot make progress on anything else meanwhile.

use std::cell::Cell;
use std::sync::Arc;

use crate::counters::WriteAck;
use crate::endpoint::Endpoint;
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
}

/// A handler: runs at the target with the message behind the token.
pub type Handler = Arc<dyn Fn(&Token<'_>) + Send + Sync>;

/// The handlers of a job, in registration order.
#[derive(Clone, Default)]
pub struct HandlerTable {
    entries: Vec<(&'static str, Handler)>,
}

impl HandlerTable {
    /// An empty table.
    pub fn new() -> Self {
        HandlerTable::default()
    }

    /// Adds a handler; every rank must register the same handlers in the same order.
    pub fn register(
        &mut self,
        name: &'static str,
        handler: impl Fn(&Token<'_>) + Send + Sync + 'static,
    ) -> HandlerId {
        let index = u16::try_from(self.entries.len()).expect("more than 65536 AM handlers");
        self.entries.push((name, Arc::new(handler)));
        HandlerId(index)
    }

    /// Number of registered handlers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The name a handler was registered under.
    pub fn name(&self, id: HandlerId) -> Option<&'static str> {
        self.entries.get(id.index()).map(|(n, _)| *n)
    }

    /// Checks that `id` belongs to this table.
    pub(crate) fn validate(&self, id: HandlerId) -> Result<(), BridgeError> {
        if id.index() < self.entries.len() {
            Ok(())
        } else {
            Err(BridgeError::UnknownHandler {
                index: id.index(),
                registered: self.entries.len(),
            })
        }
    }

    pub(crate) fn get(&self, index: usize) -> Option<&Handler> {
        self.entries.get(index).map(|(_, h)| h)
    }
}

impl std::fmt::Debug for HandlerTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(n, _)| n))
            .finish()
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

/// What a running handler knows about its message, and its way to reply.
pub struct Token<'a> {
    pub(crate) endpoint: &'a Endpoint,
    pub(crate) message: MessageView<'a>,
    pub(crate) replied: Cell<bool>,
}

impl<'a> Token<'a> {
    /// The rank that sent the message.
    pub fn source(&self) -> usize {
        self.message.source as usize
    }

    /// True if this message is a reply (which cannot be replied to).
    pub fn is_reply(&self) -> bool {
        self.message.is_reply
    }

    /// The message's arguments.
    pub fn args(&self) -> &[u64] {
        self.message.args
    }

    /// The message's payload.
    pub fn payload(&self) -> Payload<'_> {
        self.message.payload
    }

    /// The endpoint of the rank running the handler, for non-blocking work (puts, atomics,
    /// new requests); its waiting calls panic here.
    pub fn endpoint(&self) -> &'a Endpoint {
        self.endpoint
    }

    /// Counts this request as an incoming write to this rank (the NIC's view of a message that
    /// modifies memory, such as an rpc) and returns the counters for the reply to carry back
    /// ([`WriteAck::UNCOUNTED`] in a job that does not count writes).
    pub fn count_as_write(&self) -> WriteAck {
        self.endpoint.count_own_write()
    }

    /// Replies with a short message.
    pub fn reply_short(&self, handler: HandlerId, args: &[u64]) -> Result<(), BridgeError> {
        self.replying(|| self.endpoint.send_short(self.source(), handler, args, true))
    }

    /// Replies with a medium message.
    pub fn reply_medium(
        &self,
        handler: HandlerId,
        args: &[u64],
        payload: &[u8],
    ) -> Result<(), BridgeError> {
        self.replying(|| {
            self.endpoint
                .send_medium(self.source(), handler, args, payload, true)
        })
    }

    /// Replies with a long message written at `offset` in the requester's segment.
    pub fn reply_long(
        &self,
        handler: HandlerId,
        args: &[u64],
        payload: &[u8],
        offset: usize,
    ) -> Result<WriteAck, BridgeError> {
        // On smp the handle is born complete; on mpi waiting for the requester's ack makes
        // progress on the conduit's own messages only, which is allowed inside a handler.
        self.replying(|| {
            self.endpoint
                .send_long(self.source(), handler, args, payload, offset, true)
                .map(|h| h.wait(self.endpoint))
        })
    }

    /// Sends a reply if one is allowed. Only a reply that was actually sent uses up the
    /// handler's one reply: a refused one (payload too large, too many arguments, outside the
    /// segment) sent nothing, so the handler may still reply correctly. (Fix: the reply used
    /// to be claimed before the send was checked, so a refused reply forbade any other.)
    fn replying<T>(&self, send: impl FnOnce() -> Result<T, BridgeError>) -> Result<T, BridgeError> {
        if self.message.is_reply {
            return Err(BridgeError::ReplyNotAllowed(
                "a reply handler cannot reply; send a new request instead",
            ));
        }
        if self.replied.get() {
            return Err(BridgeError::ReplyNotAllowed(
                "a request handler may reply at most once",
            ));
        }
        let sent = send()?;
        self.replied.set(true);
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_indices_follow_registration_order() {
        let mut t = HandlerTable::new();
        let a = t.register("a", |_| {});
        let b = t.register("b", |_| {});
        assert_eq!((a.index(), b.index()), (0, 1));
        assert_eq!(t.name(b), Some("b"));
        assert!(t.validate(b).is_ok());
        let mut other = HandlerTable::new();
        let foreign = other.register("x", |_| {});
        let _ = other.register("y", |_| {});
        let c = other.register("z", |_| {});
        assert!(t.validate(foreign).is_ok(), "index 0 exists in both tables");
        assert_eq!(
            t.validate(c),
            Err(BridgeError::UnknownHandler {
                index: 2,
                registered: 2
            })
        );
    }

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
