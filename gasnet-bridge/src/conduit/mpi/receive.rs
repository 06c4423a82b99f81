//! Taking one message off the wire: the conduit's own requests and replies are served at once,
//! user AMs are queued to run in order.
//!
//! Serving never waits, so it needs no progress: it is done by a [`Server`], the parts a
//! message may reach borrowed from the world for one round (the job communicator, the host's
//! segments, the RMA window, the counting switch), on the protocol state.

use std::ffi::c_int;

use ::mpi::ffi;

use crate::atomic::AtomicResult;
use crate::counters::WriteAck;
use crate::error::BridgeError;
use crate::message::{Body, MAX_MEDIUM, Message};

use super::calls::{check, mpi_len, must, null_request, uint8};
use super::completions::Op;
use super::counting::CountingSwitch;
use super::payloads::{Inflight, Payloads};
use super::rma_window::RmaWindow;
use super::state::Protocol;
use super::window::HostSegments;
use super::wire::{
    B_LONG, B_MEDIUM, B_SHORT, F_PLACED, F_REPLY, F_SEPARATE, F_UNCOUNTED, Header, INLINE_MAX,
    K_ACK, K_AM, K_ATOMIC, K_ATOMIC_REPLY, K_COUNTING, K_COUNTING_ACK, K_CREDIT, K_GET, K_GET_NB,
    K_GET_REPLY, K_GETV, K_PUT, K_PUTV, TAG_GET, TAG_PAYLOAD, decode_op,
};

/// The payload of `h` carried inline in its message: the first `h.b` bytes of `inline`.
///
/// # Panics
/// Naming `source`, if the header announces more bytes than the message carries.
fn inline_payload<'a>(source: usize, h: &Header, inline: &'a [u8]) -> &'a [u8] {
    usize::try_from(h.b)
        .ok()
        .and_then(|len| inline.get(..len))
        .unwrap_or_else(|| {
            panic!(
                "malformed message from rank {source}: a payload of {} bytes announced where \
                 the message carries {}",
                h.b,
                inline.len()
            )
        })
}

/// A zeroed buffer for the payload of `h` that follows it on `TAG_PAYLOAD`, of the `h.b`
/// bytes the header announces. The length is checked before anything is allocated against
/// what a sender may send with such a header: a medium AM's payload at most [`MAX_MEDIUM`], a
/// get's data at most the segment, a vector request its piece list and, for a put, at most a
/// segment of data ([`crate::vector::max_request_bytes`]).
///
/// # Panics
/// Naming `source`, if the header announces more, or is not one of those.
fn payload_buffer(source: usize, h: &Header, segment_len: usize) -> Vec<u8> {
    let malformed = |what: &dyn std::fmt::Display| -> ! {
        panic!("malformed message from rank {source}: {what}")
    };
    let max = match (h.kind, h.body) {
        (K_AM, B_MEDIUM) => MAX_MEDIUM,
        (K_GET_REPLY, _) => segment_len,
        (K_PUTV | K_GETV, _) => {
            let (pieces, groups) = (h.a as usize, h.c as usize);
            crate::vector::max_request_bytes(pieces, groups, h.kind == K_PUTV, segment_len)
                .unwrap_or_else(|e| malformed(&e))
        }
        (kind, body) => malformed(&format_args!(
            "a separate payload on a message of kind {kind}, body {body}"
        )),
    };
    match usize::try_from(h.b) {
        Ok(len) if len <= max => vec![0u8; len],
        _ => malformed(&format_args!(
            "a payload of {} bytes announced, more than the {max} bytes a sender may send \
             with this header (kind {})",
            h.b, h.kind
        )),
    }
}

