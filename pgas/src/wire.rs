//! How pgas messages ride on active messages: one bridge handler for all of them, a kind and a
//! few header words in the AM arguments, and payloads larger than a medium AM split into
//! fragments and reassembled at the target.
//!
//! Argument layout of a message that fits one medium AM (almost all): `[kind, header...]`, the
//! payload whole. A larger one travels as fragments, [`FRAGMENT`] set in the kind word:
//! `[kind, message id, total length, fragment offset, header...]`. The id is per sender, so
//! `(source, id)` names a message; fragments may arrive in any order. (Every message carried
//! the fragment words before; dropping them for whole messages keeps an rpc request or reply,
//! four words, in the first cache line of an smp inbox slot, which holds six.)
//!
//! A message sent inside a resilience runtime's internal scope (`resilience::internal`) has
//! [`INTERNAL`] set in its kind word, and is handled at the target in that scope too: an rpc
//! function it runs communicates unseen by the target's hook, and its request is not counted
//! as an incoming write. Every other message is handled as the application's traffic, even
//! when it arrives while the target waits inside an internal scope.

use std::cell::RefCell;
use std::collections::HashMap;

use gasnet_bridge::{MAX_ARGS, MAX_MEDIUM, Payload, Token};

use crate::runtime::{self, Runtime};

/// Header words a message can carry besides the wire's own four.
pub(crate) const HEADER_WORDS: usize = MAX_ARGS - 4;

/// Flag of the kind word: the message is a resilience runtime's own traffic.
pub(crate) const INTERNAL: u64 = 1 << 63;

/// Flag of the kind word: the message is one fragment of a message larger than a medium AM,
/// and the next three words are its id, total length and this fragment's offset.
pub(crate) const FRAGMENT: u64 = 1 << 62;

/// The kinds of pgas messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Kind {
    RpcRequest = 1,
    RpcReply = 2,
    Collective = 3,
    DistFetch = 4,
}

impl Kind {
    fn from_word(w: u64) -> Option<Kind> {
        Some(match w {
            1 => Kind::RpcRequest,
            2 => Kind::RpcReply,
            3 => Kind::Collective,
            4 => Kind::DistFetch,
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

/// Sends one logical message to `target`.
///
/// # Panics
/// If `target` is not a rank or the header is too long (both are bugs of the caller).
pub(crate) fn send(rt: &Runtime, target: usize, kind: Kind, header: &[u64], payload: &[u8]) {
    assert!(header.len() <= HEADER_WORDS, "pgas message header too long");
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

/// The bridge handler of every pgas message.
pub(crate) fn receive(token: &Token<'_>) {
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
            return rt.in_mode(internal, || deliver(rt, token, kind, &args[1..], bytes));
        }
        if args.len() < 4 {
            malformed(source, "a fragment with fewer than four wire arguments");
        }
        let (id, total, at) = (args[1], args[2] as usize, args[3] as usize);
        let header = &args[4..];
        if at.checked_add(bytes.len()).is_none_or(|end| end > total) {
            malformed(source, "a fragment beyond its message's length");
        }
        let complete = {
            let mut partial = rt.reassembly.partial.borrow_mut();
            let entry = partial
                .entry((source, id))
                .or_insert_with(|| (vec![0; total], 0));
            entry.0[at..at + bytes.len()].copy_from_slice(bytes);
            entry.1 += bytes.len();
            if entry.1 == total {
                partial.remove(&(source, id)).map(|(buf, _)| buf)
            } else {
                None
            }
        };
        if let Some(buf) = complete {
            rt.in_mode(internal, || deliver(rt, token, kind, header, &buf));
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

fn deliver(rt: &Runtime, token: &Token<'_>, kind: Kind, header: &[u64], payload: &[u8]) {
    rt.handled.set(rt.handled.get() + 1);
    rt.in_handler.set(true);
    let _scope = HandlerScope(rt);
    match kind {
        Kind::RpcRequest => crate::rpc::handle_request(rt, token, header, payload),
        Kind::RpcReply => crate::rpc::handle_reply(rt, token.source(), header, payload),
        Kind::Collective => crate::collectives::handle(rt, token.source(), header, payload),
        Kind::DistFetch => crate::dist_object::handle_fetch(rt, token, header),
    }
}

/// Ends the rank with an error naming the sender: bytes that do not follow the protocol are
/// never interpreted.
pub(crate) fn malformed(source: usize, what: &str) -> ! {
    panic!("malformed pgas message from rank {source}: {what}")
}
