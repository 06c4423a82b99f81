//! Sending user active messages: to this rank itself, through a shared-memory ring to a rank of
//! this host, or over MPI.
//!
//! These are `impl MpiWorld` because a send spans the parts: the segments (kept), the rings,
//! the user queue, the credits and the send queue, and progress while a ring is full or a
//! credit is due.

use crate::conduit::shm_ring::Ring;
use crate::counters::WriteAck;
use crate::error::BridgeError;
use crate::message::{Args, Body, Message};

use super::calls::mpi_len;
use super::outgoing::{AmHead, OutBody};
use super::started::Started;
use super::wire::{F_PLACED, Header};
use super::world::MpiWorld;

impl MpiWorld {
    /// Sends a user AM (`head`: handler, reply flag, arguments, checked by the caller) with
    /// `body`; for a long message, returns the handle of its write.
    pub(crate) fn send_am(
        &self,
        in_handler: bool,
        target: usize,
        head: AmHead<'_>,
        body: OutBody<'_>,
    ) -> Result<Option<Started<WriteAck>>, BridgeError> {
        let (payload, long_offset) = match body {
            OutBody::Short => (&[][..], None),
            OutBody::Medium(p) => (p, None),
            OutBody::Long { payload, offset } => {
                self.check_range(target, offset, payload.len())?;
                (payload, Some(offset))
            }
        };
        if target == self.kept.rank {
            let mut handle = None;
            let body = match body {
                OutBody::Long { payload, offset } => {
                    let ack = self.own().write_counted(offset, payload)?;
                    handle = Some(Started::Done(ack));
                    Body::Long {
                        offset,
                        len: payload.len(),
                        ack,
                    }
                }
                OutBody::Short => Body::Short,
                OutBody::Medium(p) => Body::Medium(p.to_vec()),
            };
            let message = Message {
                source: self.kept.rank as u32,
                handler: head.handler,
                is_reply: head.is_reply,
                args: Args::new(head.args)?,
                body,
            };
            let mut st = self.job.st.borrow_mut();
            st.sends.count_sent();
            st.user.push(message, None);
            return Ok(handle);
        }
        if let Some(ring) = self.job.outboxes.ring(target) {
            return self.send_am_shm(target, ring, head, body);
        }
        mpi_len(payload.len())?;
        let spend = !head.is_reply && self.take_credit(in_handler, target);
        let mut h = Header::am(head, &body);
        let mut handle = None;
        if let Some(offset) = long_offset {
            let id = self.new_op();
            h.id = id;
            h.a = offset as u64;
            handle = Some(Started::Pending(id));
        }
        self.send_with_payload(target, h, head.args, payload, spend)?;
        Ok(handle)
    }

    /// Sends a user AM to a rank of this host through its inbox ring. A long payload is
    /// written straight into the target's segment first (as a put would be), so the message
    /// carries the write's acknowledgement and the handle is complete at once.
    pub(super) fn send_am_shm(
        &self,
        target: usize,
        ring: &Ring,
        head: AmHead<'_>,
        body: OutBody<'_>,
    ) -> Result<Option<Started<WriteAck>>, BridgeError> {
        let mut h = Header::am(head, &body);
        let mut handle = None;
        let inline = match body {
            OutBody::Short => &[][..],
            OutBody::Medium(p) => p,
            OutBody::Long { payload, offset } => {
                let m = self
                    .mapped(target)?
                    .expect("a rank with an outbox is mapped");
                let ack = m.write_counted(offset, payload)?;
                handle = Some(Started::Done(ack));
                h.flags |= F_PLACED;
                (h.a, h.c, h.d) = (offset as u64, ack.ec, ack.iwc);
                &[][..]
            }
        };
        let args = head.args;
        let len = h.encoded_len(args.len(), inline.len());
        // No room: the target has not taken our earlier messages yet. Take our own traffic
        // off the wire meanwhile (never user handlers), so two ranks filling each other's
        // rings both make room, even from inside handlers.
        self.wait_internal(|_| ring.try_push(len, |out| h.write(out, args, inline)));
        self.job.st.borrow_mut().sends.count_sent();
        Ok(handle)
    }

    /// Counts a user message whose handler has run.
    pub(crate) fn handled(&self) {
        self.job.st.borrow_mut().handled += 1;
    }
}
