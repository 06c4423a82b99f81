//! A running handler's view of its message and its one way to reply.

use std::cell::Cell;

use crate::counters::WriteAck;
use crate::endpoint::Endpoint;
use crate::error::BridgeError;
use crate::message::{HandlerId, MessageView, Payload};

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
    /// segment) sent nothing, so the handler may still reply correctly.
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
