//! Sending and receiving pgas messages in the format of `wire.rs`, counted for finalize's
//! termination detection; a whole message goes to the mechanism of its kind through the
//! dispatcher `launch` gives.

use gasnet_bridge::{MAX_ARGS, MAX_MEDIUM, Payload, Token};

use crate::runtime::{self, Runtime};
use crate::wire::{FRAGMENT, HEADER_WORDS, INTERNAL, Kind, fits, malformed};

/// What handles a whole message of a kind: `rpc`, `collectives` or `dist_object`.
pub(crate) type Deliver = fn(&Runtime, &Token<'_>, Kind, &[u64], &[u8]);

/// Sends one logical message to `target`.
///
/// # Panics
/// If `target` is not a rank or the header is too long (both are bugs of the caller).
pub(crate) fn send(rt: &Runtime, target: usize, kind: Kind, header: &[u64], payload: &[u8]) {
    assert!(header.len() <= HEADER_WORDS, "pgas message header too long");
    if let Err(e) = fits(target, payload.len()) {
        panic!("pgas: {e}");
    }
    let ep = rt.ep();
    let kind = kind as u64 | if rt.is_internal() { INTERNAL } else { 0 };
    let mut args = [0u64; MAX_ARGS];
    rt.sent.set(rt.sent.get() + 1);
    if payload.len() <= MAX_MEDIUM {
        args[0] = kind;
        args[1..1 + header.len()].copy_from_slice(header);
        ep.am_request_medium(target, rt.msg_handler, &args[..1 + header.len()], payload)
            .unwrap_or_else(|e| panic!("pgas: cannot send to rank {target}: {e}"));
        return;
    }
    args[0] = kind | FRAGMENT;
    args[1] = rt.next_message_id();
    args[2] = payload.len() as u64;
    args[4..4 + header.len()].copy_from_slice(header);
    let args = &mut args[..4 + header.len()];
    for (i, chunk) in payload.chunks(MAX_MEDIUM).enumerate() {
        args[3] = (i * MAX_MEDIUM) as u64;
        ep.am_request_medium(target, rt.msg_handler, args, chunk)
            .unwrap_or_else(|e| panic!("pgas: cannot send to rank {target}: {e}"));
    }
}

/// The bridge handler of every pgas message: reassembles it, then hands it to `handle` in the
/// sender's mode (internal or the application's).
pub(crate) fn receive(token: &Token<'_>, handle: Deliver) {
    runtime::with(|rt| {
        let source = token.source();
        let args = token.args();
        let bytes = match token.payload() {
            Payload::Medium(b) => b,
            Payload::None => &[][..],
            Payload::Long { .. } => malformed(source, "a long AM where pgas sends medium ones"),
        };
        let Some(&word) = args.first() else {
            malformed(source, "no kind word")
        };
        let internal = word & INTERNAL != 0;
        let kind = Kind::from_word(word & !(INTERNAL | FRAGMENT))
            .unwrap_or_else(|| malformed(source, &format!("unknown message kind {word}")));
        if word & FRAGMENT == 0 {
            return rt.in_mode(internal, || {
                deliver(rt, token, handle, kind, &args[1..], bytes)
            });
        }
        if args.len() < 4 {
            malformed(source, "a fragment with fewer than four wire arguments");
        }
        let header = &args[4..];
        if let Some(buf) = rt.reassembly.add(source, args[1], args[2], args[3], bytes) {
            rt.in_mode(internal, || deliver(rt, token, handle, kind, header, &buf));
        }
    })
}

/// Clears `Runtime::in_handler` when a handler returns or unwinds.
struct HandlerScope<'a>(&'a Runtime);

impl Drop for HandlerScope<'_> {
    fn drop(&mut self) {
        self.0.in_handler.set(false);
    }
}

fn deliver(
    rt: &Runtime,
    token: &Token<'_>,
    handle: Deliver,
    kind: Kind,
    header: &[u64],
    payload: &[u8],
) {
    rt.handled.set(rt.handled.get() + 1);
    rt.in_handler.set(true);
    let _scope = HandlerScope(rt);
    handle(rt, token, kind, header, payload);
}