/// What serving a message reaches besides the protocol state, borrowed from the world.
#[derive(Clone, Copy)]
pub(super) struct Server<'w> {
    /// The job communicator answers go out on.
    pub(super) comm: ffi::MPI_Comm,
    /// The segments: the own one is written and read, a mapped rank needs no window notice.
    pub(super) host: &'w HostSegments,
    /// The RMA window, flushed toward a rank that switches counting on.
    pub(super) rma: Option<&'w RmaWindow>,
    /// The counting switch, which notices and answers update.
    pub(super) counting: &'w CountingSwitch,
}

impl Server<'_> {
    /// Acknowledges write `id` to `origin` with the own segment's `ack`.
    pub(super) fn send_ack(
        &self,
        st: &mut Protocol,
        origin: usize,
        id: u64,
        ack: WriteAck,
    ) -> Result<(), BridgeError> {
        let h = Header {
            kind: K_ACK,
            id,
            c: ack.ec,
            d: ack.iwc,
            ..Header::default()
        };
        st.send(self.comm, origin, h, &[], &[], false)
    }

    /// Serves a vector request from `origin` whose piece list (and packed bytes, for a put)
    /// is `body`: scatters, counts and acks `id`; or gathers and sends the data on `TAG_GET`.
    pub(super) fn serve_vector(
        &self,
        st: &mut Protocol,
        origin: usize,
        id: u64,
        (pieces, groups): (usize, usize),
        put: bool,
        body: &[u8],
    ) {
        let own = self.host.own();
        let (list, data) = crate::vector::decode_pieces(body, groups, pieces, own.segment.len())
            .unwrap_or_else(|e| panic!("malformed vector request from rank {origin}: {e}"));
        let malformed =
            |e: BridgeError| -> ! { panic!("malformed vector request from rank {origin}: {e}") };
        if put {
            let ack = crate::vector::scatter_counted(
                &own.segment,
                own.counting(),
                own.counters(),
                &list,
                data,
            )
            .unwrap_or_else(|e| malformed(e));
            must(self.send_ack(st, origin, id, ack));
        } else {
            // `decode_pieces` bounded the sum by the segment's size.
            let total = list.iter().map(|&(_, len)| len).sum();
            let mut out = vec![0u8; total];
            crate::vector::gather(&own.segment, &list, &mut out).unwrap_or_else(|e| malformed(e));
            let mut req = null_request();
            // SAFETY: `out` is moved into `st.sends` below without reallocation, so the bytes
            // MPI reads stay in place until the request completes and the pair is dropped.
            let rc = unsafe {
                ffi::MPI_Isend(
                    out.as_ptr().cast(),
                    must(mpi_len(out.len())),
                    uint8(),
                    origin as c_int,
                    TAG_GET,
                    self.comm,
                    &mut req,
                )
            };
            must(check(rc, "MPI_Isend(vector get data)"));
            st.sends.push(req, out);
        }
        st.handled += 1;
    }

    /// Sends `len` bytes of this rank's segment at `src` (a range `in_segment` checked) to
    /// `dest` on `tag`, straight from the segment, without waiting.
    fn send_segment_bytes(
        &self,
        st: &mut Protocol,
        src: *mut u8,
        len: usize,
        dest: usize,
        tag: c_int,
    ) {
        let mut req = null_request();
        // SAFETY: the range lies in this rank's segment (checked by the caller), which stays
        // valid until teardown, and teardown first waits for every send in `st.sends`.
        let rc = unsafe {
            ffi::MPI_Isend(
                src.cast_const().cast(),
                len as c_int,
                uint8(),
                dest as c_int,
                tag,
                self.comm,
                &mut req,
            )
        };
        must(check(rc, "MPI_Isend(segment bytes)"));
        st.sends.push(req, Vec::new());
    }

    /// Takes the credits a message from `source` returns, and owes one back if it spent one
    /// (sending the owed ones at once when half of [`CREDITS`](super::wire::CREDITS) are).
    #[inline]
    pub(super) fn account(&self, st: &mut Protocol, source: usize, h: &Header) {
        if st.credits.account(source, h) {
            let credit = Header {
                kind: K_CREDIT,
                ..Header::default()
            };
            must(st.send(self.comm, source, credit, &[], &[], false));
        }
    }

    /// Serves a counting notice from `target` (`on` or off, `counting.rs`): remembers it, and
    /// for a switch-on flushes this rank's window puts to `target` and answers.
    fn serve_counting_notice(&self, st: &mut Protocol, target: usize, on: bool) {
        if let Some(w) = self.rma {
            if !matches!(self.host.mapped(target), Ok(Some(_))) {
                self.counting.noticed(target, on);
            }
            if on && w.is_dirty(target) {
                must(w.flush(target));
            }
        }
        if on {
            let answer = Header {
                kind: K_COUNTING_ACK,
                ..Header::default()
            };
            must(st.send(self.comm, target, answer, &[], &[], false));
        }
        st.handled += 1;
    }

    /// Handles one message just received from `source`.
    #[inline]
    pub(super) fn take_off_wire(&self, st: &mut Protocol, source: usize, bytes: &[u8]) {
        let Some((h, args, inline)) = Header::decode(bytes) else {
            panic!(
                "malformed message of {} bytes from rank {source} (a different program?)",
                bytes.len()
            );
        };
        self.account(st, source, &h);
        let separate = h.flags & F_SEPARATE != 0;
        let own = self.host.own();
        let (offset, len) = (h.a as usize, h.b as usize);
        let in_segment = || {
            own.segment.check(offset, len).unwrap_or_else(|e| {
                panic!("malformed message from rank {source}: {e}");
            });
            // SAFETY (pointer arithmetic only): the range was checked just above.
            unsafe { own.segment.base().add(offset) }
        };
        match h.kind {
            K_AM => {
                let mut message = Message {
                    source: source as u32,
                    handler: h.handler,
                    is_reply: h.flags & F_REPLY != 0,
                    args,
                    body: Body::Short,
                };
                let mut wait = None;
                match h.body {
                    B_SHORT => {}
                    B_MEDIUM if separate => {
                        let mut buf = payload_buffer(source, &h, own.segment.len());
                        let req = Payloads::post(self.comm, buf.as_mut_ptr(), len, source);
                        let key = st.user.new_key();
                        st.payloads.push(Inflight::Medium {
                            req: must(req),
                            buf,
                            key,
                        });
                        wait = Some(key);
                    }
                    B_MEDIUM => message.body = Body::Medium(inline.to_vec()),
                    B_LONG if h.flags & F_PLACED != 0 => {
                        in_segment(); // checks the range
                        message.body = Body::Long {
                            offset,
                            len,
                            ack: WriteAck { ec: h.c, iwc: h.d },
                        };
                    }
                    B_LONG => {
                        let dst = in_segment();
                        if separate {
                            let req = Payloads::post(self.comm, dst, len, source);
                            let key = st.user.new_key();
                            st.payloads.push(Inflight::Long {
                                req: must(req),
                                origin: source,
                                id: h.id,
                                key,
                            });
                            wait = Some(key);
                            message.body = Body::Long {
                                offset,
                                len,
                                ack: WriteAck::default(),
                            };
                        } else {
                            let payload = inline_payload(source, &h, inline);
                            let ack = must(own.write_counted(offset, payload));
                            must(self.send_ack(st, source, h.id, ack));
                            message.body = Body::Long { offset, len, ack };
                        }
                    }
                    other => panic!("malformed message from rank {source}: AM body {other}"),
                }
                st.user.push(message, wait);
            }
            K_PUT => {
                let dst = in_segment();
                let counted = h.flags & F_UNCOUNTED == 0;
                if separate {
                    let req = Payloads::post(self.comm, dst, len, source);
                    st.payloads.push(Inflight::Put {
                        req: must(req),
                        origin: source,
                        id: h.id,
                        counted,
                    });
                } else {
                    let payload = inline_payload(source, &h, inline);
                    let ack = if counted {
                        must(own.write_counted(offset, payload))
                    } else {
                        must(own.segment.write(offset, payload));
                        WriteAck::default()
                    };
                    must(self.send_ack(st, source, h.id, ack));
                    st.handled += 1;
                }
            }
            K_PUTV | K_GETV => {
                let (pieces, groups, put) = (h.a as usize, h.c as usize, h.kind == K_PUTV);
                if separate {
                    let mut buf = payload_buffer(source, &h, own.segment.len());
                    let req = Payloads::post(self.comm, buf.as_mut_ptr(), len, source);
                    st.payloads.push(Inflight::Vector {
                        req: must(req),
                        buf,
                        origin: source,
                        id: h.id,
                        pieces,
                        groups,
                        put,
                    });
                } else {
                    let body = inline_payload(source, &h, inline);
                    self.serve_vector(st, source, h.id, (pieces, groups), put, body);
                }
            }
            K_GET => {
                self.send_segment_bytes(st, in_segment(), len, source, TAG_GET);
                st.handled += 1;
            }
            K_GET_NB => {
                let src = in_segment();
                let reply = Header {
                    kind: K_GET_REPLY,
                    id: h.id,
                    b: len as u64,
                    ..Header::default()
                };
                if len <= INLINE_MAX {
                    let mut bytes = vec![0u8; len];
                    must(own.segment.read(offset, &mut bytes));
                    must(st.send(self.comm, source, reply, &[], &bytes, false));
                } else {
                    let reply = Header {
                        flags: F_SEPARATE,
                        ..reply
                    };
                    must(st.send(self.comm, source, reply, &[], &[], false));
                    // The payload follows its header on TAG_PAYLOAD, as every separate
                    // payload does, so the initiator matches it in order.
                    self.send_segment_bytes(st, src, len, source, TAG_PAYLOAD);
                }
                st.handled += 1;
            }
            K_GET_REPLY => {
                if separate {
                    let mut buf = payload_buffer(source, &h, own.segment.len());
                    let req = Payloads::post(self.comm, buf.as_mut_ptr(), len, source);
                    st.payloads.push(Inflight::GetReply {
                        req: must(req),
                        buf,
                        id: h.id,
                    });
                } else {
                    let payload = inline_payload(source, &h, inline);
                    st.ops.complete(h.id, Op::Got(payload.to_vec()));
                    st.handled += 1;
                }
            }
            K_ATOMIC => {
                let word = own
                    .segment
                    .atomic_u64(offset)
                    .unwrap_or_else(|e| panic!("malformed atomic from rank {source}: {e}"));
                let op = decode_op(h.b, h.c, h.d)
                    .unwrap_or_else(|| panic!("malformed atomic from rank {source}: op {}", h.b));
                let (previous, wrote) = op.apply(word);
                let ack = if wrote {
                    own.count_write()
                } else {
                    WriteAck::default()
                };
                let reply = Header {
                    kind: K_ATOMIC_REPLY,
                    id: h.id,
                    a: previous,
                    b: wrote as u64,
                    c: ack.ec,
                    d: ack.iwc,
                    ..Header::default()
                };
                must(st.send(self.comm, source, reply, &[], &[], false));
                st.handled += 1;
            }
            K_ACK => {
                st.sends.acked(source);
                st.ops
                    .complete(h.id, Op::Ack(WriteAck { ec: h.c, iwc: h.d }));
                st.handled += 1;
            }
            K_ATOMIC_REPLY => {
                st.ops.complete(
                    h.id,
                    Op::Atomic(AtomicResult {
                        previous: h.a,
                        ack: (h.b != 0).then_some(WriteAck { ec: h.c, iwc: h.d }),
                    }),
                );
                st.handled += 1;
            }
            K_CREDIT => st.handled += 1,
            K_COUNTING => self.serve_counting_notice(st, source, h.a != 0),
            K_COUNTING_ACK => {
                self.counting.answered();
                st.handled += 1;
            }
            other => panic!("malformed message from rank {source}: kind {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::GROUP_BYTES;
    use std::panic::{UnwindSafe, catch_unwind};

    const SEG: usize = 1 << 20;

    /// The message of the panic `f` ends with.
    fn panic_of<R>(f: impl FnOnce() -> R + UnwindSafe) -> String {
        let payload = catch_unwind(f).err().expect("the call was refused");
        match payload.downcast::<String>() {
            Ok(s) => *s,
            Err(p) => p.downcast_ref::<&str>().unwrap_or(&"?").to_string(),
        }
    }

    fn header(kind: u8, body: u8, a: u64, b: u64, c: u64) -> Header {
        Header {
            kind,
            body,
            flags: F_SEPARATE,
            a,
            b,
            c,
            ..Header::default()
        }
    }

    /// Each separate payload's length is bounded by what its sender may send before a buffer
    /// is allocated for it (a `vec![0; 1 << 40]` would reserve a TiB), and a refusal names
    /// the sender; the largest lengths a sender may send are accepted.
    #[test]
    fn a_garbled_payload_length_is_refused_before_allocating_naming_the_sender() {
        let huge = 1u64 << 40;
        let refused = [
            (
                header(K_AM, B_MEDIUM, 0, huge, 0),
                "more than the 65536 bytes",
            ),
            (
                header(K_AM, B_MEDIUM, 0, MAX_MEDIUM as u64 + 1, 0),
                "more than the 65536 bytes",
            ),
            (
                header(K_GET_REPLY, 0, 0, SEG as u64 + 1, 0),
                "more than the 1048576 bytes",
            ),
            (header(K_PUTV, 0, huge, 64, 1), "pieces announced"),
            (header(K_GETV, 0, 4, huge, 2), "more than the 64 bytes"),
            (
                header(K_GETV, 0, 1, 64, 2),
                "2 groups of pieces announced for 1 pieces",
            ),
            (
                header(K_PUTV, 0, 4, (2 * GROUP_BYTES + SEG + 1) as u64, 2),
                "more than the 1048640 bytes",
            ),
            (
                header(K_PUT, 0, 0, 8, 0),
                "a separate payload on a message of kind 2",
            ),
        ];
        for (h, cause) in refused {
            let message = panic_of(|| payload_buffer(7, &h, SEG));
            assert!(
                message.starts_with("malformed message from rank 7: ") && message.contains(cause),
                "{h:?}: {message}"
            );
        }
        let accepted = [
            (header(K_AM, B_MEDIUM, 0, MAX_MEDIUM as u64, 0), MAX_MEDIUM),
            (header(K_GET_REPLY, 0, 0, SEG as u64, 0), SEG),
            (header(K_GETV, 0, 4, 64, 2), 64),
            (
                header(K_PUTV, 0, 4, (2 * GROUP_BYTES + SEG) as u64, 2),
                2 * GROUP_BYTES + SEG,
            ),
        ];
        for (h, len) in accepted {
            assert_eq!(payload_buffer(7, &h, SEG).len(), len, "{h:?}");
        }
    }

    /// An inline payload announced longer than the message is refused naming the sender
    /// (rather than a slice index panic that names no one).
    #[test]
    fn an_inline_length_beyond_the_message_is_refused_naming_the_sender() {
        let bytes = [1u8, 2, 3, 4];
        let h = |b: u64| Header {
            kind: K_PUT,
            b,
            ..Header::default()
        };
        assert_eq!(inline_payload(3, &h(3), &bytes), &[1, 2, 3]);
        for b in [5, u64::MAX] {
            let message = panic_of(|| inline_payload(3, &h(b), &bytes));
            assert_eq!(
                message,
                format!(
                    "malformed message from rank 3: a payload of {b} bytes announced where the \
                     message carries 4"
                )
            );
        }
    }
}
